"""The persistent index (SPEC §4): the event log, its derived tables, scans and full-text search.

A :class:`Store` is one index database (an SQLite file, ``sqlite_backend.py``, or a shared
PostgreSQL database, ``postgres_backend.py``; ``backend.py`` is the interface). The
append-only ``events`` table is the source of truth; the derived tables (``derived.py``)
are maintained in the same transaction as the events they derive from, and answer any
``replay(n)`` without a rebuild, so :meth:`Store.snapshot` is cheap for any ``n``
(``sql_snapshot.py``). docs/architecture.md describes the tables and what runs where.

- :meth:`Store.scan` brings the index up to date with the evidence folder: a full walk, or
  only the paths a watcher names (``paths``). It re-reads files whose stat key changed,
  appends events only when content changed, and commits events, derived rows, file rows and
  evidence findings in one transaction (a crash leaves the whole scan or none of it).
- Full-text rows are built after the index is usable: the scan queues the contents that need
  them and :meth:`Store.build_fts` drains the queue in small transactions (the server in the
  background, the CLI when a ``query`` context needs it). Until then
  :attr:`IndexSnapshot.search_complete` is False.
- Memory entries (SPEC §11): :meth:`Store.remember`, :meth:`Store.approve` and
  :meth:`Store.forget` append ``remember``/``approve``/``forget`` events to the same log and
  update the derived ``memory_entries`` table in the same transaction
  (``grounding_core.memory_store``); nothing else ever writes memory.

Thread-safety: writes (scans, FTS batches) are serialised by one lock on the writer
connection; snapshots read through per-thread connections and never wait for a writer.
The evidence files are only ever opened for reading.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, field
from typing import Any, overload

from . import collector, memory_store
from . import scan as scanning
from .backend import (
    LOCK_WAIT_S,
    Backend,
    BackendError,
    Connection,
    LockTimeout,
    NewerLayout,
    ReadOnlyIndex,
    open_backend,
    redact,
    text_hash,
)
from .config import Config, ConfigError
from .derived import Deriver, event_of, fingerprint, iter_events, rebuild
from .events import MEMORY_KINDS, Event
from .evidence import EvidenceDocument, EvidenceError, decode_evidence, parse_evidence_text
from .images import (
    MEASUREMENT_VERSION,
    ImageDocument,
    Measurement,
    image_document,
    is_image_path,
    measure,
    sidecar_path,
    sidecar_text,
)
from .index import ConflictKey, IndexSnapshot, IndexStats, ParseSettings, SearchHit, VersionRecord
from .memory import MemoryEntry, MemoryEvent, MemoryWriteError
from .model import Finding, Location, Span
from .scan import FileRow, Listing, StatKey, Unstable, finding_dict, finding_of
from .sql_snapshot import DocumentCache, MeasurementCache, SqlSnapshot
from .sqlite_backend import LINE_BITS, LINE_MASK

ProgressCallback = Callable[[int, int, str], None]
"""Called as ``progress(done, total, path)`` while a scan reads files."""

_OPEN_ERRORS: tuple[type[BaseException], ...] = (OSError, sqlite3.Error)
"""What opening an SQLite file may raise (a PostgreSQL backend raises BackendError)."""

FTS_BATCH = 200
"""Contents per FTS transaction (a crash loses at most one batch, redone later)."""

PAUSE_FILES = 64
"""Stat keys a scan compares between two calls of its ``pause`` hook (it also pauses before
each file it reads)."""

FRESH_CHARS = 1_000_000
"""Code points of parsed documents a scan keeps between reading and importing them (beyond,
they are read again when imported, :attr:`ScanResult.read_again`): only the documents that
wait for the end of the scan (:meth:`_Scan._import_now` imports the others as read): on the
generated corpora the second and later versions of a doc_id, 878 files at 10k. 4 M was about
45 MB of parsed documents at 10k and 30k files; 1 M reads about 640 of them again at 10k
(cold index CPU unchanged, 14.1-14.2 -> 13.2-13.4 s; peak RSS 169 -> 144 MB, 224 -> 190 MB at
30k)."""

KEEP_PARSED_IMPORTS = 64
"""A scan puts the documents it imports into the store's parsed-document cache for its first
this many imports only: a watcher's few changed files are what the open drafts re-check next,
but a cold index or a 1,000-file storm would fill the cache (8 M code points, about 110 MB of
parsed documents) with whatever was imported last, evicting the documents drafts cite, and
hold that memory after the scan (docs/decisions.md "Parsed documents a scan keeps")."""

FTS_FORM = "nfkc"
"""The form of the text in full-text rows (``meta.fts_form``): lines after Unicode NFKC. An
index whose rows have another form is re-queued on open (:meth:`Store._ensure_fts_form`)."""

SCAN_CHUNK = 512
"""doc_ids the end of a scan reconciles together (their groups, events and file rows): what
it holds in memory at once, whatever the number of files (a cold index: every doc_id)."""

STAGE_CHUNK = 512
"""Rows (staged file rows, appended events) read back from the database at a time."""

INHERIT_EVENTS = 200
"""A new snapshot inherits the previous one's caches across at most this many events: finding
what the events changed parses every content whose activity changed (1,000 changed files took
3 s of a storm's rescan), while fresh caches cost only the next checks' lookups."""

walk_evidence = scanning.walk_evidence  # re-exported for callers of the old module


UPSERT_FILE_ROW = (
    "INSERT INTO files (path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version,"
    " problem, findings) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,"
    " ctime_ns = excluded.ctime_ns, inode = excluded.inode, sha256 = excluded.sha256,"
    " doc_id = excluded.doc_id, declared_version = excluded.declared_version,"
    " problem = excluded.problem, findings = excluded.findings")
"""Write one ``files`` row (the scan's stat key, hash and findings of a path), replacing the
path's earlier row (plain SQL both backends run)."""


class IndexError_(RuntimeError):
    """The index database cannot be opened or is not a Grounding index."""


class IndexBusy(IndexError_):
    """Another process holds the index's write lock (it is indexing) longer than the scan
    waited for it. The committed state stays readable: :meth:`Store.snapshot` and
    :meth:`Store.evidence_findings` answer from it without the lock.
    """


class NoEvidenceMatched(ConfigError):
    """A full walk found files in the evidence folder but no evidence glob matches any of
    them, while files the index holds are still there: the globs are wrong (a typo, a changed
    extension), not the evidence gone. Nothing is written; the committed index stays.
    """


class IndexTooNew(IndexError_):
    """The index was written by a newer Grounding (a higher layout): refused, never written
    and never replaced by an in-memory index (docs/decisions.md, "Index").
    """




@dataclass
class ScanResult:
    """The outcome of one scan.

    - ``snapshot``: the index after the scan (the interface checks read);
    - ``evidence``: findings by evidence path (relative to the evidence root; spans in that
      file): every path for a full walk, the paths looked at and those whose findings changed
      for a ``paths`` scan (:meth:`Store.evidence_findings` lists every path);
    - ``changed``: paths re-read whose stat key changed; ``events``: the events appended
      (a scan's own: :class:`AppendedEvents`, read from the log without their texts);
    - ``findings_changed``: paths whose evidence findings differ from before the scan;
    - ``unstable``: paths that changed while read and were not indexed from that read (read
      them again when stable; the CLI already retried briefly);
    - ``hashed_bytes``: bytes read and hashed; ``full``: a full walk;
    - ``writer``: None when this process wrote the scan; else who writes the shared index
      (this process is a reader: nothing was read or appended, ``evidence`` is the writer's).
    - ``measured``: images measured (SPEC §12). A PNG re-read whose sha256 the index measured
      before (any path, any earlier scan) is not measured again: its cached measurement is used.
    - ``read_again``: files read a second time by this scan to import them (their parsed
      document had left the scan's bounded cache, :data:`FRESH_CHARS`). The first file of a
      doc_id the index did not hold before is imported right after it is read, so a cold index
      reads every file once; only later files of a doc_id (archives, duplicates), files of
      doc_ids the index already held, and files read while an earlier path still waited to
      settle are imported at the end, and may be read again.
    """

    snapshot: IndexSnapshot
    evidence: dict[str, list[Finding]] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    events: Sequence[Event] = field(default_factory=list)
    hashed_bytes: int = 0
    findings_changed: list[str] = field(default_factory=list)
    unstable: list[str] = field(default_factory=list)
    full: bool = True
    writer: str | None = None
    measured: int = 0
    read_again: int = 0

    @property
    def state(self) -> IndexSnapshot:
        """The snapshot (the name earlier callers used)."""
        return self.snapshot


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
    """One index database (SPEC §4); see the module docstring.

    ``path`` is a file path or ``":memory:"`` (a temporary file, deleted on close). Raises
    :class:`IndexError_` when the file cannot be opened or is not an SQLite database.
    """

    def __init__(self, path: str, settings: ParseSettings | None = None) -> None:
        self.path = path
        self.location = redact(path)
        """The index location for messages (a URL without its password)."""
        self.settings = settings or ParseSettings()
        self.closed = False
        """:meth:`close` was called."""
        self.documents = DocumentCache()
        self.measurements = MeasurementCache()
        self.derivation = 0
        self._lock = threading.RLock()
        """Serialises writers (scans, FTS batches, rebuilds) on the writer connection."""
        self._latest_lock = threading.Lock()
        self._latest: tuple[int, SqlSnapshot] | None = None
        try:
            self.backend: Backend = open_backend(path)
        except NewerLayout as exc:
            raise IndexTooNew(str(exc)) from None
        except BackendError as exc:
            raise IndexError_(str(exc)) from exc
        except _OPEN_ERRORS as exc:
            raise IndexError_(f"cannot open the index {self.location}: {exc}") from exc
        failures: tuple[type[BaseException], ...] = (*self.backend.errors, BackendError, LockTimeout)
        try:
            migrated = self.backend.create_schema()
            self._ensure_derived(force=migrated, queue_fts=migrated)
            self._ensure_fts_form()
        except NewerLayout as exc:
            self.backend.close()
            raise IndexTooNew(str(exc)) from None
        except failures as exc:
            try:
                self.backend.close()
            except Exception:  # noqa: BLE001  (closing a half-opened backend)
                pass
            raise IndexError_(f"cannot open the index {self.location}: {exc}") from exc

    @classmethod
    def for_config(cls, config: Config) -> Store:
        """Open the index a workspace's configuration names."""
        return cls(config.index_path,
                   ParseSettings(config.field_separators, config.meta_fields, config.subject_fields,
                                 config.image_language))

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.backend.close()

    # -- derived tables ------------------------------------------------------------------------

    def _ensure_derived(self, force: bool = False, queue_fts: bool = False) -> None:
        """Rebuild the derived tables from the log when they were made with other settings
        (or after a layout migration), in one transaction.

        A reader of a shared index cannot rebuild: when the index was derived with other
        parse settings, it raises :class:`IndexError_` naming both (every process sharing an
        index must use the writer's ``field_separators`` and ``subject_fields``), or saying
        that another Grounding derived it (:func:`_derived_mismatch`).
        """
        with self._lock:
            current = self.backend.reader().execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
            wanted = fingerprint(self.settings)
            if not force and current is not None and current[0] == wanted:
                return
            if not self.backend.can_write():
                if current is None and not force:
                    return  # a new shared index: its writer derives it
                raise IndexError_(_derived_mismatch(self.location, current[0] if current else None, wanted,
                                                    self._holder()))
            with self.backend.write() as conn:
                current = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
                if force or current is None or current[0] != wanted:
                    rebuild(conn, self.backend, self.settings, queue_fts=queue_fts or current is None)
                    put_meta(conn, "full_reconcile", "1")
            self.derivation += 1
            self.documents.clear()
            self._latest = None

    # -- the log -------------------------------------------------------------------------------

    def event_count(self) -> int:
        row = self.backend.reader().execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
        return int(row[0])

    def events(self, upto: int | None = None) -> list[Event]:
        """The first ``upto`` events (all when None), in log order. Corpus-wide: for tools
        and tests; the store itself streams the log in chunks.
        """
        return list(iter_events(self.backend.reader(), 0, upto))

    def wait_for_events(self, known: int | None = None, timeout: float = 30.0) -> int | None:
        """Block up to ``timeout`` seconds until the log holds more than ``known`` events
        (default: as many as now); the new event count, or None on timeout.

        For a language server (or any long-lived reader) to learn that another process
        appended events: call it in a loop from one worker thread, and on a count take
        :meth:`snapshot` and re-check the open drafts. PostgreSQL: woken by the writer's
        ``NOTIFY`` at commit (no polling), reconnecting with back-off when the server goes
        away; SQLite: polls the file every 0.5 s. Never call it on an event loop.
        """
        if known is None:
            known = self.event_count()
        return self.backend.wait_for_events(known, timeout)

    def changes_since(self, known: int) -> ScanResult:
        """What other processes appended after event ``known``, as a scan result a language
        server handles like one of its own scans: ``snapshot`` (the newest), ``events``
        (``known < seq``), ``evidence`` and ``findings_changed`` for the paths those events
        touched (from the shared ``files`` table), ``full`` False, ``writer`` naming who
        wrote (None when this process holds the writer lock). Cost: the new events.
        """
        snapshot = self.snapshot()
        known = min(max(known, 0), snapshot.seq)
        events = AppendedEvents(self, known, snapshot.seq - known)  # (read without texts, a chunk at a time)
        paths: set[str] = set()
        revoked: set[tuple[str, int]] = set()
        for e in events:
            if e.path:
                paths.add(e.path)
            if e.kind == "revoke":
                revoked.add((e.doc_id, e.version))
        for doc_id, version in sorted(revoked):
            record = snapshot.record(doc_id, version)
            if record is not None and record.path:
                paths.add(record.path)
        evidence: dict[str, list[Finding]] = {}
        reader = self.backend.reader()
        for path in sorted(paths):
            row = reader.execute("SELECT findings FROM files WHERE path = ?", (path,)).fetchone()
            evidence[path] = [finding_of(d) for d in json.loads(row[0])] if row and row[0] else []
        info = self.describe()
        writer = None if info["role"] != "reader" else f"{self._holder()} writes the shared index {self.location}"
        return ScanResult(snapshot=snapshot, evidence=evidence, events=events, full=False,
                          findings_changed=sorted(paths), writer=writer)

    def describe(self) -> dict[str, str]:
        """Where the index lives, for a status bar (SPEC §10 ``grounding/status``).

        Shape::

            {"backend": "sqlite" | "postgresql", "location": str,   # a URL without its password
             "role": "local" | "writer" | "reader"}

        ``role`` of a shared index: "writer" once this process holds the writer lock, else
        "reader" (it may still become the writer at its next scan, when the lock is free).
        """
        if not self.backend.shared:
            return {"backend": "sqlite", "location": self.location, "role": "local"}
        holds = bool(getattr(self.backend, "holds_writer_lock", False))
        return {"backend": "postgresql", "location": self.location, "role": "writer" if holds else "reader"}

    def log_entries(self, doc_id: str | None = None) -> list[LogEntry]:
        """The log's events without their texts, in seq order (``grounding log``; SPEC §9).

        ``doc_id`` keeps only that document's events. Corpus-wide: for the CLI, not hot paths.
        """
        sql = "SELECT seq, kind, doc_id, version, sha256, path, reason, recorded_at, data FROM events"
        args: tuple[str, ...] = ()
        if doc_id is not None:
            sql += " WHERE doc_id = ?"
            args = (doc_id,)
        rows = self.backend.reader().execute(sql + " ORDER BY seq", args).fetchall()
        return [LogEntry(int(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]), str(r[6]),
                         str(r[7]), str(r[8] or "")) for r in rows]

    def snapshot(self, at: int | None = None) -> SqlSnapshot:
        """A frozen :class:`~grounding_core.index.IndexSnapshot` of ``replay(at)`` (default:
        the whole log). Raises ValueError when ``at`` is negative or beyond the log.

        Cheap for any ``at`` (no replay: the derived tables hold every state). The newest
        snapshot is reused while no event is appended; a newer one inherits its caches minus
        what the new events touched.
        """
        count = self.event_count()
        if at is not None:
            if at < 0 or at > count:
                events = f"{count} event" + ("" if count == 1 else "s")
                why = "a state is named by how many events it holds" if at < 0 else f"the event log holds {events}"
                raise ValueError(f"--at {at}: {why} (use 0..{count})")
            if at != count:
                return SqlSnapshot(self, at)
        with self._latest_lock:
            derivation = self.derivation
            held = self._latest
            latest = held[1] if held is not None and held[0] == derivation else None
            if latest is not None and latest.seq == count:
                return latest
            caches = None
            if latest is not None and latest.seq < count and count - latest.seq <= INHERIT_EVENTS:
                fresh = SqlSnapshot(self, count)
                docs = {str(r[0]) for r in self.backend.reader().execute(
                    "SELECT DISTINCT doc_id FROM events WHERE seq > ? AND seq <= ?",
                    (latest.seq, count)).fetchall()}
                renumbered: dict[ConflictKey, dict[str, int]] = {}
                keys, terms = fresh.changed_since(latest.seq, renumbered)
                caches = latest.caches.inherit(docs, keys, terms, renumbered)
            snapshot = SqlSnapshot(self, count, caches)
            self._latest = (derivation, snapshot)
            return snapshot

    @property
    def state(self) -> SqlSnapshot:
        """The newest snapshot (the name earlier callers used)."""
        return self.snapshot()

    def replay(self, n: int) -> SqlSnapshot:
        """SPEC §4 ``replay(n)``; raises ValueError when n is negative or beyond the log."""
        return self.snapshot(at=n)

    def _append(self, conn: Connection, events: Iterable[Event], keep_seq: bool = False) -> list[Event]:
        """Append ``events`` in the writer's transaction. Sequence numbers are given
        explicitly (last + 1, ...): the log has no gaps on any backend (a PostgreSQL sequence
        would leave one for every rolled-back scan), and one writer at a time makes it safe.
        ``keep_seq``: the events keep their own (larger) seqs (a log copied from another index).
        """
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        out: list[Event] = []
        last = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
        for e in events:
            if keep_seq:
                if e.seq <= last:
                    raise IndexError_(f"event {e.seq} is not after the end of the log ({last})")
                last = e.seq
            else:
                last += 1
            out.append(Event(last, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text,
                             e.declared, e.reason, e.data, e.recorded_at or now))
        conn.executemany(
            "INSERT INTO events (seq, kind, doc_id, version, sha256, path, text, declared, reason,"
            " recorded_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(e.seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text, int(e.declared), e.reason,
              e.recorded_at, e.data or None) for e in out])
        if out:
            self.backend.notify(conn, out[-1].seq)
        return out

    # -- memory entries (SPEC §11) ---------------------------------------------------------------

    def remember(self, scope: str, key: str, value: str, approved_by: str | None = None) -> MemoryEntry:
        """Append a ``remember`` event: the next version of ``(scope, key)`` (SPEC §11).

        Without ``approved_by`` the entry is a proposal. Raises
        :class:`~grounding_core.memory.MemoryWriteError` for bad names or values, or when the
        newest live version already holds this value.
        """
        return self._write_memory(lambda conn, now: memory_store.remember(conn, scope, key, value, approved_by, now))

    def approve(self, scope: str, key: str, version: int, by: str) -> MemoryEntry:
        """Append an ``approve`` event for one version (no new version). Raises
        :class:`~grounding_core.memory.MemoryWriteError` when it cannot be approved.
        """
        return self._write_memory(lambda conn, now: memory_store.approve(conn, scope, key, version, by, now))

    def forget(self, scope: str, key: str, reason: str = "") -> MemoryEntry:
        """Append a ``forget`` event: every version of the key becomes inactive (SPEC §15).
        Returns the newest version as forgotten. Raises
        :class:`~grounding_core.memory.MemoryWriteError` when nothing is left to forget.
        """
        return self._write_memory(lambda conn, now: memory_store.forget(conn, scope, key, reason, now))

    def _write_memory(self, build: Callable[[Connection, str], MemoryEvent]) -> MemoryEntry:
        """Validate, append the event and update ``memory_entries`` in one write transaction
        (a crash leaves both or neither); costs one key's rows, never the corpus. On a shared
        index only the writer may (docs/decisions.md, "Memory on a shared index"); the event is
        announced to the other processes like a scan's (``Backend.notify``). Raises
        :class:`~grounding_core.memory.MemoryWriteError` when another process writes the index,
        and :class:`IndexBusy` when another process kept a lock the write needs for more than
        :data:`LOCK_WAIT_S` seconds (nothing was written).
        """
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        with self._lock:
            try:
                with self.backend.write() as conn:
                    event = memory_store.write_event(conn, build(conn, now))
                    versions = memory_store.versions(conn, event.seq, event.scope, event.key)
                    self.backend.notify(conn, event.seq)
            except ReadOnlyIndex as exc:
                raise MemoryWriteError(f"only the index's writer writes memory: {exc}") from exc
            except LockTimeout as exc:
                raise IndexBusy(f"another process is writing the index {self.location} (probably indexing);"
                                f" it kept the write lock for more than {LOCK_WAIT_S:g} s") from exc
        return versions[event.version or max(versions)]

    # -- scanning ------------------------------------------------------------------------------

    def scan(self, config: Config, progress: ProgressCallback | None = None,
             paths: Iterable[str] | None = None, settle: float = scanning.SETTLE_BUDGET_S,
             lock_wait: float = LOCK_WAIT_S, *, pause: Callable[[], object] | None = None) -> ScanResult:
        """Bring the index up to date with the evidence folder (SPEC §3, §4).

        ``paths`` (relative to the evidence root, from a file watcher): look only at those
        files and folders; None: walk the whole evidence root (at start, after a watcher
        overflow). Re-reads only files whose stat key (size, mtime, ctime, inode) changed; a
        full walk that lists exactly what the last scan that changed nothing listed
        (:func:`scan.listing_digest`) loads no stored stat key at all (docs/decisions.md,
        "Unchanged full walks").
        A file changed within the last 100 ms is read once it has been quiet that long (the
        scan waits up to ``settle`` seconds in all; 0: not at all); one that keeps changing,
        or changes while read, is listed in :attr:`ScanResult.unstable` and not indexed from
        that read (read it again later). Appends events only when content changed. Never
        writes evidence files. Raises FileNotFoundError when the evidence root does not exist,
        :class:`NoEvidenceMatched` (a ``ConfigError``) when a full walk saw files but no
        evidence glob matches any while files the index holds are still there (nothing written),
        and :class:`IndexBusy` when another process holds a lock the scan needs for more than
        ``lock_wait`` seconds (SQLite: the write lock; PostgreSQL: a table or row lock, e.g. of
        a ``LOCK TABLE`` or a ``VACUUM FULL``); nothing was written and the committed state is
        still readable.

        ``pause`` (optional) is called at the walk's and the reads' batch boundaries (a
        folder, :data:`PAUSE_FILES` stat keys compared, each file read): the language server
        waits there while foreground work runs (``server.session.Foreground``); it must not
        touch the store.

        Shared index (PostgreSQL): only the writer (the process holding the writer lock,
        taken here when free) scans; a reader's scan appends nothing and returns the shared
        state with :attr:`ScanResult.writer` naming who writes. A connection lost during the
        scan rolls the whole scan back; the scan is then redone after a reconnect, waiting
        with back-off up to :attr:`reconnect_seconds` (then :class:`IndexError_`).
        """
        root = config.evidence_root
        if not root.is_dir():
            raise FileNotFoundError(f"evidence folder {root} does not exist")
        paths = None if paths is None else list(paths)
        listing = scanning.walk_evidence(config, pause) if paths is None else scanning.resolve_paths(config, paths)
        if paths is None and not listing.candidates and listing.unmatched:
            self._refuse_empty_match(config, listing.unmatched)
        lost: BaseException | None = None
        for delay in self._retries():
            if lost is not None:
                time.sleep(delay)
                if paths is not None:
                    listing = scanning.resolve_paths(config, paths)
            try:
                with self._lock, self.backend.lock_wait(lock_wait):
                    if not self.backend.can_write():
                        return self._read_only_scan(listing)
                    self._ensure_derived()
                    try:
                        with collector.bulk_write() as bulk, self.backend.write() as conn:
                            result = _Scan(self, conn, config, listing, progress, settle, pause, bulk).run()
                    except BaseException:
                        self.documents.clear()  # contents cached under seqs that were rolled back
                        self._latest = None
                        raise
                break
            except LockTimeout as exc:
                raise IndexBusy(f"another process is writing the index {self.location} (probably indexing);"
                                f" it kept the write lock for more than {lock_wait:g} s") from exc
            except ReadOnlyIndex:
                return self._read_only_scan(listing)
            except self.backend.lost as exc:
                lost = exc
        else:
            raise self._gave_up(lost)
        result.snapshot = self.snapshot()
        return result

    def _refuse_empty_match(self, config: Config, unmatched: int) -> None:
        """Raise :class:`NoEvidenceMatched` when any file the index holds is still in the
        evidence folder: the scan would revoke it only because no glob matches it any more.
        When they are all gone (deleted, moved) the scan goes on and revokes them, whatever
        other files the folder holds. Runs only when a full walk matched nothing: one
        ``lstat`` per stored path at most, read from a cursor (stops at the first found).
        """
        root = config.evidence_root
        stored = self.backend.reader().execute("SELECT path FROM files")
        try:
            if not any(os.path.lexists(root / path) for (path,) in stored):
                return
        finally:
            stored.close()  # an unfinished statement would keep its read transaction open
        globs = ", ".join(config.evidence_globs)
        files = f"{unmatched} file" if unmatched == 1 else f"{unmatched} files"
        raise NoEvidenceMatched(
            f"evidence_globs ({globs}) match none of the {files} in the evidence folder"
            f" {config.evidence_root}; nothing was indexed and nothing revoked (the index keeps its last"
            " state). Fix evidence_globs in grounding.toml; to retire every document, delete or move"
            " the files instead")

    reconnect_seconds = 30.0
    """How long a write waits for a lost shared database to come back (back-off 0.1 s
    doubling to 5 s between tries) before it gives up with :class:`IndexError_`."""

    def _retries(self) -> Iterator[float]:
        """Delays before each try of a write: 0 for the first, then back-off until
        :attr:`reconnect_seconds` have passed (the last try's failure propagates).
        """
        yield 0.0
        waited, delay = 0.0, 0.1
        while waited < self.reconnect_seconds:
            yield delay
            waited += delay
            delay = min(delay * 2, 5.0)

    def _gave_up(self, exc: BaseException | None) -> IndexError_:
        error = IndexError_(f"lost the index {self.location} and could not reconnect within"
                            f" {self.reconnect_seconds:g} s: {exc}")
        error.__cause__ = exc
        return error

    def _holder(self) -> str:
        holder = self.backend.writer_holder()
        return holder if holder else "another process"

    def _read_only_scan(self, listing: Listing) -> ScanResult:
        """A reader's scan of a shared index: nothing written, the writer's findings."""
        if listing.full:
            findings = self.evidence_findings()
        else:  # only the paths looked at: a watcher's change costs what it touches
            findings = {}
            reader = self.backend.reader()
            for path in sorted(set(listing.candidates) | set(listing.refused)):
                row = reader.execute("SELECT findings FROM files WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    findings[path] = [finding_of(d) for d in json.loads(row[0])] if row[0] else []
        snapshot = self.snapshot()
        if self.backend.read_only is not None:  # a read-only index (docs/decisions.md, "Index")
            writer = (f"the index {self.location} is {self.backend.read_only}, so it was not updated:"
                      f" checking against it as last committed ({snapshot.seq} events); evidence"
                      " changed since is not seen")
        else:
            writer = f"{self._holder()} writes the shared index {self.location}"
        return ScanResult(snapshot=snapshot, evidence=findings, full=listing.full, writer=writer)

    # -- copying a log ---------------------------------------------------------------------------

    def import_log(self, source: Store) -> ImportResult:
        """Append ``source``'s events that this index lacks, derive them, and copy its file
        rows (stat keys, findings), in one write transaction (``grounding index --to``).

        Idempotent: run twice, the second run appends nothing. The two logs must agree on
        the events this index already holds (same kind, doc_id, version, sha256, path, text,
        declared, reason at each seq); otherwise raises :class:`IndexError_` naming the first
        seq that differs. Raises :class:`IndexError_` when this process may not write (a
        shared index whose writer lock another process holds). Sequence numbers are kept, so
        ``replay(n)`` and ``--at N`` answer the same on both.
        """
        with self._lock:
            if not self.backend.can_write():
                raise IndexError_(f"cannot import into {self.location}: {self._holder()} writes it")
            self._ensure_derived()
            with self.backend.write() as conn:
                have = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
                theirs = source.event_count()
                mine = iter_events(conn, 0, have)
                for ours, other in zip(mine, iter_events(source.backend.reader(), 0, have), strict=False):
                    if _event_key(ours) != _event_key(other):
                        raise IndexError_(
                            f"cannot import into {self.location}: its event {ours.seq} differs from"
                            f" {source.location}'s ({ours.kind} {ours.doc_id}@{ours.version} vs"
                            f" {other.kind} {other.doc_id}@{other.version}); it holds another log")
                if theirs < have:
                    raise IndexError_(f"cannot import into {self.location}: it holds {have} events,"
                                      f" more than {source.location} ({theirs})")
                deriver = Deriver(conn, self.backend, self.settings)
                appended = 0
                for chunk in _chunks(iter_events(source.backend.reader(), have, theirs), 500):
                    events = self._append(conn, chunk, keep_seq=True)
                    for event in events:
                        deriver.apply(event)
                        if event.kind in MEMORY_KINDS:  # memory_entries, as the source derived them
                            memory_store.apply_event(conn, MemoryEvent.from_row(
                                event.seq, event.kind, event.version, event.data, event.recorded_at))
                    appended += len(events)
                deriver.flush()
                files = source.backend.reader().execute(
                    "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem,"
                    " findings FROM files").fetchall()
                conn.executemany(
                    UPSERT_FILE_ROW,
                    [tuple(r) for r in files])
                conn.execute("DELETE FROM meta WHERE key = ?", (LISTING_KEY,))
            self._latest = None
        return ImportResult(appended=appended, already=have, files=len(files))

    def evidence_findings(self) -> dict[str, list[Finding]]:
        """Every evidence path's findings as of the last scan (from the ``files`` table)."""
        rows = self.backend.reader().execute("SELECT path, findings FROM files ORDER BY path").fetchall()
        return {str(p): [finding_of(d) for d in json.loads(f)] if f else [] for p, f in rows}

    # -- corpus-wide summaries (grounding index / conflicts) -------------------------------------

    def stats(self, snapshot: IndexSnapshot, today: dt.date) -> IndexStats:
        """``snapshot.stats(today)``, kept in the ``meta`` table for the next process that asks
        for the same state (:meth:`_summary`): a ``grounding index`` with nothing changed
        costs a warm start, not the corpus-wide counts (0.6 s at 10,000 files).
        """
        value = self._summary("stats", snapshot, today, lambda: list(astuple(snapshot.stats(today))))
        return IndexStats(*(int(n) for n in value))

    def conflicting_keys(self, snapshot: IndexSnapshot, today: dt.date) -> list[ConflictKey]:
        """``snapshot.conflicting_keys(today)`` (sorted by field, then subject), kept like
        :meth:`stats`: the corpus-wide ``GROUP BY`` over every active field line is 2-2.7 s at
        10,000 files.
        """
        value = self._summary("conflicting_keys", snapshot, today,
                              lambda: [list(key) for key in snapshot.conflicting_keys(today)])
        return [(None if subject is None else str(subject), str(field)) for subject, field in value]

    def _summary(self, name: str, snapshot: IndexSnapshot, today: dt.date,
                 compute: Callable[[], list[Any]]) -> list[Any]:
        """A corpus-wide answer about ``snapshot`` on ``today``, from the ``meta`` row
        ``summary:NAME`` when that row was written for the same state, else computed and the
        row replaced (best effort: a process that may not write, or finds the write lock
        taken, only computes).

        The answer is a function of the events up to ``snapshot.seq`` (the derived tables
        answer every ``replay(n)`` alike, whatever was appended after), the derived rows'
        definition and parse settings (:func:`~grounding_core.derived.fingerprint`), the meta
        fields and ``today``: the row holds all of them, and :data:`SUMMARY_FORM` for the
        answer's own definition; a row for another state is never used.
        """
        key = json.dumps([SUMMARY_FORM, snapshot.seq, today.isoformat(), fingerprint(self.settings),
                          sorted(self.settings.meta_fields)], ensure_ascii=False)
        row = self.backend.reader().execute("SELECT value FROM meta WHERE key = ?", (f"summary:{name}",)).fetchone()
        if row is not None:
            try:
                held = json.loads(row[0])
            except ValueError:
                held = None
            if isinstance(held, dict) and held.get("state") == key and isinstance(held.get("value"), list):
                return list(held["value"])
        value = compute()
        text = json.dumps({"state": key, "value": value}, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            try:
                with self.backend.lock_wait(0), self.backend.write(exclusive=False) as conn:
                    put_meta(conn, f"summary:{name}", text)
            except (ReadOnlyIndex, LockTimeout, BackendError):
                pass  # the next process computes it again
            except self.backend.lost:
                pass
        return value

    # -- full-text search ----------------------------------------------------------------------

    def _ensure_fts_form(self) -> None:
        """Drop full-text rows written in another form than :data:`FTS_FORM` (an index made
        before the rows were NFKC-folded) and queue every ever-active content again, in one
        transaction; ``build_fts`` writes them anew. On a shared index any process may do it
        (the full-text rows are work, not state, as in :meth:`build_fts`); the ``meta`` row
        is set first, so of two processes opening the index at once only one re-queues. A
        database role that may not write leaves it to the next process that can.
        """
        with self._lock:
            row = self.backend.reader().execute("SELECT value FROM meta WHERE key = 'fts_form'").fetchone()
            if row is not None and row[0] == FTS_FORM:
                return
            try:
                with self.backend.write(exclusive=False) as conn:
                    changed = conn.execute(
                        "INSERT INTO meta (key, value) VALUES ('fts_form', ?) ON CONFLICT (key)"
                        " DO UPDATE SET value = excluded.value WHERE meta.value <> excluded.value"
                        " RETURNING key", (FTS_FORM,)).fetchall()
                    if changed:
                        self.backend.fts_clear(conn)
                        conn.execute("INSERT INTO fts_queue (content_id) SELECT content_id FROM versions"
                                     " WHERE active_from IS NOT NULL ON CONFLICT DO NOTHING")
            except ReadOnlyIndex:
                return

    def fts_pending(self) -> int:
        """Contents still waiting for their full-text rows."""
        return int(self.backend.reader().execute("SELECT COUNT(*) FROM fts_queue").fetchone()[0])

    def build_fts(self, seconds: float | None = None, batch: int = FTS_BATCH,
                  pause: Callable[[], object] | None = None) -> bool:
        """Drain the full-text queue, one small transaction per ``batch`` contents (crash-safe:
        a batch's rows and its removal from the queue commit together). Currently active
        contents go first. Stops after ``seconds`` when given; True when the queue is empty.
        On a shared index every process may help drain the queue (the queue is work, not
        state: each entry is claimed by one process, ``SKIP LOCKED``), so a reader that needs
        search builds what is missing; one whose database role may not write only answers
        whether the queue is empty; one that waited out the lock wait for another process's
        lock returns False (what is built answers; the rest comes later). A lost connection
        is retried like a scan. ``pause`` (optional) is called before each transaction, outside
        it (the language server's yield point, as in :meth:`scan`).
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if pause is not None:
                pause()
            lost: BaseException | None = None
            for delay in self._retries():
                if lost is not None:
                    time.sleep(delay)
                try:
                    with self._lock:
                        with self.backend.write(exclusive=False) as conn:
                            if self._fts_batch(conn, batch):
                                return True
                    break
                except ReadOnlyIndex:
                    return self.fts_pending() == 0
                except LockTimeout:  # another process writes (it drains the queue too): later
                    return False
                except self.backend.lost as exc:
                    lost = exc
            else:
                raise self._gave_up(lost)
            if deadline is not None and time.monotonic() >= deadline:
                return self.fts_pending() == 0

    def _fts_batch(self, conn: Connection, batch: int) -> bool:
        """One batch of full-text rows in the caller's transaction; True when none was left
        to claim.
        """
        ids = self.backend.fts_claim(conn, batch)
        if not ids:
            conn.execute("DELETE FROM fts_queue WHERE NOT EXISTS"  # entries without a versions row
                         " (SELECT 1 FROM versions AS v WHERE v.content_id = fts_queue.content_id)")
            return True
        rows: list[tuple[int, str]] = []
        for cid in ids:
            text, front_end = conn.execute(
                "SELECT e.text, v.front_end FROM events AS e JOIN versions AS v ON v.content_id = e.seq"
                " WHERE e.seq = ?", (cid,)).fetchone()
            rows.extend(fts_rows(cid, str(text), int(front_end)))
        self.backend.fts_insert(conn, rows)
        conn.executemany("DELETE FROM fts_queue WHERE content_id = ?", [(c,) for c in ids])
        return False

    def search(self, query: str, limit: int = 20, any_term: bool = False) -> list[SearchHit]:
        """Full-text search over the newest snapshot (builds pending FTS rows first); see
        :meth:`grounding_core.sql_snapshot.SqlSnapshot.search`.
        """
        self.build_fts()
        return self.snapshot().search(query, limit, any_term)


@dataclass(frozen=True)
class ImportResult:
    """What :meth:`Store.import_log` did: events appended, events already present, file rows
    copied.
    """

    appended: int
    already: int
    files: int


def _derived_mismatch(location: str, current: str | None, wanted: str, holder: str) -> str:
    """Why a reader cannot use a shared index whose derived tables have the fingerprint
    ``current`` (:func:`~grounding_core.derived.fingerprint`, JSON) while it wants ``wanted``,
    and what to do: another Grounding derived it (its ``definition`` or image ``measurement``
    version differs: run a writer of the newer one) or other parse settings did (use the
    writer's). ``holder`` names the process that writes the index.
    """
    try:
        theirs, mine = json.loads(current or ""), json.loads(wanted)
    except ValueError:
        theirs, mine = {}, {}
    for key, what in (("definition", "derived version"), ("measurement", "image measurement version")):
        old, new = theirs.get(key) if isinstance(theirs, dict) else None, mine.get(key)
        if isinstance(old, int) and isinstance(new, int) and old != new:
            if old < new:
                return (f"the shared index {location} was built by an older Grounding ({what} {old}; this one"
                        f" derives version {new}), and {holder} writes it: once that writer stops, run"
                        " `grounding index` (or start a writer) with this Grounding once to upgrade it")
            return (f"the shared index {location} was built by a newer Grounding ({what} {old}; this one"
                    f" derives version {new}), and {holder} writes it: upgrade this Grounding to read it")
    return (f"the index {location} was derived with other settings ({current or '?'}) than this"
            f" workspace's ({wanted}), and {holder} writes it; use the writer's field_separators,"
            " subject_fields and image_language in grounding.toml")


def _event_key(e: Event) -> tuple[object, ...]:
    return (e.seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text, e.declared, e.reason, e.data)


def _chunks(items: Iterable[Event], size: int) -> Iterator[list[Event]]:
    chunk: list[Event] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def fts_rows(content_id: int, text: str, front_end: int) -> list[tuple[int, str]]:
    """The FTS rows of one content: its non-blank lines after the front matter (1-based
    lines below 2**LINE_BITS) in Unicode NFKC (:data:`FTS_FORM`; searches fold the query the
    same way, so ``７天`` and ``7天`` find each other), keyed ``content_id << LINE_BITS | line``.
    """
    from .text import split_lines

    base = content_id << LINE_BITS
    return [(base | number, unicodedata.normalize("NFKC", line))
            for number, line in enumerate(split_lines(text), 1)
            if number > front_end and number <= LINE_MASK and line.strip()]


class _Staged:
    """One scan's file rows by path, in the ``scan_files`` table of the scan's own transaction
    (emptied before it commits) instead of Python memory: the rows a scan used to keep in a
    dict until its end (a cold index or a storm of 30,000 files: about 0.5 KB a file, and the
    doc_ids, declared versions and imports beside them). Only the paths are kept in Python
    (:attr:`paths`: the walk's own strings, for membership) and a fixed bitmap of the doc_ids
    staged, so the end of a scan reads the rows back by path, by doc_id or in path order, a
    chunk at a time (docs/decisions.md, "A scan's file rows"). Rows are inserted
    :data:`STAGE_CHUNK` at a time (one round trip to a shared database per chunk); every read
    of the table writes the pending ones first.

    Columns beside a :class:`FileRow`'s: ``imported`` (imported right after its read,
    :meth:`_Scan._import_now`), ``version_line`` (1-based line of the front matter's
    ``version`` key, or the first line; None for a row that is not an indexable document) and
    ``touched`` (differs from the row stored before the scan, :meth:`FileRow.same_file`).
    """

    COLUMNS = "path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem"

    DOC_BITS = 20
    """Size (log2 bits: 128 KiB) of the bitmap of staged doc_ids: a clear bit means no row of
    that doc_id is staged, so most first reads of a doc_id cost no query (:meth:`has_doc`)."""

    def __init__(self, conn: Connection, backend: Backend, old: _OldRows) -> None:
        self.conn = conn
        self.old = old
        """The rows stored before the scan (``touched`` compares with them)."""
        self.paths: set[str] = set()
        """Every path with a row here (written or pending)."""
        self._pending: dict[str, tuple[FileRow, bool, int | None]] = {}
        self._docs = bytearray(1 << (self.DOC_BITS - 3))
        backend.stage_scan(conn)

    def __contains__(self, path: object) -> bool:
        return path in self.paths

    def __len__(self) -> int:
        return len(self.paths)

    def _doc_bit(self, doc_id: str) -> tuple[int, int]:
        bit = text_hash(doc_id) & ((1 << self.DOC_BITS) - 1)
        return bit >> 3, 1 << (bit & 7)

    def put(self, row: FileRow, imported: bool = False, version_line: int | None = None) -> None:
        """Add ``row`` (replacing the path's row, if any)."""
        self.discard(row.path)
        self._pending[row.path] = (row, imported, version_line)
        self.paths.add(row.path)
        if row.doc_id is not None:
            byte, mask = self._doc_bit(row.doc_id)
            self._docs[byte] |= mask
        if len(self._pending) >= STAGE_CHUNK:
            self.flush()

    def flush(self) -> None:
        """Insert the pending rows (their stored rows read in one query: ``touched``)."""
        if self._pending:
            stored = self.old.peek_many(list(self._pending))
            self.conn.executemany(
                "INSERT INTO scan_files (path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version,"
                " problem, imported, version_line, touched) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(row.path, row.size, row.mtime_ns, row.ctime_ns, row.inode, row.sha256, row.doc_id,
                  row.declared_version, json.dumps(row.problem, ensure_ascii=False) if row.problem else None,
                  int(imported), version_line, int(not row.same_file(stored.get(row.path))))
                 for row, imported, version_line in self._pending.values()])
            self._pending = {}

    def discard(self, path: str) -> None:
        if path in self.paths:
            if self._pending.pop(path, None) is None:
                self.conn.execute("DELETE FROM scan_files WHERE path = ?", (path,))
            self.paths.discard(path)

    def get(self, path: str) -> FileRow | None:
        if path not in self.paths:
            return None
        pending = self._pending.get(path)
        if pending is not None:
            return pending[0]
        r = self.conn.execute(f"SELECT {self.COLUMNS} FROM scan_files WHERE path = ?", (path,)).fetchone()
        return None if r is None else _row(r)

    def has_doc(self, doc_id: str) -> bool:
        """A row of ``doc_id`` (a document read by this scan) is here."""
        byte, mask = self._doc_bit(doc_id)
        if not self._docs[byte] & mask:
            return False
        if any(row.doc_id == doc_id for row, _, _ in self._pending.values()):
            return True
        return self.conn.execute("SELECT 1 FROM scan_files WHERE doc_id = ? LIMIT 1", (doc_id,)).fetchone() is not None

    def by_doc(self, doc_ids: Sequence[str]) -> Iterator[tuple[FileRow, bool]]:
        """The rows of ``doc_ids``, each with its ``imported`` flag."""
        self.flush()
        marks = ", ".join("?" * len(doc_ids))
        for r in self.conn.execute(f"SELECT {self.COLUMNS}, imported FROM scan_files WHERE doc_id IN ({marks})",
                                   tuple(doc_ids)).fetchall():
            yield _row(r[:9]), bool(r[9])

    def ordered(self, where: str, columns: str = COLUMNS) -> Iterator[list[tuple[Any, ...]]]:
        """Chunks (:data:`STAGE_CHUNK` rows) of the rows matching ``where`` (SQL over the
        table's columns) in path order (the table may change between chunks: the order is
        by path).
        """
        self.flush()
        last = ""
        while True:
            rows = self.conn.execute(
                f"SELECT {columns} FROM scan_files WHERE path > ? AND ({where}) ORDER BY path LIMIT ?",
                (last, STAGE_CHUNK)).fetchall()
            if rows:
                yield rows
            if len(rows) < STAGE_CHUNK:
                return
            last = str(rows[-1][0])

    def clear(self) -> None:
        """Empty both tables (the end of a scan, inside its transaction)."""
        self._pending = {}
        self.conn.execute("DELETE FROM scan_files")
        self.conn.execute("DELETE FROM scan_docs")
        self.paths = set()


class AppendedEvents(Sequence[Event]):
    """The events a scan appended (or another process did, :meth:`Store.changes_since`):
    seqs ``after < seq <= after + count`` of the log, read from it without their texts
    (``text`` ""), :data:`STAGE_CHUNK` at a time, whenever iterated or indexed: nothing of
    them is kept in memory (a cold index appends one per document). The length needs no
    read. Reading needs the store open (:class:`IndexError_` once it is closed: read them
    before). Compares equal to any sequence of the same events (``result.events == []``).
    """

    def __init__(self, store: Store, after: int, count: int) -> None:
        self._store = store
        self.after = after
        """The log's length before the scan."""
        self._count = max(count, 0)

    def __len__(self) -> int:
        return self._count

    def _read(self, first: int, last: int) -> list[Event]:
        """Events ``first <= seq <= last``. Raises :class:`IndexError_` once the store is closed."""
        if self._store.closed:
            raise IndexError_(f"the index {self._store.location} is closed: read a scan's events"
                              " (ScanResult.events) before closing its store")
        rows = self._store.backend.reader().execute(
            "SELECT seq, kind, doc_id, version, sha256, path, '', declared, reason, data, recorded_at"
            " FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq", (first, last)).fetchall()
        return [event_of(r) for r in rows]

    def __iter__(self) -> Iterator[Event]:
        end = self.after + self._count
        for first in range(self.after + 1, end + 1, STAGE_CHUNK):
            yield from self._read(first, min(first + STAGE_CHUNK - 1, end))

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("scan event index out of range")
        return self._read(self.after + 1 + index, self.after + 1 + index)[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists: unhashable like them

    def __repr__(self) -> str:
        return f"AppendedEvents(seq {self.after + 1}..{self.after + self._count})"


# -- one scan ----------------------------------------------------------------------------------


class _Scan:
    """One scan inside the writer's transaction (see :meth:`Store.scan`).

    Its per-file state lives in :class:`_Staged` (the scan's rows) and the ``scan_docs`` table
    (the doc_ids it reconciles), so memory is bounded by what it holds at once: the walk's
    listing, the paths, one chunk of :data:`SCAN_CHUNK` doc_ids at the end, and the bounded
    document and derived-row buffers.
    """

    def __init__(self, store: Store, conn: Connection, config: Config, listing: Listing,
                 progress: ProgressCallback | None, settle: float, pause: Callable[[], object] | None = None,
                 bulk: collector.BulkWrite | None = None) -> None:
        self.store = store
        self.pause = pause
        self.bulk = bulk
        """The scan's own collections while the automatic ones are off (:func:`collector.bulk_write`):
        at the end of each batch of derived rows and, failing that, every
        :data:`collector.BULK_YOUNG` allocations at an event boundary."""
        self.settle = settle
        self.conn = conn
        self.config = config
        self.listing = listing
        self.progress = progress
        self.settings = store.settings
        self.result = ScanResult(snapshot=None, full=listing.full)  # type: ignore[arg-type]
        self.old = _OldRows({}, conn)
        """The rows stored before this scan (:meth:`_load_rows`: those it looks at)."""
        self.rows = _Staged(conn, store.backend, self.old)
        """Rows after this scan, for every path looked at whose row is not kept (absent: the
        path is unchanged, :attr:`same`, or gone)."""
        self.same: set[str] = set()
        """Paths whose row did not change (kept in ``old``, not staged)."""
        self.noted: list[str] = []
        """Paths whose stored row has findings (most have none: NULL)."""
        self.fresh = DocumentCache(FRESH_CHARS)
        """Documents parsed by this scan's reads and imported only at its end, by path
        (bounded: the ones that fell out are read again when imported). Documents imported
        right after their read (:meth:`_import_now`) are never kept here."""
        self.kept_parsed = 0
        """Documents of this scan put in the store's cache (at most :data:`KEEP_PARSED_IMPORTS`)."""
        self.deriver: Deriver | None = None
        self.empty = False
        """The index held no file rows and no versions when this scan began (a cold index)."""
        self.before = 0
        """The log's length when the scan began (its view of the index before its events)."""
        self.appended = 0
        """Events this scan appended (seqs ``before + 1 ..``)."""
        self.wrote = False
        """A ``files`` row was written or deleted."""
        self.findings: dict[str, list[Finding]] = {}
        """The new findings of every path whose findings were written non-empty (the lists
        ``evidence`` holds)."""
        self.rewritten: set[str] = set()
        """Paths not looked at whose findings this scan changed (a watcher's scan: another
        file of their doc_id changed)."""

    # -- file rows -----------------------------------------------------------------------------

    def _note_evidence_folder(self) -> None:
        """Record the evidence folder as this scan's findings will name it; when the index
        named another one (the folder renamed with ``grounding.toml``'s ``evidence``, every
        stat key unchanged), ask for a full reconcile, which writes every document's findings
        again (SPEC §3 duplicates name the files). An index without the row (older Grounding)
        records it only: its findings were written with the folder it was scanned with.
        """
        shown = self.config.evidence_display(".")
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (EVIDENCE_FOLDER_KEY,)).fetchone()
        if row is not None and str(row[0]) == shown:
            return
        if row is not None:
            put_meta(self.conn, "full_reconcile", "1")
        put_meta(self.conn, EVIDENCE_FOLDER_KEY, shown)

    def _load_rows(self) -> None:
        cols = "path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem, findings"
        if self.listing.full:  # the stat keys only; a row is read whole when it is needed
            rows = self.conn.execute("SELECT path, size, mtime_ns, ctime_ns, inode, findings FROM files").fetchall()
        else:
            wanted = set(self.listing.candidates) | set(self.listing.refused) | self.listing.gone
            rows = []
            for path in sorted(wanted):
                rows.extend(self.conn.execute(f"SELECT {cols} FROM files WHERE path = ?", (path,)).fetchall())
            for prefix in sorted(self.listing.gone_prefixes):
                upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
                rows.extend(self.conn.execute(f"SELECT {cols} FROM files WHERE path >= ? AND path < ?",
                                              (prefix, upper)).fetchall())
        self.old = self.rows.old = _OldRows({r[0]: r for r in rows}, self.conn)
        self.noted = [r[0] for r in rows if r[-1] is not None]  # (findings is the last column)

    def _stage(self, row: FileRow, imported: bool = False, version_line: int | None = None) -> None:
        """Stage this scan's row of ``row.path`` (replacing one staged before)."""
        self.rows.put(row, imported, version_line)

    def _read(self, rel: str, candidate: scanning.Candidate, settled: bool = False) -> None:
        """Read one changed file, stage its row and import it now (:meth:`_import_now`) or
        keep its document in ``self.fresh`` for the end of the scan (or report it).
        ``settled``: every candidate path before ``rel`` was read or set aside already.
        """
        self.rows.discard(rel)
        self.fresh.discard(rel)
        try:
            data, key = scanning.read_stable(candidate.path)
            if is_image_path(rel):  # the image's key holds its sidecar's (scan.image_key)
                key = scanning.image_key(candidate.path, key)
        except FileNotFoundError:
            return  # deleted between the walk and the read: treated as absent
        except Unstable:
            self.result.unstable.append(rel)
            if rel in self.old:
                self.same.add(rel)  # keeps what was indexed; read again next scan
            else:
                self._stage(FileRow(rel, -1, 0, 0, 0, "", None, None, None))
            return
        except OSError as exc:
            self.listing.refused[rel] = scanning.file_finding(
                "unreadable-evidence", f"cannot read the file: {exc.strerror}")
            return
        self.result.hashed_bytes += len(data)
        self.result.changed.append(rel)
        row, doc = self._parse(rel, data, key)
        if doc is None:
            self._stage(row)
            return
        line = next((i + 1 for i in range(1, max(doc.front.end_line - 1, 1))
                     if doc.lines[i].startswith("version")), 1)
        # the first file of a doc_id no earlier file of this scan (and nothing stored) holds
        first = settled and not self.rows.has_doc(doc.doc_id) and self._unknown(doc.doc_id)
        self._stage(row, first, line)
        if first:
            self._import_now(rel, row, doc)
        else:
            self.fresh.put(rel, doc)

    def _unknown(self, doc_id: str) -> bool:
        """The index held no version and no file row of ``doc_id`` before this scan (file
        rows are written at the scan's end, versions of new doc_ids only by
        :meth:`_import_now`, which this scan calls once per doc_id).
        """
        if self.empty:
            return True
        if self.conn.execute("SELECT 1 FROM files WHERE doc_id = ? LIMIT 1", (doc_id,)).fetchone() is not None:
            return False
        return self.conn.execute("SELECT 1 FROM versions WHERE doc_id = ? LIMIT 1", (doc_id,)).fetchone() is None

    def _import_now(self, rel: str, row: FileRow, doc: EvidenceDocument) -> None:
        """Import ``doc`` right after its read, before the other files are read: the first
        file (in path order) of a doc_id the index does not know yet, every earlier candidate
        path already read, so SPEC §3's duplicate rule (:func:`scan.choose`: the first path of
        a group is always indexed, whatever the later files declare) picks it, and the events
        are those :meth:`_reconcile` would append (the version it declares, else version 1;
        no earlier version to compare with). Memory stays bounded without reading it twice.
        """
        declared = row.declared_version
        self._emit(Event(0, "import", doc.doc_id, declared if declared is not None else 1, doc.sha256, rel,
                         doc.text, declared is not None), doc)
        if doc.front.status == "revoked":
            self._emit(Event(0, "revoke", doc.doc_id, declared if declared is not None else 1,
                             reason="status: revoked"), None)

    def _emit(self, pending: Event, doc: EvidenceDocument | None) -> None:
        """Append one event and derive its rows (the scan's transaction)."""
        assert self.deriver is not None
        (event,) = self.store._append(self.conn, [pending])
        self.deriver.apply(event, doc)
        if doc is not None and self.kept_parsed < KEEP_PARSED_IMPORTS:
            self.kept_parsed += 1
            self.store.documents.put(event.seq, doc)
        if self.bulk is not None:
            self.bulk.step()
        self.appended += 1  # the result reads them from the log (AppendedEvents): no copy kept
    def _parse(self, rel: str, data: bytes, key: StatKey) -> tuple[FileRow, EvidenceDocument | None]:
        sha = scanning.sha256_hex(data)
        settings = self.settings
        size = key.size
        if key.coarse and key.fresh(scanning.now_ns()):
            size = -1  # whole-second clock: read again at the next scan (module scan.py)
        try:
            doc = (self._image(rel, data, sha) if is_image_path(rel) else
                   parse_evidence_text(rel, decode_evidence(data), sha, settings.separators,
                                       settings.subject_fields))
        except EvidenceError as exc:
            problem: dict[str, Any] = {"name": exc.name, "message": exc.message, "line": exc.line,
                                       "hint": exc.hint}
            return FileRow(rel, size, key.mtime_ns, key.ctime_ns, key.inode, sha, None, None, problem), None
        row = FileRow(rel, size, key.mtime_ns, key.ctime_ns, key.inode, sha, doc.doc_id,
                      doc.front.version, None)
        return row, doc

    def _image(self, rel: str, data: bytes, sha: str) -> ImageDocument:
        """An image document (SPEC §12): the sidecar ``rel + ".yaml"`` (if any) and the
        measurement of ``data``, taken from the cache by sha256 when this content was measured
        before, else measured now and cached (``ScanResult.measured`` counts those).

        Raises ``EvidenceError``: ``unreadable-evidence`` for bytes that are not a decodable PNG,
        ``invalid-front-matter`` for a bad sidecar.
        """
        sidecar = ""
        path = self.config.evidence_root / sidecar_path(rel)
        name = sidecar_path(rel.rpartition('/')[2])
        try:
            sidecar = sidecar_text(scanning.read_inside(self.config.evidence_root, path)[0])
        except FileNotFoundError:
            pass
        except scanning.Outside as exc:  # never read (SPEC §2): a sidecar is evidence metadata
            raise EvidenceError("invalid-front-matter", f"the sidecar {name} cannot be used: {exc.strerror};"
                                " the image is not indexed",
                                hint="Copy the sidecar into the evidence folder instead of linking to it.") from None
        except (OSError, Unstable) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (
                "it kept changing while it was read" if isinstance(exc, Unstable) else str(exc))
            raise EvidenceError("invalid-front-matter", f"the sidecar {name} cannot be read: {reason};"
                                " the image is not indexed",
                                hint=f"Make {name} a regular UTF-8 YAML file (or remove it); the image is"
                                " read with it.") from None
        backend = self.store.backend
        cached = backend.measurement(self.conn, sha, MEASUREMENT_VERSION)
        measurement = None
        if cached is not None:
            try:
                measurement = Measurement.from_dict(json.loads(cached))
            except ValueError:
                measurement = None
        if measurement is None:
            measurement = measure(data)
            backend.put_measurement(self.conn, sha, MEASUREMENT_VERSION,
                                    json.dumps(measurement.to_dict(), separators=(",", ":")))
            self.result.measured += 1
        return image_document(rel, sha, sidecar, measurement, self.settings.image_language)

    def _image_facts_changed(self, rel: str, current: VersionRecord) -> bool:
        """An image re-read in this scan whose sidecar facts (status, dates, title, subject)
        differ from its indexed version's, though its bytes (sha256) are the same: a sidecar
        edit, imported again under the same version.
        """
        doc = self.fresh.get(rel) if is_image_path(rel) else None
        if doc is None:
            return False
        front = doc.front
        return ((front.status, front.effective_from, front.effective_until, doc.title, doc.subject)
                != (current.status, current.effective_from, current.effective_until, current.title,
                    current.subject))

    def _read_changed(self) -> None:
        """Read every candidate whose stat key changed; fresh files wait to settle (scan.py)."""
        waiting: dict[str, scanning.Candidate] = {}
        candidates, raw, same, pause = self.listing.candidates, self.old.raw, self.same, self.pause
        todo: list[str] = []  # the paths whose stat key changed (or that are new), read in path order
        for n, (rel, candidate) in enumerate(candidates.items()):
            if pause is not None and n % PAUSE_FILES == PAUSE_FILES - 1:
                pause()
            stored = raw.get(rel)  # the stat key compared as a tuple (OldRows.matches), no call
            if stored is not None and stored[1] >= 0 and stored[1:5] == candidate.key:
                same.add(rel)
            else:
                todo.append(rel)
        todo.sort()
        done = len(same)
        total = len(candidates)

        def read(rel: str, candidate: scanning.Candidate, settled: bool) -> None:
            nonlocal done
            if self.pause is not None:
                self.pause()
            self._read(rel, candidate, settled)
            done += 1
            if self.progress is not None:
                self.progress(done, total, rel)

        now = scanning.now_ns()
        for rel in todo:
            candidate = candidates[rel]
            if candidate.key.fresh(now) and not candidate.key.coarse:
                waiting[rel] = candidate
            else:
                read(rel, candidate, not waiting)  # (every path waiting is before rel)
        del todo
        deadline = time.monotonic() + self.settle
        while waiting:
            wait = min(max(c.key.settles_at() for c in waiting.values()) - scanning.now_ns(),
                       scanning.SETTLE_NS)
            if wait > 0:
                if time.monotonic() + wait / 1e9 > deadline:
                    break
                time.sleep(wait / 1e9)
            now = scanning.now_ns()
            settled = True  # no path before this one waits any longer (read, gone or unchanged)
            for rel, candidate in sorted(waiting.items()):
                try:
                    key = StatKey.of(os.stat(candidate.path))
                    if is_image_path(rel):
                        key = scanning.image_key(candidate.path, key)
                except FileNotFoundError:
                    del waiting[rel]  # deleted meanwhile: absent
                    continue
                except OSError:
                    key = candidate.key
                if key != candidate.key or key.fresh(now):
                    waiting[rel] = scanning.Candidate(candidate.path, key)  # changed again: wait
                    settled = False
                    continue
                del waiting[rel]
                if self.old.matches(rel, key):
                    self.same.add(rel)
                    continue
                read(rel, scanning.Candidate(candidate.path, key), settled)
        for rel in sorted(waiting):
            self.result.unstable.append(rel)
            if rel in self.old:
                self.same.add(rel)  # keeps what was indexed; read again next scan
            else:
                self._stage(FileRow(rel, -1, 0, 0, 0, "", None, None, None))
        for rel, finding in self.listing.refused.items():
            row = FileRow(rel, -1, 0, 0, 0, "", None, None, finding_dict(finding))
            old = self.old.peek(rel)
            if old is not None and row.same_file(old):
                self.same.add(rel)
            else:
                self._stage(row)

    def _exists(self, path: str) -> bool:
        """A files row (not a refused path) exists for ``path`` after this scan."""
        if path in self.rows:
            row = self.rows.get(path)
            return row is not None and row.read
        if path in self.same:
            kept = self.old.peek(path)
            return kept is not None and kept.read
        if path in self.old or self.listing.full:
            return False  # looked at and gone (a full walk looks at every path)
        row = self.conn.execute("SELECT sha256 FROM files WHERE path = ?", (path,)).fetchone()
        return row is not None and row[0] != ""

    def _groups(self, doc_ids: Sequence[str]) -> tuple[dict[str, list[FileRow]], set[str]]:
        """Every indexable file of each of ``doc_ids`` after this scan: the stored rows (the
        ``files`` table still holds the state before this scan for these doc_ids) minus the
        paths that changed or went away, plus this scan's rows; and the paths of those
        imported right after their read (:meth:`_import_now`).
        """
        out: dict[str, dict[str, FileRow]] = {doc_id: {} for doc_id in doc_ids}
        cols = "path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem, findings"
        marks = ", ".join("?" * len(doc_ids))
        for r in self.conn.execute(f"SELECT {cols} FROM files WHERE doc_id IN ({marks})", tuple(doc_ids)).fetchall():
            path = str(r[0])
            if path in self.rows:
                continue
            if path in self.same or (path not in self.old and not self.listing.full):
                out[str(r[6])][path] = _row(r)  # (the stored row: what ``old`` holds of it)
        imported: set[str] = set()
        for row, was_imported in self.rows.by_doc(doc_ids):
            assert row.doc_id is not None
            out[row.doc_id][row.path] = row
            if was_imported:
                imported.add(row.path)
        return {doc_id: [r for r in rows.values() if r.indexable] for doc_id, rows in out.items()}, imported

    # -- the scan ------------------------------------------------------------------------------

    def run(self) -> ScanResult:
        self._note_evidence_folder()
        (self.before,) = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
        digest = None
        if self.listing.full:
            # the digest is kept with the log's length: a process of an older Grounding that
            # appends events without knowing the digest row cannot leave it looking valid
            digest = f"{self.before} {scanning.listing_digest(self.listing)}"
            meta = dict(self.conn.execute("SELECT key, value FROM meta WHERE key IN ('full_reconcile', ?)",
                                          (LISTING_KEY,)).fetchall())
            if meta.get(LISTING_KEY) == digest and "full_reconcile" not in meta:
                self._unchanged()
                return self.result
        self._load_rows()
        full = self.conn.execute("SELECT value FROM meta WHERE key = 'full_reconcile'").fetchone()
        self.deriver = deriver = Deriver(self.conn, self.store.backend, self.settings,
                                         after_flush=None if self.bulk is None else self.bulk.batch)
        self.empty = not self.old and self.conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None \
            and self.conn.execute("SELECT 1 FROM versions LIMIT 1").fetchone() is None
        self._read_changed()
        removed = [p for p in self.old if p not in self.rows and p not in self.same]
        if not self.listing.full:
            removed = [p for p in removed if p in self.listing.gone
                       or any(p.startswith(pre) for pre in self.listing.gone_prefixes)]
        self._stage_affected(removed, full is not None)
        if not self.empty:  # (a cold index: no version was imported before this scan)
            self._refuse_lowered_versions()
        last = ""
        while True:  # the affected doc_ids, SCAN_CHUNK at a time, in order
            chunk = [str(r[0]) for r in self.conn.execute(
                "SELECT doc_id FROM scan_docs WHERE doc_id > ? ORDER BY doc_id LIMIT ?", (last, SCAN_CHUNK)).fetchall()]
            if not chunk:
                break
            self._reconcile_chunk(chunk)
            last = chunk[-1]
        deriver.flush()
        self._write_loose_rows()
        self._finish_rows(removed)
        if full is not None:
            self.conn.execute("DELETE FROM meta WHERE key = 'full_reconcile'")
        if digest is not None and full is None and not (len(self.rows) or removed or self.result.unstable
                                                        or self.appended):
            # nothing changed: the files table is exactly this walk; the next walk that lists
            # the same is answered by _unchanged, without loading the stored stat keys
            put_meta(self.conn, LISTING_KEY, digest)
        self.rows.clear()
        self.result.events = AppendedEvents(self.store, self.before, self.appended)
        return self.result

    def _stage_affected(self, removed: list[str], full: bool) -> None:
        """Fill ``scan_docs`` with the doc_ids to reconcile: those of the changed rows (before
        and after this scan) and of the removed ones; every doc_id stored or read when a full
        reconcile is asked. The ``files`` table still holds the state before the scan.
        """
        self.rows.flush()
        sql = ("INSERT INTO scan_docs (doc_id) SELECT doc_id FROM scan_files WHERE touched = 1 AND doc_id IS NOT NULL"
               " UNION SELECT f.doc_id FROM scan_files AS s JOIN files AS f ON f.path = s.path"
               " WHERE s.touched = 1 AND f.doc_id IS NOT NULL")
        if full:
            sql += (" UNION SELECT doc_id FROM versions UNION SELECT doc_id FROM files WHERE doc_id IS NOT NULL"
                    " UNION SELECT doc_id FROM scan_files WHERE doc_id IS NOT NULL")
        self.conn.execute(sql)
        if removed:
            self.conn.executemany(
                "INSERT INTO scan_docs (doc_id) SELECT doc_id FROM files WHERE path = ? AND doc_id IS NOT NULL"
                " ON CONFLICT (doc_id) DO NOTHING", [(p,) for p in removed])

    def _reconcile_chunk(self, doc_ids: list[str]) -> None:
        """Reconcile these doc_ids (SPEC §3): choose their files, append their events and
        write the rows of their files with their findings.
        """
        groups, imported = self._groups(doc_ids)
        chosen: dict[tuple[str, int | None], str] = {}
        group_findings: dict[str, list[Finding]] = {}
        for doc_id, group in groups.items():
            picked, dups = scanning.choose(doc_id, group, self.config.evidence_display)
            chosen.update({(doc_id, v): p for v, p in picked.items()})
            for path, fs in dups.items():
                group_findings.setdefault(path, []).extend(fs)
        if not imported <= set(chosen.values()):  # cannot happen (_import_now): never log a wrong import
            raise RuntimeError(f"imported while read but not chosen: {sorted(imported - set(chosen.values()))}")
        view = _WriterView(self.store, self.conn, self.before)  # the index before this scan's events
        for pending, doc in self._reconcile(view, chosen, doc_ids, groups, imported):
            self._emit(pending, doc)
        after = _WriterView(self.store, self.conn)
        for (doc_id, declared), rel in chosen.items():
            if rel in imported:  # imported as read: its version's first content (no reuse; a cold index)
                continue
            record = after.record(doc_id, declared) if declared is not None else None
            if record is not None and record.declared and record.sha256 != record.first_sha256:
                group_findings.setdefault(rel, []).append(Finding(
                    "version-reuse", Span(0, 0, 0, 3),
                    f"the content of {doc_id}@{declared} changed but its declared version did not;"
                    f" citations pinned to its original hash ({record.first_sha256[:12]}) now fail",
                    hint=(f"Raise 'version' in the sidecar {sidecar_path(rel.rpartition('/')[2])} whenever"
                          " the image changes" if is_image_path(rel) else
                          "Raise 'version' in the front matter whenever the content changes")
                    + "; restoring the original content removes this warning.",
                ))
        self._write_rows(sorted(((r.path, r) for g in groups.values() for r in g), key=lambda pr: pr[0]),
                         group_findings)

    def _write_loose_rows(self) -> None:
        """Write the rows in no doc_id's group: this scan's rows of files that are not
        indexable documents (a parse problem, refused, unstable and new), a chunk at a time,
        and unstable files whose kept row is not one (those of an indexable file were written
        with their group).
        """
        for chunk in self.rows.ordered("doc_id IS NULL"):
            self._write_rows([(str(r[0]), _row(r)) for r in chunk], {})
        kept: list[tuple[str, FileRow]] = []
        for path in sorted(set(self.result.unstable) & self.same):
            row = self.old.peek(path)
            if row is None:
                continue
            if row.indexable and self.conn.execute("SELECT 1 FROM scan_docs WHERE doc_id = ?",
                                                   (row.doc_id,)).fetchone() is not None:
                continue  # written with its group
            kept.append((path, row))
        self._write_rows(kept, {})

    def _write_rows(self, rows: Sequence[tuple[str, FileRow]], group_findings: dict[str, list[Finding]]) -> None:
        """Store ``rows`` (path order) with their findings: the parse problem, the unstable
        note and ``group_findings`` (duplicates, version reuse). Fills ``findings_changed``,
        :attr:`findings` and :attr:`rewritten`.
        """
        conn = self.conn
        result = self.result
        unstable = result.unstable
        writes: list[FileRow] = []
        stored_rows = self.old.peek_many([path for path, _row in rows])
        for path, row in rows:
            findings: list[Finding] = []
            if row.problem:
                findings.append(finding_of(row.problem))
            if path in unstable:
                findings.append(scanning.file_finding(
                    "unreadable-evidence",
                    "the file changed while it was read; it was not indexed from that read and is"
                    " read again once it is stable",
                    "Wait for the program writing it to finish; nothing else is affected."))
            findings.extend(group_findings.get(path, ()))
            stored = tuple(finding_dict(f) for f in findings)
            old = stored_rows.get(path)
            if old is None and not self.listing.full:
                prev = conn.execute("SELECT findings FROM files WHERE path = ?", (path,)).fetchone()
                before: tuple[dict[str, Any], ...] = tuple(json.loads(prev[0])) if prev and prev[0] else ()
            else:
                before = old.findings if old is not None else ()
            new_row = FileRow(row.path, row.size, row.mtime_ns, row.ctime_ns, row.inode, row.sha256,
                              row.doc_id, row.declared_version, row.problem, stored)
            if stored != before:
                result.findings_changed.append(path)
                if path not in self.rows and path not in self.same:
                    self.rewritten.add(path)
            if not new_row.same_file(old) or stored != before:
                writes.append(new_row)
            if stored:
                self.findings[path] = [finding_of(d) for d in stored]  # (as read back: the result's)
            else:
                self.findings.pop(path, None)
        conn.executemany(
            UPSERT_FILE_ROW,
            [(r.path, r.size, r.mtime_ns, r.ctime_ns, r.inode, r.sha256, r.doc_id, r.declared_version,
              json.dumps(r.problem, ensure_ascii=False) if r.problem else None,
              json.dumps(list(r.findings), ensure_ascii=False) if r.findings else None) for r in writes])
        self.wrote = self.wrote or bool(writes)

    def _finish_rows(self, removed: list[str]) -> None:
        """Delete the removed paths' rows; fill ``evidence``: every path looked at (a full
        walk: every path) with its findings, and the paths whose findings this scan changed.
        """
        conn = self.conn
        result = self.result
        if removed:
            conn.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            result.findings_changed.extend(p for p in removed if self.old.has_findings(p))
        if self.wrote or removed:  # the stored listing digest no longer describes the files table
            conn.execute("DELETE FROM meta WHERE key = ?", (LISTING_KEY,))
        changed = set(result.findings_changed)
        paths = self.rows.paths | self.same
        if not self.listing.full:
            paths = {p for p in paths if p in self.listing.candidates or p in self.listing.refused
                     or p in changed} | self.rewritten
        # most unchanged rows have no findings (NULL): an empty list each, no call and no JSON
        evidence: dict[str, list[Finding]] = {path: [] for path in sorted(paths)}
        for path, found in self.findings.items():
            if path in evidence:
                evidence[path] = found
        for path in self.noted:  # kept rows: their stored findings, unless this scan rewrote them
            if path in self.same and path not in self.findings and path not in changed and path in evidence:
                evidence[path] = self.old.findings(path)
        result.evidence = evidence
        result.findings_changed.sort()

    def _unchanged(self) -> None:
        """The scan of a full walk whose :func:`scan.listing_digest` is the one stored by the
        last scan that changed nothing (and no ``files`` row was written since: every write
        deletes it): every path is unchanged, so nothing is read, appended or written, and
        ``evidence`` is the stored findings of every path walked (one query over the few rows
        with findings). Costs the digest and that query instead of loading and comparing every
        stored stat key (docs/decisions.md, "Unchanged full walks").
        """
        listing = self.listing
        evidence: dict[str, list[Finding]] = {path: [] for path in sorted([*listing.candidates, *listing.refused])}
        noted = self.conn.execute("SELECT path, findings FROM files WHERE findings IS NOT NULL").fetchall()
        for path, findings in noted:
            if path in evidence:
                evidence[path] = [finding_of(d) for d in json.loads(findings)]
        self.result.evidence = evidence
        self.result.events = AppendedEvents(self.store, self.before, 0)

    def _refuse_lowered_versions(self) -> None:
        """A file may not lower its declared version (docs/decisions.md, Index).

        When a re-read file declares version N of a doc_id whose newest known version M > N
        was imported from that same file, and no file declares M any more (the writer lowered
        the number, or checked out an older copy), the file is ``invalid-front-matter`` and
        not indexed (so M is revoked like any version whose front matter broke). Archives
        that declare older versions in other files are fine.
        """
        fronts = self.rows.ordered("version_line IS NOT NULL AND declared_version IS NOT NULL",
                                   "path, doc_id, declared_version, version_line")
        for chunk in fronts:
            view = _WriterView(self.store, self.conn, self.before)  # one per chunk: its caches stay bounded
            for rel, doc_id, wanted, line in chunk:
                self._refuse_lowered(view, str(rel), str(doc_id), int(wanted), int(line))

    def _refuse_lowered(self, view: _WriterView, rel: str, doc_id: str, wanted: int, line: int) -> None:
        """:meth:`_refuse_lowered_versions` for the file ``rel``, which declares version
        ``wanted`` of ``doc_id`` on its line ``line`` (1-based).
        """
        newest = view.newest(doc_id)
        if newest is None or newest.version <= wanted or newest.path != rel:
            return
        groups, _imported = self._groups([doc_id])
        if newest.version in {r.declared_version for r in groups[doc_id]}:
            return
        problem: dict[str, Any] = {
            "name": "invalid-front-matter",
            "message": f"version: {wanted} is lower than version {newest.version} of"
            f" {doc_id!r}, which the index already holds from this file; a document's"
            " versions only go up, so this file is not indexed",
            "line": line,
            "hint": f"Declare version {newest.version + 1} (or higher) to publish this"
            " content; to keep an older version, archive it in another file.",
        }
        row = self.rows.get(rel)
        assert row is not None
        self._stage(FileRow(row.path, row.size, row.mtime_ns, row.ctime_ns, row.inode,
                            row.sha256, None, None, problem))
        self.fresh.discard(rel)
        self.conn.execute("INSERT INTO scan_docs (doc_id) VALUES (?) ON CONFLICT (doc_id) DO NOTHING", (doc_id,))

    def _reconcile(self, view: _WriterView, chosen: dict[tuple[str, int | None], str], doc_ids: Sequence[str],
                   groups: dict[str, list[FileRow]], imported: set[str],
                   ) -> Iterator[tuple[Event, EvidenceDocument | None]]:
        """The events that make ``doc_ids`` match their chosen files (SPEC §3), each with the
        document an import brings, decided against ``view`` (the index before the scan, which
        the events appended meanwhile do not change). A generator: the caller appends and
        derives each event before the next text is read (bounded memory). Paths imported
        right after their read (``imported``, :meth:`_import_now`) are not imported again.
        """
        targeted: set[tuple[str, int]] = set()
        rows = {r.path: r for group in groups.values() for r in group}
        for (doc_id, declared), rel in sorted(chosen.items(), key=lambda kv: kv[1]):
            if rel in imported:
                targeted.add((doc_id, declared if declared is not None else 1))
                continue
            row = rows[rel]
            if declared is not None:
                version = declared
                current = view.record(doc_id, version)
            else:
                current = view.newest(doc_id)
                version = current.version if current is not None else 1
                if current is not None and current.sha256 != row.sha256:
                    targeted.add((doc_id, current.version))  # superseded, not deleted
                    version = current.version + 1
                    current = None
            targeted.add((doc_id, version))
            if current is not None and current.sha256 == row.sha256 and current.path == rel:
                if (not current.revoked or current.reason == "status: revoked") \
                        and not self._image_facts_changed(rel, current):
                    continue
            doc = self.fresh.get(rel)
            self.fresh.discard(rel)  # imported now: never needed again
            if doc is None or doc.sha256 != row.sha256:
                doc = self._reread(rel, row)
                if doc is None:
                    continue
            yield Event(0, "import", doc_id, version, doc.sha256, rel, doc.text, declared is not None), doc
            if doc.front.status == "revoked":
                yield Event(0, "revoke", doc_id, version, reason="status: revoked"), None
        for doc_id in doc_ids:
            versions = view.versions(doc_id)
            if not versions:
                continue
            newest = max(versions)
            for version, record in sorted(versions.items()):
                if record.revoked or (doc_id, version) in targeted:
                    continue
                if not record.declared and version != newest:
                    continue  # an older automatic version, superseded, not deleted
                reason = "no longer indexed from " + record.path if self._exists(record.path) else "deleted"
                yield Event(0, "revoke", doc_id, version, reason=reason), None

    def _reread(self, rel: str, row: FileRow) -> EvidenceDocument | None:
        """An unchanged file's document, read again (a version to re-import)."""
        path = self.config.evidence_root / rel
        self.result.read_again += 1
        try:
            data, _key = scanning.read_stable(path)
        except (OSError, Unstable):
            return None
        if scanning.sha256_hex(data) != row.sha256:
            return None  # changed since: the next scan sees it
        try:
            if is_image_path(rel):
                return self._image(rel, data, row.sha256)
            return parse_evidence_text(rel, decode_evidence(data), row.sha256, self.settings.separators,
                                       self.settings.subject_fields)
        except EvidenceError:
            return None


def put_meta(conn: Any, key: str, value: str) -> None:
    """Set the ``meta`` row ``key`` to ``value`` (both backends: ``ON CONFLICT ... DO UPDATE``)."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


EVIDENCE_FOLDER_KEY = "scan:evidence_folder"
"""The ``meta`` row holding the evidence folder as the stored findings name it (relative to
the workspace root, ``evidence`` by default): the scan's findings (``duplicate-doc-id``)
keep the paths they show, and a folder renamed together with ``grounding.toml``'s
``evidence`` keeps every file's stat key, so nothing else would tell the scan to write them
again (:meth:`_Scan._note_evidence_folder`)."""

LISTING_KEY = "scan:listing"
"""The ``meta`` row holding the log's length and :func:`scan.listing_digest` (``"SEQ
DIGEST"``) of the last full walk whose scan changed nothing (docs/decisions.md, "Unchanged
full walks"); every write of a ``files`` row deletes it (:meth:`_Scan._write_rows`,
:meth:`Store.import_log`)."""


SUMMARY_FORM = 1
"""The definition of the answers :meth:`Store.stats` and :meth:`Store.conflicting_keys` keep
in ``meta``: raise it when a summary's query changes, so no row written before is used."""


STAT_ONLY = 6
"""Columns of a ``files`` row a full walk loads (path, size, mtime_ns, ctime_ns, inode,
findings): the rest is read when the row is needed (a full row has 10)."""


class _OldRows(Mapping[str, FileRow]):
    """The ``files`` rows a scan started from, converted to :class:`FileRow` only when asked
    (a warm full walk of 30,000 unchanged files compares stat keys and builds no objects).
    """

    def __init__(self, raw: dict[str, tuple[Any, ...]], conn: Connection | None = None) -> None:
        self._raw = raw
        self._conn = conn
        self._rows: dict[str, FileRow] = {}

    def __getitem__(self, path: str) -> FileRow:
        row = self._rows.get(path)
        if row is None:
            raw = self._raw[path]
            if len(raw) == STAT_ONLY and self._conn is not None:  # loaded as a stat key only
                raw = self._conn.execute(
                    "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem,"
                    " findings FROM files WHERE path = ?", (path,)).fetchone()
            row = self._rows[path] = _row(raw)
        return row

    @property
    def raw(self) -> Mapping[str, tuple[Any, ...]]:
        """The rows as read: (path, size, mtime_ns, ctime_ns, inode, ...) by path."""
        return self._raw

    def __contains__(self, path: object) -> bool:
        return path in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def peek(self, path: str) -> FileRow | None:
        """The row of ``path`` (None: none), like ``get`` but not kept: a scan that looks at
        most rows once (a storm, a full reconcile) keeps no object per row.
        """
        row = self._rows.get(path)
        if row is not None:
            return row
        raw = self._raw.get(path)
        if raw is None:
            return None
        if len(raw) == STAT_ONLY and self._conn is not None:  # loaded as a stat key only
            raw = self._conn.execute(
                "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem,"
                " findings FROM files WHERE path = ?", (path,)).fetchone()
        return _row(raw)

    def peek_many(self, paths: Sequence[str]) -> dict[str, FileRow]:
        """:meth:`peek` of each of ``paths`` that has a row, the rows loaded as stat keys only
        read in one query per :data:`STAGE_CHUNK` paths.
        """
        out: dict[str, FileRow] = {}
        missing: list[str] = []
        for path in paths:
            row = self._rows.get(path)
            raw = self._raw.get(path)
            if row is not None:
                out[path] = row
            elif raw is not None and (len(raw) != STAT_ONLY or self._conn is None):
                out[path] = _row(raw)
            elif raw is not None:
                missing.append(path)
        for start in range(0, len(missing), STAGE_CHUNK):
            some = missing[start:start + STAGE_CHUNK]
            assert self._conn is not None
            for r in self._conn.execute(
                    "SELECT path, size, mtime_ns, ctime_ns, inode, sha256, doc_id, declared_version, problem,"
                    f" findings FROM files WHERE path IN ({', '.join('?' * len(some))})", tuple(some)).fetchall():
                out[str(r[0])] = _row(r)
        return out

    def has_findings(self, path: str) -> bool:
        """The stored row of ``path`` has findings."""
        row = self._raw[path]
        return bool(row[STAT_ONLY - 1] if len(row) == STAT_ONLY else row[9])

    def matches(self, path: str, key: StatKey) -> bool:
        """The row of ``path`` has this stat key (and is not marked for re-reading)."""
        raw = self._raw.get(path)
        return raw is not None and raw[1] >= 0 and (raw[1], raw[2], raw[3], raw[4]) == (
            key.size, key.mtime_ns, key.ctime_ns, key.inode)

    def findings(self, path: str) -> list[Finding]:
        row = self._raw[path]
        raw = row[STAT_ONLY - 1] if len(row) == STAT_ONLY else row[9]
        return [finding_of(d) for d in json.loads(raw)] if raw else []


def _row(r: Sequence[Any]) -> FileRow:
    """A :class:`FileRow` from ``(path, size, mtime_ns, ctime_ns, inode, sha256, doc_id,
    declared_version, problem[, findings])`` (a staged row has no findings).
    """
    return FileRow(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), str(r[5]),
                   None if r[6] is None else str(r[6]), None if r[7] is None else int(r[7]),
                   json.loads(r[8]) if r[8] else None,
                   tuple(json.loads(r[9])) if len(r) > 9 and r[9] else ())


class _WriterView(SqlSnapshot):
    """The index as the scan's own transaction sees it (uncommitted events included)."""

    def __init__(self, store: Store, conn: Connection, seq: int | None = None) -> None:
        """``seq``: the state after that many events (default: every event, the scan's own)."""
        if seq is None:
            seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
        super().__init__(store, seq)
        self._writer = conn

    def _conn(self) -> Connection:
        return self._writer


def record_location(config: Config, record: VersionRecord, line: int) -> Location:
    """Where a version's line lives, relative to the workspace root (for related info)."""
    return Location(config.evidence_display(record.path), line)


__all__ = ["LOCK_WAIT_S", "ImportResult", "IndexBusy", "IndexError_", "IndexTooNew", "NoEvidenceMatched",
           "ProgressCallback", "ScanResult", "Store", "event_of", "fts_rows", "record_location", "walk_evidence"]
