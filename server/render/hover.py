r"""The hover text of a draft: a citation, or the draft's declared context (SPEC §6, §8, §10).

One renderer, two entry points, both pure over their inputs (an
:class:`~grounding_core.index.IndexSnapshot`, the configuration and ``today``) and free of
protocol types; call them in a worker thread (they read the index and may count tokens).

:func:`citation_hover` — the cited line with up to two lines either side, as a fenced block
with 1-based line numbers and the cited line marked ``>``; then the title,
``doc_id@version``, the status (``active``, or ``inactive — <why>`` from
``IndexSnapshot.inactive_reason``), the version's sha256 prefix (12 hex) and the file path
relative to the workspace root. A stale citation (cited version lower than the newest) adds
the current line: the same text found in the newest version (the occurrence nearest the
cited line number), else the line of the same field (the field moved or its value changed),
or "no longer present". Unknown documents, versions and lines are said so.

:func:`context_hover` — for ``query``: the compiled context (kept and skipped units with
token costs, input tokens); for ``units``/``log``: the listed units with their state and
token costs; always the draft's output tokens against the reserve.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grounding_core.budget import ContextUnit as BudgetUnit
from grounding_core.budget import count_tokens, input_tokens, render_prompt, render_unit
from grounding_core.check import compile_query_context
from grounding_core.config import Config
from grounding_core.drafts import ContextSpec, ContextUnitSpec, ParsedDraft, parse_context_log
from grounding_core.index import IndexSnapshot, VersionRecord
from grounding_core.model import DraftReport
from grounding_core.navigate import CitationTarget, nearest_occurrence
from grounding_core.text import split_lines

__all__ = ["CONTEXT_LINES", "HASH_PREFIX", "ContextInputs", "citation_hover", "context_hover", "numbered_lines"]

CONTEXT_LINES = 2
"""Lines shown before and after the cited line."""
HASH_PREFIX = 12
"""Hex digits of a version's sha256 shown."""


# ------------------------------------------------------------------------- Markdown bits


