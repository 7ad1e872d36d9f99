"""The editor's rendering of a draft's ``field-conflict`` (GR108) findings (SPEC §7.4, §15;
docs/decisions.md "GR108 in the editor").

SPEC §7.4's message names every distinct value, and its related information lists up to 5
sources per value: the CLI, ``check --format json``, the API and MCP show exactly that. A key
such as Debian's ``License`` has 1,300 values, so in an editor that is a 143 KB message on each
of the 35 definitions citing it (6.9 MB per publication). The editor shows less, here:

- a message names at most :data:`MAX_VALUES_NAMED` values with their counts, the values of the
  draft's own cited lines first, then in the core's order (first source), then how many more
  values and sources there are and that ``grounding conflicts`` lists every source; with at
  most :data:`MAX_VALUES_NAMED` values it is the core's message unchanged;
- the first diagnostic of a key in the draft (document order) carries the key's related
  sources: the draft's cited ones first, then the first source of each named value none of
  them holds, at most :data:`MAX_RELATED_SOURCES` (the message names up to 5 sources per value
  already); each later one of the same key only its own cited source, and
  :func:`server.convert.lsp_diagnostics` adds a location pointing at the first.

Protocol-free: findings in, findings out (spans stay the core's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from grounding_core.conflicts import Conflict
from grounding_core.index import ConflictKey, KeySummary, LineIdentity, ValueGroup
from grounding_core.model import ConflictDetail, Finding, Location, Span

__all__ = ["MAX_VALUES_NAMED", "NO_SIDE", "ConflictRendering", "conflict_message", "editor_conflicts",
           "evidence_conflicts", "more_values", "ordered_values"]

MAX_VALUES_NAMED = 20
"""Distinct values a GR108 message names in the editor (every value in the CLI, SPEC §7.4)."""

MAX_RELATED_SOURCES = 100
"""Related sources on the first GR108 diagnostic of a key (``server.convert.MAX_RELATED``)."""

NO_SIDE = "; Grounding does not pick a side"
"""The end of the core's GR108 message (``grounding_core.verify``), kept after the shortened list."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConflictRendering:
    """One finding as the editor shows it. ``first`` is the span of the first GR108 finding
    of the same key in the draft when this one is a later one (its related sources are
    listed there), else None.
    """

    finding: Finding
    first: Span | None = None


def ordered_values(summary: KeySummary, cited: Sequence[LineIdentity]) -> list[ValueGroup]:
    """The key's values, those of the draft's cited lines first (in draft order), then the
    others in the core's order (first source).
    """
    return [summary.values[i] for i in _ordered(summary, _cited_groups(summary, cited)[0])]


def _cited_groups(summary: KeySummary, cited: Sequence[LineIdentity]) -> tuple[list[int], dict[LineIdentity, int]]:
    """(indexes of the values of cited lines, in draft order; position of each cited source
    in the summary's sources, value by value). One pass over the listed sources.
    """
    wanted = set(cited)
    group_of: dict[LineIdentity, int] = {}
    position: dict[LineIdentity, int] = {}
    at = 0
    for index, group in enumerate(summary.values):
        for kl in group.sources:
            if kl.identity in wanted:
                group_of.setdefault(kl.identity, index)
                position.setdefault(kl.identity, at)
            at += 1
    first: list[int] = []
    for identity in cited:
        found = group_of.get(identity)
        if found is not None and found not in first:
            first.append(found)
    return first, position


def _ordered(summary: KeySummary, first: list[int]) -> list[int]:
    taken = set(first)
    return first + [i for i in range(len(summary.values)) if i not in taken]


def more_values(groups: Sequence[ValueGroup]) -> str:
    """The tail naming the values left out: ``and N more values (M sources); `grounding
    conflicts` lists every source``.
    """
    sources = sum(group.count for group in groups)
    values = "value" if len(groups) == 1 else "values"
    noun = "source" if sources == 1 else "sources"
    return f" and {len(groups)} more {values} ({sources} {noun}); `grounding conflicts` lists every source"


def conflict_message(finding: Finding, detail: ConflictDetail) -> str:
    """The editor's message of one GR108 finding: the core's message when the key has at most
    :data:`MAX_VALUES_NAMED` values, else the first :data:`MAX_VALUES_NAMED` of
    :func:`ordered_values` in the core's wording (``Conflict.describe``), then
    :func:`more_values` and :data:`NO_SIDE`.
    """
    return _render(finding, detail).message


@dataclasses.dataclass(frozen=True, slots=True)
class _Rendered:
    """One key's editor rendering, made from one finding of it (see :func:`_render`)."""

    related: Sequence[Location]
    core_message: str
    cited: tuple[LineIdentity, ...]
    message: str
    head: tuple[Location, ...] | None
    """The first diagnostic's related sources; None when the finding's related locations do
    not line up with the summary's sources (then they are shown as the core gives them)."""
    own: dict[LineIdentity, Location]
    """The related location of each cited source among the listed ones."""


