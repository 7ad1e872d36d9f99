"""How the server's process holds memory it no longer uses (glibc malloc on Linux).

Python frees objects to its allocator, and CPython's allocator frees them to malloc; glibc
keeps freed memory in the process (per thread arena, up to eight per core) until told to
give it back. The server's worker threads each touch their own arena, so after the first
evidence refresh or a storm of re-indexed files the resident set stays at its peak though
the heap is mostly free. Two calls bound that:

- :func:`limit_arenas` (at start, before any thread): at most :data:`ARENAS` malloc arenas;
- :func:`trim` (after a burst of work, in a worker thread): ``malloc_trim(0)`` returns the
  free pages at the top and inside every arena to the system.

Both do nothing where glibc is not the C library (macOS, Windows, musl): they are never
needed for correctness.

The cyclic garbage collector is the third: the server keeps a large, long-lived heap (the
document cache's line tuples, converted related locations, key summaries), and every
automatic full collection walks all of it while holding the interpreter lock: 96-139 ms each
at 10k files, 7 in a bench run, landing on keystrokes (they collected 0-42 objects).
:func:`settle` (after the same bursts, when no foreground job runs) collects once and then
freezes the survivors (``gc.freeze``), so automatic collections see only what was allocated
since; the next :func:`settle` unfreezes first, so cyclic garbage among earlier objects is
collected then, never leaked. During a long burst (the first evidence refresh of Debian's
copyright files: 15 s, with 19 automatic full collections of 70-520 ms each in one bench run)
:func:`freeze` at the burst's unit boundaries does the freezing part alone, at no cost, so the
automatic full collections that land on keystrokes walk only what the last unit allocated.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
import time

__all__ = ["ARENAS", "freeze", "limit_arenas", "settle", "trim"]

logger = logging.getLogger(__name__)

ARENAS = 2
"""malloc arenas the process may use (glibc's default is 8 per core)."""
_M_ARENA_MAX = -8  # mallopt parameter (glibc malloc.h)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _libc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``arenas``; True when the C library took it."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_ARENA_MAX, arenas))


def trim() -> bool:
    """Give freed heap pages back to the system; True when some were returned."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


SETTLE_EVERY_S = 10.0
"""At most one full collection per this many seconds (a storm refreshes evidence many times)."""
_settled_at: float | None = None


def settle(min_interval_s: float = SETTLE_EVERY_S) -> int:
    """Collect cyclic garbage over the whole heap once (frozen objects included), freeze what
    survives (automatic collections then skip it), and give free pages back (:func:`trim`).
    Within ``min_interval_s`` seconds of the last settle only :func:`trim` runs. Returns the
    number of unreachable objects found (0 when only trimmed). Call it from a worker thread
    after a burst of work; it holds the interpreter lock for one full collection.
    """
    global _settled_at
    now = time.monotonic()
    if _settled_at is not None and now - _settled_at < min_interval_s:
        trim()
        return 0
    _settled_at = now
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    trim()
    return found


def freeze() -> None:
    """Freeze every object the collector tracks now (``gc.freeze``; no collection, O(1)):
    automatic full collections then skip them. Cyclic garbage among them is collected at the
    next :func:`settle` (which unfreezes first). Call it at the unit boundaries of a burst of
    work that builds a large heap (the evidence refresh, before each chunk).
    """
    gc.freeze()
