r"""Code actions for drafts (SPEC §10): repair quotes, re-anchor, insert citations, fix all.

``textDocument/codeAction`` offers, for the findings of the latest report that touch the
requested range:

* **quickfix "Replace the quote with the exact cited line"** — a ``quote-mismatch`` (GR103)
  whose fix the core computed (:func:`grounding_core.verify` only proposes one when the quote
  is not simply another line of the same version);
* **quickfix "Re-anchor to DOC@V:L"** — a ``stale-citation`` (GR104) or ``hash-mismatch``
  (GR105) whose exact line still exists in the current version;
* **quickfix "Cite DOC@V:L — LINE"** (up to :data:`MAX_CITATION_ACTIONS`) — an
  ``uncited-claim`` (GR110): candidates come from the index's FTS (see
  :func:`citation_candidates`);
* **"Fix all Grounding citations in file"** — kind ``source.fixAll`` (for "fix on save") and
  also as a quickfix next to any fixable finding: every safe fix of the report at once
  (:func:`fix_all_edits`).

Every action carries a ``WorkspaceEdit`` whose ``TextEdit`` ranges are converted with the
session's codec against the lines of the snapshot the report was computed for. With
``documentChanges`` support the edit names the document version, so a client rejects it if
the buffer moved on.

Decisions where SPEC §5.1/§10 are silent:

* **Where an inserted reference goes.** Immediately *before* the sentence's final end mark
  (``。！？!?.``) when it has one, else at the sentence's end: ``活动时间是周四16:30[^2]。``.
  That is the house style of the examples and of ``grounding answer``, and the reference is
  then inside the sentence's span whatever the mark. (SPEC §5.1 would equally accept
  ``…16:30。[^2]``: references directly after an end mark belong to the sentence before it.)
* **The new label** is one more than the largest numeric label used anywhere in the draft
  (references and definitions), so footnotes stay in reading order.
* **The definition line** ``[^N]: ID sha256:HEX12 "LINE"`` goes at the end of the document,
  after a blank line unless the last line is blank or already a definition; it uses the
  draft's own line terminator (the first one in the text, ``\n`` for a one-line draft).
* **Candidate order** for a sentence: lines visible in the draft's declared context first;
  then lines whose normalised value (SPEC §7.3) occurs in the sentence, longest value first;
  then FTS rank. Only active, non-meta field lines of the current index are candidates; a line
  whose value occurs in the sentence is a candidate even when FTS cannot find it (values
  shorter than a trigram).
* **Fix all** applies the core's fixes like ``grounding check --fix`` (non-overlapping, the
  first wins) but orders edits that start at the same place deterministically: a re-anchor
  (which also rewrites the quote) before a quote replacement.

Freshness: the latest engine report is used when it was computed for the document's current
version and text and the index has not changed since; otherwise the draft is re-checked in a
worker thread (:func:`current_result`). All heavy work (checks, FTS, context compilation) runs
in ``asyncio.to_thread``; a failure is logged and answers ``null``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.capabilities import get_capability

from grounding_core.drafts import REF_RE, SENTENCE_END, ParsedDraft, Sentence, parse_context_log
from grounding_core.model import Edit, Finding, Span
from grounding_core.text import LINE_BREAK, normalize, normalize_value
from grounding_core.verify import Visibility

if TYPE_CHECKING:
    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot
    from server.engine import DraftResult, Engine

__all__ = [
    "FIXABLE",
    "FIX_ALL_TITLE",
    "Candidate",
    "citation_candidates",
    "citation_edits",
    "current_result",
    "fix_all_edits",
    "lsp_workspace_edit",
    "register",
    "sentence_at",
]

logger = logging.getLogger(__name__)

FIXABLE = ("stale-citation", "hash-mismatch", "quote-mismatch")
"""Finding names whose core ``fix`` is safe to apply, in fix-all priority order."""

FIX_ALL_TITLE = "Fix all Grounding citations in file"
MAX_CITATION_ACTIONS = 3
FTS_CANDIDATES = 50
GENERATIONS_ATTR = "grounding_report_generations"
"""Attribute of :class:`ServerState` (set by :func:`register`): uri -> index generation at the
time the engine last reported a result for it."""

_DEFINITION_START = re.compile(r"^\[\^([^\]\s]+)\]:")


# ----------------------------------------------------------------------- freshness


async def current_result(state: ServerState, uri: str) -> DraftResult | None:
    """The check result of the open draft ``uri`` for its current text (None if not a draft).

    Reuses ``engine.result_for(uri)`` when it was computed for the open document's version and
    text and no reindex happened since; otherwise checks the current snapshot in a worker
    thread (the result is not published: diagnostics stay the diagnostics feature's job).
    Waits for the initial index. Raises nothing for a bad draft (problems are findings).
    """
    engine = state.engine
    snapshot = state.snapshot(uri)
    rel = engine.draft_rel(uri)
    if snapshot is None or rel is None:
        return None
    await engine.indexed.wait()
    result = engine.result_for(uri)
    generations: dict[str, int] = getattr(state, GENERATIONS_ATTR, {})
    if (result is not None and result.snapshot.version == snapshot.version
            and result.snapshot.text == snapshot.text
            and generations.get(uri) == engine.index_generation):
        return result
    return await asyncio.to_thread(engine.check_snapshot, snapshot, rel)


# --------------------------------------------------------------------------- fix all


def fix_all_edits(findings: Iterable[Finding]) -> list[Edit]:
    """Every safe fix of a report, non-overlapping, in document order (SPEC §10 "fix all").

    ``grounding_core.fixes.apply_edits`` semantics (an edit overlapping an earlier one is
    dropped), with ties at one start position broken by :data:`FIXABLE` order.
    """
    ranked = sorted(
        ((f.fix, FIXABLE.index(f.name)) for f in findings if f.fix is not None and f.name in FIXABLE),
        key=lambda pair: (pair[0].span.start_line, pair[0].span.start_col, pair[1],
                          pair[0].span.end_line, pair[0].span.end_col, pair[0].new_text),
    )
    chosen: list[Edit] = []
    for edit, _ in ranked:
        if edit in chosen:
            continue
        if chosen and _before(edit.span.start_line, edit.span.start_col,
                              chosen[-1].span.end_line, chosen[-1].span.end_col):
            continue
        chosen.append(edit)
    return chosen


def _before(line_a: int, col_a: int, line_b: int, col_b: int) -> bool:
    return (line_a, col_a) < (line_b, col_b)


# ------------------------------------------------------------------ citation candidates


@dataclass(frozen=True, slots=True)
class Candidate:
    """An active, non-meta field line that could support a sentence. ``line`` is 1-based."""

    doc_id: str
    version: int
    line: int
    text: str
    sha256: str
    field: str
    value: str
    visible: bool
    value_in_sentence: bool

    @property
    def id(self) -> str:
        return f"{self.doc_id}@{self.version}:{self.line}"

    def definition(self, label: str) -> str:
        """The SPEC §5.1 definition line ``[^label]: ID sha256:HEX12 "LINE"``."""
        return f'[^{label}]: {self.id} sha256:{self.sha256[:12]} "{self.text}"'


def citation_candidates(engine: Engine, draft: ParsedDraft, sentence: str,
                        limit: int = MAX_CITATION_ACTIONS) -> list[Candidate]:
    """Up to ``limit`` lines to cite for ``sentence`` (text as written), best first.

    Blocking (FTS, possibly context compilation): call it in a worker thread. Candidates are
    FTS hits (any trigram of the sentence) plus lines whose normalised value occurs in the
    sentence; only active, newest, non-meta field lines count. Order: see module docstring.
    """
    if engine.workspace is None:
        return []
    state = engine.state
    today = engine.today()
    plain = REF_RE.sub("", sentence)
    normalized = normalize(plain)
    order: dict[tuple[str, int, int], int] = {}
    try:
        hits = state.search(plain, limit=FTS_CANDIDATES, any_term=True)
    except Exception:
        logger.exception("full-text search failed for %r", plain)
        hits = []
    for rank, hit in enumerate(hits):
        order.setdefault((hit.doc_id, hit.version, hit.line), rank)
    for kl in state.lines_with_value_in(normalized, today, limit=FTS_CANDIDATES):
        order.setdefault(kl.identity, len(hits))
    visibility = _visibility(engine, draft)
    out: list[Candidate] = []
    for doc_id, version, number in order:
        record = state.record(doc_id, version)
        newest = state.newest(doc_id)
        if record is None or newest is None or newest.version != version:
            continue
        if not state.is_active(record, today):
            continue
        doc = state.document(record)
        field_line = None if doc.is_front_matter_line(number) else doc.field_lines.get(number)
        if field_line is None or state.is_meta_field(field_line.field):
            continue
        text = doc.lines[number - 1]
        value = normalize_value(field_line.value)
        out.append(Candidate(
            doc_id, version, number, text, record.sha256, field_line.field, field_line.value,
            visible=visibility is None or visibility.visible(doc_id, version, number, text),
            value_in_sentence=bool(value) and value in normalized,
        ))
    out.sort(key=lambda c: (not c.visible, not c.value_in_sentence,
                            -len(normalize_value(c.value)) if c.value_in_sentence else 0,
                            order[(c.doc_id, c.version, c.line)], c.doc_id, c.line))
    return out[:limit]


def _visibility(engine: Engine, draft: ParsedDraft) -> Visibility | None:
    """The draft's declared context X (SPEC §6), or None when it declares none."""
    spec = draft.context
    if spec is None:
        return None
    if spec.error is not None or engine.workspace is None:
        return Visibility()
    vis = Visibility()
    if spec.kind == "units":
        for unit in spec.units:
            vis.add(unit)
        return vis
    if spec.kind == "log":
        text = engine.workspace.read_text(spec.log or "")
        if text is None:
            return vis
        try:
            units = parse_context_log(text)
        except ValueError:
            return vis
        for unit in units:
            vis.add(unit)
        return vis
    return engine.workspace.compile_query(spec, draft, engine.state)


def sentence_at(draft: ParsedDraft, line: int, column: int) -> Sentence | None:
    """The sentence holding the 0-based ``line``/code-point ``column`` (uncited ones first)."""
    cited = [Sentence(c.sentence, c.sentence_span, ()) for c in draft.claims]
    for sentence in [*draft.uncited, *cited]:
        span = sentence.span
        if span.start_line == line and span.start_col <= column <= span.end_col:
            return sentence
    return None


def citation_edits(text: str, lines: Sequence[str], sentence_span: Span,
                   candidate: Candidate) -> tuple[list[Edit], str]:
    """Edits citing ``candidate`` for the sentence at ``sentence_span``; and the new label.

    Two insertions (merged into one when they fall on the same point): ``[^N]`` before the
    sentence's final end mark, and the definition line at the end of the document.
    """
    label = new_label(text)
    line_text = lines[sentence_span.start_line] if sentence_span.start_line < len(lines) else ""
    col = sentence_span.end_col
    if col > sentence_span.start_col and line_text[col - 1:col] in tuple(SENTENCE_END) + (".",):
        col -= 1
    ref_at = (sentence_span.end_line, col)
    eol_match = LINE_BREAK.search(text)
    eol = eol_match.group(0) if eol_match else "\n"
    ends_with_break = bool(text) and text[-1] in "\r\n"
    definition = candidate.definition(label)
    if not lines:
        end = (0, 0)
        block = definition + eol
    else:
        last = lines[-1]
        blank_first = bool(last.strip()) and _DEFINITION_START.match(last) is None
        if ends_with_break:
            end = (len(lines), 0)
            block = (eol if blank_first else "") + definition + eol
        else:
            end = (len(lines) - 1, len(last))
            block = eol + (eol if blank_first else "") + definition
    reference = f"[^{label}]"
    if ref_at == end:
        return [Edit(Span(*end, *end), reference + block, f"Cite {candidate.id}")], label
    return [
        Edit(Span(*ref_at, *ref_at), reference, f"Cite {candidate.id}"),
        Edit(Span(*end, *end), block, f"Cite {candidate.id}"),
    ], label


def new_label(text: str) -> str:
    """One more than the largest numeric footnote label in ``text`` (``"1"`` when none)."""
    used = set(REF_RE.findall(text))
    numbers = [int(label) for label in used if label.isdigit()]
    n = max(numbers, default=0) + 1
    while str(n) in used:
        n += 1
    return str(n)


# ------------------------------------------------------------------------ LSP shapes


def lsp_workspace_edit(server: GroundingServer, snapshot: DocumentSnapshot,
                       edits: Sequence[Edit]) -> types.WorkspaceEdit:
    """Core edits (spans in ``snapshot``'s text) -> a ``WorkspaceEdit`` in client units.

    Uses ``documentChanges`` with the snapshot's version when the client supports it (it then
    refuses the edit if the buffer changed), else ``changes``.
    """
    text_edits = [types.TextEdit(range=_lsp_range(snapshot, e.span), new_text=e.new_text)
                  for e in edits]
    if get_capability(server.client_capabilities, "workspace.workspace_edit.document_changes", False):
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=snapshot.uri, version=snapshot.version),
            edits=list(text_edits),
        )])
    return types.WorkspaceEdit(changes={snapshot.uri: list(text_edits)})


