"""From a cursor in a draft to the evidence it cites, and from an evidence line back to its
citations (SPEC §5, §10: hover, go to definition, references). No editor notions: positions
are 0-based lines and code-point columns, lines of evidence are 1-based as in citations.

- :func:`target_at`: what the cursor points at (a citation, or the ``context`` declaration);
- :func:`locate`: the evidence line a citation names, and whether the file on disk still
  holds exactly that version (else a client shows the indexed text read-only);
- :func:`citing_spans`: the citations in a draft that cite one evidence line (also stale
  citations of the same text in an older version);
- :func:`outline`: the draft's claims and citations as a tree (document symbols);
- :func:`references_of`, :func:`label_at`, :func:`rename_label`: footnote references and
  renaming a label in its references and its definition together;
- :func:`citation_links`: the citation ids of a draft with what each names (document links);
- :func:`citation_hints`: one short state per reference of a checked draft (inlay hints);
- :func:`cited_line`: which line of an evidence version a citation cites (reference lenses).

Every lookup goes through an :class:`~grounding_core.index.IndexSnapshot`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import json_source_map

from .drafts import REF_RE, ParsedDraft, label_problem, parse_definition
from .index import IndexSnapshot, VersionRecord
from .model import CitationRef, Claim, DraftReport, Edit, Finding, RegionRef, Span
from .scan import Unstable, read_inside
from .text import LineIndex, shorten

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


def version_bytes(evidence_root: Path, record: VersionRecord) -> bytes | None:
    """The bytes of ``record``'s file (a PNG's pixels, a text version) when it still holds
    exactly that content, else None (the index keeps every image version's measurement, not its
    pixels).
    """
    if not record.path:
        return None
    try:  # never outside the evidence folder, never a FIFO, at most 64 MiB (SPEC §2)
        data = read_inside(evidence_root, evidence_root / record.path, attempts=1)[0]
    except (OSError, Unstable):
        return None
    return data if hashlib.sha256(data).hexdigest() == record.sha256 else None


def file_holds(evidence_root: Path, record: VersionRecord) -> bool:
    """True when the file of ``record`` (under ``evidence_root``) hashes to its sha256; read as
    evidence is (never outside the evidence folder, never a FIFO, at most 64 MiB: SPEC §2).
    """
    return version_bytes(evidence_root, record) is not None


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


__all__ = ["CitationHint", "CitationLink", "CitationTarget", "ContextTarget", "EvidenceImage", "EvidenceLine",
           "OutlineItem", "Reference", "RegionTarget", "RenameError", "Target", "citation_hints", "citation_links",
           "cited_line", "citing_spans", "file_holds", "label_at", "locate", "locate_region", "nearest_occurrence",
           "outline", "version_bytes", "references_of", "rename_label", "target_at"]


# ------------------------------------------------------------------ footnote references


@dataclass(frozen=True, slots=True)
class Reference:
    """One footnote reference ``[^label]`` of a claim sentence: ``span`` covers the whole
    reference, ``label_span`` the label between ``[^`` and ``]`` (0-based line, code points).
    """

    label: str
    span: Span
    label_span: Span


def references_of(draft: ParsedDraft) -> list[Reference]:
    """Every reference of the draft's claim sentences, in document order (Markdown; a JSON
    answer has none). A reference preceded by a backslash is text, not a reference.
    """
    if draft.kind == "json":
        return []
    found: dict[Span, Reference] = {}
    sentences = sorted({(c.sentence_span, c.label) for c in draft.claims if c.label is not None},
                       key=lambda pair: (pair[0], pair[1]))
    for span, label in sentences:
        if span.start_line >= len(draft.lines):
            continue
        text = draft.lines[span.start_line]
        end = span.end_col if span.end_line == span.start_line else len(text)
        for m in REF_RE.finditer(text, span.start_col, end):
            if m[1] != label or (m.start() > 0 and text[m.start() - 1] == "\\"):
                continue
            line = span.start_line
            ref = Reference(label, Span.line(line, m.start(), m.end()), Span.line(line, m.start() + 2, m.end() - 1))
            found.setdefault(ref.span, ref)
    return [found[k] for k in sorted(found)]


def _definition_label(line_text: str, line: int) -> tuple[str, Span] | None:
    """The label of a footnote definition line ``[^label]: …`` and its span, or None."""
    match = _DEFINITION_START.match(line_text)
    if match is None:
        return None
    return match[1], Span.line(line, 2, 2 + len(match[1]))


def label_at(draft: ParsedDraft, line: int, col: int) -> tuple[str, Span] | None:
    """The footnote label under the cursor (0-based ``line``, code-point ``col``): on a claim's
    reference ``[^label]`` (or just after it), or on the ``[^label]`` part of a definition
    line. Returns the label and the span of the label text; None elsewhere and in JSON.
    """
    if draft.kind == "json" or not 0 <= line < len(draft.lines) or line < draft.front_matter_lines:
        return None
    for ref in references_of(draft):
        s = ref.span
        if s.start_line == line and s.start_col <= col <= s.end_col:
            return ref.label, ref.label_span
    found = _definition_label(draft.lines[line], line)
    if found is not None and col <= found[1].end_col + 1:
        return found
    return None


class RenameError(ValueError):
    """A label rename that cannot be done; the message says why (for the editor)."""


def rename_label(draft: ParsedDraft, label: str, new_label: str) -> list[Edit]:
    """Edits renaming footnote ``label`` to ``new_label`` in every reference of a claim and in
    every definition line of it, together (SPEC §5.1: the pair is one citation).

    Raises :class:`RenameError` when ``new_label`` is not a valid label (the reason of
    :func:`grounding_core.drafts.label_problem`), is already used by another reference or
    definition (the two footnotes would merge), or when ``label`` occurs nowhere.
    """
    new_label = new_label.strip()
    if new_label.startswith("[^") and new_label.endswith("]"):
        new_label = new_label[2:-1]
    problem = label_problem(new_label)
    if problem is not None:
        raise RenameError(f"[^{shorten(new_label, 40)}] is not a valid footnote label: {problem}")
    references = [r for r in references_of(draft) if r.label == label]
    definitions = [found[1] for n in range(draft.front_matter_lines, len(draft.lines))
                   if (found := _definition_label(draft.lines[n], n)) is not None and found[0] == label]
    if not references and not definitions:
        raise RenameError(f"[^{shorten(label, 40)}] is not used in this draft")
    if new_label == label:
        return []
    used = {r.label for r in references_of(draft)}
    used.update(found[0] for n in range(draft.front_matter_lines, len(draft.lines))
                if (found := _definition_label(draft.lines[n], n)) is not None)
    if new_label in used:
        raise RenameError(f"[^{shorten(new_label, 40)}] is already used in this draft; renaming [^{shorten(label, 40)}]"
                          " to it would merge two footnotes")
    title = f"Rename [^{label}] to [^{new_label}]"
    spans = sorted({*(r.label_span for r in references), *definitions})
    return [Edit(span, new_label, title) for span in spans]


# ---------------------------------------------------------------------------- outline


@dataclass(frozen=True, slots=True)
class OutlineItem:
    """One entry of a draft's outline. ``kind``: ``"claim"`` (a sentence holding references;
    children: its ``"reference"`` items), ``"citation"`` (a footnote definition, or a JSON
    claim object). ``span`` is what the entry covers, ``selection`` the part to highlight
    (inside ``span``); 0-based lines, code-point columns.
    """

    name: str
    detail: str
    kind: str
    span: Span
    selection: Span
    children: tuple[OutlineItem, ...] = ()


OUTLINE_NAME = 80
"""Code points of a sentence or quote shown in an outline entry's name or detail."""


