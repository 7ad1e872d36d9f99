"""Single-field mutations of one valid claim (SPEC §5, §7.1): each part is checked on its own.

The evidence is one CRLF file whose body mixes CJK, an emoji, a meta field and a line that
has a distinct NFD form. A valid JSON answer claim (the eight keys of §5.2) and a valid
Markdown citation (§5.1, CRLF draft) are answered with no error; then exactly one field is
changed per test and the finding must carry the right SPEC §7 name at the right place (§7.7:
a Markdown citation finding covers its definition from the ID to the line's end, a JSON
finding covers the offending value).
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from support import MakeWorkspace, check, errors, json_answer, names, only, pos, sha256

from grounding_core.model import DraftReport, Status
from grounding_core.workspace import Workspace

SCHEDULE = (
    "---\r\n"                          # 1
    "doc_id: schedule\r\n"             # 2
    "version: 2\r\n"                   # 3
    "title: 秋季开放日通知\r\n"          # 4
    "---\r\n"                          # 5
    "- 活动时间：周四16:30\r\n"          # 6
    "- 地点：三楼报告厅 🎉\r\n"          # 7
    "- 版本说明：更正了活动时间\r\n"      # 8
    "- 导览：Café ガイド\r\n"            # 9  (é and ガ have NFD forms)
)
SHA = sha256(SCHEDULE)
LINE6 = "- 活动时间：周四16:30"
LINE9 = "- 导览：Café ガイド"

VALID_CLAIM: dict[str, Any] = {
    "text": "活动时间：周四16:30",
    "quote": LINE6,
    "id": "schedule@2:6",
    "doc_id": "schedule",
    "version": 2,
    "line": 6,
    "sha256": SHA,
    "field": "活动时间",
}


@pytest.fixture
def ws(make_workspace: MakeWorkspace) -> Workspace:
    return make_workspace({"evidence/schedule.md": SCHEDULE})


# -- JSON answers (§5.2) -----------------------------------------------------------------------


def answer(claim: dict[str, Any]) -> str:
    return json_answer(status="answered", claims=[claim], missing_fields=[], fields=["活动时间"],
                       context={"units": ["schedule@2"]})


def check_json(ws: Workspace, claim: dict[str, Any]) -> tuple[DraftReport, str]:
    text = answer(claim)
    return check(ws, "answers/a.answer.json", text), text


def mutated(**changes: Any) -> dict[str, Any]:
    return {**VALID_CLAIM, **changes}


def value_pos(text: str, key: str) -> tuple[int, int, int, int]:
    """1-based range of the value of claim ``key`` in an indented JSON answer."""
    for number, line in enumerate(text.splitlines(), 1):
        head = f'"{key}": '
        if line.lstrip().startswith(head) and line.startswith("      "):
            start = line.index(head) + len(head)
            end = len(line.rstrip(","))
            return (number, start + 1, number, end + 1)
    raise AssertionError(f"{key} not in {text}")


def assert_rejected(report: DraftReport, name: str) -> None:
    """The claim is not valid: only ``name`` errors, abstain, and the field counted missing."""
    assert set(errors(report)) == {name}, names(report)
    assert report.status is Status.ABSTAIN
    assert report.valid_claims == []
    assert report.missing_fields == ["活动时间"]


def test_valid_json_claim_is_answered_with_no_errors(ws: Workspace) -> None:
    report, _ = check_json(ws, VALID_CLAIM)
    assert report.status is Status.ANSWERED
    assert report.error_count == 0
    assert report.findings == []
    assert report.covered_fields == ["活动时间"]
    assert report.coverage == 1.0


def test_forged_json_id_disagreeing_with_its_parts_is_malformed_citation(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(id="schedule@2:7"))
    assert_rejected(report, "malformed-citation")
    finding = only(report, "malformed-citation")
    assert "disagrees" in finding.message
    assert pos(finding) == value_pos(text, "id")


@pytest.mark.parametrize("key, value", [("doc_id", "schedul"), ("version", 3), ("line", 7)])
def test_json_part_disagreeing_with_the_id_is_malformed_citation(
        ws: Workspace, key: str, value: object) -> None:
    report, text = check_json(ws, mutated(**{key: value}))
    assert_rejected(report, "malformed-citation")
    assert pos(only(report, "malformed-citation")) == value_pos(text, "id")


def test_json_doc_id_changed_with_its_id_is_unknown_source(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(doc_id="schedul", id="schedul@2:6"))
    assert_rejected(report, "unknown-source")
    finding = only(report, "unknown-source")
    assert "'schedule'" in finding.hint
    assert pos(finding) == value_pos(text, "doc_id")


def test_json_version_changed_with_its_id_is_unknown_or_stale(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(version=3, id="schedule@3:6"))
    assert_rejected(report, "unknown-source")
    assert pos(only(report, "unknown-source")) == value_pos(text, "version")
    report, _ = check_json(ws, mutated(version=1, id="schedule@1:6"))
    assert_rejected(report, "stale-citation")


def test_forged_json_line_on_real_quote_is_quote_mismatch(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(line=7, id="schedule@2:7"))
    assert_rejected(report, "quote-mismatch")
    finding = only(report, "quote-mismatch")
    assert "line 6" in finding.message
    assert pos(finding) == value_pos(text, "quote")


def test_json_sha256_of_other_content_is_hash_mismatch(ws: Workspace) -> None:
    other = sha256("其他内容\n")
    report, text = check_json(ws, mutated(sha256=other))
    assert_rejected(report, "hash-mismatch")
    assert pos(only(report, "hash-mismatch")) == value_pos(text, "sha256")


def test_json_sha256_prefix_instead_of_full_hash_is_malformed_citation(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(sha256=SHA[:12]))
    assert_rejected(report, "malformed-citation")
    assert pos(only(report, "malformed-citation")) == value_pos(text, "sha256")


def test_json_quote_with_one_character_changed_is_quote_mismatch(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(quote="- 活动时间：周四16:31", text="活动时间：周四16:31"))
    assert_rejected(report, "quote-mismatch")
    finding = only(report, "quote-mismatch")
    assert "column 14 of the quote: U+0031 DIGIT ONE" in finding.message
    assert pos(finding) == value_pos(text, "quote")


def test_json_text_not_derived_from_the_quote_is_quote_mismatch(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(text="活动时间：周三16:30"))
    assert_rejected(report, "quote-mismatch")
    finding = only(report, "quote-mismatch")
    assert "text" in finding.message
    assert pos(finding) == value_pos(text, "text")


def test_json_text_keeping_the_list_marker_is_quote_mismatch(ws: Workspace) -> None:
    report, _ = check_json(ws, mutated(text=LINE6))
    assert_rejected(report, "quote-mismatch")


def test_json_field_not_before_the_separator_is_quote_mismatch(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(field="活动"))
    assert_rejected(report, "quote-mismatch")
    assert pos(only(report, "quote-mismatch")) == value_pos(text, "field")


def test_json_boolean_line_is_malformed_citation(ws: Workspace) -> None:
    report, text = check_json(ws, mutated(line=True))
    assert '"line": true' in text
    assert_rejected(report, "malformed-citation")
    finding = only(report, "malformed-citation")
    assert "line must be a positive integer" in finding.message
    assert pos(finding) == value_pos(text, "line")


@pytest.mark.parametrize("key, value", [("version", "2"), ("line", 6.0), ("quote", ""),
                                        ("field", None)])
def test_json_value_of_the_wrong_type_is_malformed_citation(
        ws: Workspace, key: str, value: object) -> None:
    report, text = check_json(ws, mutated(**{key: value}))
    assert_rejected(report, "malformed-citation")
    assert pos(only(report, "malformed-citation")) == value_pos(text, key)


def test_json_nfd_quote_is_quote_mismatch_naming_the_normalisation(ws: Workspace) -> None:
    nfd = unicodedata.normalize("NFD", LINE9)
    assert nfd != LINE9 and unicodedata.normalize("NFC", nfd) == LINE9
    claim = mutated(quote=nfd, text=nfd[2:], id="schedule@2:9", line=9, field="导览")
    report = check(ws, "answers/a.answer.json", json_answer(
        status="abstain", claims=[claim], missing_fields=[], context={"units": ["schedule@2"]}))
    assert set(errors(report)) == {"quote-mismatch"}
    finding = only(report, "quote-mismatch")
    assert "NFD" in finding.message and "NFC" in finding.message


def test_json_quote_with_a_trailing_space_is_quote_mismatch_naming_it(ws: Workspace) -> None:
    report, _ = check_json(ws, mutated(quote=LINE6 + " ", text=VALID_CLAIM["text"] + " "))
    assert_rejected(report, "quote-mismatch")
    assert "column 15 of the quote: extra text at the end: U+0020 SPACE" in only(report, "quote-mismatch").message


def test_json_half_line_quote_is_quote_mismatch(ws: Workspace) -> None:
    report, _ = check_json(ws, mutated(quote="- 活动时间：周四", text="活动时间：周四"))
    assert_rejected(report, "quote-mismatch")
    assert "ends at column 10 of the source line" in only(report, "quote-mismatch").message


def test_json_claim_with_an_extra_key_is_malformed_citation(ws: Workspace) -> None:
    report, _ = check_json(ws, mutated(confidence=0.9))
    assert_rejected(report, "malformed-citation")
    assert "confidence" in only(report, "malformed-citation").message


def test_json_claim_missing_a_key_is_malformed_citation(ws: Workspace) -> None:
    claim = dict(VALID_CLAIM)
    del claim["field"]
    report, _ = check_json(ws, claim)
    assert_rejected(report, "malformed-citation")
    assert "'field'" in only(report, "malformed-citation").message


# -- Markdown citations (§5.1) -----------------------------------------------------------------

DRAFT = (
    "---\r\n"
    "question: 活动什么时候开始？\r\n"
    "fields: [活动时间]\r\n"
    'context: {units: ["schedule@2"]}\r\n'
    "---\r\n"
    "活动时间是周四16:30[^1]。🎉\r\n"
    "\r\n"
    f'[^1]: schedule@2:6 sha256:{SHA[:12]} "{LINE6}"\r\n'
)
DEF_LINE = 8


def check_md(ws: Workspace, old: str = "", new: str = "") -> tuple[DraftReport, str]:
    """Check DRAFT with ``old`` replaced by ``new`` in the definition line only."""
    head, definition = DRAFT.rsplit("[^1]:", 1)
    text = head + "[^1]:" + definition.replace(old, new, 1)
    return check(ws, "answers/a.md", text), text


def definition_pos(text: str) -> tuple[int, int, int, int]:
    """§7.7: the definition from its ID (column 7, after ``[^1]: ``) to the line's end."""
    line = text.split("\r\n")[DEF_LINE - 1]
    assert line.startswith("[^1]: ")
    return (DEF_LINE, 7, DEF_LINE, len(line) + 1)


