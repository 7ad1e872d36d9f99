"""server/heap.py: the process gives freed heap back to the system (glibc on Linux)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from server import heap

GLIBC = sys.platform.startswith("linux") and heap._LIBC is not None

PROBE = textwrap.dedent("""
    import sys
    from server import heap

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    assert heap.limit_arenas()
    blocks = [bytes(1500) + str(i).encode() for i in range(120_000)]  # ~180 MB through malloc
    kept = blocks[::10]  # every tenth stays: the freed ones sit between them
    del blocks
    before = rss_kib()
    heap.trim()
    after = rss_kib()
    print(before, after, len(kept))
""")


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc_trim and mallopt")
def test_trim_returns_freed_heap_between_live_blocks_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[2])).stdout.split()
    before, after = int(out[0]), int(out[1])
    assert before - after > 100_000, (before, after)  # most of the ~160 MB freed came back


def test_without_glibc_both_calls_say_they_did_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_LIBC", None)
    assert heap.limit_arenas() is False
    assert heap.trim() is False
