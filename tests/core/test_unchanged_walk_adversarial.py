"""Trying to make a changed evidence folder look unchanged to the stored walk digest
(``scan:listing``; docs/decisions.md, "Unchanged full walks"): a same-size rewrite with the
mtime restored (``touch -d``), two equal-size files renamed into each other's names, a file
replaced by a hard link to another, a file made unreadable, a file that becomes a symlink,
the parse settings changed in grounding.toml, the evidence folder renamed with grounding.toml
following it (docs/decisions.md, "The evidence folder renamed with grounding.toml"). After
each, the scan's evidence findings and the index's documents must equal those of a fresh
index of the same folder (what no digest can shortcut). CJK/emoji names, CRLF files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import MakeWorkspace, write_files

from grounding_core.store import EVIDENCE_FOLDER_KEY, LISTING_KEY
from grounding_core.workspace import Workspace

A = "甲 🎉.md"
B = "乙𠮷.md"
FILES = {
    f"evidence/{A}": "---\r\ndoc_id: 甲\r\n---\r\n- 地点：三楼报告厅 🎉\r\n",
    f"evidence/{B}": "---\r\ndoc_id: 乙\r\n---\r\n- 地点：四楼报告厅 🎉\r\n",  # same size as A
    "evidence/双/一.md": "---\r\ndoc_id: 双\r\n---\r\n- 时间：周四\r\n",
    "evidence/双/二.md": "---\r\ndoc_id: 双\r\n---\r\n- 时间：周五\r\n",  # a duplicate doc_id
}


def stored_digest(ws: Workspace) -> str | None:
    row = ws.store.backend.reader().execute("SELECT value FROM meta WHERE key = ?", (LISTING_KEY,)).fetchone()
    return None if row is None else str(row[0])


def settled(ws: Workspace) -> Workspace:
    for _ in range(3):
        result = ws.scan()
        if not result.changed and not result.events:
            break
    assert stored_digest(ws) is not None
    return ws


def summary(ws: Workspace, evidence: dict[str, Any]) -> tuple[Any, ...]:
    """What a scan answers, comparable across indexes: findings by path (with their messages
    and related paths) and every document's newest standing version (path, text).
    """
    found = {path: sorted((f.name, f.message, tuple((r.path, r.line) for r in f.related)) for f in fs)
             for path, fs in evidence.items()}
    snapshot = ws.store.snapshot()
    texts = {}
    for doc_id in snapshot.doc_ids():  # the newest version still standing (numbers differ by history)
        standing = [r for _, r in sorted(snapshot.versions(doc_id).items()) if not r.revoked]
        if standing:
            texts[doc_id] = (standing[-1].path, snapshot.document(standing[-1]).text)
    return found, texts


def fresh(root: Path, tmp_path: Path, **overrides: Any) -> tuple[Any, ...]:
    ws = Workspace.open(root, index=str(tmp_path / "fresh.sqlite"), **overrides)
    try:
        return summary(ws, ws.scan().evidence)
    finally:
        ws.store.close()


def _touch_d(root: Path) -> None:
    path = root / "evidence" / A
    before = path.stat()
    path.write_bytes(path.read_bytes().replace("三楼".encode(), "五楼".encode()))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -d "the old time"
    assert path.stat().st_size == before.st_size


def _swap(root: Path) -> None:
    a, b, tmp = root / "evidence" / A, root / "evidence" / B, root / "evidence" / "swap.tmp"
    assert a.stat().st_size == b.stat().st_size
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


def _hard_link(root: Path) -> None:
    b = root / "evidence" / B
    b.unlink()
    os.link(root / "evidence" / A, b)


def _unreadable(root: Path) -> None:
    os.chmod(root / "evidence" / A, 0)


def _symlink(root: Path) -> None:
    b = root / "evidence" / B
    b.unlink()
    os.symlink(root / "evidence" / A, b)


CHANGES = {"touch -d after a same-size write": _touch_d, "two files swap names": _swap,
           "replaced by a hard link": _hard_link, "made unreadable": _unreadable,
           "becomes a symlink": _symlink}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_changed_folder_after_a_stored_digest_answers_as_a_fresh_index(
        change: str, make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    if change == "made unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    ws = settled(make_workspace(FILES))
    CHANGES[change](ws.config.root)
    try:
        result = ws.scan()
        assert result.changed or result.evidence != {}
        assert summary(ws, result.evidence) == fresh(ws.config.root, tmp_path)
        again = ws.scan()  # settles: the next scan, digest or not, answers the same
        assert summary(ws, again.evidence) == fresh(ws.config.root, tmp_path / "again")
    finally:
        os.chmod(ws.config.root / "evidence" / A, 0o644)


def test_other_field_separators_in_grounding_toml_do_not_reuse_the_digest(
        make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws = settled(make_workspace({**FILES, "evidence/冒号.md": "- 地点: 三楼 🎉\r\n"}))
    ws.store.close()
    again = Workspace.open(ws.config.root, field_separators=["：", ":"])
    try:
        result = again.scan()
        assert summary(again, result.evidence) == fresh(ws.config.root, tmp_path, field_separators=["：", ":"])
    finally:
        again.store.close()


def test_the_evidence_folder_renamed_with_grounding_toml_answers_as_a_fresh_index(
        make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws = settled(make_workspace(FILES))
    root = ws.config.root
    ws.store.close()
    os.rename(root / "evidence", root / "资料")
    (root / "grounding.toml").write_text('evidence = "资料"\n', encoding="utf-8")
    again = Workspace.open(root)
    try:
        result = again.scan()
        assert summary(again, result.evidence) == fresh(root, tmp_path)
    finally:
        again.store.close()


def test_two_workspaces_on_one_index_see_their_own_folders(tmp_path: Path,
                                                           store_location: Callable[[Path, str], str]) -> None:
    # one SQLite file, or (GROUNDING_TEST_BACKEND=postgres) one PostgreSQL schema shared by two
    # roots, as two machines share a team index
    shared = store_location(tmp_path, "shared")
    roots = []
    for name, place in (("一", "三楼"), ("二", "四楼")):
        root = tmp_path / name
        write_files(root, {k: v.replace("三楼", place) for k, v in FILES.items()})
        roots.append(root)
    for _ in range(2):
        for root in roots:
            ws = Workspace.open(root, index=str(shared))
            try:
                result = ws.scan()
                assert summary(ws, result.evidence) == fresh(root, tmp_path / f"fresh-{root.name}")
            finally:
                ws.store.close()


def test_copying_the_folder_over_itself_with_cp_a_is_seen(make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws = settled(make_workspace(FILES))
    root = ws.config.root
    copy = tmp_path / "copy"
    shutil.copytree(root / "evidence", copy)
    (copy / A).write_bytes((copy / A).read_bytes().replace("三楼".encode(), "六楼".encode()))
    shutil.rmtree(root / "evidence")
    shutil.copytree(copy, root / "evidence", copy_function=shutil.copy2)
    result = ws.scan()
    assert summary(ws, result.evidence) == fresh(root, tmp_path / "f")


def test_an_index_without_the_evidence_folder_row_records_it_without_a_full_reconcile(
        make_workspace: MakeWorkspace) -> None:
    ws = settled(make_workspace(FILES))
    with ws.store.backend.write() as conn:  # as an index of an older Grounding has it
        conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (EVIDENCE_FOLDER_KEY, LISTING_KEY))
    result = ws.scan()
    reader = ws.store.backend.reader()
    assert reader.execute("SELECT value FROM meta WHERE key = ?", (EVIDENCE_FOLDER_KEY,)).fetchone()[0] == "evidence"
    # a full reconcile would have kept the scan from storing its walk's digest
    assert stored_digest(ws) is not None and not result.changed and not result.events
