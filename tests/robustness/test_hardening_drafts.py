"""Issue 13 items 4, 5, 6, 13, 16 and issue 12's IME slips, through the command line.

Every test builds its own workspace and runs ``grounding check``/``index`` in-process
(:func:`grounding.cli.main`, the console script's code) and reads the JSON report.

- 4: a YAML merge key (``<<: *defaults``) could carry ``status: revoked``: refused
  (``invalid-front-matter`` / ``malformed-citation``), never ignored.
- 5: text inside HTML blocks and inline HTML is prose: its uncited claims are checked.
- 6: the claim-value check compares rendered text (bold is no false GR111, deleted text
  hides nothing).
- 13: brackets inside quoted YAML scalars do not count towards the nesting limit.
- 16: a footnote label with U+3000 (or any space, control or format character) is reported
  on its reference, and its neighbours on the line are parsed as usual.
- IME slips: ``＠``, ``：`` and full-width digits in a citation id name the character and
  column, and ``--fix`` repairs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grounding import cli
from grounding_core.drafts import prose_text

from .helpers import SCHEDULE, sha256, write_files

HASH = sha256(SCHEDULE)[:12]
TOML = 'today = "2026-05-01"\n'
TIME = f'schedule@1:6 sha256:{HASH} "- 活动时间：周四16:30"'
PLACE = f'schedule@1:7 sha256:{HASH} "- 地点：礼堂 A"'
NOTE = f'schedule@1:8 sha256:{HASH} "- 备注：请带*学生证*"'
FRONT = '---\nquestion: 活动什么时候开始？\nfields: [活动时间, 地点]\ncontext: {units: ["schedule@1"]}\n---\n'


def run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``grounding check --format json`` (or another command) on ``root``; (exit, JSON)."""
    code = cli.main([*(args or ("check",)), "--root", str(root), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def draft_report(capsys: pytest.CaptureFixture[str], root: Path, draft: str,
                 files: dict[str, str | bytes] | None = None, toml: str = TOML) -> dict[str, Any]:
    write_files(root, {"evidence/schedule.md": SCHEDULE, "grounding.toml": toml,
                       "answers/a.md": draft, **(files or {})})
    _, report = run(capsys, root)
    [only] = [d for d in report["drafts"] if d["path"] == "answers/a.md"]
    return only


def names(report: dict[str, Any]) -> list[str]:
    return [d["name"] for d in report["diagnostics"]]


def diagnostics(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [d for d in report["diagnostics"] if d["name"] == name]


# -- 16: footnote labels --------------------------------------------------------------------


@pytest.mark.parametrize("bad, char", [
    ("a\u3000b", "U+3000 IDEOGRAPHIC SPACE"),
    ("注\u3000一", "U+3000 IDEOGRAPHIC SPACE"),
    ("a\tb", "U+0009 CHARACTER TABULATION"),
    ("a\u00a0b", "U+00A0 NO-BREAK SPACE"),
    ("a\u200bb", "U+200B ZERO WIDTH SPACE"),
    ("🎉\u3000", "U+3000 IDEOGRAPHIC SPACE"),
])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_bad_label_is_reported_and_its_neighbours_still_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, char: str, newline: str) -> None:
    draft = (FRONT + f"活动时间是周四16:30[^{bad}]。地点是礼堂 A[^2]。\n\n"
             f"[^{bad}]: {TIME}\n[^2]: {PLACE}\n").replace("\n", newline)
    report = draft_report(capsys, tmp_path, draft)
    [malformed] = diagnostics(report, "malformed-citation")
    assert char in malformed["message"] and "not a valid footnote label" in malformed["message"]
    assert (malformed["line"], malformed["column"]) == (6, 13)  # the reference itself
    assert "uncited-claim" not in names(report)
    assert report["covered_fields"] == ["地点"]  # the neighbour is a valid claim


@pytest.mark.parametrize("label", ["🎉", "注一", "schedule-time", "𠮷1", "a.b"])
def test_labels_without_spaces_are_valid_whatever_their_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str) -> None:
    draft = FRONT + f"活动时间是周四16:30[^{label}]。地点是礼堂 A[^2]。\n\n[^{label}]: {TIME}\n[^2]: {PLACE}\n"
    report = draft_report(capsys, tmp_path, draft)
    assert report["status"] == "answered", report["diagnostics"]


def test_an_undefined_bad_label_is_reported_as_a_bad_label(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT + f"活动时间是周四16:30[^a\u3000b]。地点是礼堂 A[^2]。\n\n[^2]: {PLACE}\n"
    report = draft_report(capsys, tmp_path, draft)
    [malformed] = diagnostics(report, "malformed-citation")
    assert "U+3000" in malformed["message"]
    assert report["covered_fields"] == ["地点"] and "uncited-claim" not in names(report)


# -- 5: HTML is prose ------------------------------------------------------------------------


@pytest.mark.parametrize("html", [
    "<div>活动时间改为周三16:30。</div>",
    "<div>\n活动时间改为周三16:30。\n</div>",
    "<section class=\"note\">\r\n  <p>活动时间改为周三16:30 🎉</p>\r\n</section>",
    "<details><summary>注意</summary>活动时间改为周三16:30。</details>",
    "<span>活动</span>时间改为周三16:30。",          # inline HTML in a paragraph
    "活动<b>时间</b>改为周三。",
])
def test_uncited_claims_inside_html_are_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], html: str) -> None:
    draft = FRONT + f"活动时间是周四16:30[^1]。\n\n{html}\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft)
    [uncited] = diagnostics(report, "uncited-claim")
    assert "活动时间" in uncited["message"]
    assert uncited["line"] >= 8


