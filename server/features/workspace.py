"""The workspace of a session: opening it, indexing it, watching it (SPEC §2, §4, §10).

- ``initialized``: read the settings (``initializationOptions``, then the client's
  ``grounding`` section), load ``grounding.toml`` and open the index in a worker thread. When
  the index already holds events its snapshot is usable at once: open drafts are checked
  against it while the rescan runs. Then the evidence root is watched, the initial scan runs
  with work-done progress, and a ``workspace/didChangeWatchedFiles`` watcher is registered
  when the client supports dynamic registration.
- Scans run one at a time in the session's writer thread. Requests made while one runs
  coalesce into one more scan; the watcher's changed paths (relative to the evidence root)
  are collected for it. After a scan whose snapshot differs, the snapshot becomes the new
  index view, open drafts are re-checked and evidence diagnostics refreshed.
- Watching: watchfiles on the evidence root (any event -> one coalesced rescan after a
  ~200 ms quiet period; adds, modifies, deletes and atomic saves all land). If the OS watcher
  cannot start (watch limit, unsupported filesystem) it polls, with one warning. Testing
  hook: the environment variable ``GROUNDING_FORCE_WATCH_ERROR`` makes the OS watcher fail.
- After a scan that queued full-text rows, they are built in the background (``query``
  contexts and citation search say "still indexing" until then). Testing hook:
  ``GROUNDING_FTS_GATE`` names a FIFO the first build waits on until a test opens it.
- ``grounding.toml`` / ``pyproject.toml`` are watched too (a stat every second, and the
  client's file events): a change rebuilds the configuration without a restart. Changed
  evidence or parse settings (evidence root and globs, index path, separators, meta and
  subject fields) reopen the index where needed and rescan; other keys (drafts globs,
  encoding, strict, today) re-check the open drafts against the same snapshot.
- ``workspace/didChangeConfiguration`` re-reads the editor settings the same way.
- A shared index (PostgreSQL, issue 17): a daemon thread waits for other processes' events
  (LISTEN/NOTIFY); each change is read in the writer thread and handled like a scan of ours
  (new view, open drafts re-checked, evidence diagnostics refreshed). If the database cannot
  be reached at start, the local ``.grounding/index.sqlite`` serves the session, named in a
  message and in ``grounding/status`` (``index.fallback``).
- ``shutdown``: watchers stop; the store is closed in the writer thread (after a running
  scan, without holding up the reply for more than a moment).
Evidence is read from disk, never from editor buffers, and never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from grounding_core.backend import WriteFailed
from grounding_core.config import LOCAL_INDEX, Config, ConfigError, check_index, load_config
from grounding_core.index import IndexSnapshot
from grounding_core.store import IndexBusy, NoEvidenceMatched, ScanResult, Store
from grounding_core.workspace import Workspace
from server.features import diagnostics, evidence
from server.session import Session

__all__ = ["QUIET_PERIOD_MS", "configuration_changed", "initialized", "request_reindex", "shutdown",
           "wait_reindexed", "watched_files"]

logger = logging.getLogger(__name__)

QUIET_PERIOD_MS = 200
UNSTABLE_RETRY_SECONDS = 0.3
"""Delay before re-reading files a scan found changing while it read them."""
CONFIG_POLL_SECONDS = 1.0
FORCE_WATCH_ERROR_ENV = "GROUNDING_FORCE_WATCH_ERROR"
"""Set to make the OS watcher fail at start (a testing hook; see the module docstring)."""
TEMP_SUFFIXES = ("~", ".swp", ".swx", ".tmp", ".part", ".crdownload")
CONFIG_FILES = ("grounding.toml", "pyproject.toml")
SETTINGS_KEYS = ("evidence", "encoding", "strict", "today", "index", "field_separators",
                 "meta_fields", "subject_fields", "evidence_globs", "drafts")
STORE_KEYS = ("index", "field_separators", "meta_fields", "subject_fields")
"""Configuration keys the index store is opened with: a change reopens it."""
SCAN_KEYS = ("evidence", "evidence_globs", *STORE_KEYS)
"""Configuration keys a scan reads: a change rescans the evidence folder."""
_REINDEX = "workspace:reindex"
_WATCH = "workspace:watch-evidence"
_CONFIG_WATCH = "workspace:watch-config"
_RETRY = "workspace:retry-unstable"
_RETIRED = "workspace:retired-stores"
_FTS = "workspace:full-text"
_BUSY = "workspace:index-busy"
_NO_EVIDENCE = "workspace:no-evidence-folder"
_NO_MATCH = "workspace:no-evidence-matched"
"""The message of a full walk whose globs matched no file (``NoEvidenceMatched``); while set,
the watcher's scans walk the whole folder again (a path scan cannot tell a wrong glob)."""
_UNWRITABLE = "workspace:index-unwritable"
_READ_ONLY = "workspace:index-read-only"
"""Set once the session said that its index is read-only (docs/decisions.md, "Index")."""
_CONFIG_KEPT = "workspace:config-kept"
"""Set while a broken ``grounding.toml`` keeps the last good configuration in effect; the
next good load says so once."""
UNWRITABLE_RETRY_SECONDS = (5.0, 300.0)
"""First and longest pause before retrying a scan that could not write the index (doubling)."""
SCAN_LOCK_WAIT_SECONDS = 2.0
"""How long the writer thread waits for another process's write lock (another ``grounding
index`` or server) before the scan is retried later."""
BUSY_RETRY_SECONDS = (0.5, 30.0)
"""First and longest pause before retrying a scan another process's lock held up (doubling)."""
FTS_GATE_ENV = "GROUNDING_FTS_GATE"
"""Tests only: a FIFO the first full-text build opens (and so waits on) before it starts."""
FTS_SLICE_SECONDS = 0.25
"""Longest the writer thread spends on full-text rows before other writes get a turn."""
FTS_SLICE_BATCH = 4
"""Contents per full-text transaction in the server: the slice's time limit is checked
between transactions, and 200 contents (the store's default) took over a second at 10k
on a loaded machine, which an evidence edit's rescan waited for; 16 of Debian's copyright
files (up to 1.5 MB each) were one unit of up to 3.5 s of CPU that did not pause for typing."""


