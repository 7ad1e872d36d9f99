"""The SQL side of memory entries (SPEC §11): events in the log, one derived table, queries.

Memory events are rows of the index's one append-only ``events`` table (``kind`` ``remember``,
``approve`` or ``forget``; ``doc_id`` empty; ``version`` the entry's version, 0 for ``forget``;
the memory fields in the nullable JSON ``data`` column, see
:meth:`grounding_core.memory.MemoryEvent.data`). They share the log's sequence numbers with
``import``/``revoke``, so ``replay(n)``, ``--at N``, reopening and crash safety cover them.

The derived table ``memory_entries`` has one row per ``remember`` event and answers any
``replay(n)`` the way the design sketch's rows do: a row is in the state at n when
``remembered_seq <= n``; it is approved at n when ``approved_seq <= n`` and forgotten when
``forgotten_seq <= n``. Later events only add rows with larger seqs or set ``approved_seq`` /
``forgotten_seq`` to a seq larger than any reader's n, so a reader never sees a change. The row
is written in the same transaction as its event (:func:`write_event`), so a crash leaves both
or neither; :func:`rebuild` derives the table from the log again (used by the migration and by
tests comparing it with the log).

Plain SQL that PostgreSQL also speaks (``ON CONFLICT DO NOTHING``, no SQLite-only syntax),
with ``?`` placeholders; the store's backend runs :data:`SCHEMA` and the writes happen inside
the store's write transaction (``grounding_core.store.Store.remember``). Reads take the calling
thread's connection and a seq (``grounding_core.sql_snapshot.SqlSnapshot.memory_versions``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from .memory import (
    MEMORY_EVENT_KINDS,
    MemoryEntry,
    MemoryEvent,
    MemoryWriteError,
    active_of,
    name_problem,
    text_problem,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_entries (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  version INTEGER NOT NULL,
  value TEXT NOT NULL,
  remembered_seq INTEGER NOT NULL,
  remembered_at TEXT NOT NULL DEFAULT '',
  approved_by TEXT,
  approved_seq INTEGER,
  approved_at TEXT,
  forgotten_seq INTEGER,
  forgotten_at TEXT,
  forget_reason TEXT,
  PRIMARY KEY (scope, key, version)
);
"""

_COLUMNS = ("scope, key, version, value, remembered_seq, remembered_at, approved_by, approved_seq,"
            " approved_at, forgotten_seq, forgotten_at, forget_reason")

Connection = sqlite3.Connection
"""The connection the statements run on: the store's writer (inside its transaction) for
writes, the calling thread's reader for lookups (``?`` placeholders, plain SQL)."""


def _entry(row: Sequence[Any]) -> MemoryEntry:
    return MemoryEntry(str(row[0]), str(row[1]), int(row[2]), str(row[3]), int(row[4]), str(row[5] or ""),
                       row[6], row[7], row[8], row[9], row[10], row[11])


# -- writing ---------------------------------------------------------------------------------


def apply_event(conn: Connection, event: MemoryEvent) -> None:
    """Update ``memory_entries`` for one event (the SQL twin of ``memory.apply_events``)."""
    if event.kind == "remember":
        approved = event.by is not None
        conn.execute(
            f"INSERT INTO memory_entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL)"
            " ON CONFLICT DO NOTHING",
            (event.scope, event.key, event.version, event.value, event.seq, event.recorded_at,
             event.by, event.seq if approved else None, event.recorded_at if approved else None),
        )
    elif event.kind == "approve":
        conn.execute(
            "UPDATE memory_entries SET approved_by = ?, approved_seq = ?, approved_at = ?"
            " WHERE scope = ? AND key = ? AND version = ? AND approved_seq IS NULL AND forgotten_seq IS NULL",
            (event.by, event.seq, event.recorded_at, event.scope, event.key, event.version),
        )
    else:
        conn.execute(
            "UPDATE memory_entries SET forgotten_seq = ?, forgotten_at = ?, forget_reason = ?"
            " WHERE scope = ? AND key = ? AND forgotten_seq IS NULL",
            (event.seq, event.recorded_at, event.reason, event.scope, event.key),
        )


