"""Citation candidates: which evidence lines could support an uncited sentence (SPEC §10).

Candidates are active, newest, non-meta field lines of one
:class:`~grounding_core.index.IndexSnapshot`, found two bounded ways: full-text hits for any
trigram of the sentence (``snapshot.search``), and lines whose normalised value (SPEC §7.3)
occurs in the sentence (``snapshot.lines_with_value_in``; it also finds values shorter than a
trigram). Order: lines visible in the draft's declared context first; then lines whose value
occurs in the sentence, longest value first; then lines of a field the draft asks for
(front matter ``fields``); then lines whose field name occurs in the sentence; then full-text
rank; then doc_id and line. When some candidate is *related* (its value or field name is in
the sentence, or its field is asked for), the unrelated ones (only shared trigrams) are
dropped: a sentence about parking is not offered the schedule. Each candidate says why it
is offered (:attr:`Candidate.reasons`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
    field_in_sentence: bool = False
    field_wanted: bool = False
    in_context: bool = False
    """True when the draft declares a context and the line was visible in it."""

    @property
    def related(self) -> bool:
        """Its value or field name occurs in the sentence, or the draft asks for its field."""
        return self.value_in_sentence or self.field_in_sentence or self.field_wanted

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why this line is offered, most telling first, e.g. ``("value in the sentence",
        "field 停车地点 asked for", "current version")``.
        """
        found = []
        if self.value_in_sentence:
            found.append("value in the sentence")
        if self.field_wanted:
            found.append(f"field {self.field} asked for")
        elif self.field_in_sentence:
            found.append(f"field {self.field} in the sentence")
        if self.in_context:
            found.append("in the context")
        if not found:
            found.append("shares words with the sentence")
        found.append("current version")
        return tuple(found)

    @property
    def citation(self) -> CitationRef:
        return CitationRef(self.doc_id, self.version, self.line)

    @property
    def id(self) -> str:
        return self.citation.id


def citation_candidates(snapshot: IndexSnapshot, sentence: str, today: dt.date,
                        visibility: Visibility | None, limit: int = 3,
                        wanted_fields: Sequence[str] = ()) -> list[Candidate]:
    """Up to ``limit`` lines to cite for ``sentence`` (its text as written, references
    included), best first (order and filter in the module docstring).

    ``visibility`` is the draft's declared context X (None: the draft declares none, so every
    line counts as visible); ``wanted_fields`` the draft's front matter ``fields``. Cost: two
    bounded lookups plus one document read per distinct candidate version; never a pass over
    the index.
    """
    plain = REF_RE.sub("", sentence)
    normalized = normalize(plain)
    wanted = {normalize(name) for name in wanted_fields}
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
        field_name = normalize(field_line.field)
        visible = visibility is None or visibility.visible(doc_id, version, number, text)
        out.append(Candidate(
            doc_id, version, number, text, record.sha256, field_line.field, field_line.value,
            visible=visible, value_in_sentence=bool(value) and value in normalized,
            field_in_sentence=bool(field_name) and field_name in normalized, field_wanted=field_name in wanted,
            in_context=visibility is not None and visible,
        ))
    if any(c.related for c in out):
        out = [c for c in out if c.related]
    out.sort(key=lambda c: (not c.visible, not c.value_in_sentence,
                            -len(normalize_value(c.value)) if c.value_in_sentence else 0,
                            not c.field_wanted, not c.field_in_sentence,
                            order[(c.doc_id, c.version, c.line)], c.doc_id, c.line))
    return out[:limit]


__all__ = ["Candidate", "SEARCH_HITS", "citation_candidates"]
