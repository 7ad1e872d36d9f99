"""The command line (SPEC §9) and its SARIF output.

Most tests call :func:`grounding.cli.main` in-process (fast, same code as the console script);
one runs the real ``python -m grounding.cli`` to see the process exit status. The SARIF log is
validated against the vendored SARIF 2.1.0 schema (draft 2020-12) and, when
``SARIF_MULTITOOL`` names an executable, by Microsoft's ``sarif-multitool validate``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support import REPO, sha256, write_files

from grounding import cli
from grounding.cli.sarif import artifact_uri

SCHEDULE_V2 = (
    "---\r\ndoc_id: schedule\r\nversion: 2\r\ntitle: 秋季开放日通知\r\n---\r\n"  # 1-5
    "- 活动时间：周四16:30\r\n"                                                 # 6
    "- 地点：三楼报告厅 🎉\r\n"                                                  # 7
)
SCHEDULE_V3 = (
    "---\r\ndoc_id: schedule\r\nversion: 3\r\ntitle: 秋季开放日通知\r\n---\r\n"  # 1-5
    "- 签到：15:30起 🎉\r\n"                                                    # 6
    "- 活动时间：周四16:30\r\n"                                                 # 7
    "- 地点：三楼报告厅 🎉\r\n"                                                  # 8
)
LINE = "- 活动时间：周四16:30"


def definition(version: int, line: int, content: str, quote: str = LINE) -> str:
    return f'[^1]: schedule@{version}:{line} sha256:{sha256(content)[:12]} "{quote}"'


def draft(definition_line: str, context: str = '{units: ["schedule@2", "schedule@3"]}') -> str:
    return (
        "---\r\nquestion: 活动什么时候开始？\r\nfields: [活动时间]\r\n"
        f"context: {context}\r\n---\r\n"
        "活动时间是周四16:30[^1]。🎉\r\n\r\n"
        f"{definition_line}\r\n"
    )


OK = draft(definition(2, 6, SCHEDULE_V2))
TYPO = draft(definition(2, 6, SCHEDULE_V2, "- 活动时间：周四16：30"))  # full-width colon in the time
JSON_ANSWER = json.dumps({
    "status": "answered",
    "claims": [{"text": "活动时间：周四16:30", "quote": LINE, "id": "schedule@2:6",
                "doc_id": "schedule", "version": 2, "line": 6, "sha256": sha256(SCHEDULE_V2),
                "field": "活动时间"}],
    "missing_fields": [], "fields": ["活动时间"], "context": {"units": ["schedule@2"]},
}, ensure_ascii=False, indent=2)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_files(tmp_path, {
        "evidence/schedule.md": SCHEDULE_V2,
        "evidence/broken.md": b"- \xff\xfe\n",
        "answers/ok.md": OK,
        "answers/typo.md": TYPO,
        "answers/开放日 答案.answer.json": JSON_ANSWER,
        "notes/readme.md": "不是答案。\n",
    })
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def check_json(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, "check", "--root", root, "--format", "json", *extra)
    return code, json.loads(out)


def errors_of(out: Any) -> list[str]:
    """Error names of the first draft of a ``--format json`` report."""
    return [x["name"] for x in out["drafts"][0]["diagnostics"] if x["severity"] == "error"]


# -- grounding check --format json ------------------------------------------------------------------

DRAFT_KEYS = {"path", "status", "required_fields", "covered_fields", "missing_fields",
              "field_completeness", "coverage", "same_key_sources_checked", "diagnostics"}
DIAGNOSTIC_KEYS = {"code", "name", "severity", "line", "column", "end_line", "end_column",
                   "message"}


def test_check_json_has_the_spec_shape(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out = check_json(capsys, root)
    assert code == 1
    assert set(out) == {"drafts", "evidence"}
    by_path = {d["path"]: d for d in out["drafts"]}
    assert sorted(by_path) == ["answers/ok.md", "answers/typo.md", "answers/开放日 答案.answer.json"]
    for d in out["drafts"]:
        assert DRAFT_KEYS <= set(d)
        assert isinstance(d["coverage"], float) and isinstance(d["field_completeness"], bool)
        for diag in d["diagnostics"]:
            assert DIAGNOSTIC_KEYS <= set(diag)
            assert re.fullmatch(r"GR\d{3}", diag["code"])
            assert diag["severity"] in ("error", "warning", "information", "hint")
    ok = by_path["answers/ok.md"]
    assert ok == {**ok, "status": "answered", "required_fields": ["活动时间"],
                  "covered_fields": ["活动时间"], "missing_fields": [], "field_completeness": True,
                  "coverage": 1.0, "same_key_sources_checked": 1, "diagnostics": []}
    assert by_path["answers/开放日 答案.answer.json"]["diagnostics"] == []
    typo = by_path["answers/typo.md"]
    assert typo["status"] == "abstain" and typo["missing_fields"] == ["活动时间"]
    quote = [x for x in typo["diagnostics"] if x["name"] == "quote-mismatch"][0]
    definition_line = TYPO.split("\r\n")[7]
    assert quote == {**quote, "code": "GR103", "severity": "error", "line": 8, "column": 7,
                     "end_line": 8, "end_column": len(definition_line) + 1,
                     "citation": "schedule@2:6"}
    assert quote["related"] == [{"path": "evidence/schedule.md", "line": 6, "message": LINE}]
    missing = [x for x in typo["diagnostics"] if x["name"] == "missing-field"][0]
    assert (missing["line"], missing["column"], missing["end_column"]) == (3, 10, 14)
    evidence = {e["path"]: [x["name"] for x in e["diagnostics"]] for e in out["evidence"]}
    assert evidence == {"evidence/broken.md": ["unreadable-evidence"], "evidence/schedule.md": []}


def test_check_paths_limit_the_drafts(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out = check_json(capsys, root, str(root / "answers" / "ok.md"))
    assert code == 0
    assert [d["path"] for d in out["drafts"]] == ["answers/ok.md"]
    code, out = check_json(capsys, root, str(root / "answers"))
    assert len(out["drafts"]) == 3


def test_default_drafts_follow_the_globs_and_never_include_evidence(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    write_files(root, {
        "evidence/faq.answer.md": "- 问题：这是证据\n",        # matches a draft glob, is evidence
        "answers/深/层/草稿.md": "还没写。\n",                 # answers/**/*.md
        "其他/问答.answer.md": "还没写。\n",                   # **/*.answer.md
        ".grounding/old.answer.md": "不检查。\n",
        ".git/x.answer.md": "不检查。\n",
    })
    _, out = check_json(capsys, root)
    assert [d["path"] for d in out["drafts"]] == sorted([
        "answers/ok.md", "answers/typo.md", "answers/开放日 答案.answer.json",
        "answers/深/层/草稿.md", "其他/问答.answer.md"])
    assert "evidence/faq.answer.md" in {e["path"] for e in out["evidence"]}


# -- exit status -------------------------------------------------------------------------------------


def test_exit_zero_without_error_findings(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    (root / "evidence" / "broken.md").unlink()
    (root / "answers" / "typo.md").unlink()
    code, out, _ = run(capsys, "check", "--root", root)
    assert code == 0
    assert out.rstrip().endswith("2 draft(s): 0 error(s), 0 warning(s), 0 information")


def test_exit_one_with_error_findings(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, _, _ = run(capsys, "check", "--root", root, "answers/typo.md")
    assert code == 1


def test_evidence_errors_alone_exit_one(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    write_files(root, {"evidence/room-a.md": "---\ndoc_id: room\n---\n- 房间：A101\n",
                       "evidence/room-b.md": "---\ndoc_id: room\n---\n- 房间：B202\n"})
    (root / "evidence" / "broken.md").unlink()
    code, out = check_json(capsys, root, "answers/ok.md")
    assert code == 1
    assert out["drafts"][0]["diagnostics"] == []
    names = {e["path"]: [x["name"] for x in e["diagnostics"]] for e in out["evidence"]}
    assert names["evidence/room-a.md"] == names["evidence/room-b.md"] == ["duplicate-doc-id"]


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["--root", "{root}/missing"], "not a folder"),
    ("bogus = 1\n", ["--root", "{root}"], "unknown key 'bogus'"),
    ('evidence = 3\n', ["--root", "{root}"], "evidence must be a non-empty string"),
    ('evidence_globs = ["!*.md"]\n', ["--root", "{root}"], "negation"),
    ("strict = [\n", ["--root", "{root}"], "grounding.toml"),
    (None, ["--root", "{root}", "--at", "99"], "--at 99: the event log holds 1 event (use 0..1)"),
    (None, ["--root", "{root}", "--at", "-1"], "--at -1: a state is named by how many events it holds (use 0..1)"),
    (None, ["--root", "{root}", "--evidence", "nowhere"], "does not exist"),
    (None, ["--root", "{root}", "answers/none.md"], "no such file"),
], ids=["missing-root", "unknown-key", "bad-type", "negation", "toml-syntax", "at-beyond-log", "at-negative",
        "missing-evidence", "missing-draft"])
def test_usage_and_configuration_errors_exit_two(
        capsys: pytest.CaptureFixture[str], root: Path, setup: str | None, argv: list[str],
        message: str) -> None:
    if setup is not None:
        write_files(root, {"grounding.toml": setup})
    code, out, err = run(capsys, "check", *[a.format(root=root) for a in argv])
    assert code == 2
    assert out == ""
    assert message in err and err.startswith("grounding: error: ")


def test_bad_option_value_exits_two(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["check", "--root", str(root), "--today", "2026-13-01"])
    assert info.value.code == 2
    assert "expected YYYY-MM-DD" in capsys.readouterr().err


def test_process_exit_status_of_the_console_entry(root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "grounding.cli", "check", "--root", str(root)]
    assert subprocess.run([*command, "answers/ok.md"], env=env, capture_output=True).returncode == 0
    assert subprocess.run(command, env=env, capture_output=True).returncode == 1
    bad = subprocess.run([*command, "--at", "5"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "--at 5" in bad.stderr


# -- text format ---------------------------------------------------------------------------------------

TEXT_LINE = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning|information|hint) "
    r"(?P<code>GR\d{3}) (?P<name>[a-z-]+): (?P<message>.+)$")


def test_text_format_prints_compiler_style_lines_with_hints(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = run(capsys, "check", "--root", root, "--format", "text")
    assert code == 1
    lines = out.splitlines()
    findings = [(i, m) for i, line in enumerate(lines) if (m := TEXT_LINE.match(line))]
    assert {m["path"] for _, m in findings} == {"answers/typo.md", "evidence/broken.md"}
    quote = next((i, m) for i, m in findings if m["name"] == "quote-mismatch")
    assert quote[1].group("path", "line", "col", "severity", "code") == (
        "answers/typo.md", "8", "7", "error", "GR103")
    assert lines[quote[0] + 1].startswith("    hint: ")
    assert "column 12 of the quote: U+FF1A FULLWIDTH COLON" in quote[1]["message"]
    assert ("answers/typo.md: abstain (1 error(s), 1 warning(s)); required [活动时间], covered [],"
            " missing [活动时间]; coverage 0.00") in lines
    # the drafts' counts are the drafts' findings; the evidence file's are counted apart
    assert lines[-1] == ("3 draft(s): 1 error(s), 1 warning(s), 0 information;"
                         " 1 evidence file(s): 0 error(s), 1 warning(s), 0 information")


# -- --at, --today ---------------------------------------------------------------------------------------


def test_at_n_checks_against_the_replayed_log(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    assert check_json(capsys, root, "answers/ok.md")[0] == 0
    write_files(root, {"evidence/schedule.md": SCHEDULE_V3})
    code, out = check_json(capsys, root, "answers/ok.md")
    assert code == 1
    assert errors_of(out) == ["stale-citation"]
    # event 1 imported version 2; events 2 and 3 are the v3 import and the v2 revoke
    code, out = check_json(capsys, root, "answers/ok.md", "--at", "1")
    assert code == 0 and out["drafts"][0]["status"] == "answered"
    code, out = check_json(capsys, root, "answers/ok.md", "--at", "0")
    assert errors_of(out) == ["unknown-source"]
    code, out = check_json(capsys, root, "answers/ok.md", "--at", "3")
    assert code == 1


def test_today_pins_the_activity_date(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    write_files(root, {"evidence/schedule.md": SCHEDULE_V2.replace(
        "title:", "effective_until: 2026-06-30\r\ntitle:").replace("\r\n---\r\n", "\r\n---\r\n", 1)})
    text = draft(definition(2, 7, (root / "evidence/schedule.md").read_bytes().decode()))
    write_files(root, {"answers/ok.md": text})
    assert check_json(capsys, root, "answers/ok.md", "--today", "2026-06-30")[0] == 0
    code, out = check_json(capsys, root, "answers/ok.md", "--today", "2026-07-01")
    assert code == 1
    inactive = [x for x in out["drafts"][0]["diagnostics"] if x["name"] == "inactive-source"]
    assert "expired on 2026-06-30" in inactive[0]["message"]
    write_files(root, {"grounding.toml": 'today = "2026-07-01"\n'})
    assert check_json(capsys, root, "answers/ok.md")[0] == 1
    assert check_json(capsys, root, "answers/ok.md", "--today", "2026-01-01")[0] == 0


# -- --fix ---------------------------------------------------------------------------------------------


def test_fix_replaces_a_mismatched_quote_and_the_recheck_passes(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    evidence_before = (root / "evidence/schedule.md").read_bytes()
    code, out = check_json(capsys, root, "answers/typo.md", "--fix")
    assert code == 0
    assert out["drafts"][0]["status"] == "answered" and out["drafts"][0]["diagnostics"] == []
    fixed = (root / "answers/typo.md").read_bytes().decode()
    assert fixed == TYPO.replace("周四16：30\"", "周四16:30\"")
    assert fixed == OK  # CRLF line ends kept
    assert (root / "evidence/schedule.md").read_bytes() == evidence_before
    assert check_json(capsys, root, "answers/typo.md")[0] == 0


def test_fix_reanchors_a_stale_citation(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    run(capsys, "index", "--root", root)
    write_files(root, {"evidence/schedule.md": SCHEDULE_V3})
    code, _ = check_json(capsys, root, "answers/ok.md", "--fix")
    assert code == 0
    fixed = (root / "answers/ok.md").read_bytes().decode()
    assert fixed == draft(definition(3, 7, SCHEDULE_V3))


def test_fix_reanchors_and_updates_the_context_unit_of_the_old_version(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    """Issue 12: re-anchoring traded GR104 for GR107 when the context named the old version."""
    write_files(root, {"answers/ctx.md": draft(definition(2, 6, SCHEDULE_V2), '{units: ["schedule@2"]}')})
    run(capsys, "index", "--root", root)
    write_files(root, {"evidence/schedule.md": SCHEDULE_V3})
    code, out, err = run(capsys, "check", "--root", root, "--format", "json", "answers/ctx.md", "--fix")
    assert code == 0, out
    assert json.loads(out)["drafts"][0]["diagnostics"] == []  # no GR107 after the fix
    fixed = (root / "answers/ctx.md").read_bytes().decode()
    assert fixed == draft(definition(3, 7, SCHEDULE_V3), '{units: ["schedule@3"]}')  # CRLF kept
    old_citation = definition(2, 6, SCHEDULE_V2)[len("[^1]: "):]
    new_citation = definition(3, 7, SCHEDULE_V3)[len("[^1]: "):]
    assert err.splitlines() == [  # old → new for each change
        'grounding: fixed answers/ctx.md:4: Update context unit schedule@2 to schedule@3: "schedule@2" → "schedule@3"',
        f"grounding: fixed answers/ctx.md:8: Re-anchor to schedule@3:7: {old_citation} → {new_citation}"]


def test_fix_says_which_unit_to_add_when_the_context_names_lines(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    write_files(root, {"answers/lines.md": draft(definition(2, 6, SCHEDULE_V2), "{units: ['schedule@2:6-7']}")})
    run(capsys, "index", "--root", root)
    write_files(root, {"evidence/schedule.md": SCHEDULE_V3})
    code, out = check_json(capsys, root, "answers/lines.md")
    stale = next(d for d in out["drafts"][0]["diagnostics"] if d["name"] == "stale-citation")
    assert stale["hint"].endswith("Then add schedule@3:7 to context.units.")
    code, out = check_json(capsys, root, "answers/lines.md", "--fix")
    fixed = (root / "answers/lines.md").read_bytes().decode()
    assert fixed == draft(definition(3, 7, SCHEDULE_V3), "{units: ['schedule@2:6-7']}")  # the lines stay
    assert "invisible-source" in [d["name"] for d in out["drafts"][0]["diagnostics"]]  # as the hint says


def test_fix_keeps_a_bom_and_edits_line_one(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    text = f'{definition(2, 6, SCHEDULE_V2, "- 活动时间：周四16：30")}\r\n\r\n活动时间是周四16:30[^1]。\r\n'
    (root / "answers/bom.md").write_bytes(b"\xef\xbb\xbf" + text.encode())
    code, _ = check_json(capsys, root, "answers/bom.md", "--fix")
    assert code == 0
    assert (root / "answers/bom.md").read_bytes() == b"\xef\xbb\xbf" + text.replace("16：30", "16:30").encode()


def test_fix_leaves_a_quote_that_says_something_else(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    text = f'活动时间是周四16:31[^1]。\n\n{definition(2, 6, SCHEDULE_V2, "- 活动时间：周四16:31")}\n'
    (root / "answers/other.md").write_text(text, encoding="utf-8")
    code, out = check_json(capsys, root, "answers/other.md", "--fix")
    assert code == 1
    assert "quote-mismatch" in [d["name"] for d in out["drafts"][0]["diagnostics"]]
    assert (root / "answers/other.md").read_text(encoding="utf-8") == text  # not rewritten


def test_fix_moves_a_wrong_line_number_to_the_one_line_the_quote_is(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    wrong = draft(definition(2, 7, SCHEDULE_V2))  # the quote is line 6; quote + hash pin it
    write_files(root, {"answers/wrong.md": wrong})
    code, out = check_json(capsys, root, "answers/wrong.md")
    mismatch = next(d for d in out["drafts"][0]["diagnostics"] if d["name"] == "quote-mismatch")
    assert mismatch["message"].startswith("the quote is line 6 of schedule@2, not line 7")
    code, _ = check_json(capsys, root, "answers/wrong.md", "--fix")
    assert code == 0
    assert (root / "answers/wrong.md").read_bytes().decode() == draft(definition(2, 6, SCHEDULE_V2))


def test_fix_leaves_drafts_without_fixes_untouched(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    twice = "---\ndoc_id: notes\n---\n- 备注：同上 🎉\n- 地点：三楼\n- 备注：同上 🎉\n"
    quote = "- 备注：同上 🎉"
    forged = (f"备注同上[^1]。🎉\n\n[^1]: notes@1:5 sha256:{sha256(twice)[:12]} \"{quote}\"\n")
    write_files(root, {"evidence/notes.md": twice, "answers/forged.md": forged})
    code, out = check_json(capsys, root, "answers/forged.md", "--fix")
    assert code == 1  # the quote is lines 4 and 6: which one was meant is not known, no fix
    assert "quote-mismatch" in [d["name"] for d in out["drafts"][0]["diagnostics"]]
    assert (root / "answers/forged.md").read_bytes() == forged.encode()


# -- index and conflicts -----------------------------------------------------------------------------


def test_index_json_summarises_the_index(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = run(capsys, "index", "--root", root, "--format", "json")
    assert code == 0
    summary = json.loads(out)
    assert summary["documents"] == 1 and summary["versions"] == 1
    assert summary["active_documents"] == 1 and summary["active_lines"] == 7
    assert summary["active_field_lines"] == 2 and summary["conflicts"] == 0
    assert summary["events"] == 1 and summary["events_appended"] == 1
    assert summary["files_read"] == 2
    assert list(summary["evidence_problems"]) == ["evidence/broken.md"]
    assert summary["evidence_problems"]["evidence/broken.md"][0]["name"] == "unreadable-evidence"
    again = json.loads(run(capsys, "index", "--root", root, "--format", "json")[1])
    assert (again["files_read"], again["events_appended"], again["events"]) == (0, 0, 1)


def test_conflicts_json_lists_every_source(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = run(capsys, "conflicts", "--root", root, "--format", "json")
    assert (code, json.loads(out)) == (0, [])
    write_files(root, {
        "evidence/poster.md": "---\ndoc_id: poster\nsubject: 开放日\n---\n- 活动时间：周四 16:30\n",
        "evidence/flyer.md": "主题：开放日\n- 活动时间：周三16:30\n",
        "evidence/card.md": "主题：开放日\n- 活动时间：周四１６:３０\n",
    })
    write_files(root, {"evidence/schedule.md": SCHEDULE_V2.replace("title:", "subject: 开放日\r\ntitle:")})
    code, out, _ = run(capsys, "conflicts", "--root", root, "--format", "json")
    assert code == 1
    conflicts = json.loads(out)
    assert len(conflicts) == 1
    assert (conflicts[0]["subject"], conflicts[0]["field"]) == ("开放日", "活动时间")
    assert sorted((v["path"], v["value"]) for v in conflicts[0]["values"]) == [
        ("evidence/card.md", "周四１６:３０"), ("evidence/flyer.md", "周三16:30"),
        ("evidence/poster.md", "周四 16:30"), ("evidence/schedule.md", "周四16:30")]
    text = run(capsys, "conflicts", "--root", root)[1]
    assert text.rstrip().endswith("1 conflict(s)")


# -- SARIF -----------------------------------------------------------------------------------------

SCHEMA_PATH = REPO / "tests" / "fixtures" / "sarif-2.1.0.json"


def sarif_log(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    code, out, _ = run(capsys, "check", "--root", root, "--format", "sarif")
    return code, out


def test_sarif_output_validates_against_the_schema(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    write_files(root, {"answers/stale.md": draft(definition(1, 6, SCHEDULE_V2)),
                       "answers/a:b.md": TYPO})
    code, out = sarif_log(capsys, root)
    assert code == 1
    log = json.loads(out)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    assert validator_class is jsonschema.Draft202012Validator
    validator_class.check_schema(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert problems == []
    run_ = log["runs"][0]
    assert log["version"] == "2.1.0" and run_["columnKind"] == "unicodeCodePoints"
    rules = run_["tool"]["driver"]["rules"]
    results = run_["results"]
    assert results
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["properties"]["name"] == rules[result["ruleIndex"]]["name"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert "answers/a%3Ab.md" in uris and "evidence/broken.md" in uris
    quote = next(r for r in results if r["ruleId"] == "GR103"
                 and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "answers/typo.md")
    region = quote["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"], region["endLine"]) == (8, 7, 8)
    assert region["endColumn"] == len(TYPO.split("\r\n")[7]) + 1


def test_artifact_uris_are_percent_encoded() -> None:
    assert artifact_uri("answers/开放日 答案.answer.json") == (
        "answers/%E5%BC%80%E6%94%BE%E6%97%A5%20%E7%AD%94%E6%A1%88.answer.json")
    assert artifact_uri("evidence/a:b.md") == "evidence/a%3Ab.md"
    assert artifact_uri("evidence/plain-1_2.md") == "evidence/plain-1_2.md"


def multitool() -> str | None:
    path = os.environ.get("SARIF_MULTITOOL")
    if path and os.access(path, os.X_OK):
        return path
    return None


@pytest.mark.skipif(multitool() is None, reason="SARIF_MULTITOOL is not set to an executable")
def test_sarif_output_passes_sarif_multitool_validate(
        capsys: pytest.CaptureFixture[str], root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    write_files(root, {"answers/stale.md": draft(definition(1, 6, SCHEDULE_V2))})
    _, out = sarif_log(capsys, root)
    folder = tmp_path_factory.mktemp("sarif")
    log_path = folder / "grounding.sarif"
    log_path.write_text(out, encoding="utf-8")
    result_path = folder / "validation.sarif"
    tool = multitool()
    assert tool is not None
    proc = subprocess.run([tool, "validate", str(log_path), "--output", str(result_path),
                           "--log", "ForceOverwrite"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error SARIF" not in proc.stdout, proc.stdout
    validation = json.loads(result_path.read_text(encoding="utf-8-sig"))
    levels = [(r.get("level", "warning"), r["ruleId"], r["message"]) for run_ in validation["runs"]
              for r in run_.get("results", [])]
    assert [x for x in levels if x[0] == "error"] == [], levels
    assert all(r["executionSuccessful"] for run_ in validation["runs"]
               for r in run_.get("invocations", []))

