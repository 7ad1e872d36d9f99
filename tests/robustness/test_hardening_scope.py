"""What ``grounding check`` checks, through the real command line (README "What Grounding
guarantees": a clear error, never a silent non-check): a folder given that holds no draft
checks nothing (it checked, and with ``--fix`` rewrote, every draft of the workspace); drafts
that the configuration put under the evidence folder are named; ``evidence`` naming a file
says it is not a folder.
"""

from __future__ import annotations

from pathlib import Path

from .helpers import sha256
from .test_hardening_adversary import HASH, grounding, workspace

SLIP = ("活动时间是周四16:30[^1]。🎉\r\n\r\n"
        f'[^1]: schedule＠1：6 sha256:{HASH[:12]} "- 活动时间：周四16:30"\r\n')  # --fix writes @ and :


def test_a_folder_without_drafts_checks_and_fixes_nothing_else(tmp_path: Path) -> None:
    ws = workspace(tmp_path, **{"answers/slip.md": SLIP})
    (ws / "notes").mkdir()
    before = sha256((ws / "answers/slip.md").read_bytes())
    proc = grounding(ws, "check", "--fix", "notes")
    assert proc.returncode == 0, proc.stderr
    assert "0 draft(s)" in proc.stdout and "answers/" not in proc.stdout
    assert "no drafts under notes; nothing to check" in proc.stderr
    assert sha256((ws / "answers/slip.md").read_bytes()) == before  # not rewritten
    fixed = grounding(ws, "check", "--fix", "answers")  # the folder that holds it still works
    assert "fixed answers/slip.md" in fixed.stderr and "schedule@1:6" in (ws / "answers/slip.md").read_text("utf-8")


def test_drafts_under_the_evidence_folder_are_named(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    for evidence in ("answers", "."):
        (ws / "grounding.toml").write_text(f'today = "2026-05-01"\nevidence = "{evidence}"\n', encoding="utf-8")
        proc = grounding(ws, "check")
        assert proc.returncode == 0 and "0 draft(s)" in proc.stdout, proc.stderr
        assert "answers/a.md matches the drafts globs but is under the evidence folder" in proc.stderr
        assert "evidence files are never drafts" in proc.stderr


def test_evidence_naming_a_file_says_it_is_not_a_folder(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "grounding.toml").write_text('today = "2026-05-01"\nevidence = "evidence/schedule.md"\n', encoding="utf-8")
    proc = grounding(ws, "check")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "evidence/schedule.md is not a folder" in proc.stderr and "does not exist" not in proc.stderr
