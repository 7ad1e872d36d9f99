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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["ARENAS", "limit_arenas", "trim"]

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
