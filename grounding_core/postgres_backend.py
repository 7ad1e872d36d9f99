"""The PostgreSQL adapter of the store: a team's shared index (SPEC §4; docs/architecture.md).

Selected by a ``postgresql://`` (or ``postgres://``) URL as ``index`` in ``grounding.toml`` or
``GROUNDING_INDEX`` in the environment (:func:`grounding_core.backend.open_backend`). Needs
psycopg 3 (``pip install 'grounding[postgres]'``). Passwords never sit in files: libpq's own
environment (``PGPASSWORD``, ``PGSERVICE``...), ``~/.pgpass`` and service files apply as for
``psql``; the configuration refuses a URL holding a password (``grounding_core.config``).

The index lives in the connection's current schema (``public`` unless the URL says
``?options=-csearch_path%3Dname``; the schema is created when missing), so one database can
hold several indexes. The tables are those of ``sqlite_backend.py`` in PostgreSQL's dialect
(text columns ``COLLATE "C"``, so comparisons and ``ORDER BY`` follow code points as in
SQLite); the database must be UTF-8.

Roles: **one writer at a time**. The first process that needs to write (a scan, the full-text
queue, a rebuild) takes a session-level advisory lock on the writer connection and keeps it
until it closes; every other process is a *reader*: its scans append nothing (the store
returns the shared state and who writes it). A lost writer connection loses the lock with
its open transaction (PostgreSQL rolls it back), so a scan is all or nothing; the store
reconnects with back-off and redoes it, taking the lock again if it is still free.

Change announcements: each write transaction that appends events sends
``NOTIFY grounding_events, '<schema> <last seq>'`` (delivered at commit);
:meth:`PostgresBackend.wait_for_events` listens on its own connection, so every connected
language server learns of a writer's evidence change without polling.

Full-text search: ``lines_fts`` keeps each searchable line with a case-folded copy
(``fold``: :func:`fold`) under a ``pg_trgm`` GIN index; a phrase matches a line holding it as a
folded substring (``LIKE``, which the trigram index serves), and hits are ranked by the
same bm25 formula SQLite's FTS5 applies to its trigram table (k1 = 1.2, b = 0.75, a row's
length = its trigram count, statistics over every row ever indexed, kept in ``fts_stats``),
so both backends return the same ranked candidates (docs/decisions.md, "Search on
PostgreSQL", lists what differs: Unicode case folding).
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from .backend import (
    FIELD_HEAD,
    LOCK_WAIT_S,
    BackendError,
    Connection,
    Cursor,
    FtsHit,
    LineRow,
    LockTimeout,
    NewerLayout,
    ReadOnlyIndex,
    TermRow,
    index_order,
    redact,
)
from .sqlite_backend import LINE_BITS, LINE_MASK

LAYOUT = 2
"""Schema layout of this adapter (``meta`` key ``layout``). 2: the log accepts memory events
(SPEC §11) and ``memory_entries`` exists; a layout-1 index is migrated on open
(:meth:`PostgresBackend.create_schema`)."""

CHANNEL = "grounding_events"
"""The ``LISTEN``/``NOTIFY`` channel; the payload is ``'<schema> <last seq>'``."""

LOCK_CLASS = 0x47524E44
"""First key of the advisory locks ("GRND"); the second is a hash of the schema name."""

CONNECT_TIMEOUT = 5
"""Seconds libpq waits for the server when the URL and ``PGCONNECT_TIMEOUT`` say nothing."""

UNNEST_BATCH = 10_000
"""Rows per ``INSERT ... SELECT FROM unnest(...)`` (one round trip each)."""

READ_RETRIES = (0.1, 0.5, 1.0)
"""Back-off (seconds) of a read whose connection was lost outside a transaction."""

T = 'TEXT COLLATE "C"'

EVENTS = f"""
CREATE TABLE IF NOT EXISTS events (
  seq BIGINT PRIMARY KEY,
  kind {T} NOT NULL CONSTRAINT events_kind_check
    CHECK (kind IN ('import', 'revoke', 'remember', 'approve', 'forget')),
  doc_id {T} NOT NULL,
  version BIGINT NOT NULL,
  sha256 {T} NOT NULL DEFAULT '',
  path {T} NOT NULL DEFAULT '',
  text {T} NOT NULL DEFAULT '',
  declared INTEGER NOT NULL DEFAULT 0,
  reason {T} NOT NULL DEFAULT '',
  recorded_at {T} NOT NULL,
  data {T}
);
CREATE OR REPLACE FUNCTION grounding_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the event log is append-only'; END $$;
DROP TRIGGER IF EXISTS events_no_update ON events;
CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION grounding_append_only();
DROP TRIGGER IF EXISTS events_no_truncate ON events;
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
  FOR EACH STATEMENT EXECUTE FUNCTION grounding_append_only();
