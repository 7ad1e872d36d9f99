"""``grounding cite`` (SPEC §9, issue 12): paste-ready verified citations through the real CLI.

Every printed citation is pasted into a draft and checked: it must verify. Refusals name the
finding a draft would get and say why the line cannot support an answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grounding import cli

from .conftest import line_of, sha, write


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["cite", "--root", str(root), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def footnote(doc_id: str, version: int, line: int, label: int = 1) -> str:
    quote = line_of(doc_id, version, line)
    return f'[^{label}]: {doc_id}@{version}:{line} sha256:{sha(doc_id, version)[:12]} "{quote}"'


def test_cite_by_evidence_path_and_line_prints_the_active_line_of_a_crlf_file(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline_root)
    code, out, _ = run(capsys, pipeline_root, "evidence/schedule.md:7")
    assert code == 0
    assert out == footnote("schedule", 2, 7) + "\n"
    assert "\r" not in out and "🎉" in out


@pytest.mark.parametrize("target", ["schedule:8", "schedule@2:8"])
def test_cite_by_doc_id_and_line(capsys: pytest.CaptureFixture[str], pipeline_root: Path, target: str) -> None:
    code, out, _ = run(capsys, pipeline_root, target)
    assert (code, out) == (0, footnote("schedule", 2, 8) + "\n")
    assert "𠮷" in out


def test_grep_within_a_document_lists_matching_lines_and_leaves_out_meta_fields_with_a_note(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, out, err = run(capsys, pipeline_root, "schedule", "--grep", "时间")
    assert code == 0
    assert out == footnote("schedule", 2, 7) + "\n"
    assert "schedule:10 left out" in err and "meta field '版本说明'" in err


def test_grep_across_documents_finds_short_cjk_text(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, out, _ = run(capsys, pipeline_root, "--grep", "到账")
    assert (code, out) == (0, footnote("refund", 1, 3) + "\n")


def test_grep_matches_full_width_digits_after_nfkc(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, out, _ = run(capsys, pipeline_root, "refund", "--grep", "３个工作日")
    assert (code, out) == (0, footnote("refund", 1, 3) + "\n")


def test_json_format_gives_the_citation_and_its_eight_key_claim(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, out, _ = run(capsys, pipeline_root, "refund:2", "--format", "json")
    assert code == 0
    data = json.loads(out)
    (c,) = data["citations"]
    assert c["footnote"] == footnote("refund", 1, 2)
    assert c["path"] == "evidence/refund.md" and c["field"] == "退款方式" and c["value"] == "原路退回"
    assert list(c["claim"]) == ["text", "quote", "id", "doc_id", "version", "line", "sha256", "field"]
    assert c["claim"]["sha256"] == sha("refund") and c["claim"]["text"] == "退款方式：原路退回"


def test_a_heading_line_is_citable_in_markdown_but_has_no_json_claim(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, out, _ = run(capsys, pipeline_root, "refund:1", "--format", "json")
    (c,) = json.loads(out)["citations"]
    assert (code, c["quote"], c["field"], c["claim"]) == (0, "# 退款说明", None, None)


@pytest.mark.parametrize(("target", "code_name", "why"), [
    ("schedule:2", "GR112 meta-field", "front-matter line"),
    ("schedule:10", "GR112 meta-field", "meta field '版本说明'"),
    ("schedule:9", "blank-line", "is blank"),
    ("schedule:99", "GR102 unknown-source", "there is no line 99"),
    ("schedual:7", "GR102 unknown-source", "no evidence document has doc_id 'schedual'"),
    ("schedule@1:5", "GR104 stale-citation", "version 2 supersedes it"),
    ("old:5", "GR106 inactive-source", "revoked"),
])
def test_lines_that_cannot_support_an_answer_are_refused_with_the_reason(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, target: str, code_name: str, why: str) -> None:
    code, out, err = run(capsys, pipeline_root, target)
    assert (code, out) == (1, "")
    assert f"grounding: error: {code_name}:" in err and why in err
    assert "hint:" in err


def test_an_unknown_doc_id_suggests_the_close_one(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    _, _, err = run(capsys, pipeline_root, "schedual:7")
    assert "did you mean 'schedule'?" in err


def test_an_archive_file_of_an_older_version_points_to_the_same_line_of_the_current_one(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(pipeline_root, {"evidence/archive/schedule-v1.md": "---\ndoc_id: schedule\nversion: 1\n---\n"
                          "x\nx\n- 地点：三楼报告厅𠮷\n"})
    monkeypatch.chdir(pipeline_root)
    code, _, err = run(capsys, pipeline_root, "evidence/archive/schedule-v1.md:7")
    assert code == 1
    assert "holds version 1 of 'schedule', but version 2 is current" in err
    assert "the same line is schedule@2:8: grounding cite schedule:8" in err


def test_an_evidence_file_kept_out_of_the_index_says_why(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(pipeline_root, {"evidence/broken.md": "---\ndoc_id: a b\n---\n- 票价：免费\n"})
    monkeypatch.chdir(pipeline_root)
    code, _, err = run(capsys, pipeline_root, "evidence/broken.md:4")
    assert code == 1
    assert "evidence/broken.md is not in the index" in err and "invalid-front-matter" in err


def test_a_grep_that_matches_nothing_is_an_error(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, _, err = run(capsys, pipeline_root, "refund", "--grep", "运费")
    assert code == 1 and "no-match" in err and "运费" in err


@pytest.mark.parametrize("argv", [[], ["not a target:"], ["evidence/schedule.md"]])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], pipeline_root: Path, argv: list[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline_root)
    code, _, err = run(capsys, pipeline_root, *argv)
    assert code == 2 and "grounding: error:" in err


def test_pasted_citations_verify(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    _, time_line, _ = run(capsys, pipeline_root, "schedule:7")
    _, place_line, _ = run(capsys, pipeline_root, "schedule:8", "--label", "2")
    draft = ("---\r\nfields: [活动时间, 地点]\r\ncontext: {units: [\"schedule@2\"]}\r\n---\r\n"
             "开放日活动时间是周四16:30 🎉[^1]，地点在三楼报告厅𠮷[^2]。\r\n\r\n" + time_line + place_line)
    write(pipeline_root, {"answers/pasted.md": draft})
    assert cli.main(["check", "--root", str(pipeline_root), "--format", "json", "answers/pasted.md"]) == 0
    report = json.loads(capsys.readouterr().out)["drafts"][0]
    assert (report["status"], report["diagnostics"]) == ("answered", [])


def test_cite_never_writes_evidence(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (pipeline_root / "evidence").rglob("*.md")}
    run(capsys, pipeline_root, "--grep", "时间")
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (pipeline_root / "evidence").rglob("*.md")}
    assert before == after and os.listdir(pipeline_root / "evidence")


FULL_WIDTH = "---\r\ndoc_id: hotline\r\n---\r\n- 客服：２４小时在线 🎉\r\n3、运费：满９９元包邮𠮷\r\n"


@pytest.mark.parametrize(("query", "expected"), [
    ("审核通过后３个工作日", ("refund", 3)),     # full-width query, half-width line (trigram path)
    ("周四１６:30", ("schedule", 7)),           # the CRLF file with an emoji
    ("24小时", ("hotline", 4)),                 # half-width query, full-width line
    ("９９", ("hotline", 5)),                   # a short term (substring path), numbered-list line
    ("99元", ("hotline", 5)),
])
def test_grep_across_documents_matches_after_nfkc_on_both_sides(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, query: str, expected: tuple[str, int]) -> None:
    write(pipeline_root, {"evidence/hotline.md": FULL_WIDTH})
    code, out, err = run(capsys, pipeline_root, "--grep", query)
    assert code == 0, err
    doc_id, line = expected
    assert out.startswith(f"[^1]: {doc_id}@") and f":{line} sha256:" in out.splitlines()[0]
    # the quote is the line as written, never its NFKC form
    version = 2 if doc_id == "schedule" else 1
    raw = FULL_WIDTH.split("\r\n")[line - 1] if doc_id == "hotline" else line_of(doc_id, version, line)
    assert out.splitlines()[0].endswith(f'"{raw}"')


def test_a_corpus_grep_that_matches_nothing_says_how_terms_are_compared(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, _, err = run(capsys, pipeline_root, "--grep", "运费")
    assert code == 1 and "no-match" in err
    assert "as written" not in err and "NFKC" in err


def test_an_index_with_full_text_rows_as_written_is_refolded_on_open(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    """An index built before the rows were NFKC-folded (raw rows, no ``fts_form``) is re-queued
    on open, so the next search finds full-width lines from a half-width query.
    """
    import sqlite3

    from grounding_core.store import fts_rows

    write(pipeline_root, {"evidence/hotline.md": FULL_WIDTH})
    assert run(capsys, pipeline_root, "--grep", "24小时")[0] == 0
    db = sqlite3.connect(pipeline_root / ".grounding" / "index.sqlite")
    with db:
        raw_rows = db.execute("SELECT rowid, text FROM lines_fts").fetchall()
        db.execute("DELETE FROM lines_fts")
        db.executemany("INSERT INTO lines_fts (rowid, text) VALUES (?, ?)",
                       [(rowid, FULL_WIDTH.split("\r\n")[(rowid & 0xFFFFFF) - 1] if "24小时" in text or "99元" in text
                         else text) for rowid, text in raw_rows])
        db.execute("DELETE FROM meta WHERE key = 'fts_form'")
    assert db.execute("SELECT COUNT(*) FROM lines_fts WHERE instr(text, '２４') > 0").fetchone()[0] == 1
    db.close()
    code, out, _ = run(capsys, pipeline_root, "--grep", "24小时")
    assert code == 0 and "hotline@1:4" in out
    assert fts_rows(1, "- ２４小时\n", 0) == [(1 << 24 | 1, "- 24小时")]


@pytest.mark.parametrize(("target", "code", "name"), [
    ("schedule@1:5", "GR104", "stale-citation"), ("schedule:9", None, "blank-line"),
    ("schedual:7", "GR102", "unknown-source")])
def test_json_format_says_why_nothing_can_be_cited_on_stdout_too(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, target: str, code: str | None, name: str) -> None:
    status, out, err = run(capsys, pipeline_root, target, "--format", "json")
    result = json.loads(out)
    assert status == 1 and result["citations"] == [] and result["skipped"] == []
    assert (result["error"]["code"], result["error"]["name"]) == (code, name)
    assert result["error"]["message"] and result["error"]["message"] in err
    if name == "unknown-source":
        assert "did you mean 'schedule'?" in result["error"]["message"] + result["error"]["hint"]