def outline(draft: ParsedDraft) -> list[OutlineItem]:
    """The draft's claims and citations as an outline, in document order.

    Markdown: each claim sentence (name: the sentence, detail: the ids it cites) with one child
    per reference (``[^1] schedule@2:7``), then each footnote definition a claim uses (name:
    ``[^1] schedule@2:7``, detail: the quote; selection: the id). JSON: each claim object
    (name: its id, detail: its ``text``). Pure; linear in the draft.
    """
    if draft.kind == "json":
        items = []
        for claim in draft.claims:
            name = claim.citation.id if claim.citation is not None else "(malformed claim)"
            detail = shorten(claim.json_text or claim.quote or "", OUTLINE_NAME)
            items.append(OutlineItem(name, detail, "citation", claim.citation_span, claim.value_span("id")))
        return items
    by_label: dict[str, Claim] = {}
    for claim in draft.claims:
        if claim.label is not None:
            by_label.setdefault(claim.label, claim)
    refs_by_sentence: dict[Span, list[Reference]] = {}
    sentence_of = {c.sentence_span: c for c in draft.claims}
    on_line: dict[int, list[Span]] = {}
    for span in sorted(sentence_of):
        on_line.setdefault(span.start_line, []).append(span)
    for ref in references_of(draft):
        for span in on_line.get(ref.span.start_line, ()):
            if span.start_col <= ref.span.start_col < span.end_col + 1:
                refs_by_sentence.setdefault(span, []).append(ref)
                break
    sentences: list[OutlineItem] = []
    for span in sorted(sentence_of):
        claim = sentence_of[span]
        children = []
        for ref in refs_by_sentence.get(span, []):
            cited = by_label.get(ref.label)
            name = f"[^{ref.label}] " + (cited.citation.id if cited is not None and cited.citation is not None
                                         else "(no valid citation)")
            children.append(OutlineItem(shorten(name, OUTLINE_NAME), "", "reference", ref.span, ref.span))
        ids = [c.name.split(" ", 1)[1] for c in children]
        sentences.append(OutlineItem(shorten(claim.sentence.strip(), OUTLINE_NAME), ", ".join(dict.fromkeys(ids)),
                                     "claim", span, span, tuple(children)))
    definitions: list[OutlineItem] = []
    seen: set[int] = set()
    for claim in draft.claims:
        cited_ref = claim.citation
        line = claim.citation_span.start_line
        if cited_ref is None or claim.label is None or line in seen or line >= len(draft.lines):
            continue
        seen.add(line)
        start = claim.citation_span.start_col
        whole = Span.line(line, 0, len(draft.lines[line]))
        name = f"[^{shorten(claim.label, 40)}] {cited_ref.id}"
        definitions.append(OutlineItem(name, shorten(claim.quote or "", OUTLINE_NAME), "citation", whole,
                                       Span.line(line, start, start + len(cited_ref.id))))
    definitions.sort(key=lambda item: item.span)
    return sentences + definitions