@pytest.mark.parametrize("html", [
    "<!-- 活动时间改为周三16:30。 -->",
    "<!--\n活动时间改为周三16:30。\n-->",
    "<div>\n<!-- 活动时间改为周三16:30。 -->\n</div>",
    "<div><del>活动时间改为周三16:30。</del></div>",
    "<script>\nvar 活动时间 = '周三16:30';\n</script>",
    "<pre>\n活动时间：周三16:30\n</pre>",
    "<div><code>活动时间</code></div>",
])
def test_comments_code_and_deleted_text_inside_html_are_not_claims(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], html: str) -> None:
    draft = FRONT + f"活动时间是周四16:30[^1]。\n\n{html}\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft, toml=TOML + "strict = true\n")
    assert "uncited-claim" not in names(report), report["diagnostics"]


@pytest.mark.parametrize("paragraph", [
    "会员日是周四<!-- 内部备注：活动时间改为周三16:30 -->。",      # "<!" was a sentence end
    "会员日是周四<!-- 内部备注：活动时间改为周三16:30。 -->。",
    "会员日是周四 🎉<!-- 内部备注\r\n活动时间：周三16:30 -->𠮷。",  # a comment over two lines
    "会员日是周四<!-- 活动时间！ --->，<!-- 地点？ -->。",
    "1. 会员日是周四<!-- 活动时间。 -->\n2. 报名<!-->截止<!--\n地点待定 -->。",  # <!--> is whole
])
def test_inline_comments_in_a_paragraph_are_not_claims(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], paragraph: str) -> None:
    draft = FRONT + f"活动时间是周四16:30[^1]。\n\n{paragraph}\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft)
    assert "uncited-claim" not in names(report), report["diagnostics"]


def test_an_inline_comment_keeps_its_sentence_and_hides_no_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT + ("活动时间<!-- 注：见[^2]！ -->是周四16:30[^1]。地点是<!-- 。 -->礼堂 B[^2]。\r\n"
                     "活动时间<!-- 备注 -->改为周三。\r\n\r\n"
                     f"[^1]: {TIME}\r\n[^2]: {PLACE}\r\n")
    report = draft_report(capsys, tmp_path, draft)
    assert report["covered_fields"] == ["活动时间", "地点"]
    [mismatch] = diagnostics(report, "claim-value-mismatch")  # 礼堂 B; 周四16:30 is intact
    assert (mismatch["line"], mismatch["column"]) == (6, 35)
    [uncited] = diagnostics(report, "uncited-claim")  # the comment splits no sentence
    assert (uncited["line"], uncited["column"], uncited["end_column"]) == (7, 1, 21)
    assert "活动时间" in uncited["message"]


@pytest.mark.parametrize("fragment, seen", [
    ("活动时间是周<!-- 四16:30 --->三", "活动时间是周三"),  # a comment ends at its first "-->" (CommonMark 0.31)
    ("周<!---->四<!--->16:30<!-->", "周四16:30"),
    ("🎉<!-- a\r\nb --->𠮷 <!-- 未闭合", "🎉𠮷 <!-- 未闭合"),
])
def test_an_inline_comment_is_hidden_from_the_rendered_text(fragment: str, seen: str) -> None:
    assert prose_text(fragment) == seen