# ------------------------------------------------------------------------ lifecycle


async def initialized(session: Session, params: types.InitializedParams) -> None:
    root = session.root
    if root is None:
        session.client.show_message(types.MessageType.Warning,
                                    "Grounding: open a folder (the workspace root holding grounding.toml)"
                                    " to check drafts.")
        session.no_workspace()
        return
    settings = await read_settings(session)
    await apply_settings(session, settings, rescan=False)
    if session.workspace is None:
        session.no_workspace()
        return
    _warm_tokenizer(session.workspace.config.encoding)
    # Watch first, then index: a file saved while the initial scan runs (after the scan read
    # it) reaches the watcher, whose rescan follows this one. The yield lets the watcher task
    # take its first step (watchfiles sets up the OS watches there) before the scan starts.
    _start_watchers(session)
    await asyncio.sleep(0)
    session.tasks.start(_REINDEX, _reindex_loop(session, 0.0, await _begin_progress(session)))
    await _register_watched_files(session)


async def shutdown(session: Session, params: None) -> None:
    session.shutdown_requested = True
    _stop_watching_shared_index(session)
    for name in (_WATCH, _CONFIG_WATCH, _REINDEX, _FTS):
        session.tasks.cancel(name)
    for task in session.tasks.running_prefixed("evidence:"):  # it reads the store about to close
        task.cancel()
    ws = session.workspace
    if ws is not None:
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(session.writer.run(ws.store.close)), 2.0)
    session.readers.close()
    session.writer.close()


async def configuration_changed(session: Session, params: types.DidChangeConfigurationParams) -> None:
    if session.workspace is None:
        return
    await apply_settings(session, await read_settings(session, params.settings))


def watched_files(session: Session, params: types.DidChangeWatchedFilesParams) -> None:
    """The client's file events: evidence paths rescan (collected), config files reload."""
    paths: set[str] = set()
    config_changed = False
    for change in params.changes:
        rel = session.evidence_rel(change.uri)
        if rel is not None:
            paths.add(rel)
        elif session.under_evidence(change.uri):
            paths.add(_evidence_relative(session, change.uri) or "")
        if session.root is not None and _is_config_file(change.uri, session.root):
            config_changed = True
    paths.discard("")
    if paths:
        request_reindex(session, paths, QUIET_PERIOD_MS / 1000)
    if config_changed:
        session.tasks.start("workspace:reload-config", _reload_config(session))


# ------------------------------------------------------------------------- settings


async def read_settings(session: Session, pushed: Any = None) -> dict[str, Any]:
    """Settings: ``initializationOptions``, then the pushed ``grounding`` section, then the
    client's answer to ``workspace/configuration`` (2 s at most).
    """
    settings: dict[str, Any] = {}
    options = session.initialization_options
    if isinstance(options, dict):
        settings.update(options.get("grounding", options))
    if isinstance(pushed, dict) and isinstance(pushed.get("grounding"), dict):
        settings.update(pushed["grounding"])
    if session.capability("workspace.configuration", False):
        try:
            items = await asyncio.wait_for(session.client.configuration("grounding"), timeout=2)
            if items and isinstance(items[0], dict):
                settings.update({k: v for k, v in items[0].items() if v not in (None, "")})
        except Exception:  # a client that answers badly or slowly: keep what we have
            logger.info("workspace/configuration unavailable; using initializationOptions")
    return {k: v for k, v in settings.items() if k in SETTINGS_KEYS and v not in (None, "")}


