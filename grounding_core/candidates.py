"""Citation candidates: which evidence lines could support an uncited sentence (SPEC §10).

Candidates are active, newest, non-meta field lines of one
:class:`~grounding_core.index.IndexSnapshot`, found two bounded ways: full-text hits for any
trigram of the sentence (``snapshot.search``), and lines whose normalised value (SPEC §7.3)
occurs in the sentence (``snapshot.lines_with_value_in``; it also finds values shorter than a
trigram). Order: lines visible in the draft's declared context first; then lines whose value
occurs in the sentence, longest value first; then full-text rank; then doc_id and line.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .drafts import REF_RE
from .index import IndexSnapshot
from .model import CitationRef
from .text import normalize, normalize_value
from .verify import Visibility

SEARCH_HITS = 50
"""Full-text hits and value matches read per sentence (each)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """An active, non-meta field line that could support a sentence. ``line`` is 1-based;
    ``text`` is the whole line (what a citation quotes), ``sha256`` its version's hash.
    """

    doc_id: str
    version: int
    line: int
    text: str
    sha256: str
    field: str
    value: str
    visible: bool
    value_in_sentence: bool

    @property
    def citation(self) -> CitationRef:
        return CitationRef(self.doc_id, self.version, self.line)

    @property
    def id(self) -> str:
        return self.citation.id


def citation_candidates(snapshot: IndexSnapshot, sentence: str, today: dt.date,
                        visibility: Visibility | None, limit: int = 3) -> list[Candidate]:
    """Up to ``limit`` lines to cite for ``sentence`` (its text as written, references
    included), best first (order in the module docstring).

    ``visibility`` is the draft's declared context X (None: the draft declares none, so every
    line counts as visible). Cost: two bounded lookups plus one document read per distinct
    candidate version; never a pass over the index.
    """
    plain = REF_RE.sub("", sentence)
    normalized = normalize(plain)
    order: dict[tuple[str, int, int], int] = {}
    hits = snapshot.search(plain, limit=SEARCH_HITS, any_term=True)
    for rank, hit in enumerate(hits):
        order.setdefault((hit.doc_id, hit.version, hit.line), rank)
    for kl in snapshot.lines_with_value_in(normalized, today, limit=SEARCH_HITS):
        order.setdefault(kl.identity, len(hits))
    out: list[Candidate] = []
    for doc_id, version, number in order:
        record = snapshot.record(doc_id, version)
        newest = snapshot.newest(doc_id)
        if record is None or newest is None or newest.version != version:
            continue
        if not snapshot.is_active(record, today):
            continue
        doc = snapshot.document(record)
        field_line = None if doc.is_front_matter_line(number) else doc.field_lines.get(number)
        if field_line is None or snapshot.is_meta_field(field_line.field):
            continue
        text = doc.lines[number - 1]
        value = normalize_value(field_line.value)
        out.append(Candidate(
            doc_id, version, number, text, record.sha256, field_line.field, field_line.value,
            visible=visibility is None or visibility.visible(doc_id, version, number, text),
            value_in_sentence=bool(value) and value in normalized,
        ))
    out.sort(key=lambda c: (not c.visible, not c.value_in_sentence,
                            -len(normalize_value(c.value)) if c.value_in_sentence else 0,
                            order[(c.doc_id, c.version, c.line)], c.doc_id, c.line))
    return out[:limit]


__all__ = ["Candidate", "SEARCH_HITS", "citation_candidates"]
