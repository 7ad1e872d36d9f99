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

Image versions (SPEC §12; ``grounding_core.images.ImageDocument``): their lines are the
regions' measured attributes; each is a ``field_lines`` row whose ``subject`` is the region's
``SUBJECT#rN`` (so regions never share a conflict key) and a ``region_values`` row; they add no
known terms (region values are not GR110 terms, docs/decisions.md) and no full-text rows. The
image's subject and its attribute names are question-grammar ``vocabulary`` rows (SPEC §13), as
a text version's are.

Plain SQL only (``ON CONFLICT DO NOTHING``, no SQLite-only syntax); the two lookups that use
``json_each`` go through the backend (:class:`~grounding_core.sqlite_backend.SqliteBackend`).
Meta fields are filtered when read, so the rows depend only on the field separators and
subject fields (the *settings fingerprint*, see :func:`fingerprint`).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import unicodedata
from collections.abc import Iterator
from typing import cast

from .events import EVENT_KINDS, MEMORY_KINDS, Event, EventKind
from .evidence import EvidenceDocument, EvidenceError, FrontMatter, parse_evidence_text
from .images import MEASUREMENT_VERSION, ImageDocument, attribute_of_line, image_document_from_event, is_image_path
from .index import ParseSettings
from .sqlite_backend import DERIVED_VERSION, SqliteBackend, text_hash
from .text import VALUE_TRAILING_PUNCTUATION, split_lines

BATCH_LINES = 50_000
"""Field lines buffered before they are written (bounded memory during a cold index)."""

KEY_CACHE = 100_000
"""At most this many field names (normalised forms) and key texts (hashes) are remembered
during one scan."""


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

    def __init__(self, conn: sqlite3.Connection, backend: SqliteBackend, settings: ParseSettings,
                 queue_fts: bool = True) -> None:
        self.conn = conn
        self.backend = backend
        self.settings = settings
        self.queue_fts = queue_fts
        self._field_terms: dict[str, str] = {}
        self._hashes: dict[str, int] = {}
        self._lines: list[tuple[int, int, int, str, str, str | None, int, int, str | None]] = []
        self._regions: list[tuple[str, str, int, int]] = []
        self._image_fields: set[str] = set()
        self._terms: set[tuple[str, str, str, str, int, int, int]] = set()
        self._fields: list[tuple[int, str]] = []
        self._fts: list[tuple[int]] = []
        self._names: set[tuple[str, str]] = set()
        """(kind, name) of question-grammar names seen (``s`` subject, ``f`` field; SPEC §13)."""
        self._names_written: set[tuple[str, str]] = set()
        self._subjects: list[tuple[int, int]] = []
        self.activity_changed: set[int] = set()
        """content_ids whose activity changed (for cache invalidation)."""

    # -- events --------------------------------------------------------------------------------

    def apply(self, event: Event, doc: EvidenceDocument | None = None) -> None:
        if event.kind in MEMORY_KINDS:
            return  # memory events (SPEC §11) derive memory_entries (grounding_core.memory_store)
        if event.kind == "import":
            self._import(event, doc if doc is not None else parse_content(event, self.settings))
        else:
            self._revoke(event)

    def _import(self, event: Event, doc: EvidenceDocument) -> None:
        conn, s = self.conn, event.seq
        prev = conn.execute(
            "SELECT content_id, first_sha256 FROM versions"
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
        if newest is not None and event.version > newest:
            for (cid,) in conn.execute(
                    "SELECT content_id FROM versions WHERE doc_id = ? AND version = ?"
                    " AND current_to IS NULL AND active_from IS NOT NULL AND active_to IS NULL",
                    (event.doc_id, newest)).fetchall():
                conn.execute("UPDATE versions SET active_to = ? WHERE content_id = ?", (s, cid))
                self.activity_changed.add(int(cid))
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
        sh = self._hash(doc.subject or "")
        if doc.subject and doc.field_lines:  # question hook (SPEC §13): a known subject
            self._subjects.append((sh, s))
            self._names.add(("s", doc.subject))
        if isinstance(doc, ImageDocument):
            self._image_lines(doc, s)
            return
        buffer, terms, hashed = self._lines, self._terms, self._hash
        for number, fl in doc.field_lines.items():
            name = fl.field
            fh = hashed(name)
            norm = normalize_fast(fl.value)
            term = norm.rstrip(VALUE_TRAILING_PUNCTUATION)
            th = text_hash(term)
            buffer.append((fh, sh, th, name, norm, None if norm == fl.value else fl.value, number, s, None))
            if len(term) >= 2:
                terms.add((term[:3], term[3:6] if len(term) >= 6 else "", term, "v", fh, sh, th))
            if name not in self._field_terms:
                field_term = self._field_terms[name] = normalize_fast(name)
                self._fields.append((fh, name))
                self._names.add(("f", name))  # question hook (SPEC §13): a known field name
                if len(field_term) >= 2:
                    terms.add((field_term[:3], field_term[3:6] if len(field_term) >= 6 else "", field_term, "f",
                               fh, 0, text_hash(field_term)))
        if self.queue_fts:
            self._fts.append((s,))
        if len(buffer) >= BATCH_LINES:
            self.flush()

    def _image_lines(self, doc: ImageDocument, s: int) -> None:
        """An image version's attributes: field lines keyed ``(SUBJECT#rN, FIELD)`` and
        ``region_values`` rows; no known terms, no full-text rows (module docstring).
        """
        for number, fl in doc.field_lines.items():
            subject = doc.line_subject(number)
            norm = normalize_fast(fl.value)
            self._lines.append((self._hash(fl.field), self._hash(subject),
                                text_hash(norm.rstrip(VALUE_TRAILING_PUNCTUATION)), fl.field, norm,
                                None if norm == fl.value else fl.value, number, s, subject))
            self._regions.append((fl.field, fl.value, s, attribute_of_line(number)[0]))
            if fl.field not in self._image_fields:  # (the field name is no known term either)
                self._image_fields.add(fl.field)
                self._fields.append((self._hash(fl.field), fl.field))
                self._names.add(("f", fl.field))  # question hook (SPEC §13): a known field name
        if len(self._lines) >= BATCH_LINES:
            self.flush()

    def _hash(self, text: str) -> int:
        cached = self._hashes.get(text)
        if cached is None:
            if len(self._hashes) > KEY_CACHE:
                self._hashes.clear()
            cached = self._hashes[text] = text_hash(text)
        return cached

    def _revoke(self, event: Event) -> None:
        row = self.conn.execute(
            "SELECT content_id, active_from, active_to FROM versions"
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
        if len(self._field_terms) > KEY_CACHE:
            self._field_terms.clear()

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


def normalize_fast(text: str) -> str:
    """:func:`grounding_core.text.normalize` (NFKC, then every whitespace removed), skipping
    the NFKC pass when the text is already normalised (most evidence text is): the same
    result, about twice as fast on the cold index's hundreds of thousands of values.
    """
    if not (text.isascii() or unicodedata.is_normalized("NFKC", text)):
        text = unicodedata.normalize("NFKC", text)
    return "".join(text.split())


def iter_events(conn: sqlite3.Connection, after: int = 0, upto: int | None = None,
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


def event_of(row: tuple[object, ...] | sqlite3.Row) -> Event:
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


def rebuild(conn: sqlite3.Connection, backend: SqliteBackend, settings: ParseSettings,
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
