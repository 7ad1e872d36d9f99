"""Events -> derived rows (SPEC §3 "Active", §4, §7.4, §7.6), in the events' transaction.

Every derived row answers any ``replay(n)``: a row holds for ``from <= n < to`` and later
writes only add rows with larger seqs or close an open range with a seq larger than any
reader's ``n``, so a reader at ``n`` never sees a change and never waits for the writer.

Per event (cost proportional to the document it touches, never to the corpus):

- ``import(s, doc_id, version, ...)``: the previous content of (doc_id, version) stops being
  current (``current_to = s``) and active (``active_to = s``); a higher version deactivates
  the doc's newest content; the new ``versions`` row is active from ``s`` when it is the
  newest version and its front matter does not say ``status: revoked`` (an archive, an older
  declared version imported while a newer one exists, is never active). Only contents that
  are ever active get ``field_lines``, ``terms`` and an ``fts_queue`` entry.
- ``revoke(s, doc_id, version, reason)``: a ``revocations`` row for the current content of
  (doc_id, version), which stops being active at ``s``.

Key summaries kept at write time (``key_values``, SPEC §7.4): every content that becomes
active adds its field lines to its values' counts and first sources, every content that stops
being active (replaced, superseded by a higher version, revoked or deleted) takes its lines
out again (its text parsed once more: ``field_lines`` is indexed by key, not by content);
when that leaves a value with fewer kept sources than it has lines, the value's first
sources are read again from ``field_lines`` (an index range of the value). Only undated
contents are kept there: a content with ``effective_from`` / ``effective_until`` is active
depending on "today", so its lines go to ``dated_lines`` and are read live. The table is the
summary of the head of the log only; ``sql_snapshot`` answers an older ``replay(n)`` from
``field_lines``.

Image versions (SPEC §12; ``grounding_core.images.ImageDocument``): their lines are the
regions' measured attributes; each is a ``field_lines`` row whose ``subject`` is the region's
``SUBJECT#rN`` (so regions never share a conflict key) and a ``region_values`` row; they add no
known terms (region values are not GR110 terms, docs/decisions.md) and no full-text rows. The
image's subject and its attribute names are question-grammar ``vocabulary`` rows (SPEC §13), as
a text version's are.

Plain SQL only (``ON CONFLICT DO NOTHING``, no SQLite-only syntax); the two lookups that
need engine-specific SQL (``json_each`` / ``= ANY``) go through the backend
(:class:`~grounding_core.backend.Backend`).
Meta fields are filtered when read, so the rows depend only on the field separators and
subject fields (the *settings fingerprint*, see :func:`fingerprint`).
"""

from __future__ import annotations

import datetime as dt
import json
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from .backend import DERIVED_VERSION, Backend, Connection, LineRow, TermRow, text_hash
from .events import EVENT_KINDS, MEMORY_KINDS, Event, EventKind
from .evidence import EvidenceDocument, EvidenceError, FrontMatter, parse_evidence_text
from .images import MEASUREMENT_VERSION, ImageDocument, attribute_of_line, image_document_from_event, is_image_path
from .index import ParseSettings
from .text import VALUE_TRAILING_PUNCTUATION, split_lines

BATCH_LINES = 50_000
"""Field lines buffered before they are written (bounded memory during a cold index)."""

KEY_CACHE = 100_000
"""At most this many field names (normalised forms) and key texts (hashes) are remembered
during one scan."""

KEPT_SOURCES = 6
"""Sources kept per value in ``key_values``: SPEC §7.4's 5, and one more for the evidence
findings, which ask for 6 to know whether a value has more (``evidence_findings.PER_VALUE``)."""

NEW_VALUE_BITS = 23
"""Size (log2 bits, 1 MiB) of the bitmap of values this deriver wrote into a ``key_values`` that
was empty when it began (a cold index, a rebuild): a value whose bit is clear has no row
yet, so it is inserted without a lookup. A set bit may be another value's (a lookup then)."""

KEPT_SQL = "(subject = '' AND effective_from IS NULL AND effective_until IS NULL)"
"""A ``versions`` row whose lines ``key_values`` keeps: no subject, undated (an image is not
either: :func:`_deactivate` looks at the path before anything is parsed)."""

NO_SUBJECT = text_hash("")
"""``sh`` of the lines of documents without a subject: the keys ``key_values`` keeps."""

Source = tuple[str, int, int, int, str, str | None]
"""A ``key_values`` source: (doc_id, version, line, content_id, path, value as written or None
where it is the normalised value)."""
ValueKey = tuple[int, int, str, str]
"""A ``key_values`` row's value: (fh, th, field, norm) of a key without a subject."""