def load_settings(root: Path, settings: dict[str, Any],
                  previous: Config | None = None) -> tuple[Config, str | None]:
    """``grounding.toml`` plus the editor settings; a problem gives the defaults and a message,
    or, when a configuration is in effect (``previous``), keeps it: a half-typed
    ``grounding.toml`` must not move the session to another evidence folder or index.

    Reads files: call it in a worker thread.
    """
    message = None
    try:
        config = load_config(root)
    except ConfigError as exc:
        if previous is not None:
            return previous, f"Grounding: {exc}; keeping the configuration in effect until it is fixed."
        message = f"Grounding: {exc}; using the default configuration."
        config = Config(root=root.resolve())
        try:
            check_index(config, "defaults")
        except ConfigError:  # the default index is unusable too (a .grounding symlink out)
            message = f"Grounding: {exc}; using the default configuration with an in-memory index."
            config = config.with_overrides(index=":memory:")
    if settings:
        try:
            config = config.with_overrides(**settings)
        except ConfigError as exc:
            message = f"Grounding: bad setting ({exc}); using grounding.toml and defaults."
    return config, message


@dataclass(frozen=True)
class _Opened:
    workspace: Workspace
    message: str | None
    snapshot: IndexSnapshot | None
    """The index as opened, when it holds events (usable before the first scan)."""
    fallback: str | None = None
    """Why a shared index was replaced by the local SQLite one (None: it was not)."""


def open_store(config: Config) -> _Opened:
    """Open the index ``config`` names. A shared index (PostgreSQL) that cannot be reached: the
    local SQLite index (:data:`~grounding_core.config.LOCAL_INDEX`) for the session, said in a
    message and in ``grounding/status`` (``index.fallback``); an unusable file: an in-memory
    index and a message.

    Connects and reads the log: call it in a worker thread.
    """
    message = fallback = None
    store: Store | None = None
    try:
        store = Store.for_config(config)
    except Exception as exc:
        if config.index_shared:  # the team's database is away: the local file, said so
            message = fallback = (f"Grounding: cannot reach the shared index ({exc}); using the local"
                                  f" index {LOCAL_INDEX} until the editor restarts.")
            config = config.with_overrides(index=LOCAL_INDEX)
        else:
            message = f"Grounding: cannot open the index ({exc}); using an in-memory index."
            config = config.with_overrides(index=":memory:")
    if store is None:
        try:
            store = Store.for_config(config)
        except Exception as exc:  # the local file is unusable too: keep serving from memory
            message = " ".join(filter(None, [
                fallback, f"Grounding: cannot open the index ({exc}); using an in-memory index."]))
            config = config.with_overrides(index=":memory:")
            store = Store.for_config(config)
    snapshot = store.snapshot()
    return _Opened(Workspace(config, store), message, snapshot if snapshot.seq > 0 else None, fallback)


async def apply_settings(session: Session, settings: dict[str, Any], rescan: bool = True,
                         reopen: bool = False) -> None:
    """Rebuild the configuration from ``grounding.toml`` and ``settings`` and apply it (see the
    module docstring for what each kind of change does). Heavy parts run in workers.
    ``reopen``: open the index again even when its settings did not change (its file was
    deleted or replaced).
    """
    assert session.root is not None
    session.settings = settings
    old = session.workspace
    config, message = await session.readers.run(load_settings, session.root, settings,
                                                old.config if old is not None else None)
    if message is not None and old is not None and config is old.config:
        session.feature_state[_CONFIG_KEPT] = True  # a broken grounding.toml: the last good one stays
    elif session.feature_state.pop(_CONFIG_KEPT, None) and message is None:
        session.client.show_message(types.MessageType.Info,
                                    "Grounding: grounding.toml is valid again; its settings are in effect.")
    if (not reopen and old is not None and _same(old.config, config, STORE_KEYS)
            and old.config.index_path == config.index_path):
        if old.config == config:
            if message:
                session.client.show_message(types.MessageType.Warning, message)
            return
        scanning = session.tasks.running(_REINDEX) is not None
        session.install(Workspace(config, old.store))
        if scanning:  # that scan's result is dropped (a new epoch): scan again
            request_reindex(session)
        view = session.view
        if view is not None:
            session.set_snapshot(view.snapshot)
            diagnostics.recheck_open_drafts(session)
        if message:
            session.client.show_message(types.MessageType.Warning, message)
        if not _same(old.config, config, SCAN_KEYS):
            if config.evidence_root != old.config.evidence_root:
                _start_watchers(session)
            request_reindex(session)
        elif old.config.today != config.today:
            evidence.refresh(session, None, None)
        return
    opened = await session.readers.run(open_store, config)
    session.install(opened.workspace)
    _watch_shared_index(session, opened)
    if old is not None:  # closed once no view reads it any more
        session.feature_state.setdefault(_RETIRED, []).append(old.store)
    for text in (message, opened.message):
        if text:
            session.client.show_message(types.MessageType.Warning, text)
    if opened.snapshot is not None:
        _set_snapshot(session, opened.snapshot)
        diagnostics.recheck_open_drafts(session)
    if old is not None:
        if config.evidence_root != old.config.evidence_root:
            _start_watchers(session)
        if rescan:
            request_reindex(session)


