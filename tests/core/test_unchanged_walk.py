"""Full walks that find nothing changed (SPEC §4; docs/decisions.md, "Unchanged full walks").

A scan whose full walk changed nothing stores the walk's digest (``scan.listing_digest``:
every path, stat key and refusal) in ``meta``; the next walk with the same digest skips
loading and comparing every stored stat key. These tests show that the digest is what the
next scan trusts (a forged files row is not looked at while it matches), that every change
SPEC §4 names still changes the digest and is re-read (size, a same-size ``cp -p`` rewrite,
a new, deleted or renamed file, a symlinked folder, an image's sidecar), that any write of a
files row drops the digest, and that the evidence findings answered from it are the ones the
full comparison gives. Names mix CJK, emoji (astral: 𠮷 🎉), NFC and NFD; files are CRLF.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

import pytest
from support import MakeWorkspace, check, errors, sha256, write_files

from grounding_core import scan as scanning
from grounding_core.model import Finding, Span
from grounding_core.store import LISTING_KEY
from grounding_core.workspace import Workspace

NFD_NAME = unicodedata.normalize("NFD", "café-通知.md")
NFC_NAME = unicodedata.normalize("NFC", "café-通知.md")
FILES = {
    "evidence/活动/日程 🎉.md": "---\r\ndoc_id: 日程\r\nversion: 2\r\n---\r\n- 活动时间：周四16:30\r\n",
    "evidence/𠮷野家.md": "主题：开放日\r\n- 地点：三楼报告厅 🎉\r\n",
    f"evidence/{NFD_NAME}": "- 报名：线上\r\n",
    "evidence/notes/plain.md": "- Venue: Hall 3\r\n",
}


def stored_digest(ws: Workspace) -> str | None:
    row = ws.store.backend.reader().execute("SELECT value FROM meta WHERE key = ?", (LISTING_KEY,)).fetchone()
    return None if row is None else str(row[0])


def settled(ws: Workspace) -> Workspace:
    """Scan until a scan changes nothing (the one that stores the digest), at most twice."""
    for _ in range(2):
        result = ws.scan()
        if not result.changed and not result.events:
            break
    return ws


@pytest.fixture
def ws(make_workspace: MakeWorkspace) -> Workspace:
    return settled(make_workspace(FILES))


def test_a_scan_that_changed_nothing_stores_the_digest_of_its_walk(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace(FILES)  # the first scan imported everything: no digest
    assert stored_digest(ws) is None
    again = ws.scan()
    assert again.changed == [] and again.events == []
    seq = ws.store.event_count()
    assert stored_digest(ws) == f"{seq} {scanning.listing_digest(scanning.walk_evidence(ws.config))}"
    assert sorted(again.evidence) == sorted(["活动/日程 🎉.md", "𠮷野家.md", NFD_NAME, "notes/plain.md"])


def test_the_next_walk_with_the_same_digest_does_not_compare_stored_stat_keys(ws: Workspace) -> None:
    # forge a stored stat key behind the digest's back: only a comparison would see it
    with ws.store.backend.write() as conn:
        conn.execute("UPDATE files SET mtime_ns = 1 WHERE path = ?", ("𠮷野家.md",))
    assert ws.scan().changed == []  # answered from the digest
    with ws.store.backend.write() as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (LISTING_KEY,))
    assert ws.scan().changed == ["𠮷野家.md"]  # compared again: the forged key differs
    assert ws.scan().changed == [] and stored_digest(ws) is not None


def test_an_event_appended_since_the_digest_makes_the_next_scan_compare(ws: Workspace) -> None:
    # a process that appends without knowing the digest row (an older Grounding) cannot leave
    # it valid: the row holds the log's length too
    with ws.store.backend.write() as conn:
        conn.execute("UPDATE files SET mtime_ns = 1 WHERE path = ?", ("𠮷野家.md",))
    ws.store.remember("团队", "称呼", "同学们 🎉", approved_by="编辑")
    assert ws.scan().changed == ["𠮷野家.md"]


def _grow(root: Path) -> None:
    with open(root / "evidence/𠮷野家.md", "ab") as f:
        f.write("- 新增：签到 🎉\r\n".encode())


def _same_size_cp_p(root: Path) -> None:
    # a same-size rewrite with the old mtime restored (what cp -p, rsync -a and tar x do):
    # only ctime tells, and it is part of the stat key
    path = root / "evidence/𠮷野家.md"
    before = path.stat()
    data = path.read_bytes().replace("三楼".encode(), "四楼".encode())
    assert len(data) == before.st_size
    other = root / "copy.tmp"
    other.write_bytes(data)
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    shutil.copyfile(other, path)  # same inode, same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    other.unlink()
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


def _new_file(root: Path) -> None:
    write_files(root, {"evidence/活动/新文件 🎉.md": "- 截止：五月一日\r\n"})


def _delete(root: Path) -> None:
    (root / "evidence/notes/plain.md").unlink()


def _rename_nfd_to_nfc(root: Path) -> None:
    (root / "evidence/renamed").mkdir()
    os.rename(root / "evidence" / NFD_NAME, root / "evidence/renamed" / NFC_NAME)


CHANGES = {
    "grown": (_grow, "𠮷野家.md"),
    "same-size cp -p": (_same_size_cp_p, "𠮷野家.md"),
    "new file": (_new_file, "活动/新文件 🎉.md"),
    "deleted": (_delete, None),
    "renamed NFD -> NFC": (_rename_nfd_to_nfc, f"renamed/{NFC_NAME}"),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_every_change_after_a_stored_digest_is_seen(ws: Workspace, change: str) -> None:
    make, read = CHANGES[change]
    before = stored_digest(ws)
    assert before is not None
    make(ws.config.root)
    result = ws.scan()
    assert result.changed == ([read] if read else [])
    if change == "deleted":
        assert "notes/plain.md" not in result.evidence
        assert ws.store.backend.reader().execute(
            "SELECT 1 FROM files WHERE path = 'notes/plain.md'").fetchone() is None
    if change.startswith("renamed"):
        assert NFD_NAME not in result.evidence and f"renamed/{NFC_NAME}" in result.evidence
    assert stored_digest(ws) is None  # the files table changed: the digest went with it
    again = ws.scan()
    assert again.changed == [] and stored_digest(ws) not in (None, before)


def test_a_same_size_rewrite_is_checked_against_its_new_content(ws: Workspace) -> None:
    _same_size_cp_p(ws.config.root)
    ws.scan()
    content = (ws.config.evidence_root / "𠮷野家.md").read_bytes().decode()
    draft = (f"地点在四楼[^1]。\r\n\r\n[^1]: 𠮷野家@2:2 sha256:{sha256(content)[:12]}"
             ' "- 地点：四楼报告厅 🎉"\r\n')
    assert errors(check(ws, "answers/a.md", draft)) == []


def test_a_new_symlinked_folder_is_named_after_a_stored_digest(ws: Workspace) -> None:
    (ws.config.evidence_root / "链接").symlink_to(ws.config.evidence_root / "活动", target_is_directory=True)
    result = ws.scan()
    (note,) = result.evidence["链接"]
    assert note.name == "unreadable-evidence" and "symlinked folder, not followed" in note.message
    assert "活动/日程 🎉.md" in result.evidence and "链接/日程 🎉.md" not in result.evidence
    again = ws.scan()  # answered from the digest, with the stored note
    assert stored_digest(ws) is not None and [f.message for f in again.evidence["链接"]] == [note.message]


def test_an_image_sidecar_change_is_seen_after_a_stored_digest(make_workspace: MakeWorkspace) -> None:
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
    ws = settled(make_workspace({**FILES, "evidence/图/海报.png": png,
                                 "evidence/图/海报.png.yaml": "doc_id: 海报\r\nversion: 1\r\n"}))
    assert stored_digest(ws) is not None
    write_files(ws.config.root, {"evidence/图/海报.png.yaml": "doc_id: 海报\r\nversion: 2\r\n"})
    assert ws.scan().changed == ["图/海报.png"]


def test_findings_answered_from_the_digest_are_the_compared_ones(make_workspace: MakeWorkspace) -> None:
    ws = settled(make_workspace({
        **FILES,
        "evidence/坏的.md": "---\r\ndoc_id: [未闭合\r\n---\r\n- 字段：值\r\n",  # invalid front matter
        "evidence/重复 🎉.md": "---\r\ndoc_id: 日程\r\nversion: 2\r\n---\r\n- 活动时间：周五\r\n",  # same doc_id
    }))
    (ws.config.evidence_root / "断链.md").symlink_to(ws.config.evidence_root / "没有.md")
    ws.scan()
    settled(ws)
    assert stored_digest(ws) is not None
    fast = ws.scan().evidence
    with ws.store.backend.write() as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (LISTING_KEY,))
    compared = ws.scan().evidence
    assert list(fast) == list(compared) and fast == compared
    assert {p for p, fs in fast.items() if fs} >= {"坏的.md", "断链.md"}


def _listing(**changes: object) -> scanning.Listing:
    key = dict(size=10, mtime_ns=1_700_000_000_123_456_789, ctime_ns=1_700_000_000_987_654_321,
               inode=2**63 + 5)  # inodes use all 64 bits on some file systems
    key.update({k: v for k, v in changes.items() if k in key})
    name = str(changes.get("name", "活动/日程 🎉.md"))
    listing = scanning.Listing()
    listing.candidates[name] = scanning.Candidate("/ws/evidence/" + name, scanning.StatKey(**key))  # type: ignore[arg-type]
    listing.candidates["𠮷.md"] = scanning.Candidate("/ws/evidence/𠮷.md", scanning.StatKey(1, 2, 3, 4))
    if "refused" in changes:
        listing.refused["链接"] = Finding("unreadable-evidence", Span(0, 0, 0, 0), str(changes["refused"]))
    return listing


@pytest.mark.parametrize("changes", [
    {"size": 11}, {"mtime_ns": 1_700_000_000_123_456_788}, {"ctime_ns": 1_700_000_000_987_654_322},
    {"inode": 2**63 + 6}, {"name": unicodedata.normalize("NFD", "活动/café.md")}, {"refused": "a note"},
], ids=["size", "mtime", "ctime", "inode", "name", "refused"])
def test_the_digest_changes_with_every_part_of_the_stat_key_and_each_refusal(changes: dict[str, object]) -> None:
    base = scanning.listing_digest(_listing())
    assert scanning.listing_digest(_listing()) == base and len(base) == 64
    assert scanning.listing_digest(_listing(**changes)) != base
    nfc = unicodedata.normalize("NFC", "活动/café.md")
    assert scanning.listing_digest(_listing(name=nfc)) != scanning.listing_digest(
        _listing(name=unicodedata.normalize("NFD", nfc)))
    assert scanning.listing_digest(_listing(refused="a")) != scanning.listing_digest(_listing(refused="b"))


def test_a_file_reached_twice_is_indexed_once_under_the_path_that_sorts_first(tmp_path: Path) -> None:
    # the walk takes a folder's entries in the order the file system lists them (no sort);
    # hard links still resolve to the path that sorts first, wherever the links are
    write_files(tmp_path, {"evidence/乙/原件 🎉.md": "- 地点：三楼\r\n", "answers/外面.md": "- 外\r\n"})
    ev = tmp_path / "evidence"
    os.link(ev / "乙/原件 🎉.md", ev / "乙/0-副本.md")
    os.link(ev / "乙/原件 🎉.md", ev / "甲.md")
    os.link(tmp_path / "answers/外面.md", ev / "乙/外链 𠮷.md")  # the other link is outside evidence
    ws = Workspace.open(tmp_path)
    try:
        listing = scanning.walk_evidence(ws.config)
        assert sorted(listing.candidates) == ["乙/0-副本.md", "乙/外链 𠮷.md"]
        assert listing.candidates["乙/外链 𠮷.md"].key.size == len("- 外\r\n".encode())
        assert sorted(ws.scan().evidence) == ["乙/0-副本.md", "乙/外链 𠮷.md"]
    finally:
        ws.store.close()
