"""Regressions from adversarial testing: hostile numbers, context-log paths, odd files."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grounding_core.config import ConfigError, load_config
from grounding_core.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 5, 1)
EVIDENCE = "---\ndoc_id: s\nversion: 1\n---\n- 活动时间：周四16:30\n"
HUGE = "1" + "0" * 5000


def workspace(tmp_path: Path, files: dict[str, str]) -> Workspace:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    ws = Workspace.open(tmp_path)
    ws.scan()
    return ws


def names(ws: Workspace, rel: str) -> list[str]:
    return [f.name for f in ws.check_file(rel, today=TODAY).findings]


@pytest.mark.parametrize("draft, expected", [
    (f'x[^1]\n\n[^1]: s@{HUGE}:1 sha256:aaaaaaaa "x"\n', "malformed-citation"),
    (f'x[^1]\n\n[^1]: s@1:{HUGE} sha256:aaaaaaaa "x"\n', "malformed-citation"),
    (f"---\ncontext: {{units: [\"s@{HUGE}\"]}}\n---\nx\n", "invalid-context"),
    (f"---\ncontext: {{query: x, limit: {HUGE}, reserve: 5}}\n---\nx\n", "invalid-context"),
])
def test_numbers_of_thousands_of_digits_are_findings_not_crashes(
    tmp_path: Path, draft: str, expected: str
) -> None:
    ws = workspace(tmp_path, {"evidence/s.md": EVIDENCE, "answers/a.md": draft})
    assert expected in names(ws, "answers/a.md")


def test_a_json_line_of_thousands_of_digits_is_malformed(tmp_path: Path) -> None:
    claim = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "s@1:5", "doc_id": "s",
             "version": 1, "line": 5, "sha256": "a" * 64, "field": "活动时间"}
    text = json.dumps({"status": "answered", "claims": [claim], "missing_fields": []})
    text = text.replace('"line": 5', f'"line": {HUGE}')
    ws = workspace(tmp_path, {"evidence/s.md": EVIDENCE, "answers/a.answer.json": text})
    assert "malformed-citation" in names(ws, "answers/a.answer.json")


@pytest.mark.parametrize("version", [HUGE, "9223372036854775808"])
def test_an_evidence_version_too_large_is_invalid_front_matter_and_nothing_else_breaks(
    tmp_path: Path, version: str
) -> None:
    ws = workspace(tmp_path, {
        "evidence/big.md": f"---\nversion: {version}\n---\n- 活动时间：x\n",
        "evidence/s.md": EVIDENCE,
    })
    findings = ws.scan().evidence
    assert [f.name for f in findings["big.md"]] == ["invalid-front-matter"]
    assert "s" in ws.store.state.doc_ids()


@pytest.mark.parametrize("log", ["../../etc/passwd", "/etc/passwd", "fifo.json", "a\0b", "evidence"])
def test_a_context_log_outside_the_root_or_not_a_regular_file_is_never_read(tmp_path: Path, log: str) -> None:
    ws = workspace(tmp_path, {
        "evidence/s.md": EVIDENCE,
        "answers/a.md": f"---\ncontext: {{log: {json.dumps(log)}}}\n---\nx\n",
    })
    os.mkfifo(tmp_path / "fifo.json")  # reading it would block forever
    assert ws.read_text(log) is None
    assert "invalid-context" in names(ws, "answers/a.md")


def test_drafts_are_never_discovered_under_the_evidence_root(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {
        "grounding.toml": 'evidence = "."\n',
        "s.md": EVIDENCE,
        "answers/a.md": "x\n",
    })
    assert ws.discover_drafts() == []
    os.mkfifo(tmp_path / "answers" / "p.md")
    assert ws.discover_drafts() == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grounding.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def test_checking_an_evidence_file_as_a_draft_is_a_usage_error(tmp_path: Path) -> None:
    workspace(tmp_path, {"evidence/s.md": EVIDENCE})
    proc = _cli("check", "--root", str(tmp_path), str(tmp_path / "evidence/s.md"))
    assert proc.returncode == 2 and "never drafts" in proc.stderr


def test_a_fifo_draft_path_is_a_usage_error_not_a_hang(tmp_path: Path) -> None:
    workspace(tmp_path, {"evidence/s.md": EVIDENCE})
    (tmp_path / "answers").mkdir()
    os.mkfifo(tmp_path / "answers" / "p.md")
    proc = _cli("check", "--root", str(tmp_path), str(tmp_path / "answers/p.md"))
    assert proc.returncode == 2 and "not a regular file" in proc.stderr
    assert _cli("check", "--root", str(tmp_path)).returncode == 0  # discovery skips it


def test_a_nul_byte_in_a_configured_path_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "grounding.toml").write_text('evidence = "ev\\u0000x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="NUL"):
        load_config(tmp_path)


def test_a_fifo_named_like_evidence_is_unreadable_evidence_and_never_opened(tmp_path: Path) -> None:
    """A named pipe in the evidence folder (found by the adversarial pass: it was skipped
    without a word, also when it replaced an indexed file) is reported as unreadable-evidence
    naming what it is, in a full walk and in a rescan of its path; it is never opened (opening
    a FIFO for reading would block) and the other documents stay indexed.
    """
    ws = workspace(tmp_path, {"evidence/s.md": EVIDENCE, "evidence/管道🎉.md": "- 地点：礼堂\r\n"})
    assert ws.scan().evidence["管道🎉.md"] == []  # indexed first
    (tmp_path / "evidence" / "管道🎉.md").unlink()
    os.mkfifo(tmp_path / "evidence" / "管道🎉.md")
    for result in (ws.scan(paths=["管道🎉.md"]), ws.scan()):
        [finding] = result.evidence["管道🎉.md"]
        assert finding.name == "unreadable-evidence" and "named pipe (FIFO)" in finding.message
    assert "s" in ws.store.state.doc_ids()
    proc = _cli("check", "--root", str(tmp_path), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    [entry] = [e for e in report["evidence"] if e["path"].endswith("管道🎉.md")]
    assert [d["name"] for d in entry["diagnostics"]] == ["unreadable-evidence"]