def _set_snapshot(session: Session, snapshot: IndexSnapshot) -> None:
    """A snapshot of the current store becomes the view; stores replaced before are closed
    (in the writer thread, after any scan of theirs).
    """
    session.set_snapshot(snapshot)
    for store in session.feature_state.pop(_RETIRED, []):
        close = session.writer.run(store.close)
        close.add_done_callback(lambda f: f.cancelled() or f.exception())


def _same(a: Config, b: Config, keys: Iterable[str]) -> bool:
    return all(getattr(a, key) == getattr(b, key) for key in keys) and a.evidence_root == b.evidence_root


async def _reload_config(session: Session) -> None:
    if session.workspace is not None:
        await apply_settings(session, session.settings)


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


# ------------------------------------------------------------------------- indexing


def request_reindex(session: Session, paths: Iterable[str] | None = None, delay: float = 0.0) -> None:
    """Rescan soon: ``paths`` (relative to the evidence root) changed, or None for a full walk.
    Requests made while a scan runs coalesce into one more scan; an empty ``paths`` is none.
    """
    if paths is not None:
        paths = set(paths)
        if not paths:
            return
    if paths is None:
        session.scan_pending = None
    elif session.scan_pending is not None:
        session.scan_pending.update(paths)
    session.scan_wanted = True
    if session.tasks.running(_REINDEX) is None:
        session.tasks.start(_REINDEX, _reindex_loop(session, delay, None))


async def wait_reindexed(session: Session) -> None:
    """Wait until no scan is running or pending and the full-text rows are built
    (``grounding.reindex``).
    """
    while (task := session.tasks.running(_REINDEX) or session.tasks.running(_FTS)) is not None:
        with contextlib.suppress(Exception):
            await asyncio.shield(task)


async def _reindex_loop(session: Session, delay: float, progress: _Progress | None) -> None:
    if delay:
        await asyncio.sleep(delay)
    session.scan_wanted = True
    try:
        while session.scan_wanted:
            session.scan_wanted = False
            paths, session.scan_pending = session.scan_pending, set()
            await _scan(session, paths, progress)
            if progress is not None:
                progress.end(session)
                progress = None
    finally:
        if progress is not None:
            progress.end(session)


