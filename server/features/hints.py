"""Inlay hints after citations: their state (issue 12 "navigation").

``textDocument/inlayHint`` on a draft puts one hint right after each footnote reference
``[^label]`` (a JSON answer: after each claim's ``id`` value) saying what the citation is now
(``grounding_core.navigate.citation_hints``): ``✓ v2`` (valid; ``✓ v2 · conflict`` when the
field conflicts), ``stale → v3`` (a newer version is current), ``✗ quote-mismatch`` (the
first error about the citation). The tooltip is the finding's message.

The hints come from the result the squiggles come from (``status.shown``) while it is for the
editor's current text, else from a check of the current text; the server asks for
``workspace/inlayHint/refresh`` with every publication (``status.request_refresh``), so the
hints never lag the diagnostics. Only hints inside the requested range are answered.
"""

from __future__ import annotations

from lsprotocol import types

from grounding_core.navigate import citation_hints
from server.features import status
from server.session import DraftResult, IndexView, Session

__all__ = ["inlay_hint"]


async def inlay_hint(session: Session, params: types.InlayHintParams) -> list[types.InlayHint] | None:
    """``textDocument/inlayHint`` on a draft (module docstring)."""
    uri = params.text_document.uri
    await session.ready.wait()
    document = session.document(uri)
    view = session.current_view()
    if document is None or view is None or session.draft_rel(uri) is None:
        return None
    shown = status.shown(session, uri)
    if shown is not None and shown.document.text_hash == document.text_hash:
        result: DraftResult | None = shown
    else:
        result = session.fresh_result(uri) or await session.current_result(uri)
    if result is None:
        return None
    return await session.readers.run(_hints, result, view, params.range)


def _hints(result: DraftResult, view: IndexView, wanted: types.Range) -> list[types.InlayHint]:
    doc = result.document
    found = []
    start, end = (wanted.start.line, wanted.start.character), (wanted.end.line, wanted.end.character)
    for hint in citation_hints(result.draft, result.report, view.snapshot):
        if not wanted.start.line <= hint.line <= wanted.end.line or hint.line >= len(doc.lines):
            continue
        position = doc.codec.lsp_position(hint.line, hint.col, doc.lines)
        if not start <= (position.line, position.character) <= end:
            continue
        found.append(types.InlayHint(position=position, label=hint.label, tooltip=hint.tooltip, padding_left=True))
    return found
