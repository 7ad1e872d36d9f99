"""Navigation from citations to evidence and back: hover, definition, references (SPEC §10).

Requests handled here:

``textDocument/hover`` (drafts)
    On a footnote reference ``[^label]`` in a sentence, on a definition line
    ``[^label]: ID sha256:HEX "QUOTE"`` (any column of it) or inside a claim object of a
    ``*.answer.json``: the cited line with up to two lines either side, as a fenced block with
    1-based line numbers and the cited line marked ``>``; then the title, ``doc_id@version``,
    the status (``active``, or ``inactive — <why>`` from ``IndexState.inactive_reason``), the
    version's sha256 prefix (12 hex) and the file path relative to the workspace root. A stale
    citation (cited version lower than the newest) adds the current line: the same text found
    in the newest version (the nearest occurrence to the cited line number), or "no longer
    present". Unknown documents, versions and lines are said so. The hover range is the
    reference, the definition's ID, or the JSON claim object. On the draft's ``context`` key
    (Markdown front matter, key line and its indented continuation lines; JSON ``"context"``
    key) the hover is the context summary: for ``query`` the compiled context (kept and
    skipped units with token costs, input tokens), for ``units``/``log`` the listed units with
    their state and token costs; always the draft's output tokens against the reserve.

``textDocument/definition`` (drafts)
    On the same targets: the cited evidence line, range = the whole line (columns in the
    client's encoding, counted on the evidence text). The real file is returned only when the
    cited version is the newest and the file on disk still holds exactly that content (same
    sha256); otherwise (an old version, a deleted or changed file) the location is a virtual,
    read-only document ``grounding-evidence:/DOC_ID@VERSION`` (see :func:`version_uri`).

``grounding/versionText`` ``{uri}`` -> ``{uri, text, title, readOnly: true, docId, version,
path, languageId}`` or null
    The indexed text (BOM removed) of the version a ``grounding-evidence:`` URI names. A
    client registers a read-only content provider for the ``grounding-evidence`` scheme and
    fills it from this request (the VS Code extension does).

``textDocument/references`` (evidence files and ``grounding-evidence:`` documents)
    Every citation of the line under the cursor in open drafts (their editor text) and in the
    draft files on disk that are not open (``Workspace.discover_drafts``, read and parsed in a
    worker thread). The evidence file resolves to the newest indexed version whose path it is.
    A citation ``DOC_ID@V:L`` counts when it cites this exact version and line, **or** when
    line L of version V (as indexed) has exactly the same text as this line: a stale citation
    of the same line in an older version, or the same line moved, is a reference too. When
    version V was never indexed, the citation's own QUOTE stands in for the line's text. Only
    citations count (a footnote definition that no reference uses is not one, SPEC §5.1).
    Ranges are the definitions' ID-to-end-of-line spans (JSON: the claim object). With
    ``includeDeclaration`` the evidence line itself comes first.

Every handler runs its heavy work (parsing drafts, reading files, compiling contexts) in
``asyncio.to_thread`` on immutable inputs (a document snapshot and the current
``IndexState``); an exception is logged and answered with null, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote as percent_encode
from urllib.parse import unquote

import json_source_map
from lsprotocol import types
from pygls.uris import to_fs_path

from grounding_core.budget import ContextUnit as BudgetUnit
from grounding_core.budget import count_tokens, input_tokens, render_prompt, render_unit
from grounding_core.config import Config
from grounding_core.drafts import (
    REF_RE,
    ContextSpec,
    ContextUnitSpec,
    ParsedDraft,
    draft_kind,
    parse_context_log,
    parse_definition,
    parse_draft,
)
from grounding_core.model import CitationRef, DraftReport, Span
from grounding_core.state import IndexState, VersionRecord
from grounding_core.text import LineIndex, split_lines
from server.features import memory as memory_feature

if TYPE_CHECKING:
    from grounding_core.store import Store
    from server.app import GroundingServer, ServerState
    from server.documents import DocumentSnapshot
    from server.positions import PositionCodec

__all__ = [
    "VERSION_SCHEME",
    "VERSION_TEXT",
    "CitationTarget",
    "ContextTarget",
    "citation_hover",
    "citing_spans",
    "context_hover",
    "parse_version_uri",
    "register",
    "target_at",
    "version_uri",
]

logger = logging.getLogger(__name__)

VERSION_SCHEME = "grounding-evidence"
"""URI scheme of read-only evidence versions: ``grounding-evidence:/DOC_ID@VERSION``."""

VERSION_TEXT = "grounding/versionText"
"""Custom request ``{uri}`` -> ``{uri, text, title, readOnly, docId, version, path, languageId}``."""

CONTEXT_LINES = 2
"""Lines shown before and after the cited line in a hover."""

HASH_PREFIX = 12
"""Hex digits of a version's sha256 shown in a hover."""

