"""The SQL implementation of :class:`~grounding_core.index.IndexSnapshot` (SPEC §3, §4, §7).

A :class:`SqlSnapshot` is ``replay(seq)`` read from the store's derived tables
(``grounding_core.derived``): every query filters rows by the seq ranges they hold for, so a
snapshot needs no rebuild, no copy of the corpus and no lock; it reads through the calling
thread's own connection. Its caches hold only what checks asked for (records of the doc_ids
looked up, summaries of the conflict keys checked, known-term verdicts) and are bounded; the
store hands them on to the next snapshot minus what the new events touched.

Every string from a draft that reaches SQL goes through :func:`sql_text`: a string holding a
NUL or a lone surrogate (possible in a JSON answer) cannot equal any indexed text, so the
lookup answers "nothing" without asking the database.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast

from . import memory_store
from .backend import FIELD_HEAD, Backend, Connection, text_hash
from .conflicts import SOURCES_PER_VALUE
from .derived import KEPT_SOURCES, parse_content
from .events import Event
from .evidence import EvidenceDocument, FrontMatter, parse_field_line
from .images import MEASUREMENT_VERSION, ImageDocument, Measurement, is_image_path
from .index import (
    ConflictKey,
    IndexSnapshot,
    IndexStats,
    KeyedLine,
    KeySummary,
    LineIdentity,
    ParseSettings,
    SearchHit,
    ValueGroup,
    VersionRecord,
    VocabularyTerm,
)
from .memory import MemoryEntry
from .model import TupleView
from .text import VALUE_TRAILING_PUNCTUATION, line_is, normalize, split_lines

T = TypeVar("T")

CACHE_ENTRIES = 4096
"""Entries per snapshot cache (versions by doc_id, key summaries, term verdicts)."""

DOCUMENT_CACHE_CHARS = 8_000_000
"""Parsed documents kept per store, by text size in code points (a parsed document holds
its text about three times over: text, lines, field lines). It must hold every document a
draft cites: 2 M code points was less than the 100 Debian copyright files one draft cites
(2.5 M), and every check parsed them again (check_draft 10 -> 197 ms CPU)."""

LINE_CACHE_CHARS = 1_000_000
"""Single cited lines kept per store, by size in code points (:meth:`DocumentCache.get_line`;
a draft's claims read their cited lines, not whole versions: ``SqlSnapshot.line_text``).
A 100-citation draft of Debian copyright lines holds about 5,000."""

GRAM_CHUNK = 20_000

SHORT_SENTENCE = 2000
"""Sentences up to this many code points have their candidate terms filtered by SQLite."""
"""Anchors sent per candidate-term query (a 1 MB sentence has up to 2M distinct grams)."""

PUNCTUATION = VALUE_TRAILING_PUNCTUATION
TOP = "\U0010ffff"


CHANGED_PARSE = 64
"""Changed contents up to which finding what changed parses their documents (beyond: one
pass over ``field_lines``)."""
CHANGED_CHUNK = 10_000
"""Content ids per ``IN`` list in that pass (SQLite allows 32,766 parameters)."""
CONTENT_CHUNK = 256
"""Content ids per query of a key summary's source documents (the list is padded to it)."""
CONTENT_DOCUMENTS = ("SELECT content_id, doc_id, version, path FROM versions"
                     f" WHERE content_id IN ({', '.join('?' for _ in range(CONTENT_CHUNK))})")
MAX_SEARCH_TERMS = 64
"""Distinct whitespace-separated terms a search uses (the rest are ignored)."""
MAX_SEARCH_GRAMS = 256
"""Distinct trigrams an ``any_term`` search ORs together (FTS5 expression depth stays bounded)."""


def sql_text(text: str) -> str | None:
    """``text`` when it can reach SQL; None when it holds NUL or a lone surrogate, which no
    indexed string holds (evidence with NUL is unreadable; indexed text is valid UTF-8).
    """
    if "\x00" in text:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text


def search_text(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by spaces (search terms split there)."""
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join(" " if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def _date(value: object) -> dt.date | None:
    return dt.date.fromisoformat(str(value)) if value else None


class DocumentCache:
    """Parsed documents by content_id (or any key), least recently used first out, bounded by
    text size; and single lines of contents (:meth:`get_line`), bounded by their size too.

    Contents never change (a content_id is one import event), so entries never go stale.
    Thread-safe.
    """

    def __init__(self, limit: int = DOCUMENT_CACHE_CHARS, line_limit: int = LINE_CACHE_CHARS) -> None:
        self.limit = limit
        self.line_limit = line_limit
        self._docs: OrderedDict[Hashable, EvidenceDocument] = OrderedDict()
        self._lines: OrderedDict[tuple[Hashable, int], str] = OrderedDict()
        self._size = 0
        self._line_size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of parsed documents held (cached single lines not counted)."""
        with self._lock:
            return len(self._docs)

    def get_line(self, content_id: Hashable, line: int) -> str | None:
        """1-based ``line`` of a content when it is cached (a parsed document's, or one put
        with :meth:`put_line`), else None.
        """
        with self._lock:
            doc = self._docs.get(content_id)
            if doc is not None:
                return doc.lines[line - 1] if 0 < line <= len(doc.lines) else None
            return self._lines.get((content_id, line))

    def put_line(self, content_id: Hashable, line: int, text: str) -> None:
        """Remember one line of a content, least recently put first out (a line longer than
        the whole bound is not kept).
        """
        size = len(text) + 1
        if size > self.line_limit:
            return
        with self._lock:
            old = self._lines.pop((content_id, line), None)
            if old is not None:
                self._line_size -= len(old) + 1
            self._lines[(content_id, line)] = text
            self._line_size += size
            while self._line_size > self.line_limit:
                _, dropped = self._lines.popitem(last=False)
                self._line_size -= len(dropped) + 1

    def get(self, content_id: Hashable) -> EvidenceDocument | None:
        with self._lock:
            doc = self._docs.get(content_id)
            if doc is not None:
                self._docs.move_to_end(content_id)
            return doc

    def discard(self, content_id: Hashable) -> None:
        with self._lock:
            doc = self._docs.pop(content_id, None)
            if doc is not None:
                self._size -= len(doc.text)

    def put(self, content_id: Hashable, doc: EvidenceDocument) -> None:
        with self._lock:
            if content_id in self._docs:
                return
            self._docs[content_id] = doc
            self._size += len(doc.text)
            while self._size > self.limit and len(self._docs) > 1:
                _, old = self._docs.popitem(last=False)
                self._size -= len(old.text)

    def clear(self) -> None:
        with self._lock:
            self._docs.clear()
            self._lines.clear()
            self._size = self._line_size = 0


class SnapshotSource(Protocol):
    """What a snapshot needs of its store."""

    backend: Backend
    settings: ParseSettings
    documents: DocumentCache
    derivation: int
    measurements: MeasurementCache


class MeasurementCache:
    """Image measurements by sha256 (SPEC §12), least recently used first out, at most
    ``limit`` entries. Thread-safe; entries never go stale (a sha256 names fixed bytes).
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._items: OrderedDict[str, Measurement] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sha256: str) -> Measurement | None:
        with self._lock:
            found = self._items.get(sha256)
            if found is not None:
                self._items.move_to_end(sha256)
            return found

    def put(self, sha256: str, measurement: Measurement) -> None:
        with self._lock:
            self._items[sha256] = measurement
            while len(self._items) > self.limit:
                self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Summary:
    """A key's values without the cited-first ordering (first sources in identity order), in
    order of first source.
    """

    total: int
    values: tuple[ValueGroup, ...]
    plain: list[KeySummary] = field(default_factory=list, compare=False)
    """The :class:`KeySummary` without cited lines, made on first use (one object per key)."""
    listed: list[dict[str, set[int]]] = field(default_factory=list, compare=False)
    """doc_id -> the indexes of the values listing a source of it, found on first use
    (:meth:`renumbered`)."""

    def renumbered(self, versions: Mapping[str, int]) -> _Summary:
        """The summary with the sources of the documents in ``versions`` (doc_id -> version)
        at that version: what it is after those documents' lines moved, unchanged, to a new
        version (one active content per doc_id, so the sources keep their order).
        """
        if not self.listed:  # where each document is listed, found once (a key may have thousands of values)
            where: dict[str, set[int]] = {}
            for i, group in enumerate(self.values):
                for kl in group.sources:
                    where.setdefault(kl.doc_id, set()).add(i)
            self.listed.append(where)
        groups = sorted(set().union(*(self.listed[0].get(doc_id, ()) for doc_id in versions)))
        if not groups:
            return self
        values = list(self.values)
        for i in groups:
            group = values[i]
            values[i] = group._replace(sources=tuple(
                kl._replace(version=versions[kl.doc_id]) if kl.doc_id in versions else kl for kl in group.sources))
        renamed = _Summary(self.total, tuple(values))
        renamed.listed.append(self.listed[0])  # the same documents in the same groups
        return renamed


@dataclass
class SnapshotCaches:
    """Bounded caches of one snapshot; :meth:`inherit` passes them to a later snapshot."""

    versions: dict[str, dict[int, VersionRecord]] = field(default_factory=dict)
    summaries: dict[tuple[ConflictKey, dt.date, int], _Summary] = field(default_factory=dict)
    terms: dict[tuple[str, dt.date], bool] = field(default_factory=dict)
    known: dict[tuple[str, dt.date], str | None] = field(default_factory=dict)
    memos: dict[Hashable, object] = field(default_factory=dict)
    """:meth:`SqlSnapshot.memo` values (never inherited: they may depend on anything)."""
    key_memos: dict[Hashable, tuple[tuple[ConflictKey, dt.date], frozenset[str], object]] = field(
        default_factory=dict)
    """:meth:`SqlSnapshot.memo` values that depend on one key summary and some documents only
    (``of_summary``): inherited while neither changed."""

    def inherit(self, doc_ids: set[str], keys: set[ConflictKey] | None,
                terms: set[str] | None = None,
                renumbered: Mapping[ConflictKey, Mapping[str, int]] | None = None) -> SnapshotCaches:
        """The caches for a later snapshot: entries of ``doc_ids``, ``keys`` and ``terms``
        dropped, and known-term answers for sentences holding a changed term (``keys`` None:
        every summary and term answer dropped). ``renumbered``: keys whose lines only moved to
        a new version of some documents (same lines, same texts; doc_id -> the new version):
        their summaries are kept with those sources renamed.
        """
        # Reader threads still add entries to these caches while a scan builds the next
        # snapshot: each is copied first (list(dict.items()) runs in C, holding the GIL), never
        # iterated live ("dictionary changed size during iteration" failed a scan).
        versions = {d: v for d, v in list(self.versions.items()) if d not in doc_ids}
        if keys is None or terms is None:
            return SnapshotCaches(versions, {}, {})
        moved = renumbered or {}
        held_summaries = list(self.summaries.items())
        summaries = {k: (v if k[0] not in moved else v.renumbered(moved[k[0]]))
                     for k, v in held_summaries if k[0] not in keys}
        # A renumbered key's memo stays only while its summary of SPEC §7.4's sources per value
        # is known not to name a moved document (a memo that names none is the same value).
        renamed = {k[:2] for k, v in held_summaries if k[0] in moved and summaries.get(k) is not v}
        summarised = {k[:2] for k, _ in held_summaries if k[0] in moved and k[2] >= SOURCES_PER_VALUE}
        key_memos = {m: held for m, held in list(self.key_memos.items())
                     if held[0][0] not in keys and held[1].isdisjoint(doc_ids)
                     and (held[0][0] not in moved or (held[0] in summarised and held[0] not in renamed))}
        verdicts = {k: v for k, v in list(self.terms.items()) if k[0] not in terms}
        changed = [t for t in terms if len(t) >= 2]
        known = {k: v for k, v in list(self.known.items()) if not any(t in k[0] for t in changed)}
        return SnapshotCaches(versions, summaries, verdicts, known, key_memos=key_memos)


def _put(cache: dict, key: object, value: object) -> None:  # type: ignore[type-arg]
    if len(cache) >= CACHE_ENTRIES:
        cache.clear()
    cache[key] = value


class SqlSnapshot(IndexSnapshot):
    """``replay(seq)`` of one store, read from its derived tables (see module docstring)."""

    def __init__(self, source: SnapshotSource, seq: int, caches: SnapshotCaches | None = None) -> None:
        self._source = source
        self.seq = seq
        self.generation = seq * 1_000_003 + source.derivation
        self.settings = source.settings
        self._caches = caches or SnapshotCaches()
        self._meta = tuple(source.settings.meta_fields)
        self._search_complete = False
        self._reading = threading.local()

    @property
    def caches(self) -> SnapshotCaches:
        return self._caches

    # -- plumbing ------------------------------------------------------------------------------

    def _conn(self) -> Connection:
        return self._source.backend.reader()

    def _rows(self, sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
        return self._conn().execute(sql, tuple(params)).fetchall()

    def _active(self, today: dt.date, alias: str = "v") -> tuple[str, tuple[object, ...]]:
        """SQL condition: ``alias`` (a versions row) is active at (seq, today) (SPEC §3)."""
        n, day = self.seq, today.isoformat()
        return (f"{alias}.active_from <= ? AND ({alias}.active_to IS NULL OR {alias}.active_to > ?)"
                f" AND ({alias}.effective_from IS NULL OR {alias}.effective_from <= ?)"
                f" AND ({alias}.effective_until IS NULL OR {alias}.effective_until >= ?)",
                (n, n, day, day))

    def _not_meta(self, alias: str = "f") -> tuple[str, tuple[object, ...]]:
        if not self._meta:
            return "1 = 1", ()
        return f"{alias}.field NOT IN ({', '.join('?' for _ in self._meta)})", self._meta

    def memo(self, key: Hashable, compute: Callable[[], T],
             of_summary: tuple[ConflictKey, dt.date] | None = None, doc_ids: Iterable[str] = ()) -> T:
        if of_summary is not None:
            key_memos = self._caches.key_memos
            held = key_memos.get(key)
            if held is not None:
                return cast(T, held[2])
            value = compute()
            _put(key_memos, key, (of_summary, frozenset(doc_ids), value))
            return value
        memos = self._caches.memos
        if key in memos:
            return cast(T, memos[key])
        value = compute()
        _put(memos, key, value)
        return value

    @contextmanager
    def reading(self) -> Iterator[IndexSnapshot]:
        """One read transaction for the duration (re-entrant per thread): a rebuild of the
        derived tables (a settings change) is never seen half-done.
        """
        depth = getattr(self._reading, "depth", 0)
        if depth:
            self._reading.depth = depth + 1
            try:
                yield self
            finally:
                self._reading.depth = depth
            return
        with self._source.backend.read(self._conn()):
            self._reading.depth = 1
            try:
                yield self
            finally:
                self._reading.depth = 0

    # -- versions ------------------------------------------------------------------------------

    def versions(self, doc_id: str) -> Mapping[int, VersionRecord]:
        cached = self._caches.versions.get(doc_id)
        if cached is not None:
            return cached
        safe = sql_text(doc_id)
        found = self._load_versions(safe) if safe is not None else {}
        _put(self._caches.versions, doc_id, found)
        return found

    def _load_versions(self, doc_id: str) -> dict[int, VersionRecord]:
        n = self.seq
        rows = self._rows(
            "SELECT v.content_id, v.version, v.sha256, v.path, v.declared, v.status,"
            " v.effective_from, v.effective_until, v.title, v.subject, v.line_count,"
            " v.first_sha256, v.current_to, v.front_end,"
            " (SELECT r.seq FROM revocations AS r WHERE r.content_id = v.content_id AND r.seq <= ?"
            "  ORDER BY r.seq DESC LIMIT 1),"
            " (SELECT r.reason FROM revocations AS r WHERE r.content_id = v.content_id AND r.seq <= ?"
            "  ORDER BY r.seq DESC LIMIT 1)"
            " FROM versions AS v WHERE v.doc_id = ? AND v.content_id <= ? ORDER BY v.version, v.content_id",
            (n, n, doc_id, n))
        history: dict[int, list[str]] = {}
        out: dict[int, VersionRecord] = {}
        for r in rows:
            version = int(str(r[1]))
            history.setdefault(version, []).append(str(r[2]))
            current_to = r[12]
            if current_to is not None and int(str(current_to)) <= n:
                continue  # replaced by a later import of this version
            content_id = int(str(r[0]))
            revoked_at = r[14]
            shas = history[version]
            previous: list[str] = []
            for old, new in zip(shas, shas[1:], strict=False):
                if old != new and old not in previous:
                    previous.append(old)
            out[version] = VersionRecord(
                doc_id=doc_id, version=version, sha256=str(r[2]), path=str(r[3]),
                declared=bool(r[4]), content_id=content_id, revoked=revoked_at is not None,
                reason=str(r[15]) if revoked_at is not None else "",
                seq=max(content_id, int(str(revoked_at)) if revoked_at is not None else 0),
                previous_shas=tuple(previous), status=str(r[5]),
                effective_from=_date(r[6]), effective_until=_date(r[7]), title=str(r[8]),
                subject=str(r[9]) or None, line_count=int(str(r[10])), first_sha256=str(r[11]),
                front_end=int(str(r[13])),
            )
        return out

    def document(self, record: VersionRecord) -> EvidenceDocument:
        """The version's text as a parsed document, from the bounded cache or the log.

        A record read from this store carries its front-matter facts, so the document is
        rebuilt from them and the split lines without running YAML again; any other record
        is parsed from its text (:func:`grounding_core.derived.parse_content`).
        """
        docs = self._source.documents
        doc = docs.get(record.content_id)
        if doc is None:
            row = self._conn().execute(
                "SELECT seq, kind, doc_id, version, sha256, path, text, declared, reason FROM events"
                " WHERE seq = ?", (record.content_id,)).fetchone()
            if row is None or row[1] != "import":
                raise KeyError(f"{record.doc_id}@{record.version}: no content {record.content_id}")
            event = Event(int(row[0]), "import", str(row[2]), int(row[3]), str(row[4]), str(row[5]),
                          str(row[6]), bool(row[7]))
            if record.front_end >= 0 and record.line_count >= 0 and not is_image_path(event.path):
                settings = self.settings
                front = FrontMatter(
                    end_line=record.front_end, doc_id=record.doc_id,
                    subject=record.subject, title=record.title or None,
                    version=record.version if record.declared else None, status=record.status,
                    effective_from=record.effective_from, effective_until=record.effective_until)
                doc = EvidenceDocument(
                    path=event.path, sha256=event.sha256, text=event.text, lines=tuple(split_lines(event.text)),
                    front=front, doc_id=record.doc_id, separators=settings.separators,
                    subject_fields=settings.subject_fields)
            else:
                doc = parse_content(event, self.settings)
            docs.put(record.content_id, doc)
        return doc

    def line_text(self, record: VersionRecord, line: int, expect: str | None = None) -> str | None:
        """One line of a version without parsing it: a cached document's or cached line, else,
        when ``expect`` is given, the content's UTF-8 bytes searched for it (:func:`line_is`:
        ``bytes.find`` and ``bytes.count``, no decode, no split; the line is then cached);
        else, or when ``expect`` is not that line, the parsed :meth:`document` (cached).

        A record that knows its line count answers None past it without reading anything.
        """
        if record.line_count >= 0 and not 0 < line <= record.line_count:
            return None
        docs = self._source.documents
        found = docs.get_line(record.content_id, line)
        if found is not None:
            return found
        if expect and record.line_count >= 0 and not is_image_path(record.path):
            want = sql_text(expect)
            if want is not None and "\n" not in want and "\r" not in want:
                data = self._source.backend.content_utf8(self._conn(), record.content_id)
                if data is not None and line_is(data, line, want.encode("utf-8")):
                    docs.put_line(record.content_id, line, want)
                    return want
        return super().line_text(record, line)

    def record_for_path(self, path: str) -> VersionRecord | None:
        safe = sql_text(path)
        if safe is None:
            return None
        n = self.seq
        rows = self._rows(
            "SELECT DISTINCT doc_id FROM versions WHERE path = ? AND content_id <= ?"
            " AND (current_to IS NULL OR current_to > ?)", (safe, n, n))
        best: VersionRecord | None = None
        for (doc_id,) in rows:
            for record in self.versions(str(doc_id)).values():
                if record.path != path:
                    continue
                rank = (record.reason != "deleted", record.content_id)
                if best is None or rank > (best.reason != "deleted", best.content_id):
                    best = record
        return best

    # -- documents by name ---------------------------------------------------------------------

    def doc_ids(self, prefix: str = "", limit: int | None = None) -> list[str]:
        safe = sql_text(prefix)
        if safe is None:
            return []
        sql = "SELECT DISTINCT doc_id FROM versions WHERE content_id <= ?"
        params: list[object] = [self.seq]
        if safe:
            sql += " AND doc_id >= ?"
            params.append(safe)
            upper = _upper(safe)
            if upper is not None:
                sql += " AND doc_id < ?"
                params.append(upper)
        sql += " ORDER BY doc_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [str(r[0]) for r in self._rows(sql, params)]

    # -- field lines and conflict keys ---------------------------------------------------------

    def _key(self, key: ConflictKey) -> tuple[int, int, str, str] | None:
        """(fh, sh, field, subject text) of a key as stored, or None when no line can have it
        (a meta field, text that never reaches SQL, or the subject ``""``, which SPEC §3
        excludes).
        """
        subject, name = key
        field_name, subject_text = sql_text(name), sql_text(subject or "")
        if field_name is None or subject_text is None or (subject is not None and not subject):
            return None
        if self.is_meta_field(name):
            return None
        return text_hash(field_name), text_hash(subject_text), field_name, subject_text

    KEY_WHERE = "f.fh = ? AND f.sh = ? AND f.field = ? AND COALESCE(f.subject, v.subject) = ?"
    """A key's lines: an image attribute's subject is its own (``SUBJECT#rN``), a text line's is
    its version's."""

    def key_lines(self, key: ConflictKey, today: dt.date) -> list[KeyedLine]:
        stored = self._key(key)
        if stored is None:
            return []
        active, params = self._active(today)
        rows = self._rows(
            "SELECT COALESCE(f.value, f.norm), v.doc_id, v.version, f.line, v.path"
            " FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE {self.KEY_WHERE} AND {active} ORDER BY v.doc_id, v.version, f.line",
            (*stored, *params))
        subject, name = key
        return [KeyedLine(str(r[1]), int(str(r[2])), int(str(r[3])), subject, name, str(r[0]), str(r[4]))
                for r in rows]

    def _summary(self, key: ConflictKey, today: dt.date, per_value: int) -> _Summary:
        cache_key = (key, today, per_value)
        cached = self._caches.summaries.get(cache_key)
        if cached is not None:
            return cached
        stored = self._key(key)
        if stored is None:
            summary = _Summary(0, ())
        else:
            summary = self._read_summary(key, stored, today, per_value)
        _put(self._caches.summaries, cache_key, summary)
        return summary

    def _read_summary(self, key: ConflictKey, stored: tuple[int, int, str, str], today: dt.date,
                      per_value: int) -> _Summary:
        """The key's summary from ``key_values`` when it answers this snapshot
        (:meth:`_kept_summary`), else from every active line (:meth:`_lines_summary`).
        """
        if per_value <= KEPT_SOURCES and not stored[3]:  # a key without a subject (derived.KEPT_SQL)
            conn = self._conn()
            with self._source.backend.read(conn):  # the head test and the rows: one committed state
                if self._head_answers(conn):
                    return self._kept_summary(conn, key, stored, today, per_value)
        return self._lines_summary(key, stored, today, per_value)

    HEAD_TEST = ("SELECT 1 FROM versions WHERE active_from > ? UNION ALL"
                 " SELECT 1 FROM versions WHERE active_to > ?")

    def _head_answers(self, conn: Connection) -> bool:
        """Whether ``key_values`` (the summaries of the head of the log) holds this snapshot's:
        no content became active or stopped being active after ``seq`` (two seeks on the
        partial indexes of ``versions``). Later events that change no activity (memory
        events, archives, unchanged rescans) leave the answer yes.
        """
        return conn.execute(self.HEAD_TEST + " LIMIT 1", (self.seq, self.seq)).fetchone() is None

    def _kept_summary(self, conn: Connection, key: ConflictKey, stored: tuple[int, int, str, str],
                      today: dt.date, per_value: int) -> _Summary:
        """SPEC §7.4 from the rows kept at write time (``key_values``: the undated lines, already
        counted per value with their first sources, in order of first source) and the key's
        dated lines read live (``dated_lines``: active or not depending on ``today``), merged.
        Reads one row per value, never one per line.
        """
        name = stored[2]
        rows = conn.execute(
            "SELECT norm, spelled, lines, sources FROM key_values WHERE fh = ? AND sh = ? AND field = ?"
            " AND subject = ? ORDER BY first_doc, first_version, first_line", stored).fetchall()
        active, params = self._active(today)
        dated = conn.execute(
            "SELECT d.norm, d.value, v.doc_id, v.version, d.line, v.path"
            " FROM dated_lines AS d JOIN versions AS v ON v.content_id = d.content_id"
            f" WHERE d.fh = ? AND d.sh = ? AND d.field = ? AND d.subject = ? AND {active}",
            (*stored, *params)).fetchall()
        subject, _ = key
        if dated:  # a key with dated lines: its kept values merged with them, sources made now
            return _merged_summary(subject, name, rows, dated, max(per_value, 1), per_value)
        values = []
        total = 0
        group = tuple.__new__  # a ValueGroup without its generated __new__'s frame (6,900 on Debian)
        for norm, spelled, lines, text in rows:
            first = norm if spelled is None else spelled
            total += lines
            values.append(group(ValueGroup, (norm, first, lines, KeptSources(
                lines if lines < per_value else per_value, (text, subject, name, first)))))
        return _Summary(total, tuple(values))

    def _lines_summary(self, key: ConflictKey, stored: tuple[int, int, str, str], today: dt.date,
                       per_value: int) -> _Summary:
        """Every active line of the key, in (doc_id, version, line) order, grouped here: each
        value's count, its first spelling and its first ``per_value`` sources.

        One index range of the key joined to ``versions`` and sorted by SQLite, reading only
        what grouping needs per row (value, content id, line); rows past a value's first
        sources become a count only. The documents of the sources kept (doc_id, version,
        path) are read after, once per content id (a versions row never changes them, so a
        second statement reads the same). A window function per value
        (``ROW_NUMBER`` / ``COUNT`` over ``PARTITION BY norm``) sorted the key twice and cost
        three times as much on Debian's 15,000-line keys; reading doc_id and path on every
        row cost a fifth more (BENCHMARKS.md).
        """
        active, params = self._active(today)
        conn = self._conn()
        rows = conn.execute(
            "SELECT f.norm, f.value, f.content_id, f.line"
            " FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE {self.KEY_WHERE} AND {active} ORDER BY v.doc_id, v.version, f.line",
            (*stored, *params))
        keep = max(per_value, 1)  # one source per value at least: its spelling
        counts: dict[str, int] = {}
        firsts: dict[str, list[tuple[str, str | None, int, int]]] = {}
        count_of = counts.get
        for row in rows:
            norm = row[0]
            seen = count_of(norm)
            if seen is None:
                counts[norm] = 1
                firsts[norm] = [row]
            else:
                counts[norm] = seen + 1
                if seen < keep:
                    firsts[norm].append(row)
        cids = sorted({row[2] for group in firsts.values() for row in group[:per_value]})
        documents: dict[int, tuple[str, int, str]] = {}
        for start in range(0, len(cids), CONTENT_CHUNK):
            # padded to one statement text, which the connection prepares once (-1 is no content)
            chunk = cids[start:start + CONTENT_CHUNK]
            chunk += [-1] * (CONTENT_CHUNK - len(chunk))
            for cid, doc_id, version, path in conn.execute(CONTENT_DOCUMENTS, chunk):
                documents[cid] = (doc_id, version, path)
        subject, name = key
        values = []
        for norm, group in firsts.items():
            sources = []
            for _norm, value, cid, line in group[:per_value]:
                doc_id, version, path = documents[cid]
                sources.append(KeyedLine(doc_id, version, line, subject, name, norm if value is None else value, path))
            spelled = group[0][1]
            values.append(ValueGroup(norm, norm if spelled is None else spelled, counts[norm], tuple(sources)))
        return _Summary(sum(counts.values()), tuple(values))

    def key_summary(self, key: ConflictKey, today: dt.date, cited: Iterable[LineIdentity] = (),
                    per_value: int = 5) -> KeySummary:
        summary = self._summary(key, today, per_value)
        first: dict[str, list[KeyedLine]] = {}
        for identity in sorted(set(cited)):
            kl = self._cited_line(key, identity, today)
            if kl is not None:
                first.setdefault(normalize(kl.value), []).append(kl)
        if not summary.plain:  # the summary without cited lines, built once per key
            summary.plain.append(KeySummary(key, summary.total, summary.values))
        plain = summary.plain[0]
        if not first:
            return plain
        values = list(plain.values)
        pending = len(first)  # values holding a cited line; the rest are left as they are
        for i, group in enumerate(values):
            mine = first.get(group.normalized)
            if mine:
                ids = {kl.identity for kl in mine}
                ordered = (mine + [kl for kl in group.sources if kl.identity not in ids])[:per_value]
                values[i] = group._replace(sources=tuple(ordered))
                pending -= 1
                if not pending:
                    break
        return KeySummary(key, summary.total, tuple(values))

    def _cited_line(self, key: ConflictKey, identity: LineIdentity, today: dt.date) -> KeyedLine | None:
        """The cited line as a line of ``key``, when it is one of its active lines."""
        doc_id, version, line = identity
        record = self.record(doc_id, version)
        if record is None or not self.is_active(record, today):
            return None
        if is_image_path(record.path) or record.front_end < 0:
            doc = self.document(record)
            if isinstance(doc, ImageDocument):  # an image attribute: its region's own subject
                fl = doc.field_lines.get(line)
                if fl is None or (doc.line_subject(line), fl.field) != key:
                    return None
                return KeyedLine(doc_id, version, line, key[0], fl.field, fl.value, record.path)
            front_end = doc.front.end_line
        else:
            front_end = record.front_end
        # the claim check read this line already (SqlSnapshot.line_text's cache): no text is parsed
        text = None if line <= front_end else self.line_text(record, line)
        fl = None if text is None else parse_field_line(text, self.settings.separators)
        if fl is None or (record.subject, fl.field) != key:
            return None
        return KeyedLine(doc_id, version, line, record.subject, fl.field, fl.value, record.path)

    def subjects_with_field(self, field_name: str, today: dt.date) -> list[str | None]:
        """Skip-scan over the field's subject hashes (one seek each, then an EXISTS)."""
        safe = sql_text(field_name)
        if safe is None or self.is_meta_field(field_name):
            return []
        fh = text_hash(safe)
        conn = self._conn()
        subjects: set[str] = set()
        row = conn.execute("SELECT MIN(sh) FROM field_lines WHERE fh = ?", (fh,)).fetchone()
        while row is not None and row[0] is not None:
            sh = int(row[0])
            for (subject,) in conn.execute(
                    "SELECT DISTINCT COALESCE(f.subject, v.subject) FROM field_lines AS f"
                    " JOIN versions AS v ON v.content_id = f.content_id"
                    " WHERE f.fh = ? AND f.sh = ? AND f.field = ?", (fh, sh, safe)).fetchall():
                if self._any_active(today, self.KEY_WHERE, (fh, sh, safe, str(subject))):
                    subjects.add(str(subject))
            row = conn.execute("SELECT MIN(sh) FROM field_lines WHERE fh = ? AND sh > ?", (fh, sh)).fetchone()
        return [s or None for s in sorted(subjects)]

    def has_field(self, field_name: str, today: dt.date) -> bool:
        safe = sql_text(field_name)
        if safe is None or self.is_meta_field(field_name):
            return False
        return self._any_active(today, "f.fh = ? AND f.field = ?", (text_hash(safe), safe))

    def _any_active(self, today: dt.date, where: str, params: tuple[object, ...]) -> bool:
        active, active_params = self._active(today)
        return self._conn().execute(
            "SELECT 1 FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE {where} AND {active} LIMIT 1", (*params, *active_params)).fetchone() is not None

    def field_names(self, prefix: str, today: dt.date, limit: int = 200) -> list[str]:
        """Field names by their first 8 code points (``fields.head``), then filtered."""
        safe = sql_text(prefix)
        if safe is None:
            return []
        head = safe[:FIELD_HEAD]
        sql = "SELECT field FROM fields WHERE head >= ?"
        params: list[object] = [head]
        upper = _upper(head) if head else None
        if upper is not None:
            sql += " AND head < ?"
            params.append(upper)
        names = sorted(str(r[0]) for r in self._rows(sql + " LIMIT ?", (*params, 4 * limit)))
        out = [n for n in names if n.startswith(safe) and not self.is_meta_field(n) and self.has_field(n, today)]
        return out[:limit]

    # -- known terms (SPEC §7.6) ---------------------------------------------------------------

    def _candidates(self, sentence: str) -> list[tuple[int, int, str, frozenset[tuple[str, int, int, int]]]]:
        """Known terms (active or not) occurring in ``sentence``: (-length, first position,
        term, its holders: (kind, fh, sh, th) with kind ``f`` for a field name and ``v`` for
        a value of that key), sorted. The sentence's distinct 2- and 3-grams are the anchors
        looked up (near-linear in the sentence's length).
        """
        size = len(sentence)
        threes = {sentence[i:i + 3] for i in range(size - 2)}
        grams = list({sentence[i:i + 2] for i in range(size - 1)} | threes)
        if sql_text(sentence) is None:
            grams = [g for g in grams if sql_text(g) is not None]
            threes = {g for g in threes if sql_text(g) is not None}
        holders: dict[str, set[tuple[str, int, int, int]]] = {}
        conn = self._conn()
        backend = self._source.backend
        # one query for a sentence as typed: SQLite filters by the next piece and (instr) by
        # occurrence; a long sentence is asked in chunks and filtered here (str.find is
        # linear, SQLite's instr is not)
        single = len(grams) <= GRAM_CHUNK
        within = sentence if single and size <= SHORT_SENTENCE and sql_text(sentence) is not None else None
        nexts = list(threes) if single else None
        for start in range(0, len(grams), GRAM_CHUNK):
            for term, nxt, kind, fh, sh, th in backend.terms_with_anchors(
                    conn, grams[start:start + GRAM_CHUNK], within, nexts):
                if nxt and nxt not in threes:
                    continue
                holders.setdefault(term, set()).add((kind, fh, sh, th))
        found = []
        for term, held in holders.items():
            at = sentence.find(term)
            if at >= 0:
                found.append((-len(term), at, term, frozenset(held)))
        found.sort(key=lambda item: item[:3])
        return found

    def _value_rows(self, term: str, holder: tuple[str, int, int, int], today: dt.date,
                    limit: int) -> list[tuple[object, ...]]:
        """Active, non-meta lines of the holder's key whose value term (SPEC §7.3) is ``term``:
        (value, doc_id, version, line, path, subject, field), by identity.
        """
        _kind, fh, sh, th = holder
        active, params = self._active(today)
        meta, meta_params = self._not_meta("f")
        return self._rows(
            "SELECT COALESCE(f.value, f.norm), v.doc_id, v.version, f.line, v.path,"
            " COALESCE(f.subject, v.subject), f.field"
            " FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE f.fh = ? AND f.sh = ? AND f.th = ? AND rtrim(f.norm, ?) = ? AND {meta} AND {active}"
            " ORDER BY v.doc_id, v.version, f.line LIMIT ?",
            (fh, sh, th, PUNCTUATION, term, *meta_params, *params, limit))

    def _field_active(self, term: str, fh: int, today: dt.date) -> bool:
        """A field name whose normalised form is ``term`` has an active, non-meta line."""
        row = self._conn().execute("SELECT field FROM fields WHERE fh = ?", (fh,)).fetchone()
        if row is None:
            return False
        name = str(row[0])
        if self.is_meta_field(name) or normalize(name) != term:
            return False
        return self._any_active(today, "f.fh = ? AND f.field = ?", (fh, name))

    def _term_active(self, term: str, held: frozenset[tuple[str, int, int, int]], today: dt.date) -> bool:
        cached = self._caches.terms.get((term, today))
        if cached is not None:
            return cached
        verdict = False
        for holder in sorted(held):
            kind, fh, _sh, _th = holder
            verdict = (self._field_active(term, fh, today) if kind == "f"
                       else bool(self._value_rows(term, holder, today, 1)))
            if verdict:
                break
        _put(self._caches.terms, (term, today), verdict)
        return verdict

    def known_term_in(self, sentence: str, today: dt.date) -> str | None:
        key = (sentence, today)
        if key in self._caches.known:
            return self._caches.known[key]
        found = None
        for _, _, term, held in self._candidates(sentence):
            if self._term_active(term, held, today):
                found = term
                break
        if len(sentence) <= 2000:  # sentences as typed; a megabyte one is not kept
            _put(self._caches.known, key, found)
        return found

    def lines_with_value_in(self, sentence: str, today: dt.date, limit: int = 50) -> list[KeyedLine]:
        """Longest value first, then (doc_id, version, line); values of at least 2 code points."""
        if limit <= 0:
            return []
        by_length: dict[int, list[KeyedLine]] = {}
        for _, _, term, held in self._candidates(sentence):
            if sum(len(v) for v in by_length.values()) >= limit and len(term) < min(by_length):
                break
            for holder in sorted(held):
                if holder[0] != "v":
                    continue
                by_length.setdefault(len(term), []).extend(
                    KeyedLine(str(r[1]), int(str(r[2])), int(str(r[3])), str(r[5]) or None, str(r[6]), str(r[0]),
                              str(r[4]))
                    for r in self._value_rows(term, holder, today, limit))
        out: list[KeyedLine] = []
        for length in sorted(by_length, reverse=True):
            out.extend(sorted(by_length[length], key=lambda kl: kl.identity))
        return out[:limit]

    # -- the closed question grammar (SPEC §13, §15) -------------------------------------------

    def vocabulary_in(self, text: str, today: dt.date) -> list[VocabularyTerm]:
        """Names anchored at the text's distinct 1-, 2- and 3-grams (one indexed query per
        :data:`GRAM_CHUNK` grams), kept when they occur in ``text`` (``str.find``: linear)
        and a version active at (seq, today) holds them: a field name with an active,
        non-meta line (``has_field``), a subject with an active content
        (``subject_contents``). Never reads names that cannot occur in ``text``.
        """
        safe_text = sql_text(text)
        size = len(text)
        grams = list({text[i:i + k] for k in (1, 2, 3) for i in range(size - k + 1)})
        if safe_text is None:
            grams = [g for g in grams if sql_text(g) is not None]
        within = safe_text if size <= SHORT_SENTENCE and len(grams) <= GRAM_CHUNK else None
        conn, backend = self._conn(), self._source.backend
        names: dict[tuple[str, str], set[str]] = {}
        for start in range(0, len(grams), GRAM_CHUNK):
            for term, kind, name in backend.vocabulary_with_anchors(conn, grams[start:start + GRAM_CHUNK], within):
                if within is not None or term in text:
                    names.setdefault((term, kind), set()).add(name)
        found = []
        for (term, kind), spelled in sorted(names.items()):
            held = tuple(sorted(n for n in spelled if self._name_active(kind, n, today)))
            if held:
                found.append(VocabularyTerm(term, "subject" if kind == "s" else "field", held))
        return found

    def _name_active(self, kind: str, name: str, today: dt.date) -> bool:
        key = (f"vocabulary:{kind}", name, today)
        memos = self._caches.memos
        if key in memos:
            return bool(memos[key])
        if kind == "f":
            verdict = not self.is_meta_field(name) and self.has_field(name, today)
        else:
            active, params = self._active(today)
            verdict = self._conn().execute(
                "SELECT 1 FROM subject_contents AS c JOIN versions AS v ON v.content_id = c.content_id"
                f" WHERE c.sh = ? AND v.subject = ? AND {active} LIMIT 1",
                (text_hash(name), name, *params)).fetchone() is not None
        _put(memos, key, verdict)
        return verdict

    # -- memory entries (SPEC §11) -------------------------------------------------------------

    def memory_versions(self, scope: str, key: str) -> Mapping[int, MemoryEntry]:
        """One primary-key range of ``memory_entries``, as of this snapshot's seq."""
        safe_scope, safe_key = sql_text(scope), sql_text(key)
        if safe_scope is None or safe_key is None:
            return {}
        return memory_store.versions(self._conn(), self.seq, safe_scope, safe_key)

    def memory_scopes(self, prefix: str = "", limit: int | None = None) -> list[str]:
        safe = sql_text(prefix)
        return memory_store.scopes(self._conn(), self.seq, safe, limit) if safe is not None else []

    def memory_keys(self, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
        safe_scope, safe = sql_text(scope), sql_text(prefix)
        if safe_scope is None or safe is None:
            return []
        return memory_store.keys(self._conn(), self.seq, safe_scope, safe, limit)

    # -- corpus-wide ---------------------------------------------------------------------------

    def changed_keys(self, since: int, today: dt.date) -> list[ConflictKey] | None:
        # keys whose lines only moved to a new version (same line numbers and texts) change no
        # file's evidence findings: related locations name path, line and text, never a version
        keys, _terms = self.changed_since(since, renumbered={})
        return sorted(keys, key=lambda k: (k[1], k[0] or ""))

    def changed_since(self, since: int, renumbered: dict[ConflictKey, dict[str, int]] | None = None,
                      ) -> tuple[set[ConflictKey], set[str]]:
        """The conflict keys and known terms (SPEC §7.6 forms) of the contents whose activity
        changed between ``replay(since)`` and this snapshot: what cached answers may differ.

        ``renumbered`` (filled when given): the keys whose lines only moved to a new version
        of a document (an auto-versioned file edited elsewhere: same line numbers and texts,
        another version number), with those doc_ids and their new versions; they are left out
        of the keys returned. A summary of such a key differs only in those sources' version
        (:meth:`_Summary.renumbered`). Without it they are among the keys.

        A few contents are parsed again (their documents, about a millisecond each); more than
        :data:`CHANGED_PARSE` are read from one pass over ``field_lines`` (a storm of 1,000
        files spent 3 s parsing), whose rows are indexed by key, not by content.
        """
        n = self.seq
        keys: set[ConflictKey] = set()
        terms: set[str] = set()
        if since >= n:
            return keys, terms
        rows = self._rows(
            "SELECT content_id, doc_id, version, path, subject, effective_from, effective_until, active_from,"
            " active_to FROM versions WHERE"
            " (active_from > ? AND active_from <= ?) OR (active_to > ? AND active_to <= ?)",
            (since, n, since, n))
        if len(rows) <= CHANGED_PARSE:
            self._changed_by_parsing(rows, since, keys, terms, renumbered)
            return keys, terms
        cids = [int(str(r[0])) for r in rows]
        fields: set[str] = set()
        for start in range(0, len(cids), CHANGED_CHUNK):  # one scan of field_lines per chunk
            chunk = cids[start:start + CHANGED_CHUNK]
            for subject, name, norm, line_subject in self._rows(
                    "SELECT DISTINCT v.subject, f.field, f.norm, f.subject FROM field_lines AS f"
                    " JOIN versions AS v ON v.content_id = f.content_id"
                    f" WHERE f.content_id IN ({', '.join('?' for _ in chunk)})", chunk):
                if line_subject is not None:  # an image attribute: its region's key, no known term
                    keys.add((str(line_subject), str(name)))
                    continue
                keys.add((str(subject) or None, str(name)))
                fields.add(str(name))
                terms.add(str(norm).rstrip(PUNCTUATION))
        terms.update(normalize(name) for name in fields)
        return keys, terms

    def _changed_by_parsing(self, rows: list[tuple[object, ...]], since: int, keys: set[ConflictKey],
                            terms: set[str], renumbered: dict[ConflictKey, dict[str, int]] | None) -> None:
        """:meth:`changed_since` for a few changed contents, from their parsed documents.

        A document whose one content active at ``since`` was replaced by one content active
        now, with the same path, subject and effective dates, changed only the keys whose
        lines (number and text) differ between the two: an edit of one line of a Debian
        copyright file leaves its ``License`` key (17,000 lines in the corpus) as it was, so
        its summary is not computed again. When the version differs too (an auto-versioned
        file), the keys with equal lines go to ``renumbered`` (None: they count as changed).
        Any other change counts every key of every content involved.
        """
        n = self.seq
        by_doc: dict[str, list[tuple[tuple[object, ...], EvidenceDocument]]] = {}
        for row in rows:
            cid, doc_id, version = row[:3]
            record = VersionRecord(str(doc_id), int(str(version)), "", "", False, int(str(cid)))
            by_doc.setdefault(str(doc_id), []).append((row, self.document(record)))

        def active_at(row: tuple[object, ...], seq: int) -> bool:
            start, end = row[7], row[8]
            return start is not None and int(str(start)) <= seq and (end is None or int(str(end)) > seq)

        def key_of(doc: EvidenceDocument, number: int, name: str) -> ConflictKey:
            # an image attribute's key is its region's subject (SPEC §12)
            return ((doc.line_subject(number), name) if isinstance(doc, ImageDocument)
                    else (doc.subject, name))

        def lines_by_key(doc: EvidenceDocument) -> dict[ConflictKey, set[tuple[int, str]]]:
            out: dict[ConflictKey, set[tuple[int, str]]] = {}
            for number, fl in doc.field_lines.items():
                out.setdefault(key_of(doc, number, fl.field), set()).add((number, doc.lines[number - 1]))
            return out

        for contents in by_doc.values():
            old = [(row, doc) for row, doc in contents if active_at(row, since)]
            new = [(row, doc) for row, doc in contents if active_at(row, n)]
            if len(old) == 1 and len(new) == 1 and old[0][0][3:7] == new[0][0][3:7]:
                before, after = lines_by_key(old[0][1]), lines_by_key(new[0][1])
                docs = [old[0][1], new[0][1]]
                same_version = old[0][0][2] == new[0][0][2]
                wanted = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)
                          or (not same_version and renumbered is None)}
                if not same_version and renumbered is not None:  # its sources are renamed
                    for key in before.keys() - wanted:
                        renumbered.setdefault(key, {})[str(old[0][0][1])] = int(str(new[0][0][2]))
            else:
                docs = [doc for _row, doc in contents]
                wanted = None
            for doc in docs:
                image = isinstance(doc, ImageDocument)
                for number, fl in doc.field_lines.items():
                    key = key_of(doc, number, fl.field)
                    if wanted is None or key in wanted:
                        keys.add(key)
                        if not image:  # image attributes are no known terms
                            terms.add(normalize(fl.field))
                            terms.add(normalize(fl.value).rstrip(PUNCTUATION))

    def conflicting_keys(self, today: dt.date) -> list[ConflictKey]:
        active, params = self._active(today)
        meta, meta_params = self._not_meta("f")
        rows = self._rows(
            "SELECT COALESCE(f.subject, v.subject), f.field FROM field_lines AS f"
            " JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE {active} AND {meta} GROUP BY f.fh, f.sh, f.field, COALESCE(f.subject, v.subject)"
            " HAVING COUNT(DISTINCT f.norm) >= 2", (*params, *meta_params))
        return sorted(((str(r[0]) or None, str(r[1])) for r in rows), key=lambda k: (k[1], k[0] or ""))

    def stats(self, today: dt.date) -> IndexStats:
        n = self.seq
        active, params = self._active(today)
        meta, meta_params = self._not_meta("f")
        conn = self._conn()
        documents, versions = conn.execute(
            "SELECT COUNT(DISTINCT doc_id), COUNT(*) FROM versions WHERE content_id <= ?"
            " AND (current_to IS NULL OR current_to > ?)", (n, n)).fetchone()
        active_docs, lines = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM(line_count), 0) FROM versions AS v WHERE {active}",
            params).fetchone()
        (fields,) = conn.execute(
            "SELECT COUNT(*) FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            f" WHERE {active} AND {meta}",
            (*params, *meta_params)).fetchone()
        return IndexStats(int(documents), int(versions), int(active_docs), int(lines), int(fields))

    def iter_active(self, today: dt.date) -> Iterator[VersionRecord]:
        active, params = self._active(today)
        last = ""
        while True:
            rows = self._rows(f"SELECT doc_id FROM versions AS v WHERE {active} AND v.doc_id > ?"
                              " ORDER BY v.doc_id LIMIT 500", (*params, last))
            if not rows:
                return
            for (doc_id,) in rows:
                record = self.active_record(str(doc_id), today)
                if record is not None:
                    yield record
            last = str(rows[-1][0])

    # -- image evidence (SPEC §12) -------------------------------------------------------------

    def measurement(self, sha256: str) -> Measurement | None:
        """The cached measurement of an image content (``measurements``; a pure function of
        the bytes, so any snapshot may read it), from a small per-store cache when asked again.
        """
        safe = sql_text(sha256)
        if safe is None:
            return None
        cache = self._source.measurements
        found = cache.get(safe)
        if found is None:
            data = self._source.backend.measurement(self._conn(), safe, MEASUREMENT_VERSION)
            if data is None:
                return None
            try:
                found = Measurement.from_dict(json.loads(data))
            except ValueError:
                return None
            cache.put(safe, found)
        return found

    def regions_matching(self, conditions: Sequence[tuple[str, str]], today: dt.date,
                         limit: int = 50) -> list[tuple[VersionRecord, int, str]]:
        """One indexed query on ``region_values (field, value)``: the regions holding every
        condition, of versions active at (seq, today).
        """
        wanted = list(dict.fromkeys((f, v) for f, v in conditions))
        if not wanted or any(sql_text(f) is None or sql_text(v) is None for f, v in wanted):
            return []
        active, params = self._active(today)
        where = " OR ".join("(r.field = ? AND r.value = ?)" for _ in wanted)
        rows = self._rows(
            "SELECT v.doc_id, v.version, r.region FROM region_values AS r"
            " JOIN versions AS v ON v.content_id = r.content_id"
            f" WHERE ({where}) AND {active}"
            " GROUP BY v.content_id, r.region, v.doc_id, v.version HAVING COUNT(DISTINCT r.field) = ?"
            " ORDER BY v.doc_id, v.version, r.region LIMIT ?",
            (*(x for pair in wanted for x in pair), *params, len({f for f, _ in wanted}), limit))
        out: list[tuple[VersionRecord, int, str]] = []
        for doc_id, version, region in rows:
            record = self.record(str(doc_id), int(str(version)))
            if record is not None:
                subject = record.subject or record.doc_id
                out.append((record, int(str(region)), f"{subject}#r{int(str(region))}"))
        return out

    # -- full-text search ----------------------------------------------------------------------

    @property
    def search_complete(self) -> bool:
        if not self._search_complete:
            row = self._conn().execute("SELECT 1 FROM fts_queue WHERE content_id <= ? LIMIT 1",
                                       (self.seq,)).fetchone()
            self._search_complete = row is None
        return self._search_complete

    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        """FTS5 trigram search over the lines of the versions active at this snapshot (their
        ``status`` and revocations; not their effective dates), best first.

        Each whitespace-separated term must occur (``any_term``: at least one term, ranked
        by how many of the query's trigrams a line holds, which suits CJK questions without
        spaces). Terms shorter than 3 code points cannot use the trigram index; when every
        term is that short the search falls back to a substring scan (``instr``). Any text
        is a safe query: terms are FTS5 string literals (quotes, ``*``, ``NEAR(``, column
        filters are searched literally); NUL and lone surrogates separate terms; repeated terms
        count once and only the first ``MAX_SEARCH_TERMS`` distinct terms (``any_term``: the
        first ``MAX_SEARCH_GRAMS`` distinct trigrams of the query) are searched, so a
        query of any size is one bounded FTS5 expression. ``rank`` is
        bm25 (lower is better; its statistics include every content ever indexed).
        Matching is after Unicode NFKC on both sides (the rows hold NFKC lines, the query is
        folded the same way: ``７天`` finds ``7天`` and back); a hit's ``text`` is the NFKC line.
        While :attr:`search_complete` is False, lines of contents still queued are missed.
        """
        folded = unicodedata.normalize("NFKC", search_text(query))
        terms = list(dict.fromkeys(t for t in folded.split() if t))[:MAX_SEARCH_TERMS]
        if not terms:
            return []
        long_terms = [t for t in terms if len(t) >= 3]
        short_terms = [t for t in terms if len(t) < 3]
        n = self.seq
        active = ("v.active_from <= ? AND (v.active_to IS NULL OR v.active_to > ?)")
        params = (n, n)
        backend, conn = self._source.backend, self._conn()
        rows = []
        if long_terms and (any_term or not short_terms):
            if any_term:
                seen = dict.fromkeys(t[i:i + 3] for t in long_terms for i in range(len(t) - 2))
                phrases = sorted(list(seen)[:MAX_SEARCH_GRAMS])
            else:
                phrases = long_terms
            rows.extend(backend.fts_match(conn, phrases, any_term, active, params, limit))
        if short_terms and (any_term or not long_terms):
            rows.extend(backend.fts_substrings(conn, short_terms, any_term, active, params, limit))
        best: dict[tuple[str, int], tuple[str, int, int, str, float]] = {}
        for row in rows:
            key = (row[0], row[2])
            if key not in best or row[4] < best[key][4]:
                best[key] = row
        ordered = sorted(best.values(), key=lambda r: (r[4], r[0], r[2]))[:limit]
        return [SearchHit(r[0], r[1], r[2], r[3], r[4]) for r in ordered]


