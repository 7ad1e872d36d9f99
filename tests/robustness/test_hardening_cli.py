"""Issue 13 items 9 and 10 (and issue 12's atomic writes): how ``grounding check`` writes and fails.

- 9: ``--fix`` writes a draft atomically (a new file renamed over the old one, permission
  bits kept, no temporary file left) and never writes a draft that is a hard link of an
  evidence file.
- 10: an unexpected exception while checking one draft is a finding on that draft; the
  other drafts are reported as usual, stdout stays a clean report, exit 2 stays for usage.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from grounding import cli
from grounding_core import workspace as workspace_module

from .helpers import PYTHON, SCHEDULE, SERVER_ENV, sha256, write_files

HASH = sha256(SCHEDULE)[:12]
TOML = 'today = "2026-05-01"\n'
FRONT = '---\nquestion: 几点？\nfields: [活动时间]\ncontext: {units: ["schedule@1"]}\n---\n'
SLIPPED = FRONT + f'活动时间是周四16:30[^1]。🎉\n\n[^1]: schedule＠1:6 sha256:{HASH} "- 活动时间：周四16:30"\n'
GOOD = SLIPPED.replace("＠", "@")
SPACED = GOOD.replace('16:30"', '16:30 "')  # a trailing space in the quote: a safe fix too


def check(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["check", "--root", str(root), "--format", "json", *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".grounding-tmp")]


# -- 9: atomic writes, never an evidence file ---------------------------------------------


@pytest.mark.parametrize("broken", [SLIPPED, SPACED])
@pytest.mark.parametrize("newline, bom", [("\n", ""), ("\r\n", ""), ("\r\n", "\ufeff")])
def test_fix_replaces_the_draft_atomically_keeping_its_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str, newline: str, bom: str) -> None:
    draft = bom + broken.replace("\n", newline)
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": TOML, "answers/a.md": draft})
    path = tmp_path / "answers/a.md"
    path.chmod(0o640)
    inode = path.stat().st_ino
    code, report, err = check(capsys, tmp_path, "--fix")
    assert code == 0 and report["drafts"][0]["status"] == "answered", report
    assert path.read_bytes() == (bom + GOOD.replace("\n", newline)).encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # a new file was renamed into place
    assert temp_files(path.parent) == [] and "fixed answers/a.md:8" in err


def test_fix_never_writes_a_draft_that_is_a_hard_link_of_evidence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "evidence/notes/草稿.md": SPACED,
                           "grounding.toml": TOML})
    (tmp_path / "answers").mkdir()
    os.link(tmp_path / "evidence/notes/草稿.md", tmp_path / "answers/a.md")
    code, report, err = check(capsys, tmp_path, "--fix")
    assert "not fixing answers/a.md: it is a hard link of the evidence file" in err and "草稿.md" in err
    assert (tmp_path / "evidence/notes/草稿.md").read_text(encoding="utf-8") == SPACED
    assert os.path.samefile(tmp_path / "evidence/notes/草稿.md", tmp_path / "answers/a.md")
    [draft] = report["drafts"]
    assert [d["name"] for d in draft["diagnostics"] if d["severity"] == "error"] == ["quote-mismatch"]
    assert code == 1


def test_check_draft_write_refuses_links_to_evidence(tmp_path: Path) -> None:
    from grounding_core.fixes import UnsafeWrite, check_draft_write, write_atomic

    write_files(tmp_path, {"evidence/e.md": SCHEDULE, "answers/ok.md": GOOD, "backup/a.md": GOOD})
    evidence = (tmp_path / "evidence").resolve()
    (tmp_path / "answers/sym.md").symlink_to(tmp_path / "evidence/e.md")
    os.link(tmp_path / "evidence/e.md", tmp_path / "answers/hard.md")
    os.link(tmp_path / "backup/a.md", tmp_path / "answers/other.md")  # a link, but not to evidence
    with pytest.raises(UnsafeWrite, match="an evidence file"):
        check_draft_write(tmp_path / "answers/sym.md", evidence)
    with pytest.raises(UnsafeWrite, match="hard link of the evidence file"):
        check_draft_write(tmp_path / "answers/hard.md", evidence)
    assert check_draft_write(tmp_path / "answers/ok.md", evidence) == (tmp_path / "answers/ok.md").resolve()
    target = check_draft_write(tmp_path / "answers/other.md", evidence)
    write_atomic(target, "新 🎉\r\n".encode())
    assert target.read_bytes() == "新 🎉\r\n".encode()
    assert (tmp_path / "backup/a.md").read_text(encoding="utf-8") == GOOD  # the other name keeps its text


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_a_draft_that_cannot_be_written_keeps_its_text_and_its_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": TOML, "answers/a.md": SLIPPED})
    (tmp_path / "answers").chmod(0o555)
    try:
        code, report, err = check(capsys, tmp_path, "--fix")
    finally:
        (tmp_path / "answers").chmod(0o755)
    assert "not fixing answers/a.md" in err and code == 1
    assert (tmp_path / "answers/a.md").read_text(encoding="utf-8") == SLIPPED
    assert temp_files(tmp_path / "answers") == []


def test_write_atomic_leaves_the_old_file_when_the_rename_fails(tmp_path: Path) -> None:
    from grounding_core.fixes import write_atomic

    target = tmp_path / "a.md"
    target.mkdir()  # a folder where the file should be: the rename fails
    with pytest.raises(OSError):
        write_atomic(target, b"x")
    assert target.is_dir() and temp_files(tmp_path) == []


# -- 10: one draft's failure never hides the others -----------------------------------------


def test_an_exception_in_one_draft_is_a_finding_on_it_and_the_others_are_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure is injected (no real input crashes the checks any more); the CLI's
    isolation is what is tested.
    """
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": TOML,
                           "answers/a.md": GOOD, "answers/b.md": GOOD, "answers/c.md": GOOD})
    real = workspace_module.check_draft

    def failing(draft: Any, *args: Any, **kwargs: Any) -> Any:
        if args[3] == "answers/b.md":
            raise RuntimeError("boom 💥 in the checker\nsecond line")
        return real(draft, *args, **kwargs)

    monkeypatch.setattr(workspace_module, "check_draft", failing)
    code, report, err = check(capsys, tmp_path)
    statuses = {d["path"]: d["status"] for d in report["drafts"]}
    assert statuses == {"answers/a.md": "answered", "answers/b.md": "abstain", "answers/c.md": "answered"}
    [failure] = report["drafts"][1]["diagnostics"]
    assert failure["name"] == "malformed-citation" and (failure["line"], failure["column"]) == (1, 1)
    assert "internal error RuntimeError (boom 💥 in the checker)" in failure["message"]
    assert code == 1 and "Traceback" not in err and "internal error while checking answers/b.md" in err


