"""The chunk-citation adapter: ``{"answer", "citations": [{"chunk_id", "quote"}]}`` -> a §5.2 answer.

Many RAG prompts ask the model to cite the retrieved chunks it used by id, with a quote,
instead of Grounding's eight-key claims. This adapter turns such an answer into the SPEC §5.2
wire so the core checks it unchanged. The mapping (SPEC §14 "documented adapter"):

``chunks`` maps each chunk id the model was shown to the SPEC §6 unit it holds:
``{"c1": {"doc_id": "schedule", "version": 2, "lines": [6, 9]}, "c2": {"doc_id": "notice",
"version": 1, "text": "..."}}`` (what the retriever stored with the chunk).

For each citation ``{"chunk_id": "c1", "quote": "- 活动时间：周四16:30"}``:

1. the chunk id must be one of ``chunks`` (else :class:`ChunkError`: the model cited a chunk
   it was not shown, which no check can repair);
2. the **line** is the line of that unit's version whose text equals the quote: for a
   ``lines`` unit, among lines ``first..last``; for a ``text`` unit, among the version's lines
   that appear whole in the text. If no line there equals it: a line of the unit whose text
   without its list marker equals it; else a line of the version outside the unit that equals
   it (the core then reports ``invisible-source``: the model quoted a line it was not shown
   whole); else the most similar line of the unit (the core reports ``quote-mismatch`` and
   names the differing character);
3. ``doc_id``/``version`` come from the unit, ``sha256`` from the index record of that
   version (the model never writes hashes), ``text``/``field`` are derived from the model's
   quote as SPEC §5 says, ``id`` is ``DOC_ID@VERSION:LINE``;
4. ``status`` and ``missing_fields`` are the computed ones (the chunk shape declares none);
   ``fields``/``question`` come from the caller; the context X is every chunk shown.

A version that the index does not hold keeps line ``first`` (or 1) and a zero hash, so the
core reports it as ``stale-citation`` or ``unknown-source``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from grounding_core.config import Config
from grounding_core.evidence import parse_field_line, split_marker
from grounding_core.index import IndexSnapshot
from grounding_core.text import split_lines

ZERO_HASH = "0" * 64


class ChunkError(ValueError):
    """A chunk citation that cannot be mapped (unknown chunk id, a malformed payload or unit)."""


class ChunkCitation(BaseModel):
    """``{"chunk_id": "c1", "quote": "..."}``: one citation of a retrieved chunk."""

    model_config = ConfigDict(extra="forbid")
    chunk_id: StrictStr
    quote: StrictStr = Field(min_length=1)


class ChunkAnswer(BaseModel):
    """``{"answer": "...", "citations": [...]}``: prose plus the chunks it cites."""

    model_config = ConfigDict(extra="forbid")
    answer: StrictStr
    citations: list[ChunkCitation]


def is_chunk_answer(data: object) -> bool:
    """True for the chunk shape (``answer`` and ``citations``, no ``claims``)."""
    return isinstance(data, dict) and "citations" in data and "claims" not in data


def _unit(chunk_id: str, unit: Any) -> dict[str, Any]:
    if isinstance(unit, BaseModel):
        unit = unit.model_dump(mode="json")
    if not isinstance(unit, Mapping) or not isinstance(unit.get("doc_id"), str):
        raise ChunkError(f"chunk {chunk_id!r}: expected a unit {{doc_id, version, lines | text}}, got {unit!r}")
    version = unit.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ChunkError(f"chunk {chunk_id!r}: version must be a positive integer")
    return dict(unit)


def chunk_units(chunks: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The §6 units of every chunk shown (the context X of the answer)."""
    return [_unit(cid, unit) for cid, unit in chunks.items()]


def answer_from_chunks(payload: Mapping[str, Any] | ChunkAnswer, chunks: Mapping[str, Any], state: IndexSnapshot,
                       config: Config, *, fields: Sequence[str] | None = None, question: str | None = None,
                       status: str = "answered", missing_fields: Sequence[str] = ()) -> dict[str, Any]:
    """The §5.2 answer for a chunk-shaped answer (see the module docstring for the mapping).

    ``status``/``missing_fields`` are written as given (the verifier checks once, then writes
    the computed ones). Raises :class:`ChunkError` for an unknown chunk id or a malformed
    payload or unit.
    """
    if isinstance(payload, ChunkAnswer):
        parsed = payload
    else:
        try:
            parsed = ChunkAnswer.model_validate(payload)
        except ValueError as exc:
            raise ChunkError(f"not a chunk answer {{answer, citations: [{{chunk_id, quote}}]}}: {exc}") from None
    claims = []
    for citation in parsed.citations:
        if citation.chunk_id not in chunks:
            known = ", ".join(sorted(chunks)) or "none"
            raise ChunkError(f"citation of chunk {citation.chunk_id!r}, which the model was not shown"
                             f" (chunks shown: {known})")
        claims.append(_claim(citation.quote, _unit(citation.chunk_id, chunks[citation.chunk_id]), state, config))
    wire: dict[str, Any] = {"status": status, "claims": claims, "missing_fields": list(missing_fields)}
    if question is not None:
        wire["question"] = question
    if fields is not None:
        wire["fields"] = list(fields)
    return wire


def _claim(quote: str, unit: dict[str, Any], state: IndexSnapshot, config: Config) -> dict[str, Any]:
    doc_id, version = unit["doc_id"], unit["version"]
    record = state.record(doc_id, version)
    lines_range = unit.get("lines")
    first = lines_range[0] if isinstance(lines_range, list) and lines_range and isinstance(lines_range[0], int) else 1
    line, sha = first, ZERO_HASH
    if record is not None:
        sha = record.sha256
        doc = state.document(record)
        candidates = _candidate_lines(unit, doc.lines)
        line = _best_line(quote, candidates, doc.lines) or first
    parsed = parse_field_line(quote, config.field_separators)
    return {
        "text": split_marker(quote), "quote": quote, "id": f"{doc_id}@{version}:{line}", "doc_id": doc_id,
        "version": version, "line": line, "sha256": sha, "field": parsed.field if parsed else quote,
    }


def _candidate_lines(unit: dict[str, Any], lines: Sequence[str]) -> list[int]:
    if "text" in unit and isinstance(unit["text"], str):
        shown = set(split_lines(unit["text"]))
        return [i for i, text in enumerate(lines, 1) if text in shown and text.strip()]
    bounds = unit.get("lines")
    if (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int) and not isinstance(b, bool)
                                                              for b in bounds)):
        return list(range(max(bounds[0], 1), min(bounds[1], len(lines)) + 1))
    return list(range(1, len(lines) + 1))


def _best_line(quote: str, candidates: list[int], lines: Sequence[str]) -> int | None:
    for i in candidates:
        if lines[i - 1] == quote:
            return i
    for i in candidates:
        if split_marker(lines[i - 1]) == quote:
            return i
    for i, text in enumerate(lines, 1):
        if text == quote:
            return i
    scored = [(difflib.SequenceMatcher(None, quote, lines[i - 1]).ratio(), -i) for i in candidates
              if lines[i - 1].strip()]
    return -max(scored)[1] if scored else None
