"""One language-server session: the state the event loop owns, and the rules every handler
shares (SPEC §10; the layout is described in docs/architecture.md).

:class:`Session` holds, for one client connection:

- the client's side: its capabilities, the negotiated codec, the open documents
  (:class:`server.documents.GroundingWorkspace`, kept equal to the editor's text by pygls);
- the workspace (configuration + index store) and the current :class:`IndexView`: one frozen
  :class:`~grounding_core.index.IndexSnapshot` with the configuration and date it answers
  for, numbered by a *generation* that changes whenever answers may change (a scan, a
  settings change, midnight);
- the latest :class:`DraftResult` of each open draft, keyed by :class:`ResultKey`
  ``(document version, text hash, index generation)`` recorded when the check started;
- named background tasks and two pools of daemon worker threads (``readers`` for checks and
  lookups, ``writer`` for the store: scans and closing, one at a time).

Four rules, used by every feature:

- **capture on the loop, compute off it**: heavy work receives frozen values — a
  :class:`~server.documents.DocumentSnapshot`, an :class:`IndexView` — taken on the loop
  (:meth:`Session.capture`), and runs in a worker thread;
- **one freshness rule**: a result is fresh while its key equals the open document's
  version, text hash and the current generation (:meth:`Session.is_fresh`); anything else is
  dropped, never published;
- **one error guard**: :meth:`Session.guard` / :meth:`Session.guard_sync` log a failing
  feature and answer its default (null), so the other features keep working; JSON-RPC errors
  (``InvalidParams`` ...) pass through to the client;
- **foreground before background**: draft checks and the requests a user waits for hold
  :class:`Foreground` until their task ends; background work (scans, the evidence refresh,
  the full-text fill, the heap trim) pauses at its unit boundaries meanwhile, bounded.

Nothing here speaks the protocol: outgoing messages go through the :class:`Client` port
(``server/app.py`` implements it with pygls; in-process tests with a recorder).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path, to_fs_path

from grounding_core.check import check_parsed, check_text
from grounding_core.config import Config
from grounding_core.drafts import ParsedDraft, draft_kind
from grounding_core.index import IndexSnapshot
from grounding_core.model import DraftReport, Location
from grounding_core.scan import Unstable, read_inside, read_stable
from grounding_core.text import split_lines
from grounding_core.workspace import Workspace
from server.documents import DocumentSnapshot, GroundingWorkspace
from server.positions import PositionCodec

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEBOUNCE_SECONDS = 0.15
"""Typing debounce: a ``didChange`` is checked 150 ms after the last change (SPEC §10);
open and save are checked at once."""
_NEVER_EVIDENCE = (".git", ".grounding")
"""Folders the evidence walk never enters (``grounding_core.config``), so nothing in them is
an evidence file for the editor either."""
READER_THREADS = 4
"""Worker threads for checks and lookups (hover, completion, code actions, evidence diagnostics)."""
SWITCH_INTERVAL_SECONDS = 0.001
"""The interpreter's thread switch interval in the server process (``sys.setswitchinterval``;
Python's default is 5 ms), set by ``server.app.serve_stdio``. pygls reads every message from
stdin in an executor thread, one hop per header line and one for the body, and each hop
waits for the GIL while bulk work runs in reader threads: on the Debian bench a keystroke's
``didChange`` reached the loop 1-104 ms after the client sent it (median 13.5, p90 61 ms);
at 1 ms, median 11.5, p90 27 ms (one run each, branch checkahead). Costs a few more switches
per second for CPU-bound threads."""


# ------------------------------------------------------------------------- the client port


class Client(Protocol):
    """What the session sends to the editor (implemented in ``server/app.py`` with pygls)."""

    def publish_diagnostics(self, uri: str, version: int | None,
                            diagnostics: Sequence[types.Diagnostic]) -> None: ...

    def prepare_diagnostics(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic],
                            pause: Callable[[], object] | None = None) -> Any:
        """A ``publishDiagnostics`` made ready to send (serialised); thread-safe, so a worker
        does the heavy part and the loop only writes it with :meth:`send_prepared`. ``pause``:
        a background caller's yield point, called now and then while serialising.
        """
        ...

    def send_prepared(self, prepared: Any, bulk: bool = False) -> None:
        """Send a message made by :meth:`prepare_diagnostics`. ``bulk``: background output
        (evidence files' diagnostics), written after the foreground's messages and not while a
        draft check is expected or running (``server.app.QueuedWriter``).
        """
        ...

    def notify(self, method: str, params: Any) -> None: ...

    def show_message(self, kind: types.MessageType, message: str) -> None: ...

    def log_message(self, kind: types.MessageType, message: str) -> None: ...

    async def show_message_request(self, kind: types.MessageType, message: str,
                                   choices: Sequence[str]) -> str | None:
        """Ask the writer (``window/showMessageRequest``): the title of the choice taken, or
        None when the question was dismissed or the client could not ask.
        """
        ...

    async def configuration(self, section: str) -> Any: ...

    async def register_capability(self, registration: types.Registration) -> None: ...

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult: ...

    def refresh_diagnostics(self) -> None: ...

    async def refresh_code_lenses(self) -> None: ...

    async def refresh_inlay_hints(self) -> None: ...

    async def create_progress(self, token: str) -> None: ...

    def progress(self, token: str, value: types.WorkDoneProgressBegin | types.WorkDoneProgressReport
                 | types.WorkDoneProgressEnd) -> None: ...

    def unstructure(self, value: Any) -> Any: ...


# ------------------------------------------------------------------------------ workers


class Workers:
    """A pool of daemon threads running blocking calls for the event loop.

    :meth:`run` returns a future of the loop that called it. Daemon threads (unlike
    ``asyncio.to_thread``'s executor) never hold up the process's exit: an ``exit`` during a
    long scan ends the process at once, and the index's transaction rolls back (SPEC §4:
    crash-safe). A call whose future was cancelled before it started is skipped.
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` in one of the threads; await the result on the calling loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._start()
        self._queue.put((loop, future, fn, args))
        return future

    @property
    def queued(self) -> int:
        """Calls waiting for a thread (not started yet); approximate while threads take them."""
        return self._queue.qsize()

    def close(self) -> None:
        """Let the threads end once the calls already queued are done (new calls restart them)."""
        with self._lock:
            for _ in self._threads:
                self._queue.put(None)
            self._threads = []

    def _start(self) -> None:
        with self._lock:
            while len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}",
                                          daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, future, fn, args = item
            if future.cancelled():
                continue
            try:
                value = fn(*args)
            except BaseException as exc:  # delivered to the awaiting task
                self._deliver(loop, future, None, exc)
            else:
                self._deliver(loop, future, value, None)

    @staticmethod
    def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any,
                 exc: BaseException | None) -> None:
        def settle() -> None:
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(value)

        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle)


# ------------------------------------------------------------- foreground before background

FOREGROUND_GRACE_SECONDS = 0.005
"""After the last foreground job ended, background work waits this much longer: the steps of
one request or check follow each other with a hop through the loop in between."""
BACKGROUND_MAX_WAIT_SECONDS = 0.5
"""The starvation bound: a background unit that has waited this long runs anyway, and so does
all background work for the next :data:`BACKGROUND_QUANTUM_SECONDS`."""
BACKGROUND_QUANTUM_SECONDS = 0.05
"""How long background work runs without pausing once it waited the bound."""


OUTPUT_MARGIN_SECONDS = (0.05, 0.14)
"""The output lane's margin before an expected foreground job: the least, and the most (under
the typing debounce, so every keystroke leaves a window for any message)."""
BULK_LEAD_SECONDS = 0.1
"""Bulk background work (:meth:`Foreground.pause_bulk`) stops at its next unit boundary once a
draft check a keystroke scheduled is due within this many seconds: the last 100 ms of the
150 ms typing debounce and the check itself run without it, the first 50 ms do not (its units
between two pause points are about 50 ms at most, so one begun then ends before the check)."""
CLIENT_READ_BYTES_PER_SECOND = 3_000_000
"""How fast a busy client reads and decodes our JSON, for the margin (pygls's client, on the
bench machine under load: 2.6-50 MB/s for the 0.4-0.9 MB evidence publications, median 9)."""


def output_margin(size: int) -> float:
    """Seconds a background message of ``size`` bytes must be written ahead of a foreground
    job's output, so the client has read it by then: 50 ms plus its reading time at
    :data:`CLIENT_READ_BYTES_PER_SECOND`, at most 140 ms.
    """
    least, most = OUTPUT_MARGIN_SECONDS
    return min(most, least + size / CLIENT_READ_BYTES_PER_SECOND)


class Foreground:
    """Foreground before background: the one priority rule of the session.

    A *foreground job* is work the writer is waiting for: a draft check and its publication,
    a hover, a completion, a code action (every request :meth:`Session.guard` runs with
    ``foreground=True``). It holds the gate from :meth:`hold` until its asyncio task ends.
    *Background work* — the startup walk and scans, the evidence refresh, the full-text fill,
    the heap trim — calls :meth:`pause` (worker thread, blocking) or :meth:`wait` (loop,
    awaited) at its natural unit boundaries (a folder of the walk, a few files read, one
    evidence file, one full-text transaction): while any foreground job is held, or ended less
    than :data:`FOREGROUND_GRACE_SECONDS` ago, the call waits. A waiting thread blocks on a
    condition, so under the GIL the foreground thread gets the whole interpreter (SQLite
    statements release it anyway). Bound: no call waits longer than
    :data:`BACKGROUND_MAX_WAIT_SECONDS`; once one waited that long, background work runs
    unpaused for :data:`BACKGROUND_QUANTUM_SECONDS` (at least about 9 % of the time under
    back-to-back foreground jobs), so it cannot starve.

    The output lane: a draft check scheduled by a keystroke is *expected* from then on
    (:meth:`expect`); the stdout thread calls :meth:`pause_output` before each background
    message (an evidence file's publication), which also waits while an expected check is due
    within the message's :func:`output_margin`, so the client has read it before the draft's
    publication arrives.

    Bulk work — the evidence refresh, the full-text fill, the heap's settle: work sized by the
    corpus that nobody waits for at that moment — calls :meth:`pause_bulk` (or awaits
    ``wait(bulk=True)``), which also waits while an expected check is due within
    :data:`BULK_LEAD_SECONDS`: the end of a keystroke's debounce and its check run on a quiet
    interpreter. Scans (an evidence edit the writer waits to see, the startup walk) call
    :meth:`pause` and do not wait for expected checks. Same bound as :meth:`pause`; and since
    an expected check is due within the lead for at most the lead (then it runs, held, or it
    was replaced by a later keystroke's, due later), bulk work runs during the first
    50 ms of every debounce however fast the writer types.

    Thread-safe: :meth:`hold`, :meth:`expect` and :meth:`wait` run on the loop, :meth:`pause`,
    :meth:`pause_bulk`, :meth:`pause_output` and :meth:`busy` anywhere. Times are
    ``time.monotonic()`` seconds.
    """

    def __init__(self, grace: float = FOREGROUND_GRACE_SECONDS, max_wait: float = BACKGROUND_MAX_WAIT_SECONDS,
                 quantum: float = BACKGROUND_QUANTUM_SECONDS, bulk_lead: float = BULK_LEAD_SECONDS) -> None:
        self.grace = grace
        self.max_wait = max_wait
        self.quantum = quantum
        self.bulk_lead = bulk_lead
        self._cond = threading.Condition()
        self._held: set[asyncio.Task[Any]] = set()
        self._expected: dict[asyncio.Task[Any], float] = {}
        """Scheduled foreground jobs not started yet (a check in its typing debounce) -> when
        they are due (monotonic)."""
        self._ended = -math.inf
        """When the last foreground job ended (monotonic)."""
        self._free_until = -math.inf
        """Background runs unpaused until then (the starvation bound was reached)."""
        self._waiters: list[asyncio.Future[None]] = []
        self.paused_seconds = 0.0
        """Total time background work spent waiting (for ``grounding/status`` and tests)."""
        self.forced = 0
        """How many times the starvation bound let background work run."""
        self.waiting = 0
        """Background units waiting at a boundary now (threads and coroutines)."""

    # -- foreground side (loop) ------------------------------------------------------------

    def hold(self, task: asyncio.Task[Any] | None = None) -> None:
        """Mark ``task`` (default: the current task) as a foreground job until it ends;
        holding a task twice is holding it once.
        """
        task = task if task is not None else asyncio.current_task()
        if task is None or task.done():
            return
        with self._cond:
            if task in self._held:
                return
            self._held.add(task)
        task.add_done_callback(self._release)

    def expect(self, task: asyncio.Task[Any], delay: float = 0.0) -> None:
        """Mark ``task`` as a foreground job due in ``delay`` seconds (a draft check waiting
        out the typing debounce) until it ends. It holds only the output lane
        (:meth:`pause_output`) and bulk work (:meth:`pause_bulk`), as its due time nears:
        other background work (a scan) goes on during a debounce.
        """
        if task.done():
            return
        with self._cond:
            known = task in self._expected
            self._expected[task] = time.monotonic() + delay
        if not known:
            task.add_done_callback(self._unexpect)

    def _unexpect(self, task: asyncio.Task[Any]) -> None:
        with self._cond:
            self._expected.pop(task, None)
            self._cond.notify_all()
        self._wake()

    def _release(self, task: asyncio.Task[Any]) -> None:
        with self._cond:
            self._held.discard(task)
            if self._held:
                return
            self._ended = time.monotonic()
            self._cond.notify_all()
        self._wake()

    def _wake(self) -> None:
        """Let every coroutine waiting in :meth:`wait` look again (loop)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def jobs(self) -> int:
        """How many foreground jobs are held now."""
        with self._cond:
            return len(self._held)

    # -- background side -------------------------------------------------------------------

    def busy(self) -> bool:
        """True while background work should wait (a foreground job held or just ended)."""
        with self._cond:
            return self._busy_locked(time.monotonic()) > 0

    def _busy_locked(self, now: float, margin: float | None = None) -> float:
        """0 when background may run now; else how long to wait at most before looking again
        (``math.inf``: until a job ends). ``margin`` (the output lane): an expected job due
        within that many seconds counts as held.
        """
        if now < self._free_until:
            return 0
        if self._held:
            return math.inf
        if margin is not None and self._expected:
            soonest = min(self._expected.values())
            if soonest - margin <= now:
                return math.inf  # until it starts (then it is held) or ends
        return max(0.0, self._ended + self.grace - now)

    def pause(self) -> float:
        """Wait (blocking; a worker thread's unit boundary) while :meth:`busy`, at most
        :attr:`max_wait`; returns the seconds waited. Never call it on the loop.
        """
        return self._pause(None)

    def pause_bulk(self) -> float:
        """:meth:`pause` for bulk work (the evidence refresh, the full-text fill): it also
        waits while an *expected* job is due within :attr:`bulk_lead` seconds (a keystroke's
        check near the end of its debounce) until that job ends. Same bound and quantum as
        :meth:`pause`.
        """
        return self._pause(self.bulk_lead, quantum=True)

    def pause_output(self, size: int = 0) -> float:
        """:meth:`pause` for the output lane (the stdout thread, before it writes one
        background message of ``size`` bytes, such as an evidence file's publication): it also
        waits while an *expected* job (:meth:`expect`: a keystroke's check in its debounce) is
        due within :func:`output_margin` of the message, the time a client needs to read it:
        the draft's publication never reaches the client while it still parses megabytes of
        evidence diagnostics. Same bound as :meth:`pause`, but reaching it lets this one
        message go, without the quantum that frees all background work.
        """
        return self._pause(output_margin(size))

    def _pause(self, margin: float | None, quantum: bool = False) -> float:
        start = now = time.monotonic()
        with self._cond:
            self.waiting += 1
            while (left := self._busy_locked(now, margin)) > 0:
                bound = start + self.max_wait - now
                if bound <= 0:
                    if margin is None or quantum:
                        self._forced_locked(now)
                    else:  # the output lane lets only this message go, not every background unit
                        self.forced += 1
                    break
                self._cond.wait(min(left, bound))
                now = time.monotonic()
            self.waiting -= 1
            waited = now - start
            self.paused_seconds += waited
        return waited

    async def wait(self, bulk: bool = False) -> float:
        """:meth:`pause` for a coroutine on the loop (background tasks between worker calls);
        ``bulk``: :meth:`pause_bulk`'s rule.
        """
        loop = asyncio.get_running_loop()
        start = now = time.monotonic()
        margin = self.bulk_lead if bulk else None
        while True:
            with self._cond:
                left = self._busy_locked(now, margin)
                bound = start + self.max_wait - now
                if left > 0 and bound <= 0:
                    self._forced_locked(now)
                if left <= 0 or bound <= 0:
                    waited = now - start
                    self.paused_seconds += waited
                    return waited
            waiter = loop.create_future()
            self._waiters.append(waiter)
            with self._cond:
                self.waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter), min(left, bound))
            finally:
                with self._cond:
                    self.waiting -= 1
            now = time.monotonic()

    def _forced_locked(self, now: float) -> None:
        self._free_until = now + self.quantum
        self.forced += 1
        self._cond.notify_all()  # every waiting unit may go


# --------------------------------------------------------------------------- file lines


class FileLines:
    """Lines (no terminators) of files on disk, by path and mtime; a bounded LRU shared by the
    worker threads (thread-safe). Used only where a finding's related location does not carry
    its line text (draft findings naming evidence lines). A file the scanner would refuse (a
    FIFO, device or folder; over :data:`~grounding_core.scan.MAX_EVIDENCE_BYTES`) or one that
    changes while read has no lines: ``()``. With ``inside`` set (the evidence root, absolute and
    resolved; :meth:`Session.install` sets it), a path whose real path (symlinks resolved) is
    outside it has no lines either (SPEC §2: nothing outside the workspace is read).
    """

    def __init__(self, size: int = 256, inside: Path | None = None) -> None:
        self.size = size
        self.inside = inside
        self._lines: dict[tuple[str, int], tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def __call__(self, path: str) -> tuple[str, ...]:
        try:
            key = (path, os.stat(path).st_mtime_ns)
        except OSError:
            return ()
        with self._lock:
            found = self._lines.pop(key, None)
            if found is not None:
                self._lines[key] = found  # most recently used last
                return found
        try:  # as the scanner reads: a FIFO (opened without blocking) or a file over 64 MiB is never read
            if self.inside is None:
                data, _ = read_stable(path, attempts=1)
            else:
                data, _ = read_inside(self.inside, Path(path), attempts=1)
        except (OSError, Unstable):
            return ()
        text = data.decode("utf-8", errors="replace")
        found = tuple(split_lines(text[1:] if text.startswith("\ufeff") else text))
        with self._lock:
            self._lines[key] = found
            while len(self._lines) > self.size:
                del self._lines[next(iter(self._lines))]
        return found


class RelatedLocations:
    """Related locations already converted (core ``Location`` -> LSP ``Location``), shared by
    the reader threads, for one workspace.

    A draft's conflict findings name the same evidence lines on every keystroke and after
    every index change (on Debian's copyright files about 1,300 distinct lines, each needing
    its file's line text for the range: 0.3 s of CPU per conversion), so each is converted
    once. A converted location depends on its file's line only: a scan that re-read files
    forgets theirs (:meth:`forget`); a new workspace (``epoch``: settings, another root)
    starts over, and so does reaching ``server.convert.MAX_CONVERTED``.
    """

    def __init__(self) -> None:
        self._epoch: int | None = None
        self._converted: dict[Location, types.Location] = {}
        self._lists: dict[tuple[Location, ...], list[types.DiagnosticRelatedInformation]] = {}
        self._lock = threading.Lock()

    def for_view(self, epoch: int) -> dict[Location, types.Location]:
        """The conversions for the workspace of ``epoch`` (a view's ``epoch``)."""
        with self._lock:
            if epoch != self._epoch:
                self._epoch, self._converted, self._lists = epoch, {}, {}
            return self._converted

    def lists_for_view(self, epoch: int) -> dict[tuple[Location, ...], list[types.DiagnosticRelatedInformation]]:
        """Whole converted ``relatedInformation`` lists (``server.convert.lsp_diagnostics``'s
        ``related_lists``) for the workspace of ``epoch``; same lifetime as :meth:`for_view`.
        """
        self.for_view(epoch)
        with self._lock:
            return self._lists

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the conversions of locations in ``paths`` (as ``Location.path`` names them,
        relative to the workspace root): their files changed. Workers still holding the
        previous mapping fill that one, which is dropped.
        """
        with self._lock:
            if not self._converted:
                return  # (``paths`` is not even listed: a first scan re-reads every file)
            gone = set(paths)
            self._converted = {k: v for k, v in list(self._converted.items()) if k.path not in gone}
            self._lists = {k: v for k, v in list(self._lists.items()) if not any(r.path in gone for r in k)}


# -------------------------------------------------------------------------------- tasks


class Tasks:
    """Named background tasks of the session (strong references; failures logged)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def start(self, name: str, coro: Coroutine[Any, Any, Any], replace: bool = True) -> asyncio.Task[Any]:
        """Run ``coro`` as the task ``name``; a running task of that name is cancelled first
        (``replace``) or kept, and ``coro`` closed unrun (``replace=False``).
        """
        old = self._tasks.get(name)
        if old is not None and not old.done():
            if not replace:
                coro.close()
                return old
            old.cancel()
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks[name] = task
        task.add_done_callback(lambda t: self._done(name, t))
        return task

    def running_prefixed(self, prefix: str) -> list[asyncio.Task[Any]]:
        """The running tasks whose name starts with ``prefix``."""
        return [t for name, t in self._tasks.items() if name.startswith(prefix) and not t.done()]

    def running(self, name: str) -> asyncio.Task[Any] | None:
        task = self._tasks.get(name)
        return task if task is not None and not task.done() else None

    def cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        self._tasks.clear()

    def _done(self, name: str, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(name) is task:
            del self._tasks[name]
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            logger.error("background task %s failed", name, exc_info=exc)


# ------------------------------------------------------------------------ frozen values


@dataclass(frozen=True)
class IndexView:
    """One index snapshot with what its answers depend on; safe to hand to any thread.

    ``generation`` numbers the views of one session (it changes whenever answers may change);
    ``read_text`` reads a UTF-8 file relative to the workspace root (context logs, drafts on
    disk) and ``discover_drafts`` lists the drafts under it; neither touches the store.
    """

    generation: int
    snapshot: IndexSnapshot
    config: Config
    today: dt.date
    epoch: int
    """The :attr:`Session.epoch` of the workspace the snapshot comes from."""
    read_text: Callable[[str], str | None] = field(compare=False)
    discover_drafts: Callable[[], list[str]] = field(compare=False)

    def root_uri(self, rel: str) -> str:
        """The file URI of a path relative to the workspace root."""
        return from_fs_path(str(self.config.root / rel)) or ""

    def evidence_uri(self, rel: str) -> str:
        """The file URI of a path relative to the evidence root."""
        return from_fs_path(str(self.config.evidence_root / rel)) or ""


@dataclass(frozen=True, slots=True)
class ResultKey:
    """The provenance of a result: the document's version and text hash and the index
    generation, recorded when the computation started (see :meth:`Session.is_fresh`).
    """

    version: int | None
    text_hash: str
    generation: int


@dataclass(frozen=True, slots=True)
class CheckJob:
    """Everything one draft check reads, captured on the loop (:meth:`Session.capture`)."""

    document: DocumentSnapshot
    rel: str
    view: IndexView
    draft: ParsedDraft | None = None
    """A parse of exactly ``document.text`` made by an earlier request, reused when given."""

    @property
    def key(self) -> ResultKey:
        return ResultKey(self.document.version, self.document.text_hash, self.view.generation)


@dataclass(frozen=True, slots=True)
class DraftResult:
    """One checked draft: the document snapshot it was computed for (convert its spans with
    ``document.lines``), the parse, the report and its :class:`ResultKey`.
    """

    uri: str
    key: ResultKey
    document: DocumentSnapshot
    draft: ParsedDraft
    report: DraftReport
    rel: str


def run_check(job: CheckJob) -> DraftResult:
    """Parse and check one captured draft (worker thread; pure over the job).

    An unexpected exception (a bug, not bad input) becomes the result's one finding, as in
    ``grounding check`` (:func:`grounding.cli.internal_error_report`: GR101 at 1:1, status
    abstain), logged with its traceback: the writer sees why the draft is not verified
    instead of stale squiggles, and the other drafts go on.
    """
    try:
        return _run_check(job)
    except Exception as exc:
        from grounding.cli import internal_error_report

        logger.exception("checking %s failed", job.rel)
        draft = job.draft or ParsedDraft(kind=draft_kind(job.rel), text=job.document.text,
                                         lines=list(job.document.lines))
        report = internal_error_report(job.rel, exc)
        return DraftResult(job.document.uri, job.key, job.document, draft, report, job.rel)


def _run_check(job: CheckJob) -> DraftResult:
    view = job.view
    if job.draft is not None:
        report = check_parsed(job.draft, job.rel, view.snapshot, view.config, view.today, view.read_text)
        return DraftResult(job.document.uri, job.key, job.document, job.draft, report, job.rel)
    checked = check_text(job.document.text, job.rel, view.snapshot, view.config, view.today, view.read_text)
    return DraftResult(job.document.uri, job.key, job.document, checked.draft, checked.report, job.rel)


# ------------------------------------------------------------------------------ session


class Session:
    """The state of one server session, owned by the event loop (see the module docstring)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.documents: GroundingWorkspace | None = None
        self.capabilities = types.ClientCapabilities()
        self.initialization_options: Any = None
        self.root: Path | None = None
        """The workspace folder (set at ``initialize``); None when the client opened none."""
        self.settings: dict[str, Any] = {}
        """Editor settings last read (``initializationOptions`` + ``workspace/configuration``)."""
        self.workspace: Workspace | None = None
        self.epoch = 0
        """Changes whenever :attr:`workspace` is replaced (a scan of an older one is dropped)."""
        self.view: IndexView | None = None
        self._generation = 0
        self.ready = asyncio.Event()
        """Set once the first view exists, or when there is no workspace to index."""
        self.results: dict[str, DraftResult] = {}
        self._parses: dict[str, tuple[str, ParsedDraft]] = {}
        self._inflight: dict[tuple[str, ResultKey], asyncio.Future[DraftResult]] = {}
        self.tasks = Tasks()
        self.readers = Workers("grounding-read", READER_THREADS)
        self.foreground = Foreground()
        """Foreground before background: jobs hold it, background work pauses on it."""
        self.writer = Workers("grounding-index", 1)
        self.shutdown_requested = False
        self.index_passes = 0
        self.scan_pending: set[str] | None = None
        """Evidence paths the watcher saw change since the last scan started (relative to the
        evidence root); None asks for a full walk (so the first scan is one)."""
        self.scan_wanted = False
        self.file_lines = FileLines()
        """Lines of files on disk for related locations (see :class:`FileLines`)."""
        self.related_locations = RelatedLocations()
        """Converted related locations of draft diagnostics, per view (see the class)."""
        self.index_status: dict[str, Any] = {}
        """Where the index lives, for ``grounding/status``: ``Store.describe()`` (backend,
        location, role) plus ``fallback`` (why a shared index was replaced by the local SQLite
        one, else None); kept by the workspace feature."""
        self.feature_state: dict[str, Any] = {}
        """Per-feature bookkeeping owned by the loop (e.g. the evidence diagnostics published),
        keyed by the feature module's name."""

    # -- client side --------------------------------------------------------------------

    def attach(self, params: types.InitializeParams, documents: GroundingWorkspace) -> None:
        """Take what ``initialize`` decided: the documents (with the negotiated codec), the
        client's capabilities and options, and the workspace folder (the first one, else
        ``rootUri``).
        """
        self.documents = documents
        self.capabilities = params.capabilities
        self.initialization_options = params.initialization_options
        folders = documents.folders
        uri = next(iter(folders.values())).uri if folders else documents.root_uri
        path = to_fs_path(uri) if uri else None
        self.root = Path(path) if path else None

    @property
    def codec(self) -> PositionCodec:
        """The negotiated codec (UTF-16 before ``initialize``)."""
        return self.documents.position_codec if self.documents is not None else PositionCodec()

    def capability(self, path: str, default: Any = None) -> Any:
        """A client capability by dotted path (``"workspace.apply_edit"``), else ``default``."""
        return get_capability(self.capabilities, path, default)

    def document(self, uri: str) -> DocumentSnapshot | None:
        """A frozen view of the open document ``uri`` (None when it is not open)."""
        if self.documents is None:
            return None
        doc = self.documents.open_document(uri)
        return doc.snapshot() if doc is not None else None

    def open_uris(self) -> list[str]:
        return list(self.documents.text_documents) if self.documents is not None else []

    # -- the workspace and its index ----------------------------------------------------

    @property
    def config(self) -> Config | None:
        return self.workspace.config if self.workspace is not None else None

    def install(self, workspace: Workspace) -> None:
        """Make ``workspace`` the session's; scans of the previous one are dropped."""
        self.workspace = workspace
        self.file_lines = FileLines(inside=workspace.config.evidence_root)
        self.epoch += 1

    def set_snapshot(self, snapshot: IndexSnapshot) -> IndexView:
        """Make ``snapshot`` (of the current workspace's store) the current index, with the
        current configuration, as a new generation; return its view.
        """
        assert self.workspace is not None
        ws = self.workspace
        self._generation += 1
        self.view = IndexView(self._generation, snapshot, ws.config, ws.config.today_or(), self.epoch,
                              ws.read_text, ws.discover_drafts)
        self.ready.set()
        return self.view

    def current_view(self) -> IndexView | None:
        """The current view; a new generation of it when the date changed since it was made
        (activity depends on today, SPEC §3).
        """
        view = self.view
        if view is not None and view.config.today is None and dt.date.today() != view.today:
            self._generation += 1
            view = self.view = replace(view, generation=self._generation, today=dt.date.today())
        return view

    def no_workspace(self) -> None:
        """There is nothing to index (no folder open): requests stop waiting for one."""
        self.ready.set()

    # -- URIs ---------------------------------------------------------------------------

    def draft_rel(self, uri: str) -> str | None:
        """The draft path relative to the root when ``uri`` is a draft (SPEC §2), else None."""
        ws = self.workspace
        path = _fs_path(uri)
        if ws is None or path is None:
            return None
        rel = _relative(path, ws.config.root)
        return rel if rel is not None and ws.is_draft(rel) else None

    def evidence_rel(self, uri: str) -> str | None:
        """The path relative to the evidence root when ``uri`` is an evidence file, else None."""
        config = self.config
        path = _fs_path(uri)
        if config is None or path is None:
            return None
        rel = _relative(path, config.evidence_root)
        if rel is None or any(part in _NEVER_EVIDENCE for part in rel.split("/")):
            return None  # e.g. a version copy under .grounding/versions with evidence = "."
        return rel if config.evidence_matches(rel) else None

    def under_evidence(self, uri: str) -> bool:
        """True when ``uri`` is a file path inside the evidence root (matching or not)."""
        config = self.config
        path = _fs_path(uri)
        return config is not None and path is not None and _relative(path, config.evidence_root) is not None

    def evidence_uri(self, rel: str) -> str:
        """The file URI of a path relative to the evidence root."""
        assert self.config is not None
        return from_fs_path(str(self.config.evidence_root / rel)) or ""

    def root_uri(self, rel: str) -> str:
        """The file URI of a path relative to the workspace root."""
        assert self.config is not None
        return from_fs_path(str(self.config.root / rel)) or ""

    # -- freshness ----------------------------------------------------------------------

    def capture(self, uri: str) -> CheckJob | None:
        """Freeze what a check of the open draft ``uri`` reads: its text now and the current
        view. None when ``uri`` is not an open draft or no view exists yet.
        """
        view = self.current_view()
        document = self.document(uri)
        if view is None or document is None:
            return None
        rel = self.draft_rel(uri)
        if rel is None:
            return None
        return CheckJob(document, rel, view, self.parsed(uri, document.text_hash))

    def key_now(self, uri: str) -> ResultKey | None:
        """The key a fresh result of ``uri`` must have right now (None: not open, no view)."""
        view = self.current_view()
        if view is None or self.documents is None:
            return None
        doc = self.documents.open_document(uri)
        if doc is None:
            return None
        return ResultKey(doc.version, doc.text_hash, view.generation)

    def is_fresh(self, result: DraftResult) -> bool:
        """The freshness rule: ``result`` was computed for the open document's current version
        and text against the current index generation.
        """
        return self.key_now(result.uri) == result.key

    def fresh_result(self, uri: str) -> DraftResult | None:
        """The stored result of ``uri`` when it is fresh."""
        result = self.results.get(uri)
        return result if result is not None and self.is_fresh(result) else None

    async def current_result(self, uri: str) -> DraftResult | None:
        """A fresh result of the open draft ``uri``: the stored one, or a check of its current
        text in a worker (one computation per key, shared by concurrent callers). Waits for
        the first index view. None when ``uri`` is not an open draft.
        """
        await self.ready.wait()
        self.foreground.hold()  # the calling task (a draft check, a request) until it ends
        job = self.capture(uri)
        if job is None:
            return None
        stored = self.results.get(uri)
        if stored is not None and stored.key == job.key:
            return stored
        return await self.check(job)

    async def check(self, job: CheckJob) -> DraftResult:
        """Run ``job`` in a worker (deduplicated by key); a result still fresh when it arrives
        is stored as the draft's latest.
        """
        self.foreground.hold()  # the calling task (a draft check, a request) until it ends
        flight = (job.document.uri, job.key)
        future = self._inflight.get(flight)
        if future is None:
            future = asyncio.ensure_future(self.readers.run(run_check, job))
            self._inflight[flight] = future
            future.add_done_callback(lambda _f: self._inflight.pop(flight, None))
        result = await asyncio.shield(future)
        if self.is_fresh(result):
            self.results[result.uri] = result
        return result

    def forget(self, uri: str) -> DraftResult | None:
        """Drop the stored result and parse of ``uri`` (the document closed); returns the result."""
        self._parses.pop(uri, None)
        return self.results.pop(uri, None)

    def parsed(self, uri: str, text_hash: str) -> ParsedDraft | None:
        """The parse of the open draft ``uri`` for the text with ``text_hash``, when one was
        made: by the stored result of that text (an index change re-checks an unchanged
        draft: the parse depends on the text and the draft kind only, never on the index), or
        by a request (hover and definition parse before any check exists, e.g. while indexing).
        """
        result = self.results.get(uri)
        if result is not None and result.document.text_hash == text_hash and result.rel == self.draft_rel(uri):
            return result.draft
        found = self._parses.get(uri)
        return found[1] if found is not None and found[0] == text_hash else None

    def remember_parse(self, uri: str, text_hash: str, draft: ParsedDraft) -> None:
        """Keep one parse per open draft (the latest text's) for :meth:`parsed`."""
        if self.documents is not None and self.documents.open_document(uri) is not None:
            self._parses[uri] = (text_hash, draft)

    # -- the error guard ----------------------------------------------------------------

    async def guard(self, name: str, fn: Callable[..., Awaitable[T]], *args: Any,
                    foreground: bool = False) -> T | None:
        """``await fn(self, *args)``; a failure is logged and answered with None.
        ``foreground``: the request is a foreground job (:class:`Foreground`) until it ends.
        """
        if foreground and self.ready.is_set():  # (before the first view a request may wait for
            self.foreground.hold()              # the background work that makes it: no hold)
        try:
            return await fn(self, *args)
        except (asyncio.CancelledError, JsonRpcException):
            raise
        except Exception:
            logger.exception("%s failed", name)
            return None

    def guard_sync(self, name: str, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(self, *args)`` on the loop; a failure is logged and answered with None."""
        try:
            result = fn(self, *args)
        except JsonRpcException:
            raise
        except Exception:
            logger.exception("%s failed", name)
            return None
        if inspect.isawaitable(result):  # a coroutine by mistake: run it guarded
            self.tasks.start(f"{name}-{id(result)}", self.guard(name, _awaited, result))
            return None
        return result


async def _awaited(session: Session, awaitable: Awaitable[T]) -> T:
    return await awaitable


def _fs_path(uri: str) -> Path | None:
    """The file-system path of a ``file:`` URI, or None (not a file URI, or one holding a NUL
    such as ``%00``, which no file name can hold).
    """
    path = to_fs_path(uri)
    return Path(path) if path and "\0" not in path else None


def _relative(path: Path, base: Path) -> str | None:
    """``path`` relative to ``base`` as a ``/``-path (symlinks resolved when needed), or None."""
    try:
        full = Path(os.path.abspath(path))
        if not full.is_relative_to(base):
            full = full.resolve()
        return full.relative_to(base).as_posix()
    except (ValueError, OSError):
        return None


__all__ = ["BULK_LEAD_SECONDS", "DEBOUNCE_SECONDS", "OUTPUT_MARGIN_SECONDS", "SWITCH_INTERVAL_SECONDS",
           "CheckJob", "Client", "DraftResult", "FileLines", "Foreground", "IndexView", "ResultKey", "Session",
           "Tasks", "Workers", "output_margin", "run_check"]