def test_strict_mode_flags_every_uncited_sentence_inside_html(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT + f"活动时间是周四16:30[^1]。\n\n<div>Bring water. 带水🎉</div>\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft, toml=TOML + "strict = true\n")
    assert [(d["line"], d["message"]) for d in diagnostics(report, "uncited-claim")] == [
        (8, "this sentence has no citation (strict mode)")] * 2


def test_a_citation_inside_an_html_block_is_checked_like_any_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT + (f"<div>活动时间是周四16:30[^1]。</div>\n\n<p>地点是礼堂 B[^2]。</p>\n\n"
                     f"[^1]: {TIME}\n[^2]: {PLACE}\n")
    report = draft_report(capsys, tmp_path, draft)
    assert report["covered_fields"] == ["活动时间", "地点"]
    assert [d["line"] for d in diagnostics(report, "claim-value-mismatch")] == [8]  # 礼堂 B


# -- 6: the claim-value check reads rendered text ---------------------------------------------


@pytest.mark.parametrize("sentence", [
    "活动时间是**周四**16:30",
    "活动时间是*周四*16:30",
    "活动时间是<b>周四</b>16:30",
    "活动时间是 **周四** 16:30 🎉",
    "活动时间是`周四16:30`",
    "活动时间是[周四](https://example.org/x)16:30",
    "活动时间是周四&#49;6:30",
])
def test_markup_in_the_sentence_is_no_false_mismatch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sentence: str) -> None:
    draft = FRONT.replace(", 地点", "") + f"{sentence}[^1]。\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft)
    assert report["status"] == "answered"
    assert "claim-value-mismatch" not in names(report), report["diagnostics"]


@pytest.mark.parametrize("sentence", [
    "活动时间是<del>周四16:30</del>周三16:30",
    "活动时间是~~周四16:30~~周三16:30",
    "活动时间是<s>周四16:30</s>周三",
    "活动时间是<DEL class=\"x\">周四16:30</DEL>周三",
    "活动时间是周<!-- 四16:30 -->三",
    "活动时间是周<!-- 四16:30 --->三",
])
def test_deleted_text_hides_no_mismatch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sentence: str) -> None:
    draft = FRONT.replace(", 地点", "") + f"{sentence}[^1]。\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft)
    assert [d["line"] for d in diagnostics(report, "claim-value-mismatch")] == [6]


def test_markup_in_the_evidence_value_is_rendered_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT.replace(", 地点", "") + f"活动时间是周四16:30[^1]，请带学生证[^2]。\n\n[^1]: {TIME}\n[^2]: {NOTE}\n"
    report = draft_report(capsys, tmp_path, draft)
    assert "claim-value-mismatch" not in names(report), report["diagnostics"]


# -- IME slips in citation ids (issue 12) ---------------------------------------------------


@pytest.mark.parametrize("slipped, char, column", [
    ("schedule＠1:6", "U+FF20 FULLWIDTH COMMERCIAL AT", 15),
    ("schedule@1：6", "U+FF1A FULLWIDTH COLON", 17),
    ("schedule@１:６", "U+FF11 FULLWIDTH DIGIT ONE", 16),
    ("schedule＠１：６", "U+FF20 FULLWIDTH COMMERCIAL AT", 15),
])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_ime_slips_in_an_id_are_named_and_fixed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], slipped: str, char: str, column: int,
        newline: str) -> None:
    draft = (FRONT.replace(", 地点", "") + f"活动时间是周四16:30[^1]。🎉\n\n[^1]: {TIME}\n"
             ).replace("schedule@1:6", slipped).replace("\n", newline)
    report = draft_report(capsys, tmp_path, draft)
    [malformed] = diagnostics(report, "malformed-citation")
    assert char in malformed["message"] and f"column {column}" in malformed["message"]
    assert malformed["fix"]["new_text"] == "schedule@1:6"
    code = cli.main(["check", "--root", str(tmp_path), "--fix", "--format", "json"])
    fixed = json.loads(capsys.readouterr().out)["drafts"][0]
    assert code == 0 and fixed["status"] == "answered", fixed["diagnostics"]
    assert (tmp_path / "answers/a.md").read_bytes().decode() == draft.replace(slipped, "schedule@1:6")


