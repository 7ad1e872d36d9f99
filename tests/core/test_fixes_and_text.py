"""The shared line splitter, normalisation and edit application (SPEC §3, §7.3/§7.4, §10).

Columns are code points: an emoji (U+1F389) or a non-BMP ideograph (U+20BB7) is one column.
"""

from __future__ import annotations

import pytest

from grounding_core.fixes import apply_edits
from grounding_core.model import Edit, Span
from grounding_core.text import (
    LineIndex,
    describe_difference,
    normalize,
    normalize_value,
    split_lines,
    split_lines_keepends,
)


@pytest.mark.parametrize("text, lines", [
    ("", []),
    ("a", ["a"]),
    ("a\n", ["a"]),
    ("a\n\n", ["a", ""]),
    ("活动\r\n时间\r地点\n🎉", ["活动", "时间", "地点", "🎉"]),
    ("\r\n", [""]),
    ("一\u2028二\u2029三\u0085四\x0c五\x0b六\x1c七", ["一\u2028二\u2029三\u0085四\x0c五\x0b六\x1c七"]),
    ("a\r\r\nb", ["a", "", "b"]),
    ("活动：周四\n𠮷🎉\n\n", ["活动：周四", "𠮷🎉", ""]),  # no CR: the str.split path
    ("\n\n", ["", ""]),
])
def test_only_cr_lf_and_crlf_end_a_line(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines
    assert "".join(split_lines_keepends(text)) == text


def test_line_index_counts_code_points_across_crlf() -> None:
    text = "🎉𠮷活动\r\n时间：周四\n"
    index = LineIndex(text)
    assert index.position(0) == (0, 0)
    assert index.position(4) == (0, 4)     # just before \r\n
    assert index.position(6) == (1, 0)     # after \r\n
    assert index.offset(1, 3) == 9
    assert index.position(len(text)) == (2, 0)


def test_normalisation_for_values_only() -> None:
    assert normalize("周四 １６:３０") == normalize("周四16:30") == "周四16:30"
    assert normalize("周三16:30") != normalize("周四16:30")
    assert normalize_value("5月1日。") == "5月1日"
    assert normalize_value(" 免费！! ") == "免费"


def test_difference_names_invisible_characters_and_columns() -> None:
    assert describe_difference("- 时间：周四", "- 时间：周四") is None
    assert describe_difference("- 时间：周四", "- 时间：周四\u00a0") == (
        "column 8 of the quote: extra text at the end: U+00A0 NO-BREAK SPACE")
    assert describe_difference("- 时间：周四", "-\u3000时间：周四") == (
        "column 2 of the quote: U+3000 IDEOGRAPHIC SPACE where the source has U+0020 SPACE")
    assert "NFD" in (describe_difference("Café", "Cafe\u0301") or "")


def edit(line: int, start: int, end: int, text: str) -> Edit:
    return Edit(Span.line(line, start, end), text, text)


def test_apply_edits_uses_code_point_columns_and_keeps_line_ends() -> None:
    text = "🎉 活动\r\n[^1]: a@1:1 sha256:00000000 \"旧\"\r\n"
    out = apply_edits(text, [edit(1, 6, 31, 'a@2:1 sha256:11111111 "新"'), edit(0, 2, 4, "时间")])
    assert out == "🎉 时间\r\n[^1]: a@2:1 sha256:11111111 \"新\"\r\n"


def test_apply_edits_applies_duplicates_once() -> None:
    e = edit(0, 0, 1, "X")
    assert apply_edits("ab", [e, e]) == "Xb"


def test_of_overlapping_edits_at_one_start_the_first_given_wins_every_time() -> None:
    first, second = edit(0, 0, 2, "一"), edit(0, 0, 1, "二")
    assert apply_edits("ab", [first, second]) == "一"
    assert apply_edits("ab", [second, first]) == "二b"


def test_overlapping_later_edit_is_dropped() -> None:
    assert apply_edits("abcd", [edit(0, 0, 3, "X"), edit(0, 2, 4, "Y")]) == "Xd"
