"""Ordered-list markers are list markers (SPEC §3, §15 "list markers"; issue 12).

Writers number policy lists (``1. ``, ``2) ``, ``3、``, ``１．``, ``（一）``, ``①`` ...); a
number must never become part of a field name. One function, ``split_marker``, is the rule
for evidence field lines, a claim's ``text``, the JSON ``text`` check and the answer
generator; ``EvidenceDocument.field_lines`` inlines it and must agree with it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grounding import cli
from grounding_core.evidence import parse_evidence, parse_field_line, split_marker

from .helpers import sha256, write_files

SHIP_A = (
    "---\ndoc_id: ship-a\nsubject: 退货政策\n---\n"   # 1-4
    "1. 退货期限：收货后7天\n"                          # 5
    "2. 发货时间：付款后48小时内\n"                     # 6
)
SHIP_B = (
    "---\r\ndoc_id: ship-b\r\nsubject: 退货政策\r\n---\r\n"   # 1-4  (CRLF)
    "一、发货时间：付款后24小时内 🎉\r\n"                       # 5
    "（二）运费：满99元包邮\r\n"                                # 6
)


@pytest.mark.parametrize("line, text", [
    ("1. 发货时间：付款后48小时内", "发货时间：付款后48小时内"),
    ("2) 发货时间：x", "发货时间：x"),
    ("3、 保修期：一年", "保修期：一年"),
    ("１．发货时间：x", "发货时间：x"),
    ("１２）发货时间：x", "发货时间：x"),
    ("(4) 发货时间：x", "发货时间：x"),
    ("（５）发货时间：x", "发货时间：x"),
    ("一、发货时间：x", "发货时间：x"),
    ("十二、发货时间：x", "发货时间：x"),
    ("（三）发货时间：x", "发货时间：x"),
    ("⑳发货时间：x", "发货时间：x"),
    ("- 1. 发货时间：x", "发货时间：x"),
    ("\u3000\u3000- ２． 发货时间：𠮷", "发货时间：𠮷"),
    ("\t* ① 发货时间：x", "发货时间：x"),
    ("   + 7) Shipping: 2 days", "Shipping: 2 days"),
    ("- 活动时间：周四16:30", "活动时间：周四16:30"),
])
def test_list_markers_are_removed_from_the_text(line: str, text: str) -> None:
    assert split_marker(line) == text


@pytest.mark.parametrize("line", [
    "1234567890. 发货时间：x",        # ten digits are not a marker
    "１２３４５６７８９０．发货时间：x",
    "1.5倍积分：x",                    # a decimal, not a marker
    "2)发货时间：x",                   # ")" needs a space
    "十一月：x",                       # a numeral without 、
    "-活动时间：x",                    # a bullet needs a space
    "1. - 发货时间：x",                # the bullet comes first, never after the number
])
def test_lookalikes_keep_their_text(line: str) -> None:
    expected = {"1. - 发货时间：x": "- 发货时间：x"}.get(line, line)
    assert split_marker(line) == expected


def test_ten_digit_number_is_part_of_the_field_name() -> None:
    parsed = parse_field_line("1234567890. 发货时间：x", ["："])
    assert parsed is not None and parsed.field == "1234567890. 发货时间"


markers = st.sampled_from([
    "", "- ", "* ", "+ ", "1. ", "23) ", "4、", "５．", "６）", "(7) ", "（８）", "一、", "（十）", "③",
    "- 9. ", "* 二、", "+ （三）",
])
indents = st.sampled_from(["", "  ", "\t", "\u3000", " \u3000\t"])
bodies = st.text(alphabet=st.sampled_from(list("发货时间：付款后小时内:𠮷🎉 a1")), max_size=20).filter(
    lambda s: not s[:1].isspace() and not s[:1].isdigit() and s[:1] not in "-*+(（一二三四五六七八九十"
)


@settings(max_examples=300, deadline=None)
@given(indents, markers, bodies)
def test_field_lines_and_split_marker_agree(indent: str, marker: str, body: str) -> None:
    """The inlined copy in ``EvidenceDocument.field_lines`` follows ``split_marker`` exactly."""
    line = indent + marker + body
    assert split_marker(line) == body
    doc = parse_evidence("d.md", f"{line}\r\n".encode(), ["：", ":"])
    expected = parse_field_line(line, ["：", ":"])
    assert doc.field_lines.get(1) == expected
    if expected is not None:
        assert not expected.field[:1].isdigit() and expected.text == body


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    return code, capsys.readouterr().out


def test_numbered_policy_lines_conflict_through_the_cli(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 12: ``2. 发货时间`` was the field name and this real conflict was missed."""
    write_files(tmp_path, {"evidence/a.md": SHIP_A, "evidence/b.md": SHIP_B,
                           "grounding.toml": 'today = "2026-05-01"\n'})
    code, out = _run(capsys, "conflicts", "--root", str(tmp_path), "--format", "json")
    conflicts = json.loads(out)
    assert code == 1
    assert [(c["subject"], c["field"]) for c in conflicts] == [("退货政策", "发货时间")]
    assert sorted(v["value"] for v in conflicts[0]["values"]) == ["付款后24小时内 🎉", "付款后48小时内"]


