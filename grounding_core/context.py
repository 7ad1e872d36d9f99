"""Compiled contexts: ``{query, limit, reserve}`` -> the visible units X (SPEC §6, §8).

A *unit* is a block of consecutive non-blank body lines of one active version (a paragraph
or list of a document; front matter is never part of a unit). Units are ranked by FTS5
relevance (trigram bm25 of their best-matching line, ties broken by doc_id then line), then
packed whole in rank order with skip-and-continue (``budget.pack_prompt``). The result is
deterministic for a given index state, question and budget.

Memory (SPEC §11): the entries a context names with ``memory: [SCOPE, ...]`` (or
``memory:...`` units) are pinned ahead of the ranked evidence units, in the order named, and
packed like any unit (a memory unit that does not fit is skipped, so it is not visible).

Defaults when the draft gives none: ``limit`` 1500 tokens, ``reserve`` 240 tokens.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from . import memory as memory_claims
from .budget import ContextUnit, PromptPack, pack_prompt
from .config import Config
from .drafts import ContextSpec
from .index import IndexSnapshot
from .memory_units import MemoryContextUnit
from .verify import Visibility

DEFAULT_LIMIT = 1500
DEFAULT_RESERVE = 240
MAX_CANDIDATES = 400


@dataclass(frozen=True)
class CompiledContext:
    """A compiled context: the query, the packing decision and token totals."""

    query: str
    pack: PromptPack
    complete: bool = True
    """False when the snapshot's full-text rows were still being built (SPEC §8 ranking may
    change once they are: "still indexing")."""

    @property
    def kept(self) -> list[ContextUnit]:
        return self.pack.kept_units

    def visibility(self) -> Visibility:
        """X = every line of every kept unit."""
        vis = Visibility(input_tokens=self.pack.input_tokens, complete=self.complete)
        for unit in self.kept:
            if isinstance(unit, MemoryContextUnit):  # memory hook (SPEC §11)
                vis.memory.append(unit.unit)
                continue
            vis.ranges.setdefault((unit.doc_id, unit.version), []).append((unit.start_line, unit.end_line))
        p = self.pack
        vis.budget = (p.limit, p.reserve, p.input_tokens)
        for packed in p.skipped:  # to say why a ranked line is not visible (did not fit)
            u = packed.unit
            vis.left_out.setdefault((u.doc_id, u.version), []).append((u.start_line, u.end_line, packed.cost))
        return vis

    def summary(self) -> dict[str, object]:
        """JSON-ready summary: kept/skipped units with token costs and the totals (SPEC §8)."""
        p = self.pack
        return {
            **({} if self.complete else {"still_indexing": True}),
            "query": self.query, "encoding": p.encoding, "limit": p.limit, "reserve": p.reserve,
            "input_tokens": p.input_tokens, "base_tokens": p.base_tokens,
            "kept": [{"unit": u.unit.id, "tokens": u.cost, "rank": round(u.unit.rank, 6)} for u in p.kept],
            "skipped": [{"unit": u.unit.id, "tokens": u.cost, "rank": round(u.unit.rank, 6)}
                        for u in p.skipped],
        }


def units_of(state: IndexSnapshot, doc_id: str, today: dt.date) -> list[ContextUnit]:
    """The units of a document's active version (empty when it has none)."""
    record = state.newest(doc_id)
    if record is None or not state.is_active(record, today):
        return []
    doc = state.document(record)
    units: list[ContextUnit] = []
    start: int | None = None
    for number in range(doc.front.end_line + 1, len(doc.lines) + 2):
        blank = number > len(doc.lines) or not doc.lines[number - 1].strip()
        if not blank and start is None:
            start = number
        elif blank and start is not None:
            text = "\n".join(doc.lines[start - 1 : number - 1])
            units.append(ContextUnit(doc_id, record.version, start, number - 1, text))
            start = None
    return units


def rank_units(state: IndexSnapshot, query: str, today: dt.date) -> list[ContextUnit]:
    """Units holding at least one FTS hit for ``query`` in ``state``, best first (rank = -bm25)."""
    hits = state.search(query, limit=MAX_CANDIDATES, any_term=True)
    best: dict[tuple[str, int], float] = {}
    for hit in hits:
        score = -hit.rank
        key = (hit.doc_id, hit.line)
        best[key] = max(best.get(key, score), score)
    ranked: list[ContextUnit] = []
    seen: set[str] = set()
    by_doc: dict[str, list[ContextUnit]] = {}
    for doc_id, line in best:
        units = by_doc.setdefault(doc_id, units_of(state, doc_id, today))
        for unit in units:
            if unit.start_line <= line <= unit.end_line and unit.id not in seen:
                seen.add(unit.id)
                top = max(s for (d, ln), s in best.items()
                          if d == doc_id and unit.start_line <= ln <= unit.end_line)
                ranked.append(ContextUnit(unit.doc_id, unit.version, unit.start_line, unit.end_line,
                                          unit.text, top))
    ranked.sort(key=lambda u: (-u.rank, u.doc_id, u.start_line))
    return ranked


def compile_context(state: IndexSnapshot, config: Config, spec: ContextSpec,
                    question: str, today: dt.date) -> CompiledContext:
    """Compile a ``query`` context spec (SPEC §8) against the snapshot ``state``; deterministic
    for a given snapshot. ``complete`` is False while the snapshot's full-text rows are still
    being built (the caller may build them first: ``Store.build_fts``).
    """
    query = spec.query or question
    complete = state.search_complete
    units = rank_units(state, query, today)
    if spec.memory_units:  # memory hook (SPEC §11): the named scopes, pinned first
        units = [*memory_claims.context_units(state, spec.memory_units), *units]
    pack = pack_prompt(question or query, units, spec.limit or DEFAULT_LIMIT,
                       spec.reserve or DEFAULT_RESERVE, config.encoding)
    return CompiledContext(query, pack, complete)
