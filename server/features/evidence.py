"""Workspace start-up, evidence indexing with progress, and watching the evidence folder.

SPEC §10: index at start-up in the background with work-done progress; watch the evidence
root with watchfiles (any event -> one coalesced rescan after a ~200 ms quiet period; the
rescan re-stats and re-hashes, so adds, modifies, deletes and atomic saves all land); also
accept ``workspace/didChangeWatchedFiles``, registered dynamically when the client supports
it. If the OS watcher cannot start (watch limit, unsupported filesystem) it falls back to
polling with one warning. Evidence is read from disk, never from editor buffers.

Testing hook: with the environment variable ``GROUNDING_FORCE_WATCH_ERROR`` set (any
non-empty value) the OS watcher fails at start as if the inotify watch limit were reached,
so the polling fallback can be exercised end to end (tests/robustness/test_storm.py).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.uris import to_fs_path

if TYPE_CHECKING:
    from server.app import GroundingServer, ServerState

logger = logging.getLogger(__name__)

QUIET_PERIOD_MS = 200
FORCE_WATCH_ERROR_ENV = "GROUNDING_FORCE_WATCH_ERROR"
"""Set to make the OS watcher fail at start (a testing hook; see the module docstring)."""
TEMP_SUFFIXES = ("~", ".swp", ".swx", ".tmp", ".part", ".crdownload")


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine
    watcher: dict[str, Any] = {"stop": None, "task": None}

    @state.on_initialized
    async def start(ls: GroundingServer) -> None:
        root = _workspace_root(ls)
        if root is None:
            ls.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning,
                "Grounding: open a folder (the workspace root holding grounding.toml) to check drafts."))
            engine.indexed.set()
            return
        settings = await _settings(ls)
        message = engine.open_workspace(root, settings)
        if message:
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, message))
        _warm_tokenizer(engine.workspace.config.encoding if engine.workspace else "o200k_base")
        # Watch first, then index: a file saved while the initial scan runs (after the scan
        # read it) reaches the watcher, whose rescan waits for this one (Engine.reindex).
        # The yield lets the watcher task take its first step (watchfiles sets up the OS
        # watches synchronously there) before the scan thread reads any file.
        _start_watcher(ls, watcher)
        await asyncio.sleep(0)
        await _initial_index(ls)
        await _register_watched_files(ls)

    @state.on_shutdown
    async def stop(ls: GroundingServer) -> None:
        if watcher["stop"] is not None:
            watcher["stop"].set()
        task = watcher["task"]
        if task is not None:
            task.cancel()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: GroundingServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(engine.evidence_rel(change.uri) is not None or _under_evidence(ls, change.uri)
               for change in params.changes):
            engine.request_reindex(QUIET_PERIOD_MS / 1000)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(ls: GroundingServer, params: types.DidChangeConfigurationParams) -> None:
        if engine.workspace is None:
            return
        settings = await _settings(ls, params.settings)
        message = engine.open_workspace(engine.workspace.config.root, settings)
        if message:
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, message))
        engine.request_reindex()


def _warm_tokenizer(encoding: str) -> None:
    """Build the tiktoken encoding in a worker thread now (about 2 s for o200k_base), so the
    first draft check does not pay for it while the writer waits for diagnostics.
    """
    from grounding_core.budget import get_encoding

    def warm() -> None:
        try:
            get_encoding(encoding)
        except Exception:  # reported by the first check that needs it
            logger.exception("loading the %s tokenizer failed", encoding)

    threading.Thread(target=warm, name="grounding-tokenizer", daemon=True).start()


def _workspace_root(ls: GroundingServer) -> Path | None:
    folders = ls.workspace.folders
    uri = next(iter(folders.values())).uri if folders else ls.workspace.root_uri
    if not uri:
        return None
    path = to_fs_path(uri)
    return Path(path) if path else None


async def _settings(ls: GroundingServer, pushed: Any = None) -> dict[str, Any]:
    """Settings: ``initializationOptions``, then the client's ``grounding`` section."""
    settings: dict[str, Any] = {}
    options = getattr(ls.state, "initialization_options", None)
    if isinstance(options, dict):
        settings.update(options.get("grounding", options))
    if isinstance(pushed, dict) and isinstance(pushed.get("grounding"), dict):
        settings.update(pushed["grounding"])
    if get_capability(ls.client_capabilities, "workspace.configuration", False):
        try:
            items = await asyncio.wait_for(ls.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section="grounding")])), timeout=2)
            if items and isinstance(items[0], dict):
                settings.update({k: v for k, v in items[0].items() if v not in (None, "")})
        except Exception:  # a client that answers badly or slowly: keep what we have
            logger.info("workspace/configuration unavailable; using initializationOptions")
    return settings


