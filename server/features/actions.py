r"""Code actions for drafts (SPEC §10): repair quotes, re-anchor, insert citations, fix all.

``textDocument/codeAction`` offers, for the findings of the draft's current result that touch
the requested range:

* **quickfix "Replace the quote with the exact cited line"** — a ``quote-mismatch`` (GR103)
  whose fix the core computed;
* **quickfix "Re-anchor to DOC@V:L"** — a ``stale-citation`` (GR104) or ``hash-mismatch``
  (GR105) whose exact line still exists in the current version;
* **quickfix for a mechanical citation slip** — a ``malformed-citation`` (GR101) whose fix
  the core computed (an IME's full-width ``＠``/``：`` in the id: the same edit
  ``grounding check --fix`` applies);
* **quickfix "Cite DOC@V:L — LINE"** (up to :data:`MAX_CITATION_ACTIONS`) — an
  ``uncited-claim`` (GR110), candidates from ``grounding_core.candidates``;
* **"Fix all Grounding citations in file"** — kind ``source.fixAll`` (for "fix on save") and
  also as a quickfix next to any fixable finding: every safe fix at once
  (``grounding_core.edits.fix_all_edits``).

Every action carries a ``WorkspaceEdit`` converted against the lines of the snapshot the
result was computed for; with ``documentChanges`` support it names that document version, so
the client refuses it if the buffer moved on. The result is the session's fresh one, or a
check of the current text (``Session.current_result``); the actions are built in a worker.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from lsprotocol import types

from grounding_core.candidates import citation_candidates
from grounding_core.check import resolve_visibility
from grounding_core.edits import FIXABLE, citation_edits, fix_all_edits
from grounding_core.model import Edit, Finding, Span
from server.convert import lsp_range, lsp_workspace_edit
from server.session import DraftResult, IndexView, Session

__all__ = ["FIX_ALL_TITLE", "MAX_CITATION_ACTIONS", "OPTIONS", "code_action", "code_actions", "workspace_edit"]

logger = logging.getLogger(__name__)

FIX_ALL_TITLE = "Fix all Grounding citations in file"
MAX_CITATION_ACTIONS = 3
OPTIONS = types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll],
    resolve_provider=False)


@dataclass(frozen=True, slots=True)
class _Request:
    """A code action request with what the worker needs of the session, captured on the loop."""

    range: types.Range
    only: tuple[str, ...] | None
    diagnostics: tuple[types.Diagnostic, ...]
    document_changes: bool


async def code_action(session: Session, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    result = await session.current_result(params.text_document.uri)
    view = session.current_view()
    if result is None or view is None:
        return None
    context = params.context
    request = _Request(
        params.range, tuple(str(getattr(k, "value", k)) for k in context.only) if context.only else None,
        tuple(context.diagnostics or ()),
        bool(session.capability("workspace.workspace_edit.document_changes", False)))
    return await session.readers.run(code_actions, result, view, request)


def workspace_edit(result: DraftResult, edits: Sequence[Edit], document_changes: bool) -> types.WorkspaceEdit:
    """Core edits in ``result``'s text -> a ``WorkspaceEdit`` for its document version."""
    doc = result.document
    return lsp_workspace_edit(doc.uri, doc.version, doc.lines, edits, doc.codec, document_changes)


def code_actions(result: DraftResult, view: IndexView, request: _Request) -> list[types.CodeAction]:
    """The actions for ``request`` on ``result`` (worker thread: candidates search the index)."""
    doc = result.document
    quickfix = types.CodeActionKind.QuickFix.value
    fix_all_kind = types.CodeActionKind.SourceFixAll.value
    wanted = doc.core_span(request.range)
    findings = result.report.findings
    actions: list[types.CodeAction] = []
    touched_fixable = False
    if _kind_allowed(quickfix, request.only):
        for finding in findings:
            if not _intersects(finding.span, wanted):
                continue
            if finding.fix is not None and finding.name in FIXABLE:
                touched_fixable = True
                actions.append(types.CodeAction(
                    title=finding.fix.title, kind=types.CodeActionKind.QuickFix,
                    diagnostics=_matching(finding, result, request.diagnostics), is_preferred=True,
                    edit=workspace_edit(result, [finding.fix], request.document_changes)))
            elif finding.name == "uncited-claim":
                actions.extend(_citation_actions(result, view, finding, request))
    all_edits = fix_all_edits(findings)
    if all_edits:
        edit = workspace_edit(result, all_edits, request.document_changes)
        if touched_fixable and _kind_allowed(quickfix, request.only):
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=types.CodeActionKind.QuickFix, edit=edit))
        if _kind_allowed(fix_all_kind, request.only):
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=types.CodeActionKind.SourceFixAll, edit=edit))
    return actions


def _citation_actions(result: DraftResult, view: IndexView, finding: Finding,
                      request: _Request) -> list[types.CodeAction]:
    """Up to three "Cite …" quickfixes for one GR110 sentence."""
    sentence = next((s for s in result.draft.uncited if s.span == finding.span), None)
    if sentence is None:
        return []
    try:  # a failing search must not take the other fixes with it
        visibility = resolve_visibility(result.draft, view.snapshot, view.config, view.today, view.read_text)
        candidates = citation_candidates(view.snapshot, sentence.text, view.today, visibility, MAX_CITATION_ACTIONS)
    except Exception:
        logger.exception("citation candidates failed for %r", sentence.text[:80])
        return []
    doc = result.document
    matching = _matching(finding, result, request.diagnostics)
    actions = []
    for index, candidate in enumerate(candidates):
        edits, _label = citation_edits(doc.text, doc.lines, sentence.span, candidate.citation, candidate.sha256,
                                       candidate.text)
        actions.append(types.CodeAction(
            title=f"Cite {candidate.id} — {candidate.text}", kind=types.CodeActionKind.QuickFix,
            diagnostics=matching, is_preferred=index == 0 and candidate.value_in_sentence,
            edit=workspace_edit(result, edits, request.document_changes)))
    return actions


def _intersects(a: Span, b: Span) -> bool:
    """True when the spans overlap or touch (a cursor at a finding's end counts)."""
    return ((a.start_line, a.start_col) <= (b.end_line, b.end_col)
            and (b.start_line, b.start_col) <= (a.end_line, a.end_col))


def _matching(finding: Finding, result: DraftResult,
              diagnostics: Sequence[types.Diagnostic]) -> list[types.Diagnostic] | None:
    wanted = lsp_range(finding.span, result.document.lines, result.document.codec)
    found = [d for d in diagnostics if d.code == finding.code and d.range == wanted]
    return found or None


def _kind_allowed(kind: str, only: Sequence[str] | None) -> bool:
    """LSP ``context.only`` filtering: kinds are hierarchical (``source`` covers ``source.fixAll``)."""
    if not only:
        return True
    return any(kind == o or kind.startswith(o + ".") for o in only)
