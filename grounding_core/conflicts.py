"""The conflict gate (SPEC §7.4): it reads the whole active index and never picks a side.

Values are compared under one explicit rule, :func:`grounding_core.text.normalize` (NFKC,
all whitespace removed), so ``周四16:30``, ``周四 16:30`` and ``周四１６:３０`` agree while
``周三16:30`` conflicts. The rule is for this comparison only; quotes stay verbatim.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from .index import KeyedLine
from .state import IndexState
from .text import normalize, shorten


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two or more distinct normalised values for one key among active lines."""

    subject: str | None
    field: str
    lines: tuple[KeyedLine, ...]

    @property
    def values(self) -> list[str]:
        """Distinct values as written (first spelling of each normalised value), in line order."""
        seen: dict[str, str] = {}
        for kl in self.lines:
            seen.setdefault(normalize(kl.value), kl.value)
        return list(seen.values())

    def describe(self, ids_per_value: int = 5, max_values: int = 6) -> str:
        """One sentence naming the values and where they come from.

        At most ``max_values`` values, each with at most ``ids_per_value`` citation ids, are
        named, then how many more there are: a key shared by thousands of lines still gives
        a readable message (related information lists the sources).
        """
        by_value: dict[str, list[KeyedLine]] = {}
        spelled: dict[str, str] = {}
        normalised: dict[str, str] = {}  # each distinct spelling normalised once
        for kl in self.lines:
            key = normalised.get(kl.value)
            if key is None:
                key = normalised[kl.value] = normalize(kl.value)
            spelled.setdefault(key, kl.value)
            by_value.setdefault(key, []).append(kl)
        parts = []
        for key, lines in list(by_value.items())[:max_values]:
            shown = ", ".join(f"{kl.doc_id}@{kl.version}:{kl.line}" for kl in lines[:ids_per_value])
            if len(lines) > ids_per_value:
                shown += f" and {len(lines) - ids_per_value} more"
            parts.append(f"'{shorten(spelled[key])}' ({shown})")
        if len(by_value) > max_values:
            parts.append(f"{len(by_value) - max_values} more values")
        where = f" for subject '{shorten(self.subject)}'" if self.subject is not None else ""
        return f"active sources disagree on '{shorten(self.field)}'{where}: " + " vs ".join(parts)


@dataclass(frozen=True)
class GateResult:
    """Conflicts found and the distinct active lines read (``same_key_sources_checked``)."""

    conflicts: tuple[Conflict, ...]
    lines_read: frozenset[tuple[str, int, int]]
    keys: tuple[tuple[str | None, str], ...]


def check_keys(state: IndexState, keys: Iterable[tuple[str | None, str]], today: dt.date) -> GateResult:
    """Read every active line of each key; a key with ≥ 2 distinct values is a conflict."""
    keyed = state.keyed_lines(today)
    conflicts: list[Conflict] = []
    read: set[tuple[str, int, int]] = set()
    done: list[tuple[str | None, str]] = []
    seen: set[tuple[str | None, str]] = set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        done.append(key)
        lines = keyed.get(key, [])
        read.update(kl.identity for kl in lines)
        values = {kl.value for kl in lines}  # equal as written -> equal once normalised
        if len(values) >= 2 and len({normalize(v) for v in values}) >= 2:
            conflicts.append(Conflict(key[0], key[1], tuple(lines)))
    return GateResult(tuple(conflicts), frozenset(read), tuple(done))


def all_conflicts(state: IndexState, today: dt.date) -> list[Conflict]:
    """Every conflicting key of the whole active index (``grounding conflicts``)."""
    found: list[Conflict] = []
    for (subject, name), lines in state.keyed_lines(today).items():
        if len(lines) < 2:
            continue  # one line cannot conflict
        values = {kl.value for kl in lines}
        if len(values) >= 2 and len({normalize(v) for v in values}) >= 2:
            found.append(Conflict(subject, name, tuple(lines)))
    # keys by (field, subject); a subject is never "" (SPEC §3), so the order is total
    found.sort(key=lambda c: (c.field, c.subject or ""))
    return found
