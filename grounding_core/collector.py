"""The cyclic garbage collector's settings for a process that runs one command (the CLI).

A check allocates tens of thousands of objects that live until it returns (the rows of the
conflict gate, a key summary's sources, findings): on Debian's 100-citation draft about
47,000. With CPython's default thresholds (700, 10, 10) that is about 80 young collections,
8 middle ones and one full collection that walks everything the imports made too, 27-42 ms
of a first check (BENCHMARKS.md, "Debian first check near its floor"); none of them finds
garbage, because a check makes no cycles. :func:`process_start` is called once, after the
imports, by an entry point that owns its process:

- ``gc.freeze()``: what start-up made (modules, functions, classes: 45,000-70,000 tracked
  objects) moves to the permanent generation, so a full collection never walks it again;
- a young-generation threshold of :data:`YOUNG_THRESHOLD` allocations instead of 700, so a
  check or a scan triggers a collection every 100,000 net allocations, not every 700.
  Cyclic garbage is still collected (at most that many objects wait for it).

A scan by such a process also passes :func:`scan_pause` as its pause hook: a cold index keeps
what it parsed alive for a while (the store's document cache of up to 8 M code points, the
derived rows' batches), and every middle or full collection walked all of it again (at 10k
files 17 collections, 1.6 s of a 24-28 s cold index even with the threshold above; 11 s of
92 s at 30k with the interpreter's defaults: BENCHMARKS.md). At the scan's batch boundaries
the hook collects the young generation once it holds :data:`SCAN_FREEZE_AT` objects and
freezes the survivors: every object is looked at by the collector once (cyclic garbage among
them is still found), then never again.

The language server keeps its own policy (``server/heap.py``: a collection and a freeze after
each burst of work), and library callers (the Python API, tests calling ``main(argv)``
in-process) keep whatever their process chose: only the console script and
``python -m grounding.cli`` call this (docs/decisions.md, "Garbage collector settings of the
CLI").
"""

from __future__ import annotations

import gc
from collections.abc import Callable

__all__ = ["SCAN_FREEZE_AT", "YOUNG_THRESHOLD", "process_start", "scan_pause"]

YOUNG_THRESHOLD = 100_000
"""Net allocations of tracked objects between two young-generation collections."""


def process_start(young: int = YOUNG_THRESHOLD) -> None:
    """Freeze every object start-up made and raise the young generation's threshold to
    ``young`` (the older generations' thresholds stay). Call it once, from the entry point of
    a process that runs one command, after its imports; it costs no collection.
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)


SCAN_FREEZE_AT = 50_000
"""Young objects (net allocations of tracked objects) a scan's batch boundary lets pass before
:func:`scan_pause` collects them and freezes the survivors."""


def scan_pause(freeze_at: int = SCAN_FREEZE_AT) -> Callable[[], None]:
    """The pause hook (``Store.scan(pause=...)``) of a scan in a process that runs one command:
    at a batch boundary (a folder, a file read) with at least ``freeze_at`` young objects,
    collect the young generation (its cyclic garbage, if any, is freed) and freeze what
    survives (``gc.freeze``), so later collections never walk it. Costs one young collection
    per ``freeze_at`` objects; every other call is one ``gc.get_count()``. The language
    server has its own hook (``server.session.Foreground``) and policy (``server/heap.py``).
    """

    def pause() -> None:
        if gc.get_count()[0] >= freeze_at:
            gc.collect(0)
            gc.freeze()

    return pause
