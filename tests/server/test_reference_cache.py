"""The reference lens's draft cache (``server/features/references.py``, :class:`DraftCitations`):
a draft on disk is read and parsed again only when its stat key (SPEC §4: size, mtime, ctime,
inode) changed, a file changed within the last 100 ms is not kept, an open buffer is parsed
again only when its text hash changed, and the cache holds at most ``size`` drafts. Real files
in ``tmp_path``; drafts with CJK, emoji and CRLF. The ``read`` argument is the cache's own
injection point (the server passes ``IndexView.read_text``); the test passes a reader that
records the paths it read.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from grounding_core.model import CitationRef
from grounding_core.scan import StatKey
from server.features.references import DraftCitations

LINE = "- 活动时间：周四16:30 🎉"


def draft(version: int) -> str:
    return (f"活动时间是周四16:30 🎉[^1]。𠮷\r\n\r\n"
            f'[^1]: schedule@{version}:6 sha256:0123456789ab "{LINE}"\r\n')


class Reader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.reads: list[str] = []

    def __call__(self, rel: str) -> str | None:
        self.reads.append(rel)
        return (self.root / rel).read_bytes().decode("utf-8")


def settled(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    time.sleep(0.15)  # older than the 100 ms settle window (scan.SETTLE_NS)


def test_a_draft_on_disk_is_parsed_again_only_when_its_stat_key_changes(tmp_path: Path) -> None:
    cache, read = DraftCitations(), Reader(tmp_path)
    path = tmp_path / "answers" / "a.md"
    settled(path, draft(2))
    first = cache.on_disk(str(path), "answers/a.md", read)
    assert first == ((CitationRef("schedule", 2, 6), LINE),)
    assert cache.on_disk(str(path), "answers/a.md", read) is first
    assert read.reads == ["answers/a.md"]
    settled(path, draft(3))  # same size, new mtime and ctime
    assert cache.on_disk(str(path), "answers/a.md", read) == ((CitationRef("schedule", 3, 6), LINE),)
    assert read.reads == ["answers/a.md"] * 2
    os.utime(path, ns=(0, 0))  # mtime set back (as cp -p does): ctime still changes the key
    cache.on_disk(str(path), "answers/a.md", read)
    assert len(read.reads) == 3
    path.unlink()
    assert cache.on_disk(str(path), "answers/a.md", read) is None


def test_a_file_still_settling_is_read_again(tmp_path: Path) -> None:
    cache, read = DraftCitations(), Reader(tmp_path)
    path = tmp_path / "a.md"
    path.write_bytes(draft(2).encode())
    cache.on_disk(str(path), "a.md", read)
    cache.on_disk(str(path), "a.md", read)
    if not StatKey.of(path.stat()).fresh(time.time_ns()):
        pytest.skip("the machine took longer than the 100 ms settle window between write and read")
    assert read.reads == ["a.md", "a.md"]


def test_an_open_buffer_is_parsed_again_only_when_its_text_changes() -> None:
    cache = DraftCitations()
    one = cache.open("file:///ws/answers/a.md", "h1", draft(2), "answers/a.md")
    assert cache.open("file:///ws/answers/a.md", "h1", "ignored: the hash says unchanged", "answers/a.md") is one
    two = cache.open("file:///ws/answers/a.md", "h2", draft(3), "answers/a.md")
    assert two == ((CitationRef("schedule", 3, 6), LINE),)
    assert len(cache) == 1  # one entry per draft, not per keystroke


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    cache, read = DraftCitations(size=2), Reader(tmp_path)
    for name in ("a.md", "b.md", "c.md"):
        settled(tmp_path / name, draft(2))
        cache.on_disk(str(tmp_path / name), name, read)
    assert len(cache) == 2
    cache.on_disk(str(tmp_path / "a.md"), "a.md", read)  # the least recently used went first
    assert read.reads == ["a.md", "b.md", "c.md", "a.md"]
