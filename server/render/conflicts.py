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
  sources (the draft's cited ones first, up to 5 per named value, at most
  :data:`server.convert.MAX_RELATED`); each later one of the same key only its own cited
  source, and :func:`server.convert.lsp_diagnostics` adds a location pointing at the first.

Protocol-free: findings in, findings out (spans stay the core's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from grounding_core.conflicts import Conflict
from grounding_core.index import ConflictKey, KeySummary, LineIdentity, ValueGroup
from grounding_core.model import ConflictDetail, Finding, Location, Span

__all__ = ["MAX_VALUES_NAMED", "NO_SIDE", "ConflictRendering", "conflict_message", "editor_conflicts",
           "more_values"]

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
    group_of = {kl.identity: group for group in summary.values for kl in group.sources}
    first: list[ValueGroup] = []
    for identity in cited:
        group = group_of.get(identity)
        if group is not None and all(group is not g for g in first):
            first.append(group)
    return first + [group for group in summary.values if all(group is not g for g in first)]


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
    summary = detail.summary
    if len(summary.values) <= MAX_VALUES_NAMED:
        return finding.message
    ordered = ordered_values(summary, detail.cited)
    named = KeySummary(summary.key, summary.total_lines, tuple(ordered[:MAX_VALUES_NAMED]))
    subject, name = summary.key
    return Conflict(subject, name, named).describe() + more_values(ordered[MAX_VALUES_NAMED:]) + NO_SIDE


def _sources(finding: Finding, detail: ConflictDetail) -> dict[LineIdentity, Location] | None:
    """The finding's related locations by the identity of the source each names, or None when
    they do not line up with the summary's sources (then the finding is shown as it is).
    """
    lines = [kl.identity for group in detail.summary.values for kl in group.sources]
    if len(lines) != len(finding.related):
        return None
    return dict(zip(lines, finding.related, strict=True))


def key_related(detail: ConflictDetail, sources: dict[LineIdentity, Location],
                limit: int = MAX_RELATED_SOURCES) -> tuple[Location, ...]:
    """The related sources of a key's first diagnostic: the draft's cited sources first (draft
    order), then up to 5 per value for the values the message names, at most ``limit``.
    """
    ordered = ordered_values(detail.summary, detail.cited)[:MAX_VALUES_NAMED]
    named = {kl.identity for group in ordered for kl in group.sources}
    picked: dict[LineIdentity, Location] = {}
    for identity in detail.cited:
        if identity in named and identity in sources:
            picked.setdefault(identity, sources[identity])
    for group in ordered:
        for kl in group.sources:
            picked.setdefault(kl.identity, sources[kl.identity])
    return tuple(picked.values())[:limit]


def editor_conflicts(findings: Sequence[Finding]) -> list[ConflictRendering]:
    """Every finding as the editor shows it, in order: a GR108 finding that carries its
    :class:`~grounding_core.model.ConflictDetail` gets :func:`conflict_message`; the first of
    its key (in the order given: document order) gets :func:`key_related`, each later one only
    its own cited source (if it is among the key's listed sources) and ``first`` = the span of
    the first. Other findings pass unchanged. Cost: per key, its summary's listed sources.
    """
    out: list[ConflictRendering] = []
    firsts: dict[ConflictKey, Span] = {}
    messages: dict[ConflictKey, str] = {}
    for finding in findings:
        detail = finding.conflict
        if detail is None or finding.name != "field-conflict":
            out.append(ConflictRendering(finding))
            continue
        key = detail.summary.key
        message = messages.get(key)
        if message is None:
            message = messages[key] = conflict_message(finding, detail)
        sources = _sources(finding, detail)
        if sources is None:
            out.append(ConflictRendering(dataclasses.replace(finding, message=message)))
            continue
        first = firsts.get(key)
        if first is None:
            firsts[key] = finding.span
            related = key_related(detail, sources)
            out.append(ConflictRendering(dataclasses.replace(finding, message=message, related=related)))
            continue
        own = sources.get(detail.own) if detail.own is not None else None
        out.append(ConflictRendering(dataclasses.replace(finding, message=message,
                                                         related=(own,) if own is not None else ()),
                                     first))
    return out