def fingerprint(settings: ParseSettings) -> str:
    """What the derived rows depend on: their definition, the separators and the subject
    fields (not the meta fields, which are filtered when read).
    """
    return json.dumps({"definition": DERIVED_VERSION, "separators": list(settings.separators),
                       "subject_fields": list(settings.subject_fields), "image_language": settings.image_language,
                       "measurement": MEASUREMENT_VERSION}, ensure_ascii=False)


def anchor_of(term: str) -> str:
    """A known term's anchor: its first 3 code points (a 2-code-point term is its own)."""
    return term[:3]



def parse_content(event: Event, settings: ParseSettings) -> EvidenceDocument:
    """The parsed text of an import event (a body-only document if its front matter no
    longer parses, which settings cannot cause; stays total). An image's event
    (``images.image_event_text``) is its :class:`~grounding_core.images.ImageDocument`; one
    whose measurement is of another ``MEASUREMENT_VERSION`` has no regions.
    """
    if is_image_path(event.path):
        image = image_document_from_event(event.path, event.sha256, event.text, settings.image_language)
        if image is not None:
            return image
        return ImageDocument(path=event.path, sha256=event.sha256, text=event.text, lines=(), front=FrontMatter(),
                             doc_id=event.doc_id, separators=("：",), subject_fields=())
    try:
        return parse_evidence_text(event.path, event.text, event.sha256, settings.separators,
                                   settings.subject_fields)
    except EvidenceError:
        return EvidenceDocument(
            path=event.path, sha256=event.sha256, text=event.text,
            lines=tuple(split_lines(event.text)), front=FrontMatter(), doc_id=event.doc_id,
            separators=settings.separators, subject_fields=settings.subject_fields,
        )


