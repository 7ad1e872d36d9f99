"""Applying mechanical fixes (SPEC §10 code actions, ``grounding check --fix``).

Edits carry spans in the draft's text (0-based lines, code-point columns). Applying is pure:
text in, text out; overlapping edits keep the first and drop the rest, so a fix-all never
corrupts a line two findings touch.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Edit
from .text import LineIndex


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits to ``text`` (identical duplicates are applied once).

    Of edits that overlap, the one starting first wins; at the same start, the one given first
    (a stable order, so ``--fix`` does the same thing on every run).
    """
    index = LineIndex(text)
    chosen: list[tuple[int, int, str]] = []
    unique = dict.fromkeys(edits)  # dedupe, keeping the caller's order
    for edit in sorted(unique, key=lambda e: (e.span.start_line, e.span.start_col)):
        start = index.offset(edit.span.start_line, edit.span.start_col)
        end = index.offset(edit.span.end_line, edit.span.end_col)
        if chosen and start < chosen[-1][1]:
            continue
        chosen.append((start, end, edit.new_text))
    for start, end, new_text in reversed(chosen):
        text = text[:start] + new_text + text[end:]
    return text