def write_event(conn: Connection, event: MemoryEvent) -> MemoryEvent:
    """Append ``event`` to the log and update the derived table; returns it with its seq.

    Call inside the writer's transaction (the store's ``BEGIN IMMEDIATE``).
    """
    cur = conn.execute(
        "INSERT INTO events (kind, doc_id, version, data, recorded_at) VALUES (?, '', ?, ?, ?)",
        (event.kind, event.version, event.data(), event.recorded_at),
    )
    assert cur.lastrowid is not None
    stored = MemoryEvent(int(cur.lastrowid), event.kind, event.scope, event.key, event.version,
                         event.value, event.by, event.reason, event.recorded_at)
    apply_event(conn, stored)
    return stored


def _versions_now(conn: Connection, scope: str, key: str) -> dict[int, MemoryEntry]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM memory_entries WHERE scope = ? AND key = ?",
                        (scope, key)).fetchall()
    return {int(r[2]): _entry(r) for r in rows}


def _check_names(scope: str, key: str) -> None:
    for what, name in (("scope", scope), ("key", key)):
        problem = name_problem(what, name)
        if problem is not None:
            raise MemoryWriteError(problem)


def remember(conn: Connection, scope: str, key: str, value: str, approved_by: str | None,
             now: str) -> MemoryEvent:
    """Validate and build a ``remember`` event at the end of the log (not yet written).

    The value and the approver's name are stripped of surrounding whitespace. Raises
    :class:`MemoryWriteError` for a bad name or value, or when the newest live version of the
    key already holds exactly this value.
    """
    _check_names(scope, key)
    value = value.strip()
    problem = text_problem("value", value)
    if problem is None and approved_by is not None:
        approved_by = approved_by.strip()
        problem = text_problem("approver's name", approved_by)
    if problem is not None:
        raise MemoryWriteError(problem)
    versions = _versions_now(conn, scope, key)
    newest = versions[max(versions)] if versions else None
    if newest is not None and not newest.forgotten and newest.value == value:
        state = "active" if newest.approved else "a proposal"
        raise MemoryWriteError(f"{newest.id} already holds {newest.quote!r} ({state})")
    version = (max(versions) if versions else 0) + 1
    return MemoryEvent(0, "remember", scope, key, version, value, approved_by, recorded_at=now)


def approve(conn: Connection, scope: str, key: str, version: int, by: str, now: str) -> MemoryEvent:
    """Validate and build an ``approve`` event: the version exists, is neither approved nor
    forgotten, and no newer version is active. Raises :class:`MemoryWriteError` otherwise.
    """
    _check_names(scope, key)
    by = by.strip()
    problem = text_problem("approver's name", by)
    if problem is not None:
        raise MemoryWriteError(problem)
    versions = _versions_now(conn, scope, key)
    entry = versions.get(version)
    ident = f"memory:{scope}/{key}@{version}"
    if entry is None:
        known = f"the newest is @{max(versions)}" if versions else "the key has no versions"
        raise MemoryWriteError(f"{ident} does not exist ({known})")
    if entry.forgotten:
        raise MemoryWriteError(f"{ident} was forgotten; remember the value again to make a new version")
    if entry.approved:
        raise MemoryWriteError(f"{ident} is already approved (by {entry.approved_by})")
    active = active_of(versions)
    if active is not None and active.version > version:
        raise MemoryWriteError(f"{ident} is older than the active version {active.id}; nothing to approve")
    return MemoryEvent(0, "approve", scope, key, version, by=by, recorded_at=now)


