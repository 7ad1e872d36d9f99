"""The store's backend interface and its selection (SPEC §4; docs/architecture.md "Backends").

The store (``store.py``, ``derived.py``, ``sql_snapshot.py``) speaks plain SQL with ``?``
placeholders through a :class:`Connection`; everything a database does differently sits
behind a :class:`Backend`: opening connections, the schema, write transactions (SQLite's
``BEGIN IMMEDIATE``; PostgreSQL's advisory writer lock), read transactions, the lookups that
need engine-specific SQL (``json_each`` / ``= ANY(array)``) and full-text search (FTS5 /
``pg_trgm``). Two implementations:

- :class:`~grounding_core.sqlite_backend.SqliteBackend`: an embedded file (the default,
  ``index = ".grounding/index.sqlite"``) or ``":memory:"``;
- :class:`~grounding_core.postgres_backend.PostgresBackend`: a shared database named by a
  ``postgresql://`` URL (``index`` in ``grounding.toml`` or ``GROUNDING_INDEX``), optional
  extra ``grounding[postgres]``.

:func:`open_backend` picks one from the configured location.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

DERIVED_VERSION = 8
"""Part of the derived tables' fingerprint: bumped whenever their definition changes (on any
backend), so an index written by another definition is rebuilt from its log on open."""

FIELD_HEAD = 8
"""Code points of a field name kept in ``fields.head`` (prefix lookups, "did you mean")."""

LineRow = tuple[int, int, int, int, int, str, str, str | None, str | None]
"""A ``field_lines`` row as the deriver buffers it: ``(fh, sh, th, content_id, line, field,
norm, value or None, subject or None)``. The columns are in the order of the table's index
``(fh, sh, th)`` and then of the insertion order within a key (contents in seq order, lines
in order; ``(content_id, line)`` is unique), so a plain ``sorted()`` of a batch is its index
order with no key function (and never compares the texts after it)."""

TermRow = tuple[str, str, int, str, int, int, str]
"""A ``terms`` row as the deriver buffers it: ``(anchor, next, th, kind, fh, sh, term)``, the
columns of the unique index ``terms_anchor`` first, so a plain ``sorted()`` is index order."""

_Row = TypeVar("_Row", bound=tuple[Any, ...])


def index_order(rows: Iterable[_Row]) -> list[_Row]:
    """``sorted(rows)``, the same list, made faster: the rows are grouped by their first
    column (a dict of lists, the groups in first-seen order) and each group is sorted, then
    the groups are joined in the order of their first column. A batch's rows share few first
    columns (a field's hash, a term's first 3 code points), so the groups are short sorts and
    each comparison in them decides on a later column (the 34 batches of a 10k cold index:
    0.71 s of CPU against 1.47 s for ``sorted()``). Rows whose first columns are equal compare
    as tuples, as in ``sorted()``, so the result is exactly ``sorted(rows)``.
    """
    groups: dict[Any, list[_Row]] = {}
    get = groups.get
    for row in rows:
        group = get(row[0])
        if group is None:
            groups[row[0]] = [row]
        else:
            group.append(row)
    out: list[_Row] = []
    for first in sorted(groups):
        group = groups[first]
        if len(group) > 1:
            group.sort()
        out.extend(group)
    return out


def text_hash(text: str) -> int:
    """A deterministic 64-bit signed hash of ``text`` (CRC-32 and Adler-32 of its UTF-8) for
    index keys, the same on every backend; every lookup also compares the texts, so a
    collision costs a row, never an answer.
    """
    data = text.encode("utf-8", "surrogatepass")
    return ((zlib.crc32(data) << 32) | zlib.adler32(data)) - (1 << 63)


LOCK_WAIT_S = 30.0
"""How long a write waits, by default, for another process's lock (SQLite busy timeout,
PostgreSQL ``lock_timeout``)."""

URL_SCHEMES = ("postgresql", "postgres")
"""Schemes of a shared (PostgreSQL) index location; anything else is an SQLite path."""


class BackendError(RuntimeError):
    """The index database cannot be opened or reached; the message names the location
    (never a password).
    """


class WriteFailed(BackendError):
    """A write transaction could not be committed because the index cannot be written (the
    disk is full, a file size limit, an I/O error, a read-only file). The transaction was
    rolled back: nothing of it was written and no lock is left held; the committed state
    stays readable. The message names the location, the cause and what to do.
    """


class NewerLayout(Exception):
    """The index's layout (SQLite ``PRAGMA user_version``; PostgreSQL ``meta.layout``) is above
    what this Grounding reads: a newer Grounding wrote it. Raised before anything is written
    to it (never migrated down, never replaced).
    """


class LockTimeout(RuntimeError):
    """A write transaction waited longer than the backend's lock wait (:meth:`Backend.lock_wait`)
    for a lock another process holds (SQLite: the database's write lock; PostgreSQL: a table
    or row lock, ``lock_timeout``). Nothing was written; the committed state stays readable.
    """


class ReadOnlyIndex(RuntimeError):
    """A write was asked of a store that is not the index's writer (another process holds
    the writer lock of a shared index); the message names the holder when known.
    """


class Cursor(Protocol):
    """What both backends' cursors offer (sqlite3 and psycopg cursors): rows as tuples."""

    def __iter__(self) -> Iterator[Any]: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """A DB-API-like connection taking ``?`` placeholders (what the shared SQL uses)."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...


FtsHit = tuple[str, int, int, str, float]
"""(doc_id, version, 1-based line, line text, rank: lower is better)."""


class Backend(Protocol):
    """What the store needs of a database (see the module docstring).

    ``errors``: the exception classes meaning "the database failed" (the store turns them
    into its own error); ``lost``: those meaning "the connection was lost" (retried after a
    reconnect). ``location``: the configured location for messages (a URL without its
    password). ``shared``: several processes share the index (one writer, many readers).
    ``read_only``: why this process opened a local index it cannot write (a read-only file or
    file system), or None; then :meth:`can_write` is False and :meth:`write` raises
    :class:`ReadOnlyIndex`.
    """

    location: str
    shared: bool
    read_only: str | None
    errors: tuple[type[BaseException], ...]
    lost: tuple[type[BaseException], ...]

    @property
    def writer(self) -> Connection: ...

    def reader(self) -> Connection: ...

    def close(self) -> None: ...

    def create_schema(self) -> bool: ...

    def replaced(self) -> str | None:
        """Why the configured index is no longer the database this backend has open (its file
        was deleted, or replaced by another file or a folder), or None; cheap (one ``stat``).
        """
        ...

    def clear_derived(self, conn: Connection) -> None: ...

    def lock_wait(self, seconds: float) -> AbstractContextManager[None]:
        """Within the block, a write waits at most ``seconds`` for a lock another process
        holds (then :meth:`write` raises :class:`LockTimeout`); afterwards the default wait
        (30 s) again. Call it with the store's writer lock held.
        """
        ...

    def write(self, exclusive: bool = True) -> AbstractContextManager[Connection]:
        """One write transaction on the writer connection: committed when the block ends,
        rolled back when it raises; :class:`LockTimeout` when it waited too long for another
        process's lock (see :meth:`lock_wait`). ``exclusive`` (the log and derived tables): raises
        :class:`ReadOnlyIndex` when this process may not write (a shared index whose writer
        lock another process holds); False (work queues such as the full-text queue, whose
        rows are claimed with :meth:`fts_claim`): any process may, unless its database role
        cannot write (:class:`ReadOnlyIndex` too).
        """
        ...

    def can_write(self) -> bool:
        """Whether :meth:`write` would be allowed now (takes the writer lock when free)."""
        ...

    def writer_holder(self) -> str | None:
        """Who holds the writer lock of a shared index (None: nobody or not known)."""
        ...

    def read(self, conn: Connection) -> AbstractContextManager[None]:
        """One read transaction on ``conn`` (a reader): every statement inside sees the same
        committed state. Re-entrant use is the caller's business (it nests by depth).
        """
        ...

    def in_transaction(self, conn: Connection) -> bool: ...

    def notify(self, conn: Connection, seq: int) -> None:
        """Announce (at commit) that the log now ends at ``seq`` (a no-op when unshared)."""
        ...

    def wait_for_events(self, known: int, timeout: float) -> int | None:
        """Block up to ``timeout`` seconds until the log holds more than ``known`` events;
        the new count, or None on timeout. Call it from a worker thread.
        """
        ...

    def terms_with_anchors(self, conn: Connection, anchors: Sequence[str], within: str | None = None,
                           nexts: Sequence[str] | None = None) -> list[tuple[str, str, str, int, int, int]]:
        """``(term, next, kind, fh, sh, th)`` of every known term anchored at one of
        ``anchors`` (a sentence's 2- and 3-grams), in one query. With ``nexts`` (the
        sentence's 3-grams), only terms whose next piece is ``''`` or one of them; with
        ``within`` (a short sentence), only terms it contains.
        """
        ...

    def vocabulary_with_anchors(self, conn: Connection, anchors: Sequence[str],
                                within: str | None = None) -> list[tuple[str, str, str]]:
        """``(term, kind, name)`` of every question-grammar name (SPEC §13) anchored at one of
        ``anchors`` (a text's distinct 1-, 2- and 3-grams), in one query; with ``within`` (a
        short text), only terms it contains.
        """
        ...

    def write_field_lines(self, conn: Connection,
                          lines: Sequence[LineRow], terms: Iterable[TermRow]) -> None:
        """Insert field lines (:data:`LineRow`: ``subject`` is an image attribute's region
        ``SUBJECT#rN``, None on text lines) and known terms (:data:`TermRow`; duplicates
        ignored), inside the caller's transaction.
        """
        ...

    def write_region_values(self, conn: Connection, rows: Iterable[tuple[str, str, int, int]]) -> None:
        """Record image attributes ``(field, value, content_id, region)`` (SPEC §12)."""
        ...

    def content_utf8(self, conn: Connection, content_id: int) -> bytes | None:
        """The text of the ``import`` event ``content_id`` as its UTF-8 bytes, or None when
        there is no such event (the claim check looks a cited line up in them without
        decoding and splitting the whole text: ``SqlSnapshot.line_text``).
        """
        ...

    def measurement(self, conn: Connection, sha256: str, version: int) -> str | None:
        """The cached measurement (JSON) of an image content by sha256 and measurement
        version, or None (``measurements``: not derived from the log, kept across rebuilds).
        """
        ...

    def put_measurement(self, conn: Connection, sha256: str, version: int, data: str) -> None:
        """Cache a measurement inside the caller's transaction (a second one is ignored)."""
        ...

    def stage_scan(self, conn: Connection) -> None:
        """Make a scan's staging tables ``scan_files`` and ``scan_docs`` exist and hold no row,
        inside the caller's write transaction (``store._Staged``; the scan empties them again
        before it commits). SQLite: two tables of the index file. PostgreSQL: temporary tables
        of the writer's session (no privilege beyond a database's default ``TEMPORARY``, no
        table in the shared schema for a team's roles to be granted).
        """
        ...

    def write_fields(self, conn: Connection, fields: Iterable[tuple[int, str]]) -> None:
        """Record field names ``(fh, field)`` (duplicates ignored)."""
        ...

    def fts_claim(self, conn: Connection, batch: int) -> list[int]:
        """Up to ``batch`` queued content_ids no other process is working on (currently
        active contents first), claimed until the caller's transaction ends.
        """
        ...

    def fts_insert(self, conn: Connection, rows: Iterable[tuple[int, str]]) -> None: ...

    def fts_clear(self, conn: Connection) -> None: ...

    def fts_match(self, conn: Connection, phrases: Sequence[str], any_term: bool, active_sql: str,
                  params: Sequence[object], limit: int) -> list[FtsHit]:
        """Lines holding every phrase (``any_term``: at least one) as a case-folded
        substring, ranked by bm25 (lower is better), each phrase at least 3 code points.
        ``active_sql`` is a condition on ``v``, the line's ``versions`` row.
        """
        ...

    def fts_substrings(self, conn: Connection, terms: Sequence[str], any_term: bool,
                       active_sql: str, params: Sequence[object], limit: int) -> list[FtsHit]: ...


def is_url(location: str) -> bool:
    """True when ``location`` names a shared (PostgreSQL) index rather than an SQLite file."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in URL_SCHEMES


def redact(location: str) -> str:
    """``location`` fit for a message: a URL's password (and ``password=`` parameters) removed."""
    if not is_url(location):
        return location
    try:
        parts = urlsplit(location)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}@{hostport}" if user else hostport
        query = "&".join(p for p in parts.query.split("&") if p and not p.lower().startswith("password="))
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return location.split("://", 1)[0] + "://…"


def has_password(location: str) -> bool:
    """True when a URL carries a password (``user:secret@`` or ``?password=``)."""
    if not is_url(location):
        return False
    try:
        parts = urlsplit(location)
    except ValueError:
        return False
    if parts.password:
        return True
    return any(p.lower().startswith("password=") for p in parts.query.split("&"))


def open_backend(location: str) -> Backend:
    """The backend for a configured index location: a ``postgresql://`` URL or an SQLite path
    (``":memory:"`` included). Raises :class:`BackendError` when it cannot be opened.
    """
    if is_url(location):
        try:
            from .postgres_backend import PostgresBackend
        except ImportError as exc:
            raise BackendError(
                f"the index {redact(location)} is a PostgreSQL database, which needs psycopg 3:"
                " pip install 'grounding[postgres]'") from exc
        return PostgresBackend(location)
    from .sqlite_backend import SqliteBackend

    return SqliteBackend(location)