class Deriver:
    """Applies events to the derived tables on the writer connection.

    Call :meth:`apply` for each appended event in seq order and :meth:`flush` before the
    transaction commits (field lines, terms and FTS queue entries are buffered).
    """

    def __init__(self, conn: Connection, backend: Backend, settings: ParseSettings,
                 queue_fts: bool = True, after_flush: Callable[[], object] | None = None) -> None:
        self.conn = conn
        self.after_flush = after_flush
        """Called at the end of each :meth:`flush`, once the batch's rows are released
        (``collector.BulkWrite.batch``: a scan's collection of what the batch left alive)."""
        self.backend = backend
        self.settings = settings
        self.queue_fts = queue_fts
        self._field_terms: dict[str, str] = {}
        self._hashes: dict[str, int] = {}
        self._lines: list[LineRow] = []
        self._regions: list[tuple[str, str, int, int]] = []
        self._image_fields: set[str] = set()
        self._terms: set[TermRow] = set()
        self._fields: list[tuple[int, str]] = []
        self._fts: list[tuple[int]] = []
        self._names: set[tuple[str, str]] = set()
        """(kind, name) of question-grammar names seen (``s`` subject, ``f`` field; SPEC §13)."""
        self._names_written: set[tuple[str, str]] = set()
        self._subjects: list[tuple[int, int]] = []
        self._values: dict[ValueKey, list[Any]] = {}
        """Changes to ``key_values`` not yet written: value -> [lines added - removed, sources
        added, (content_id, line) of sources removed]."""
        self._kept: dict[int, tuple[str, int, str, bool]] = {}
        """Contents derived since the last flush whose lines ``key_values`` keeps (undated, text,
        no subject) or ``dated_lines`` holds (dated): content_id -> (doc_id, version, path, dated)."""
        self._new_values: bytearray | None = None
        """Bits of the values written since ``key_values`` was empty (None: not known empty)."""
        self._values_checked = False
        self.activity_changed: set[int] = set()
        """content_ids whose activity changed (for cache invalidation)."""

    # -- events --------------------------------------------------------------------------------

    def apply(self, event: Event, doc: EvidenceDocument | None = None) -> None:
        if event.kind in MEMORY_KINDS:
            return  # memory events (SPEC §11) derive memory_entries (grounding_core.memory_store)
        if event.kind == "import":
            self._import(event, doc if doc is not None else parse_content(event, self.settings))
            if len(self._lines) >= BATCH_LINES:  # (here: the import's references to the batch are gone)
                self.flush()
        else:
            self._revoke(event)

    def _import(self, event: Event, doc: EvidenceDocument) -> None:
        conn, s = self.conn, event.seq
        prev = conn.execute(
            "SELECT content_id, first_sha256, active_from IS NOT NULL AND active_to IS NULL,"
            f" {KEPT_SQL} FROM versions"
            " WHERE doc_id = ? AND version = ? AND current_to IS NULL",
            (event.doc_id, event.version)).fetchone()
        newest = conn.execute("SELECT MAX(version) FROM versions WHERE doc_id = ?",
                              (event.doc_id,)).fetchone()[0]
        if prev is not None:
            conn.execute(
                "UPDATE versions SET current_to = ?, active_to = CASE WHEN active_from IS NOT NULL"
                " AND active_to IS NULL THEN ? ELSE active_to END WHERE content_id = ?",
                (s, s, prev[0]))
            self.activity_changed.add(int(prev[0]))
            if prev[2] and prev[3]:
                self._deactivate(int(prev[0]))
        if newest is not None and event.version > newest:
            for cid, kept in conn.execute(
                    f"SELECT content_id, {KEPT_SQL}"
                    " FROM versions WHERE doc_id = ? AND version = ?"
                    " AND current_to IS NULL AND active_from IS NOT NULL AND active_to IS NULL",
                    (event.doc_id, newest)).fetchall():
                conn.execute("UPDATE versions SET active_to = ? WHERE content_id = ?", (s, cid))
                self.activity_changed.add(int(cid))
                if kept:
                    self._deactivate(int(cid))
        front = doc.front
        active = (newest is None or event.version >= newest) and front.status != "revoked"
        conn.execute(
            "INSERT INTO versions (content_id, doc_id, version, sha256, path, declared, status,"
            " effective_from, effective_until, title, subject, line_count, front_end, first_sha256,"
            " current_to, active_from, active_to)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
            (s, event.doc_id, event.version, event.sha256, event.path, int(event.declared),
             front.status, _iso(front.effective_from), _iso(front.effective_until), doc.title,
             doc.subject or "", len(doc.lines), front.end_line,
             prev[1] if prev is not None else event.sha256,
             s if active else None))
        if not active:
            return
        self.activity_changed.add(s)
        subject = doc.subject or ""
        sh = self._hash(subject)
        if doc.subject and doc.field_lines:  # question hook (SPEC §13): a known subject
            self._subjects.append((sh, s))
            self._names.add(("s", doc.subject))
        if isinstance(doc, ImageDocument):
            self._image_lines(doc, s)
            return
        kept = None
        if not subject:  # key_values (undated) or dated_lines (dated) take its lines at the flush
            kept = self._kept[s] = (event.doc_id, event.version, event.path,
                                    front.effective_from is not None or front.effective_until is not None)
        buffer, terms, hashed = self._lines, self._terms, self._hash
        for number, fl in doc.field_lines.items():
            if len(buffer) >= BATCH_LINES:  # one large document: its lines go in several batches
                del buffer, terms  # the flush's collection must not find the written batch alive
                self.flush()
                buffer, terms = self._lines, self._terms
                if kept is not None:  # the flush took the content's entry; its later lines need it
                    self._kept[s] = kept
            name = fl.field
            fh = hashed(name)
            norm = normalize_fast(fl.value)
            term = norm.rstrip(VALUE_TRAILING_PUNCTUATION)
            th = text_hash(term)
            buffer.append((fh, sh, th, s, number, name, norm, None if norm == fl.value else fl.value, None))
            if len(term) >= 2:
                terms.add((term[:3], term[3:6] if len(term) >= 6 else "", th, "v", fh, sh, term))
            if name not in self._field_terms:
                field_term = self._field_terms[name] = normalize_fast(name)
                self._fields.append((fh, name))
                self._names.add(("f", name))  # question hook (SPEC §13): a known field name
                if len(field_term) >= 2:
                    terms.add((field_term[:3], field_term[3:6] if len(field_term) >= 6 else "", text_hash(field_term),
                               "f", fh, 0, field_term))
        if self.queue_fts:
            self._fts.append((s,))

    def _image_lines(self, doc: ImageDocument, s: int) -> None:
        """An image version's attributes: field lines keyed ``(SUBJECT#rN, FIELD)`` and
        ``region_values`` rows; no known terms, no full-text rows (module docstring).
        """
        for number, fl in doc.field_lines.items():
            subject = doc.line_subject(number)
            norm = normalize_fast(fl.value)
            self._lines.append((self._hash(fl.field), self._hash(subject),
                                text_hash(norm.rstrip(VALUE_TRAILING_PUNCTUATION)), s, number, fl.field, norm,
                                None if norm == fl.value else fl.value, subject))
            self._regions.append((fl.field, fl.value, s, attribute_of_line(number)[0]))
            if fl.field not in self._image_fields:  # (the field name is no known term either)
                self._image_fields.add(fl.field)
                self._fields.append((self._hash(fl.field), fl.field))
                self._names.add(("f", fl.field))  # question hook (SPEC §13): a known field name

    def _hash(self, text: str) -> int:
        cached = self._hashes.get(text)
        if cached is None:
            if len(self._hashes) > KEY_CACHE:
                self._hashes.clear()
            cached = self._hashes[text] = text_hash(text)
        return cached

    def _revoke(self, event: Event) -> None:
        row = self.conn.execute(
            "SELECT content_id, active_from, active_to,"
            f" {KEPT_SQL} FROM versions"
            " WHERE doc_id = ? AND version = ? AND current_to IS NULL",
            (event.doc_id, event.version)).fetchone()
        if row is None:
            return  # a revoke of an unknown version changes nothing (replay does the same)
        cid = int(row[0])
        self.conn.execute("INSERT INTO revocations (content_id, seq, reason) VALUES (?, ?, ?)",
                          (cid, event.seq, event.reason))
        if row[1] is not None and row[2] is None:
            self.conn.execute("UPDATE versions SET active_to = ? WHERE content_id = ?", (event.seq, cid))
            self.activity_changed.add(cid)
            if row[3]:
                self._deactivate(cid)

    # -- key summaries kept at write time (key_values) -----------------------------------------

    def _deactivate(self, content_id: int) -> None:
        """A content whose lines ``key_values`` keeps stops being active: its field lines leave
        their values' counts and first sources (its text is parsed again, as when imported).
        """
        row = self.conn.execute(
            "SELECT seq, kind, doc_id, version, sha256, path, text, declared, reason FROM events WHERE seq = ?",
            (content_id,)).fetchone()
        if row is None or is_image_path(str(row[5])):
            return
        doc = parse_content(event_of(row), self.settings)
        changes = self._values
        for number, fl in doc.field_lines.items():
            norm = normalize_fast(fl.value)
            value = (self._hash(fl.field), text_hash(norm.rstrip(VALUE_TRAILING_PUNCTUATION)), fl.field, norm)
            change = changes.get(value)
            if change is None:
                change = changes[value] = [0, [], set()]
            elif change[2] is None:
                change[2] = set()
            change[0] -= 1
            change[2].add((content_id, number))
        if len(changes) >= BATCH_LINES:
            self.flush()

    # -- buffered rows -------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the buffered field lines, known terms and FTS queue entries."""
        lines, self._lines = self._lines, []
        terms, self._terms = self._terms, set()
        fts, self._fts = self._fts, []
        if fts:
            self.conn.executemany("INSERT INTO fts_queue (content_id) VALUES (?) ON CONFLICT DO NOTHING", fts)
        fields, self._fields = self._fields, []
        regions, self._regions = self._regions, []
        if lines or terms:
            self.backend.write_field_lines(self.conn, lines, terms)
        if regions:
            self.backend.write_region_values(self.conn, regions)
        if fields:
            self.backend.write_fields(self.conn, fields)
        self._write_names()
        self._write_values(lines)
        del lines, terms, fts, fields, regions
        if len(self._field_terms) > KEY_CACHE:
            self._field_terms.clear()
        if self.after_flush is not None:
            self.after_flush()

    def _write_names(self) -> None:
        """Question-grammar names (SPEC §13, §15) and subject contents: each name once (its
        row is looked up by anchor, kind and hash before it is added), never proportional to
        more than the contents this transaction derived.
        """
        subjects, self._subjects = self._subjects, []
        if subjects:
            self.conn.executemany("INSERT INTO subject_contents (sh, content_id) VALUES (?, ?)"
                                  " ON CONFLICT DO NOTHING", subjects)
        names, self._names = self._names - self._names_written, set()
        if len(self._names_written) > KEY_CACHE:
            self._names_written.clear()
        for kind, name in sorted(names):
            term = unicodedata.normalize("NFKC", name)
            if not term:
                continue
            nh = self._hash(name)
            anchor = term[:3]
            if self.conn.execute("SELECT 1 FROM vocabulary WHERE anchor = ? AND kind = ? AND nh = ? AND name = ?",
                                 (anchor, kind, nh, name)).fetchone() is None:
                self.conn.execute("INSERT INTO vocabulary (anchor, term, kind, nh, name) VALUES (?, ?, ?, ?, ?)",
                                  (anchor, term, kind, nh, name))
            self._names_written.add((kind, name))


    def _write_values(self, lines: Sequence[LineRow]) -> None:
        """Apply the changes to ``key_values`` (the lines just written of the contents it keeps,
        and the lines of contents that stopped being active) and write ``dated_lines``. Per
        changed value: one lookup (none for a value new to a table that was empty:
        :data:`NEW_VALUE_BITS`), its row deleted and written again; every delete before every
        insert (a replaced content's line can be the first source of another value of the key).
        A value left with fewer kept sources than lines reads its first ones from
        ``field_lines`` (written already).
        """
        kept, self._kept = self._kept, {}
        changes, self._values = self._values, {}
        dated = []
        for fh, sh, th, cid, number, name, norm, written, line_subject in (lines if kept else ()):
            content = kept.get(cid)
            if content is None or line_subject is not None:
                continue
            doc_id, version, path, is_dated = content
            if is_dated:
                dated.append((fh, sh, name, "", norm, written, number, cid))
                continue
            change = changes.get((fh, th, name, norm))
            if change is None:
                changes[(fh, th, name, norm)] = [1, [(doc_id, version, number, cid, path, written)], None]
            else:
                change[0] += 1
                change[1].append((doc_id, version, number, cid, path, written))
        conn = self.conn
        if dated:
            conn.executemany("INSERT INTO dated_lines (fh, sh, field, subject, norm, value, line, content_id)"
                             " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", dated)
        if not changes:
            return
        if not self._values_checked:
            self._values_checked = True
            if conn.execute("SELECT 1 FROM key_values LIMIT 1").fetchone() is None:
                self._new_values = bytearray(1 << (NEW_VALUE_BITS - 3))
        bits = self._new_values
        mask = (1 << NEW_VALUE_BITS) - 1
        deletes: list[tuple[int, int, int, str, int, int]] = []
        inserts: list[tuple[object, ...]] = []
        for value, (count, added, removed) in changes.items():
            fh, th, name, norm = value
            old = None
            seen = True
            if bits is not None:
                bit = (th ^ (fh << 1)) & mask
                seen = bool(bits[bit >> 3] & (1 << (bit & 7)))
                bits[bit >> 3] |= 1 << (bit & 7)
            if seen:
                old = conn.execute(
                    "SELECT first_doc, first_version, first_line, lines, spelled, sources FROM key_values"
                    " WHERE fh = ? AND sh = ? AND th = ? AND field = ? AND subject = '' AND norm = ?",
                    (fh, NO_SUBJECT, th, name, norm)).fetchone()
            sources: list[Source]
            if old is None and removed is None:  # a new value (a cold index: nearly all of them)
                if count <= 0:
                    continue
                sources = added
                if len(sources) > 1:
                    sources.sort()
                    del sources[KEPT_SOURCES:]
            else:
                sources = []
                if old is not None:
                    deletes.append((fh, NO_SUBJECT, th, str(old[0]), int(old[1]), int(old[2])))
                    count += int(old[3])
                    sources = sources_of(str(old[5]), norm, norm if old[4] is None else str(old[4]))
                if count <= 0:
                    continue
                if removed:
                    sources = [src for src in sources if (src[3], src[2]) not in removed]
                    added = [src for src in added if (src[3], src[2]) not in removed]
                sources.extend(added)
                sources.sort()
                del sources[KEPT_SOURCES:]
                if len(sources) < min(count, KEPT_SOURCES):  # a first source left: read the first ones again
                    sources = self._first_sources(value)
            first = sources[0]
            spelled = norm if first[5] is None else first[5]
            inserts.append((fh, NO_SUBJECT, th, first[0], first[1], first[2], count, name, "", norm,
                            None if spelled == norm else spelled, sources_text(sources, norm, spelled)))
        if deletes:
            conn.executemany("DELETE FROM key_values WHERE fh = ? AND sh = ? AND th = ? AND first_doc = ?"
                             " AND first_version = ? AND first_line = ?", sorted(deletes))
        if inserts:
            inserts.sort()  # in the table's order (its key, the first 6 columns, is unique): each page once
            conn.executemany("INSERT INTO key_values (fh, sh, th, first_doc, first_version, first_line, lines,"
                             " field, subject, norm, spelled, sources) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             inserts)

    def _first_sources(self, value: ValueKey) -> list[Source]:
        """The first :data:`KEPT_SOURCES` undated lines of ``value`` active at the head, by
        (doc_id, version, line): one index range of the value's term in ``field_lines``.
        """
        fh, th, name, norm = value
        rows = self.conn.execute(
            "SELECT v.doc_id, v.version, f.line, f.content_id, v.path, f.value"
            " FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
            " WHERE f.fh = ? AND f.sh = ? AND f.th = ? AND f.field = ? AND f.norm = ? AND f.subject IS NULL"
            " AND v.subject = '' AND v.active_from IS NOT NULL AND v.active_to IS NULL"
            " AND v.effective_from IS NULL AND v.effective_until IS NULL"
            " ORDER BY v.doc_id, v.version, f.line LIMIT ?",
            (fh, NO_SUBJECT, th, name, norm, KEPT_SOURCES)).fetchall()
        return [(str(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4]), None if r[5] is None else str(r[5]))
                for r in rows]