async def _scan(session: Session, paths: set[str] | None, progress: _Progress | None) -> None:
    ws, epoch = session.workspace, session.epoch
    if ws is None:
        return
    report = progress.callback(session) if progress is not None else None
    if session.feature_state.get(_NO_MATCH):
        paths = None  # the globs matched nothing last time: only a full walk can tell a fix
    try:
        result, snapshot, searchable = await session.writer.run(_scan_store, ws, report, paths,
                                                                session.foreground.pause)
    except Exception as exc:
        if isinstance(exc, FileNotFoundError):  # no evidence folder: nothing is evidence
            logger.warning("%s", exc)
            await _no_evidence_folder(session, ws, epoch, str(exc))
            return
        if isinstance(exc, IndexBusy):  # another process is indexing: its commit is readable
            _retry_busy(session, paths, str(exc))
        elif isinstance(exc, WriteFailed):  # a full disk: rolled back, the last commit is readable
            _retry_unwritable(session, paths, str(exc))
        elif isinstance(exc, NoEvidenceMatched):  # wrong globs: keep the index, say how to fix them
            logger.warning("%s", exc)
            shown = f"Grounding: {exc}. Drafts are checked against the index as last committed."
            if session.feature_state.get(_NO_MATCH) != shown:
                session.client.show_message(types.MessageType.Error, shown)
            session.feature_state[_NO_MATCH] = shown
        elif isinstance(exc, IndexReplaced) and epoch == session.epoch:
            session.client.show_message(types.MessageType.Warning, (
                f"Grounding: {exc}; what this session indexed went with it. Opening"
                f" {ws.config.index_display} again and indexing the evidence folder."))
            await apply_settings(session, session.settings, reopen=True)
            return
        else:
            logger.exception("indexing failed; keeping the previous index")
        if epoch == session.epoch and (session.view is None or session.view.epoch != epoch):
            _set_snapshot(session, await session.readers.run(ws.store.snapshot))
            diagnostics.recheck_open_drafts(session)
        session.ready.set()
        return
    session.feature_state.pop(_BUSY, None)
    session.feature_state.pop(_NO_MATCH, None)
    session.feature_state.pop(_NO_EVIDENCE, None)
    session.feature_state.pop(_UNWRITABLE, None)
    session.index_passes += 1
    if epoch == session.epoch:
        session.index_status = {**ws.store.describe(), "fallback": session.index_status.get("fallback")}
    session.client.log_message(types.MessageType.Log, (
        f"Grounding: index pass {session.index_passes}: {len(result.changed)} files re-read,"
        f" {len(result.events)} events appended, {snapshot.seq} events in the log"))
    if ws.store.backend.read_only is not None and result.writer and not session.feature_state.get(_READ_ONLY):
        session.feature_state[_READ_ONLY] = True  # said once per session: the state cannot change by itself
        session.client.show_message(types.MessageType.Warning, f"Grounding: {result.writer}.")
    if epoch != session.epoch:
        return  # the workspace was replaced meanwhile; its own scan follows
    # converted related locations of re-read files may have other ranges now
    session.related_locations.forget(ws.config.evidence_display(path) for path in result.changed)
    before = session.view
    if before is None or before.epoch != epoch or before.snapshot.generation != snapshot.generation:
        _set_snapshot(session, snapshot)
        diagnostics.recheck_open_drafts(session)
    else:  # the same answers; a pull client still hears that a pass ended
        session.ready.set()
        if diagnostics.pull_mode(session):
            session.client.refresh_diagnostics()
    evidence.refresh(session, result, before if before is not None and before.epoch == epoch else None)
    if not searchable:
        session.tasks.start(_FTS, _build_full_text(session), replace=False)
    unstable = result.unstable  # files still being written: read them again soon
    if unstable:
        retry: set[str] = session.feature_state.setdefault(_RETRY, set())
        retry.update(unstable)
        session.tasks.start(_RETRY, _retry_unstable(session), replace=False)


async def _no_evidence_folder(session: Session, ws: Workspace, epoch: int, reason: str) -> None:
    """The configured evidence folder does not exist (the CLI's exit 2): say so once per
    folder (``window/showMessage``, an error) and check open drafts against the empty state
    (``replay(0)``), so no draft stays "answered" from evidence that is no longer configured.
    """
    shown = f"Grounding: {reason} (set 'evidence' in grounding.toml or the editor setting); drafts are" \
        " checked against no evidence until it exists."
    if session.feature_state.get(_NO_EVIDENCE) != shown:
        session.feature_state[_NO_EVIDENCE] = shown
        session.client.show_message(types.MessageType.Error, shown)
    if epoch == session.epoch:
        _set_snapshot(session, await session.readers.run(ws.store.snapshot, 0))
        diagnostics.recheck_open_drafts(session)
    session.ready.set()


def _retry_busy(session: Session, paths: set[str] | None, reason: str) -> None:
    """Scan again after a back-off (0.5 s doubling to 30 s) while another process holds the
    index's write lock; meanwhile open drafts are checked against its last commit. Says so
    once per busy spell (``window/showMessage``).
    """
    _retry_later(session, paths, _BUSY, BUSY_RETRY_SECONDS, types.MessageType.Info,
                 f"Grounding: {reason}; checking against the index as last committed and indexing again"
                 " once it is free.", "index busy; scanning again in %.1f s: %s", reason)


def _retry_later(session: Session, paths: set[str] | None, state: str, bounds: tuple[float, float],
                 kind: types.MessageType, message: str, log: str, reason: str) -> None:
    """Request a scan of ``paths`` after a back-off kept in ``session.feature_state[state]``
    (``bounds``: the first delay and the most, in seconds, doubling), showing ``message`` once
    per spell (the spell ends when a scan succeeds: ``_scan`` pops ``state``) and logging
    ``log`` (``%.1f`` for the delay, ``%s`` for ``reason``) each time.
    """
    delay = session.feature_state.get(state)
    if delay is None:
        delay = bounds[0]
        session.client.show_message(kind, message)
    session.feature_state[state] = min(delay * 2, bounds[1])
    logger.log(logging.WARNING if kind == types.MessageType.Error else logging.INFO, log, delay, reason)

    async def later() -> None:
        await asyncio.sleep(delay)
        request_reindex(session, paths)

    session.tasks.start(state + ":retry", later(), replace=False)


