"""Draft diagnostics: text sync in, diagnostics out (SPEC §7, §10).

A draft is checked on open and save at once and on change after the typing debounce
(:data:`server.session.DEBOUNCE_SECONDS`, 150 ms), always on the text and index captured when
the check starts; a result that is no longer fresh when it arrives is dropped (no stale
squiggles, never an older version after a newer one). After every index change all open
drafts are checked again (:func:`recheck_open_drafts`).

Mode: pull (``textDocument/diagnostic`` + ``workspace/diagnostic/refresh``) when the client
offers both, push (``publishDiagnostics``) otherwise; read from the ``initialize``
capabilities at each use. Closed drafts are cleared. Evidence files get their diagnostics
from ``server/features/evidence.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from lsprotocol import types

from server.convert import lsp_diagnostics
from server.features import status
from server.session import DEBOUNCE_SECONDS, Client, DraftResult, FileLines, IndexView, RelatedLocations, Session

__all__ = ["did_change", "did_close", "did_open", "did_save", "document_text", "draft_diagnostics",
           "pull", "pull_mode", "recheck_open_drafts", "schedule"]

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
    schedule(session, params.text_document.uri, DEBOUNCE_SECONDS)


def did_save(session: Session, params: types.DidSaveTextDocumentParams) -> None:
    schedule(session, params.text_document.uri, 0.0)


def did_close(session: Session, params: types.DidCloseTextDocumentParams) -> None:
    """Cancel the pending check, drop the result and clear the draft's diagnostics (push)."""
    uri = params.text_document.uri
    session.tasks.cancel(_task_name(uri))
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
PARSE_AHEAD_SECONDS = 0.05
"""The draft's parse (text only: markdown-it, footnotes, sentences; 12-15 ms of CPU for the
Debian bench draft, two thirds of its check) starts this long before the typing debounce
ends (``Session.parse_ahead``); the check itself still starts when the debounce ends. Costs one
parse when the writer types again within those 50 ms (then the newer text is parsed)."""


def _task_name(uri: str) -> str:
    return CHECK_PREFIX + uri


def schedule(session: Session, uri: str, delay: float) -> None:
    """Check ``uri`` after ``delay`` seconds (replacing a check scheduled earlier). From now
    on the check is an expected foreground job: evidence publications wait to be written until
    its own publication is out (``Foreground.expect``; background computation goes on).
    """
    session.foreground.expect(session.tasks.start(_task_name(uri), _check(session, uri, delay)), delay)


async def _check(session: Session, uri: str, delay: float) -> None:
    if delay:
        ahead = min(PARSE_AHEAD_SECONDS, delay)
        await asyncio.sleep(delay - ahead)
        if session.ready.is_set():
            session.parse_ahead(uri)
        await asyncio.sleep(ahead)
    await session.ready.wait()
    if session.draft_rel(uri) is None:
        return
    result = await session.current_result(uri)
    if result is None or not session.is_fresh(result):
        return  # the editor or the index moved on; a newer check is scheduled
    if pull_mode(session):
        status.on_result(session, result)
        return
    view = session.current_view()
    assert view is not None
    prepared = await session.readers.run(_prepared, session.client, result, view, _related(session),
                                         session.file_lines, session.related_locations)
    if not session.is_fresh(result):
        return
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
            schedule(session, uri, 0.0)
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
