"""From a cursor in a draft to the evidence it cites, and from an evidence line back to its
citations (SPEC §5, §10: hover, go to definition, references). No editor notions: positions
are 0-based lines and code-point columns, lines of evidence are 1-based as in citations.

- :func:`target_at`: what the cursor points at (a citation, or the ``context`` declaration);
- :func:`locate`: the evidence line a citation names, and whether the file on disk still
  holds exactly that version (else a client shows the indexed text read-only);
- :func:`citing_spans`: the citations in a draft that cite one evidence line (also stale
  citations of the same text in an older version).

Every lookup goes through an :class:`~grounding_core.index.IndexSnapshot`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import json_source_map

from .drafts import REF_RE, ParsedDraft, parse_definition
from .index import IndexSnapshot, VersionRecord
from .model import CitationRef, RegionRef, Span
from .text import LineIndex

_DEFINITION_START = re.compile(r"\[\^([^\]\s]+)\]:")
_CONTEXT_KEY = re.compile(r"context\s*:")


# ------------------------------------------------------------------ targets in a draft


@dataclass(frozen=True, slots=True)
class CitationTarget:
    """A citation under the cursor: ``span`` is the reference, the definition's ID or the
    JSON claim object (0-based lines, code-point columns, in the draft). ``used`` is False for
    a footnote definition no reference uses (SPEC §5.1: then it is not a citation).
    """

    span: Span
    citation: CitationRef
    hash_prefix: str | None
    quote: str | None
    used: bool = True


@dataclass(frozen=True, slots=True)
class RegionTarget:
    """An image citation under the cursor (SPEC §12): ``region`` is ``DOC_ID@VERSION#rN``;
    ``span``, ``hash_prefix``, ``quote`` and ``used`` as for :class:`CitationTarget`.
    """

    span: Span
    region: RegionRef
    hash_prefix: str | None
    quote: str | None
    used: bool = True


@dataclass(frozen=True, slots=True)
class ContextTarget:
    """The draft's ``context`` declaration under the cursor (key and value span)."""

    span: Span


Target = CitationTarget | RegionTarget | ContextTarget


def target_at(draft: ParsedDraft, line: int, col: int) -> Target | None:
    """What the cursor at 0-based ``line`` and code-point ``col`` of a parsed draft points at.

    Markdown: a reference ``[^label]`` of a claim sentence (cursor on it or just after it),
    any column of a definition line, or the front matter ``context`` key block (key line and
    its indented continuation lines). JSON: the innermost claim object holding the cursor, or
    the ``"context"`` key. None elsewhere and for malformed or undefined citations (their
    diagnostics say why). Pure; linear in the line's length (JSON: in the text's).
    """
    if line < 0 or line >= len(draft.lines):
        return None
    if draft.kind == "json":
        return _json_target(draft, line, col)
    return _markdown_target(draft, line, col)


def _markdown_target(draft: ParsedDraft, line: int, col: int) -> Target | None:
    text = draft.lines[line]
    if line < draft.front_matter_lines:
        span = _front_matter_context(draft.lines, draft.front_matter_lines, line)
        return ContextTarget(span) if span is not None else None
    reference = _reference_at(draft, line, col)
    if reference is not None:
        return reference
    match = _DEFINITION_START.match(text)
    if match is None:
        return None
    label = match[1]
    definition = parse_definition(text, line, label)
    start = definition.span.start_col
    if definition.region is not None and definition.error is None:  # image hook (SPEC §12)
        used = any(c.label == label and c.region is not None and c.citation_span.start_line == line
                   for c in draft.claims)
        return RegionTarget(Span.line(line, start, start + len(definition.id_text)), definition.region,
                            definition.hash_prefix, definition.quote, used)
    if definition.citation is None:
        return None
    used = any(c.label == label and c.citation is not None and c.citation_span.start_line == line
               for c in draft.claims)
    return CitationTarget(Span.line(line, start, start + len(definition.id_text)), definition.citation,
                          definition.hash_prefix, definition.quote, used)


