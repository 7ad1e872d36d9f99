"""What a fresh user found trying Grounding from its README (the ``fixes`` pass): each test
runs the CLI in-process on CJK, emoji and CRLF evidence and checks the message a writer reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import sha256, write_files

from grounding import cli
from grounding_core.text import normalize_value
from grounding_core.verify import _value_units

DECLARED = "---\ndoc_id: a\nversion: 1\n---\n- 时间：周一\n"
STRAY = "---\r\ndoc_id: a\r\n---\r\n- 时间：周二 🎉\r\n"


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main([argv[0], "--root", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


# -- 2. a stray file sharing a declared doc_id ---------------------------------------------------


def test_a_stray_duplicate_that_supersedes_a_declared_version_is_named_in_stale_and_inactive_messages(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/b.md": DECLARED})
    assert run(capsys, tmp_path, "index")[0] == 0
    citation = f'[^1]: a@1:5 sha256:{sha256(DECLARED)[:12]} "- 时间：周一"'
    write_files(tmp_path, {"evidence/a.md": STRAY, "answers/x.md": f"时间是周一[^1]。\n\n{citation}\n"})
    code, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (stale,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "stale-citation"]
    assert "evidence/a.md declares no version but shares doc_id 'a' with evidence/b.md" in stale["message"]
    assert "duplicate-doc-id" in stale["message"]
    assert "Declare `version: 3` in evidence/b.md" in stale["hint"]
    code, _, err = run(capsys, tmp_path, "cite", "a@1:5")
    assert code == 1 and "GR104" in err and "duplicate-doc-id" in err and "leave the version out" not in err

    (tmp_path / "evidence" / "a.md").unlink()
    code, _, err = run(capsys, tmp_path, "cite", "a:5")
    assert code == 1 and "GR106" in err and "it was deleted" in err
    assert "Declare `version: 3` in b.md" in err and "stays the newest known" in err
    # the advice works: a higher declared version makes the declared file's content current
    write_files(tmp_path, {"evidence/b.md": DECLARED.replace("version: 1", "version: 3")})
    code, out, _ = run(capsys, tmp_path, "cite", "a:5")
    assert code == 0 and out.startswith("[^1]: a@3:5 ") and "周一" in out


# -- 4. a superseded version's line names the same line in the current version -----------------

SHIPPING_V1 = "---\r\ndoc_id: shipping\r\nversion: 1\r\n---\r\n- 发货时间：付款后48小时内 🎉\r\n- 运费：满99元包邮\r\n"
SHIPPING_V2 = ("---\r\ndoc_id: shipping\r\nversion: 2\r\n---\r\n# 配送说明\r\n\r\n1. 配送范围：全国𠮷\r\n"
               "- 运费：满99元包邮\r\n- 发货时间：付款后24小时内\r\n")


@pytest.fixture
def shipping(tmp_path: Path) -> Path:
    write_files(tmp_path, {"grounding.toml": "", "evidence/archive/shipping-v1.md": SHIPPING_V1,
                           "evidence/shipping.md": SHIPPING_V2})
    return tmp_path


@pytest.mark.parametrize("target", ["shipping@1:6", "evidence/archive/shipping-v1.md:6"])
def test_cite_of_a_superseded_line_names_the_line_check_re_anchors_to(
        capsys: pytest.CaptureFixture[str], shipping: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(shipping)
    code, _, err = run(capsys, shipping, "cite", target)
    assert code == 1 and "GR104" in err
    assert "the same line is shipping@2:8: grounding cite shipping:8" in err
    assert "leave the version out" not in err
    stale = '[^1]: shipping@1:6 sha256:00000000 "- 运费：满99元包邮"'
    write_files(shipping, {"answers/x.md": f"运费满99元包邮[^1]。\n\n{stale}\n"})
    _, out, _ = run(capsys, shipping, "check")
    assert "Re-anchor to shipping@2:8" in out


def test_cite_of_a_superseded_line_that_changed_never_says_leave_the_version_out(
        capsys: pytest.CaptureFixture[str], shipping: Path) -> None:
    code, _, err = run(capsys, shipping, "cite", "shipping@1:5")
    assert code == 1 and "GR104" in err
    # the line changed: the hint names the same field's current line, as check does (tryout2)
    assert "its field '发货时间' is now shipping@2:9: '- 发货时间：付款后24小时内'" in err
    assert "grounding cite shipping:9" in err and "leave the version out" not in err


# -- 5. what the output budget counts ------------------------------------------------------------

SCHEDULE = "---\r\ndoc_id: schedule\r\nsubject: 开放日\r\n---\r\n- 活动时间：周六9:30 🎉\r\n- 地点：三楼报告厅𠮷\r\n"


def test_an_output_budget_finding_on_a_markdown_draft_says_the_compiled_json_answer_is_counted(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    citation = f'[^1]: schedule@1:5 sha256:{sha256(SCHEDULE)[:12]} "- 活动时间：周六9:30 🎉"'
    front = '---\r\nfields: [活动时间]\r\ncontext: {units: ["schedule@1"], reserve: 60}\r\n---\r\n'
    write_files(tmp_path, {"grounding.toml": "", "evidence/schedule.md": SCHEDULE,
                           "answers/x.md": f"{front}活动时间是周六9:30 🎉[^1]。\r\n\r\n{citation}\r\n"})
    code, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (budget,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "output-over-budget"]
    assert code == 1
    assert "JSON answer this draft compiles to" in budget["message"] and "1 valid claim(s)" in budget["message"]
    assert "not the Markdown prose" in budget["message"] and "reserve is 60" in budget["message"]


def test_grounding_answer_says_on_stderr_which_claims_the_reserve_dropped(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/schedule.md": SCHEDULE})
    code, out, err = run(capsys, tmp_path, "answer", "--question", "开放日几点？", "--fields", "活动时间", "地点",
                         "--reserve", "140")
    assert code == 0
    summary = [line for line in err.splitlines() if line.startswith("grounding: answer:")]
    assert len(summary) == 1 and "1 claim(s) dropped for the output reserve (schedule@1:6)" in summary[0]
    assert "raise --reserve" in summary[0] and "partial, 1 claim(s)" in summary[0]
    assert "schedule@1:5" in out and "schedule@1:6" not in out.split("-->")[-1]


# -- 6. JSON answers: missing-field names where the claim's error is reported --------------------

def _json_answer(quote_2: str, evidence: str = SCHEDULE) -> str:
    claims = [{"text": "活动时间：周六9:30 🎉", "quote": "- 活动时间：周六9:30 🎉"},
              {"text": "地点：三楼报告厅𠮷", "quote": quote_2}]
    for n, c in enumerate(claims, 5):
        c.update({"id": f"schedule@1:{n}", "doc_id": "schedule", "version": 1, "line": n,
                  "sha256": sha256(evidence), "field": c["text"].split("：")[0]})
    answer = {"status": "answered", "claims": claims, "missing_fields": [], "fields": ["活动时间", "地点"]}
    return json.dumps(answer, ensure_ascii=False, indent=1).replace("\n", "\r\n")


def test_a_json_answer_s_missing_field_names_the_line_and_pointer_of_the_claim_s_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/schedule.md": SCHEDULE,
                           "answers/a.answer.json": _json_answer("- 地点：三楼报告厅𠮷 ")})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    diagnostics = json.loads(out)["drafts"][0]["diagnostics"]
    first = min(d["line"] for d in diagnostics if d["name"] == "quote-mismatch")
    (missing,) = [d for d in diagnostics if d["name"] == "missing-field"]
    where = f"line {first} (/claims/1)"
    assert f"the claim on {where} states it" in missing["message"]
    assert missing["hint"] == f"Fix the error reported on {where}; this warning goes with it."
    opening = _json_answer("x").split("\r\n").index("  {", 10) + 1   # the claim's "{" line
    assert first != opening


def test_a_json_answer_missing_a_field_is_told_to_add_a_claim(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    evidence = SCHEDULE + "- 报名方式：现场\r\n"
    text = json.loads(_json_answer("- 地点：三楼报告厅𠮷", evidence))
    text["fields"].append("报名方式")
    write_files(tmp_path, {"grounding.toml": "", "evidence/schedule.md": evidence,
                           "answers/a.answer.json": json.dumps(text, ensure_ascii=False)})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    diagnostics = json.loads(out)["drafts"][0]["diagnostics"]
    missing = next(d for d in diagnostics if d["name"] == "missing-field")
    assert [d["name"] for d in diagnostics].count("missing-field") == 1, diagnostics
    assert missing["hint"].startswith("Add a claim whose field is '报名方式'") and "sentence" not in missing["hint"]


# -- 9. claim-value-mismatch says what differs ---------------------------------------------------

TIME = "---\r\ndoc_id: s\r\n---\r\n- 活动时间：周四16:30 🎉\r\n"
ENGLISH = "---\ndoc_id: s\n---\n- Open hours: every Tuesday 14:00, required before first use.\n"


@pytest.mark.parametrize(("evidence", "sentence", "difference"), [
    (TIME, "活动时间是周三16:30 🎉", "it has '周' and '16:30 🎉' but not '四'"),
    (TIME, "活动时间是周四", "it has '周四' but not '16:30 🎉'"),
    (TIME, "活动在下午", "none of '周四16:30 🎉' occurs in it"),
    # every part is there, only not in the value's order: nothing is called missing
    (TIME, "🎉活动时间是周四16:30", "it has '周四16:30' and '🎉', but not together as '周四16:30 🎉'"),
    # tryout #11: English by whole words ('se' of "use" was reported as something the sentence has)
    (ENGLISH, "The space opens every Tuesday; use is free",
     "it has 'every Tuesday' and 'use' but not '14:00, required before first'"),
    (ENGLISH, "It is open every 𠮷 week", "it has 'every' but not 'Tuesday 14:00, required before first use'"),
])
def test_a_claim_value_mismatch_says_which_part_of_the_value_the_sentence_lacks(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, evidence: str, sentence: str, difference: str) -> None:
    line = evidence.splitlines()[3]
    citation = f'[^1]: s@1:4 sha256:{sha256(evidence)[:12]} "{line}"'
    write_files(tmp_path, {"grounding.toml": 'field_separators = ["：", ": "]\n', "evidence/s.md": evidence,
                           "answers/a.md": f"{sentence}[^1]。\r\n\r\n{citation}\r\n"})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (finding,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "claim-value-mismatch"]
    assert finding["message"].endswith(f": {difference} (compared after NFKC, spaces removed)")


@given(st.text(alphabet="ab 周四１６:３０。,.\u3000\t🎉𠮷", max_size=20))
def test_the_units_of_a_value_join_to_its_spec_normal_form(raw: str) -> None:
    """The message's units are the SPEC §7.3 normal form, cut up: nothing added or lost."""
    assert "".join(unit for unit, _ in _value_units(raw)) == normalize_value(raw)