# ------------------------------------------------------------------------------ links


@dataclass(frozen=True, slots=True)
class CitationLink:
    """A citation id in a draft (``span``: the id in a definition, or a JSON claim's ``id``
    value) and what it names.
    """

    span: Span
    citation: CitationRef


def citation_links(draft: ParsedDraft) -> list[CitationLink]:
    """Every parsed citation's id span, one per definition, in document order."""
    found: dict[Span, CitationLink] = {}
    for claim in draft.claims:
        ref = claim.citation
        if ref is None:
            continue
        if draft.kind == "json":
            span = claim.value_span("id")
        else:
            start = claim.citation_span.start_col
            span = Span.line(claim.citation_span.start_line, start, start + len(ref.id))
        found.setdefault(span, CitationLink(span, ref))
    return [found[k] for k in sorted(found)]


# ------------------------------------------------------------------------ inlay hints


@dataclass(frozen=True, slots=True)
class CitationHint:
    """A short state shown right after a reference (JSON: after a claim's ``id`` value):
    ``line`` 0-based, ``col`` code points; ``label`` e.g. ``✓ v2``, ``stale → v3``,
    ``✗ quote-mismatch``; ``tooltip`` the finding's message or why the citation is valid.
    """

    line: int
    col: int
    label: str
    tooltip: str