def _reference_at(draft: ParsedDraft, line: int, col: int) -> CitationTarget | RegionTarget | None:
    text = draft.lines[line]
    matches = [m for m in REF_RE.finditer(text) if m.start() <= col <= m.end()]
    matches.sort(key=lambda m: m.end() == col)  # on a reference beats just after one
    for m in matches:
        if m.start() > 0 and text[m.start() - 1] == "\\":
            continue
        for claim in draft.claims:
            s = claim.sentence_span
            if (claim.label == m[1] and s.start_line == line and s.start_col <= m.start()
                    and m.end() <= s.end_col):
                if claim.region is not None:
                    return RegionTarget(Span.line(line, m.start(), m.end()), claim.region,
                                        claim.hash_prefix, claim.quote)
                if claim.citation is None:
                    return None
                return CitationTarget(Span.line(line, m.start(), m.end()), claim.citation,
                                      claim.hash_prefix, claim.quote)
    return None


def _front_matter_context(lines: Sequence[str], front_lines: int, line: int) -> Span | None:
    """The ``context:`` key line plus its indented continuation lines, if ``line`` is in it."""
    last_content = front_lines - 2  # lines[front_lines - 1] is the closing ---
    if not 1 <= line <= last_content:
        return None
    key = line
    while key > 1 and lines[key][:1] in (" ", "\t"):
        key -= 1
    if not _CONTEXT_KEY.match(lines[key]):
        return None
    end = key
    while end + 1 <= last_content and lines[end + 1][:1] in (" ", "\t"):
        end += 1
    if line > end:
        return None
    return Span(key, 0, end, len(lines[end]))


def _json_target(draft: ParsedDraft, line: int, col: int) -> Target | None:
    inside = [c for c in draft.claims if _contains(c.citation_span, line, col)]
    inside.sort(key=lambda c: (c.citation_span.start_line, c.citation_span.start_col), reverse=True)
    for claim in inside:
        if claim.region is not None:
            return RegionTarget(claim.citation_span, claim.region, claim.hash_prefix, claim.quote)
        if claim.citation is None:
            return None
        return CitationTarget(claim.citation_span, claim.citation, claim.hash_prefix, claim.quote)
    try:
        entry = json_source_map.calculate(draft.text).get("/context")
    except Exception:  # the library raises its own types on JSON it cannot map
        return None
    if entry is None or entry.key_start is None or entry.key_end is None:
        return None
    index = LineIndex(draft.text)
    a = index.position(entry.key_start.position)
    b = index.position(entry.key_end.position)
    key = Span(a[0], a[1], b[0], b[1])
    if not _contains(key, line, col):
        return None
    end = index.position(entry.value_end.position)
    return ContextTarget(Span(a[0], a[1], end[0], end[1]))


def _contains(span: Span, line: int, col: int) -> bool:
    return (span.start_line, span.start_col) <= (line, col) <= (span.end_line, span.end_col)


# ------------------------------------------------------------------- evidence locations


@dataclass(frozen=True, slots=True)
class EvidenceLine:
    """Where a cited line lives: the version ``record``, that version's lines (no
    terminators), the 1-based ``line``, and ``on_disk``: True when ``record`` is the newest
    version and its file (``record.path``, relative to the evidence root) still holds exactly
    that content, so an editor can open the real file; False for an old or changed version,
    which only the index still holds.
    """

    record: VersionRecord
    lines: tuple[str, ...]
    line: int
    on_disk: bool


def locate(citation: CitationRef, snapshot: IndexSnapshot, evidence_root: Path) -> EvidenceLine | None:
    """The evidence line ``citation`` points at, or None when the version or line is unknown.

    Reads (and hashes) the version's file when it is the newest: call it in a worker thread.
    """
    record = snapshot.record(citation.doc_id, citation.version)
    if record is None:
        return None
    lines = snapshot.document(record).lines
    if not 1 <= citation.line <= len(lines):
        return None
    newest = snapshot.newest(citation.doc_id)
    on_disk = (newest is not None and newest.version == record.version
               and file_holds(evidence_root, record))
    return EvidenceLine(record, tuple(lines), citation.line, on_disk)


