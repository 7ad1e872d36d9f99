"""The persistent index: an append-only SQLite event log, scan bookkeeping and FTS (SPEC §4).

Tables:

- ``events``: the source of truth, append-only (triggers refuse UPDATE and DELETE). Each scan
  appends its events and its ``files`` rows in one transaction, so a crash leaves either the
  whole scan or none of it.
- ``files``: per evidence path, the size and mtime seen last, its sha256, doc_id, declared
  version and the problem that kept it out of the index (JSON), so a rescan re-reads only
  files whose size or mtime changed.
- ``lines_fts``: FTS5 (``trigram`` tokenizer, which handles CJK) over the lines of each
  document's newest version; backs completion, suggestions and context retrieval.
- ``memory_entries`` (SPEC §11): derived from the memory events of the log (``remember``,
  ``approve``, ``forget``, in the same ``events`` table), see ``grounding_core.memory_store``.

The evidence files are only ever opened for reading.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
import stat as stat_mod
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import memory_store
from .config import Config
from .evidence import (
    EvidenceDocument,
    EvidenceError,
    decode_evidence,
    parse_evidence,
    parse_evidence_text,
)
from .index import ParseSettings, SearchHit
from .memory import MemoryEntry, MemoryEvent
from .model import Finding, Location, Span
from .state import EVENT_KINDS, Event, IndexState, MemorySnapshot, ParseCache, VersionRecord

EVENTS_TABLE = """
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('import', 'revoke', 'remember', 'approve', 'forget')),
  doc_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  sha256 TEXT NOT NULL DEFAULT '',
  path TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL DEFAULT '',
  declared INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  recorded_at TEXT NOT NULL,
  data TEXT
)"""
"""The log. ``data`` (JSON, nullable) holds the fields of memory events (SPEC §11)."""
EVENTS_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events"
    " BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events"
    " BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
)
SCHEMA = EVENTS_TABLE + ";\n" + ";\n".join(EVENTS_TRIGGERS) + """;
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  doc_id TEXT,
  declared_version INTEGER,
  problem TEXT
);
CREATE VIRTUAL TABLE IF NOT EXISTS lines_fts USING fts5(
  text, doc_id UNINDEXED, version UNINDEXED, line UNINDEXED, tokenize = 'trigram'
);
CREATE TABLE IF NOT EXISTS fts_docs (
  doc_id TEXT PRIMARY KEY,
  first_rowid INTEGER NOT NULL,
  last_rowid INTEGER NOT NULL
);
"""

FTS_LAYOUT = 1
"""``PRAGMA user_version`` once every ``lines_fts`` row is tracked in ``fts_docs`` (the rowid
range of each document's rows, so replacing one document's rows never scans the table)."""

MEMORY_LAYOUT = 2
"""``PRAGMA user_version`` once ``events`` accepts the memory kinds and has the JSON ``data``
column, and ``memory_entries`` is derived from the log (SPEC §11; :meth:`Store._upgrade_memory`)."""

ProgressCallback = Callable[[int, int, str], None]
"""Called as ``progress(done, total, path)`` while a scan reads files."""


class IndexError_(RuntimeError):
    """The index database cannot be opened or is not a Grounding index."""


@dataclass(frozen=True, slots=True)
class FileRow:
    """What the last scan saw of one evidence path (relative to the evidence root)."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    doc_id: str | None
    declared_version: int | None
    problem: dict[str, object] | None


@dataclass
class ScanResult:
    """The outcome of one scan.

    ``evidence`` maps every evidence path seen (relative to the evidence root) to its findings
    (spans in that file); ``changed`` lists paths re-read; ``events`` the events appended.
    """

    state: IndexState
    evidence: dict[str, list[Finding]] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    hashed_bytes: int = 0
    snapshot: MemorySnapshot | None = None
    """The index after the scan, as a frozen snapshot (the interface checks read)."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One event as ``grounding log`` shows it: no text. ``recorded_at`` is UTC ISO 8601."""

    seq: int
    kind: str
    doc_id: str
    version: int
    sha256: str
    path: str
    reason: str
    recorded_at: str
    data: str = ""
    """The JSON fields of a memory event (SPEC §11), else empty."""