_HELD = 256
_rendered: dict[int, _Rendered] = {}
"""Renderings by the identity of the core's related tuple (memoised per key, snapshot and
cited set by ``grounding_core.verify``), so a keystroke re-renders nothing of a key with
1,300 values; at most :data:`_HELD` (then it starts over). Worker threads share it: a race
only renders twice."""


def _render(finding: Finding, detail: ConflictDetail) -> _Rendered:
    held = _rendered.get(id(finding.related)) if finding.related else None  # () is one shared object
    if (held is not None and held.related is finding.related and held.core_message is finding.message
            and held.cited == detail.cited):
        return held
    summary = detail.summary
    first, position = _cited_groups(summary, detail.cited)
    order = _ordered(summary, first)
    if len(summary.values) <= MAX_VALUES_NAMED:
        message = finding.message
    else:
        named = KeySummary(summary.key, summary.total_lines,
                           tuple(summary.values[i] for i in order[:MAX_VALUES_NAMED]))
        subject, name = summary.key
        message = (Conflict(subject, name, named).describe()
                   + more_values([summary.values[i] for i in order[MAX_VALUES_NAMED:]]) + NO_SIDE)
    related = finding.related
    starts = [0]
    for group in summary.values:
        starts.append(starts[-1] + len(group.sources))
    head: tuple[Location, ...] | None = None
    own: dict[LineIdentity, Location] = {}
    if starts[-1] == len(related):
        own = {identity: related[at] for identity, at in position.items()}
        named_at = {at for i in order[:MAX_VALUES_NAMED] for at in range(starts[i], starts[i + 1])}
        picked = [position[identity] for identity in dict.fromkeys(detail.cited)
                  if identity in position and position[identity] in named_at]
        shown = {i for i in order[:MAX_VALUES_NAMED] for at in picked if starts[i] <= at < starts[i + 1]}
        picked += [starts[i] for i in order[:MAX_VALUES_NAMED] if i not in shown and starts[i] < starts[i + 1]]
        head = tuple(related[at] for at in picked[:MAX_RELATED_SOURCES])
    rendered = _Rendered(related, finding.message, detail.cited, message, head, own)
    if related:
        if len(_rendered) >= _HELD:
            _rendered.clear()
        _rendered[id(related)] = rendered
    return rendered


def editor_conflicts(findings: Sequence[Finding]) -> list[ConflictRendering]:
    """Every finding as the editor shows it, in order: a GR108 finding that carries its
    :class:`~grounding_core.model.ConflictDetail` gets :func:`conflict_message`; the first of
    its key (in the order given: document order) gets the key's related sources (the draft's
    cited sources first, then one per named value none of them holds, at most
    :data:`MAX_RELATED_SOURCES`), each later one only
    its own cited source (if it is among the key's listed sources) and ``first`` = the span of
    the first. Other findings pass unchanged. Cost: per key, one pass over its summary's
    listed sources when the core's related tuple is new, else nothing.
    """
    out: list[ConflictRendering] = []
    firsts: dict[ConflictKey, Span] = {}
    for finding in findings:
        detail = finding.conflict
        if detail is None or finding.name != "field-conflict":
            out.append(ConflictRendering(finding))
            continue
        rendered = _render(finding, detail)
        if rendered.head is None:
            out.append(ConflictRendering(dataclasses.replace(finding, message=rendered.message)))
            continue
        key = detail.summary.key
        first = firsts.get(key)
        if first is None:
            firsts[key] = finding.span
            out.append(ConflictRendering(dataclasses.replace(finding, message=rendered.message,
                                                             related=rendered.head)))
            continue
        own = rendered.own.get(detail.own) if detail.own is not None else None
        out.append(ConflictRendering(dataclasses.replace(finding, message=rendered.message,
                                                         related=(own,) if own is not None else ()),
                                     first))
    return out


def evidence_conflicts(findings: Sequence[Finding]) -> list[ConflictRendering]:
    """An evidence file's findings as the editor shows them, in order (docs/decisions.md "GR108
    in the editor"): the first ``field-conflict`` finding of a key in the file (line order)
    keeps its related sources (``grounding_core.evidence_findings``: up to 5, other values
    first); each later one of the same key carries none and ``first`` = the span of the first
    (:func:`server.convert.lsp_diagnostics` adds the location pointing there). Messages and
    other findings pass unchanged. A key is known by its message, which the core makes once
    per key and which names the key's field and subject.

    Debian's copyright files have files with 1,000 conflicting lines of a few keys: their
    related lists were 61 % of the first refresh's 56 MB of publications.
    """
    out: list[ConflictRendering] = []
    firsts: dict[str, Span] = {}
    for finding in findings:
        if finding.name != "field-conflict" or not finding.related:
            out.append(ConflictRendering(finding))
            continue
        first = firsts.get(finding.message)
        if first is None:
            firsts[finding.message] = finding.span
            out.append(ConflictRendering(finding))
            continue
        out.append(ConflictRendering(dataclasses.replace(finding, related=()), first))
    return out
