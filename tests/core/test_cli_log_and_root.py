"""``grounding log`` and finding the workspace root upward (SPEC §9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import write_files
from test_cli import SCHEDULE_V2, SCHEDULE_V3, definition, draft, run

from grounding_core.config import find_workspace_root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "团队 ws 🎉"
    write_files(root, {
        "grounding.toml": 'evidence = "evidence"\n',
        "evidence/schedule.md": SCHEDULE_V2,
        "evidence/other.md": "- 地点：主楼\r\n",
        "answers/deep/ok.md": draft(definition(2, 6, SCHEDULE_V2)),
    })
    return root


def test_log_lists_every_event_with_seq_kind_id_and_path(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "index", "--root", workspace, "--format", "json")
    code, out, _ = run(capsys, "log", "--root", workspace)
    assert code == 0
    lines = out.splitlines()
    assert any("import  schedule@2 sha256:" in line and line.endswith(" schedule.md") for line in lines)
    assert lines[-1].startswith("2 event(s)")


def test_log_json_follows_a_version_bump_and_a_deletion(workspace: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "index", "--root", workspace, "--format", "json")
    (workspace / "evidence/schedule.md").write_text(SCHEDULE_V3, encoding="utf-8", newline="")
    (workspace / "evidence/other.md").unlink()
    run(capsys, "index", "--root", workspace, "--format", "json")
    code, out, _ = run(capsys, "log", "--root", workspace, "--format", "json")
    assert code == 0
    events = json.loads(out)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert sorted((e["kind"], e["doc_id"], e["version"]) for e in events[2:]) == [
        ("import", "schedule", 3), ("revoke", "other", 1), ("revoke", "schedule", 2)], events
    revoke = next(e for e in events if e["kind"] == "revoke" and e["doc_id"] == "other")
    assert revoke["reason"] == "deleted" and revoke["recorded_at"].endswith("+00:00")
    code, out, _ = run(capsys, "log", "--root", workspace, "--doc", "schedule", "--format", "json")
    assert {e["doc_id"] for e in json.loads(out)} == {"schedule"}
    # the seq printed is the N that --at takes: before the bump, the draft is not stale
    bump = next(e["seq"] for e in events if e["version"] == 3)
    code, out, _ = run(capsys, "check", "--root", workspace, "--at", str(bump - 1), "--format", "json")
    assert "stale-citation" not in {d["name"] for d in json.loads(out)["drafts"][0]["diagnostics"]}
    code, out, _ = run(capsys, "check", "--root", workspace, "--at", str(bump), "--format", "json")
    assert "stale-citation" in {d["name"] for d in json.loads(out)["drafts"][0]["diagnostics"]}


def test_the_root_is_found_upward_like_git(workspace: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(workspace / "answers" / "deep")
    code, out, err = run(capsys, "check", "--format", "json")
    assert code == 0, err
    assert [d["path"] for d in json.loads(out)["drafts"]] == ["answers/deep/ok.md"]
    # a path relative to the working directory still names the draft
    code, out, _ = run(capsys, "check", "ok.md", "--format", "json")
    assert [d["path"] for d in json.loads(out)["drafts"]] == ["answers/deep/ok.md"]


def test_a_pyproject_with_tool_grounding_marks_the_root(tmp_path: Path) -> None:
    write_files(tmp_path, {"pyproject.toml": "[tool.grounding]\nstrict = true\n", "a/b/x.md": "x\n",
                           "a/pyproject.toml": "[project]\nname = 'other'\n"})
    assert find_workspace_root(tmp_path / "a" / "b") == tmp_path.resolve()


def test_without_any_config_the_working_directory_is_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert find_workspace_root(tmp_path / "sub") in {(tmp_path / "sub").resolve()} | {
        p for p in (tmp_path / "sub").resolve().parents if (p / "grounding.toml").is_file()}


def test_summary_leads_with_status_and_counts_and_explains_a_vacuous_coverage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(tmp_path, {
        "evidence/schedule.md": SCHEDULE_V2,
        "answers/a.md": "---\nfields: [报名截止时间]\ncontext: {units: [\"schedule@2\"]}\n---\n没有可引用的内容。\n",
    })
    code, out, _ = run(capsys, "check", "--root", tmp_path)
    line = next(x for x in out.splitlines() if x.startswith("answers/a.md: "))
    assert line.startswith("answers/a.md: abstain (1 warning(s)); required [报名截止时间]")
    assert line.endswith("coverage 1.00 only because no active line carries a missing field")
