"""Evidence diagnostics read a file from disk at most up to the scanner's 64 MB limit.

The ranges of findings on an evidence file the index does not hold (or holds in another
content) come from the file's lines on disk (``server.features.evidence._disk_lines``). That
read follows the scanner's rules (``grounding_core.scan.MAX_EVIDENCE_BYTES``, no FIFO, nothing
outside the evidence folder): a file over the limit is never read, and its diagnostics say so.
"""

from __future__ import annotations

from pathlib import Path

from grounding_core.scan import MAX_EVIDENCE_BYTES
from server.features import evidence
from tests.support.inprocess import in_process
from tests.support.recorder import WAIT_SECONDS
from tests.support.workspace import write_files

SCHEDULE = "---\r\ndoc_id: schedule\r\n---\r\n- 活动时间：周四16:30 🎉\r\n- 地点：礼堂𠮷\r\n"


def sparse(path: Path, size: int) -> None:
    """A file of ``size`` zero bytes that takes no disk space (only its end is written)."""
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_a_file_over_the_limit_is_not_read_for_its_lines(tmp_path: Path) -> None:
    sparse(tmp_path / "huge.md", MAX_EVIDENCE_BYTES + 1)
    (tmp_path / "small.md").write_bytes(SCHEDULE.encode())
    assert evidence._disk_lines(tmp_path, "huge.md") is None
    assert evidence._disk_lines(tmp_path, "small.md") == (
        "---", "doc_id: schedule", "---", "- 活动时间：周四16:30 🎉", "- 地点：礼堂𠮷")
    assert evidence._disk_lines(tmp_path, "gone.md") == ()


def test_a_finding_on_a_file_over_the_limit_is_kept_at_line_1_and_says_why() -> None:
    from grounding_core.model import Finding, Span

    placed = evidence._unread((Finding("invalid-front-matter", Span.line(2, 0, 5), "bad doc_id 🎉"),
                               Finding("unreadable-evidence", Span.line(0, 0, 0), "it is 3.0 GB, over …")))
    assert placed[0].message.startswith("bad doc_id 🎉 (")
    assert "64.0 MB limit" in placed[0].message and "line 1" in placed[0].message
    assert placed[0].span == Span.line(0, 0, 0)
    assert placed[1].message == "it is 3.0 GB, over …"  # the scan's own finding already says so


async def test_the_diagnostic_of_a_huge_evidence_file_names_the_limit(tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/schedule.md": SCHEDULE})
    sparse(tmp_path / "evidence" / "大文件.md", MAX_EVIDENCE_BYTES + (1 << 20))
    async with in_process(tmp_path) as here:
        uri = here.uri("evidence/大文件.md")
        await here.recorder.wait_until(lambda: here.recorder.latest(uri) is not None, "diagnostics of 大文件.md")
        published = here.recorder.latest(uri)
        assert published is not None
        [diagnostic] = published.diagnostics
        assert "65.0 MB" in diagnostic.message and "64.0 MB limit" in diagnostic.message
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == (0, 0)


def test_the_line_cache_reads_no_fifo_and_no_file_over_the_limit(tmp_path: Path) -> None:
    """``server.session.FileLines`` (the lines of related locations: other conflicting files, a
    draft finding's evidence line) reads as the scanner reads: an indexed file replaced by a
    FIFO since its scan would block a reader thread forever, and one grown past the limit
    would be read whole.
    """
    import os
    import threading

    from server.session import FileLines

    (tmp_path / "small.md").write_bytes(SCHEDULE.encode())
    os.mkfifo(tmp_path / "管道.md")
    sparse(tmp_path / "huge.md", MAX_EVIDENCE_BYTES + 1)
    lines = FileLines()
    got: list[tuple[str, ...]] = []
    reader = threading.Thread(target=lambda: got.append(lines(str(tmp_path / "管道.md"))), daemon=True)
    reader.start()
    reader.join(WAIT_SECONDS)
    if reader.is_alive():  # release the blocked open so the test run goes on
        os.close(os.open(tmp_path / "管道.md", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(WAIT_SECONDS)
    assert got == [()], "FileLines blocked on a FIFO"
    assert lines(str(tmp_path / "huge.md")) == ()
    assert lines(str(tmp_path / "small.md"))[3] == "- 活动时间：周四16:30 🎉"


async def test_the_line_cache_reads_nothing_a_symlink_points_to_outside_the_evidence(tmp_path: Path) -> None:
    """An indexed evidence file replaced by a symlink out of the workspace before the next scan
    (found by the adversarial pass): the related-location line cache of the workspace's session
    gives it no lines, as the scanner would refuse it (SPEC §2), while the files inside still
    have theirs. Without the containment the outside file's lines were returned.
    """
    outside = tmp_path / "outside"
    write_files(outside, {"secret.md": "- 密码：hunter2 🎉\r\n"})
    ws = tmp_path / "ws"
    write_files(ws, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/schedule.md": SCHEDULE,
                     "evidence/b.md": SCHEDULE.replace("schedule", "b")})
    async with in_process(ws) as here:
        lines = here.session.file_lines
        evidence_root = (ws / "evidence").resolve()
        assert lines.inside == evidence_root
        (ws / "evidence" / "b.md").unlink()
        (ws / "evidence" / "b.md").symlink_to(outside / "secret.md")
        assert lines(str(ws / "evidence" / "b.md")) == ()
        assert lines(str(ws / "evidence" / "schedule.md"))[3] == "- 活动时间：周四16:30 🎉"