def sources_text(sources: Sequence[Source], norm: str, spelled: str) -> str:
    """``key_values.sources``: JSON ``[[doc_id, version, line, content_id, path(, value)], ...]``,
    the value as written only where it is not ``spelled`` (the first source's; a source whose
    value is written as normalised, None in a :data:`Source`, has the value ``norm``).
    """
    return _encode([[d, v, line, cid, path] if (norm if written is None else written) == spelled
                    else [d, v, line, cid, path, norm if written is None else written]
                    for d, v, line, cid, path, written in sources])


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""JSON of a value's sources (one encoder: ``json.dumps`` with options makes one per call)."""


def sources_of(text: str, norm: str, spelled: str) -> list[Source]:
    """The sources of a ``key_values`` row, read back (:func:`sources_text`)."""
    out: list[Source] = []
    for item in json.loads(text):
        value = spelled if len(item) == 5 else str(item[5])
        out.append((str(item[0]), int(item[1]), int(item[2]), int(item[3]), str(item[4]),
                    None if value == norm else value))
    return out


def normalize_fast(text: str) -> str:
    """:func:`grounding_core.text.normalize` (NFKC, then every whitespace removed), skipping
    the NFKC pass when the text is already normalised (most evidence text is): the same
    result, about twice as fast on the cold index's hundreds of thousands of values.
    """
    if not (text.isascii() or unicodedata.is_normalized("NFKC", text)):
        text = unicodedata.normalize("NFKC", text)
    return "".join(text.split())