_DEFINITION_START = re.compile(r"\[\^([^\]\s]+)\]:")
_CONTEXT_KEY = re.compile(r"context\s*:")


# ------------------------------------------------------------------------- virtual URIs


def version_uri(doc_id: str, version: int) -> str:
    """The read-only document URI of one indexed version: ``grounding-evidence:/DOC_ID@VERSION``.

    ``doc_id`` is percent-encoded as one path segment (``/`` -> ``%2F``, non-ASCII as UTF-8),
    so ``events/open-day`` version 1 is ``grounding-evidence:/events%2Fopen-day@1``. A doc_id
    never holds ``@`` (SPEC §3), so the last ``@`` separates the version.
    """
    return f"{VERSION_SCHEME}:/{percent_encode(doc_id, safe='')}@{version}"


def parse_version_uri(uri: str) -> tuple[str, int] | None:
    """``(doc_id, version)`` of a :func:`version_uri`, or None for any other URI.

    Tolerant of clients that re-encode the URI (``%40`` for ``@``, ``/`` left unencoded, an
    authority ``//``): the path is decoded first, then split at its last ``@``.
    """
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme.lower() != VERSION_SCHEME:
        return None
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    path = unquote(rest).lstrip("/")
    doc_id, at, version = path.rpartition("@")
    if not at or not doc_id or not re.fullmatch(r"[1-9][0-9]*", version):
        return None
    return doc_id, int(version)


# ------------------------------------------------------------------ targets in a draft


@dataclass(frozen=True, slots=True)
class CitationTarget:
    """A citation under the cursor: ``span`` is the reference, the definition's ID or the
    JSON claim object (0-based lines, code-point columns, in the draft).
    """

    span: Span
    citation: CitationRef
    hash_prefix: str | None
    quote: str | None
    used: bool = True


@dataclass(frozen=True, slots=True)
class ContextTarget:
    """The draft's ``context`` declaration under the cursor (key and value span)."""

    span: Span


Target = CitationTarget | ContextTarget


def target_at(draft: ParsedDraft, line: int, col: int) -> Target | None:
    """What the cursor at 0-based ``line`` and code-point ``col`` of a parsed draft points at.

    Markdown: a reference ``[^label]`` of a claim sentence (cursor on it or just after it),
    any column of a definition line, or the front matter ``context`` key block. JSON: the
    innermost claim object holding the cursor, or the ``"context"`` key. Returns None
    elsewhere and for malformed or undefined citations (their diagnostics say why).
    """
    if line < 0 or line >= len(draft.lines):
        return None
    if draft.kind == "json":
        return _json_target(draft, line, col)
    return _markdown_target(draft, line, col)


def _markdown_target(draft: ParsedDraft, line: int, col: int) -> Target | None:
    text = draft.lines[line]
    if line < draft.front_matter_lines:
        span = _front_matter_context(draft.lines, draft.front_matter_lines, line)
        return ContextTarget(span) if span is not None else None
    reference = _reference_at(draft, line, col)
    if reference is not None:
        return reference
    match = _DEFINITION_START.match(text)
    if match is None:
        return None
    label = match[1]
    definition = parse_definition(text, line, label)
    if definition.citation is None:
        return None
    used = any(c.label == label and c.citation is not None and c.citation_span.start_line == line
               for c in draft.claims)
    start = definition.span.start_col
    return CitationTarget(Span.line(line, start, start + len(definition.id_text)), definition.citation,
                          definition.hash_prefix, definition.quote, used)