async def _initial_index(ls: GroundingServer) -> None:
    engine = ls.state.engine
    token = str(uuid.uuid4())
    use_progress = bool(get_capability(ls.client_capabilities, "window.work_done_progress", False))
    loop = asyncio.get_running_loop()
    if use_progress:
        try:
            await ls.work_done_progress.create_async(token)
            ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="Grounding: indexing evidence", percentage=0, cancellable=False))
        except Exception:
            use_progress = False
    last = {"pct": -1}

    def progress(done: int, total: int, path: str) -> None:
        pct = int(done * 100 / max(total, 1))
        if use_progress and pct >= last["pct"] + 5:
            last["pct"] = pct
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, types.WorkDoneProgressReport(
                message=f"{done}/{total} {path}", percentage=pct))

    result = await engine.reindex(progress)
    if use_progress:
        docs = result.snapshot.stats(engine.today()).documents if result else 0
        ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=f"{docs} documents indexed"))


def _start_watcher(ls: GroundingServer, watcher: dict[str, Any]) -> None:
    engine = ls.state.engine
    if engine.workspace is None:
        return
    root = engine.workspace.config.evidence_root
    if not root.is_dir():
        return
    stop = asyncio.Event()
    watcher["stop"] = stop
    watcher["task"] = asyncio.get_running_loop().create_task(_watch(ls, root, stop))


def _wanted(change: Any, path: str) -> bool:
    name = Path(path).name
    if name.startswith(".#") or name.endswith(TEMP_SUFFIXES) or "/.git/" in path or "/.grounding/" in path:
        return False
    return True


async def _watch(ls: GroundingServer, root: Path, stop: asyncio.Event) -> None:
    """Watchfiles loop; falls back to polling once if the OS watcher fails."""
    from watchfiles import awatch

    engine = ls.state.engine
    polling = False
    while not stop.is_set():
        try:
            if not polling and os.environ.get(FORCE_WATCH_ERROR_ENV):
                raise OSError(errno.ENOSPC, f"OS file watch limit reached ({FORCE_WATCH_ERROR_ENV})")
            async for _changes in awatch(root, watch_filter=_wanted, debounce=QUIET_PERIOD_MS,
                                         step=50, stop_event=stop, force_polling=polling,
                                         poll_delay_ms=300, recursive=True):
                engine.request_reindex()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if polling:
                logger.exception("polling the evidence folder failed; watching stopped")
                return
            polling = True
            logger.warning("file watching failed (%s); polling the evidence folder instead", exc)
            ls.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning,
                f"Grounding: cannot watch {root} ({exc}); polling for changes instead."))


async def _register_watched_files(ls: GroundingServer) -> None:
    engine = ls.state.engine
    if engine.workspace is None:
        return
    if not get_capability(ls.client_capabilities, "workspace.did_change_watched_files.dynamic_registration", False):
        return
    root = engine.workspace.config.evidence_root
    pattern = types.RelativePattern(base_uri=root.as_uri(), pattern="**/*")
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[
            types.Registration(
                id="grounding-evidence-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[types.FileSystemWatcher(glob_pattern=pattern)]),
            )]))
    except Exception:
        logger.info("the client refused the file watcher registration")


def _under_evidence(ls: GroundingServer, uri: str) -> bool:
    engine = ls.state.engine
    if engine.workspace is None:
        return False
    path = to_fs_path(uri)
    return bool(path) and Path(path).is_relative_to(engine.workspace.config.evidence_root)
