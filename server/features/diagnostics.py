"""Draft diagnostics: text sync in, diagnostics out (SPEC §7, §10).

A draft is checked on open and save at once and on change after the typing debounce
(:data:`server.session.DEBOUNCE_SECONDS`, 150 ms), always on the text and index captured when
the check starts; a result that is no longer fresh when it arrives is dropped (no stale
squiggles, never an older version after a newer one). The check and its publication are made
ahead, in the debounce's last :data:`CHECK_AHEAD_SECONDS`, and sent when the debounce ends if
still fresh; nothing is published before it ends. After every index change all open drafts
are checked again (:func:`recheck_open_drafts`; a pending debounce is kept).

Mode: pull (``textDocument/diagnostic`` + ``workspace/diagnostic/refresh``) when the client
offers both, push (``publishDiagnostics``) otherwise; read from the ``initialize``
capabilities at each use. Closed drafts are cleared. Evidence files get their diagnostics
from ``server/features/evidence.py``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from lsprotocol import types

from server.convert import lsp_diagnostics
from server.features import status
from server.session import DEBOUNCE_SECONDS, Client, DraftResult, FileLines, IndexView, RelatedLocations, Session

__all__ = ["did_change", "did_close", "did_open", "did_save", "document_text", "draft_diagnostics",
           "pull", "pull_mode", "recheck_open_drafts", "schedule"]

logger = logging.getLogger(__name__)

DIAGNOSTIC_OPTIONS = types.DiagnosticOptions(identifier="grounding", inter_file_dependencies=True,
                                             workspace_diagnostics=False)


def pull_mode(session: Session) -> bool:
    """Pull when the client offers ``textDocument/diagnostic`` and the refresh request."""
    return bool(session.capability("text_document.diagnostic", None)) and bool(
        session.capability("workspace.diagnostics.refresh_support", False))


# ------------------------------------------------------------------------- text sync
# pygls applies the text change before these run; they only schedule work.


def did_open(session: Session, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    schedule(session, uri, 0.0)
    status.opened(session, uri)


def did_change(session: Session, params: types.DidChangeTextDocumentParams) -> None:
    schedule(session, params.text_document.uri, TYPING_DEBOUNCE_SECONDS)


def did_save(session: Session, params: types.DidSaveTextDocumentParams) -> None:
    schedule(session, params.text_document.uri, 0.0)


def did_close(session: Session, params: types.DidCloseTextDocumentParams) -> None:
    """Cancel the pending check, drop the result and clear the draft's diagnostics (push)."""
    uri = params.text_document.uri
    session.tasks.cancel(_task_name(uri))
    _due(session).pop(unquote(uri), None)
    status.closed(session, uri)
    had = session.forget(uri) is not None
    if (had or session.draft_rel(uri) is not None) and not pull_mode(session):
        session.client.publish_diagnostics(uri, None, [])


def document_text(session: Session, params: object) -> dict[str, object] | None:
    """``grounding/documentText {uri}`` -> ``{uri, version, text}`` of an open document, or null."""
    uri = params["uri"] if isinstance(params, dict) else getattr(params, "uri", None)
    document = session.document(uri) if isinstance(uri, str) else None
    if document is None:
        return None
    return {"uri": document.uri, "version": document.version, "text": document.text}


# ------------------------------------------------------------------------- checking


CHECK_PREFIX = "check:"
CHECK_AHEAD_ENV = "GROUNDING_CHECK_AHEAD_MS"
DEBOUNCE_ENV = "GROUNDING_DEBOUNCE_MS"