def _reference_at(draft: ParsedDraft, line: int, col: int) -> CitationTarget | None:
    text = draft.lines[line]
    matches = [m for m in REF_RE.finditer(text) if m.start() <= col <= m.end()]
    matches.sort(key=lambda m: m.end() == col)  # on a reference beats just after one
    for m in matches:
        if m.start() > 0 and text[m.start() - 1] == "\\":
            continue
        for claim in draft.claims:
            s = claim.sentence_span
            if (claim.label == m[1] and s.start_line == line and s.start_col <= m.start()
                    and m.end() <= s.end_col):
                if claim.citation is None:
                    return None
                return CitationTarget(Span.line(line, m.start(), m.end()), claim.citation,
                                      claim.hash_prefix, claim.quote)
    return None


def _front_matter_context(lines: Sequence[str], front_lines: int, line: int) -> Span | None:
    """The ``context:`` key line plus its indented continuation lines, if ``line`` is in it."""
    last_content = front_lines - 2  # lines[front_lines - 1] is the closing ---
    if not 1 <= line <= last_content:
        return None
    key = line
    while key > 1 and lines[key][:1] in (" ", "\t"):
        key -= 1
    if not _CONTEXT_KEY.match(lines[key]):
        return None
    end = key
    while end + 1 <= last_content and lines[end + 1][:1] in (" ", "\t"):
        end += 1
    if line > end:
        return None
    return Span(key, 0, end, len(lines[end]))


def _json_target(draft: ParsedDraft, line: int, col: int) -> Target | None:
    inside = [c for c in draft.claims if _contains(c.citation_span, line, col)]
    inside.sort(key=lambda c: (c.citation_span.start_line, c.citation_span.start_col), reverse=True)
    for claim in inside:
        if claim.citation is None:
            return None
        return CitationTarget(claim.citation_span, claim.citation, claim.hash_prefix, claim.quote)
    try:
        entry = json_source_map.calculate(draft.text).get("/context")
    except Exception:  # the library raises its own types on JSON it cannot map
        return None
    if entry is None or entry.key_start is None or entry.key_end is None:
        return None
    index = LineIndex(draft.text)
    a = index.position(entry.key_start.position)
    b = index.position(entry.key_end.position)
    key = Span(a[0], a[1], b[0], b[1])
    if not _contains(key, line, col):
        return None
    end = index.position(entry.value_end.position)
    return ContextTarget(Span(a[0], a[1], end[0], end[1]))


def _contains(span: Span, line: int, col: int) -> bool:
    return (span.start_line, span.start_col) <= (line, col) <= (span.end_line, span.end_col)


# ----------------------------------------------------------------------- hover content


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


def _status_text(state: IndexState, record: VersionRecord, today: dt.date) -> str:
    reason = state.inactive_reason(record, today)
    return "active" if reason is None else f"inactive — {reason}"


def _nearest_occurrence(lines: Sequence[str], text: str, near: int) -> int | None:
    """The 1-based number of the line equal to ``text`` nearest to ``near`` (earlier wins ties)."""
    found = [n for n, line in enumerate(lines, start=1) if line == text]
    if not found:
        return None
    return min(found, key=lambda n: (abs(n - near), n))