class IndexReplaced(RuntimeError):
    """The index file was deleted or replaced while the server had it open (checked before each
    scan): the session opens it again (:func:`apply_settings` with ``reopen``).
    """


def _retry_unwritable(session: Session, paths: set[str] | None, reason: str) -> None:
    """Scan again after a back-off (5 s doubling to 5 min) while the index cannot be written
    (a full disk: the scan rolled back); meanwhile open drafts are checked against its last
    commit. Says so once per spell (``window/showMessage``, an error: the user must act).
    """
    _retry_later(session, paths, _UNWRITABLE, UNWRITABLE_RETRY_SECONDS, types.MessageType.Error,
                 f"Grounding: {reason}. Checking against the index as last committed; indexing again"
                 " at the next evidence change, and every few minutes.",
                 "index unwritable; scanning again in %.1f s: %s", reason)


async def _build_full_text(session: Session) -> None:
    """Build the full-text rows a scan queued (in the writer thread, in slices, so a scan the
    watcher asks for waits at most one slice). Until they are built, ``query`` contexts and
    citation suggestions search what is there and say "still indexing" (SPEC §8); once built,
    the current snapshot becomes a new view and open drafts are checked again.
    """
    ws, epoch = session.workspace, session.epoch
    if ws is None:
        return
    gate = os.environ.pop(FTS_GATE_ENV, None)  # tests only; the first build waits once
    if gate:
        await asyncio.to_thread(_open_gate, gate)
    try:  # bulk work: pauses before each transaction while foreground jobs run or a check is due
        while not await session.writer.run(ws.store.build_fts, FTS_SLICE_SECONDS, FTS_SLICE_BATCH,
                                           _fts_pause(session)):
            if epoch != session.epoch:
                return
            await session.foreground.wait(bulk=True)
    except Exception:
        logger.exception("building the full-text rows failed; search stays incomplete")
        return
    view = session.view
    if epoch == session.epoch and view is not None and view.epoch == epoch:
        _set_snapshot(session, await session.readers.run(ws.store.snapshot))
        diagnostics.recheck_open_drafts(session)


def _open_gate(path: str) -> None:
    with open(path, "rb"):  # a FIFO: blocks until the test opens it for writing
        pass


