"""Checking a text against one frozen :class:`~grounding_core.index.IndexSnapshot` (SPEC §6-§8).

The language server (and any caller holding a snapshot rather than a store) goes through
these functions only: everything they read comes from the snapshot they are handed, the
configuration and ``today``, so a check made while the indexer writes the next state sees
one consistent index, and a ``query`` context is compiled against the *same* snapshot as
the claims it makes visible (``--at N`` is exact).

Pure except for ``read_text`` (a context ``log`` file, read relative to the workspace root by
the caller's function) and the tokenizer; never touches the store. Safe to call in any
thread.

A ``query`` context searches the snapshot's full-text rows; while they are still being
built (``IndexSnapshot.search_complete`` False) the compiled context says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import Config
from .drafts import ContextSpec, ParsedDraft, draft_kind, parse_context_log, parse_draft
from .index import IndexSnapshot
from .memory import log_units as memory_log_units
from .model import DraftReport
from .verify import Visibility, check_draft, resolve_context

if TYPE_CHECKING:
    from .answer import AnswerDraft
    from .context import CompiledContext
    from .image_questions import MeasuredAnswer

ReadText = Callable[[str], "str | None"]
"""Reads a UTF-8 file relative to the workspace root (BOM removed); None when it cannot."""


@dataclass(frozen=True)
class CheckResult:
    """One draft text parsed and checked: the parse (spans in ``text``) and the report."""

    draft: ParsedDraft
    report: DraftReport


def check_text(text: str, rel: str, snapshot: IndexSnapshot, config: Config, today: dt.date,
               read_text: ReadText | None = None) -> CheckResult:
    """Parse ``text`` as the draft at ``rel`` (relative to the workspace root; its suffix picks
    Markdown or JSON, SPEC §5) and run every SPEC §7 check against ``snapshot`` on ``today``.

    A ``query`` context is compiled against ``snapshot`` (SPEC §8). Never raises for a bad
    draft: problems are findings.
    """
    draft = parse_draft(text, draft_kind(rel))
    return CheckResult(draft, check_parsed(draft, rel, snapshot, config, today, read_text))


def check_parsed(draft: ParsedDraft, rel: str, snapshot: IndexSnapshot, config: Config,
                 today: dt.date, read_text: ReadText | None = None) -> DraftReport:
    """:func:`check_text` for a draft parsed already (output tokens, SPEC §8, always counted)."""
    with snapshot.reading():
        context = resolve_context(draft, snapshot, config, today, read_text)
        return check_draft(draft, snapshot, config, today, rel, context=context, count_output=True)


def compile_query_context(snapshot: IndexSnapshot, config: Config, spec: ContextSpec,
                          question: str, today: dt.date) -> CompiledContext:
    """Compile a ``{query, limit, reserve}`` context (SPEC §8) against ``snapshot``.

    Units are ranked by ``snapshot.search`` (the full-text rows of versions active in that
    snapshot), then packed. Deterministic for one snapshot, question and budget.
    """
    from .context import compile_context

    return compile_context(snapshot, config, spec, question, today)


def resolve_visibility(draft: ParsedDraft, snapshot: IndexSnapshot, config: Config, today: dt.date,
                       read_text: ReadText | None = None) -> Visibility | None:
    """The draft's declared context X as a membership test (SPEC §6), or None when it declares
    none. A context that cannot be used (bad value, unreadable log) makes nothing visible, as
    the check does (``invalid-context``).
    """
    spec = draft.context
    if spec is None:
        return None
    vis = Visibility()
    if spec.error is not None:
        return vis
    vis.memory.extend(spec.memory_units)  # memory hook (SPEC §11): memory units of X
    if spec.kind == "units":
        for unit in spec.units:
            vis.add(unit)
        return vis
    if spec.kind == "log":
        text = read_text(spec.log or "") if read_text is not None else None
        if text is None:
            return vis
        try:
            units = parse_context_log(text)
            vis.memory.extend(memory_log_units(text))
        except ValueError:
            return vis
        for unit in units:
            vis.add(unit)
        return vis
    return compile_query_context(snapshot, config, spec, draft.question or "", today).visibility()


def answer_from(snapshot: IndexSnapshot, config: Config, today: dt.date, question: str,
                fields: list[str], subject: str | None = None, limit: int = 1500,
                reserve: int = 240) -> AnswerDraft | MeasuredAnswer:
    """SPEC §8, §13 ``grounding answer`` against ``snapshot``: an answer from visible lines only.

    Without ``fields`` the closed question grammar decides what ``question`` asks
    (``grounding_core.question``); the result's ``facts`` carry ``reason``, ``support_scope``,
    ``same_key_sources_checked`` and, when they apply, ``conflict_evidence``,
    ``unsupported_terms`` and ``subjects``. Raises ``budget.BudgetError`` when even the empty
    shell does not fit in ``reserve``.
    """
    from .question import answer_question

    return answer_question(snapshot, config, today, question, fields, subject, limit, reserve)


__all__ = ["CheckResult", "ReadText", "answer_from", "check_parsed", "check_text",
           "compile_query_context", "resolve_visibility"]