"""

DERIVED = f"""
CREATE TABLE IF NOT EXISTS versions (
  content_id BIGINT PRIMARY KEY,
  doc_id {T} NOT NULL,
  version BIGINT NOT NULL,
  sha256 {T} NOT NULL,
  path {T} NOT NULL,
  declared INTEGER NOT NULL,
  status {T} NOT NULL,
  effective_from {T},
  effective_until {T},
  title {T} NOT NULL,
  subject {T} NOT NULL,
  line_count BIGINT NOT NULL,
  front_end BIGINT NOT NULL,
  first_sha256 {T} NOT NULL,
  current_to BIGINT,
  active_from BIGINT,
  active_to BIGINT
);
CREATE INDEX IF NOT EXISTS versions_doc ON versions (doc_id, version, content_id);
CREATE INDEX IF NOT EXISTS versions_path ON versions (path);
CREATE INDEX IF NOT EXISTS versions_active_from ON versions (active_from) WHERE active_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS versions_active_to ON versions (active_to) WHERE active_to IS NOT NULL;
CREATE TABLE IF NOT EXISTS revocations (
  content_id BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  reason {T} NOT NULL,
  PRIMARY KEY (content_id, seq)
);
CREATE TABLE IF NOT EXISTS field_lines (
  fh BIGINT NOT NULL,
  sh BIGINT NOT NULL,
  th BIGINT NOT NULL,
  field {T} NOT NULL,
  norm {T} NOT NULL,
  value {T},
  line BIGINT NOT NULL,
  content_id BIGINT NOT NULL,
  subject {T}
);
CREATE INDEX IF NOT EXISTS field_lines_key ON field_lines (fh, sh, th);
CREATE TABLE IF NOT EXISTS key_values (
  fh BIGINT NOT NULL,
  sh BIGINT NOT NULL,
  first_doc {T} NOT NULL,
  first_version BIGINT NOT NULL,
  first_line BIGINT NOT NULL,
  th BIGINT NOT NULL,
  lines BIGINT NOT NULL,
  field {T} NOT NULL,
  subject {T} NOT NULL,
  norm {T} NOT NULL,
  spelled {T},
  sources {T} NOT NULL,
  PRIMARY KEY (fh, sh, th, first_doc, first_version, first_line)
);
CREATE TABLE IF NOT EXISTS dated_lines (
  fh BIGINT NOT NULL,
  sh BIGINT NOT NULL,
  field {T} NOT NULL,
  subject {T} NOT NULL,
  norm {T} NOT NULL,
  value {T},
  line BIGINT NOT NULL,
  content_id BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS dated_lines_key ON dated_lines (fh, sh);
CREATE TABLE IF NOT EXISTS region_values (
  field {T} NOT NULL,
  value {T} NOT NULL,
  content_id BIGINT NOT NULL,
  region BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS region_values_key ON region_values (field, value, content_id, region);
CREATE TABLE IF NOT EXISTS terms (
  anchor {T} NOT NULL,
  next {T} NOT NULL,
  term {T} NOT NULL,
  kind {T} NOT NULL,
  fh BIGINT NOT NULL,
  sh BIGINT NOT NULL,
  th BIGINT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS terms_anchor ON terms (anchor, next, th, kind, fh, sh);
CREATE TABLE IF NOT EXISTS fields (
  fh BIGINT PRIMARY KEY,
  head {T} NOT NULL,
  field {T} NOT NULL
);
CREATE INDEX IF NOT EXISTS fields_head ON fields (head);
CREATE TABLE IF NOT EXISTS vocabulary (
  anchor {T} NOT NULL,
  term {T} NOT NULL,
  kind {T} NOT NULL,
  nh BIGINT NOT NULL,
  name {T} NOT NULL
);
CREATE INDEX IF NOT EXISTS vocabulary_anchor ON vocabulary (anchor, kind, nh);
CREATE TABLE IF NOT EXISTS subject_contents (
  sh BIGINT NOT NULL,
  content_id BIGINT NOT NULL,
  PRIMARY KEY (sh, content_id)
);
CREATE TABLE IF NOT EXISTS fts_queue (
  content_id BIGINT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS meta (
  key {T} PRIMARY KEY,
  value {T} NOT NULL
);
"""

MEMORY = f"""
CREATE TABLE IF NOT EXISTS memory_entries (
  scope {T} NOT NULL,
  key {T} NOT NULL,
  version BIGINT NOT NULL,
  value {T} NOT NULL,
  remembered_seq BIGINT NOT NULL,
  remembered_at {T} NOT NULL DEFAULT '',
  approved_by {T},
  approved_seq BIGINT,
  approved_at {T},
  forgotten_seq BIGINT,
  forgotten_at {T},
  forget_reason {T},
  PRIMARY KEY (scope, key, version)
);
"""
"""``grounding_core.memory_store.SCHEMA`` in PostgreSQL's dialect (derived from the log's memory
events, SPEC §11; not settings-dependent, so not among :data:`DERIVED_TABLES`)."""

EVENTS_KINDS_CHECK = "CHECK (kind IN ('import', 'revoke', 'remember', 'approve', 'forget'))"

FILE_COLUMNS = f"""
  path {T} PRIMARY KEY,
  size BIGINT NOT NULL,
  mtime_ns BIGINT NOT NULL,
  ctime_ns BIGINT NOT NULL,
  inode NUMERIC(20) NOT NULL,
  sha256 {T} NOT NULL,
  doc_id {T},
  declared_version BIGINT,
  problem {T}"""
"""The columns of a file row (``scan.FileRow`` without its findings), in ``files`` and in a
scan's staged rows (:data:`SCAN_STAGING`)."""

FILES = f"""
CREATE TABLE IF NOT EXISTS files ({FILE_COLUMNS},
  findings {T}
);
CREATE INDEX IF NOT EXISTS files_doc ON files (doc_id) WHERE doc_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS files_inode ON files (inode);
"""

SCAN_STAGING = f"""
CREATE TEMP TABLE IF NOT EXISTS scan_files ({FILE_COLUMNS},
  imported INTEGER NOT NULL,
  version_line BIGINT,
  touched INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS scan_files_doc ON scan_files (doc_id) WHERE doc_id IS NOT NULL;
CREATE TEMP TABLE IF NOT EXISTS scan_docs (
  doc_id {T} PRIMARY KEY
);
"""
"""One scan's own file rows and the doc_ids it reconciles (``store._Staged``): temporary tables
of the writer's session, made by the first scan of a session (:meth:`PostgresBackend.stage_scan`)
and emptied by every scan before it commits. Temporary, so nothing is added to the shared
schema: a team's roles need no grant on them and no ``CREATE`` on the schema (a temporary
table needs the database's ``TEMPORARY`` privilege, which PostgreSQL grants to every role
by default)."""

MEASUREMENTS = f"""
CREATE TABLE IF NOT EXISTS measurements (
  sha256 {T} NOT NULL,
  version BIGINT NOT NULL,
  data {T} NOT NULL,
  PRIMARY KEY (sha256, version)
);
"""
"""The image measurement cache (SPEC §12; a pure function of the bytes, not derived from the
log, kept across rebuilds). Created on every open, so a layout-2 index made before image
evidence gains it in place."""

FTS = f"""
CREATE TABLE IF NOT EXISTS lines_fts (
  rowid BIGINT PRIMARY KEY,
  text {T} NOT NULL,
  fold {T} NOT NULL,
  ntok INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS lines_fts_fold ON lines_fts USING gin (fold {{trgm}}.gin_trgm_ops);
CREATE TABLE IF NOT EXISTS fts_stats (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  nrow BIGINT NOT NULL,
  ntoken BIGINT NOT NULL
);
INSERT INTO fts_stats (id, nrow, ntoken) VALUES (1, 0, 0) ON CONFLICT DO NOTHING;
"""
"""``{trgm}``: the schema of the ``pg_trgm`` extension (one per database, wherever it was
created first). ``inode`` is NUMERIC(20): st_ino is an unsigned 64-bit number."""

DERIVED_TABLES = ("versions", "revocations", "field_lines", "terms", "fields", "region_values", "vocabulary",
                  "subject_contents", "key_values", "dated_lines")

K1, B = 1.2, 0.75
"""FTS5's bm25 parameters (``fts5_aux.c``)."""


def fold(text: str) -> str:
    """``text`` case-folded for search: each code point lowered when that keeps it one code
    point (so positions and lengths stay those of the line), like FTS5's trigram tokenizer
    (``case_sensitive=0``).
    """
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(low := c.lower()) != 1 else low for c in text)


def trigram_count(text: str) -> int:
    """Tokens of a line for FTS5's trigram tokenizer: one per 3-code-point window."""
    return max(len(text) - 2, 0)


def like_pattern(phrase: str) -> str:
    """A ``LIKE`` pattern matching ``phrase`` anywhere (``\\``, ``%`` and ``_`` escaped)."""
    return "%" + phrase.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def regex_literal(phrase: str) -> str:
    """``phrase`` as a PostgreSQL regular expression matching itself (every character that is
    not a letter or digit escaped with ``\\``, which makes it literal in an ARE).
    """
    return "".join(c if c.isalnum() else "\\" + c for c in phrase)


@lru_cache(maxsize=1024)
def _dialect(query: str) -> str:
    """Shared SQL (``?`` placeholders) in psycopg's paramstyle (``%s``; ``%`` doubled)."""
    return query.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """A psycopg connection taking the shared SQL's ``?`` placeholders (autocommit; the
    backend opens transactions explicitly). A read that finds the connection lost outside a
    transaction reconnects and runs again (:data:`READ_RETRIES`); inside a transaction the
    error propagates (the transaction is gone).
    """

    def __init__(self, backend: PostgresBackend, retry_reads: bool) -> None:
        self._backend = backend
        self._retry = retry_reads
        self.raw = backend.connect()

    def _alive(self) -> psycopg.Connection[Any]:
        raw = self.raw
        if raw.closed or raw.broken or raw.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
            # A batch (executemany runs in libpq's pipeline mode) cut off by a lost server
            # leaves the connection in pipeline mode without marking it broken: every later
            # query fails with "cannot exit pipeline mode while busy", so it is replaced.
            if not raw.closed:
                raw.close()
            self.raw = self._backend.connect()
        return self.raw

    def in_transaction(self) -> bool:
        raw = self.raw
        return not raw.closed and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def execute(self, query: str, params: Sequence[Any] = ()) -> Cursor:
        delays: Iterator[float] = iter(READ_RETRIES if self._retry else ())
        while True:
            raw = self._alive()
            idle = raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            try:
                return raw.execute(_dialect(query), tuple(params), prepare=None)
            except psycopg.OperationalError:
                if not (idle and (raw.closed or raw.broken)):
                    raise
                delay = next(delays, None)
                if delay is None:
                    raise
                time.sleep(delay)

    def executemany(self, query: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._alive().cursor() as cur:
            cur.executemany(_dialect(query), [tuple(r) for r in rows])

    def close(self) -> None:
        try:
            self.raw.close()
        except psycopg.Error:
            pass


class PostgresBackend:
    """Connections and PostgreSQL-only operations of one shared index (see module docstring).

    Raises :class:`~grounding_core.backend.BackendError` (naming the URL without its
    password) when the database cannot be reached or is unusable.
    """

    shared = True
    read_only: str | None = None  # a role that may not write is a reader (ReadOnlyIndex), not this
    errors: tuple[type[BaseException], ...] = (psycopg.Error, OSError)
    lost: tuple[type[BaseException], ...] = (psycopg.OperationalError,)

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = redact(url)
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise BackendError(f"the index {self.location} is not a valid PostgreSQL URL: {exc}") from None
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in os.environ:
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT
        if "application_name" not in params and "PGAPPNAME" not in os.environ:
            self._kwargs["application_name"] = f"grounding {socket.gethostname()} pid {os.getpid()}"[:63]
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[PgConnection] = []
        self._listener: psycopg.Connection[Any] | None = None
        self._holds_lock = False
        self._closed = False
        self._lock_wait = LOCK_WAIT_S
        self.schema = ""
        try:
            self._writer = PgConnection(self, retry_reads=False)
            self._connections.append(self._writer)
            self.schema = self._ensure_schema(self._writer.raw)
        except psycopg.Error as exc:
            self.close()
            raise BackendError(f"cannot reach the index {self.location}: {_reason(exc)}") from None
        self._lock_key = zlib.crc32(self.schema.encode("utf-8")) & 0x7FFFFFFF

    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (raises psycopg.OperationalError when unreachable)."""
        return psycopg.connect(self.url, **self._kwargs)

    def _ensure_schema(self, raw: psycopg.Connection[Any]) -> str:
        """The current schema's name, creating the first ``search_path`` schema when none of
        them exists. Raises BackendError when the database is not UTF-8.
        """
        encoding = raw.execute("SHOW server_encoding").fetchone()
        if encoding is None or str(encoding[0]).upper() not in ("UTF8", "UTF-8"):
            raise BackendError(f"the index {self.location} is a {encoding[0] if encoding else '?'} database;"
                               " Grounding needs a UTF-8 one (CREATE DATABASE ... ENCODING 'UTF8')")
        row = raw.execute("SELECT current_schema()").fetchone()
        if row is not None and row[0]:
            return str(row[0])
        path = raw.execute("SHOW search_path").fetchone()
        first = str(path[0]).split(",")[0].strip() if path else ""
        if first.startswith('"') and first.endswith('"'):
            first = first[1:-1].replace('""', '"')
        if not first or first == "$user":
            raise BackendError(f"the index {self.location}: no schema of the search_path exists")
        raw.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(first)))
        row = raw.execute("SELECT current_schema()").fetchone()
        return str(row[0]) if row and row[0] else first

    @property
    def writer(self) -> PgConnection:
        return self._writer

    def reader(self) -> PgConnection:
        """The calling thread's connection (opened on first use; reconnects when lost)."""
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = PgConnection(self, retry_reads=True)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection; the writer lock is released first, synchronously (a closed
        socket frees it only once the server notices), so another process may write at once.
        """
        if self._holds_lock and hasattr(self, "_writer"):
            try:
                self._writer.raw.execute("SELECT pg_advisory_unlock_all()")
            except psycopg.Error:
                pass
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
            listener, self._listener = self._listener, None
        for conn in connections:
            conn.close()
        if listener is not None:
            try:
                listener.close()
            except psycopg.Error:
                pass
        self._holds_lock = False
        self._local = threading.local()

    def replaced(self) -> str | None:
        """Never: a database server's index cannot be deleted under an open connection unseen
        (a lost connection is :attr:`lost`).
        """
        return None

    # -- schema --------------------------------------------------------------------------------

    def create_schema(self) -> bool:
        """Create the tables when missing (under a transaction-scoped advisory lock, so two
        processes opening a new index do not race); True when this call created them (the
        derived tables are then built from the log).
        """
        conn = self._writer
        with self._transaction(conn):
            conn.execute("SELECT pg_advisory_xact_lock(?, ?)", (LOCK_CLASS, self._lock_key ^ 1))
            layout = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
            existed = bool(layout[0])
            if existed:
                row = conn.execute("SELECT value FROM meta WHERE key = 'layout'").fetchone()
                if row is not None and int(row[0]) > LAYOUT:  # read before anything is written
                    raise NewerLayout(f"the index {self.location} was written by a newer Grounding (layout"
                                      f" {row[0]}); this one reads layout {LAYOUT}. Upgrade Grounding, or"
                                      " name another index; the database is left as it is")
                if row is None or int(row[0]) < 2:
                    self._accept_memory_events(conn)
                if not conn.execute("SELECT to_regclass('measurements') IS NOT NULL").fetchone()[0]:
                    for statement in _split(MEASUREMENTS):  # an index from before image evidence
                        conn.raw.execute(statement)
                return False
            conn.raw.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            trgm = conn.execute("SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
                                " ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'").fetchone()
            fts = FTS.replace("{trgm}", sql.Identifier(str(trgm[0])).as_string(conn.raw))
            for statement in _split(EVENTS + DERIVED + MEMORY + FILES + MEASUREMENTS + fts):
                conn.raw.execute(statement)
            conn.execute("INSERT INTO meta (key, value) VALUES ('layout', ?) ON CONFLICT DO NOTHING", (str(LAYOUT),))
        return True

    def _accept_memory_events(self, conn: PgConnection) -> None:
        """Layout 1 to 2 (inside create_schema's transaction): the log's kind CHECK is replaced
        in place (PostgreSQL alters a constraint; no row is rewritten, the append-only
        triggers stay) and ``memory_entries`` is created and derived from the log, as
        ``SqliteBackend._accept_memory_events`` does for SQLite (SPEC §11).
        """
        from . import memory_store

        conn.execute("ALTER TABLE events DROP CONSTRAINT IF EXISTS events_kind_check")
        conn.execute(f"ALTER TABLE events ADD CONSTRAINT events_kind_check {EVENTS_KINDS_CHECK}")
        for statement in _split(MEMORY):
            conn.raw.execute(statement)
        memory_store.rebuild(conn)
        conn.execute("INSERT INTO meta (key, value) VALUES ('layout', ?)"
                     " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(LAYOUT),))

    def clear_derived(self, conn: Connection) -> None:
        """Drop and recreate the settings-dependent derived tables, empty (inside the caller's
        transaction; recreating also follows a change of their definition).
        """
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(DERIVED_TABLES)}")
        for statement in _split(DERIVED):
            conn.execute(statement)

    # -- transactions and the writer lock -------------------------------------------------------

    @contextmanager
    def lock_wait(self, seconds: float) -> Iterator[None]:
        """The writer's transactions wait at most ``seconds`` for a lock (``lock_timeout``;
        at least 1 ms, since 0 would mean no limit) within the block, then :data:`LOCK_WAIT_S`.
        """
        before, self._lock_wait = self._lock_wait, max(seconds, 0.001)
        try:
            yield
        finally:
            self._lock_wait = before

    @contextmanager
    def _transaction(self, conn: PgConnection, begin: str = "BEGIN") -> Iterator[None]:
        """One transaction on ``conn``; on the writer its ``lock_timeout`` is the current lock
        wait (:meth:`lock_wait`; ``set_config(..., true)`` lasts until the transaction ends,
        so a reconnected writer gets it too).
        """
        conn.execute(begin)
        try:
            if conn is self._writer:
                conn.execute("SELECT set_config('lock_timeout', ?, true)",
                             (f"{max(int(self._lock_wait * 1000), 1)}ms",))
            yield
        except BaseException:
            try:
                if not conn.raw.closed and not conn.raw.broken:
                    conn.raw.execute("ROLLBACK")
            except psycopg.Error:
                pass
            raise
        conn.execute("COMMIT")

    @property
    def holds_writer_lock(self) -> bool:
        """True while this process is the index's writer (as of its last write)."""
        raw = self._writer.raw
        return self._holds_lock and not raw.closed and not raw.broken

    def can_write(self) -> bool:
        """True when this process holds the writer lock, taking it when it is free. A lost
        writer connection is reopened first (its lock went with it).
        """
        raw = self._writer.raw
        if raw.closed or raw.broken:
            self._holds_lock = False
        if self._holds_lock:
            return True
        row = self._writer.execute("SELECT pg_try_advisory_lock(?, ?)", (LOCK_CLASS, self._lock_key)).fetchone()
        self._holds_lock = bool(row[0])
        return self._holds_lock

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[PgConnection]:
        """One write transaction on the writer connection; ``exclusive``: it must hold the
        writer lock. A role that may not write raises ReadOnlyIndex.
        """
        if exclusive and not self.can_write():
            raise ReadOnlyIndex(f"{self.writer_holder() or 'another process'} writes the index {self.location}")
        conn = self._writer
        try:
            with self._transaction(conn):
                yield conn
        except psycopg.errors.LockNotAvailable as exc:  # lock_timeout: another session holds a lock
            raise LockTimeout(f"the index {self.location} is locked by another session: {_reason(exc)}") from exc
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
            raise ReadOnlyIndex(f"the index {self.location} cannot be written with this role: {_reason(exc)}") from exc

    def writer_holder(self) -> str | None:
        """The writer's ``application_name`` and address (``grounding <host> pid <pid>``)."""
        try:
            row = self.reader().execute(
                "SELECT a.application_name, host(a.client_addr), a.pid FROM pg_locks AS l"
                " JOIN pg_stat_activity AS a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
                " AND l.classid = ? AND l.objid = ? AND l.objsubid = 2 AND l.granted"
                " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (LOCK_CLASS, self._lock_key)).fetchone()
        except psycopg.Error:
            return None
        if row is None:
            return None
        name = str(row[0] or f"server process {row[2]}")
        return f"{name} ({row[1]})" if row[1] else name

    @contextmanager
    def read(self, conn: Connection) -> Iterator[None]:
        """A repeatable-read, read-only transaction: one committed state for the block."""
        assert isinstance(conn, PgConnection)
        if conn.in_transaction():
            yield
            return
        with self._transaction(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"):
            yield

    def in_transaction(self, conn: Connection) -> bool:
        assert isinstance(conn, PgConnection)
        return conn.in_transaction()

    # -- change announcements --------------------------------------------------------------------

    def notify(self, conn: Connection, seq: int) -> None:
        """``NOTIFY`` the new end of the log (sent when the writer's transaction commits)."""
        conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, f"{self.schema} {seq}"))

    def _count(self) -> int:
        return int(self.reader().execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def wait_for_events(self, known: int, timeout: float) -> int | None:
        """Block up to ``timeout`` seconds until the log holds more than ``known`` events (a
        ``NOTIFY`` on :data:`CHANNEL` for this schema, or a count read after (re)connecting
        the listener, which catches announcements missed while the server was away); the new
        count, or None on timeout. A lost server is retried with back-off until the timeout.
        Once the backend is closed (by another thread too) it returns None at once and opens
        nothing. Call it from one worker thread (it owns the listener connection).
        """
        deadline = time.monotonic() + timeout
        delay = 0.1
        while not self._closed:
            try:
                listener = self._listener
                if listener is None or listener.closed or listener.broken:
                    listener = self.connect()
                    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                    with self._lock:
                        if self._closed:
                            listener.close()
                            return None
                        self._listener = listener
                count = self._count()
                if count > known:
                    return count
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                for note in listener.notifies(timeout=left):
                    schema, _, seq = note.payload.rpartition(" ")
                    if schema == self.schema and seq.isdigit() and int(seq) > known:
                        return max(int(seq), self._count())
                    if time.monotonic() >= deadline:
                        break
                delay = 0.1
            except psycopg.OperationalError:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 5.0)
        return None

    # -- engine-specific lookups -----------------------------------------------------------------

    def terms_with_anchors(self, conn: Connection, anchors: Sequence[str], within: str | None = None,
                           nexts: Sequence[str] | None = None) -> list[tuple[str, str, str, int, int, int]]:
        """``(term, next, kind, fh, sh, th)`` of every known term anchored at one of
        ``anchors`` (a sentence's 2- and 3-grams), in one query (``= ANY``, index seeks on
        ``(anchor, next)``). With ``nexts`` (the sentence's 3-grams), only terms whose next
        piece is ``''`` or one of them; with ``within`` (a short sentence), only terms it
        contains (``strpos``).
        """
        if not anchors:
            return []
        select = "SELECT term, next, kind, fh, sh, th FROM terms WHERE anchor = ANY(?)"
        tail, extra = ("", []) if within is None else (" AND strpos(?, term) > 0", [within])
        grams = list(anchors)
        if nexts is None:
            query, params = select + tail, [grams, *extra]
        else:
            threes = list(nexts)
            query = (select + " AND next = ''" + tail + " UNION ALL " + select + " AND next = ANY(?)" + tail)
            params = [grams, *extra, threes, threes, *extra]
        rows = conn.execute(query, params).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows]

    def vocabulary_with_anchors(self, conn: Connection, anchors: Sequence[str],
                                within: str | None = None) -> list[tuple[str, str, str]]:
        """``(term, kind, name)`` of every question-grammar name (SPEC §13) anchored at one of
        ``anchors`` (a text's distinct 1-, 2- and 3-grams), in one query (``= ANY``, index
        seeks on ``vocabulary (anchor, kind, nh)``); with ``within`` (a short text), only
        terms it contains (``strpos``, as SQLite's ``instr``).
        """
        if not anchors:
            return []
        tail, extra = ("", []) if within is None else (" AND strpos(?, term) > 0", [within])
        rows = conn.execute("SELECT term, kind, name FROM vocabulary WHERE anchor = ANY(?)" + tail,
                            [list(anchors), *extra]).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    def write_field_lines(self, conn: Connection, lines: Sequence[LineRow], terms: Iterable[TermRow]) -> None:
        """Insert field lines (:data:`~grounding_core.backend.LineRow`: ``subject`` is an image
        attribute's ``SUBJECT#rN``) and known terms (:data:`~grounding_core.backend.TermRow`;
        duplicates ignored), inside the caller's transaction, as one ``unnest`` statement per
        batch of each (the terms in their unique index's order, :func:`~grounding_core.backend.index_order`).
        """
        for start in range(0, len(lines), UNNEST_BATCH):
            part = lines[start:start + UNNEST_BATCH]
            conn.execute(
                "INSERT INTO field_lines (fh, sh, th, content_id, line, field, norm, value, subject)"
                " SELECT * FROM unnest(?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[], ?::text[],"
                " ?::text[], ?::text[], ?::text[])", [list(col) for col in zip(*part, strict=True)])
        rows = index_order(set(terms))
        for start in range(0, len(rows), UNNEST_BATCH):
            chunk = rows[start:start + UNNEST_BATCH]
            conn.execute(
                "INSERT INTO terms (anchor, next, th, kind, fh, sh, term)"
                " SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::bigint[],"
                " ?::text[])"
                " ON CONFLICT DO NOTHING", [list(col) for col in zip(*chunk, strict=True)])

    def write_region_values(self, conn: Connection, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """Record image attributes ``(field, value, content_id, region)`` (SPEC §12), one
        ``unnest`` statement per batch.
        """
        ordered = sorted(rows)
        for start in range(0, len(ordered), UNNEST_BATCH):
            part = ordered[start:start + UNNEST_BATCH]
            conn.execute("INSERT INTO region_values (field, value, content_id, region)"
                         " SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::bigint[])",
                         [list(col) for col in zip(*part, strict=True)])

    def content_utf8(self, conn: Connection, content_id: int) -> bytes | None:
        """An import event's text as UTF-8 bytes (``convert_to(text, 'UTF8')``: no conversion), or None."""
        row = conn.execute("SELECT convert_to(text, 'UTF8') FROM events WHERE seq = ? AND kind = 'import'",
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

    def stage_scan(self, conn: Connection) -> None:
        """Create the session's temporary staging tables when missing (:data:`SCAN_STAGING`;
        a rolled-back scan takes their creation with it) and empty them.
        """
        for statement in _split(SCAN_STAGING):
            conn.execute(statement)
        conn.execute("DELETE FROM scan_files")
        conn.execute("DELETE FROM scan_docs")

    def write_fields(self, conn: Connection, fields: Iterable[tuple[int, str]]) -> None:
        """Record field names ``(fh, field)`` (duplicates ignored)."""
        rows = sorted({(fh, name[:FIELD_HEAD], name) for fh, name in fields})
        if rows:
            conn.execute("INSERT INTO fields (fh, head, field)"
                         " SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[]) ON CONFLICT DO NOTHING",
                         [list(col) for col in zip(*rows, strict=True)])

    # -- full-text search ------------------------------------------------------------------------

    def fts_claim(self, conn: Connection, batch: int) -> list[int]:
        """The next ``batch`` queued contents nobody else holds (``FOR UPDATE SKIP LOCKED``:
        every connected process may drain the queue at once without doing a content twice).
        """
        return [int(r[0]) for r in conn.execute(
            "SELECT q.content_id FROM fts_queue AS q JOIN versions AS v ON v.content_id = q.content_id"
            " ORDER BY v.active_to IS NOT NULL, q.content_id LIMIT ? FOR UPDATE OF q SKIP LOCKED",
            (batch,)).fetchall()]

    def fts_insert(self, conn: Connection, rows: Iterable[tuple[int, str]]) -> None:
        """Add FTS rows ``(rowid, text)`` with their folded text and trigram count, and the
        bm25 statistics of the rows actually added (inside the caller's transaction).
        """
        batch = [(rowid, text, fold(text), trigram_count(text)) for rowid, text in rows]
        if not batch:
            return
        added = conn.execute(
            "WITH added AS (INSERT INTO lines_fts (rowid, text, fold, ntok)"
            " SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::integer[])"
            " ON CONFLICT (rowid) DO NOTHING RETURNING ntok)"
            " SELECT COUNT(*), COALESCE(SUM(ntok), 0) FROM added",
            ([r[0] for r in batch], [r[1] for r in batch], [r[2] for r in batch], [r[3] for r in batch])).fetchone()
        conn.execute("UPDATE fts_stats SET nrow = nrow + ?, ntoken = ntoken + ? WHERE id = 1",
                     (int(added[0]), int(added[1])))

    def fts_clear(self, conn: Connection) -> None:
        conn.execute("DELETE FROM lines_fts")
        conn.execute("UPDATE fts_stats SET nrow = 0, ntoken = 0 WHERE id = 1")

    def fts_match(self, conn: Connection, phrases: Sequence[str], any_term: bool, active_sql: str,
                  params: Sequence[object], limit: int) -> list[FtsHit]:
        """Lines holding every phrase (``any_term``: one) as a folded substring, whose content
        passes ``active_sql``, ranked by FTS5's bm25 (see the module docstring), best first.
        """
        phrases = [fold(p) for p in phrases]
        if not phrases:
            return []
        likes = [like_pattern(p) for p in phrases]
        hit_sql = ", ".join("COUNT(*) FILTER (WHERE fold LIKE ?)" for _ in likes)
        any_sql = " OR ".join("fold LIKE ?" for _ in likes)
        counts = conn.execute(f"SELECT {hit_sql} FROM lines_fts WHERE {any_sql}", (*likes, *likes)).fetchone()
        stats = conn.execute("SELECT nrow, ntoken FROM fts_stats WHERE id = 1").fetchone()
        n_row, n_token = (int(stats[0]), int(stats[1])) if stats else (0, 0)
        if n_row == 0 or not any(int(c) for c in counts):
            return []
        avgdl = float(n_token) / float(n_row)
        idfs = []
        for hits in counts:
            idf = math.log((n_row - int(hits) + 0.5) / (int(hits) + 0.5))
            idfs.append(idf if idf > 0.0 else 1e-6)
        freq = ["regexp_count(f.fold, ?)::float8" for _ in phrases]
        score = " + ".join(
            f"?::float8 * (({c} * (?::float8 + 1.0::float8)) / ({c} + ?::float8 * (1::float8 - ?::float8"
            f" + ?::float8 * f.ntok::float8 / ?::float8)))" for c in freq)
        score_params: list[object] = []
        for phrase, idf in zip(phrases, idfs, strict=True):
            lookahead = "(?=" + regex_literal(phrase) + ")"
            score_params += [idf, lookahead, K1, lookahead, K1, B, B, avgdl]
        joiner = " OR " if any_term else " AND "
        where = joiner.join("f.fold LIKE ?" for _ in likes)
        rows = conn.execute(
            f"SELECT v.doc_id, v.version, f.rowid & {LINE_MASK}, f.text, -1.0::float8 * (0.0::float8 + {score})"
            f" AS rank FROM lines_fts AS f JOIN versions AS v ON v.content_id = (f.rowid >> {LINE_BITS})"
            f" WHERE ({where}) AND {active_sql} ORDER BY rank, v.doc_id, f.rowid LIMIT ?",
            (*score_params, *likes, *params, limit)).fetchall()
        return [_hit(r) for r in rows]

    def fts_substrings(self, conn: Connection, terms: Sequence[str], any_term: bool,
                       active_sql: str, params: Sequence[object], limit: int) -> list[FtsHit]:
        """Lines holding the (short) ``terms`` as exact substrings, ranked by how many they
        hold (``-count``): trigrams cannot serve terms under 3 code points, so this reads every
        row (``strpos``, the same test as SQLite's ``instr``).
        """
        joiner = " OR " if any_term else " AND "
        where = joiner.join("strpos(f.text, ?) > 0" for _ in terms)
        score = " + ".join("(strpos(f.text, ?) > 0)::int" for _ in terms)
        rows = conn.execute(
            f"SELECT v.doc_id, v.version, f.rowid & {LINE_MASK}, f.text, -1.0::float8 * ({score}) AS rank"
            f" FROM lines_fts AS f JOIN versions AS v ON v.content_id = (f.rowid >> {LINE_BITS})"
            f" WHERE ({where}) AND {active_sql} ORDER BY rank, v.doc_id, f.rowid LIMIT ?",
            (*terms, *terms, *params, limit)).fetchall()
        return [_hit(r) for r in rows]


def _hit(row: Sequence[object]) -> FtsHit:
    return (str(row[0]), int(str(row[1])), int(str(row[2])), str(row[3]), float(str(row[4])))


def _split(script: str) -> list[str]:
    """The statements of a DDL script: each ends with ``;`` at the end of a line (a
    function body's ``;`` inside a line stays in its statement).
    """
    return [s.strip() for s in script.split(";\n") if s.strip()]


def _reason(exc: BaseException) -> str:
    """A psycopg error's first line (libpq's messages never hold the password)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
