"""The SQLite adapter of the store: schema, connections, FTS5 and the SQLite-only lookups.

Everything SQLite-specific lives here (FTS5, ``json_each``, ``WITHOUT ROWID``, pragmas,
``BEGIN IMMEDIATE``); the rest of the store (``derived.py``, ``sql_snapshot.py``,
``store.py``) speaks plain SQL that PostgreSQL also speaks (CTEs, window functions,
``ON CONFLICT DO NOTHING``) through the :class:`~grounding_core.backend.Backend` interface,
which ``postgres_backend.py`` implements too.

Connections: one **writer** connection, used by one thread at a time under the store's lock
(scans, FTS batches), and one **reader** connection per thread (``PRAGMA query_only``), so a
check in a worker thread never waits for a scan (WAL: readers see the last commit). An
``index = ":memory:"`` database is a temporary file deleted on :meth:`close` (several
connections must share it, which a private in-memory database cannot).

Schema (``PRAGMA user_version`` = :data:`LAYOUT`; older layouts are migrated on open):

- ``events`` — the source of truth, append-only (triggers refuse UPDATE and DELETE);
  ``data`` is a nullable JSON column left for later event kinds (memory, images).
- ``versions`` — one row per import (``content_id`` = the import's seq): the front-matter
  facts, the seq range in which it is the current content of (doc_id, version)
  (``content_id <= n < current_to``) and the range in which it is *active*
  (``active_from <= n < active_to``; NULL ``active_from``: never active).
- ``revocations`` — (content_id, seq, reason) for every revoke that hit a current content.
- ``field_lines`` — the field lines of every content that is ever active: field name,
  normalised value (SPEC §7.4), value as written (NULL when equal), line; the subject,
  doc_id, version and activity come from the content's ``versions`` row (a PK join), so the
  rows never change once written. Indexed by 64-bit hashes (:func:`text_hash`) of field,
  subject and value term (the §7.3 form), never by the texts: index cells stay a few bytes
  even for a one-megabyte value (a long key in a B-tree cell is re-read at every comparison
  that reaches it, which made a 12,000-character value quadratic).
- ``terms`` — the known-term dictionary of GR110 (SPEC §7.6): each value term (kind ``v``)
  with the hashes of the key holding it, and each normalised field name (kind ``f``), with
  its *anchor* (first 3 code points; a 2-code-point term is its own) and *next* (code points
  4-6 of a term of 6 or more, else ``''``), indexed by anchor: the terms a sentence can hold
  are those anchored at one of its 2- or 3-grams whose next piece is also one of its 3-grams
  (a common start such as ``南广场`` no longer brings thousands of candidates).
- ``key_values`` — SPEC §7.4's key summaries kept at write time, for the *head* of the log
  (the state after the last commit), of the keys without a subject and the lines of undated
  contents only (``derived.KEPT_SQL``): one row per (key, normalised value) with its count of
  active lines, its first spelling (``spelled``, NULL when it is ``norm``) and its first
  :data:`~grounding_core.derived.KEPT_SOURCES` sources by (doc_id, version, line) as JSON
  ``[doc_id, version, line, content_id, path(, value)]`` (the value only where it is not the
  first spelling). Clustered by (fh, sh, th, first source): a key's values are one
  contiguous range (sorted by first source when read: a few thousand rows at most), and a
  value is found for maintenance by its term hash ``th`` (as in ``field_lines``; values
  sharing a term, ``南广场`` and ``南广场。``, differ in first source). ``grounding_core.derived``
  keeps it in the events' transaction; a snapshot it cannot answer (an older ``n``, more
  sources per value, a key with a subject) reads ``field_lines`` (``grounding_core.sql_snapshot``).
- ``dated_lines`` — the field lines of those keys from contents with ``effective_from`` or
  ``effective_until`` (active or not depending on "today", a query parameter), so that a
  kept summary reads them live by key.
- ``region_values`` — the measured attributes of image regions (SPEC §12) by (field, value):
  (content_id, region number), for the measured questions of SPEC §13 (an indexed lookup on
  field and value); image attributes are also ``field_lines`` rows, whose ``subject`` column
  holds the region's conflict-key subject ``SUBJECT#rN`` (NULL on text lines: the version's).
- ``measurements`` — the measurement of every image content by sha256 and
  ``MEASUREMENT_VERSION`` (JSON): the cache that lets a scan re-measure only what changed.
  Not derived from the log (a pure function of the bytes) and kept across rebuilds.
- ``fields`` — every field name by its hash, with its first 8 code points (prefix lookups
  for GR109's "did you mean").
- ``vocabulary`` — the closed question grammar's names (SPEC §13, §15): each distinct subject
  (kind ``s``) and field name (kind ``f``) of an ever-active content, with its NFKC form
  (``term``, spaces kept), the term's *anchor* (first 3 code points; a shorter term is its own)
  and the name's hash ``nh``, indexed by anchor: the names a question can hold are those
  anchored at one of its 1-, 2- or 3-grams. ``subject_contents`` — (subject hash, content_id)
  of every ever-active content with a subject and a field line, so whether a subject is
  active is one seek per content of it.
- ``memory_entries`` — memory entries derived from the memory events of the log (SPEC §11;
  ``grounding_core.memory_store``; not settings-dependent, never rebuilt by a settings change).
- ``files`` — scan bookkeeping per evidence path: the stat key (size, mtime, ctime, inode),
  sha256, doc_id, declared version, the parse problem, and the file's evidence findings.
- ``scan_files`` / ``scan_docs`` — one scan's own file rows and the doc_ids it must
  reconcile, written and emptied inside the scan's transaction (always empty once committed):
  a scan of 30,000 files keeps them here, not in Python memory (``store._Staged``).
- ``fts_queue`` / ``lines_fts`` — contents waiting for full-text rows, and the FTS5
  (trigram) rows themselves, keyed ``rowid = content_id * 2**24 + line``.
- ``meta`` — key/value facts of the store (the settings fingerprint of the derived tables).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .backend import (
    DERIVED_VERSION,
    FIELD_HEAD,
    LOCK_WAIT_S,
    Connection,
    FtsHit,
    LineRow,
    LockTimeout,
    NewerLayout,
    ReadOnlyIndex,
    TermRow,
    WriteFailed,
    index_order,
    text_hash,
)

__all__ = ["DERIVED_VERSION", "FIELD_HEAD", "LINE_BITS", "LINE_MASK", "NewerLayout", "SqliteBackend", "fts_string",
           "text_hash"]

LAYOUT = 2
"""``PRAGMA user_version`` of this schema (1: the FTS-only layout before derived tables)."""

LINE_BITS = 24
"""FTS rowids are ``content_id << LINE_BITS | line``; longer documents' later lines are not
searchable (they still verify: verbatim checks never use FTS)."""

LINE_MASK = (1 << LINE_BITS) - 1

CACHE_KIB = 8 * 1024
"""SQLite page cache of the writer connection (KiB): scans insert into large B-trees.
Bounded: RSS must stay flat with corpus size. 8 MiB, not 32: the cold scan's peak RSS drops
by 20-30 MB (gen-1k 94 -> 74 MB, gen-30k 186 -> 156 MB) at the same CPU time (issue 10)."""
READER_CACHE_KIB = 8 * 1024
"""SQLite page cache of each reader connection (KiB; one per reading thread, five in the
language server): checks read a few index pages per citation and key."""

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
"""The log; ``data`` (JSON) holds the fields of memory events (SPEC §11, ``grounding_core.memory``)."""
EVENTS_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events"
    " BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events"
    " BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
)
EVENTS = EVENTS_TABLE + ";\n" + ";\n".join(EVENTS_TRIGGERS) + ";\n"

DERIVED = """
CREATE TABLE IF NOT EXISTS versions (
  content_id INTEGER PRIMARY KEY,
  doc_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  path TEXT NOT NULL,
  declared INTEGER NOT NULL,
  status TEXT NOT NULL,
  effective_from TEXT,
  effective_until TEXT,
  title TEXT NOT NULL,
  subject TEXT NOT NULL,
  line_count INTEGER NOT NULL,
  front_end INTEGER NOT NULL,
  first_sha256 TEXT NOT NULL,
  current_to INTEGER,
  active_from INTEGER,
  active_to INTEGER
);
CREATE INDEX IF NOT EXISTS versions_doc ON versions (doc_id, version, content_id);
CREATE INDEX IF NOT EXISTS versions_path ON versions (path);
CREATE INDEX IF NOT EXISTS versions_active_from ON versions (active_from) WHERE active_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS versions_active_to ON versions (active_to) WHERE active_to IS NOT NULL;
CREATE TABLE IF NOT EXISTS revocations (
  content_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (content_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS field_lines (
  fh INTEGER NOT NULL,
  sh INTEGER NOT NULL,
  th INTEGER NOT NULL,
  field TEXT NOT NULL,
  norm TEXT NOT NULL,
  value TEXT,
  line INTEGER NOT NULL,
  content_id INTEGER NOT NULL,
  subject TEXT
);
CREATE INDEX IF NOT EXISTS field_lines_key ON field_lines (fh, sh, th);
CREATE TABLE IF NOT EXISTS key_values (
  fh INTEGER NOT NULL,
  sh INTEGER NOT NULL,
  first_doc TEXT NOT NULL,
  first_version INTEGER NOT NULL,
  first_line INTEGER NOT NULL,
  th INTEGER NOT NULL,
  lines INTEGER NOT NULL,
  field TEXT NOT NULL,
  subject TEXT NOT NULL,
  norm TEXT NOT NULL,
  spelled TEXT,
  sources TEXT NOT NULL,
  PRIMARY KEY (fh, sh, th, first_doc, first_version, first_line)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dated_lines (
  fh INTEGER NOT NULL,
  sh INTEGER NOT NULL,
  field TEXT NOT NULL,
  subject TEXT NOT NULL,
  norm TEXT NOT NULL,
  value TEXT,
  line INTEGER NOT NULL,
  content_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dated_lines_key ON dated_lines (fh, sh);
CREATE TABLE IF NOT EXISTS region_values (
  field TEXT NOT NULL,
  value TEXT NOT NULL,
  content_id INTEGER NOT NULL,
  region INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS region_values_key ON region_values (field, value, content_id, region);
CREATE TABLE IF NOT EXISTS terms (
  anchor TEXT NOT NULL,
  next TEXT NOT NULL,
  term TEXT NOT NULL,
  kind TEXT NOT NULL,
  fh INTEGER NOT NULL,
  sh INTEGER NOT NULL,
  th INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS terms_anchor ON terms (anchor, next, th, kind, fh, sh);
CREATE TABLE IF NOT EXISTS fields (
  fh INTEGER PRIMARY KEY,
  head TEXT NOT NULL,
  field TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS fields_head ON fields (head);
CREATE TABLE IF NOT EXISTS vocabulary (
  anchor TEXT NOT NULL,
  term TEXT NOT NULL,
  kind TEXT NOT NULL,
  nh INTEGER NOT NULL,
  name TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS vocabulary_anchor ON vocabulary (anchor, kind, nh);
CREATE TABLE IF NOT EXISTS subject_contents (
  sh INTEGER NOT NULL,
  content_id INTEGER NOT NULL,
  PRIMARY KEY (sh, content_id)
);
CREATE TABLE IF NOT EXISTS fts_queue (
  content_id INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
"""
"""Tables derived from ``events`` (dropped and rebuilt from the log when the parse settings
change; ``lines_fts`` does not depend on the settings and is kept)."""

FILE_COLUMNS = """
  path TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  ctime_ns INTEGER NOT NULL,
  inode INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  doc_id TEXT,
  declared_version INTEGER,
  problem TEXT"""
"""The columns of a file row (``scan.FileRow`` without its findings), in ``files`` and in a
scan's staged rows ``scan_files``."""

FILES = f"""
CREATE TABLE IF NOT EXISTS files ({FILE_COLUMNS},
  findings TEXT
);
CREATE INDEX IF NOT EXISTS files_doc ON files (doc_id) WHERE doc_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS measurements (
  sha256 TEXT NOT NULL,
  version INTEGER NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (sha256, version)
);
CREATE INDEX IF NOT EXISTS files_inode ON files (inode);
CREATE TABLE IF NOT EXISTS scan_files ({FILE_COLUMNS},
  imported INTEGER NOT NULL,
  version_line INTEGER,
  touched INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS scan_files_doc ON scan_files (doc_id) WHERE doc_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS scan_docs (
  doc_id TEXT PRIMARY KEY
);
"""

FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS lines_fts USING fts5(text, tokenize = 'trigram');
"""
"""``detail=full`` (the default): trigram phrase queries need positions (``detail=column`` and
``none`` refuse multi-trigram terms); BENCHMARKS.md has the measurements."""

POLL_SECONDS = 0.5
"""How often :meth:`SqliteBackend.wait_for_events` looks at the log (SQLite has no
notifications between processes)."""

DERIVED_TABLES = ("versions", "revocations", "field_lines", "terms", "fields", "region_values", "vocabulary",
                  "subject_contents", "key_values", "dated_lines")


class SqliteBackend:
    """Connections and SQLite-only operations of one index database (see module docstring).

    Raises ``sqlite3.Error`` or ``OSError`` when the file cannot be opened, and
    :class:`NewerLayout` for a newer layout; the store turns them into its own errors.
    """

    shared = False
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
    lost: tuple[type[BaseException], ...] = ()

    def __init__(self, path: str) -> None:
        self.location = path
        self._temp_dir: str | None = None
        if path == ":memory:":
            import tempfile  # an in-memory index only (its module costs a check's start-up ~5 ms)

            self._temp_dir = tempfile.mkdtemp(prefix="grounding-index-")
            path = os.path.join(self._temp_dir, "index.sqlite")
        else:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        self._closed = False
        self._ro_uri = "mode=ro"
        self.read_only: str | None = None if self._temp_dir is not None else _read_only_reason(path)
        """Why this process opened the index read-only (a read-only file, folder or file
        system), or None: it checks from the committed state and never writes (docs/decisions.md,
        "Index")."""
        if self.read_only is None:
            self.writer = self._connect(readonly=False)
            self._check_layout()
            self.writer.execute("PRAGMA journal_mode=WAL")
        else:  # decided before opening: SQLite would open it read-only silently and fail at the first write
            self.writer = self._open_read_only()
            self._check_layout()
        self._identity = None if self._temp_dir is not None else _identity(path)

    def _check_layout(self) -> None:
        layout = int(self.writer.execute("PRAGMA user_version").fetchone()[0])
        if layout > LAYOUT:  # read before anything is written, even the journal mode
            self.writer.close()
            raise NewerLayout(f"the index {self.path} was written by a newer Grounding (layout {layout});"
                              f" this one reads layout {LAYOUT}. Upgrade Grounding, or name another"
                              " index; the file is left as it is")

    def _open_read_only(self) -> sqlite3.Connection:
        """The read-only connection of an index this process cannot write (:attr:`read_only`).

        ``mode=ro`` reads a WAL database when its ``-shm`` file exists or can be created. On a
        read-only file system without one (the writer closed cleanly, so SQLite removed it
        and its ``-wal``), ``immutable=1`` is safe: nothing can write through that mount and
        no ``-wal`` holds commits the main file lacks. Otherwise raises ``sqlite3.OperationalError``
        (the store then stands in an in-memory index and says why).
        """
        try:
            conn = self._connect(readonly=True)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            wal = self.path + "-wal"
            if not _on_read_only_fs(self.path) or (os.path.exists(wal) and os.path.getsize(wal) > 0):
                raise sqlite3.OperationalError(
                    f"{exc}: it is {self.read_only}, and SQLite cannot read its write-ahead log"
                    " without writing the -shm file beside it") from exc
        self._ro_uri = "mode=ro&immutable=1"
        conn = self._connect(readonly=True)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn

    def replaced(self) -> str | None:
        """Why the file at :attr:`path` is no longer the one this backend has open, or None:
        deleted (SQLite goes on writing the unlinked file, and everything written is lost at
        close), or replaced by another file or a folder. One ``stat``.
        """
        if self._identity is None:
            return None
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        except OSError as exc:
            return f"cannot be looked at any more ({exc.strerror})"
        if (now.st_dev, now.st_ino) == self._identity:
            return None
        if stat.S_ISREG(now.st_mode):
            return "was replaced by another file"
        return "was replaced by a folder or a special file"

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        """A connection to the index. A reader's is opened with ``mode=ro``: it never creates
        the file (an index deleted under a running process is never replaced by an empty one;
        only the writer creates an index).
        """
        if readonly:
            conn = sqlite3.connect(f"file:{urllib.parse.quote(self.path)}?{self._ro_uri}", uri=True,
                                   check_same_thread=False, isolation_level=None, timeout=LOCK_WAIT_S)
        else:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                   timeout=LOCK_WAIT_S)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB if readonly else CACHE_KIB}")
        # Readers sort in temp files once a sort outgrows the page cache: the corpus-wide
        # GROUP BY of conflicting_keys held 245 MB in memory at 30,000 files (16 MB this way,
        # and less CPU). The writer keeps its sorts (index builds of a scan) in memory.
        conn.execute(f"PRAGMA temp_store={'FILE' if readonly else 'MEMORY'}")
        if readonly:
            conn.execute("PRAGMA query_only=1")
        else:
            # Freed pages are not zeroed beyond the pages a write touches anyway (Debian's SQLite
            # zeroes every one, SQLITE_SECURE_DELETE): dropping the derived tables for a settings
            # rebuild wrote 1.4 GB of zeros at 30,000 files and held their statement journal,
            # 334 MB, in memory (temp_store above). Nothing here is secret from the log's
            # reader: the log keeps every text and the derived rows are made from it.
            conn.execute("PRAGMA secure_delete=FAST")
        return conn

    def reader(self) -> sqlite3.Connection:
        """The calling thread's read-only connection (opened on first use). Raises
        ``sqlite3.ProgrammingError`` once the backend is closed.
        """
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise sqlite3.ProgrammingError("the index is closed")
            conn = self._connect(readonly=True)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close the writer connection; reader connections close when nothing uses them.

        A reader connection may be running a query in another thread right now, and closing
        a connection under a running statement crashes SQLite's Python binding: so the
        readers are only dropped (the thread-local that holds them is replaced) and each is
        closed by its deallocation, once its last statement has finished. The calling
        thread's own reader runs nothing while this thread closes, so it is closed here: a
        connection sits in a reference cycle with its statement cache, so only the cyclic
        garbage collector would free it (never, in a process that ends without teardown, as
        the CLI's do: ``grounding.cli.QUICK_EXIT``). SQLite checkpoints and removes the WAL
        file when the last connection closes, if that connection may write: readers open
        with ``mode=ro``, so the reader is closed before the writer.
        """
        self._closed = True
        own: sqlite3.Connection | None = getattr(self._local, "conn", None)
        self._local = threading.local()
        if own is not None:
            own.close()
        self.writer.close()
        if self._temp_dir is not None:
            import shutil

            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    # -- schema --------------------------------------------------------------------------------

    def create_schema(self) -> bool:
        """Create or migrate the schema; True when the derived tables must be (re)built.

        Layouts before :data:`LAYOUT` kept only ``events``, ``files`` (size/mtime) and an FTS
        table of newest versions: their ``files`` and FTS tables are dropped (a rescan re-reads
        every file once and appends no events for unchanged content) and the derived tables
        are built from the log.
        """
        conn = self.writer
        if self.read_only is not None:  # nothing is created or migrated in an index this process cannot write
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) < LAYOUT:
                raise sqlite3.OperationalError(f"it is {self.read_only}, and its layout is older than this"
                                               " Grounding's, so it cannot be migrated")
            return False
        conn.executescript(EVENTS)
        self._accept_memory_events(conn)
        layout = int(conn.execute("PRAGMA user_version").fetchone()[0])
        rebuild = False
        if layout < LAYOUT:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if int(conn.execute("PRAGMA user_version").fetchone()[0]) < LAYOUT:
                    for table in ("lines_fts", "fts_docs", "files", *DERIVED_TABLES, "fts_queue", "meta"):
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                    columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
                    if "data" not in columns:
                        conn.execute("ALTER TABLE events ADD COLUMN data TEXT")
                    _statements(conn, DERIVED + FILES + FTS)
                    conn.execute(f"PRAGMA user_version = {LAYOUT}")
                    rebuild = True
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        else:
            conn.executescript(DERIVED + FILES + FTS)
        return rebuild

    def _accept_memory_events(self, conn: sqlite3.Connection) -> None:
        """Memory (SPEC §11): make ``events`` accept the memory kinds and create the derived
        ``memory_entries`` table (``grounding_core.memory_store``), in one transaction.

        An ``events`` table made before memory events has a CHECK that refuses them; SQLite
        cannot change a CHECK in place, so the table is copied row for row and seq for seq
        into one with the new CHECK (a crash leaves the old table whole) and the append-only
        triggers are recreated. A ``memory_entries`` table made here is derived from the log.
        """
        from . import memory_store

        table = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_entries'").fetchone() is not None
        kinds_ok = table is not None and "'remember'" in str(table[0])
        if kinds_ok and has_table:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
            if not kinds_ok:
                conn.execute(EVENTS_TABLE.replace("IF NOT EXISTS events", "events_memory", 1))
                copied = ", ".join(c for c in ("seq", "kind", "doc_id", "version", "sha256", "path", "text",
                                               "declared", "reason", "recorded_at", "data") if c in columns)
                conn.execute(f"INSERT INTO events_memory ({copied}) SELECT {copied} FROM events ORDER BY seq")
                conn.execute("DROP TRIGGER IF EXISTS events_no_update")
                conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
                conn.execute("DROP TABLE events")
                conn.execute("ALTER TABLE events_memory RENAME TO events")
                for trigger in EVENTS_TRIGGERS:
                    conn.execute(trigger)
            if not has_table:
                _statements(conn, memory_store.SCHEMA)
                memory_store.rebuild(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def clear_derived(self, conn: Connection) -> None:
        """Drop and recreate the settings-dependent derived tables, empty (inside the caller's
        transaction; recreating also follows a change of their definition).
        """
        for table in DERIVED_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        _statements(conn, DERIVED)

    # -- transactions --------------------------------------------------------------------------

    @contextmanager
    def lock_wait(self, seconds: float) -> Iterator[None]:
        """The writer's ``busy_timeout`` is ``seconds`` within the block (then :data:`LOCK_WAIT_S`)."""
        self.writer.execute(f"PRAGMA busy_timeout = {max(int(seconds * 1000), 0)}")
        try:
            yield
        finally:
            self.writer.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` on the writer: other writers (processes) wait up to the busy
        timeout (:meth:`lock_wait`; 30 s by default), then :class:`LockTimeout` (every write is
        exclusive in SQLite).

        A failure to write (the disk is full, a file size limit, an I/O error, also at
        ``COMMIT``) rolls the transaction back and raises :class:`WriteFailed`: a failed
        ``COMMIT`` leaves the transaction open in SQLite, and with it the write lock.
        """
        if self.read_only is not None:
            raise ReadOnlyIndex(f"the index {self.location} is {self.read_only}")
        conn = self.writer
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _unwritable(exc):
                raise self._write_failed(exc) from exc
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise LockTimeout(str(exc)) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:  # SQLite may have rolled back already; the cause is what matters
                    pass
            if isinstance(exc, sqlite3.OperationalError) and _unwritable(exc):
                raise self._write_failed(exc) from exc
            raise

    def _write_failed(self, exc: sqlite3.OperationalError) -> WriteFailed:
        return WriteFailed(f"cannot write the index {self.location}: {exc}; nothing was written and the"
                           " index is as last committed (free disk space, or set 'index' in grounding.toml"
                           " to a file on a disk that has room)")

    def can_write(self) -> bool:
        return self.read_only is None

    def writer_holder(self) -> str | None:
        return None

    @contextmanager
    def read(self, conn: Connection) -> Iterator[None]:
        """A deferred read transaction (WAL: the snapshot of the first read inside it)."""
        assert isinstance(conn, sqlite3.Connection)
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN")
        try:
            yield
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def in_transaction(self, conn: Connection) -> bool:
        assert isinstance(conn, sqlite3.Connection)
        return conn.in_transaction

    def notify(self, conn: Connection, seq: int) -> None:
        """Nothing to announce: readers of a file see commits on their next query."""

    def wait_for_events(self, known: int, timeout: float) -> int | None:
        """Polls the log's length every :data:`POLL_SECONDS` (another process, such as
        ``grounding index``, may append to the same file); the new count or None (at once
        once the backend is closed).
        """
        deadline = time.monotonic() + timeout
        conn = self.reader()
        while not self._closed:
            count = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
            if count > known:
                return count
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(POLL_SECONDS, left))
        return None

    # -- SQLite-only lookups -------------------------------------------------------------------

    def terms_with_anchors(self, conn: Connection, anchors: Sequence[str],
                           within: str | None = None,
                           nexts: Sequence[str] | None = None) -> list[tuple[str, str, str, int, int, int]]:
        """``(term, next, kind, fh, sh, th)`` of every known term anchored at one of
        ``anchors`` (a sentence's 2- and 3-grams), in one query (``json_each``). With
        ``nexts`` (the sentence's 3-grams), only terms whose next piece is ``''`` or one of
        them; with ``within`` (a short sentence), only terms it contains.
        """
        if not anchors:
            return []
        select = "SELECT t.term, t.next, t.kind, t.fh, t.sh, t.th FROM json_each(?) AS j"
        grams = json.dumps(list(anchors), ensure_ascii=False)
        tail, extra = ("", ()) if within is None else (" WHERE instr(?, t.term) > 0", (within,))
        if nexts is None:
            sql = select + " JOIN terms AS t ON t.anchor = j.value" + tail
            params: tuple[str, ...] = (grams, *extra)
        else:  # index seeks on (anchor, next): terms without a next piece, then the pairs
            threes = json.dumps(list(nexts), ensure_ascii=False)
            sql = (select + " JOIN terms AS t ON t.anchor = j.value AND t.next = ''" + tail
                   + " UNION ALL " + select + " CROSS JOIN json_each(?) AS k"  # CROSS: j, k, then t
                   " CROSS JOIN terms AS t ON t.anchor = j.value AND t.next = k.value" + tail)
            params = (grams, *extra, threes, threes, *extra)
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5]))
                for r in conn.execute(sql, params).fetchall()]

    def write_field_lines(self, conn: Connection, lines: Sequence[LineRow], terms: Iterable[TermRow]) -> None:
        """Insert field lines (:data:`~grounding_core.backend.LineRow`) and known terms
        (:data:`~grounding_core.backend.TermRow`; duplicates ignored), inside the caller's
        transaction, each in index order (every index page is visited once per batch, not once
        per row): both row shapes start with their index's columns, so their tuple order is
        that order (:func:`index_order`, no key function).
        """
        conn.executemany("INSERT INTO field_lines (fh, sh, th, content_id, line, field, norm, value, subject)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", index_order(lines))
        conn.executemany("INSERT INTO terms (anchor, next, th, kind, fh, sh, term) VALUES (?, ?, ?, ?, ?, ?, ?)"
                         " ON CONFLICT DO NOTHING", index_order(terms))

    def write_region_values(self, conn: Connection, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """Record image attributes ``(field, value, content_id, region)`` (SPEC §12)."""
        conn.executemany("INSERT INTO region_values (field, value, content_id, region) VALUES (?, ?, ?, ?)",
                         sorted(rows))

    def content_utf8(self, conn: Connection, content_id: int) -> bytes | None:
        """An import event's text as UTF-8 bytes (``CAST(text AS BLOB)``: no conversion), or None."""
        row = conn.execute("SELECT CAST(text AS BLOB) FROM events WHERE seq = ? AND kind = 'import'",
                           (content_id,)).fetchone()
        return bytes(row[0]) if row is not None else None

    def measurement(self, conn: Connection, sha256: str, version: int) -> str | None:
        """The cached measurement (JSON) of an image content, or None."""
        row = conn.execute("SELECT data FROM measurements WHERE sha256 = ? AND version = ?",
                           (sha256, version)).fetchone()
        return str(row[0]) if row is not None else None

    def put_measurement(self, conn: Connection, sha256: str, version: int, data: str) -> None:
        """Cache a measurement (inside the caller's transaction; a second one is ignored)."""
        conn.execute("INSERT INTO measurements (sha256, version, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                     (sha256, version, data))

    def vocabulary_with_anchors(self, conn: Connection, anchors: Sequence[str],
                                within: str | None = None) -> list[tuple[str, str, str]]:
        """``(term, kind, name)`` of every question-grammar name (SPEC §13) anchored at one of
        ``anchors`` (a text's distinct 1-, 2- and 3-grams), in one query (``json_each``);
        with ``within`` (a short text), only terms it contains (``instr``).
        """
        if not anchors:
            return []
        tail, extra = ("", ()) if within is None else (" WHERE instr(?, w.term) > 0", (within,))
        sql = ("SELECT w.term, w.kind, w.name FROM json_each(?) AS j"
               " JOIN vocabulary AS w ON w.anchor = j.value" + tail)
        grams = json.dumps(list(anchors), ensure_ascii=False)
        return [(str(r[0]), str(r[1]), str(r[2])) for r in conn.execute(sql, (grams, *extra)).fetchall()]

    def stage_scan(self, conn: Connection) -> None:
        """Empty ``scan_files`` and ``scan_docs`` (tables of the index file, created with the
        schema: the writer keeps temporary tables in memory, ``temp_store``).
        """
        conn.execute("DELETE FROM scan_files")
        conn.execute("DELETE FROM scan_docs")

    def write_fields(self, conn: Connection, fields: Iterable[tuple[int, str]]) -> None:
        """Record field names ``(fh, field)`` (duplicates ignored)."""
        conn.executemany("INSERT INTO fields (fh, head, field) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                         [(fh, name[:FIELD_HEAD], name) for fh, name in fields])

    # -- full-text search ----------------------------------------------------------------------

    def fts_claim(self, conn: Connection, batch: int) -> list[int]:
        """The next ``batch`` queued contents (the caller's ``BEGIN IMMEDIATE`` excludes every
        other writer, so nobody else claims them).
        """
        return [int(r[0]) for r in conn.execute(
            "SELECT q.content_id FROM fts_queue AS q JOIN versions AS v ON v.content_id = q.content_id"
            " ORDER BY v.active_to IS NOT NULL, q.content_id LIMIT ?", (batch,)).fetchall()]

    def fts_insert(self, conn: Connection, rows: Iterable[tuple[int, str]]) -> None:
        """Add FTS rows ``(rowid, text)`` (inside the caller's transaction)."""
        conn.executemany("INSERT INTO lines_fts (rowid, text) VALUES (?, ?)", rows)

    def fts_clear(self, conn: Connection) -> None:
        conn.execute("DELETE FROM lines_fts")

    def fts_match(self, conn: Connection, phrases: Sequence[str], any_term: bool, active_sql: str,
                  params: Sequence[object], limit: int) -> list[FtsHit]:
        """FTS5 ``MATCH`` hits ``(doc_id, version, line, text, bm25)`` of the phrases (string
        literals joined by AND, or OR for ``any_term``) whose content passes ``active_sql``
        (a condition on ``v``, the ``versions`` row), best first.
        """
        match = (" OR " if any_term else " AND ").join(fts_string(p) for p in phrases)
        return [_hit(r) for r in conn.execute(
            f"SELECT v.doc_id, v.version, f.rowid & {LINE_MASK}, f.text, bm25(lines_fts) AS rank"
            f" FROM lines_fts AS f JOIN versions AS v ON v.content_id = (f.rowid >> {LINE_BITS})"
            f" WHERE lines_fts MATCH ? AND {active_sql}"
            " ORDER BY rank, v.doc_id, f.rowid LIMIT ?",
            (match, *params, limit),
        ).fetchall()]

    def fts_substrings(self, conn: Connection, terms: Sequence[str], any_term: bool,
                       active_sql: str, params: Sequence[object], limit: int) -> list[FtsHit]:
        """Lines holding the (short) ``terms`` as substrings, ranked by how many they hold
        (``-count``, lower is better): trigrams cannot index terms under 3 code points, so
        this reads every row (``instr``, never ``LIKE``, which FTS5 would hand to the index).
        """
        joiner = " OR " if any_term else " AND "
        where = joiner.join("instr(f.text, ?) > 0" for _ in terms)
        score = " + ".join("(instr(f.text, ?) > 0)" for _ in terms)
        return [_hit(r) for r in conn.execute(
            f"SELECT v.doc_id, v.version, f.rowid & {LINE_MASK}, f.text, -1.0 * ({score}) AS rank"
            f" FROM lines_fts AS f JOIN versions AS v ON v.content_id = (f.rowid >> {LINE_BITS})"
            f" WHERE ({where}) AND {active_sql} ORDER BY rank, v.doc_id, f.rowid LIMIT ?",
            (*terms, *terms, *params, limit),
        ).fetchall()]


def _hit(row: Sequence[object]) -> FtsHit:
    return (str(row[0]), int(str(row[1])), int(str(row[2])), str(row[3]), float(str(row[4])))


def _statements(conn: Connection, script: str) -> None:
    """Run a script of plain statements inside the caller's transaction (``executescript``
    would commit it first). No statement may hold a ``;`` of its own (no triggers).
    """
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def fts_string(term: str) -> str:
    """An FTS5 string literal matching ``term`` literally (quotes doubled): no operator,
    column filter, ``NEAR(`` or ``*`` inside it is interpreted.
    """
    return '"' + term.replace('"', '""') + '"'


_UNWRITABLE = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)
"""SQLite primary result codes that mean the database file cannot be written."""


def _unwritable(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says the file cannot be written (disk full, ``ulimit -f``, I/O error, read-only)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _UNWRITABLE


def _on_read_only_fs(path: str) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(path) or ".").f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _read_only_reason(path: str) -> str | None:
    """Why the existing index at ``path`` cannot be written by this process, or None (it can,
    or it does not exist): on a read-only file system (a CI cache mounted read-only), a
    read-only file, or a folder where SQLite cannot write its ``-wal`` and ``-shm`` files.
    """
    if not os.path.isfile(path):
        return None
    if _on_read_only_fs(path):
        return "on a read-only file system"
    if not os.access(path, os.W_OK):
        return "a read-only file"
    if not os.access(os.path.dirname(path) or ".", os.W_OK):
        return "in a read-only folder"
    return None


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or None when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