def _fence(body: str, info: str = "text") -> str:
    """A fenced code block whose fence is longer than any backtick run inside ``body``."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _escape(text: str) -> str:
    """Escape Markdown inline syntax in plain text (titles)."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _code(text: str) -> str:
    """Inline code that survives backticks inside ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def numbered_lines(lines: Sequence[str], line: int, around: int = CONTEXT_LINES) -> str:
    """Lines ``line - around .. line + around`` (1-based, clipped) as ``"> 7 | text"`` rows.

    The cited line is marked ``>``, the others are indented to match; numbers are right
    aligned. Returns the rows joined with ``\\n`` (no fence).
    """
    first = max(1, line - around)
    last = min(len(lines), line + around)
    width = len(str(last))
    rows = []
    for number in range(first, last + 1):
        mark = ">" if number == line else " "
        rows.append(f"{mark} {number:>{width}} | {lines[number - 1]}")
    return "\n".join(rows)


def _status_text(snapshot: IndexSnapshot, record: VersionRecord, today: dt.date) -> str:
    reason = snapshot.inactive_reason(record, today)
    return "active" if reason is None else f"inactive — {reason}"


# ------------------------------------------------------------------------------ citation


def slip_hover(slip: str, hint: str, target: CitationTarget, snapshot: IndexSnapshot, config: Config,
               today: dt.date) -> str:
    """The hover of a citation id typed with an input-method slip (``refund＠2：１２``, a
    ``malformed-citation`` with a fix): the diagnostic's explanation and hint, then the
    citation hover of the id it means (``target`` holds the repaired id).
    """
    return "\n\n".join([f"**Input-method slip:** {_escape(slip)}", _escape(hint),
                         f"It means {_code(target.citation.id)}:", citation_hover(target, snapshot, config, today)])


def citation_hover(target: CitationTarget, snapshot: IndexSnapshot, config: Config, today: dt.date) -> str:
    """The Markdown hover of one citation (layout in the module docstring)."""
    ref = target.citation
    newest = snapshot.newest(ref.doc_id)
    parts: list[str] = []
    if newest is None:
        parts.append(f"**Unknown source:** no document {_code(ref.doc_id)} is in the index"
                     f" (cited as {_code(ref.id)}).")
        return "\n\n".join(parts)
    record = snapshot.record(ref.doc_id, ref.version)
    if record is None:
        if ref.version > newest.version:
            parts.append(f"**Unknown version:** {_code(ref.doc_id)} has no version {ref.version};"
                         f" the newest is version {newest.version}.")
            parts.extend(_record_facts(snapshot, newest, config, today))
            return "\n\n".join(parts)
        parts.append(f"**Stale citation:** {_code(ref.id)} cites version {ref.version}, which was"
                     f" never indexed, so its text cannot be shown; the newest is version"
                     f" {newest.version}.")
        parts.append(_current_line(snapshot, newest, target.quote, ref.line, "the quoted text"))
        parts.extend(_record_facts(snapshot, newest, config, today))
        return "\n\n".join(parts)
    doc = snapshot.document(record)
    parts.append(f"**{_escape(doc.title)}** · {_code(ref.id)}")
    if not 1 <= ref.line <= len(doc.lines):
        parts.append(f"**Unknown line:** {_code(f'{ref.doc_id}@{ref.version}')} has"
                     f" {len(doc.lines)} lines; line {ref.line} does not exist.")
        parts.extend(_record_facts(snapshot, record, config, today, target.hash_prefix))
        return "\n\n".join(parts)
    stale = record.version < newest.version
    if stale:
        parts.append(f"**Stale citation:** version {record.version} is cited; the newest is"
                     f" version {newest.version}.")
        parts.append(f"Cited line (version {record.version}):")
    parts.append(_fence(numbered_lines(doc.lines, ref.line)))
    if stale:
        old_field = None if doc.is_front_matter_line(ref.line) else doc.field_lines.get(ref.line)
        parts.append(_current_line(snapshot, newest, doc.lines[ref.line - 1], ref.line, "the same text",
                                   old_field.field if old_field is not None else None))
    if not target.used:
        parts.append("*No reference in the draft uses this definition, so it is not checked.*")
    parts.extend(_record_facts(snapshot, record, config, today, target.hash_prefix))
    return "\n\n".join(parts)


def _current_line(snapshot: IndexSnapshot, newest: VersionRecord, text: str | None, near: int,
                  what: str, field: str | None = None) -> str:
    current = snapshot.document(newest)
    lines = current.lines
    found = nearest_occurrence(lines, text, near) if text is not None else None
    if found is None and field is not None:
        same = [n for n, fl in current.field_lines.items() if fl.field == field and not current.is_front_matter_line(n)]
        if same:
            number = min(same, key=lambda n: (abs(n - near), n))
            return (f"Current line (version {newest.version}): the text is no longer present; the field"
                    f" {_code(field)} is now line {number}.\n\n" + _fence(numbered_lines(lines, number, around=0)))
    if found is None:
        return f"Current line (version {newest.version}): no longer present."
    return (f"Current line (version {newest.version}): {what} is line {found}.\n\n"
            + _fence(numbered_lines(lines, found, around=0)))


def _record_facts(snapshot: IndexSnapshot, record: VersionRecord, config: Config, today: dt.date,
                  cited_hash: str | None = None) -> list[str]:
    newest = snapshot.newest(record.doc_id)
    newest_note = f" (newest: {newest.version})" if newest is not None else ""
    sha = f"sha256: {_code(record.sha256[:HASH_PREFIX])}"
    if cited_hash and not record.sha256.startswith(cited_hash):
        sha += f" — the citation's {_code(cited_hash[:HASH_PREFIX])} does not match"
    file = config.evidence_display(record.path) if record.path else "(no file)"
    rows = [
        f"- Document: {_code(f'{record.doc_id}@{record.version}')}{newest_note}",
        f"- Status: {_status_text(snapshot, record, today)}",
        f"- {sha}",
        f"- File: {_code(file)}",
    ]
    return ["\n".join(rows)]


# ------------------------------------------------------------------------------- context


@dataclass(frozen=True, slots=True)
class ContextInputs:
    """What :func:`context_hover` reads besides the draft: one snapshot, the configuration,
    the date and a reader of files relative to the workspace root (context logs).
    """

    snapshot: IndexSnapshot
    config: Config
    today: dt.date
    read_text: Callable[[str], str | None]


def context_hover(draft: ParsedDraft, report: DraftReport | None, inputs: ContextInputs) -> str:
    """The Markdown summary of a draft's declared context (SPEC §6, §8).

    ``query``: the context compiled against ``inputs.snapshot`` — query, limit, reserve,
    encoding, input tokens, kept and skipped units with their token costs. ``units``/``log``:
    each unit with its state and its tokens rendered as a prompt unit. Always the draft's
    output tokens (``report.output_tokens``) against the reserve.
    """
    spec = draft.context
    if spec is None:
        return "**Context:** none declared, so visibility is not checked."
    if spec.error is not None:
        return f"**Context ({spec.kind}): invalid** — {spec.error}. Nothing counts as visible."
    parts = _query_summary(draft, spec, inputs) if spec.kind == "query" else _units_summary(draft, spec, inputs)
    parts.append(_output_line(report))
    return "\n\n".join(parts)


def _query_summary(draft: ParsedDraft, spec: ContextSpec, inputs: ContextInputs) -> list[str]:
    compiled = compile_query_context(inputs.snapshot, inputs.config, spec, draft.question or "", inputs.today)
    s: dict[str, Any] = compiled.summary()
    parts = [
        f"**Context (query):** {_code(str(s['query']))}",
        f"Limit {s['limit']} tokens, reserve {s['reserve']}, encoding {_code(str(s['encoding']))}.",
        f"Input: {s['input_tokens']} tokens (the prompt without units: {s['base_tokens']}).",
    ]
    for title, key in (("Kept units", "kept"), ("Skipped units", "skipped")):
        units = s[key]
        if units:
            rows = [f"- {_code(u['unit'])} — {u['tokens']} tokens" for u in units]
            parts.append(f"{title} ({len(units)}):\n" + "\n".join(rows))
        else:
            parts.append(f"{title}: none.")
    if not compiled.complete:  # ranked on the full-text rows built so far (SPEC §8)
        parts.append("Still indexing: the full-text rows are being built, so this context may keep more"
                     " units once they are; hover again in a moment.")
    return parts


def _units_summary(draft: ParsedDraft, spec: ContextSpec, inputs: ContextInputs) -> list[str]:
    units: Sequence[ContextUnitSpec] = spec.units
    head = "**Context (units)**"
    if spec.kind == "log":
        assert spec.log is not None
        head = f"**Context (log {_code(spec.log)})**"
        text = inputs.read_text(spec.log)
        if text is None:
            return [f"{head}: the log file does not exist; nothing counts as visible."]
        try:
            units = parse_context_log(text)
        except ValueError as exc:
            return [f"{head}: {exc}; nothing counts as visible."]
    rows: list[str] = []
    rendered: list[BudgetUnit] = []
    encoding = inputs.config.encoding
    for unit in units:
        row, budget_unit = _unit_row(unit, inputs)
        if budget_unit is not None:
            rendered.append(budget_unit)
            row += f" — {count_tokens(render_unit(budget_unit), encoding)} tokens"
        elif unit.text is not None:
            row += f" — {count_tokens(unit.text, encoding)} tokens"
        rows.append(row)
    parts = [f"{head}: {len(rows)} unit(s)" + (":\n" + "\n".join(rows) if rows else ".")]
    if rendered and len(rendered) == len(units):
        tokens = input_tokens(render_prompt(draft.question or "", rendered), encoding)
        parts.append(f"Input: {tokens} tokens (question and these units as a prompt, {_code(encoding)}).")
    return parts


def _unit_row(unit: ContextUnitSpec, inputs: ContextInputs) -> tuple[str, BudgetUnit | None]:
    """One unit as a bullet, plus the unit as a prompt unit when its lines are known."""
    snapshot = inputs.snapshot
    if unit.text is not None:
        name = f"{unit.doc_id}@{unit.version}"
        return f"- {_code(name)} — text, {len(split_lines(unit.text))} line(s)", None
    name = f"{unit.doc_id}@{unit.version}" + (
        "" if unit.start is None else f":{unit.start}-{unit.end or unit.start}")
    record = snapshot.record(unit.doc_id, unit.version)
    if record is None:
        why = "unknown document" if snapshot.newest(unit.doc_id) is None else f"no version {unit.version}"
        return f"- {_code(name)} — {why}", None
    lines = snapshot.document(record).lines
    start, end = (1, len(lines)) if unit.start is None else (unit.start, unit.end or unit.start)
    status = _status_text(snapshot, record, inputs.today)
    if not lines or end > len(lines):
        return f"- {_code(name)} — {status}; the version has {len(lines)} lines", None
    budget_unit = BudgetUnit(unit.doc_id, unit.version, start, end, "\n".join(lines[start - 1:end]))
    return f"- {_code(name)} — {status}", budget_unit


def _output_line(report: DraftReport | None) -> str:
    if report is None or report.output_tokens is None:
        return "Output: not counted yet."
    if report.output_reserve is None:
        return f"Output: {report.output_tokens} tokens (answer wire); no reserve declared."
    verdict = "within" if report.output_tokens <= report.output_reserve else "**over**"
    return (f"Output: {report.output_tokens} of {report.output_reserve} reserved tokens"
            f" (answer wire, {verdict} the reserve).")