def iter_events(conn: Connection, after: int = 0, upto: int | None = None,
                chunk: int = 500) -> Iterator[Event]:
    """Events with ``after < seq <= upto`` in log order, read in chunks (bounded memory)."""
    last = after
    while True:
        sql = ("SELECT seq, kind, doc_id, version, sha256, path, text, declared, reason, data, recorded_at"
               " FROM events WHERE seq > ?")
        args: list[int] = [last]
        if upto is not None:
            sql += " AND seq <= ?"
            args.append(upto)
        rows = conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, chunk)).fetchall()
        if not rows:
            return
        for row in rows:
            yield event_of(row)
        last = int(rows[-1][0])


def event_of(row: Sequence[object]) -> Event:
    """An :class:`Event` from an ``events`` row (seq, kind, doc_id, version, sha256, path,
    text, declared, reason[, data, recorded_at]).
    """
    kind = str(row[1])
    return Event(
        seq=int(str(row[0])), kind=cast(EventKind, kind) if kind in EVENT_KINDS else "revoke",
        doc_id=str(row[2]), version=int(str(row[3])), sha256=str(row[4]), path=str(row[5]),
        text=str(row[6]), declared=bool(row[7]), reason=str(row[8]),
        data=str(row[9] or "") if len(row) > 9 else "", recorded_at=str(row[10] or "") if len(row) > 10 else "",
    )


def rebuild(conn: Connection, backend: Backend, settings: ParseSettings,
            queue_fts: bool) -> None:
    """Rebuild every settings-dependent derived table from the log (inside the caller's
    transaction). ``queue_fts``: also queue every ever-active content for FTS rows (after a
    layout migration dropped them); a settings change keeps the FTS rows, which do not
    depend on the settings.
    """
    backend.clear_derived(conn)
    deriver = Deriver(conn, backend, settings, queue_fts=queue_fts)
    for event in iter_events(conn):
        deriver.apply(event)
    deriver.flush()
    conn.execute("INSERT INTO meta (key, value) VALUES ('fingerprint', ?)"
                 " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (fingerprint(settings),))


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None
