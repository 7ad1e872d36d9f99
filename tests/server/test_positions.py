"""server/positions.py: code points <-> UTF-16 / UTF-8 / UTF-32 client units (SPEC §3, §10)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import ServerTextPosition

from grounding_core.model import Span
from grounding_core.text import split_lines
from server.documents import GroundingDocument
from server.positions import PositionCodec, negotiate

UTF8 = PositionCodec("utf-8")
UTF16 = PositionCodec("utf-16")
UTF32 = PositionCodec("utf-32")

PARTY = "🎉"  # U+1F389: 2 UTF-16 units, 4 UTF-8 bytes
ASTRAL_CJK = "𠮷"  # U+20BB7: 2 UTF-16 units, 4 UTF-8 bytes
BMP_CJK = "中"  # U+4E2D: 1 UTF-16 unit, 3 UTF-8 bytes


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


# --------------------------------------------------------------------- to_client_column


@pytest.mark.parametrize(
    ("codec", "expected"),
    [(UTF16, [0, 1, 3, 4]), (UTF8, [0, 1, 5, 6]), (UTF32, [0, 1, 2, 3])],
    ids=["utf-16", "utf-8", "utf-32"],
)
def test_emoji_columns_count_in_client_units(codec: PositionCodec, expected: list[int]) -> None:
    line = f"a{PARTY}b"
    assert [codec.to_client_column(line, cp) for cp in range(4)] == expected


def test_astral_cjk_is_two_utf16_units_and_four_utf8_bytes() -> None:
    line = f"{ASTRAL_CJK}野家"
    assert UTF16.to_client_column(line, 1) == 2
    assert UTF8.to_client_column(line, 1) == 4
    assert UTF16.to_client_column(line, 3) == 4
    assert UTF8.to_client_column(line, 3) == 10


def test_bmp_cjk_is_one_utf16_unit_and_three_utf8_bytes() -> None:
    line = "活动时间：周四16:30"
    assert UTF16.to_client_column(line, 5) == 5
    assert UTF8.to_client_column(line, 5) == 15
    assert UTF8.to_client_column(line, len(line)) == 15 + 6 + 5


def test_to_client_column_clamps_past_line_end_and_below_zero() -> None:
    line = f"{BMP_CJK}{PARTY}"
    assert UTF16.to_client_column(line, 99) == 3
    assert UTF8.to_client_column(line, 99) == 7
    assert UTF16.to_client_column(line, -4) == 0


# ------------------------------------------------------------------- from_client_column


def test_utf16_column_inside_surrogate_pair_snaps_to_char_start() -> None:
    line = f"a{PARTY}b"
    assert UTF16.from_client_column(line, 1) == 1
    assert UTF16.from_client_column(line, 2) == 1  # between the two surrogates
    assert UTF16.from_client_column(line, 3) == 2


def test_utf8_column_inside_multibyte_char_snaps_to_char_start() -> None:
    line = f"a{BMP_CJK}{ASTRAL_CJK}b"
    assert [UTF8.from_client_column(line, u) for u in range(10)] == [0, 1, 1, 1, 2, 2, 2, 2, 3, 4]


def test_from_client_column_clamps_past_line_end() -> None:
    line = f"x{PARTY}"
    assert UTF16.from_client_column(line, 3) == 2
    assert UTF16.from_client_column(line, 50) == 2
    assert UTF8.from_client_column(line, 50) == 2
    assert UTF32.from_client_column(line, 50) == 2
    assert UTF16.from_client_column(line, -1) == 0
    assert UTF16.from_client_column("", 7) == 0


def test_u2028_is_an_ordinary_character_inside_a_line() -> None:
    text = "a\u2028b\r\nc"
    lines = split_lines(text)
    assert lines == ["a\u2028b", "c"]
    assert UTF16.to_client_column(lines[0], 3) == 3
    assert UTF8.to_client_column(lines[0], 3) == 1 + 3 + 1  # U+2028 is 3 UTF-8 bytes
    assert UTF8.from_client_column(lines[0], 4) == 2


# ------------------------------------------------------------------ spans and ranges


def test_lsp_range_of_a_span_after_emoji_on_a_crlf_line() -> None:
    lines = split_lines(f"x\r\n{PARTY}活动：周四\r\nend")
    span = Span.line(1, 1, 3)  # "活动"
    assert UTF16.lsp_range(span, lines) == types.Range(start=pos(1, 2), end=pos(1, 4))
    assert UTF8.lsp_range(span, lines) == types.Range(start=pos(1, 4), end=pos(1, 10))
    assert UTF32.lsp_range(span, lines) == types.Range(start=pos(1, 1), end=pos(1, 3))


def test_core_span_round_trips_lsp_range() -> None:
    lines = split_lines(f"{ASTRAL_CJK}a\r{PARTY}{BMP_CJK}\nz")
    span = Span(0, 1, 1, 2)
    for codec in (UTF8, UTF16, UTF32):
        assert codec.core_span(codec.lsp_range(span, lines), lines) == span


def test_core_span_clamps_columns_and_lines_past_the_end() -> None:
    lines = split_lines("ab\r\ncd")
    rng = types.Range(start=pos(0, 9), end=pos(7, 3))
    assert UTF16.core_span(rng, lines) == Span(0, 2, 2, 0)


def test_crlf_terminator_is_not_addressable_by_a_column() -> None:
    # pygls hands the codec lines with terminators; the column clamps before "\r\n".
    lines = ["ab\r\n", "c"]
    assert UTF16.position_from_client_units(lines, pos(0, 3)) == ServerTextPosition(0, 2)
    assert UTF16.position_to_client_units(lines, ServerTextPosition(0, 5)) == pos(0, 2)
    assert UTF16.position_from_client_units(lines, pos(4, 1)) == ServerTextPosition(2, 0)


# ------------------------------------------------------------------------ negotiation


def caps(*encodings: str) -> types.ClientCapabilities:
    general = types.GeneralClientCapabilities(position_encodings=list(encodings))
    return types.ClientCapabilities(general=general)


def test_negotiate_defaults_to_utf16() -> None:
    assert negotiate(types.ClientCapabilities()) == types.PositionEncodingKind.Utf16
    assert negotiate(caps()) == types.PositionEncodingKind.Utf16
    assert negotiate(caps("utf-16")) == types.PositionEncodingKind.Utf16
    assert negotiate(None) == types.PositionEncodingKind.Utf16


def test_negotiate_prefers_utf8_or_utf32_even_when_utf16_is_listed_first() -> None:
    assert negotiate(caps("utf-16", "utf-8")) == types.PositionEncodingKind.Utf8
    assert negotiate(caps("utf-8", "utf-16", "utf-32")) == types.PositionEncodingKind.Utf8
    assert negotiate(caps("utf-16", "utf-32", "utf-8")) == types.PositionEncodingKind.Utf32


def test_negotiate_ignores_unknown_encodings() -> None:
    assert negotiate(caps("latin-1", "utf-16")) == types.PositionEncodingKind.Utf16


# ------------------------------------------------- the codec inside the document model


def apply(doc: GroundingDocument, start: tuple[int, int], end: tuple[int, int], text: str) -> str:
    change = types.TextDocumentContentChangePartial(
        range=types.Range(start=pos(*start), end=pos(*end)), text=text
    )
    doc.apply_change(change)
    return doc.source


def test_document_lines_split_only_on_crlf_cr_lf() -> None:
    doc = GroundingDocument("file:///a.md", "a\u2028b\x0cc\x85d\r\ne\rf\n", position_codec=UTF16)
    assert list(doc.lines) == ["a\u2028b\x0cc\x85d\r\n", "e\r", "f\n"]
    assert doc.text_lines == ("a\u2028b\x0cc\x85d", "e", "f")


def test_document_edit_after_emoji_uses_the_session_encoding() -> None:
    utf16 = GroundingDocument("file:///a.md", f"{PARTY}x\n", position_codec=UTF16)
    utf8 = GroundingDocument("file:///a.md", f"{PARTY}x\n", position_codec=UTF8)
    assert apply(utf16, (0, 2), (0, 3), "Y") == f"{PARTY}Y\n"
    assert apply(utf8, (0, 4), (0, 5), "Y") == f"{PARTY}Y\n"


def test_document_edit_past_line_end_clamps_before_the_terminator() -> None:
    doc = GroundingDocument("file:///a.md", "ab\r\ncd", position_codec=UTF16)
    assert apply(doc, (0, 10), (0, 12), "!") == "ab!\r\ncd"


def test_document_edit_on_last_line_without_newline_and_past_the_end() -> None:
    doc = GroundingDocument("file:///a.md", "ab\ncd", position_codec=UTF16)
    assert apply(doc, (1, 2), (1, 2), "e") == "ab\ncde"
    assert apply(doc, (5, 0), (9, 9), "\n") == "ab\ncde\n"
    assert apply(doc, (2, 0), (2, 0), "z") == "ab\ncde\nz"
    assert apply(doc, (1, 1), (3, 0), "") == "ab\nc"


def test_document_edit_joining_cr_and_lf_changes_line_count_like_the_editor() -> None:
    doc = GroundingDocument("file:///a.md", "a\rb", position_codec=UTF16)
    assert apply(doc, (1, 0), (1, 1), "\n") == "a\r\n"
    assert doc.text_lines == ("a",)


# ---------------------------------------------------------------------------- property

# Any code point except lone surrogates (an editor buffer never holds those).
characters = st.characters(exclude_categories=("Cs",))


@given(st.text(characters), st.data())
def test_cp_to_utf16_and_back_is_identity(text: str, data: st.DataObject) -> None:
    for line in split_lines(text) or [""]:
        cp = data.draw(st.integers(0, len(line)))
        units = UTF16.to_client_column(line, cp)
        assert units == len(line[:cp].encode("utf-16-le")) // 2
        assert UTF16.from_client_column(line, units) == cp


@given(st.text(characters), st.data())
def test_cp_to_utf8_and_back_is_identity(text: str, data: st.DataObject) -> None:
    for line in split_lines(text) or [""]:
        cp = data.draw(st.integers(0, len(line)))
        units = UTF8.to_client_column(line, cp)
        assert units == len(line[:cp].encode("utf-8"))
        assert UTF8.from_client_column(line, units) == cp


@given(st.text(characters), st.integers(0, 200))
def test_any_client_column_maps_to_a_char_boundary_at_or_before_it(text: str, unit: int) -> None:
    for codec in (UTF8, UTF16, UTF32):
        cp = codec.from_client_column(text, unit)
        assert 0 <= cp <= len(text)
        assert codec.to_client_column(text, cp) <= unit
        if cp < len(text):
            assert codec.to_client_column(text, cp + 1) > unit