def test_valid_markdown_citation_is_answered_with_no_errors(ws: Workspace) -> None:
    report, _ = check_md(ws)
    assert report.status is Status.ANSWERED
    assert report.error_count == 0
    assert report.findings == []
    assert report.coverage == 1.0


@pytest.mark.parametrize("old, new, name", [
    ("@2:6", "@2:7", "quote-mismatch"),          # forged line on a real quote
    ("schedule@", "schedul@", "unknown-source"),
    ("@2:6", "@3:6", "unknown-source"),
    ("@2:6", "@2:60", "unknown-source"),
    ("@2:6", "@1:6", "stale-citation"),           # version 1 was never indexed
    (SHA[:12], sha256("x")[:12], "hash-mismatch"),
    ("16:30\"", "16:31\"", "quote-mismatch"),
    (f'"{LINE6}"', f'"{LINE6[2:]}"', "quote-mismatch"),   # list marker dropped
    (f'"{LINE6}"', "\u201c" + LINE6 + "\u201d", "malformed-citation"),
    (f"sha256:{SHA[:12]}", f"sha256:{SHA[:12].upper()}", "malformed-citation"),
    (f"sha256:{SHA[:12]}", f"sha256:{SHA[:7]}", "malformed-citation"),
    (f" sha256:{SHA[:12]}", "", "malformed-citation"),
    ("@2:6", "@02:6", "malformed-citation"),
], ids=["forged-line", "doc-id", "future-version", "line-beyond-end", "old-version", "hash",
        "quote-char", "no-list-marker", "curly-quotes", "uppercase-hex", "short-hex", "no-hash",
        "leading-zero-version"])