@dataclass(frozen=True, slots=True)
class EvidenceImage:
    """Where a cited image region lives: the version ``record``, the region (``"r2"``) and
    ``on_disk`` as for :class:`EvidenceLine` (the PNG file still holds exactly that content).
    """

    record: VersionRecord
    region: str
    on_disk: bool


def locate_region(region: RegionRef, snapshot: IndexSnapshot, evidence_root: Path) -> EvidenceImage | None:
    """The image version ``region`` points at, or None when the version is unknown or not an
    image. The region itself need not exist (the image still opens). Reads and hashes the PNG
    when the version is the newest: call it in a worker thread.
    """
    record = snapshot.record(region.doc_id, region.version)
    if record is None or snapshot.measurement(record.sha256) is None:
        return None
    newest = snapshot.newest(region.doc_id)
    on_disk = newest is not None and newest.version == record.version and file_holds(evidence_root, record)
    return EvidenceImage(record, region.name, on_disk)


def read_image(evidence_root: Path, record: VersionRecord) -> bytes | None:
    """The PNG bytes of ``record`` when its file still holds exactly that content, else None
    (the index keeps every version's measurement, not its pixels).
    """
    if not record.path:
        return None
    try:
        data = (evidence_root / record.path).read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == record.sha256 else None


def file_holds(evidence_root: Path, record: VersionRecord) -> bool:
    """True when the file of ``record`` (under ``evidence_root``) hashes to its sha256."""
    if not record.path:
        return False
    try:
        data = (evidence_root / record.path).read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == record.sha256


def nearest_occurrence(lines: Sequence[str], text: str, near: int) -> int | None:
    """The 1-based number of the line equal to ``text`` nearest to 1-based ``near`` (the
    earlier one on a tie), or None when no line equals it.
    """
    found = [n for n, line in enumerate(lines, start=1) if line == text]
    if not found:
        return None
    return min(found, key=lambda n: (abs(n - near), n))


# ------------------------------------------------------------------------- references


def citing_spans(draft: ParsedDraft, doc_id: str, version: int, line: int, line_text: str,
                 snapshot: IndexSnapshot) -> list[Span]:
    """Spans of the citations in ``draft`` that cite line ``line`` (1-based) of ``doc_id``
    version ``version``, whose text is ``line_text``.

    A citation ``doc_id@V:L`` counts when ``(V, L) == (version, line)`` or when line L of
    version V has exactly ``line_text`` (a stale citation of the same text, or the line moved);
    when version V was never indexed, the citation's own quote is compared instead. Spans are
    the definitions' ID-to-end-of-line spans (JSON: the claim object), sorted, without
    duplicates. Only citations count (SPEC §5.1: an unused definition is none).
    """
    found: set[Span] = set()
    for claim in draft.claims:
        ref = claim.citation
        if ref is None or ref.doc_id != doc_id:
            continue
        if (ref.version, ref.line) == (version, line) or _cited_text(ref, claim.quote, snapshot) == line_text:
            found.add(claim.citation_span)
    return sorted(found)


def _cited_text(ref: CitationRef, quote: str | None, snapshot: IndexSnapshot) -> str | None:
    record = snapshot.record(ref.doc_id, ref.version)
    if record is None:
        return quote
    lines = snapshot.document(record).lines
    return lines[ref.line - 1] if 1 <= ref.line <= len(lines) else None


__all__ = ["CitationTarget", "ContextTarget", "EvidenceImage", "EvidenceLine", "RegionTarget", "Target",
           "citing_spans", "file_holds", "locate", "locate_region", "nearest_occurrence", "read_image",
           "target_at"]