# -- 11./12. --fix finishes in one run; uppercase hashes; "Replace the hash" ----------------------


def test_fix_applies_fixes_a_first_fix_uncovers_in_the_same_run_and_names_each(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sha = sha256(TIME)
    body = "活动时间是周四16:30 🎉[^1]。\r\n\r\n"
    drafts = {
        "answers/ime.md": f'{body}[^1]: s＠1：４ sha256:{sha[:12]} "活动时间：周四16:30 🎉"\r\n',
        "answers/upper.md": f'{body}[^1]: s@1:4 sha256:{sha[:12].upper()} "- 活动时间：周四16:30 🎉"\r\n',
        "answers/hash.md": f'{body}[^1]: s@1:4 sha256:0000aaaa "- 活动时间：周四16:30 🎉"\r\n',
    }
    write_files(tmp_path, {"grounding.toml": "", "evidence/s.md": TIME, **drafts})
    _, out, _ = run(capsys, tmp_path, "check", "answers/upper.md")
    assert f"hint: Write it as sha256:{sha[:12]}." in out
    code, _, err = run(capsys, tmp_path, "check", "--fix")
    assert code == 0, err
    fixed = f'[^1]: s@1:4 sha256:{sha[:12]} "- 活动时间：周四16:30 🎉"\r\n'
    for rel in drafts:
        assert (tmp_path / rel).read_bytes().decode("utf-8").endswith(fixed), rel
    assert "answers/ime.md:3: Write the citation id in ASCII: s@1:4" in err
    assert "answers/ime.md:3: Replace the quote with the exact cited line" in err
    assert "answers/upper.md:3: Write the hash in lowercase" in err
    assert f"answers/hash.md:3: Replace the hash with sha256:{sha[:12]}" in err and "Re-anchor" not in err


def test_an_uppercase_sha256_in_a_json_answer_is_named_with_its_lowercase_form_and_fixed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = _json_answer("- 地点：三楼报告厅𠮷").replace(sha256(SCHEDULE), sha256(SCHEDULE).upper(), 1)
    write_files(tmp_path, {"grounding.toml": "", "evidence/schedule.md": SCHEDULE, "answers/a.answer.json": text})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (bad,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "malformed-citation"]
    assert bad["hint"] == f'Write it as "{sha256(SCHEDULE)}".'
    assert run(capsys, tmp_path, "check", "--fix")[0] == 0
    assert json.loads((tmp_path / "answers/a.answer.json").read_text(encoding="utf-8")) == json.loads(
        _json_answer("- 地点：三楼报告厅𠮷"))


# -- 13. every "column N" says what it counts in -------------------------------------------------


def test_every_column_in_a_message_says_whether_it_counts_in_the_quote_or_the_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sha = sha256(TIME)[:12]
    write_files(tmp_path, {"grounding.toml": "", "evidence/s.md": TIME, "answers/a.md": (
        "活动时间是周四16:30 🎉[^1][^2][^3]。\r\n\r\n"
        f'[^1]: s@1:4 sha256:{sha} "- 活动时间：周四１6:30 🎉"\r\n'      # a full-width digit in the quote
        f'[^2]: s@1:4 sha256:{sha} "- 活动时间：周四16:30"\r\n'          # the quote ends early
        f'[^3]: s@1：4 sha256:{sha} "- 活动时间：周四16:30 🎉"\r\n')})   # an IME slip in the id
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    messages = [d["message"] for d in json.loads(out)["drafts"][0]["diagnostics"] if "column" in d["message"]]
    assert len(messages) == 3, messages
    assert "column 10 of the quote: U+FF11 FULLWIDTH DIGIT ONE" in messages[0]
    assert "the quote ends at column 15 of the source line, which goes on with ' 🎉'" in messages[1]
    assert messages[2].startswith("column 10 of the line: U+FF1A FULLWIDTH COLON")


# -- 14. cite undoes an input-method slip in its target -----------------------------------------


@pytest.mark.parametrize("target", ["shipping＠2：8", "shipping@２:８", "shipping＠２：８"])
def test_cite_reads_a_target_typed_with_an_input_method_as_its_ascii_id_and_says_so(
        capsys: pytest.CaptureFixture[str], shipping: Path, target: str) -> None:
    code, out, err = run(capsys, shipping, "cite", target)
    assert code == 0, err
    assert out.startswith('[^1]: shipping@2:8 sha256:') and out.rstrip().endswith('"- 运费：满99元包邮"')
    assert f"read {target!r} as shipping@2:8" in err


# -- 15. --baseline says what it accepted ---------------------------------------------------------


def test_a_draft_whose_findings_the_baseline_accepts_says_so_instead_of_no_problems(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stale = '[^1]: s@1:4 sha256:0000aaaa "- 活动时间：周四16:30 🎉"'
    clean = f'[^1]: s@1:4 sha256:{sha256(TIME)[:12]} "- 活动时间：周四16:30 🎉"'
    front = '---\r\ncontext: {units: ["s@1"]}\r\n---\r\n'
    write_files(tmp_path, {"grounding.toml": "", "evidence/s.md": TIME,
                           "answers/old.md": f"{front}活动时间是周三[^1]。\r\n\r\n{stale}\r\n",
                           "answers/ok.md": f"{front}活动时间是周四16:30 🎉[^1]。\r\n\r\n{clean}\r\n"})
    _, sarif_text, _ = run(capsys, tmp_path, "check", "--format", "sarif")
    (tmp_path / "baseline.sarif").write_text(sarif_text, encoding="utf-8")
    code, out, _ = run(capsys, tmp_path, "check", "--baseline", str(tmp_path / "baseline.sarif"))
    assert code == 0
    lines = out.splitlines()
    assert "answers/old.md: abstain (1 accepted by the baseline); no required fields" in lines
    assert "answers/ok.md: answered (no problems); no required fields" in lines
    assert lines[-1] == "2 draft(s): 0 error(s), 0 warning(s), 0 information, 1 accepted by the baseline"


# -- 16. grounding log: columns as the README says, one path form ---------------------------------


def test_log_rows_name_files_in_one_form_and_follow_the_readme_columns(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from support import REPO

    write_files(tmp_path, {"grounding.toml": "", "evidence/b.md": DECLARED})
    run(capsys, tmp_path, "index")
    write_files(tmp_path, {"evidence/a.md": STRAY})
    run(capsys, tmp_path, "index")
    (tmp_path / "evidence" / "a.md").unlink()
    run(capsys, tmp_path, "index")  # log is read-only: the deletion reaches the log by a scan
    _, out, _ = run(capsys, tmp_path, "log")
    rows = [line.split() for line in out.splitlines()[:-1]]
    assert [r[2] for r in rows] == ["import", "import", "revoke"]
    assert rows[2][3:] == ["a@2", "a.md", "(deleted)"]  # as stored: relative to the evidence folder
    assert rows[0][5:] == ["b.md"] and rows[0][4].startswith("sha256:")
    assert rows[0][3] == "a@1" and rows[0][1].endswith("+00:00")
    _, out, _ = run(capsys, tmp_path, "log", "--format", "json")
    assert [e["path"] for e in json.loads(out)] == ["b.md", "a.md", "a.md"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "seq (the N for `check --at N`), time, kind, doc_id@version" in readme


# -- 17. a reference without a definition ---------------------------------------------------------


def test_a_reference_without_a_definition_gets_a_plain_cli_hint(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/s.md": TIME,
                           "answers/a.md": "活动时间是周四16:30 🎉[^c]。\r\n"})
    _, out, _ = run(capsys, tmp_path, "check")
    (hint,) = [line for line in out.splitlines() if "DOC_ID@VERSION:LINE" in line]
    assert hint == ('    hint: Add its definition on a line of its own: [^c]: DOC_ID@VERSION:LINE sha256:HASH'
                    ' "WHOLE LINE" (`grounding cite DOC_ID:LINE` prints one to paste).')
    assert hint.count('"') == 2 and "action" not in hint


# -- tryout (stop 28): --fix after a version reused, then raised ------------------------------


def test_fix_never_re_anchors_to_the_line_that_replaced_the_cited_one_under_the_same_version(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Version 1 was edited in place (7天 -> 15天, ``version-reuse``), then raised to 2: the
    citation pins the first content, so the line to look for is the quote, not the line
    version 1 holds now. No version holds the quote any more, so nothing is re-anchored and
    the check fails (it re-anchored to the 15天 line and passed).
    """
    first = "---\r\ndoc_id: returns\r\nversion: 1\r\n---\r\n1. 退货期限：签收后7天内 🎉\r\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/returns.md": first})
    quote = "1. 退货期限：签收后7天内 🎉"
    draft = f'退货期限是签收后7天内[^1]。\n\n[^1]: returns@1:5 sha256:{sha256(first)[:12]} "{quote}"\n'
    write_files(tmp_path, {"answers/x.md": draft})
    assert run(capsys, tmp_path, "check")[0] == 0
    write_files(tmp_path, {"evidence/returns.md": first.replace("7天", "15天")})
    assert run(capsys, tmp_path, "check")[0] == 1  # hash-mismatch: version 1 changed in place
    write_files(tmp_path, {"evidence/returns.md": first.replace("7天", "15天").replace("version: 1", "version: 2")})
    code, out, err = run(capsys, tmp_path, "check", "--fix", "--format", "json")
    assert code == 1 and "Re-anchor" not in err
    assert (tmp_path / "answers/x.md").read_text(encoding="utf-8") == draft  # nothing rewritten
    (stale,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "stale-citation"]
    assert "Re-anchor" not in stale["hint"] and "15天" not in stale["hint"]


def test_fix_still_re_anchors_a_line_kept_verbatim_across_a_version_bump(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    first = "---\ndoc_id: returns\nversion: 1\n---\n1. 退货期限：签收后7天内 🎉\n"
    write_files(tmp_path, {"grounding.toml": "", "evidence/returns.md": first})
    quote = "1. 退货期限：签收后7天内 🎉"
    draft = f'退货期限是签收后7天内[^1]。\n\n[^1]: returns@1:5 sha256:{sha256(first)[:12]} "{quote}"\n'
    write_files(tmp_path, {"answers/x.md": draft})
    second = first.replace("version: 1", "version: 2").replace("---\n1.", "---\n前言\n1.")
    write_files(tmp_path, {"evidence/returns.md": second})
    code, _, err = run(capsys, tmp_path, "check", "--fix")
    assert code == 0 and "Re-anchor to returns@2:6" in err
    assert f"returns@2:6 sha256:{sha256(second)[:12]}" in (tmp_path / "answers/x.md").read_text(encoding="utf-8")


def test_a_hash_mismatch_after_an_in_place_edit_shows_the_line_now_there_or_the_re_anchor(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """GR105 on content changed under the same version (tryout, stop 28): the hint says what
    the cited line reads now (the fact may have changed), or that the quoted line is still
    there and where, instead of a bare "re-anchor".
    """
    first = "---\r\ndoc_id: returns\r\nversion: 1\r\n---\r\n1. 退货期限：签收后7天内 🎉\r\n2. 运费：包邮\r\n"
    quote = "1. 退货期限：签收后7天内 🎉"
    draft = f'退货期限是签收后7天内[^1]。\n\n[^1]: returns@1:5 sha256:{sha256(first)[:12]} "{quote}"\n'
    write_files(tmp_path, {"grounding.toml": "", "evidence/returns.md": first, "answers/x.md": draft})
    assert run(capsys, tmp_path, "check")[0] == 0
    write_files(tmp_path, {"evidence/returns.md": first.replace("7天", "15天")})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (found,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "hash-mismatch"]
    assert "now reads '1. 退货期限：签收后15天内 🎉'" in found["hint"]
    assert "grounding cite returns@1:5" in found["hint"]
    write_files(tmp_path, {"evidence/returns.md": first.replace("包邮", "满99元包邮")})
    _, out, _ = run(capsys, tmp_path, "check", "--format", "json")
    (found,) = [d for d in json.loads(out)["drafts"][0]["diagnostics"] if d["name"] == "hash-mismatch"]
    assert found["hint"].startswith("Replace the hash with sha256:") and "still there, verbatim" in found["hint"]