def test_markdown_definition_mutation_is_rejected(
        ws: Workspace, old: str, new: str, name: str) -> None:
    report, text = check_md(ws, old, new)
    assert set(errors(report)) == {name}, names(report)
    assert report.status is Status.ABSTAIN
    assert report.missing_fields == ["活动时间"]
    assert pos(only(report, name)) == definition_pos(text)


def test_forged_line_id_on_real_quote_is_quote_mismatch(ws: Workspace) -> None:
    report, _ = check_md(ws, "@2:6", "@2:7")
    finding = only(report, "quote-mismatch")
    assert "the quote is line 6 of schedule@2, not line 7" in finding.message
    assert finding.citation == "schedule@2:7"


def test_markdown_nfd_quote_is_quote_mismatch_naming_the_normalisation(ws: Workspace) -> None:
    nfd = unicodedata.normalize("NFD", LINE9)
    text = DRAFT.replace("[活动时间]", "[导览]").replace("活动时间是周四16:30", "导览是Café ガイド")
    text = text.replace(f'2:6 sha256:{SHA[:12]} "{LINE6}"', f'2:9 sha256:{SHA[:12]} "{nfd}"')
    report = check(ws, "answers/a.md", text)
    assert set(errors(report)) == {"quote-mismatch"}
    finding = only(report, "quote-mismatch")
    assert "NFD" in finding.message
    assert "look identical but the code points differ" in finding.message
    assert pos(finding) == definition_pos(text)
    # the NFC quote of the same line verifies
    report = check(ws, "answers/a.md", text.replace(nfd, LINE9))
    assert report.error_count == 0 and report.status is Status.ANSWERED


def test_markdown_quote_with_a_trailing_space_names_u0020_and_its_column(ws: Workspace) -> None:
    report, _ = check_md(ws, f'"{LINE6}"', f'"{LINE6} "')
    finding = only(report, "quote-mismatch")
    assert "U+0020" in finding.message
    assert "column 15" in finding.message


def test_markdown_half_line_quote_is_quote_mismatch(ws: Workspace) -> None:
    report, _ = check_md(ws, f'"{LINE6}"', '"- 活动时间：周四"')
    finding = only(report, "quote-mismatch")
    assert "the quote ends at column 10 of the source line" in finding.message
    assert "'16:30'" in finding.message


def test_markdown_quote_with_a_no_break_space_names_the_character(ws: Workspace) -> None:
    report, _ = check_md(ws, f'"{LINE6}"', '"-\u00a0活动时间：周四16:30"')
    finding = only(report, "quote-mismatch")
    assert "column 2 of the quote: U+00A0 NO-BREAK SPACE where the source has U+0020 SPACE" in finding.message
