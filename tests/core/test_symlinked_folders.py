"""A symlinked folder in the evidence folder is named, never skipped silently (SPEC §2:
symlinked folders are not followed; docs/decisions.md, "Evidence").

A link to a folder inside the evidence folder is an information note (its files are indexed
under their own paths); one to a folder elsewhere in the workspace or outside it is an
``unreadable-evidence`` warning, and nothing in it is read. A full walk and a watcher's
paths name the link alike, and removing the link removes the note. Evidence is CJK with
emoji and CRLF.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from support import MakeWorkspace, only

from grounding_core.model import Finding, Severity
from grounding_core.workspace import Workspace

REAL = "主题：开放日\r\n- 地点：二楼 🎉\r\n"
ELSEWHERE = "主题：开放日\r\n- 地点：三楼 𠮷\r\n"


def _links(ws: Workspace, outside: Path) -> None:
    ev = ws.config.evidence_root
    (ev / "同一处").symlink_to(ev / "real", target_is_directory=True)
    (ev / "linked").symlink_to(ws.config.root / "elsewhere", target_is_directory=True)
    (ev / "outside").symlink_to(outside, target_is_directory=True)
    (ev / "folder.md").symlink_to("real", target_is_directory=True)  # named like evidence


def _build(make_workspace: MakeWorkspace, tmp_path: Path) -> tuple[Workspace, Path]:
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "secret.md").write_text("- 地点：四楼\n", encoding="utf-8")
    ws = make_workspace({"evidence/real/a.md": REAL, "elsewhere/b.md": ELSEWHERE}, scan=False)
    _links(ws, outside)
    return ws, outside


def _assert_named(evidence: Mapping[str, Sequence[Finding]]) -> None:
    inside = only(evidence["同一处"], "unreadable-evidence")
    assert inside.effective_severity is Severity.INFORMATION
    assert "symlinked folder, not followed" in inside.message and "evidence/real/" in inside.message
    assert only(evidence["folder.md"], "unreadable-evidence").effective_severity is Severity.INFORMATION
    linked = only(evidence["linked"], "unreadable-evidence")
    assert linked.effective_severity is Severity.WARNING
    assert "elsewhere/, outside the evidence folder, so its files were not read" in linked.message
    assert "--evidence" in linked.hint
    out = only(evidence["outside"], "unreadable-evidence")
    assert out.effective_severity is Severity.WARNING
    assert "outside the workspace; refused, nothing in it was read" in out.message


def test_a_full_walk_names_each_symlinked_folder(make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws, _ = _build(make_workspace, tmp_path)
    scan = ws.scan()
    assert scan.state.doc_ids() == ["real/a"]  # nothing followed, nothing read twice
    _assert_named(scan.evidence)
    assert ws.store.evidence_findings()["linked"][0].effective_severity is Severity.WARNING  # kept as stored
    ws.store.close()
    reopened = Workspace.open(ws.config.root)
    try:
        _assert_named(reopened.store.evidence_findings())  # the severity survives a reopen
        assert reopened.scan().changed == []
    finally:
        reopened.store.close()


def test_watcher_paths_name_a_new_link_and_drop_a_removed_one(make_workspace: MakeWorkspace,
                                                               tmp_path: Path) -> None:
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    ws = make_workspace({"evidence/real/a.md": REAL, "elsewhere/b.md": ELSEWHERE})
    assert ws.store.evidence_findings().get("linked") is None
    _links(ws, outside)
    scan = ws.scan(paths=["同一处", "linked", "outside", "folder.md"])
    _assert_named(scan.evidence)
    (ws.config.evidence_root / "linked").unlink()
    ws.scan(paths=["linked"])
    assert "linked" not in ws.store.evidence_findings()
    (ws.config.evidence_root / "outside").unlink()
    ws.scan()  # a full walk reconciles too
    assert set(ws.store.evidence_findings()) == {"real/a.md", "同一处", "folder.md"}


def test_grounding_check_prints_the_note(make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws, _ = _build(make_workspace, tmp_path)
    ws.store.close()  # on a shared (PostgreSQL) index an open store stays the writer: the CLI's scan must run
    out = subprocess.run([sys.executable, "-m", "grounding.cli", "check", "--root", str(ws.config.root)],
                         capture_output=True, text=True, encoding="utf-8", check=False)
    assert out.returncode == 0, out.stderr
    assert ("evidence/linked:1:1: warning GR201 unreadable-evidence: symlinked folder, not followed"
            in out.stdout)
    assert "evidence/同一处:1:1: information GR201" in out.stdout
    assert "2 warning(s), 2 information" in out.stdout
