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


SETTLE_PROBE = textwrap.dedent("""
    import gc
    import weakref
    from server import heap

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.peer, b.peer = b, a
        return a

    kept = cycle()
    heap.settle(0)
    frozen = gc.get_freeze_count()
    probe = weakref.ref(kept)
    del kept  # now cyclic garbage, but frozen: an ordinary collection does not look at it
    gc.collect()
    skipped = probe() is not None
    found = heap.settle(0)  # unfreezes first: the cycle is collected, never leaked
    print(frozen > 0, skipped, probe() is None, found >= 2, gc.get_freeze_count() > 0,
          heap.settle() == 0)  # within SETTLE_EVERY_S of the last one: only trimmed
""")


def test_settle_freezes_survivors_and_collects_them_once_they_are_garbage() -> None:
    """server.heap.settle: after it, automatic collections skip the long-lived heap (frozen);
    cyclic garbage among frozen objects is collected by the next settle (nothing leaks).
    In a subprocess: freezing is process-wide.
    """
    out = subprocess.run([sys.executable, "-c", SETTLE_PROBE], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[2])).stdout.split()
    assert out == ["True"] * 6, out


FREEZE_PROBE = textwrap.dedent("""
    import gc
    import weakref
    from server import heap

    class Node:
        pass

    a, b = Node(), Node()
    a.peer, b.peer = b, a
    probe = weakref.ref(a)
    heap.freeze()  # no collection: the pair is frozen as it is
    frozen = gc.get_freeze_count()
    del a, b  # cyclic garbage now, among frozen objects
    gc.collect()
    skipped = probe() is not None
    heap.settle(0)  # unfreezes first, then collects it
    print(frozen > 0, skipped, probe() is None)
""")


def test_freeze_takes_the_heap_out_of_automatic_collections_until_the_next_settle() -> None:
    """server.heap.freeze (the evidence refresh, before each chunk): no collection, so nothing
    is collected until :func:`server.heap.settle`, which collects what became garbage meanwhile.
    """
    out = subprocess.run([sys.executable, "-c", FREEZE_PROBE], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[2])).stdout.split()
    assert out == ["True"] * 3, out