def citation_hover(target: CitationTarget, state: IndexState, config: Config, today: dt.date) -> str:
    """The Markdown hover of one citation (see the module docstring for the layout). Pure."""
    ref = target.citation
    versions = state.versions(ref.doc_id)
    newest = state.newest(ref.doc_id)
    parts: list[str] = []
    if newest is None:
        parts.append(f"**Unknown source:** no document {_code(ref.doc_id)} is in the index"
                     f" (cited as {_code(ref.id)}).")
        return "\n\n".join(parts)
    record = versions.get(ref.version)
    if record is None:
        if ref.version > newest.version:
            parts.append(f"**Unknown version:** {_code(ref.doc_id)} has no version {ref.version};"
                         f" the newest is version {newest.version}.")
            parts.extend(_record_facts(state, newest, config, today))
            return "\n\n".join(parts)
        parts.append(f"**Stale citation:** {_code(ref.id)} cites version {ref.version}, which was"
                     f" never indexed, so its text cannot be shown; the newest is version"
                     f" {newest.version}.")
        parts.append(_current_line(state, newest, target.quote, ref.line, "the quoted text"))
        parts.extend(_record_facts(state, newest, config, today))
        return "\n\n".join(parts)
    doc = state.document(record)
    parts.append(f"**{_escape(doc.title)}** · {_code(ref.id)}")
    if not 1 <= ref.line <= len(doc.lines):
        parts.append(f"**Unknown line:** {_code(f'{ref.doc_id}@{ref.version}')} has"
                     f" {len(doc.lines)} lines; line {ref.line} does not exist.")
        parts.extend(_record_facts(state, record, config, today, target.hash_prefix))
        return "\n\n".join(parts)
    stale = record.version < newest.version
    if stale:
        parts.append(f"**Stale citation:** version {record.version} is cited; the newest is"
                     f" version {newest.version}.")
        parts.append(f"Cited line (version {record.version}):")
    parts.append(_fence(numbered_lines(doc.lines, ref.line)))
    if stale:
        parts.append(_current_line(state, newest, doc.lines[ref.line - 1], ref.line, "the same text"))
    if not target.used:
        parts.append("*No reference in the draft uses this definition, so it is not checked.*")
    parts.extend(_record_facts(state, record, config, today, target.hash_prefix))
    return "\n\n".join(parts)


def _current_line(state: IndexState, newest: VersionRecord, text: str | None, near: int,
                  what: str) -> str:
    lines = state.document(newest).lines
    found = _nearest_occurrence(lines, text, near) if text is not None else None
    if found is None:
        return f"Current line (version {newest.version}): no longer present."
    return (f"Current line (version {newest.version}): {what} is line {found}.\n\n"
            + _fence(numbered_lines(lines, found, around=0)))


def _record_facts(state: IndexState, record: VersionRecord, config: Config, today: dt.date,
                  cited_hash: str | None = None) -> list[str]:
    newest = state.newest(record.doc_id)
    newest_note = f" (newest: {newest.version})" if newest is not None else ""
    sha = f"sha256: {_code(record.sha256[:HASH_PREFIX])}"
    if cited_hash and not record.sha256.startswith(cited_hash):
        sha += f" — the citation's {_code(cited_hash[:HASH_PREFIX])} does not match"
    file = config.evidence_display(record.path) if record.path else "(no file)"
    rows = [
        f"- Document: {_code(f'{record.doc_id}@{record.version}')}{newest_note}",
        f"- Status: {_status_text(state, record, today)}",
        f"- {sha}",
        f"- File: {_code(file)}",
    ]
    return ["\n".join(rows)]


# ---------------------------------------------------------------------- context summary


@dataclass(frozen=True, slots=True)
class ContextInputs:
    """What :func:`context_hover` reads: the workspace pieces and the draft's report."""

    store: Store
    state: IndexState
    config: Config
    today: dt.date
    read_text: Callable[[str], str | None]


def context_hover(draft: ParsedDraft, report: DraftReport | None, inputs: ContextInputs) -> str:
    """The Markdown summary of a draft's declared context (SPEC §6, §8).

    ``query``: the compiled context (:func:`grounding_core.context.compile_context`): query,
    limit, reserve, encoding, input tokens, kept and skipped units with their token costs.
    ``units``/``log``: each unit with its state and its tokens rendered as a prompt unit.
    Always the draft's output tokens (``report.output_tokens``) against the reserve.
    Reads the index and, for ``log``, the log file: call it in a worker thread.
    """
    spec = draft.context
    if spec is None:
        return "**Context:** none declared, so visibility is not checked."
    if spec.error is not None:
        return f"**Context ({spec.kind}): invalid** — {spec.error}. Nothing counts as visible."
    if spec.kind == "query":
        parts = _query_summary(draft, spec, inputs)
    else:
        parts = _units_summary(draft, spec, inputs)
    parts.append(_output_line(report))
    return "\n\n".join(parts)


