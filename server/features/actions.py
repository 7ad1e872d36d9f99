r"""Code actions for drafts (SPEC §10): repair quotes, re-anchor, insert citations, fix all.

``textDocument/codeAction`` offers, for the findings of the draft's current result that touch
the requested range:

* **quickfix "Replace the quote with the exact cited line"** — a ``quote-mismatch`` (GR103)
  whose fix the core computed;
* **quickfix "Re-anchor to DOC@V:L"** — a ``stale-citation`` (GR104) or ``hash-mismatch``
  (GR105) whose exact line still exists in the current version;
* **quickfix "Cite DOC@V:L, the same line under the renamed file's spelling"** — an
  ``inactive-source`` (GR106) whose evidence file was renamed to another Unicode normal form
  (NFD ↔ NFC) and still holds the cited line verbatim;
* **quickfix for a mechanical citation slip** — a ``malformed-citation`` (GR101) whose fix
  the core computed (an IME's full-width ``＠``/``：`` in the id: the same edit
  ``grounding check --fix`` applies);
* **quickfix "Cite DOC@V:L — LINE (why: …)"** (up to :data:`MAX_CITATION_ACTIONS`) — an
  ``uncited-claim`` (GR110), candidates from ``grounding_core.candidates`` ranked by the
  sentence's values and field names and the draft's ``fields``; the title ends with why the
  line is offered (:attr:`~grounding_core.candidates.Candidate.reasons`);
* **quickfix "Cite the current line DOC@V:L — LINE"** — a ``stale-citation`` (GR104) whose
  line changed: the same field's current line (not a safe fix, so never in fix all);
* **"Fix all Grounding citations in file"** — every safe fix at once
  (``grounding_core.edits.fix_all_edits``), once per menu: as a quickfix next to a fixable
  finding when the request names no kinds (the editor's quick-fix menu), and as kind
  ``source.fixAll`` only when the request asks for source actions (``only``: "fix on save",
  the Source Action menu). A menu never lists it twice.

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

from grounding_core.candidates import Candidate, citation_candidates
from grounding_core.check import resolve_visibility
from grounding_core.drafts import ID_RE
from grounding_core.edits import FIXABLE, HASH_PREFIX, citation_edits, context_unit_edits, fix_all_edits
from grounding_core.model import CitationRef, Edit, Finding, Span
from grounding_core.verify import CURRENT_FIELD_LINE
from server.convert import lsp_range, lsp_workspace_edit
from server.session import DraftResult, IndexView, Session

__all__ = ["FIX_ALL_TITLE", "MAX_CITATION_ACTIONS", "OPTIONS", "citation_title", "code_action", "code_actions",
           "workspace_edit"]

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
                    edit=workspace_edit(result, [finding.fix, *finding.also], request.document_changes)))
            elif finding.name == "uncited-claim":
                actions.extend(_citation_actions(result, view, finding, request))
            elif finding.name == "stale-citation":
                actions.extend(_current_line_action(result, view, finding, request))
    all_edits = fix_all_edits(findings)
    if all_edits:
        edit = workspace_edit(result, all_edits, request.document_changes)
        if touched_fixable and _kind_allowed(quickfix, request.only):
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=types.CodeActionKind.QuickFix, edit=edit))
        if request.only and _kind_allowed(fix_all_kind, request.only):
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
        candidates = citation_candidates(view.snapshot, sentence.text, view.today, visibility, MAX_CITATION_ACTIONS,
                                         [name for name, _span in result.draft.fields])
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
            title=citation_title(candidate), kind=types.CodeActionKind.QuickFix,
            diagnostics=matching, is_preferred=index == 0 and candidate.value_in_sentence,
            edit=workspace_edit(result, edits, request.document_changes)))
    return actions


def _current_line_action(result: DraftResult, view: IndexView, finding: Finding,
                         request: _Request) -> list[types.CodeAction]:
    """"Cite the current line DOC@V:L" for a stale citation whose line changed: the same
    field's line in the current version (the finding's first related location names it,
    ``grounding_core.verify.CURRENT_FIELD_LINE``). Not a safe fix (the sentence may now say
    something else; the claim-value check tells), so never part of fix all. Like a re-anchor,
    it also rewrites a context unit naming the old version (``refund@1`` -> ``refund@3``,
    ``grounding_core.edits.context_unit_edits``), so the new citation is visible.
    """
    moved = next((r for r in finding.related if r.message.startswith(CURRENT_FIELD_LINE)), None)
    if moved is None or moved.line_text is None or finding.citation is None:
        return []
    doc_id = finding.citation.rpartition("@")[0]
    current = view.snapshot.newest(doc_id)
    if current is None:
        return []
    new_id = f"{doc_id}@{current.version}:{moved.line}"
    edit = Edit(finding.span, f'{new_id} sha256:{current.sha256[:HASH_PREFIX]} "{moved.line_text}"',
                f"Cite the current line {new_id}")
    edits = [edit]
    old = ID_RE.fullmatch(finding.citation)
    if old is not None:
        unit_edits, _ = context_unit_edits(
            result.draft, CitationRef(old["doc_id"], int(old["version"]), int(old["line"])),
            CitationRef(doc_id, current.version, moved.line))
        edits += unit_edits
    return [types.CodeAction(
        title=f"Cite the current line {new_id} — {moved.line_text}", kind=types.CodeActionKind.QuickFix,
        diagnostics=_matching(finding, result, request.diagnostics),
        edit=workspace_edit(result, edits, request.document_changes))]


def citation_title(candidate: Candidate) -> str:
    """``Cite DOC@V:L — LINE (why: value in the sentence, current version)``."""
    return f"Cite {candidate.id} — {candidate.text} (why: {', '.join(candidate.reasons)})"


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