async def full_text_built(session: Session, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for the background full-text build
    (:func:`_build_full_text`) to finish; True when the current view's snapshot has every
    full-text row (``search_complete``). For commands whose result depends on the ranking
    (``grounding.draftAnswer``): answering before the rows are built would rank fewer lines
    than ``grounding answer`` does, and could insert an ``abstain`` the evidence does not
    justify.
    """
    view = session.current_view()
    if view is None or view.snapshot.search_complete:
        return view is not None
    task = session.tasks.running(_FTS)
    if task is not None:  # (asyncio.wait: the build's own failure or cancellation is not ours)
        await asyncio.wait({task}, timeout=timeout)
    view = session.current_view()
    return view is not None and view.snapshot.search_complete


def _fts_pause(session: Session) -> Callable[[], float]:
    """The full-text fill's yield point (writer thread): bulk work (``Foreground.pause_bulk``:
    it also gives way to a keystroke's check near the end of its debounce), except while a
    scan waits for the writer thread (an evidence edit the writer waits to see): then only
    ``Foreground.pause``, as scans themselves do.
    """
    def pause() -> float:
        return session.foreground.pause() if session.writer.queued else session.foreground.pause_bulk()

    return pause


async def _retry_unstable(session: Session) -> None:
    await asyncio.sleep(UNSTABLE_RETRY_SECONDS)
    paths = session.feature_state.pop(_RETRY, set())
    request_reindex(session, paths)


def _scan_store(ws: Workspace, progress: Callable[[int, int, str], None] | None,
                paths: set[str] | None, pause: Callable[[], object] | None = None
                ) -> tuple[ScanResult, IndexSnapshot, bool]:
    """One scan of the evidence folder (writer thread). ``paths`` (relative to the evidence
    root): look only at those; None: a full walk. A file still being written is waited for
    briefly (``Store.scan``'s settle budget); one that keeps changing comes back in
    ``ScanResult.unstable`` and is retried. Also says whether the snapshot's full-text rows
    are complete. ``pause``: the session's background yield point (``Foreground.pause``),
    called at the walk's and the reads' batch boundaries.
    """
    gone = ws.store.backend.replaced()
    if gone is not None:  # writing on would fill an unlinked file, lost at close
        raise IndexReplaced(f"the index file {ws.config.index_display} {gone} while the server had it open")
    result = ws.store.scan(ws.config, progress, paths=sorted(paths) if paths is not None else None,
                           lock_wait=SCAN_LOCK_WAIT_SECONDS, pause=pause)
    return result, result.snapshot, result.snapshot.search_complete


@dataclass
class _Progress:
    """Work-done progress of the initial scan (when the client supports it)."""

    token: str
    last: int = -1
    ended: bool = False

    def callback(self, session: Session) -> Callable[[int, int, str], None]:
        loop = asyncio.get_running_loop()

        def report(done: int, total: int, path: str) -> None:  # writer thread
            pct = int(done * 100 / max(total, 1))
            if pct >= self.last + 5:
                self.last = pct
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(session.client.progress, self.token, types.WorkDoneProgressReport(
                        message=f"{done}/{total} {path}", percentage=pct))

        return report

    def end(self, session: Session) -> None:
        if not self.ended:
            self.ended = True
            view = session.view
            seq = view.snapshot.seq if view is not None else 0
            session.client.progress(self.token, types.WorkDoneProgressEnd(message=f"{seq} events indexed"))


async def _begin_progress(session: Session) -> _Progress | None:
    if not session.capability("window.work_done_progress", False):
        return None
    token = str(uuid.uuid4())
    try:
        await session.client.create_progress(token)
    except Exception:
        return None
    session.client.progress(token, types.WorkDoneProgressBegin(
        title="Grounding: indexing evidence", percentage=0, cancellable=False))
    return _Progress(token)


# ------------------------------------------------------------------- a shared index

_SHARED_WATCH = "workspace:shared-index-watch"
_SHARED_TASK = "workspace:shared-index-change"
_SHARED_AGAIN = "workspace:shared-index-again"
SHARED_WAIT_SECONDS = 5.0
"""Longest one wait of the shared-index thread (it then looks whether it should stop)."""


def _watch_shared_index(session: Session, opened: _Opened) -> None:
    """Record where the index lives (``session.index_status``) and, for a shared index, start
    the thread that waits for other processes' events (``Store.wait_for_events``: LISTEN/NOTIFY
    on PostgreSQL, reconnecting with back-off) and hands each change to the loop. The previous
    store's thread is stopped. Nothing here blocks the loop: the thread only waits, and the
    change is read in the writer thread (:func:`_shared_change`).
    """
    _stop_watching_shared_index(session)
    store = opened.workspace.store
    session.index_status = {**store.describe(), "fallback": opened.fallback}
    if not store.backend.shared:
        return
    stop = threading.Event()
    session.feature_state[_SHARED_WATCH] = stop
    loop = asyncio.get_running_loop()
    known = opened.snapshot.seq if opened.snapshot is not None else 0

    def wait() -> None:  # the shared-index thread
        seen = known
        while not stop.is_set():
            try:
                count = store.wait_for_events(seen, timeout=SHARED_WAIT_SECONDS)
            except Exception:  # noqa: BLE001  (logged; the store reconnects at the next wait)
                logger.exception("waiting for the shared index's events failed")
                stop.wait(1.0)
                continue
            if count is None or stop.is_set():
                continue
            seen = count
            with contextlib.suppress(RuntimeError):  # the loop closed: the session ended
                loop.call_soon_threadsafe(_shared_changed, session, store)

    threading.Thread(target=wait, name="grounding-shared-index", daemon=True).start()


def _stop_watching_shared_index(session: Session) -> None:
    stop = session.feature_state.pop(_SHARED_WATCH, None)
    if stop is not None:
        stop.set()


def _shared_changed(session: Session, store: Store) -> None:
    """The shared log grew (loop): one coalesced :func:`_shared_change` at a time."""
    if session.tasks.running(_SHARED_TASK) is not None:
        session.feature_state[_SHARED_AGAIN] = True
        return
    session.tasks.start(_SHARED_TASK, _shared_change(session, store))


async def _shared_change(session: Session, store: Store) -> None:
    """Another process appended events to the shared index: read what changed
    (``Store.changes_since``, in the writer thread, so it never overlaps one of this server's
    own scans), make the newest snapshot the view, re-check the open drafts and refresh the
    evidence diagnostics, as after a scan. Our own scans' announcements change nothing (the
    view already holds them).
    """
    while True:
        session.feature_state[_SHARED_AGAIN] = False
        ws, epoch, view = session.workspace, session.epoch, session.view
        if ws is None or ws.store is not store:
            return
        seq = view.snapshot.seq if view is not None and view.epoch == epoch else 0
        result = await session.writer.run(store.changes_since, seq)
        view = session.view
        current = view.snapshot.seq if view is not None and view.epoch == epoch else -1
        if epoch == session.epoch and result.snapshot.seq > current:
            session.client.log_message(types.MessageType.Log, (
                f"Grounding: {len(result.events)} events from {result.writer or 'the shared index'};"
                f" {result.snapshot.seq} events in the log"))
            session.index_status = {**store.describe(), "fallback": session.index_status.get("fallback")}
            _set_snapshot(session, result.snapshot)
            diagnostics.recheck_open_drafts(session)
            evidence.refresh(session, result, view if view is not None and view.epoch == epoch else None)
        if not session.feature_state.get(_SHARED_AGAIN):
            return


# -------------------------------------------------------------------------- watching


def _start_watchers(session: Session) -> None:
    config = session.config
    if config is None:
        return
    root = config.evidence_root
    if root.is_dir():
        session.tasks.start(_WATCH, _watch(session, root))
    session.tasks.start(_CONFIG_WATCH, _watch_config(session, config.root), replace=False)


def _wanted(change: Any, path: str) -> bool:
    name = Path(path).name
    if name.startswith(".#") or name.endswith(TEMP_SUFFIXES) or "/.git/" in path or "/.grounding/" in path:
        return False
    return True


async def _watch(session: Session, root: Path) -> None:
    """Watchfiles loop over the evidence root; falls back to polling once if it fails."""
    from watchfiles import awatch

    polling = False
    stop = asyncio.Event()
    while not stop.is_set():
        try:
            if not polling and os.environ.get(FORCE_WATCH_ERROR_ENV):
                raise OSError(errno.ENOSPC, f"OS file watch limit reached ({FORCE_WATCH_ERROR_ENV})")
            async for changes in awatch(root, watch_filter=_wanted, debounce=QUIET_PERIOD_MS, step=50,
                                        stop_event=stop, force_polling=polling, poll_delay_ms=300,
                                        recursive=True):
                request_reindex(session, _changed_paths(session, root, (path for _, path in changes)))
            return
        except asyncio.CancelledError:
            stop.set()
            raise
        except Exception as exc:
            if polling:
                logger.exception("polling the evidence folder failed; watching stopped")
                return
            polling = True
            logger.warning("file watching failed (%s); polling the evidence folder instead", exc)
            session.client.show_message(types.MessageType.Warning,
                                        f"Grounding: cannot watch {root} ({exc}); polling for changes instead.")


def _changed_paths(session: Session, root: Path, paths: Iterable[str]) -> set[str] | None:
    """The watcher's paths relative to the evidence root, for the next scan; None (a full walk)
    when one looks like a folder (no suffix: a folder moved or deleted names only itself).
    """
    config = session.config
    out = set()
    for path in paths:
        try:
            rel = Path(path).relative_to(root).as_posix()
        except ValueError:
            continue
        affected = config.evidence_path_for(rel) if config is not None else None
        if affected is not None:
            out.add(affected)  # an image's sidecar names its image (SPEC §12)
        elif not Path(rel).suffix:
            return None
    return out


async def _watch_config(session: Session, root: Path) -> None:
    """Poll the configuration files' stat every second (cheap; works on every filesystem)."""
    stamp = await session.readers.run(_config_stamp, root)
    while True:
        await asyncio.sleep(CONFIG_POLL_SECONDS)
        now = await session.readers.run(_config_stamp, root)
        if now != stamp:
            stamp = now
            await _reload_config(session)


def _config_stamp(root: Path) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for name in CONFIG_FILES:
        try:
            st = os.stat(root / name)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _is_config_file(uri: str, root: Path) -> bool:
    path = to_fs_path(uri)
    return path is not None and Path(path).parent == root and Path(path).name in CONFIG_FILES


def _evidence_relative(session: Session, uri: str) -> str | None:
    config = session.config
    path = to_fs_path(uri)
    if config is None or not path:
        return None
    try:
        return Path(path).relative_to(config.evidence_root).as_posix()
    except ValueError:
        return None


async def _register_watched_files(session: Session) -> None:
    config = session.config
    if config is None or not session.capability(
            "workspace.did_change_watched_files.dynamic_registration", False):
        return
    watchers = [types.FileSystemWatcher(glob_pattern=types.RelativePattern(
        base_uri=config.evidence_root.as_uri(), pattern="**/*"))]
    watchers += [types.FileSystemWatcher(glob_pattern=types.RelativePattern(
        base_uri=config.root.as_uri(), pattern=name)) for name in CONFIG_FILES]
    try:
        await session.client.register_capability(types.Registration(
            id="grounding-evidence-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers)))
    except Exception:
        logger.info("the client refused the file watcher registration")