_CITATION_FINDINGS = ("malformed-citation", "unknown-source", "stale-citation", "hash-mismatch", "quote-mismatch",
                      "inactive-source", "meta-field", "unsupported-attribute", "invisible-source")
"""Errors about one citation, in the order a hint names the first (the state that matters most)."""


def citation_hints(draft: ParsedDraft, report: DraftReport, snapshot: IndexSnapshot) -> list[CitationHint]:
    """One hint per reference of a checked draft (``report`` is ``draft``'s), document order.

    A valid claim (SPEC §7.2) is ``✓ vN``, with ``· conflict`` when the cited field conflicts
    (GR108); a stale citation is ``stale → vM`` (M the newest version); any other invalid
    citation ``✗ NAME`` of its first citation error. Reads the newest version of each stale
    document from ``snapshot``.
    """
    valid = set(report.valid_claims)
    by_line: dict[int, list[Finding]] = {}
    for finding in report.findings:
        by_line.setdefault(finding.span.start_line, []).append(finding)

    def state(claim: Claim) -> tuple[str, str]:
        ref = claim.citation
        span = claim.citation_span
        own = [f for line in range(span.start_line, span.end_line + 1) for f in by_line.get(line, ())
               if _within(f.span, span)]
        errors = sorted((f for f in own if f.name in _CITATION_FINDINGS),
                        key=lambda f: _CITATION_FINDINGS.index(f.name))
        if ref is not None and claim in valid and not errors:
            conflict = [f for f in own if f.name == "field-conflict"]
            label = f"✓ v{ref.version}" + (" · conflict" if conflict else "")
            tip = conflict[0].message if conflict else f"{ref.id}: the quote is the cited line of the current version."
            return label, tip
        if not errors:
            return "✗ not valid", "This claim is not valid; see the diagnostics on its citation."
        first = errors[0]
        if first.name == "stale-citation" and ref is not None:
            newest = snapshot.newest(ref.doc_id)
            if newest is not None:
                return f"stale → v{newest.version}", first.message
        return f"✗ {first.name}", first.message

    out: list[CitationHint] = []
    if draft.kind == "json":
        for json_claim in draft.claims:
            end = json_claim.value_span("id")
            label, tip = state(json_claim)
            out.append(CitationHint(end.end_line, end.end_col, label, tip))
        return out
    by_label: dict[str | None, list[Claim]] = {}
    for claim in draft.claims:
        by_label.setdefault(claim.label, []).append(claim)
    for ref in references_of(draft):
        found = next((c for c in by_label.get(ref.label, ()) if _within(ref.span, c.sentence_span)), None)
        if found is None:
            continue
        label, tip = state(found)
        out.append(CitationHint(ref.span.end_line, ref.span.end_col, label, tip))
    return out


def _within(inner: Span, outer: Span) -> bool:
    return (outer.start_line, outer.start_col) <= (inner.start_line, inner.start_col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


# ---------------------------------------------------------------- reference lenses


def cited_line(ref: CitationRef, quote: str | None, record: VersionRecord, lines: Sequence[str],
               snapshot: IndexSnapshot, positions: dict[str, list[int]]) -> int | None:
    """The 1-based line of ``record`` (a version of ``ref.doc_id`` with ``lines``) that the
    citation ``ref`` cites: its own line when it names that version, else the line holding
    exactly the cited text (the text of the version it names, or its quote when that version
    was never indexed), nearest to its line number; None when no line holds it.
    ``positions`` maps each line text of ``record`` to its 1-based numbers (built once per
    version by the caller).
    """
    if ref.doc_id != record.doc_id:
        return None
    if ref.version == record.version:
        return ref.line if 1 <= ref.line <= len(lines) else None
    text = _cited_text(ref, quote, snapshot)
    if text is None or not text.strip():
        return None
    found = positions.get(text)
    if not found:
        return None
    return min(found, key=lambda n: (abs(n - ref.line), n))