class KeptSources(TupleView[KeyedLine]):
    """A value's first sources as ``key_values`` holds them (JSON, :func:`derived.sources_text`),
    made into :class:`KeyedLine` objects when first read (a first check lists 16,000 related
    sources on Debian and reads a few; SPEC §7.4 related information is built on demand,
    ``model.DeferredLocations``). Its length is known without reading: ``min(lines, per_value)``
    (a row keeps ``min(lines, KEPT_SOURCES)`` sources). Compares and hashes as the tuple of its
    items; immutable; a second thread reading it at once makes an equal tuple.
    """

    __slots__ = ("_items", "_length", "_row")

    def __init__(self, length: int, row: tuple[str, str | None, str, str]) -> None:
        """``row``: (the sources' JSON, the key's subject, its field, the value's first spelling)."""
        self._length = length
        self._row = row
        self._items: tuple[KeyedLine, ...] | None = None

    def items(self) -> tuple[KeyedLine, ...]:
        """The sources, as a tuple (made once)."""
        items = self._items
        if items is None:
            text, subject, name, spelled = self._row
            items = tuple([KeyedLine(item[0], item[1], item[2], subject, name,
                                     spelled if len(item) == 5 else item[5], item[4])
                           for item in json.loads(text)[:self._length]])
            self._items = items
        return items

    def __len__(self) -> int:
        return self._length


