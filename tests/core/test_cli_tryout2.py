"""What a second fresh user found trying Grounding from its README (the ``tryout2`` pass):
each test runs the real CLI in-process on CJK, emoji and CRLF evidence and checks what a
writer reads (findings in /work/notes/tryout-findings.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import sha256, write_files

from grounding import cli

REFUND_V1 = "---\ndoc_id: refund\nversion: 1\n---\n- 主题：退款政策\n１．到账时间：7个工作日 🎉\n"
REFUND_V2 = "---\ndoc_id: refund\nversion: 2\n---\n- 主题：退款政策\n１．到账时间：3–5个工作日 🎉\n"


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([argv[0], "--root", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


# -- 7. --fix --at N would write fixes computed against a past state ---------------------------


def test_fix_with_at_is_refused_and_the_draft_is_not_written(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": REFUND_V1})
    assert run(capsys, tmp_path, "index")[0] == 0
    # a wrong line number --fix would move, valid only against version 1
    draft = ("---\ncontext: {units: [\"refund@1\"]}\n---\n𠮷退款7个工作日 🎉到账[^1]。\n\n"
             f'[^1]: refund@1:5 sha256:{sha256(REFUND_V1)[:12]} "１．到账时间：7个工作日 🎉"\n')
    write_files(tmp_path, {"answers/x.md": draft})
    write_files(tmp_path, {"evidence/refund.md": REFUND_V2})
    assert run(capsys, tmp_path, "index")[0] == 0
    code, out, err = run(capsys, tmp_path, "check", "--fix", "--at", "1", "answers/x.md")
    assert code == 2 and out == ""
    assert "--fix cannot be combined with --at 1" in err and "without --at" in err
    assert (tmp_path / "answers" / "x.md").read_text(encoding="utf-8") == draft
    # --at alone still checks the past state, and --fix alone fixes against the present
    code, out, _ = run(capsys, tmp_path, "check", "--at", "1", "answers/x.md")
    assert code == 1 and "GR103" in out and "GR104" not in out
    code, _, err = run(capsys, tmp_path, "check", "--fix", "answers/x.md")
    assert "refund@1:5 → refund@1:6" in err or "Cite line 6" in err


# -- 8. a full-width colon after a front-matter key is named on its own line ------------------


@pytest.mark.parametrize(("front", "line", "key", "value"), [
    ("doc_id: bom-doc\r\nversion：1\r\n", 3, "version", "1"),           # CRLF, a BOM, after a good key
    ("status ：revoked\r\ndoc_id: x\r\n", 2, "status", "revoked"),      # a space before it, first line
    ("title︓退款规则🎉\r\n", 2, "title", "退款规则🎉"),                    # U+FE13, the only key
])
def test_a_full_width_colon_in_evidence_front_matter_names_the_line_and_the_character(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, front: str, line: int, key: str, value: str) -> None:
    evidence = "\ufeff---\r\n" + front + "---\r\n- 主题：门店\r\n- 营业时间：10:00–22:00\r\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/store.md": evidence.encode("utf-8"),
                           "evidence/ok.md": "- 主题：发货\n"})
    code, out, _ = run(capsys, tmp_path, "check")
    assert code == 1
    (finding,) = [ln for ln in out.splitlines() if ln.startswith("evidence/store.md:")]
    assert finding.startswith(f"evidence/store.md:{line}:1: error GR204 invalid-front-matter: ")
    assert "FULLWIDTH COLON" in finding or "VERTICAL COLON" in finding
    assert f"after the key '{key}' where YAML needs ':'" in finding
    assert f"Write it as '{key}: {value}'" in out
    assert "evidence/ok.md" not in out                                 # the rest is indexed as usual
    # the advice works
    write_files(tmp_path, {"evidence/store.md": evidence.replace(front, front.replace("：", ": ", 1)
                                                                 .replace(" ：", ": ").replace("︓", ": "))})
    code, out, _ = run(capsys, tmp_path, "check")
    assert code == 0 and "GR204" not in out


def test_a_value_holding_a_full_width_colon_is_still_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "",
                           "evidence/a.md": "---\ndoc_id: a\ntitle: 退款：规则\n---\n- 时间：周一\n"})
    code, out, _ = run(capsys, tmp_path, "cite", "a:5")
    assert code == 0 and out.startswith("[^1]: a@1:5 ")


# -- 9, 10. footnote syntax and quote marks typed by a Chinese input method --------------------

MEMBER = "---\ndoc_id: refund\n---\n- 主题：退款政策\n１．会员日：每月8日 🎉\n２．到账时间：3–5个工作日\n"


def test_full_width_footnote_syntax_and_curly_quotes_are_named_and_fixed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    h = sha256(MEMBER)[:12]
    draft = ("---\r\nfields: [会员日, 到账时间]\r\ncontext: {units: [\"refund@1\"]}\r\n---\r\n"
             "𠮷会员日是每月8日 🎉［^1］。到账时间是3–5个工作日[^2]。\r\n\r\n"
             f"[^1]: refund@1:5 sha256:{h} “１．会员日：每月8日 🎉”\r\n"
             f"[^2]：refund@1:6 sha256:{h} \"２．到账时间：3–5个工作日\"\r\n")
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": MEMBER, "answers/x.md": draft.encode()})
    code, out, _ = run(capsys, tmp_path, "check", "answers/x.md")
    assert code == 1
    lines = [ln for ln in out.splitlines() if ln.startswith("answers/x.md:")]
    # the reference typed with full-width brackets: its column counts 𠮷 and 🎉 as one each
    assert ("answers/x.md:5:12: error GR101 malformed-citation: column 12 of the line: U+FF3B FULLWIDTH"
            " LEFT SQUARE BRACKET (［) in '［^1］' where '[' belongs: an input-method slip (2 full-width"
            " characters in all), so Markdown reads it as text, not as a reference to [^1]") in lines
    # the definition typed with a full-width colon: named on its line, and by the reference
    assert any(ln.startswith("answers/x.md:8:1: error GR101 malformed-citation: column 5 of the line:"
                             " U+FF1A FULLWIDTH COLON (：) in '[^2]：'") for ln in lines)
    assert any(ln.startswith("answers/x.md:5:") and "[^2] has no definition: line 8 would be it" in ln
               for ln in lines)
    # [^1]'s definition (curly quotes) is checked once a reference reaches it: --fix goes on
    # until nothing changes, so one run repairs the reference and then the quote marks
    code, out, err = run(capsys, tmp_path, "check", "--fix", "answers/x.md")
    assert code == 0, out
    assert "answered (no problems)" in out
    fixed = (tmp_path / "answers" / "x.md").read_bytes().decode()
    assert fixed == (draft.replace("［^1］", "[^1]").replace("[^2]：", "[^2]: ")
                     .replace("“", '"').replace("”", '"'))
    assert "\r\n" in fixed and "\n" not in fixed.replace("\r\n", "")   # CRLF kept
    assert "Write the footnote definition in ASCII: [^2]： → [^2]: " in err
    assert "Use straight double quotes around the quote: “１．会员日：每月8日 🎉” → \"１．会员日：每月8日 🎉\"" in err


def test_curly_quotes_are_named_with_a_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    h = sha256(MEMBER)[:12]
    draft = f"𠮷会员日是每月8日 🎉[^1]。\n\n[^1]: refund@1:5 sha256:{h} “１．会员日：每月8日 🎉”  \n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": MEMBER, "answers/x.md": draft})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json", "answers/x.md")
    (finding,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["code"] == "GR101"]
    assert "U+201C" in finding["message"] and finding["hint"] == 'Write it as "１．会员日：每月8日 🎉".'
    assert finding["fix"] == {"title": "Use straight double quotes around the quote",
                              "new_text": '"１．会员日：每月8日 🎉"'}


@pytest.mark.parametrize("line", [
    "```\n[^1]：refund@1:5 not a definition, code\n```",          # code is never footnote syntax
    "[^1]: refund@1:5 sha256:{h} \"１．会员日：每月8日 🎉\"\n[^1]：另一个",  # the label is defined
])
def test_full_width_definition_check_leaves_code_and_defined_labels_alone(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str) -> None:
    h = sha256(MEMBER)[:12]
    draft = "会员日是每月8日 🎉[^1]。\n\n" + line.format(h=h) + "\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": MEMBER, "answers/x.md": draft})
    _, out, _ = run(capsys, tmp_path, "check", "answers/x.md")
    assert "input-method slip" not in out


def test_curly_quotes_around_a_wrong_quote_are_straightened_and_the_mismatch_stays(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    h = sha256(MEMBER)[:12]
    draft = f"会员日是每月9日[^1]。\n\n[^1]: refund@1:5 sha256:{h} 「１．会员日：每月9日」\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": MEMBER, "answers/x.md": draft})
    code, out, _ = run(capsys, tmp_path, "check", "--fix", "answers/x.md")
    assert code == 1 and "GR103 quote-mismatch" in out      # the marks are fixed, the text is not
    assert (tmp_path / "answers" / "x.md").read_text(encoding="utf-8").endswith('"１．会员日：每月9日"\n')


# -- 21. cite names the same field's current line, as check does -------------------------------


@pytest.mark.parametrize("target", ["refund@1:6", "evidence/archive/refund-v1.md:6"])
def test_cite_of_a_superseded_line_that_changed_names_the_fields_current_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    v2 = REFUND_V2.replace("- 主题：退款政策\n", "- 主题：退款政策\n𠮷 新增说明\n")   # the field moves to line 7
    write_files(tmp_path, {"grounding.toml": "", "evidence/archive/refund-v1.md": REFUND_V1,
                           "evidence/refund.md": v2})
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, tmp_path, "cite", target)
    assert code == 1 and "GR104" in err
    assert ("hint: the line changed; its field '到账时间' is now refund@2:7: '１．到账时间：3–5个工作日 🎉'"
            " (grounding cite refund:7;") in err
    # the same line check's stale-citation names
    definition = f'[^1]: refund@1:6 sha256:{sha256(REFUND_V1)[:12]} "１．到账时间：7个工作日 🎉"'
    draft = f"退款7个工作日到账[^1]。\n\n{definition}\n"
    write_files(tmp_path, {"answers/x.md": draft})
    _, out, _ = run(capsys, tmp_path, "check", "answers/x.md")
    assert "its field is now line 7: '１．到账时间：3–5个工作日 🎉'" in out
    code, out, _ = run(capsys, tmp_path, "cite", "refund:7")
    assert code == 0 and out.startswith("[^1]: refund@2:7 ")


# -- 12. the corpus-wide grep says how to search an image -------------------------------------


def test_a_corpus_wide_grep_that_only_an_image_region_matches_says_to_grep_the_image(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shapes = (Path(__file__).resolve().parents[2] / "examples" / "evidence" / "images" / "shapes.png").read_bytes()
    write_files(tmp_path, {"grounding.toml": "", "evidence/面板🎉.png": shapes, "evidence/refund.md": REFUND_V2})
    code, _, err = run(capsys, tmp_path, "cite", "--grep", "红色")
    assert code == 1 and "no active evidence line contains '红色'" in err
    assert "grounding cite IMAGE_DOC_ID --grep TEXT" in err
    # and the advice works
    code, out, _ = run(capsys, tmp_path, "cite", "面板🎉", "--grep", "红色")
    assert code == 0 and '[^1]: 面板🎉@1#r1 sha256:' in out and '"颜色：红色"' in out


# -- 2, 3. a refused question names the known field names close to its leftover terms --------

HOURS = ("---\r\ndoc_id: hours\r\n---\r\n- 主题：客服\r\n- Phone support: Mon–Fri 9:00–18:00 🎉\r\n"
         "- 到账时间：3–5个工作日\r\n")


@pytest.mark.parametrize(("question", "terms", "close"), [
    ("退款多久到账？", "'退款', '到账'", "'到账时间'"),
    ("What is the phone support?", "'phone', 'support'", "'Phone support'"),
])
def test_a_refused_question_names_close_field_names(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, question: str, terms: str, close: str) -> None:
    write_files(tmp_path, {"grounding.toml": 'field_separators = ["：", ":"]\n', "evidence/hours.md": HOURS})
    code, out, err = run(capsys, tmp_path, "answer", "--question", question, "--format", "json")
    assert code == 0 and json.loads(out)["reason"] == "unsupported_terms"
    assert f"value: {terms} (SPEC §13" in err
    assert f"known field names close to them: {close}" in err and "ask with the whole name" in err


def test_the_advice_of_a_refused_question_works(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": 'field_separators = ["：", ":"]\n', "evidence/hours.md": HOURS})
    code, out, err = run(capsys, tmp_path, "answer", "--question", "What is the Phone support?", "--format", "json")
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "answered" and "close to them" not in err
    assert answer["claims"][0]["quote"] == "- Phone support: Mon–Fri 9:00–18:00 🎉"
    # a refusal with nothing close says nothing more
    code, out, err = run(capsys, tmp_path, "answer", "--question", "𠮷野家的材质？", "--format", "json")
    assert json.loads(out)["reason"] == "unsupported_terms" and "close to them" not in err