def _env_seconds(name: str, default: float) -> float:
    """``default``, or the environment variable ``name`` read as milliseconds (>= 0)."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) / 1000 if raw else default
    except ValueError:
        logger.warning("%s=%r is not a number of milliseconds; using %g ms", name, raw, default * 1000)
        return default
    return value if math.isfinite(value) and value >= 0 else default


TYPING_DEBOUNCE_SECONDS = _env_seconds(DEBOUNCE_ENV, DEBOUNCE_SECONDS)
"""The debounce this process uses: :data:`~server.session.DEBOUNCE_SECONDS` (150 ms), or
``GROUNDING_DEBOUNCE_MS`` (a hook for tests that need a wide window; not a setting)."""
CHECK_AHEAD_SECONDS = min(_env_seconds(CHECK_AHEAD_ENV, 0.08), TYPING_DEBOUNCE_SECONDS)
"""The check ahead (docs/decisions.md "The check ahead of the debounce"): this long before a
keystroke's debounce ends, the whole check of the current text *and* its publication
(converted, serialised) are computed in reader threads on the values captured then; at the
deadline they are sent at once when still fresh (:meth:`Session.is_fresh`), else the check
runs as it always did. 80 ms: on the Debian bench draft (server from an index, the first
evidence refresh beside the typing, load 0.3-0.8 on 2 cores) the work ahead took 28-86 ms of
wall time (median 46, p90 54: the check 18-69, the publication 9-17), so it is done by the
deadline (1 in 30 ran past it and was awaited; the deadline itself fired 1-8 ms late); bulk
work has stopped before the window opens (``BULK_LEAD_SECONDS``, 100 ms), and the first 70 ms
of every debounce stay free for it. A keystroke inside the window costs one orphaned
computation (tens of ms in one of the ``READER_THREADS`` threads, done before the next
keystroke's own window opens 70 ms later). ``GROUNDING_CHECK_AHEAD_MS=0`` turns it off (tests
compare both)."""


def _task_name(uri: str) -> str:
    """The check task of ``uri``, named by the URI as the open documents key it (unquoted:
    ``didChange`` carries the editor's ``%E5...`` form, :meth:`Session.open_uris` the decoded
    one, and an index change's re-check must replace the keystroke's check, not run beside it).
    """
    return CHECK_PREFIX + unquote(uri)


def _due(session: Session) -> dict[str, float]:
    """Per open draft (by URI): when its scheduled check is due (loop time), the end of its debounce."""
    found: dict[str, float] = session.feature_state.setdefault(__name__, {})
    return found


def schedule(session: Session, uri: str, delay: float, *, keep_debounce: bool = False) -> None:
    """Check ``uri`` after ``delay`` seconds (replacing a check scheduled earlier). From now
    on the check is an expected foreground job: evidence publications wait to be written until
    its own publication is out (``Foreground.expect``; background computation goes on).
    ``keep_debounce`` (an index change): a check still waiting out a keystroke's debounce keeps
    its deadline (nothing is published while the writer types); its work ahead, made against
    the older index, is dropped and made again.
    """
    loop = asyncio.get_running_loop()
    now = loop.time()
    due, key = _due(session), unquote(uri)
    if keep_debounce and session.tasks.running(_task_name(uri)) is not None:
        delay = max(delay, due.get(key, now) - now)
    due[key] = now + delay
    session.foreground.expect(session.tasks.start(_task_name(uri), _check(session, uri, delay)), delay)


async def _check(session: Session, uri: str, delay: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay
    ahead: asyncio.Task[tuple[DraftResult, Any] | None] | None = None
    try:
        if delay:
            await asyncio.sleep(max(0.0, delay - CHECK_AHEAD_SECONDS))
            if session.ready.is_set() and CHECK_AHEAD_SECONDS:
                ahead = asyncio.ensure_future(_make(session, uri))
            await asyncio.sleep(max(0.0, deadline - loop.time()))
        if ahead is not None:
            try:
                made = await asyncio.shield(ahead)
            except Exception:  # (a bug: the check at the deadline reports it as it always does)
                logger.exception("the check ahead of %s failed", uri)
                made = None
            if made is not None and session.is_fresh(made[0]):
                _publish(session, *made)
                return
        await _check_now(session, uri)
    finally:
        if ahead is not None and not ahead.done():
            ahead.cancel()  # a keystroke replaced this check: its work ahead is orphaned


async def _make(session: Session, uri: str) -> tuple[DraftResult, Any] | None:
    """The result of ``uri``'s current text against the current view, and its publication
    made ready (push mode; None in pull mode): the check ahead runs it in its own task, the
    check at the deadline awaits it (:func:`_check_now`). None when ``uri`` is not an open
    draft or the result was no longer fresh when it arrived.
    """
    if session.draft_rel(uri) is None:
        return None
    result = await session.current_result(uri)
    if result is None or not session.is_fresh(result):
        return None
    if pull_mode(session):
        return result, None
    return result, await _prepare(session, result)


async def _check_now(session: Session, uri: str) -> None:
    """Check ``uri``'s current text and publish it (the check at the deadline)."""
    await session.ready.wait()
    if session.draft_rel(uri) is None:
        _no_longer_a_draft(session, uri)
        return
    made = await _make(session, uri)
    if made is not None and session.is_fresh(made[0]):  # else the editor or the index moved on
        _publish(session, *made)


