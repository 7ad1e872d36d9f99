"""Property tests (hypothesis): the splitter, the citation grammar, positions and the parsers.

- ``split_lines``: only ``\\r\\n``, ``\\r``, ``\\n`` end a line (SPEC §3); the keep-ends form
  joins back to the text; U+2028, U+0085, form feed and friends never split.
- ``parse_definition``: never raises; accepts a line only in the exact SPEC §5.1 shape and
  then returns exactly its parts; every near miss fails closed.
- ``PositionCodec``: code points <-> UTF-16 <-> UTF-8 round trips, clamping and snapping.
- ``parse_markdown`` / ``parse_json_answer`` / ``check_draft``: never raise; every reference
  resolves to a definition or yields a ``malformed-citation`` finding on it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grounding_core.config import Config
from grounding_core.drafts import HEX_RE, ID_RE, parse_definition, parse_json_answer, parse_markdown
from grounding_core.state import Event, IndexState, MemorySnapshot
from grounding_core.text import LineIndex, split_lines, split_lines_keepends
from grounding_core.verify import check_draft
from server.positions import PositionCodec

from .helpers import SCHEDULE, sha256

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BREAKS = ["\r\n", "\r", "\n"]
NOT_BREAKS = ["\u2028", "\u2029", "\u0085", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e"]
ODD = ["a", "中", "🎉", "𠮷", "é", "e\u0301", " ", "\t", '"', "“", "\\", "[^1]", "。", "."]

text_pieces = st.lists(st.sampled_from(BREAKS + NOT_BREAKS + ODD) | st.text(max_size=5),
                       max_size=40).map("".join)


# ------------------------------------------------------------------------- the splitter


@FUZZ
@given(text_pieces)
def test_keepends_lines_join_back_to_the_text(text: str) -> None:
    pieces = split_lines_keepends(text)
    assert "".join(pieces) == text
    assert [re.sub(r"(\r\n|\r|\n)\Z", "", p) for p in pieces] == split_lines(text)


@FUZZ
@given(text_pieces)
def test_only_cr_lf_and_crlf_end_lines(text: str) -> None:
    lines = split_lines(text)
    assert all("\r" not in line and "\n" not in line for line in lines)
    terminators = len(re.findall(r"\r\n|\r|\n", text))
    ends_open = bool(text) and not re.search(r"(\r\n|\r|\n)\Z", text)
    assert len(lines) == terminators + ends_open
    normalised = re.sub(r"\r\n|\r|\n", "\n", text)
    assert "\n".join(lines) + ("\n" if text and not ends_open else "") == normalised


@FUZZ
@given(st.lists(st.sampled_from(NOT_BREAKS + ODD), min_size=1, max_size=30).map("".join))
def test_unicode_breaks_never_split_a_line(text: str) -> None:
    assert split_lines(text) == [text]
    assert split_lines(text + "\n") == [text]


@FUZZ
@given(text_pieces)
def test_line_index_offsets_round_trip(text: str) -> None:
    index = LineIndex(text)
    for offset in range(len(text) + 1):
        if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
            continue  # inside a CRLF: not a position
        line, col = index.position(offset)
        assert index.offset(line, col) == offset


# ----------------------------------------------------------------- the citation grammar


labels = st.text(st.characters(blacklist_characters="]\r\n ", blacklist_categories=("Cs",)),
                 min_size=1, max_size=6)
doc_ids = st.text(st.characters(blacklist_characters='@:[]"', blacklist_categories=("Cs", "Z", "Cc")),
                  min_size=1, max_size=12).filter(lambda s: not re.search(r"\s", s))
numbers = st.integers(min_value=1, max_value=10**6)
hexes = st.text("0123456789abcdef", min_size=8, max_size=64)
quotes = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)


@FUZZ
@given(labels, st.text(max_size=80))
def test_parse_definition_never_raises_and_accepts_only_the_exact_shape(label: str, tail: str) -> None:
    for line in (tail, f"[^{label}]:{tail}", f"[^{label}]: {tail}"):
        d = parse_definition(line, 0, label)
        if d.error is None:
            assert d.citation is not None and d.hash_prefix is not None and d.quote is not None
            assert ID_RE.fullmatch(d.id_text) and HEX_RE.fullmatch(d.hash_prefix)
            assert d.citation.id == d.id_text
            rebuilt = f'[^{label}]: {d.id_text} sha256:{d.hash_prefix} "{d.quote}"'
            assert line.startswith(rebuilt) and line[len(rebuilt):].strip(" ") == ""
        else:
            assert d.citation is None and d.quote is None


@FUZZ
@given(labels, doc_ids, numbers, numbers, hexes, quotes, st.integers(0, 3))
def test_exact_shape_is_accepted_with_its_parts(label: str, doc_id: str, version: int, line: int,
                                                hex_text: str, quote: str, spaces: int) -> None:
    text = f'[^{label}]: {doc_id}@{version}:{line} sha256:{hex_text} "{quote}"' + " " * spaces
    d = parse_definition(text, 3, label)
    assert d.error is None, d.error
    assert (d.citation.doc_id, d.citation.version, d.citation.line) == (doc_id, version, line)  # type: ignore[union-attr]
    assert d.hash_prefix == hex_text and d.quote == quote
    assert d.span.start_line == 3 and d.span.end_col == len(text)


NEAR_MISSES = [
    ('"', "“"), ('"', "”"), ('"', "＂"), ('"', "'"),  # other quote marks
    ("sha256:", "sha256 :"), ("sha256:", "SHA256:"), ("sha256:", ""),
    (": ", ":  "), (": ", ":"), (" sha256", "  sha256"),
    ("@", "＠"), ("@", "@0"), (":", "："),
]


@FUZZ
@given(labels, doc_ids, numbers, numbers, hexes, quotes, st.sampled_from(NEAR_MISSES))
def test_near_misses_fail_closed(label: str, doc_id: str, version: int, line: int, hex_text: str,
                                 quote: str, miss: tuple[str, str]) -> None:
    good = f'[^{label}]: {doc_id}@{version}:{line} sha256:{hex_text} "{quote}"'
    old, new = miss
    head = f"[^{label}]"
    rest = good[len(head):]
    if old == '"':
        # replace the opening quote mark only (the closing one may legitimately be any " in QUOTE)
        at = rest.index(' "') + 1
        bad = head + rest[:at] + new + rest[at + 1:]
    else:
        if old not in rest or (old in doc_id and old in ("@", ":")):
            return
        bad = head + rest.replace(old, new, 1)
    d = parse_definition(bad, 0, label)
    assert d.error is not None and d.citation is None, bad


@FUZZ
@given(labels, doc_ids, numbers, numbers, hexes, quotes)
def test_uppercase_or_short_hex_fails_closed(label: str, doc_id: str, version: int, line: int,
                                             hex_text: str, quote: str) -> None:
    for bad_hex in (hex_text.upper(), hex_text[:7], hex_text + "g"):
        if bad_hex == hex_text:
            continue
        d = parse_definition(f'[^{label}]: {doc_id}@{version}:{line} sha256:{bad_hex} "{quote}"', 0, label)
        assert d.error is not None and d.citation is None


# --------------------------------------------------------------------------- positions


line_texts = st.lists(st.sampled_from(["a", "中", "🎉", "𠮷", "é", "\u2028", "\x0c", " ", "ÿ"])
                      | st.text(st.characters(blacklist_categories=("Cs",),
                                              blacklist_characters="\r\n"), max_size=4),
                      max_size=20).map("".join)
ENCODINGS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}


@FUZZ
@given(line_texts, st.sampled_from(list(ENCODINGS)))
def test_code_point_columns_round_trip_through_client_units(text: str, encoding: str) -> None:
    codec = PositionCodec(encoding)
    python_codec, width = ENCODINGS[encoding]
    for cp in range(len(text) + 1):
        units = codec.to_client_column(text, cp)
        assert units == len(text[:cp].encode(python_codec)) // width
        assert codec.from_client_column(text, units) == cp
    assert codec.units(text) == len(text.encode(python_codec)) // width


@FUZZ
@given(line_texts, st.sampled_from(list(ENCODINGS)), st.integers(-5, 200))
def test_any_client_column_snaps_to_a_character_start_at_or_before_it(
        text: str, encoding: str, unit_col: int) -> None:
    codec = PositionCodec(encoding)
    cp = codec.from_client_column(text, unit_col)
    assert 0 <= cp <= len(text)
    back = codec.to_client_column(text, cp)
    assert back <= max(unit_col, 0)
    if cp < len(text):  # the next character would pass the column
        assert codec.to_client_column(text, cp + 1) > unit_col


@FUZZ
@given(st.lists(line_texts, min_size=1, max_size=5), st.sampled_from(list(ENCODINGS)),
       st.integers(0, 7), st.integers(0, 60))
def test_positions_round_trip_between_utf16_and_utf8(lines: list[str], encoding: str, line: int,
                                                     col: int) -> None:
    codec, utf16, utf8 = PositionCodec(encoding), PositionCodec("utf-16"), PositionCodec("utf-8")
    core = codec.core_position(codec.lsp_position(line, col, lines), lines)
    if line < len(lines):
        assert core == (line, min(col, len(lines[line])))
    else:
        assert core == (len(lines), 0)
    # the same code-point position, through UTF-16 then through UTF-8, comes back unchanged
    via16 = utf16.core_position(utf16.lsp_position(*core, lines), lines)
    via8 = utf8.core_position(utf8.lsp_position(*via16, lines), lines)
    assert via8 == core


# ------------------------------------------------------------------ drafts never crash

TODAY = dt.date(2026, 5, 1)
SHA = sha256(SCHEDULE)
STATE = MemorySnapshot(IndexState().apply([Event(1, "import", "schedule", 1, SHA, "schedule.md", SCHEDULE)]))
CONFIG = Config(root=Path("/nonexistent-workspace"))

DRAFT_LINES = [
    "---", "question: 活动什么时候开始？", "fields: [活动时间]", "fields: {a: 1}",
    'context: {units: ["schedule@1"]}', "context: [", "subject: 秋季开放日",
    "活动时间是周四16:30[^1]。", "地点是礼堂 A[^2]. 备注[^1][^3]！", "活动时间是周四16:30。",
    "[^1]: schedule@1:6 sha256:" + SHA[:12] + ' "- 活动时间：周四16:30"',
    "[^2]: schedule@1:7 sha256:" + SHA[:8] + ' "- 地点：礼堂 A"',
    "[^3]: schedule@1:99 sha256:" + SHA[:8] + ' "x"',
    "[^1]: schedule@01:6 sha256:ABCDEF12 “q”", "[^2]:schedule@1:7", "  [^3]: indented@1:1 sha256:abcdef12 \"x\"",
    "[^x]: a@1:1 sha256:abcdef12 \"\"", "# 标题[^1]", "> 引用[^2]。", "- 列表[^1]", "```", "    code [^1]",
    "", "\\[^1] escaped", "[^1][^2][^3]", "text [^ 1] [^]", "<!-- [^1] -->", "[link](x)[^2]",
    "\u2028", "\r", "\r\n", "\t[^1]", "。。。[^1]", "1. item[^3]",
]

drafts = st.lists(st.sampled_from(DRAFT_LINES) | st.text(max_size=12), max_size=14).map("\n".join)


def _labels_resolve(text: str) -> None:
    draft = parse_markdown(text)
    lines = split_lines(text)
    malformed = {f.span for f in draft.findings if f.name == "malformed-citation"}
    for claim in draft.claims:
        assert claim.label is not None
        if claim.citation is None:
            assert claim.citation_span in malformed, (claim, draft.findings)
        else:
            line = lines[claim.citation_span.start_line]
            assert line.startswith(f"[^{claim.label}]: {claim.citation.id} sha256:")
        assert claim.sentence_span.start_line < max(len(lines), 1)
    for finding in draft.findings:
        assert finding.span.start_line <= max(len(lines) - 1, 0)


@SLOW_FUZZ
@given(drafts)
def test_markdown_parser_never_raises_and_every_reference_resolves_or_is_malformed(text: str) -> None:
    _labels_resolve(text)
    _labels_resolve(text.replace("\n", "\r\n"))


@SLOW_FUZZ
@given(drafts)
def test_check_draft_never_raises_on_fuzzed_markdown(text: str) -> None:
    report = check_draft(parse_markdown(text), STATE, CONFIG, TODAY, "answers/a.md")
    assert all(f.name for f in report.findings)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["status", "claims", "missing_fields", "fields", "context", "text", "quote",
                         "id", "doc_id", "version", "line", "sha256", "field", "units", "x"]),
        inner, max_size=6),
    max_leaves=25,
)


@SLOW_FUZZ
@given(json_values)
def test_json_parser_and_checks_never_raise(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for candidate in (text, text[: len(text) // 2]):
        draft = parse_json_answer(candidate)
        report = check_draft(draft, STATE, CONFIG, TODAY, "a.answer.json")
        assert report.status.value in ("answered", "partial", "abstain", "conflict")


@SLOW_FUZZ
@given(st.sampled_from(["text", "quote", "id", "doc_id", "version", "line", "sha256", "field"]),
       json_values)
def test_any_wrong_claim_value_fails_closed(key: str, value: object) -> None:
    claim = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@1:6",
             "doc_id": "schedule", "version": 1, "line": 6, "sha256": SHA, "field": "活动时间"}
    if claim[key] == value and type(claim[key]) is type(value):
        return
    claim[key] = value
    text = json.dumps({"status": "answered", "claims": [claim], "missing_fields": []},
                      ensure_ascii=False)
    report = check_draft(parse_json_answer(text), STATE, CONFIG, TODAY, "a.answer.json")
    assert report.valid_claims == [], (key, value)
