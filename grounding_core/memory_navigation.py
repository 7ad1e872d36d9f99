"""Memory citations in the editor, protocol-free (SPEC §10, §11): targets, hover, the read-only
view of an entry and its history, completion candidates, status counts.

Positions are 0-based lines and code-point columns of the draft (``server/positions.py``
converts them); nothing here knows about LSP. Every function reads memory through a
:class:`~grounding_core.memory.MemorySource` (an index snapshot) and is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .drafts import REF_RE, ParsedDraft, parse_definition
from .memory import (
    MEMORY_PREFIX,
    MemoryEntry,
    MemorySource,
    active_of,
    entry_status,
    name_problem,
)
from .model import DraftReport, MemoryRef, Span

HASH_PREFIX = 12
"""Hex digits of a hash shown in a hover and written by completion."""

VIEW_DOC_PREFIX = MEMORY_PREFIX
"""The read-only view of ``memory:S/K`` is served under the doc_id ``memory:S/K`` of the
server's ``grounding-evidence:`` scheme, so clients that show old evidence versions show it too."""

_DEFINITION = re.compile(r"\[\^[^\]\s]+\]:(?P<space> ?)")
_TYPED = re.compile(r"memory:(?P<scope>[^\s/@\"\[\]]*)(?:/(?P<key>[^\s/@\"\[\]]*)(?:@(?P<version>[0-9]*))?)?")


@dataclass(frozen=True, slots=True)
class MemoryTarget:
    """A memory citation under the cursor: ``span`` is the reference, the definition's id or
    the JSON claim object (0-based lines, code-point columns, in the draft).
    """

    span: Span
    ref: MemoryRef
    hash_prefix: str | None
    quote: str | None


def memory_target_at(draft: ParsedDraft, line: int, col: int) -> MemoryTarget | None:
    """The memory citation at 0-based ``line`` and code-point ``col``, or None.

    Markdown: a reference ``[^label]`` whose definition cites ``memory:...`` (cursor on it or
    just after it), or any column of such a definition line. JSON: the innermost memory claim
    object holding the cursor. Malformed citations have no target (their diagnostics say why).
    """
    if not 0 <= line < len(draft.lines):
        return None
    if draft.kind == "json":
        for claim in draft.claims:
            s = claim.citation_span
            if claim.memory is not None and (s.start_line, s.start_col) <= (line, col) <= (s.end_line, s.end_col):
                return MemoryTarget(s, claim.memory, claim.hash_prefix, claim.quote)
        return None
    text = draft.lines[line]
    for m in REF_RE.finditer(text):
        if not m.start() <= col <= m.end():
            continue
        for claim in draft.claims:
            s = claim.sentence_span
            if (claim.memory is not None and claim.label == m[1] and s.start_line == line
                    and s.start_col <= m.start() and m.end() <= s.end_col):
                return MemoryTarget(Span.line(line, m.start(), m.end()), claim.memory,
                                    claim.hash_prefix, claim.quote)
    head = re.match(r"\[\^([^\]\s]+)\]:", text)
    if head is None:
        return None
    definition = parse_definition(text, line, head[1])
    if definition.memory is None:
        return None
    start = definition.span.start_col
    return MemoryTarget(Span.line(line, start, start + len(definition.id_text)), definition.memory,
                        definition.hash_prefix, definition.quote)