def test_a_full_width_character_in_the_doc_id_is_not_rewritten(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = FRONT.replace(", 地点", "") + f"活动时间是周四16:30[^1]。\n\n[^1]: {TIME}\n"
    report = draft_report(capsys, tmp_path, draft.replace("schedule@1:6", "ｓchedule@1:6"))
    assert [d["name"] for d in report["diagnostics"] if d["severity"] == "error"] == ["unknown-source"]
    assert not any("fix" in d for d in report["diagnostics"])


def test_an_ime_slip_in_a_json_id_is_named_and_fixed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@1：６",
             "doc_id": "schedule", "version": 1, "line": 6, "sha256": sha256(SCHEDULE), "field": "活动时间"}
    answer = json.dumps({"status": "answered", "claims": [claim], "missing_fields": [],
                         "fields": ["活动时间"], "context": {"units": ["schedule@1"]}},
                        ensure_ascii=False, indent=1)
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": TOML,
                           "answers/a.answer.json": answer})
    _, report = run(capsys, tmp_path)
    [malformed] = diagnostics(report["drafts"][0], "malformed-citation")
    assert "U+FF1A FULLWIDTH COLON" in malformed["message"]
    assert cli.main(["check", "--root", str(tmp_path), "--fix", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["drafts"][0]["status"] == "answered"
    assert json.loads((tmp_path / "answers/a.answer.json").read_text())["claims"][0]["id"] == "schedule@1:6"


# -- 4: YAML merge keys ---------------------------------------------------------------------


@pytest.mark.parametrize("front", [
    "defaults: &d\n  status: revoked\ndoc_id: schedule\n<<: *d\n",
    "doc_id: schedule\n<<: {status: revoked}\n",
    "a: &a {status: revoked}\nb: &b {effective_until: 2020-01-01}\ndoc_id: schedule\n<<: [*a, *b]\n",
    "doc_id: schedule\r\n<<: {version: 9}\r\n",
    "doc_id: schedule\n!!merge <<: {status: revoked}\n",
])
def test_a_merge_key_in_evidence_front_matter_is_refused_never_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], front: str) -> None:
    evidence = f"---\n{front}---\n- 活动时间：周四16:30\n".replace("\r\n", "\n")
    if "\r\n" in front:
        evidence = evidence.replace("\n", "\r\n")
    draft = FRONT.replace(", 地点", "") + "活动时间是周四16:30[^1]。\n\n[^1]: {cite}\n"
    line = front.replace("\r\n", "\n").count("\n") + 2  # the content line after the front matter
    cite = f'schedule@1:{line} sha256:{sha256(evidence)[:12]} "- 活动时间：周四16:30"'
    write_files(tmp_path, {"evidence/schedule.md": evidence, "grounding.toml": TOML,
                           "answers/a.md": draft.replace("{cite}", cite)})
    code, report = run(capsys, tmp_path)
    [problem] = report["evidence"][0]["diagnostics"]
    assert problem["name"] == "invalid-front-matter" and "merge key" in problem["message"]
    assert report["drafts"][0]["status"] == "abstain" and code == 1


def test_a_quoted_double_angle_key_is_an_ordinary_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = '---\ndoc_id: schedule\n"<<": {status: revoked}\n---\n- 活动时间：周四16:30\n'
    write_files(tmp_path, {"evidence/schedule.md": evidence, "grounding.toml": TOML})
    code, summary = run(capsys, tmp_path, "index")
    assert summary["evidence_problems"] == {} and summary["active_documents"] == 1


@pytest.mark.parametrize("front", [
    "defaults: &d\n  fields: [活动时间]\n<<: *d\nquestion: 几点？\n",
    "<<: {context: {units: [\"schedule@1\"]}}\n",
])
def test_a_merge_key_in_draft_front_matter_is_malformed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], front: str) -> None:
    report = draft_report(capsys, tmp_path, f"---\n{front}---\n活动时间是周四16:30[^1]。\n\n[^1]: {TIME}\n")
    [malformed] = diagnostics(report, "malformed-citation")
    assert malformed["line"] == 1 and "merge key" in malformed["message"]


# -- 13: brackets inside quoted scalars -----------------------------------------------------


@pytest.mark.parametrize("title", [
    '"' + "[" * 70 + '"',
    "'" + "{" * 200 + "[" * 200 + "'",
    "x" + "[" * 70,                              # a plain scalar may hold brackets after its start
    '"多行' + "[" * 40 + '\n  ' + "[" * 40 + ' 🎉"',
    "|\n  " + "- " * 80 + "\n  " + "[" * 80,        # a block scalar
])
def test_brackets_inside_scalars_do_not_count_as_nesting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], title: str) -> None:
    evidence = f"---\ndoc_id: schedule\ntitle: {title}\n---\n- 活动时间：周四16:30\n"
    line = evidence.count("\n")
    cite = f'schedule@1:{line} sha256:{sha256(evidence)[:12]} "- 活动时间：周四16:30"'
    draft = FRONT.replace(", 地点", "") + f"活动时间是周四16:30[^1]。\n\n[^1]: {cite}\n"
    report = draft_report(capsys, tmp_path, draft, files={"evidence/schedule.md": evidence})
    assert report["status"] == "answered", report["diagnostics"]


@pytest.mark.parametrize("front", [
    "title: " + "[" * 70 + "]" * 70,
    "title: " + "{a: " * 70 + "b" + "}" * 70,
    "".join(" " * i + f"k{i}:\n" for i in range(70)) + " " * 70 + "v",
])
def test_real_nesting_over_the_limit_is_still_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], front: str) -> None:
    write_files(tmp_path, {"evidence/deep.md": f"---\n{front}\n---\n- 时间：周四\n", "grounding.toml": TOML})
    _, summary = run(capsys, tmp_path, "index")
    [problem] = summary["evidence_problems"]["evidence/deep.md"]
    assert problem["name"] == "invalid-front-matter" and "nested too deeply" in problem["message"]
