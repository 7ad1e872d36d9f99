"""Diagnostics of evidence files, pushed whether or not they are open (SPEC §7, §10).

After each scan (and after a settings change that can change them) :func:`refresh` works out,
in a worker thread, which evidence files' findings may have changed
(``grounding_core.evidence_findings.affected_paths``: the files re-read, the files whose scan
findings differ, the files holding lines of conflict keys the changed documents touch; on the
first refresh of a workspace, every file with a finding), then recomputes those files in
chunks of :data:`CHUNK` — findings, a digest, and the LSP diagnostics of the files whose
digest differs from the one published — and publishes only those. Draft checks come first:
each pass starts once the draft checks scheduled before it (the re-checks of the same index
change) have ended. The refresh is background work (``server.session.Foreground``): it
pauses before each chunk, between the conflict keys of its plan and before each file of a
chunk while a foreground job (a draft check, a hover, a completion ...) runs. A refresh
whose index view was replaced meanwhile stops and leaves its remaining files to the next one,
which adds only what changed since the stopped one's view (so a storm of scans during the first
refresh never restarts its whole plan). The refresh is bulk work: it also gives way to a
keystroke's check near the end of its debounce (``Foreground.pause_bulk``).
The loop keeps one small digest per file it has published to, never the findings themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pygls.uris import from_fs_path

from grounding_core.events import Event
from grounding_core.evidence_findings import ConflictCache, affected_paths, conflict_paths, file_findings
from grounding_core.index import ConflictKey, IndexSnapshot, VersionRecord
from grounding_core.model import Finding, Span
from grounding_core.scan import MAX_EVIDENCE_BYTES, TooLarge, Unstable, read_inside
from grounding_core.store import ScanResult
from grounding_core.text import split_lines
from server import heap
from server.convert import EVIDENCE_MORE, lsp_diagnostics
from server.features import diagnostics
from server.positions import PositionCodec
from server.session import Client, FileLines, IndexView, Session

__all__ = ["CHUNK", "refresh"]

logger = logging.getLogger(__name__)

CHUNK = 16
"""Evidence files recomputed and published per worker call (small: a draft check waiting for
the interpreter lock waits for at most one chunk)."""
_TASK = "evidence:refresh"

Published = dict[str, int]
ScanMap = dict[str, tuple[Finding, ...]]


@dataclass
class _State:
    """The loop's bookkeeping (``session.feature_state["evidence"]``)."""

    published: Published = field(default_factory=dict)
    """Evidence path -> digest of the non-empty findings last published for it."""
    scan_map: ScanMap = field(default_factory=dict)
    """Evidence path -> the scan's findings, non-empty only (replaced, never mutated)."""
    snapshot: IndexSnapshot | None = None
    """The snapshot the published findings were computed from."""
    root: Path | None = None
    """The evidence root :attr:`published` paths are relative to."""
    epoch: int = -1
    scan: ScanResult | None = None
    events: list[Sequence[Event]] = field(default_factory=list)
    """The events of the scans since the last plan (read in the plan's worker thread: a
    scan's own events are read from the log, ``store.AppendedEvents``)."""
    paths: dict[str, VersionRecord | None] = field(default_factory=dict)
    full: bool = True


def _state(session: Session) -> _State:
    state = session.feature_state.get("evidence")
    if not isinstance(state, _State):
        state = session.feature_state["evidence"] = _State()
    return state


def refresh(session: Session, scan: ScanResult | None, before: IndexView | None) -> None:
    """Bring evidence diagnostics up to date after ``scan`` (None: a settings change);
    ``before`` is the view the previous diagnostics were computed from (None: recompute every
    file with findings).
    """
    state = _state(session)
    if scan is not None:
        state.scan = scan
        state.events.append(scan.events)
    if before is None or state.epoch != session.epoch:
        state.full = True
    if session.tasks.running(_TASK) is None:
        session.tasks.start(_TASK, _refresh_loop(session))