def _merged_summary(subject: str | None, name: str, rows: list[tuple[object, ...]],
                    dated: list[tuple[object, ...]], keep: int, per_value: int) -> _Summary:
    """A key's kept values (``key_values`` rows ``(norm, spelled, lines, sources)`` in order of
    first source) with its active dated lines ``(norm, value or None, doc_id, version, line,
    path)`` added: counts summed, first sources merged by (doc_id, version, line) and cut to
    ``keep``, the first spelling that of the first source, values in order of first source.
    """
    counts: dict[str, int] = {}
    merged: dict[str, list[KeyedLine]] = {}
    for norm_, spelled_, lines, text in rows:
        norm = str(norm_)
        spelled = norm if spelled_ is None else str(spelled_)
        counts[norm] = int(str(lines))
        merged[norm] = list(KeptSources(min(int(str(lines)), keep), (str(text), subject, name, spelled)))
    for norm_, value, doc_id, version, line, path in dated:
        norm = str(norm_)
        counts[norm] = counts.get(norm, 0) + 1
        merged.setdefault(norm, []).append(KeyedLine(str(doc_id), int(str(version)), int(str(line)), subject, name,
                                                     norm if value is None else str(value), str(path)))
    groups = []
    for norm, sources in merged.items():
        sources.sort(key=lambda kl: kl.identity)
        groups.append(ValueGroup(norm, sources[0].value, counts[norm], tuple(sources[:per_value])))
    groups.sort(key=lambda group: _first_identity(merged[group.normalized]))
    return _Summary(sum(counts.values()), tuple(groups))


def _first_identity(sources: list[KeyedLine]) -> LineIdentity:
    return sources[0].identity


def _upper(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (code point order),
    or None when there is none (the prefix ends with U+10FFFF).
    """
    last = ord(prefix[-1])
    if last >= 0x10FFFF:
        return None
    nxt = last + 1
    if 0xD800 <= nxt <= 0xDFFF:
        nxt = 0xE000
    return prefix[:-1] + chr(nxt)