def _query_summary(draft: ParsedDraft, spec: ContextSpec, inputs: ContextInputs) -> list[str]:
    from grounding_core.context import compile_context

    compiled = compile_context(inputs.store, inputs.state, inputs.config, spec, draft.question or "",
                               inputs.today)
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
    state = inputs.state
    if unit.text is not None:
        name = f"{unit.doc_id}@{unit.version}"
        return f"- {_code(name)} — text, {len(split_lines(unit.text))} line(s)", None
    name = f"{unit.doc_id}@{unit.version}" + (
        "" if unit.start is None else f":{unit.start}-{unit.end or unit.start}")
    record = state.record(unit.doc_id, unit.version)
    if record is None:
        why = "unknown document" if state.newest(unit.doc_id) is None else f"no version {unit.version}"
        return f"- {_code(name)} — {why}", None
    lines = state.document(record).lines
    start, end = (1, len(lines)) if unit.start is None else (unit.start, unit.end or unit.start)
    status = _status_text(state, record, inputs.today)
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


# ------------------------------------------------------------------- evidence locations


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """Where a cited line lives: ``uri`` (a file or :func:`version_uri`), the lines of that
    text (no terminators) and the 1-based ``line``.
    """

    uri: str
    lines: tuple[str, ...]
    line: int
    virtual: bool

    def range(self, codec: PositionCodec) -> types.Range:
        """The whole line as an LSP range in the client's encoding."""
        text = self.lines[self.line - 1]
        return codec.lsp_range(Span.line(self.line - 1, 0, len(text)), self.lines)


def locate(citation: CitationRef, state: IndexState, evidence_root: Path,
           file_uri: Callable[[str], str]) -> EvidenceLine | None:
    """The evidence line a citation points at, or None if the version or line is unknown.

    The real file only when the version is the newest and the file's bytes still hash to the
    version's sha256; otherwise the read-only :func:`version_uri`. Reads the file: call it in
    a worker thread.
    """
    record = state.record(citation.doc_id, citation.version)
    if record is None:
        return None
    lines = state.document(record).lines
    if not 1 <= citation.line <= len(lines):
        return None
    newest = state.newest(citation.doc_id)
    if newest is not None and newest.version == record.version and _file_holds(evidence_root, record):
        return EvidenceLine(file_uri(record.path), lines, citation.line, False)
    return EvidenceLine(version_uri(record.doc_id, record.version), lines, citation.line, True)


def _file_holds(evidence_root: Path, record: VersionRecord) -> bool:
    if not record.path:
        return False
    try:
        data = (evidence_root / record.path).read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == record.sha256


# ------------------------------------------------------------------------- references


def citing_spans(draft: ParsedDraft, doc_id: str, version: int, line: int, line_text: str,
                 state: IndexState) -> list[Span]:
    """Spans of the citations in ``draft`` that cite ``doc_id`` line ``line`` of ``version``.

    A citation ``doc_id@V:L`` counts when ``(V, L) == (version, line)`` or when line L of
    version V has exactly ``line_text`` (version V never indexed: the citation's quote is
    compared instead). Spans are the definitions' ID-to-EOL spans (JSON: the claim object),
    sorted and without duplicates. Pure.
    """
    found: set[Span] = set()
    for claim in draft.claims:
        ref = claim.citation
        if ref is None or ref.doc_id != doc_id:
            continue
        if (ref.version, ref.line) == (version, line) or _cited_text(ref, claim.quote, state) == line_text:
            found.add(claim.citation_span)
    return sorted(found)


def _cited_text(ref: CitationRef, quote: str | None, state: IndexState) -> str | None:
    record = state.record(ref.doc_id, ref.version)
    if record is None:
        return quote
    lines = state.document(record).lines
    return lines[ref.line - 1] if 1 <= ref.line <= len(lines) else None