def _code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(body: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


def memory_hover(target: MemoryTarget, source: MemorySource) -> str:
    """The Markdown hover of a memory citation: the entry's ``KEY：VALUE``, its state and why,
    who approved it and when, the hash prefix, and for a stale citation the current entry.
    Unknown scopes, keys and versions are said so.
    """
    ref = target.ref
    versions = source.memory_versions(ref.scope, ref.key)
    head = f"**Memory entry** {_code(ref.id)} — an approved fact kept in the index, not an evidence file."
    if not versions:
        what = "scope" if not source.memory_keys(ref.scope, limit=1) else "key"
        return f"{head}\n\n**Unknown {what}:** no memory entry {_code(f'memory:{ref.scope}/{ref.key}')} exists."
    entry = versions.get(ref.version)
    if entry is None:
        return (f"{head}\n\n**Unknown version:** the newest is {_code(versions[max(versions)].id)}.")
    status, why = entry_status(versions, ref.version)
    parts = [head, _fence(entry.quote), f"Status: **{status}** — {why}."]
    when = f" ({entry.remembered_at})" if entry.remembered_at else ""
    facts = [f"remembered at event {entry.remembered_seq}{when}"]
    if entry.approved_by:
        facts.append(f"approved by {entry.approved_by} at event {entry.approved_seq}")
    if entry.forgotten_seq is not None:
        facts.append(f"forgotten at event {entry.forgotten_seq}")
    parts.append("; ".join(facts) + f"; sha256 {_code(entry.sha256[:HASH_PREFIX])}.")
    active = active_of(versions)
    if active is not None and active.version != entry.version and status != "proposal":
        parts.append(f"Current: {_code(active.id)} — {_code(active.quote)}.")
    if target.quote is not None and target.quote != entry.quote:
        parts.append(f"The citation quotes {_code(target.quote)}, not the entry.")
    return "\n\n".join(parts)


# -- the read-only view ------------------------------------------------------------------------


def view_doc_id(scope: str, key: str) -> str:
    """The doc_id under which the view of ``memory:S/K`` is served (see :data:`VIEW_DOC_PREFIX`)."""
    return f"{MEMORY_PREFIX}{scope}/{key}"


def parse_view_doc_id(doc_id: str) -> tuple[str, str] | None:
    """``(scope, key)`` of a :func:`view_doc_id`, or None for an evidence doc_id."""
    if not doc_id.startswith(MEMORY_PREFIX):
        return None
    scope, slash, key = doc_id[len(MEMORY_PREFIX):].partition("/")
    if not slash or name_problem("scope", scope) or name_problem("key", key):
        return None
    return scope, key


@dataclass(frozen=True, slots=True)
class MemoryView:
    """The text of the read-only view of one key and the 1-based line of each version in it."""

    text: str
    version_lines: dict[int, int]
    title: str


def memory_view(source: MemorySource, scope: str, key: str) -> MemoryView | None:
    """Every version of ``memory:S/K`` (newest first) with its state, then the key's history.

    None when the key is unknown. The text is Markdown, one version per line::

        # memory:客户-李华/语言 (read-only)
        ...
        - @2 语言：中文 — active: approved by 王芳
    """
    versions = source.memory_versions(scope, key)
    if not versions:
        return None
    name = view_doc_id(scope, key)
    lines = [f"# {name} (read-only)", "",
             "A memory entry (SPEC §11): an approved fact kept in the index's event log. It is",
             "changed only by `grounding memory add|approve|forget` or the editor's memory commands.",
             "", "## Versions", ""]
    at: dict[int, int] = {}
    for version in sorted(versions, reverse=True):
        entry = versions[version]
        status, why = entry_status(versions, version)
        lines.append(f"- @{version} {entry.quote} — {status}: {why}")
        at[version] = len(lines)
    lines += ["", "## History (event number, time recorded)", ""]
    for seq, when, what in _history(versions.values()):
        lines.append(f"- event {seq}" + (f" ({when})" if when else "") + f": {what}")
    return MemoryView("\n".join(lines) + "\n", at, f"{name} (memory, read-only)")


def _history(entries: Iterable[MemoryEntry]) -> list[tuple[int, str, str]]:
    """The events that made these entries, by seq (a forget that hit several versions once)."""
    rows: dict[tuple[int, str], tuple[int, str, str]] = {}
    for entry in entries:
        who = f"approved by {entry.approved_by}" if entry.approved_seq == entry.remembered_seq else "a proposal"
        rows[(entry.remembered_seq, "r")] = (entry.remembered_seq, entry.remembered_at,
                                             f"remember @{entry.version} {entry.quote} ({who})")
        if entry.approved_seq is not None and entry.approved_seq != entry.remembered_seq:
            rows[(entry.approved_seq, "a")] = (entry.approved_seq, entry.approved_at or "",
                                               f"approve @{entry.version} by {entry.approved_by}")
        if entry.forgotten_seq is not None:
            reason = f" ({entry.forget_reason})" if entry.forget_reason else ""
            rows[(entry.forgotten_seq, "f")] = (entry.forgotten_seq, entry.forgotten_at or "",
                                                f"forget every version{reason}")
    return [rows[k] for k in sorted(rows)]


# -- completion --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryCompletion:
    """One completion item: replace code-point columns ``start..end`` of the line with ``new_text``.

    ``stage`` is ``scope``, ``key`` or ``version``; ``sort`` orders the items; ``filter`` is the
    id text the edit writes (what a client matches the typed text against).
    """

    label: str
    detail: str
    documentation: str
    start: int
    end: int
    new_text: str
    stage: str
    sort: str
    preselect: bool = False
    filter: str = ""


def memory_completions(line_text: str, column: int, source: MemorySource,
                       limit: int = 200) -> list[MemoryCompletion] | None:
    """Completion on a definition line whose id starts with ``memory:`` (SPEC §10, §11).

    ``[^1]: memory:客|`` -> scopes (inserting ``memory:SCOPE/``); ``[^1]: memory:S/语|`` -> keys
    of S (inserting ``memory:S/KEY@``); ``[^1]: memory:S/K@|`` -> versions of K, newest first,
    whose acceptance rewrites the rest of the line into a verified citation
    ``memory:S/K@N sha256:HEX "K：V"``. Every edit starts at the id. None when the cursor is
    not in such an id.
    """
    match = _DEFINITION.match(line_text)
    if match is None or column < match.end():
        return None
    start = match.end()
    typed = _TYPED.fullmatch(line_text, start, column)
    if typed is None:
        return None
    pad = "" if match["space"] else " "
    scope = typed["scope"]
    if typed["key"] is None:
        return [MemoryCompletion(s, "memory scope", f"{len(source.memory_keys(s, limit=limit))} key(s)",
                                 start, column, f"{pad}{MEMORY_PREFIX}{s}/", "scope", s,
                                 filter=f"{MEMORY_PREFIX}{s}/")
                for s in source.memory_scopes(scope, limit=limit)]
    key = typed["key"]
    if typed["version"] is None:
        out = []
        for k in source.memory_keys(scope, key, limit=limit):
            active = active_of(source.memory_versions(scope, k))
            detail = active.quote if active is not None else "no active version"
            out.append(MemoryCompletion(k, detail, f"memory:{scope}/{k}", start, column,
                                        f"{pad}{MEMORY_PREFIX}{scope}/{k}@", "key", k,
                                        filter=f"{MEMORY_PREFIX}{scope}/{k}@"))
        return out
    versions = source.memory_versions(scope, key)
    typed_version = typed["version"]
    out = []
    for rank, number in enumerate(sorted(versions, reverse=True)):
        label = str(number)
        if not label.startswith(typed_version):
            continue
        entry = versions[number]
        status, why = entry_status(versions, number)
        out.append(MemoryCompletion(
            label, f"{status}: {entry.quote}", f"{entry.id} · {why}", start, len(line_text),
            f'{pad}{entry.id} sha256:{entry.sha256[:HASH_PREFIX]} "{entry.quote}"', "version",
            f"{rank:06d}", preselect=status == "active", filter=entry.id))
    return out


# -- status ------------------------------------------------------------------------------------


def memory_claim_counts(report: DraftReport) -> tuple[int, int]:
    """(memory claims, valid memory claims) of a draft report, for the status bar."""
    claims = sum(1 for c in report.claims if c.memory is not None)
    valid = sum(1 for c in report.valid_claims if c.memory is not None)
    return claims, valid


__all__ = ["MemoryCompletion", "MemoryTarget", "MemoryView", "memory_claim_counts", "memory_completions",
           "memory_hover", "memory_target_at", "memory_view", "parse_view_doc_id", "view_doc_id"]
