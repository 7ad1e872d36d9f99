"""The Grounding engine inside the language server: workspace, index state, draft reports.

Owned by the event loop. Heavy work (scanning, hashing, parsing, checking, FTS) runs in
worker threads on immutable inputs: a :class:`DocumentSnapshot` and the current
:class:`~grounding_core.index.IndexSnapshot`, which indexing replaces by swapping the reference.

Features reach the engine as ``state.engine`` (``server/app.py`` builds it) and use:

- :meth:`Engine.draft_rel` / :meth:`Engine.evidence_rel` to classify a URI;
- :attr:`Engine.state` (the current index state) and :meth:`Engine.today`;
- :meth:`Engine.report_for` (the latest report of an open draft, or None);
- :meth:`Engine.check_snapshot` (pure check of a snapshot, call it in a thread);
- :meth:`Engine.request_reindex` (coalesced, debounced rescan of the evidence folder);
- :meth:`Engine.on_reports` / :meth:`Engine.on_index` to hear about new reports and states;
- :attr:`Engine.index_status`: where the index lives (``grounding/status`` carries it).

A shared index (PostgreSQL) is also written by other processes: a worker thread waits in
:meth:`Store.wait_for_events` (``LISTEN/NOTIFY``) and hands each change to the loop, which
swaps the state and tells the index listeners (:meth:`Store.changes_since`), exactly as after
one of its own scans, so every open draft is re-checked against the writer's new evidence.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from grounding_core.config import Config, ConfigError, load_config
from grounding_core.drafts import ParsedDraft, draft_kind, parse_draft
from grounding_core.index import EmptySnapshot, IndexSnapshot
from grounding_core.model import DraftReport, Finding
from grounding_core.store import ScanResult, Store
from grounding_core.verify import check_draft
from grounding_core.workspace import Workspace

if TYPE_CHECKING:
    from server.app import GroundingServer
    from server.documents import DocumentSnapshot

logger = logging.getLogger(__name__)

SETTINGS_KEYS = ("evidence", "encoding", "strict", "today", "index", "field_separators",
                 "meta_fields", "subject_fields", "evidence_globs", "drafts")


@dataclass(frozen=True)
class DraftResult:
    """The latest check of one open draft: its snapshot, parse and report."""

    snapshot: DocumentSnapshot
    draft: ParsedDraft
    report: DraftReport


ReportListener = Callable[[str, DraftResult | None], Awaitable[None] | None]
IndexListener = Callable[[ScanResult], Awaitable[None] | None]


class Engine:
    """Workspace + index + reports of one server session (see module docstring)."""

    def __init__(self, server: GroundingServer) -> None:
        self.server = server
        self.workspace: Workspace | None = None
        self.state: IndexSnapshot = EmptySnapshot()
        self.evidence_findings: dict[str, list[Finding]] = {}
        self.results: dict[str, DraftResult] = {}
        self.settings: dict[str, Any] = {}
        self.indexed = asyncio.Event()
        self.index_generation = 0
        self._report_listeners: list[ReportListener] = []
        self._index_listeners: list[IndexListener] = []
        self._reindex_task: asyncio.Task[None] | None = None
        self._reindex_again = False
        self._scan_lock = asyncio.Lock()  # one scan of the store at a time (see reindex)
        self.index_status: dict[str, Any] = {}
        """``{"backend", "location", "role", "fallback"}``: :meth:`Store.describe` plus, when
        a shared index could not be reached, ``fallback`` (the message; the local SQLite
        index is used instead), else None."""
        self._watch_stop: threading.Event | None = None

    # -- setup ------------------------------------------------------------------------

    def open_workspace(self, root: Path, settings: dict[str, Any]) -> str | None:
        """Load ``grounding.toml`` plus editor settings and open the index.

        Returns a message for the user when something was wrong and defaults were used.
        """
        message = None
        self.settings = {k: v for k, v in settings.items() if k in SETTINGS_KEYS and v not in (None, "")}
        try:
            config = load_config(root)
        except ConfigError as exc:
            message = f"Grounding: {exc}; using the default configuration."
            config = Config(root=root.resolve())
        if self.settings:
            try:
                config = config.with_overrides(**self.settings)
            except ConfigError as exc:
                message = f"Grounding: bad setting ({exc}); using grounding.toml and defaults."
        fallback = None
        try:
            store = Store.for_config(config)
        except Exception as exc:
            if config.index_shared:  # the team's database is away: the local SQLite file
                local = Config.__dataclass_fields__["index"].default
                fallback = (f"Grounding: cannot reach the shared index ({exc}); using the local"
                            f" index {local} until the editor restarts.")
                message = fallback
                config = config.with_overrides(index=local)
            try:
                store = Store.for_config(config)
            except Exception as exc2:  # unusable index file: keep serving from memory
                message = f"Grounding: cannot open the index ({exc2}); using an in-memory index."
                config = config.with_overrides(index=":memory:")
                store = Store.for_config(config)
        if self.workspace is not None:
            self._stop_watching()
            self.workspace.store.close()
        self.workspace = Workspace(config, store)
        self.state = store.snapshot()
        self.index_status = {**store.describe(), "fallback": fallback}
        if store.backend.shared:
            self._watch(store)
        return message

    # -- a shared index: other writers' changes -----------------------------------------------

    def _watch(self, store: Store) -> None:
        """Start the worker thread that waits for other processes' events (see module doc)."""
        loop = asyncio.get_running_loop()
        stop = self._watch_stop = threading.Event()
        known = store.event_count()

        def watch() -> None:
            nonlocal known
            while not stop.is_set():
                try:
                    count = store.wait_for_events(known, timeout=2.0)
                except Exception:  # noqa: BLE001  (a closed store; the thread ends below)
                    if stop.wait(1.0):
                        return
                    continue
                if count is not None and not stop.is_set():
                    asyncio.run_coroutine_threadsafe(self._remote_change(store, known), loop)
                    known = count

        threading.Thread(target=watch, name="grounding-index-watch", daemon=True).start()

    def _stop_watching(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    async def _remote_change(self, store: Store, known: int) -> None:
        """Another process appended events after ``known``: swap the state, tell the listeners."""
        async with self._scan_lock:
            if self.workspace is None or self.workspace.store is not store:
                return
            if getattr(self.state, "seq", -1) >= store.event_count():
                return  # our own scan's events, already handled
            result = await asyncio.to_thread(store.changes_since, getattr(self.state, "seq", known))
            self.state = result.state
            self.evidence_findings.update(result.evidence)
            self.index_status = {**store.describe(), "fallback": self.index_status.get("fallback")}
            self.index_generation += 1
            self.indexed.set()
            for listener in tuple(self._index_listeners):
                await _call(listener, result)

    @property
    def config(self) -> Config | None:
        return self.workspace.config if self.workspace else None

    def today(self) -> dt.date:
        return self.workspace.config.today_or() if self.workspace else dt.date.today()

    # -- URIs -------------------------------------------------------------------------

    def path_of(self, uri: str) -> Path | None:
        path = to_fs_path(uri)
        return Path(path) if path else None

    def draft_rel(self, uri: str) -> str | None:
        """The draft path relative to the root when ``uri`` is a draft (SPEC §2), else None."""
        if self.workspace is None:
            return None
        path = self.path_of(uri)
        if path is None:
            return None
        rel = self._rel(path, self.workspace.config.root)
        if rel is None or not self.workspace.is_draft(rel):
            return None
        return rel

    def evidence_rel(self, uri: str) -> str | None:
        """The evidence path relative to the evidence root when ``uri`` is evidence, else None."""
        if self.workspace is None:
            return None
        path = self.path_of(uri)
        if path is None:
            return None
        rel = self._rel(path, self.workspace.config.evidence_root)
        if rel is None or not self.workspace.config.evidence_matches(rel):
            return None
        return rel

    @staticmethod
    def _rel(path: Path, base: Path) -> str | None:
        try:
            full = Path(os.path.abspath(path))
            if not full.is_relative_to(base):
                full = full.resolve()
            return full.relative_to(base).as_posix()
        except (ValueError, OSError):
            return None

    def evidence_uri(self, rel: str) -> str:
        """The file URI of an evidence path relative to the evidence root."""
        assert self.workspace is not None
        return from_fs_path(str(self.workspace.config.evidence_root / rel)) or ""

    def root_uri_of(self, rel_to_root: str) -> str:
        """The file URI of a path relative to the workspace root."""
        assert self.workspace is not None
        return from_fs_path(str(self.workspace.config.root / rel_to_root)) or ""

    # -- checking ---------------------------------------------------------------------

    def check_snapshot(self, snapshot: DocumentSnapshot, rel: str,
                       state: IndexSnapshot | None = None) -> DraftResult:
        """Check one draft snapshot against ``state`` (default: the current one). Pure; thread-safe."""
        assert self.workspace is not None
        ws = self.workspace
        draft = parse_draft(snapshot.text, draft_kind(rel))
        report = check_draft(draft, state or self.state, ws.config, self.today(), rel, ws.read_text,
                             count_output=True)
        return DraftResult(snapshot, draft, report)

    def result_for(self, uri: str) -> DraftResult | None:
        """The latest result of an open draft (may lag the editor by one debounce)."""
        return self.results.get(uri)

    def report_for(self, uri: str) -> DraftReport | None:
        result = self.results.get(uri)
        return result.report if result else None

    async def set_result(self, uri: str, result: DraftResult | None) -> None:
        if result is None:
            self.results.pop(uri, None)
        else:
            self.results[uri] = result
        for listener in tuple(self._report_listeners):
            await _call(listener, uri, result)

    def on_reports(self, listener: ReportListener) -> ReportListener:
        """Call ``listener(uri, result_or_None)`` whenever a draft's result changes."""
        self._report_listeners.append(listener)
        return listener

    def on_index(self, listener: IndexListener) -> IndexListener:
        """Call ``listener(scan_result)`` after every completed scan (state already swapped)."""
        self._index_listeners.append(listener)
        return listener

    # -- indexing ---------------------------------------------------------------------

    def request_reindex(self, delay: float = 0.0) -> None:
        """Rescan the evidence folder soon; calls while a scan runs coalesce into one more."""
        if self._reindex_task is not None and not self._reindex_task.done():
            self._reindex_again = True
            return
        self._reindex_task = asyncio.get_running_loop().create_task(self._reindex_loop(delay))

    async def wait_reindexed(self) -> None:
        """Wait until no scan is pending (for commands such as ``grounding.reindex``)."""
        while self._reindex_task is not None and not self._reindex_task.done():
            await asyncio.shield(self._reindex_task)

    async def _reindex_loop(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        while True:
            self._reindex_again = False
            await self.reindex()
            if not self._reindex_again:
                return

    async def reindex(self, progress: Callable[[int, int, str], None] | None = None) -> ScanResult | None:
        """Scan now (in a thread), swap the state, then tell the index listeners.

        Scans never overlap: a call made while another scan runs (the watcher reporting a
        change during the initial index, ``grounding.reindex`` ...) waits for it and then
        scans again, so a change the running scan may have missed is picked up, and results
        reach the listeners in scan order.
        """
        async with self._scan_lock:
            if self.workspace is None:
                return None
            ws = self.workspace
            try:
                result = await asyncio.to_thread(_scan_and_index, ws, progress)
            except FileNotFoundError as exc:
                logger.warning("%s", exc)
                self.indexed.set()
                return None
            except Exception:
                logger.exception("indexing failed; keeping the previous index state")
                self.indexed.set()
                return None
            self.state = result.state
            if result.writer is None or result.full:
                self.evidence_findings = result.evidence
            else:
                self.evidence_findings.update(result.evidence)
            self.index_status = {**ws.store.describe(), "fallback": self.index_status.get("fallback")}
            self.index_generation += 1
            self.server.window_log_message(types.LogMessageParams(
                type=types.MessageType.Log,
                message=f"Grounding: index pass {self.index_generation}: {len(result.changed)} files"
                f" re-read, {len(result.events)} events appended,"
                f" {result.snapshot.stats(self.today()).documents} documents"))
            self.indexed.set()
            for listener in tuple(self._index_listeners):
                await _call(listener, result)
            return result


def _scan_and_index(ws: Workspace, progress: Callable[[int, int, str], None] | None) -> ScanResult:
    """A scan, then the full-text rows it queued (so query contexts and citation suggestions
    see every line; the server rewrite builds them in the background instead).
    """
    result = ws.scan(progress)
    ws.store.build_fts()
    return result


async def _call(listener: Callable[..., Any], *args: Any) -> None:
    try:
        value = listener(*args)
        if asyncio.iscoroutine(value) or isinstance(value, Awaitable):
            await value
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("engine listener %r failed", getattr(listener, "__qualname__", listener))