async def _refresh_loop(session: Session) -> None:
    state = _state(session)
    while state.full or state.scan is not None or state.paths:
        await _drafts_first(session)
        view = session.current_view()
        if view is None:
            return
        if state.root != view.config.evidence_root:  # a new evidence folder: clear the old one's
            for path in state.published:
                session.client.send_prepared(session.client.prepare_diagnostics(_uri(state.root, path), None, []),
                                             bulk=True)
            state.published, state.scan_map, state.root, state.full = {}, {}, view.config.evidence_root, True
        scan, events, paths, full = state.scan, state.events, state.paths, state.full
        state.scan, state.events, state.paths, state.full = None, [], {}, False
        before = state.snapshot if state.epoch == view.epoch and not full else None
        await session.foreground.wait(bulk=True)
        plan = await session.readers.run(
            _plan, view, before, state.scan_map, scan.evidence if scan is not None else None,
            scan.full if scan is not None else True, list(scan.changed) if scan is not None else [], events, paths,
            set(state.published), session.foreground.pause_bulk,
            session.workspace.store.backend if session.workspace is not None else None)
        state.scan_map = plan.scan_map
        todo = list(plan.affected.items())
        # one cache of conflict keys for the whole refresh (the chunks run one at a time)
        cache = ConflictCache(view.snapshot, view.today, view.config.evidence_display, conflicting=plan.conflicting)
        for start in range(0, len(todo), CHUNK):
            heap.freeze()  # automatic full collections during the refresh walk only the last chunk's heap
            await session.foreground.wait(bulk=True)
            current = session.current_view()
            if current is None or current.generation != view.generation:
                # the next pass does the rest: these files (every file this pass found
                # affected is done or among them), plus what changed since this view (what was
                # published so far was computed from it), not a whole new plan
                state.paths.update(todo[start:])
                state.snapshot, state.epoch = view.snapshot, view.epoch
                break
            chunk = todo[start:start + CHUNK]
            digests = {path: state.published.get(path) for path, _ in chunk}
            out = await session.readers.run(_chunk, view, cache, session.client, session.codec, session.file_lines,
                                            chunk, plan.scan_map, digests, session.foreground.pause_bulk)
            for path, digest, prepared in out:
                session.client.send_prepared(prepared, bulk=True)  # after the drafts' output
                if digest is None:
                    state.published.pop(path, None)
                else:
                    state.published[path] = digest
            await asyncio.sleep(0)
        else:
            state.snapshot, state.epoch = view.snapshot, view.epoch
    # a refresh of many files leaves most of its heap free: collect once, freeze what stays
    # (automatic full collections then skip it) and give free pages back (server/heap.py)
    await session.foreground.wait(bulk=True)
    await session.readers.run(heap.settle)


async def _drafts_first(session: Session) -> None:
    """Wait for the draft checks scheduled or running now (after an index change: its
    re-checks), once: the person writing waits for those diagnostics first. Bounded: checks
    scheduled later by typing do not hold the refresh up (the foreground gate handles those).
    """
    checks = session.tasks.running_prefixed(diagnostics.CHECK_PREFIX)
    if checks:
        await asyncio.wait(checks)


@dataclass(frozen=True)
class _Plan:
    scan_map: ScanMap
    affected: dict[str, VersionRecord | None]
    conflicting: frozenset[ConflictKey] | None = None
    """Every conflicting key of the view, when the plan read them (a full refresh)."""


def _plan(view: IndexView, before: IndexSnapshot | None, old_map: ScanMap,
          evidence: Mapping[str, Sequence[Finding]] | None, full_walk: bool, changed: list[str],
          events: list[Sequence[Event]],
          paths: dict[str, VersionRecord | None], published: set[str],
          pause: Callable[[], object] = lambda: None, backend: object = None) -> _Plan:
    """Which files to recompute (worker thread; see the module docstring). ``pause`` is the
    background yield point, called between the conflict keys of a full refresh and inside
    its long SQL statements (:func:`_statements_pause`, on ``backend``'s reader connection).
    """
    with _statements_pause(backend, pause):
        return _plan_files(view, before, old_map, evidence, full_walk, changed, events, paths, published, pause)


PROGRESS_STEPS = 20_000
"""SQLite virtual-machine steps between two pauses of one long statement of a refresh's plan
(well under a millisecond of SQLite's time)."""


