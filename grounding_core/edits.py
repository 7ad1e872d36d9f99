r"""Edits to a draft's text: fix all, insert a citation, append a generated answer (SPEC §5.1, §10).

Every function is pure and returns :class:`~grounding_core.model.Edit` values whose spans are
0-based lines and code-point columns of the text they were computed for (an editor converts
them to its own units). Lines are SPEC §3 lines without terminators; inserted line ends use
the draft's own terminator (the first one in the text, ``\n`` for a one-line draft).

Decisions where SPEC §5.1/§10 are silent:

* **Where an inserted reference goes.** Immediately *before* the sentence's final end mark
  (``。！？!?.``) when it has one, else at the sentence's end: ``活动时间是周四16:30[^2]。``.
  That is the house style of the examples and of ``grounding answer``, and the reference is
  then inside the sentence's span whatever the mark.
* **The new label** is one more than the largest numeric label used anywhere in the draft
  (references and definitions), so footnotes stay in reading order.
* **The definition line** ``[^N]: ID sha256:HEX12 "LINE"`` goes at the end of the document,
  after a blank line unless the last line is blank or already a definition. Inserted text
  starts at the end of the last line (a final line break stays the last character), never
  on a line past the end: editors that keep lines, not characters (Neovim), otherwise leave
  an empty last line behind.
* **Fix all** applies the core's fixes like ``grounding check --fix`` (non-overlapping, the
  first wins) but orders edits that start at the same place deterministically: a re-anchor
  (which also rewrites the quote) before a quote replacement.
* **A generated answer appended to a draft with text** brings only its body (claim lines,
  HTML comments, definitions), its footnote labels renumbered past the ones the draft uses;
  a blank draft gets the whole generated draft, front matter included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

import yaml

from .drafts import REF_RE, SENTENCE_END, ParsedDraft, Sentence
from .evidence import YAML_LOADER
from .model import CitationRef, Edit, Finding, Span
from .text import LINE_BREAK

FIXABLE = ("stale-citation", "hash-mismatch", "quote-mismatch", "malformed-citation", "inactive-source")
"""Finding names whose core ``fix`` is safe to apply, in fix-all priority order (a
``malformed-citation`` carries a fix only for a mechanical slip, such as full-width ``＠``/``：``
typed by an IME in the id; an ``inactive-source`` only when its file was renamed to another
Unicode normal form and the cited line exists verbatim under the new spelling)."""

HASH_PREFIX = 12
"""Hex digits of the sha256 written into an inserted citation."""

_DEFINITION_START = re.compile(r"^\[\^([^\]\s]+)\]:")
_LABEL_DEF = re.compile(r"^\[\^(\d+)\]: ")
_LABEL_END = re.compile(r"\[\^(\d+)\]$")


def fix_all_edits(findings: Iterable[Finding]) -> list[Edit]:
    """Every safe fix of a report, non-overlapping, in document order (SPEC §10 "fix all").

    ``grounding_core.fixes.apply_edits`` semantics (an edit overlapping an earlier one is
    dropped), with ties at one start position broken by :data:`FIXABLE` order.
    """
    ranked = sorted(
        ((edit, FIXABLE.index(f.name)) for f in findings if f.fix is not None and f.name in FIXABLE
         for edit in (f.fix, *f.also)),
        key=lambda pair: (pair[0].span.start_line, pair[0].span.start_col, pair[1],
                          pair[0].span.end_line, pair[0].span.end_col, pair[0].new_text),
    )
    chosen: list[Edit] = []
    for edit, _ in ranked:
        if edit in chosen:
            continue
        if chosen and (edit.span.start_line, edit.span.start_col) < (chosen[-1].span.end_line,
                                                                     chosen[-1].span.end_col):
            continue
        chosen.append(edit)
    return chosen


def sentence_at(draft: ParsedDraft, line: int, column: int) -> Sentence | None:
    """The sentence holding 0-based ``line`` / code-point ``column`` (uncited ones first), or
    None when the cursor is in no sentence.
    """
    cited = [Sentence(c.sentence, c.sentence_span, ()) for c in draft.claims]
    for sentence in [*draft.uncited, *cited]:
        span = sentence.span
        if span.start_line == line and span.start_col <= column <= span.end_col:
            return sentence
    return None


def definition_line(label: str, citation: CitationRef, sha256: str, line_text: str) -> str:
    """The SPEC §5.1 definition ``[^label]: ID sha256:HEX12 "LINE"``."""
    return f'[^{label}]: {citation.id} sha256:{sha256[:HASH_PREFIX]} "{line_text}"'


def citation_edits(text: str, lines: Sequence[str], sentence_span: Span, citation: CitationRef,
                   sha256: str, line_text: str) -> tuple[list[Edit], str]:
    """Edits citing ``citation`` (whose line is ``line_text`` in the version hashing to
    ``sha256``) for the sentence at ``sentence_span`` of ``text``; and the new label.

    Two insertions (merged into one when they fall on the same point): ``[^N]`` before the
    sentence's final end mark, and the definition line at the end of the document.
    ``lines`` are ``text``'s lines without terminators.
    """
    label = new_label(text)
    title = f"Cite {citation.id}"
    line = lines[sentence_span.start_line] if sentence_span.start_line < len(lines) else ""
    col = sentence_span.end_col
    if col > sentence_span.start_col and line[col - 1:col] in (*SENTENCE_END, "."):
        col -= 1
    ref_at = (sentence_span.end_line, col)
    eol = _eol(text)
    definition = definition_line(label, citation, sha256, line_text)
    if not lines:
        end = (0, 0)
        block = definition + eol
    else:
        # At the end of the last line (before a final line break, which stays last), never on
        # the line after it: an editor holding "a\nb\n" as the lines [a, b] appends a line
        # for a position past its last one and keeps an empty line at the end (Neovim 0.11).
        last = lines[-1]
        blank_first = bool(last.strip()) and _DEFINITION_START.match(last) is None
        end = (len(lines) - 1, len(last))
        block = eol + (eol if blank_first else "") + definition
    reference = f"[^{label}]"
    if ref_at == end:
        return [Edit(Span(*end, *end), reference + block, title)], label
    return [Edit(Span(*ref_at, *ref_at), reference, title), Edit(Span(*end, *end), block, title)], label


def new_label(text: str) -> str:
    """One more than the largest numeric footnote label in ``text`` (``"1"`` when none)."""
    used = set(REF_RE.findall(text))
    numbers = [int(label) for label in used if label.isdigit()]
    n = max(numbers, default=0) + 1
    while str(n) in used:
        n += 1
    return str(n)


def append_answer(text: str, lines: Sequence[str], markdown: str) -> Edit:
    """An edit appending a generated answer ``markdown`` (SPEC §8) to the draft ``text``.

    A blank draft gets the whole of ``markdown``; a draft with text gets only its body, the
    footnote labels renumbered past those ``text`` uses (see the module docstring).
    ``markdown`` uses ``\\n``; the inserted block uses the draft's own line end.
    """
    title = "Insert the generated answer"
    if not text.strip():
        return Edit(Span(0, 0, len(lines), 0), markdown, title)
    eol = _eol(text)
    body = markdown.split("\n")
    if body and body[0] == "---":
        close = body.index("---", 1)
        body = body[close + 1:]
    first = int(new_label(text))
    mapping: dict[str, str] = {}
    for line in body:
        m = _LABEL_DEF.match(line)
        if m and m[1] not in mapping:
            mapping[m[1]] = str(first + len(mapping))
    renumbered = []
    for line in body:
        m = _LABEL_DEF.match(line)
        if m and m[1] in mapping:
            line = f"[^{mapping[m[1]]}]: " + line[m.end():]
        else:
            e = _LABEL_END.search(line)
            if e and e[1] in mapping:
                line = line[:e.start()] + f"[^{mapping[e[1]]}]"
        renumbered.append(line)
    while renumbered and not renumbered[-1].strip():
        renumbered.pop()
    while renumbered and not renumbered[0].strip():
        renumbered.pop(0)
    ends_with_break = text[-1] in "\r\n"
    last = lines[-1] if lines else ""
    # Inserted at the end of the last line, before a final line break (see citation_edits).
    block = eol + (eol if last.strip() else "") + eol.join(renumbered) + ("" if ends_with_break else eol)
    at = (max(len(lines) - 1, 0), len(last))
    return Edit(Span(*at, *at), block, title)


def _eol(text: str) -> str:
    match = LINE_BREAK.search(text)
    return match.group(0) if match else "\n"


__all__ = ["FIXABLE", "append_answer", "citation_edits", "context_unit_edits", "definition_line", "fix_all_edits",
           "new_label", "sentence_at", "with_context_edits"]


# ----------------------------------------------------------------- context follows a fix


_UNIT = re.compile(r"(?P<doc>[^@\s]+)@(?P<version>[1-9][0-9]*)(?::(?P<lines>[0-9]+(?:-[0-9]+)?))?")


def _context_unit_nodes(draft: ParsedDraft) -> list[tuple[str, Span, str]]:
    """The YAML scalars of a Markdown draft's ``context: {units: [...]}``: their text, span
    (0-based lines, code points; quotes included) and quote character (``""`` plain).
    """
    if draft.kind == "json" or draft.front_matter_lines < 2 or draft.context is None or draft.context.kind != "units":
        return []
    content = "\n".join(draft.lines[1:draft.front_matter_lines - 1])
    try:
        root = yaml.compose(content, Loader=YAML_LOADER)
    except (yaml.YAMLError, RecursionError):
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    found = []
    for key, value in root.value:
        if str(key.value) != "context" or not isinstance(value, yaml.MappingNode):
            continue
        for inner_key, units in value.value:
            if str(inner_key.value) != "units" or not isinstance(units, yaml.SequenceNode):
                continue
            for item in units.value:
                start, end = item.start_mark, item.end_mark
                if not isinstance(item, yaml.ScalarNode) or start.line != end.line:
                    continue
                quote = item.style if item.style in ("'", '"') else ""
                found.append((str(item.value), Span.line(start.line + 1, start.column, end.column), quote))
    return found


def context_unit_edits(draft: ParsedDraft, old: CitationRef, new: CitationRef) -> tuple[list[Edit], str]:
    """Keep a re-anchored citation visible in the draft's declared context units (SPEC §6).

    When ``old`` (the citation before a re-anchor) is visible only through a units entry
    ``DOC@V`` (the whole version), that entry becomes ``DOC@NEW`` (same quoting). An entry
    naming lines of the old version (``DOC@V:5-8``) is not rewritten (its other lines may
    serve other claims): the second value says what to change instead, e.g. ``"add
    shipping@4:10 to context.units"``; it is empty when nothing needs to change (no units
    context, or a unit already covers ``new``).
    """
    nodes = _context_unit_nodes(draft)
    if not nodes:
        return [], ""

    def covers(text: str, ref: CitationRef) -> bool:
        match = _UNIT.fullmatch(text.strip())
        if match is None or match["doc"] != ref.doc_id or int(match["version"]) != ref.version:
            return False
        if match["lines"] is None:
            return True
        first, _, last = match["lines"].partition("-")
        return int(first) <= ref.line <= int(last or first)

    if any(covers(text, new) for text, _span, _quote in nodes):
        return [], ""
    edits = []
    for text, span, quote in nodes:
        match = _UNIT.fullmatch(text.strip())
        if match is not None and match["lines"] is None and covers(text, old):
            unit = f"{new.doc_id}@{new.version}"
            edits.append(Edit(span, f"{quote}{unit}{quote}", f"Update context unit {text} to {unit}"))
    if edits:
        return edits, ""
    if any(covers(text, old) for text, _span, _quote in nodes):
        return [], f"add {new.id} to context.units"
    return [], ""


def with_context_edits(draft: ParsedDraft, findings: list[Finding]) -> list[Finding]:
    """``findings`` with each re-anchor fix (``stale-citation``, ``hash-mismatch``) carrying
    the context-unit edits of :func:`context_unit_edits` in ``also`` (or, when a unit cannot
    be rewritten safely, the hint saying what to add). Pure.
    """
    out = []
    for finding in findings:
        fix = finding.fix
        if fix is None or finding.name not in ("stale-citation", "hash-mismatch") or finding.citation is None:
            out.append(finding)
            continue
        old = _parse_id(finding.citation)
        new = _parse_id(fix.new_text.split(" ", 1)[0])
        if old is None or new is None or old == new:
            out.append(finding)
            continue
        also, advice = context_unit_edits(draft, old, new)
        if also:
            finding = replace(finding, also=tuple(also))
        elif advice:
            finding = replace(finding, hint=f"{finding.hint} Then {advice}.".strip())
        out.append(finding)
    return out


def _parse_id(text: str) -> CitationRef | None:
    match = _UNIT.fullmatch(text)
    if match is None or match["lines"] is None or "-" in match["lines"]:
        return None
    return CitationRef(match["doc"], int(match["version"]), int(match["lines"]))