def record_for_path(state: IndexState, rel: str) -> VersionRecord | None:
    """The newest indexed version whose file is ``rel`` (relative to the evidence root);
    a version still on disk (not deleted) wins over a deleted one.
    """
    best: VersionRecord | None = None
    for doc_id in state.doc_ids():
        for record in state.versions(doc_id).values():
            if record.path != rel:
                continue
            key = (record.reason != "deleted", record.version)
            if best is None or key > (best.reason != "deleted", best.version):
                best = record
    return best


# ---------------------------------------------------------------------------- handlers

R = TypeVar("R")


def _logged(name: str) -> Callable[[Callable[..., Awaitable[R | None]]], Callable[..., Awaitable[R | None]]]:
    """Log (never raise) a handler's failure and answer null, so the server keeps serving."""

    def wrap(handler: Callable[..., Awaitable[R | None]]) -> Callable[..., Awaitable[R | None]]:
        @functools.wraps(handler)
        async def run(ls: GroundingServer, params: Any) -> R | None:
            try:
                return await handler(ls, params)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s failed", name)
                return None

        return run

    return wrap


def _markup_kind(ls: GroundingServer) -> types.MarkupKind:
    caps = ls.client_capabilities
    hover = caps.text_document.hover if caps and caps.text_document else None
    formats = hover.content_format if hover is not None else None
    if formats and types.MarkupKind.Markdown not in formats:
        return types.MarkupKind.PlainText
    return types.MarkupKind.Markdown


