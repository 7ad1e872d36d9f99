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
  after a blank line unless the last line is blank or already a definition.
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

from .drafts import REF_RE, SENTENCE_END, ParsedDraft, Sentence
from .model import CitationRef, Edit, Finding, Span
from .text import LINE_BREAK

FIXABLE = ("stale-citation", "hash-mismatch", "quote-mismatch", "malformed-citation")
"""Finding names whose core ``fix`` is safe to apply, in fix-all priority order (a
``malformed-citation`` carries a fix only for a mechanical slip, such as full-width ``＠``/``：``
typed by an IME in the id)."""

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
        ((f.fix, FIXABLE.index(f.name)) for f in findings if f.fix is not None and f.name in FIXABLE),
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
    ends_with_break = bool(text) and text[-1] in "\r\n"
    definition = definition_line(label, citation, sha256, line_text)
    if not lines:
        end = (0, 0)
        block = definition + eol
    else:
        last = lines[-1]
        blank_first = bool(last.strip()) and _DEFINITION_START.match(last) is None
        if ends_with_break:
            end = (len(lines), 0)
            block = (eol if blank_first else "") + definition + eol
        else:
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
    block = eol.join(renumbered) + eol
    ends_with_break = text[-1] in "\r\n"
    last = lines[-1] if lines else ""
    lead = ("" if ends_with_break else eol) + (eol if last.strip() else "")
    at = (len(lines), 0) if ends_with_break else (len(lines) - 1, len(last))
    return Edit(Span(*at, *at), lead + block, title)


def _eol(text: str) -> str:
    match = LINE_BREAK.search(text)
    return match.group(0) if match else "\n"


__all__ = ["FIXABLE", "append_answer", "citation_edits", "definition_line", "fix_all_edits", "new_label",
           "sentence_at"]
