"""The conflict gate (SPEC §7.4): it reads the whole active index and never picks a side.

Values are compared under one explicit rule, :func:`grounding_core.text.normalize` (NFKC,
all whitespace removed), so ``周四16:30``, ``周四 16:30`` and ``周四１６:３０`` agree while
``周三16:30`` conflicts. The rule is for this comparison only; quotes stay verbatim.

A check reads each checked key's :class:`~grounding_core.index.KeySummary` (every distinct
value with its count and at most 5 sources, the draft's cited sources first): one indexed
query per key, so a key shared by 17,000 lines costs one query and stays one readable
finding. ``grounding conflicts`` (corpus-wide) reads every source of every conflicting key.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .images import attribute_of_line, is_image_path
from .index import ConflictKey, IndexSnapshot, KeyedLine, KeySummary, LineIdentity
from .text import shorten

SOURCES_PER_VALUE = 5
"""Related sources listed per distinct value (SPEC §7.4)."""

IDS_UP_TO = 6
"""A conflict message names its sources' ids when the key has at most this many values."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two or more distinct normalised values for one key among active lines.

    ``summary`` holds every value with its count and up to 5 sources (cited first);
    ``lines`` every source, in (doc_id, version, line) order, when the caller asked for them
    (``grounding conflicts``), else empty.
    """

    subject: str | None
    field: str
    summary: KeySummary
    lines: tuple[KeyedLine, ...] = ()

    @property
    def values(self) -> list[str]:
        """Distinct values as written (first spelling of each normalised value), in order of
        their first source.
        """
        return [group.spelled for group in self.summary.values]

    def related_lines(self) -> list[KeyedLine]:
        """The related sources of SPEC §7.4: for each value, up to 5 (cited first)."""
        return [kl for group in self.summary.values for kl in group.sources]

    def describe(self) -> str:
        """One sentence naming every distinct value with its count of sources (SPEC §7.4);
        with at most :data:`IDS_UP_TO` values, also the ids of the sources listed as related
        information (at most 5 per value), so a key with thousands of values stays readable.
        """
        parts = []
        with_ids = len(self.summary.values) <= IDS_UP_TO
        for group in self.summary.values:
            noun = "source" if group.count == 1 else "sources"
            if not with_ids:
                parts.append(f"'{shorten(group.spelled)}' ({group.count} {noun})")
                continue
            shown = ", ".join(source_id(kl) for kl in group.sources)
            more = group.count - len(group.sources)
            parts.append(f"'{shorten(group.spelled)}' ({group.count} {noun}: {shown}"
                         + (f" and {more} more" if more > 0 else "") + ")")
        where = f" for subject '{shorten(self.subject)}'" if self.subject is not None else ""
        return f"active sources disagree on '{shorten(self.field)}'{where}: " + " vs ".join(parts)


def source_id(kl: KeyedLine) -> str:
    """``doc_id@version:line``, or ``doc_id@version#rN`` for an image attribute (SPEC §12)."""
    if is_image_path(kl.path):
        return f"{kl.doc_id}@{kl.version}#r{attribute_of_line(kl.line)[0]}"
    return f"{kl.doc_id}@{kl.version}:{kl.line}"


@dataclass(frozen=True)
class GateResult:
    """Conflicts found, the keys checked with their line counts (``totals``), and
    ``lines_checked`` = ``same_key_sources_checked`` (distinct active lines read; keys never
    share a line, so it is the sum of the totals).
    """

    conflicts: tuple[Conflict, ...]
    keys: tuple[ConflictKey, ...]
    totals: dict[ConflictKey, int] = field(default_factory=dict)

    @property
    def lines_checked(self) -> int:
        return sum(self.totals.values())


def check_keys(snapshot: IndexSnapshot, keys: Iterable[ConflictKey], today: dt.date,
               cited: Mapping[ConflictKey, Sequence[LineIdentity]] | None = None) -> GateResult:
    """Summarise every active line of each key (once per key); ≥ 2 distinct values is a
    conflict. ``cited`` (the draft's cited lines by their key) come first among their
    value's related sources.
    """
    by_key = cited or {}
    conflicts: list[Conflict] = []
    done: list[ConflictKey] = []
    totals: dict[ConflictKey, int] = {}
    for key in keys:
        if key in totals:
            continue
        summary = snapshot.key_summary(key, today, by_key.get(key, ()), SOURCES_PER_VALUE)
        totals[key] = summary.total_lines
        done.append(key)
        if summary.conflicting:
            conflicts.append(Conflict(key[0], key[1], summary))
    return GateResult(tuple(conflicts), tuple(done), totals)


def all_conflicts(snapshot: IndexSnapshot, today: dt.date, with_lines: bool = True,
                  keys: Iterable[ConflictKey] | None = None) -> list[Conflict]:
    """Every conflicting key of the whole active index (``grounding conflicts``), sorted by
    (field, subject). Corpus-wide; ``with_lines`` also reads every source of each key.
    ``keys``: ``snapshot.conflicting_keys(today)`` when the caller has it already (the
    CLI's from ``Store.conflicting_keys``, which keeps it for the next process).
    """
    found = []
    for subject, name in snapshot.conflicting_keys(today) if keys is None else keys:
        summary = snapshot.key_summary((subject, name), today, (), SOURCES_PER_VALUE)
        lines = tuple(snapshot.key_lines((subject, name), today)) if with_lines else ()
        found.append(Conflict(subject, name, summary, lines))
    return found
