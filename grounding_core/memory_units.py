"""Memory entries as units of a compiled context (SPEC §8, §11): :class:`MemoryContextUnit`.

Apart from :mod:`grounding_core.memory` because a prompt unit is a
:class:`~grounding_core.budget.ContextUnit`, and the budget module (the tokenizer's) is not
needed by a check, which reads memory claims only; ``grounding_core.memory.MemoryContextUnit``
still names this class.
"""

from __future__ import annotations

from dataclasses import dataclass

from .budget import ContextUnit
from .memory import MEMORY_PREFIX, MemoryEntry, MemoryUnitSpec, render_entry

__all__ = ["MemoryContextUnit"]

@dataclass(frozen=True, slots=True)
class MemoryContextUnit(ContextUnit):
    """A memory entry as a unit of a compiled context (SPEC §8, §11).

    It renders as its id line and its ``KEY：VALUE`` line (``memory:user-alice/语言@2`` then
    ``语言：中文``) and is packed and counted like any unit. ``doc_id`` holds
    ``memory:SCOPE/KEY`` and ``start_line``/``end_line`` are 1, so code that looks units up as
    evidence versions finds nothing.
    """

    entry: MemoryEntry | None = None

    @property
    def id(self) -> str:
        assert self.entry is not None
        return self.entry.id

    def render(self) -> str:
        assert self.entry is not None
        return render_entry(self.entry)

    @classmethod
    def of(cls, entry: MemoryEntry, rank: float = 0.0) -> MemoryContextUnit:
        return cls(f"{MEMORY_PREFIX}{entry.scope}/{entry.key}", entry.version, 1, 1, entry.quote, rank,
                   entry)

    @property
    def unit(self) -> MemoryUnitSpec:
        """The visibility unit this context unit stands for (exactly its version)."""
        assert self.entry is not None
        return MemoryUnitSpec(self.entry.scope, self.entry.key, self.entry.version)
