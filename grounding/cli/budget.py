"""``grounding context`` and ``grounding answer`` (SPEC §8, §9).

``answer`` builds an answer only from lines visible in a compiled context: every claim cites
a whole visible line, conflicts are reported (status ``conflict``) and never resolved, and
the answer wire is counted against the reserve (``BudgetError`` is an error, exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from grounding_core.backend import WriteFailed
from grounding_core.budget import BudgetError, ContextUnit, input_tokens, render_prompt
from grounding_core.context import compile_context
from grounding_core.drafts import ContextSpec, draft_kind, parse_draft
from grounding_core.memory import context_units as memory_context_units
from grounding_core.memory import resolve_units
from grounding_core.memory import source_of as memory_source_of
from grounding_core.question import answer_question
from grounding_core.store import ScanResult
from grounding_core.workspace import Workspace

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2

Scan = Callable[[Workspace], ScanResult]
"""How a reading command brings the index up to date: ``grounding.cli``'s scan, which
answers from the index as last committed (and says so on stderr) when it cannot be written
(a full disk) or another process holds its write lock, as ``grounding check`` does."""


def build_search(ws: Workspace) -> None:
    """Write the full-text rows still queued; on an index that cannot be written (a full
    disk), say on stderr that search sees only the rows already built, and go on.
    """
    try:
        ws.store.build_fts()
    except WriteFailed as exc:
        print(f"grounding: warning: {exc}; searching the full-text rows already built"
              f" ({ws.store.fts_pending()} content(s) not yet searchable)", file=sys.stderr)


def cmd_context(args: argparse.Namespace, ws: Workspace, scan: Scan) -> int:
    """Print a draft's compiled context: kept/skipped units, tokens per unit, totals."""
    draft_path = args.draft
    if not draft_path.is_absolute() and not draft_path.exists() and (ws.config.root / draft_path).exists():
        draft_path = ws.config.root / draft_path  # a path relative to --root, as check accepts
    rel = ws.rel(draft_path)
    text = ws.read_text(rel)
    if text is None:
        print(f"grounding: error: cannot read {args.draft}", file=sys.stderr)
        return EXIT_USAGE
    state = scan(ws).snapshot
    draft = parse_draft(text, draft_kind(rel))
    spec = draft.context
    report = ws.check_text(rel, text, state, count_output=True)
    if spec is None:
        print(f"{rel}: declares no context, so there is nothing to compile; add e.g."
              " context: {query: ..., limit: 1500, reserve: 240} to its front matter."
              f" Output: {report.output_tokens} tokens.")
        return EXIT_OK
    if spec.error is not None:
        print(f"grounding: error: {rel} has an invalid context: {spec.error}", file=sys.stderr)
        return EXIT_ERRORS
    if spec.kind == "query":
        build_search(ws)
        compiled = compile_context(state, ws.config, spec, draft.question or "", ws.today())
        summary: dict[str, Any] = compiled.summary()
    else:
        summary = _declared_summary(ws, spec, draft.question or "", state)
    summary["draft"] = rel
    summary["output_tokens"] = report.output_tokens
    summary["output_reserve"] = report.output_reserve
    if args.format == "json":
        print(json.dumps(summary, ensure_ascii=False, indent=1))
        return EXIT_OK
    print(f"{rel}: {spec.kind} context" + (f" for query {summary.get('query')!r}" if spec.kind == "query" else ""))
    for unit in summary["kept"]:
        print(f"  kept     {unit['unit']:<40} {unit['tokens']:>6} tokens")
    for unit in summary.get("skipped", []):
        print(f"  skipped  {unit['unit']:<40} {unit['tokens']:>6} tokens (did not fit)")
    for unit_id in summary.get("unresolved", []):
        print(f"  nothing  {unit_id:<40}        (names no memory entry: nothing is visible)")
    limit = summary.get("limit")
    print(f"input (the rendered prompt: instruction, question, units, +BOS/EOS) {summary['input_tokens']} tokens"
          + (f" (limit {limit})" if limit else "")
          + f"; output (this draft's answer wire, +BOS/EOS) {report.output_tokens} tokens"
          + (f" (reserve {report.output_reserve})" if report.output_reserve else ""))
    return EXIT_OK


def _declared_summary(ws: Workspace, spec: ContextSpec, question: str, state: Any) -> dict[str, Any]:
    source = memory_source_of(state)  # memory hook (SPEC §11): memory units first, with tokens
    units: list[ContextUnit] = list(memory_context_units(source, spec.memory_units))
    unresolved = [u.id for u in spec.memory_units if not resolve_units(source, [u])]
    for u in spec.units:
        record = state.record(u.doc_id, u.version)
        if record is None:
            continue
        doc = state.document(record)
        start = u.start or doc.front.end_line + 1
        end = min(u.end or len(doc.lines), len(doc.lines))
        if start > end:
            continue
        units.append(ContextUnit(u.doc_id, u.version, start, end, "\n".join(doc.lines[start - 1:end])))
    base = input_tokens(render_prompt(question, []), ws.config.encoding)
    kept = []
    for unit in units:
        cost = input_tokens(render_prompt(question, [unit]), ws.config.encoding) - base
        kept.append({"unit": unit.id, "tokens": cost})
    return {"kind": spec.kind, "encoding": ws.config.encoding, "limit": spec.limit, "reserve": spec.reserve,
            "input_tokens": input_tokens(render_prompt(question, units), ws.config.encoding),
            "kept": kept, "skipped": [], **({"unresolved": unresolved} if unresolved else {})}


def cmd_answer(args: argparse.Namespace, ws: Workspace, scan: Scan) -> int:
    """Draft an answer from visible evidence only, as Markdown or the JSON wire (SPEC §13).

    Without ``--fields`` the closed question grammar decides what the question asks. Exit 0
    whenever an answer of any status was printed (also from the index as last committed when
    it cannot be written), 1 on ``BudgetError``, 2 on usage errors.
    """
    if not args.question.strip():
        print("grounding: error: --question is empty", file=sys.stderr)
        return EXIT_USAGE
    if args.limit < 1 or args.reserve < 1:
        print("grounding: error: --limit and --reserve must be positive numbers of tokens", file=sys.stderr)
        return EXIT_USAGE
    state = scan(ws).snapshot
    build_search(ws)
    try:
        answer = answer_question(state, ws.config, ws.today(), args.question, args.fields,
                                 subject=args.subject, limit=args.limit, reserve=args.reserve)
    except BudgetError as exc:
        print(f"grounding: error GR113 output-over-budget: {exc}", file=sys.stderr)
        return EXIT_ERRORS
    print(answer.markdown() if args.format == "md" else answer.json_text(), end="")
    for conflict in answer.conflicts:
        print(f"grounding: conflict, not resolved (no side is cited): {conflict}", file=sys.stderr)
    for note in answer.notes:
        print(f"grounding: note: {note}", file=sys.stderr)
    wire = answer.wire
    summary = (f"grounding: answer: {wire.status.value}, {len(wire.claims)} claim(s),"
               f" {wire.output_tokens} of {wire.reserve} output tokens")
    if wire.skipped:
        summary += (f"; {len(wire.skipped)} claim(s) dropped for the output reserve"
                    f" ({', '.join(str(c['id']) for c in wire.skipped)}): raise --reserve to keep them")
    print(summary, file=sys.stderr)
    return EXIT_OK