def _no_longer_a_draft(session: Session, uri: str) -> None:
    """An open document checked before is no draft now (``drafts`` in grounding.toml changed,
    or the workspace did): drop its result and clear its diagnostics (push), as on close; the
    editor's URI spelling is the open document's. Nothing when it had no result.
    """
    document = session.document(uri)
    editor_uri = document.uri if document is not None else uri
    if session.forget(editor_uri) is not None and not pull_mode(session):
        session.client.publish_diagnostics(editor_uri, None, [])


async def _prepare(session: Session, result: DraftResult) -> Any:
    view = session.current_view()
    assert view is not None
    return await session.readers.run(_prepared, session.client, result, view, _related(session),
                                     session.file_lines, session.related_locations)


def _publish(session: Session, result: DraftResult, prepared: Any) -> None:
    """Send a fresh result's publication (``prepared``; None in pull mode: the client pulls)."""
    if prepared is not None:
        session.client.send_prepared(prepared)
    status.on_result(session, result)


def _prepared(client: Client, result: DraftResult, view: IndexView, related: bool, file_lines: FileLines,
              converted: RelatedLocations | None = None) -> Any:
    """The publication of one result, converted and serialised (worker thread)."""
    items = draft_diagnostics(result, view, related, file_lines, converted)
    return client.prepare_diagnostics(result.uri, result.document.version, items)


def _related(session: Session) -> bool:
    return bool(session.capability("text_document.publish_diagnostics.related_information", True))


def draft_diagnostics(result: DraftResult, view: IndexView, related: bool,
                      file_lines: FileLines, converted: RelatedLocations | None = None) -> list[types.Diagnostic]:
    """The LSP diagnostics of one result (worker thread: may read evidence files for the
    ranges of related locations). ``related``: the client shows related information;
    ``converted`` keeps the related locations converted for this view across keystrokes.
    Conflicts (GR108) are shown the editor's way (``server.render.conflicts``).
    """
    root = view.config.root
    return lsp_diagnostics(result.report.findings, result.document.lines, result.document.codec,
                           view.root_uri, lambda rel: file_lines(str(root / rel)), related,
                           locations=converted.for_view(view.epoch) if converted is not None else None,
                           related_lists=converted.lists_for_view(view.epoch) if converted is not None else None,
                           uri=result.uri)


def recheck_open_drafts(session: Session) -> None:
    """Check every open draft again (the index changed); in pull mode ask for a re-pull."""
    for uri in session.open_uris():
        if session.draft_rel(uri) is not None:
            schedule(session, uri, 0.0, keep_debounce=True)
    if pull_mode(session):
        session.client.refresh_diagnostics()


# ------------------------------------------------------------------------------ pull


async def pull(session: Session, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
    """``textDocument/diagnostic``: the diagnostics of the open draft's current text."""
    empty = types.RelatedFullDocumentDiagnosticReport(items=[])
    uri = params.text_document.uri
    if not pull_mode(session) or session.document(uri) is None:
        return empty
    await session.ready.wait()  # before it, the drafts globs are not known
    result = await session.current_result(uri)
    view = session.current_view()
    if result is None or view is None:
        return empty
    items: Sequence[types.Diagnostic] = await session.readers.run(draft_diagnostics, result, view,
                                                                  _related(session), session.file_lines,
                                                                  session.related_locations)
    if session.is_fresh(result):
        status.on_result(session, result)
    return types.RelatedFullDocumentDiagnosticReport(items=list(items))