def register(server: GroundingServer, state: ServerState) -> None:
    """Register hover, definition, references and ``grounding/versionText`` (SPEC §10)."""
    engine = state.engine

    async def open_draft(uri: str) -> tuple[DocumentSnapshot, ParsedDraft, str] | None:
        """The open draft ``uri``: snapshot, parse (reused from the last check when current)."""
        await engine.indexed.wait()
        snapshot = state.snapshot(uri)
        rel = engine.draft_rel(uri)
        if snapshot is None or rel is None:
            return None
        result = engine.result_for(uri)
        if result is not None and result.snapshot.text == snapshot.text:
            return snapshot, result.draft, rel
        draft = await asyncio.to_thread(parse_draft, snapshot.text, draft_kind(rel))
        return snapshot, draft, rel

    def current_report(uri: str, snapshot: DocumentSnapshot, rel: str) -> DraftReport:
        """The draft's report for exactly this text (worker thread)."""
        result = engine.result_for(uri)
        if result is not None and result.snapshot.text == snapshot.text:
            return result.report
        return engine.check_snapshot(snapshot, rel).report

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_logged("hover")
    async def hover(ls: GroundingServer, params: types.HoverParams) -> types.Hover | None:
        opened = await open_draft(params.text_document.uri)
        if opened is None or engine.workspace is None:
            return None
        snapshot, draft, rel = opened
        line, col = snapshot.codec.core_position(params.position, snapshot.lines)
        memory_hover = await asyncio.to_thread(  # memory hook (SPEC §11): server/features/memory.py
            memory_feature.hover, snapshot, draft, line, col, engine.state, _markup_kind(ls))
        if memory_hover is not None:
            return memory_hover
        target = await asyncio.to_thread(target_at, draft, line, col)
        if target is None:
            return None
        ws, index, today = engine.workspace, engine.state, engine.today()
        if isinstance(target, CitationTarget):
            text = await asyncio.to_thread(citation_hover, target, index, ws.config, today)
        else:
            inputs = ContextInputs(ws.store, index, ws.config, today, ws.read_text)

            def summary() -> str:
                report = current_report(snapshot.uri, snapshot, rel)
                return context_hover(draft, report, inputs)

            text = await asyncio.to_thread(summary)
        return types.Hover(
            contents=types.MarkupContent(kind=_markup_kind(ls), value=text),
            range=snapshot.lsp_range(target.span),
        )

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @_logged("definition")
    async def definition(ls: GroundingServer, params: types.DefinitionParams) -> list[types.Location] | None:
        opened = await open_draft(params.text_document.uri)
        if opened is None or engine.workspace is None:
            return None
        snapshot, draft, _rel = opened
        line, col = snapshot.codec.core_position(params.position, snapshot.lines)
        memory_location = await asyncio.to_thread(  # memory hook (SPEC §11)
            memory_feature.definition, snapshot, draft, line, col, engine.state)
        if memory_location is not None:
            return memory_location
        target = await asyncio.to_thread(target_at, draft, line, col)
        if not isinstance(target, CitationTarget):
            return None
        found = await asyncio.to_thread(locate, target.citation, engine.state,
                                        engine.workspace.config.evidence_root, engine.evidence_uri)
        if found is None:
            return None
        return [types.Location(uri=found.uri, range=found.range(snapshot.codec))]

    @server.feature(VERSION_TEXT)
    @_logged(VERSION_TEXT)
    async def version_text(ls: GroundingServer, params: Any) -> dict[str, Any] | None:
        uri = params["uri"] if isinstance(params, dict) else params.uri
        parsed = parse_version_uri(uri)
        if parsed is None:
            return None
        await engine.indexed.wait()
        index = engine.state
        memory_text = await asyncio.to_thread(memory_feature.version_text, *parsed, index)  # memory hook
        if memory_text is not None:
            return memory_text or None
        record = index.record(*parsed)
        if record is None:
            return None
        doc = index.document(record)
        config = engine.config
        return {
            "uri": version_uri(record.doc_id, record.version),
            "text": record.text,
            "title": f"{doc.title} ({record.doc_id}@{record.version}, read-only)",
            "readOnly": True,
            "docId": record.doc_id,
            "version": record.version,
            "path": config.evidence_display(record.path) if config and record.path else record.path,
            "languageId": "markdown" if record.path.endswith(".md") else "plaintext",
        }

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    @_logged("references")
    async def references(ls: GroundingServer, params: types.ReferenceParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        await engine.indexed.wait()
        ws = engine.workspace
        if ws is None:
            return None
        index = engine.state
        parsed = parse_version_uri(uri)
        if parsed is not None:
            record = index.record(*parsed)
        else:
            rel = engine.evidence_rel(uri)
            record = record_for_path(index, rel) if rel is not None else None
        if record is None:
            return None
        lines = index.document(record).lines
        line = params.position.line + 1
        if not 1 <= line <= len(lines):
            return None
        line_text = lines[line - 1]
        codec = state.codec

        open_drafts: list[tuple[str, DocumentSnapshot, str]] = []
        for doc_uri in list(ls.workspace.text_documents):
            rel_draft = engine.draft_rel(doc_uri)
            snap = state.snapshot(doc_uri)
            if rel_draft is not None and snap is not None:
                open_drafts.append((doc_uri, snap, rel_draft))
        open_paths = {_fs_key(u) for u, _, _ in open_drafts}

        def collect() -> list[types.Location]:
            out: list[types.Location] = []
            for doc_uri, snap, rel_draft in open_drafts:
                draft = parse_draft(snap.text, draft_kind(rel_draft))
                out.extend(types.Location(uri=doc_uri, range=codec.lsp_range(span, draft.lines))
                           for span in citing_spans(draft, record.doc_id, record.version, line,
                                                    line_text, index))
            for rel_draft in ws.discover_drafts():
                file_uri = engine.root_uri_of(rel_draft)
                if _fs_key(file_uri) in open_paths:
                    continue
                text = ws.read_text(rel_draft)
                if text is None:
                    continue
                draft = parse_draft(text, draft_kind(rel_draft))
                out.extend(types.Location(uri=file_uri, range=codec.lsp_range(span, draft.lines))
                           for span in citing_spans(draft, record.doc_id, record.version, line,
                                                    line_text, index))
            return out

        found = await asyncio.to_thread(collect)
        found.sort(key=lambda loc: (loc.uri, loc.range.start.line, loc.range.start.character))
        if params.context.include_declaration:
            whole = codec.lsp_range(Span.line(line - 1, 0, len(line_text)), lines)
            found.insert(0, types.Location(uri=uri, range=whole))
        return found


def _fs_key(uri: str) -> str:
    """A comparable key for a file URI (its decoded file-system path), else the URI itself."""
    path = to_fs_path(uri)
    return str(Path(path)) if path else uri