def test_grounding_debug_prints_the_traceback_on_stderr_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": TOML, "answers/a.md": GOOD})

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("x")

    monkeypatch.setattr(workspace_module, "check_draft", failing)
    monkeypatch.setenv("GROUNDING_DEBUG", "1")
    code = cli.main(["check", "--root", str(tmp_path), "--format", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" in err and "KeyError" in err
    assert "Traceback" not in out and json.loads(out)["drafts"][0]["status"] == "abstain" and code == 1


@pytest.mark.parametrize("context", ['{query: "活动\\0时间"}', '{query: "\\0"}', '{query: "活动时间\\u0000🎉"}'])
def test_a_nul_in_a_query_context_never_aborts_the_run(tmp_path: Path, context: str) -> None:
    """The NUL once reached SQLite's FTS parser ("unterminated string") and aborted the run."""
    write_files(tmp_path, {
        "evidence/schedule.md": SCHEDULE, "grounding.toml": TOML,
        "answers/a.md": GOOD,
        "answers/b.md": f"---\nquestion: 几点？\nfields: [活动时间]\ncontext: {context}\n---\n活动时间是周四16:30。\n",
        "answers/c.answer.json": json.dumps({"status": "abstain", "claims": [], "missing_fields": ["活动时间"],
                                             "fields": ["活动时间"], "context": {"query": "活动\0时间"}}),
    })
    proc = subprocess.run([PYTHON, "-m", "grounding.cli", "check", "--root", str(tmp_path), "--format", "json"],
                          capture_output=True, text=True, env=SERVER_ENV, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    statuses = {d["path"]: d["status"] for d in json.loads(proc.stdout)["drafts"]}
    assert statuses["answers/a.md"] == "answered"
    assert statuses["answers/b.md"] == statuses["answers/c.answer.json"] == "abstain"