class Store:
    """One index database (SPEC §4). Thread-safe: one lock serialises database access.

    ``path`` is a file path or ``":memory:"``. Raises :class:`IndexError_` when the file is
    not an SQLite database.
    """

    def __init__(self, path: str, settings: ParseSettings | None = None) -> None:
        self.path = path
        self._lock = threading.RLock()
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                         timeout=30)
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(SCHEMA)
            self._upgrade_memory()  # memory hook (SPEC §11): before the first read of events
            self._conn.executescript(memory_store.SCHEMA)
            self._reader, self._reader_lock = self._open_reader(path)
        except (sqlite3.Error, OSError) as exc:
            raise IndexError_(f"cannot open the index {path}: {exc}") from exc
        self.cache = ParseCache(settings or ParseSettings())
        self.memory = memory_store.MemoryTable(self._memory_query)
        """Memory entries for any ``replay(n)`` (SPEC §11); states read them at their seq."""
        self._state = IndexState(cache=self.cache, memory=self.memory)
        self._catch_up()
        self._upgrade_fts()
        self._mark_layout(MEMORY_LAYOUT)

    @classmethod
    def for_config(cls, config: Config) -> Store:
        """Open the index a workspace's configuration names."""
        return cls(
            config.index_path,
            ParseSettings(config.field_separators, config.meta_fields, config.subject_fields),
        )

    def close(self) -> None:
        with self._lock:
            if self._reader is not self._conn:
                with self._reader_lock:
                    self._reader.close()
            self._conn.close()

    # -- the log ----------------------------------------------------------------------------

    @property
    def state(self) -> IndexState:
        """The state after every event in the log (catching up with other writers)."""
        with self._lock:
            self._catch_up()
            return self._state

    def event_count(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
            return int(row[0])

    def events(self, upto: int | None = None) -> list[Event]:
        """The first ``upto`` events (all when None), in log order."""
        with self._lock:
            sql = "SELECT seq, kind, doc_id, version, sha256, path, text, declared, reason, data FROM events"
            args: tuple[int, ...] = ()
            if upto is not None:
                sql += " WHERE seq <= ?"
                args = (upto,)
            rows = self._conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [_event(row) for row in rows]

    def log_entries(self, doc_id: str | None = None) -> list[LogEntry]:
        """The log's events without their texts, in seq order (``grounding log``; SPEC §9).

        ``doc_id`` keeps only that document's events. Corpus-wide: for the CLI, not hot paths.
        """
        sql = "SELECT seq, kind, doc_id, version, sha256, path, reason, recorded_at, data FROM events"
        args: tuple[str, ...] = ()
        if doc_id is not None:
            sql += " WHERE doc_id = ?"
            args = (doc_id,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [LogEntry(int(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]), str(r[6]),
                         str(r[7]), str(r[8] or "")) for r in rows]

    def snapshot(self, at: int | None = None) -> MemorySnapshot:
        """A frozen :class:`~grounding_core.index.IndexSnapshot` of ``replay(at)`` (default: the
        whole log). Raises ValueError when ``at`` is negative or beyond the log.
        """
        state = self.state if at is None else self.replay(at)
        return MemorySnapshot(state, searcher=self.search)

    def replay(self, n: int) -> IndexState:
        """SPEC §4 ``replay(n)``; raises ValueError when n is negative or beyond the log."""
        count = self.event_count()
        if n < 0 or n > count:
            raise ValueError(f"--at {n}: the event log holds {count} events (use 0..{count})")
        return IndexState(cache=self.cache, memory=self.memory).apply(self.events(n))

    def _catch_up(self) -> None:
        rows = self._conn.execute(
            "SELECT seq, kind, doc_id, version, sha256, path, text, declared, reason, data FROM events"
            " WHERE seq > ? ORDER BY seq",
            (self._state.seq,),
        ).fetchall()
        if rows:
            self._state = self._state.apply(_event(r) for r in rows)

    def _append(self, events: Iterable[Event]) -> list[Event]:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        out: list[Event] = []
        for e in events:
            cur = self._conn.execute(
                "INSERT INTO events (kind, doc_id, version, sha256, path, text, declared, reason,"
                " recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (e.kind, e.doc_id, e.version, e.sha256, e.path, e.text, int(e.declared), e.reason, now),
            )
            seq = cur.lastrowid
            assert seq is not None
            out.append(Event(seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text,
                             e.declared, e.reason))
        return out

    # -- memory entries (SPEC §11): hooks for grounding_core.memory_store -----------------------

    def remember(self, scope: str, key: str, value: str, approved_by: str | None = None) -> MemoryEntry:
        """Append a ``remember`` event: the next version of ``(scope, key)`` (SPEC §11).

        Without ``approved_by`` the entry is a proposal. Raises
        :class:`~grounding_core.memory.MemoryWriteError` for bad names or values, or when the
        newest live version already holds this value.
        """
        return self._write_memory(lambda now: memory_store.remember(
            self._conn, scope, key, value, approved_by, now))

    def approve(self, scope: str, key: str, version: int, by: str) -> MemoryEntry:
        """Append an ``approve`` event for one version (no new version). Raises
        :class:`~grounding_core.memory.MemoryWriteError` when it cannot be approved.
        """
        return self._write_memory(lambda now: memory_store.approve(
            self._conn, scope, key, version, by, now))

    def forget(self, scope: str, key: str, reason: str = "") -> MemoryEntry:
        """Append a ``forget`` event: every version of the key becomes inactive (SPEC §15).
        Returns the newest version as forgotten. Raises
        :class:`~grounding_core.memory.MemoryWriteError` when nothing is left to forget.
        """
        return self._write_memory(lambda now: memory_store.forget(self._conn, scope, key, reason, now))

    def _write_memory(self, build: Callable[[str], MemoryEvent]) -> MemoryEntry:
        """Validate, append the event and update ``memory_entries`` in one transaction."""
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                event = memory_store.write_event(self._conn, build(now))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._catch_up()
            versions = self.memory.versions(event.seq, event.scope, event.key)
        version = event.version or max(versions)
        return versions[version]

    def _open_reader(self, path: str) -> tuple[sqlite3.Connection, threading.RLock]:
        """A second connection for memory reads, so checks never wait for a scan's transaction
        (WAL: readers see the last commit); ``:memory:`` shares the writer's connection.
        """
        if path == ":memory:":
            return self._conn, self._lock
        reader = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        reader.execute("PRAGMA query_only = 1")
        return reader, threading.RLock()

    def _memory_query(self, sql: str, args: Sequence[object]) -> list[tuple[object, ...]]:
        with self._reader_lock:
            return list(self._reader.execute(sql, tuple(args)).fetchall())

    def _upgrade_memory(self) -> None:
        """Migrate an index written before memory events (``user_version`` < 2, SPEC §11).

        SQLite cannot change a CHECK constraint in place, so ``events`` is copied, row for row
        and seq for seq, into a table that accepts the memory kinds and has the nullable JSON
        ``data`` column, inside one transaction (a crash leaves the old table whole); the
        append-only triggers are recreated. Then ``memory_entries`` is derived from the log.
        """
        conn = self._conn
        columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(events)").fetchall()}
        if "data" in columns:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(EVENTS_TABLE.replace("IF NOT EXISTS events", "events_v2", 1))
            conn.execute(
                "INSERT INTO events_v2 (seq, kind, doc_id, version, sha256, path, text, declared,"
                " reason, recorded_at) SELECT seq, kind, doc_id, version, sha256, path, text,"
                " declared, reason, recorded_at FROM events ORDER BY seq")
            conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
            conn.execute("DROP TABLE events")
            conn.execute("ALTER TABLE events_v2 RENAME TO events")
            for trigger in EVENTS_TRIGGERS:
                conn.execute(trigger)
            conn.execute(memory_store.SCHEMA.strip().rstrip(";"))
            memory_store.rebuild(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _mark_layout(self, layout: int) -> None:
        """Raise ``PRAGMA user_version`` to ``layout`` (never lowers it)."""
        with self._lock:
            if int(self._conn.execute("PRAGMA user_version").fetchone()[0]) < layout:
                self._conn.execute(f"PRAGMA user_version = {layout}")

    # -- scanning ---------------------------------------------------------------------------

    def scan(self, config: Config, progress: ProgressCallback | None = None) -> ScanResult:
        """Bring the index up to date with the evidence folder (SPEC §3, §4).

        Re-reads only files whose size or mtime changed, appends events only when content
        changed, and reports evidence findings for every file. Never writes evidence files.
        Raises FileNotFoundError when the evidence root does not exist.
        """
        root = config.evidence_root
        if not root.is_dir():
            raise FileNotFoundError(f"evidence folder {root} does not exist")
        candidates, refused = walk_evidence(config)
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._catch_up()
                result = self._scan_locked(config, candidates, refused, progress)
                state = self._state.apply(result.events) if result.events else self._state
                if result.events:
                    # The FTS rows derive from the events: refreshing them in the same
                    # transaction means a crash leaves both or neither (a refresh after
                    # COMMIT could be lost for good), and one transaction keeps a
                    # 100k-line file from costing one FTS commit per line.
                    self._refresh_fts(state, {e.doc_id for e in result.events})
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._state = state
            result.state = state
            result.snapshot = MemorySnapshot(state, searcher=self.search)
        return result

    def _scan_locked(
        self,
        config: Config,
        candidates: dict[str, Path],
        refused: dict[str, Finding],
        progress: ProgressCallback | None,
    ) -> ScanResult:
        old_rows = {r.path: r for r in self._file_rows()}
        rows: dict[str, FileRow] = {}
        fresh: dict[str, EvidenceDocument] = {}
        result = ScanResult(state=self._state)
        todo = sorted(candidates)
        for done, rel in enumerate(todo, 1):
            abs_path = candidates[rel]
            try:
                st = abs_path.stat()
            except OSError:
                continue  # deleted while scanning: treated as absent
            old = old_rows.get(rel)
            if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                rows[rel] = old
                continue
            try:
                data = _read_bytes(abs_path)
            except FileNotFoundError:
                continue  # deleted between the walk and the read: treated as absent
            except OSError as exc:
                refused[rel] = _file_finding("unreadable-evidence", f"cannot read the file: {exc.strerror}")
                continue
            result.hashed_bytes += len(data)
            result.changed.append(rel)
            row, doc = self._parse_row(rel, data, st, config)
            rows[rel] = row
            if doc is not None:
                fresh[rel] = doc
            if progress is not None:
                progress(done, len(todo), rel)
        self._refuse_lowered_versions(rows, fresh)
        # rows for files that vanished are dropped; their versions are revoked below. Only
        # rows that differ are written: the table ends up holding exactly ``rows``.
        self._conn.executemany("DELETE FROM files WHERE path = ?",
                               [(rel,) for rel in old_rows if rel not in rows])
        self._conn.executemany(
            "INSERT OR REPLACE INTO files"
            " (path, size, mtime_ns, sha256, doc_id, declared_version, problem)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(r.path, r.size, r.mtime_ns, r.sha256, r.doc_id, r.declared_version,
              json.dumps(r.problem, ensure_ascii=False) if r.problem else None)
             for rel, r in rows.items() if old_rows.get(rel) != r],
        )
        findings: dict[str, list[Finding]] = {rel: [] for rel in rows}
        for rel, finding in refused.items():
            findings.setdefault(rel, []).append(finding)
        for rel, row in rows.items():
            if row.problem:
                findings[rel].append(_finding_from_problem(row.problem))
        chosen = self._choose(rows, findings, config)
        pending = self._reconcile(chosen, rows, fresh, candidates, config)
        result.events = self._append(pending)
        state_after = self._state.apply(result.events)
        for (doc_id, declared), rel in chosen.items():
            record = state_after.record(doc_id, declared) if declared is not None else None
            if record is not None and record.previous_shas and record.declared:
                findings[rel].append(Finding(
                    "version-reuse", Span(0, 0, 0, 3),
                    f"the content of {doc_id}@{declared} changed but its declared version did not;"
                    f" citations pinned to the old hash ({record.previous_shas[-1][:12]}) now fail",
                    hint="Raise 'version' in the front matter whenever the content changes.",
                ))
        result.evidence = findings
        return result

    def _refuse_lowered_versions(
        self, rows: dict[str, FileRow], fresh: dict[str, EvidenceDocument]
    ) -> None:
        """A file may not lower its declared version (docs/decisions.md, Index).

        When a re-read file declares version N of a doc_id whose newest known version M > N
        was imported from this same path, and no file declares M any more, the file is
        ``invalid-front-matter`` and not indexed (so M is revoked like any version whose
        front matter broke). Archives that declare older versions in other files are fine.
        """
        declared = {(r.doc_id, r.declared_version) for r in rows.values()
                    if r.problem is None and r.doc_id is not None}
        for rel, doc in list(fresh.items()):
            wanted = doc.front.version
            newest = self._state.newest(doc.doc_id)
            if (wanted is None or newest is None or newest.version <= wanted
                    or newest.path != rel or (doc.doc_id, newest.version) in declared):
                continue
            line = next((i + 1 for i in range(1, max(doc.front.end_line - 1, 1))
                         if doc.lines[i].startswith("version")), 1)
            problem: dict[str, object] = {
                "name": "invalid-front-matter",
                "message": f"version: {wanted} is lower than version {newest.version} of"
                f" {doc.doc_id!r}, which the index already holds from this file; a document's"
                " versions only go up, so this file is not indexed",
                "line": line,
                "hint": f"Declare version {newest.version + 1} (or higher) to publish this"
                " content; to keep an older version, archive it in another file.",
            }
            row = rows[rel]
            rows[rel] = FileRow(row.path, row.size, row.mtime_ns, row.sha256, None, None, problem)
            del fresh[rel]

    def _parse_row(
        self, rel: str, data: bytes, st: os.stat_result, config: Config
    ) -> tuple[FileRow, EvidenceDocument | None]:
        sha = hashlib.sha256(data).hexdigest()
        try:  # parse_evidence() minus hashing the bytes a second time
            doc = parse_evidence_text(rel, decode_evidence(data), sha, config.field_separators,
                                      config.subject_fields)
        except EvidenceError as exc:
            problem: dict[str, object] = {"name": exc.name, "message": exc.message,
                                          "line": exc.line, "hint": exc.hint}
            return FileRow(rel, st.st_size, st.st_mtime_ns, sha, None, None, problem), None
        row = FileRow(rel, st.st_size, st.st_mtime_ns, sha, doc.doc_id, doc.front.version, None)
        return row, doc

    def _choose(
        self, rows: dict[str, FileRow], findings: dict[str, list[Finding]], config: Config
    ) -> dict[tuple[str, int | None], str]:
        """SPEC §3 duplicate rule -> {(doc_id, declared version or None): path}."""
        groups: dict[str, list[FileRow]] = {}
        for row in rows.values():
            if row.doc_id is not None and row.problem is None:
                groups.setdefault(row.doc_id, []).append(row)
        chosen: dict[tuple[str, int | None], str] = {}
        ev = config.evidence_display
        for doc_id, group in groups.items():
            group.sort(key=lambda r: r.path)
            if len(group) == 1:
                chosen[(doc_id, group[0].declared_version)] = group[0].path
                continue
            if any(r.declared_version is None for r in group):
                dup_sets = [group]
            else:
                by_version: dict[int | None, list[FileRow]] = {}
                for r in group:
                    by_version.setdefault(r.declared_version, []).append(r)
                dup_sets = []
                for version, same in by_version.items():
                    if len(same) == 1:
                        chosen[(doc_id, version)] = same[0].path
                    else:
                        dup_sets.append(same)
            for same in dup_sets:
                first = same[0]
                chosen[(doc_id, first.declared_version)] = first.path
                for r in same:
                    others = [o for o in same if o is not r]
                    kept = "this file is indexed" if r is first else f"only {ev(first.path)} is indexed"
                    findings[r.path].append(Finding(
                        "duplicate-doc-id", Span(0, 0, 0, 3),
                        f"doc_id {doc_id!r} is also claimed by "
                        + ", ".join(ev(o.path) for o in others)
                        + f" without distinct declared versions; {kept}",
                        hint="Give each file its own doc_id, or declare distinct 'version' values.",
                        related=tuple(Location(ev(o.path), 1) for o in others),
                    ))
        return chosen

    def _reconcile(
        self,
        chosen: dict[tuple[str, int | None], str],
        rows: dict[str, FileRow],
        fresh: dict[str, EvidenceDocument],
        candidates: dict[str, Path],
        config: Config,
    ) -> list[Event]:
        state = self._state
        events: list[Event] = []
        targeted: set[tuple[str, int]] = set()
        settings = self.cache.settings
        same_parse = (tuple(config.field_separators) == settings.separators
                      and tuple(config.subject_fields) == settings.subject_fields)
        for (doc_id, declared), rel in sorted(chosen.items(), key=lambda kv: kv[1]):
            row = rows[rel]
            if declared is not None:
                version = declared
                current = state.record(doc_id, version)
            else:
                current = state.newest(doc_id)
                version = current.version if current is not None else 1
                if current is not None and current.sha256 != row.sha256:
                    targeted.add((doc_id, current.version))  # superseded, not deleted
                    version = current.version + 1
                    current = None
            targeted.add((doc_id, version))
            if current is not None and current.sha256 == row.sha256 and current.path == rel:
                if not current.revoked or current.reason == "status: revoked":
                    continue
            doc = fresh.get(rel)
            if doc is None:
                try:
                    doc = parse_evidence(rel, _read_bytes(candidates[rel]), config.field_separators,
                                         config.subject_fields)
                except (OSError, EvidenceError):
                    continue
            events.append(Event(0, "import", doc_id, version, doc.sha256, rel, doc.text,
                                declared is not None))
            if same_parse:  # the state would parse this text again, to the same document
                self.cache.docs.setdefault((doc_id, doc.sha256, rel), doc)
            if doc.front.status == "revoked":
                events.append(Event(0, "revoke", doc_id, version, reason="status: revoked"))
        for doc_id in state.doc_ids():
            versions = state.versions(doc_id)
            newest = max(versions)
            for version, record in versions.items():
                if record.revoked or (doc_id, version) in targeted:
                    continue
                if not record.declared and version != newest:
                    continue  # an older automatic version, superseded, not deleted
                gone = record.path not in rows
                reason = "deleted" if gone else "no longer indexed from " + record.path
                events.append(Event(0, "revoke", doc_id, version, reason=reason))
        return events

    def _file_rows(self) -> list[FileRow]:
        rows = self._conn.execute(
            "SELECT path, size, mtime_ns, sha256, doc_id, declared_version, problem FROM files"
        ).fetchall()
        return [FileRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if r[6] else None)
                for r in rows]

    # -- full-text search -------------------------------------------------------------------

    def _refresh_fts(self, state: IndexState, doc_ids: Iterable[str]) -> None:
        """Replace the FTS rows of ``doc_ids`` with their newest versions' lines in ``state``.

        Call inside the scan's transaction (see :meth:`scan`). A document's rows get
        consecutive rowids, recorded in ``fts_docs``, so removing them is a rowid-range delete
        (a ``doc_id`` filter would scan the whole table: quadratic over a cold index).
        """
        conn = self._conn
        last = conn.execute("SELECT rowid FROM lines_fts ORDER BY rowid DESC LIMIT 1").fetchone()
        next_rowid = (int(last[0]) if last else 0) + 1
        for doc_id in doc_ids:
            old = conn.execute("SELECT first_rowid, last_rowid FROM fts_docs WHERE doc_id = ?",
                               (doc_id,)).fetchone()
            if old is not None:
                conn.execute("DELETE FROM lines_fts WHERE rowid BETWEEN ? AND ?", old)
                conn.execute("DELETE FROM fts_docs WHERE doc_id = ?", (doc_id,))
            newest = state.newest(doc_id)
            if newest is None:
                continue
            doc = state.document(newest)
            rows = [(text, doc_id, newest.version, i) for i, text in enumerate(doc.lines, 1)
                    if text.strip() and not doc.is_front_matter_line(i)]
            if not rows:
                continue
            conn.executemany(
                "INSERT INTO lines_fts (rowid, text, doc_id, version, line) VALUES (?, ?, ?, ?, ?)",
                [(next_rowid + k, *row) for k, row in enumerate(rows)],
            )
            conn.execute("INSERT INTO fts_docs (doc_id, first_rowid, last_rowid) VALUES (?, ?, ?)",
                         (doc_id, next_rowid, next_rowid + len(rows) - 1))
            next_rowid += len(rows)

    def _upgrade_fts(self) -> None:
        """Rebuild the FTS rows once for an index written before ``fts_docs`` existed."""
        with self._lock:
            if self._conn.execute("PRAGMA user_version").fetchone()[0] >= FTS_LAYOUT:
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._conn.execute("PRAGMA user_version").fetchone()[0] < FTS_LAYOUT:
                    self._catch_up()
                    if self._conn.execute("SELECT 1 FROM lines_fts LIMIT 1").fetchone():
                        self._conn.execute("DELETE FROM lines_fts")
                        self._conn.execute("DELETE FROM fts_docs")
                        self._refresh_fts(self._state, self._state.doc_ids())
                    self._conn.execute(f"PRAGMA user_version = {FTS_LAYOUT}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        """FTS5 trigram search over the newest versions' lines, best first.

        Each whitespace-separated term must occur (``any_term``: at least one term, ranked by
        how many of the query's trigrams a line holds, which suits CJK questions without
        spaces). Terms shorter than 3 code points cannot use the trigram index; when every
        term is that short the search falls back to a substring scan (``instr``). ``rank`` is
        bm25 (lower is better). Returns at most ``limit`` hits.
        """
        terms = [t for t in query.split() if t]
        if not terms:
            return []
        long_terms = [t for t in terms if len(t) >= 3]
        short_terms = [t for t in terms if len(t) < 3]
        rows: list[tuple[str, int, int, str, float]] = []
        with self._lock:
            if long_terms and (any_term or not short_terms):
                if any_term:
                    grams = sorted({t[i:i + 3] for t in long_terms for i in range(len(t) - 2)})
                    match = " OR ".join(_fts_string(g) for g in grams)
                else:
                    match = " AND ".join(_fts_string(t) for t in long_terms)
                rows.extend(self._conn.execute(
                    "SELECT doc_id, version, line, text, bm25(lines_fts) FROM lines_fts"
                    " WHERE lines_fts MATCH ? ORDER BY bm25(lines_fts), doc_id, line LIMIT ?",
                    (match, limit),
                ).fetchall())
            if short_terms and (any_term or not long_terms):
                # too short for trigrams: substring scan, ranked by how many terms a line holds
                joiner = " OR " if any_term else " AND "
                # instr(), not LIKE: FTS5's trigram LIKE matches nothing below 3 characters
                like = joiner.join("instr(text, ?) > 0" for _ in short_terms)
                hits = " + ".join("(instr(text, ?) > 0)" for _ in short_terms)
                patterns = list(short_terms)
                rows.extend(self._conn.execute(
                    f"SELECT doc_id, version, line, text, -1.0 * ({hits}) AS score FROM lines_fts"
                    f" WHERE {like} ORDER BY score, doc_id, line LIMIT ?",
                    (*patterns, *patterns, limit),
                ).fetchall())
        best: dict[tuple[str, int], tuple[str, int, int, str, float]] = {}
        for row in rows:
            key = (row[0], int(row[2]))
            if key not in best or float(row[4]) < float(best[key][4]):
                best[key] = row
        rows = sorted(best.values(), key=lambda r: (float(r[4]), r[0], int(r[2])))[:limit]
        return [SearchHit(r[0], int(r[1]), int(r[2]), r[3], float(r[4])) for r in rows]


def _fts_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def walk_evidence(config: Config) -> tuple[dict[str, Path], dict[str, Finding]]:
    """List evidence files (SPEC §2): ``{rel_path: absolute path}`` plus refused paths.

    ``.git`` and ``.grounding`` are never walked; symlinked folders are not followed; a
    symlink to a file inside the root is indexed once under its target; a symlink whose
    target is outside the evidence root (or loops) is refused with ``unreadable-evidence``
    and never read. Files reached twice (hard links) are indexed once, under the path that
    sorts first.
    """
    root = config.evidence_root
    root_len = len(str(root))
    found: dict[str, Path] = {}
    refused: dict[str, Finding] = {}
    inodes: dict[tuple[int, int], str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", ".grounding"))
        # string paths and one lstat per plain file: pathlib costs more than the walk itself
        folder = Path(dirpath)
        prefix = dirpath[root_len:].lstrip(os.sep).replace(os.sep, "/")
        prefix = prefix + "/" if prefix else ""
        for name in sorted(filenames):
            rel = prefix + name
            if not config.evidence_matches(rel):
                continue
            try:
                lst = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            full = target = folder / name
            if not stat_mod.S_ISLNK(lst.st_mode):
                st = lst
            else:
                try:
                    target = Path(os.path.realpath(full, strict=True))
                except OSError:
                    refused[rel] = _file_finding(
                        "unreadable-evidence", "symlink is broken or loops; not read")
                    continue
                if not target.is_relative_to(root):
                    refused[rel] = _file_finding(
                        "unreadable-evidence",
                        f"symlink points outside the evidence root ({target}); refused, never read",
                        "Copy the document into the evidence folder instead of linking to it.")
                    continue
                rel_target = target.relative_to(root).as_posix()
                if any(part in (".git", ".grounding") for part in rel_target.split("/")):
                    continue
                rel = rel_target
                try:
                    st = target.stat()
                except OSError:
                    continue
            if not stat_mod.S_ISREG(st.st_mode):
                continue
            key = (st.st_dev, st.st_ino)
            if key in inodes and inodes[key] != rel:
                if rel < inodes[key]:
                    del found[inodes[key]]
                else:
                    continue
            inodes[key] = rel
            found[rel] = target
    return found, refused


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _file_finding(name: str, message: str, hint: str = "") -> Finding:
    return Finding(name, Span(0, 0, 0, 0), message, hint=hint)


def _finding_from_problem(problem: dict[str, object]) -> Finding:
    line = int(str(problem.get("line", 1)))
    return Finding(str(problem["name"]), Span(max(line - 1, 0), 0, max(line - 1, 0), 0),
                   str(problem["message"]), hint=str(problem.get("hint", "")))


def _event(row: Sequence[object]) -> Event:
    kind = str(row[1])
    return Event(
        seq=int(str(row[0])), kind=kind if kind in EVENT_KINDS else "revoke",  # type: ignore[arg-type]
        doc_id=str(row[2]), version=int(str(row[3])), sha256=str(row[4]), path=str(row[5]),
        text=str(row[6]), declared=bool(row[7]), reason=str(row[8]),
        data=str(row[9]) if len(row) > 9 and row[9] is not None else "",
    )


def record_location(config: Config, record: VersionRecord, line: int) -> Location:
    """Where a version's line lives, relative to the workspace root (for related info)."""
    return Location(config.evidence_display(record.path), line)