def forget(conn: Connection, scope: str, key: str, reason: str, now: str) -> MemoryEvent:
    """Validate and build a ``forget`` event; raises :class:`MemoryWriteError` when the key has
    no version left to forget.
    """
    _check_names(scope, key)
    reason = reason.strip()
    if any(ch in "\r\n\0" for ch in reason):
        raise MemoryWriteError("the reason must be one line of text")
    versions = _versions_now(conn, scope, key)
    if not any(not e.forgotten for e in versions.values()):
        what = "every version is already forgotten" if versions else "it has no versions"
        raise MemoryWriteError(f"memory:{scope}/{key}: nothing to forget ({what})")
    return MemoryEvent(0, "forget", scope, key, 0, reason=reason, recorded_at=now)


def memory_events(conn: Connection, upto: int | None = None) -> Iterator[MemoryEvent]:
    """The memory events of the log in seq order (all, or those with seq <= ``upto``)."""
    kinds = ", ".join(f"'{k}'" for k in MEMORY_EVENT_KINDS)
    sql = f"SELECT seq, kind, version, data, recorded_at FROM events WHERE kind IN ({kinds})"
    args: tuple[int, ...] = ()
    if upto is not None:
        sql += " AND seq <= ?"
        args = (upto,)
    for row in conn.execute(sql + " ORDER BY seq", args).fetchall():
        yield MemoryEvent.from_row(int(row[0]), str(row[1]), int(row[2]), row[3], str(row[4]))


def rebuild(conn: Connection) -> int:
    """Derive ``memory_entries`` from the log again (inside a transaction); returns the events read."""
    conn.execute("DELETE FROM memory_entries")
    count = 0
    for event in memory_events(conn):
        apply_event(conn, event)
        count += 1
    return count


# -- reading ---------------------------------------------------------------------------------


def _prefix(column: str, prefix: str) -> tuple[str, tuple[object, ...]]:
    """An index range for ``column LIKE prefix%`` without LIKE's wildcards: ``>= prefix`` and
    ``< prefix + U+10FFFF`` (the largest code point, so every continuation sorts below it in
    UTF-8 binary order), then an exact ``substr`` test.
    """
    if not prefix:
        return "", ()
    return (f" AND {column} >= ? AND {column} < ? AND substr({column}, 1, ?) = ?",
            (prefix, prefix + "\U0010ffff", len(prefix), prefix))


def versions(conn: Connection, seq: int, scope: str, key: str) -> dict[int, MemoryEntry]:
    """Every version of ``(scope, key)`` in the state ``replay(seq)``, facts after seq hidden
    (one primary-key range read).
    """
    rows = conn.execute(f"SELECT {_COLUMNS} FROM memory_entries WHERE scope = ? AND key = ?"
                        " AND remembered_seq <= ? ORDER BY version", (scope, key, seq)).fetchall()
    out = {}
    for row in rows:
        entry = _entry(row).at(seq)
        if entry is not None:
            out[entry.version] = entry
    return out


def scopes(conn: Connection, seq: int, prefix: str = "", limit: int | None = None) -> list[str]:
    """Scopes with an entry at ``seq`` starting with ``prefix`` (the primary key's range)."""
    bound, args = _prefix("scope", prefix)
    rows = conn.execute(
        f"SELECT DISTINCT scope FROM memory_entries WHERE remembered_seq <= ?{bound}"
        " ORDER BY scope LIMIT ?", (seq, *args, -1 if limit is None else limit)).fetchall()
    return [str(r[0]) for r in rows]


def keys(conn: Connection, seq: int, scope: str, prefix: str = "", limit: int | None = None) -> list[str]:
    """Keys of ``scope`` with an entry at ``seq`` starting with ``prefix``, sorted."""
    bound, args = _prefix("key", prefix)
    rows = conn.execute(
        f"SELECT DISTINCT key FROM memory_entries WHERE scope = ? AND remembered_seq <= ?{bound}"
        " ORDER BY key LIMIT ?", (scope, seq, *args, -1 if limit is None else limit)).fetchall()
    return [str(r[0]) for r in rows]