def _lsp_range(snapshot: DocumentSnapshot, span: Span) -> types.Range:
    return snapshot.lsp_range(span)


def _intersects(a: Span, b: Span) -> bool:
    """True when the spans overlap or touch (a cursor at a finding's end counts)."""
    return (a.start_line, a.start_col) <= (b.end_line, b.end_col) and \
        (b.start_line, b.start_col) <= (a.end_line, a.end_col)


def _matching_diagnostics(finding: Finding, snapshot: DocumentSnapshot,
                          diagnostics: Sequence[types.Diagnostic]) -> list[types.Diagnostic] | None:
    wanted = _lsp_range(snapshot, finding.span)
    found = [d for d in diagnostics if d.code == finding.code and d.range == wanted]
    return found or None


def _kind_allowed(kind: str, only: Sequence[str] | None) -> bool:
    """LSP ``context.only`` filtering: kinds are hierarchical (``source`` covers ``source.fixAll``)."""
    if not only:
        return True
    return any(kind == o or kind.startswith(o + ".") for o in only)


# ------------------------------------------------------------------------- feature


def register(server: GroundingServer, state: ServerState) -> None:
    engine = state.engine
    generations: dict[str, int] = {}
    setattr(state, GENERATIONS_ATTR, generations)

    @engine.on_reports
    def remember_generation(uri: str, result: DraftResult | None) -> None:
        if result is None:
            generations.pop(uri, None)
        else:
            generations[uri] = engine.index_generation

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll],
            resolve_provider=False,
        ),
    )
    async def code_action(ls: GroundingServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        try:
            return await _code_actions(ls, state, params)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("code actions failed for %s", params.text_document.uri)
            return None


async def _code_actions(ls: GroundingServer, state: ServerState,
                        params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    result = await current_result(state, uri)
    if result is None:
        return None
    snapshot = result.snapshot
    only = [str(getattr(k, "value", k)) for k in params.context.only] if params.context.only else None
    quickfix = types.CodeActionKind.QuickFix.value
    fix_all_kind = types.CodeActionKind.SourceFixAll.value
    wanted = snapshot.core_span(params.range)
    diagnostics = list(params.context.diagnostics or [])
    findings = result.report.findings
    actions: list[types.CodeAction] = []
    touched_fixable = False

    if _kind_allowed(quickfix, only):
        for finding in findings:
            if not _intersects(finding.span, wanted):
                continue
            if finding.fix is not None and finding.name in FIXABLE:
                touched_fixable = True
                actions.append(types.CodeAction(
                    title=finding.fix.title, kind=types.CodeActionKind.QuickFix,
                    diagnostics=_matching_diagnostics(finding, snapshot, diagnostics),
                    is_preferred=True,
                    edit=lsp_workspace_edit(ls, snapshot, [finding.fix]),
                ))
            elif finding.name == "uncited-claim":
                actions.extend(await _citation_actions(ls, state, result, finding, diagnostics))

    all_edits = fix_all_edits(findings)
    if all_edits:
        edit = lsp_workspace_edit(ls, snapshot, all_edits)
        if touched_fixable and _kind_allowed(quickfix, only):
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=types.CodeActionKind.QuickFix,
                                            edit=edit))
        if _kind_allowed(fix_all_kind, only):
            actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=types.CodeActionKind.SourceFixAll,
                                            edit=edit))
    return actions


async def _citation_actions(ls: GroundingServer, state: ServerState, result: DraftResult,
                            finding: Finding, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """Up to three "Cite …" quickfixes for one GR110 sentence."""
    sentence = next((s for s in result.draft.uncited if s.span == finding.span), None)
    if sentence is None:
        return []
    candidates = await asyncio.to_thread(citation_candidates, state.engine, result.draft, sentence.text)
    snapshot = result.snapshot
    matching = _matching_diagnostics(finding, snapshot, diagnostics)
    actions = []
    for index, candidate in enumerate(candidates):
        edits, _label = citation_edits(snapshot.text, snapshot.lines, sentence.span, candidate)
        actions.append(types.CodeAction(
            title=f"Cite {candidate.id} — {candidate.text}", kind=types.CodeActionKind.QuickFix,
            diagnostics=matching, is_preferred=index == 0 and candidate.value_in_sentence,
            edit=lsp_workspace_edit(ls, snapshot, edits),
        ))
    return actions