def test_a_draft_citing_a_numbered_line_gets_its_field_and_the_conflict(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    draft = (
        "---\nquestion: 多久发货？\nfields: [发货时间]\ncontext: {units: [\"ship-a@1\"]}\n---\n"
        "付款后48小时内发货[^1]。\n\n"
        f'[^1]: ship-a@1:6 sha256:{sha256(SHIP_A)[:12]} "2. 发货时间：付款后48小时内"\n'
    )
    write_files(tmp_path, {"evidence/a.md": SHIP_A, "evidence/b.md": SHIP_B,
                           "answers/a.md": draft, "grounding.toml": 'today = "2026-05-01"\n'})
    code, out = _run(capsys, "check", "--root", str(tmp_path), "--format", "json")
    report = json.loads(out)["drafts"][0]
    assert report["status"] == "conflict", report
    names = [d["name"] for d in report["diagnostics"]]
    assert "field-conflict" in names and "claim-value-mismatch" not in names
    assert code == 1


def test_json_text_is_the_quote_without_its_ordered_marker(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    def answer(text: str) -> str:
        claim = {"text": text, "quote": "（二）运费：满99元包邮", "id": "ship-b@1:6", "doc_id": "ship-b",
                 "version": 1, "line": 6, "sha256": sha256(SHIP_B), "field": "运费"}
        return json.dumps({"status": "answered", "claims": [claim], "missing_fields": [],
                           "fields": ["运费"], "context": {"units": ["ship-b@1"]}}, ensure_ascii=False)

    write_files(tmp_path, {"evidence/b.md": SHIP_B, "grounding.toml": 'today = "2026-05-01"\n',
                           "answers/good.answer.json": answer("运费：满99元包邮"),
                           "answers/bad.answer.json": answer("（二）运费：满99元包邮")})
    _run(capsys, "check", "--root", str(tmp_path), "--format", "json")
    code, out = _run(capsys, "check", "--root", str(tmp_path), "--format", "json")
    reports = {r["path"]: r for r in json.loads(out)["drafts"]}
    good, bad = reports["answers/good.answer.json"], reports["answers/bad.answer.json"]
    assert good["status"] == "answered" and not [d for d in good["diagnostics"] if d["severity"] == "error"]
    assert bad["status"] == "abstain"
    assert [d["name"] for d in bad["diagnostics"] if d["severity"] == "error"] == ["quote-mismatch"]


def test_the_answer_generator_writes_the_text_without_the_number(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    write_files(tmp_path, {"evidence/b.md": SHIP_B, "grounding.toml": 'today = "2026-05-01"\n'})
    code, out = _run(capsys, "answer", "--root", str(tmp_path), "--question", "运费多少？",
                     "--fields", "运费", "--format", "json")
    claims = json.loads(out)["claims"]
    assert code == 0
    assert [(c["text"], c["field"]) for c in claims] == [("运费：满99元包邮", "运费")]