@contextlib.contextmanager
def _statements_pause(backend: object, pause: Callable[[], object]) -> Iterator[None]:
    """While the block runs, a statement on this thread's SQLite reader connection calls
    ``pause`` every :data:`PROGRESS_STEPS` steps (SQLite's progress handler): the one way a
    single long statement yields to foreground work — ``conflicting_keys`` of a full refresh
    is one ``GROUP BY`` over every active field line (1.7 s of CPU at 10k files, 6.5 s at
    30k). SQLite releases the GIL while it runs, but it still takes a core of two from the
    check the writer waits for. Other backends: nothing (their statements run elsewhere).
    """
    reader = getattr(backend, "reader", None)
    conn = reader() if callable(reader) else None
    if not isinstance(conn, sqlite3.Connection):
        yield
        return

    def handler() -> int:
        pause()
        return 0  # go on (non-zero would interrupt the statement)

    conn.set_progress_handler(handler, PROGRESS_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def _plan_files(view: IndexView, before: IndexSnapshot | None, old_map: ScanMap,
                evidence: Mapping[str, Sequence[Finding]] | None, full_walk: bool, changed: list[str],
                events: list[Sequence[Event]], paths: dict[str, VersionRecord | None], published: set[str],
                pause: Callable[[], object]) -> _Plan:
    snapshot, today = view.snapshot, view.today
    scan_map = old_map
    affected: dict[str, VersionRecord | None] = dict(paths)
    if evidence is not None:
        if full_walk:  # the scan lists every path
            scan_map = {path: tuple(found) for path, found in evidence.items() if found}
        else:  # a scan of some paths lists those it looked at (and those whose findings changed)
            scan_map = dict(old_map)
            for path, found in evidence.items():
                if found:
                    scan_map[path] = tuple(found)
                else:
                    scan_map.pop(path, None)
        for path in set(old_map) | set(scan_map):
            if old_map.get(path) != scan_map.get(path):
                affected.setdefault(path, None)
        for path in changed:  # re-read: its ranges may move, if it shows anything
            if path in scan_map or path in published:
                affected.setdefault(path, None)
    conflicting = None
    if before is None:
        for path in (*scan_map, *published):
            affected.setdefault(path, None)
        conflicting = frozenset(snapshot.conflicting_keys(today))
        for key in conflicting:
            pause()
            for path, record in conflict_paths(snapshot, today, [key]).items():
                if affected.get(path) is None:
                    affected[path] = record
    else:
        docs = {e.doc_id for scan_events in events for e in scan_events}
        for path, record in affected_paths(before, snapshot, docs, today).items():
            if affected.get(path) is None:
                affected[path] = record
    return _Plan(scan_map, dict(sorted(affected.items())), conflicting)


def _chunk(view: IndexView, cache: ConflictCache, client: Client, codec: PositionCodec, file_lines: FileLines,
           chunk: Iterable[tuple[str, VersionRecord | None]], scan_map: ScanMap, digests: dict[str, int | None],
           pause: Callable[[], object] = lambda: None) -> list[tuple[str, int | None, Any]]:
    """The files in ``chunk`` whose findings changed: path, new digest (None: no findings any
    more) and the prepared publication (worker thread). ``pause`` (the background yield
    point) is called before each file and every 128 lines, diagnostics or serialised
    diagnostics within one.
    """
    snapshot = view.snapshot
    root = view.config.root
    out: list[tuple[str, int | None, Any]] = []
    for path, hint in chunk:
        pause()
        record = hint if hint is not None and hint.path == path else snapshot.record_for_path(path)
        scanned = scan_map.get(path, ())
        findings = file_findings(path, scanned, cache, record, pause)
        if not findings:
            if digests.get(path) is not None:
                out.append((path, None, client.prepare_diagnostics(view.evidence_uri(path), None, [])))
            continue
        # the version's hash is part of the digest: its text changed, its ranges may have moved
        digest = hash((record.sha256 if record is not None else "", findings))
        if digests.get(path) == digest:
            continue
        # The scan's findings are about the file as it is now (which the index may not hold);
        # conflicts are about the indexed version, the file's current content otherwise.
        if record is not None and record.path == path and not scanned:
            lines: Sequence[str] = snapshot.document(record).lines
        else:
            read = _disk_lines(view.config.evidence_root, path)
            lines, findings = (read, findings) if read is not None else ((), _unread(findings))
        uri = view.evidence_uri(path)
        pause()
        items = lsp_diagnostics(findings, lines, codec, view.root_uri, lambda rel: file_lines(str(root / rel)),
                                more=EVIDENCE_MORE, uri=uri, evidence=True, pause=pause)
        pause()
        out.append((path, digest, client.prepare_diagnostics(uri, None, items, pause)))
    return out


def _uri(root: Path | None, path: str) -> str:
    return (from_fs_path(str(root / path)) or "") if root is not None else path


def _unread(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Findings of a file over the 64 MiB limit, whose lines were not read: each at 1:1, saying
    why (the scan's own ``unreadable-evidence`` finding already names the size and limit).
    """
    note = (f"the file is now over the {MAX_EVIDENCE_BYTES / (1 << 20):.1f} MB limit for evidence files, so it"
            " was not read again; this finding is shown on line 1")
    return tuple(f if f.name == "unreadable-evidence" else replace(f, span=Span.line(0, 0, 0),
                                                                    message=f"{f.message} ({note})")
                 for f in findings)


def _disk_lines(evidence_root: Path, path: str) -> tuple[str, ...] | None:
    """The file's lines from disk, for the ranges of findings on files the index does not hold.

    Read as the scanner reads (:func:`grounding_core.scan.read_inside`, one attempt): a refused
    symlink may point outside the evidence root and a FIFO would block, so neither is read
    (SPEC §2; their findings sit at 1:1, which needs no line text: ``()``); a file over
    :data:`~grounding_core.scan.MAX_EVIDENCE_BYTES` (64 MiB) is never read either: None.
    """
    try:
        data, _ = read_inside(evidence_root, evidence_root / path, attempts=1)
    except TooLarge:
        return None
    except (OSError, Unstable):
        return ()
    text = data.decode("utf-8", errors="replace")
    return tuple(split_lines(text[1:] if text.startswith("\ufeff") else text))
