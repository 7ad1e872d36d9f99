"""The cyclic garbage collector's settings for a process that runs one command (the CLI), and
during a scan's write in any process (:func:`bulk_write`).

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

Every scan's write, in any process, runs inside :func:`bulk_write` (``Store.scan``): the
automatic collections are off while the scan's transaction is open, and the scan collects the
young and middle generations itself at the end of each batch of derived rows, once the
batch's rows are released (``Deriver.flush``: :meth:`BulkWrite.batch`), and at an event
boundary once :data:`BULK_YOUNG` tracked objects were allocated without one
(:meth:`BulkWrite.step`). So what a scan keeps (the few documents it caches) is looked at once, the
batch's row tuples never, and no full collection walks the whole heap during the scan: the
10k cold index with the interpreter's defaults made 17 full collections, 1.4 s of 1.9-2.0 s
of collector time; now 0.3 s (BENCHMARKS.md, docs/decisions.md "The collector during a
scan's write"). Cyclic garbage (a scan makes none; another thread's) waits at most one batch
or that many allocations. The process's own setting is restored when the write ends: the
automatic collector is on again if it was on before, once every overlapping bulk write in
the process has ended (two stores scanning in two threads; the one piece of module state
here, since the collector is the process's); a process that had switched it off keeps it
off and gets no collections from the scan.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["BULK_YOUNG", "SCAN_FREEZE_AT", "YOUNG_THRESHOLD", "BulkWrite", "bulk_write", "process_start",
           "scan_pause"]

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


BULK_YOUNG = 250_000
"""Net allocations of tracked objects after which a bulk write collects at an event boundary
even when no batch ended (a cold index's batch allocates about 150,000: its collections are
those at the batches' ends)."""


class _Paused:
    """The process's count of open bulk writes and what to restore when the last one ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.restore = False


_PAUSED = _Paused()
"""The one module-level state of the package: the cyclic collector is the process's, so two
stores scanning in two threads must agree on when it is switched back on."""


class BulkWrite:
    """One open bulk write (:func:`bulk_write`); :meth:`step` at its event boundaries."""

    __slots__ = ("active", "young")

    def __init__(self, active: bool, young: int) -> None:
        self.active = active
        """True when this write switched the automatic collector off (it was on)."""
        self.young = young

    def batch(self) -> None:
        """At the end of a batch of derived rows, once the batch's rows are released: collect
        the young and middle generations (what the batch left alive moves to the oldest
        generation, which no collection walks until the write ends). Does nothing when the
        process had switched the automatic collector off itself (its choice is kept).
        """
        if self.active:
            gc.collect(1)

    def step(self) -> None:
        """At an event boundary: :meth:`batch` once ``young`` tracked objects were allocated
        since the last collection (a scan whose events derive few rows: no batch ends).
        """
        if self.active and gc.get_count()[0] >= self.young:
            gc.collect(1)


@contextmanager
def bulk_write(young: int = BULK_YOUNG) -> Iterator[BulkWrite]:
    """The automatic cyclic collector off for a bulk write (a scan's transaction), with the
    write's own collections at its :meth:`BulkWrite.step` calls; restored on exit (on again
    when it was on before this write and no other bulk write of the process is still open).
    A process that had switched the collector off gets an inactive :class:`BulkWrite`.
    """
    with _PAUSED.lock:
        if _PAUSED.depth == 0:
            _PAUSED.restore = gc.isenabled()
            gc.disable()
        _PAUSED.depth += 1
        write = BulkWrite(_PAUSED.restore, young)
    try:
        yield write
    finally:
        with _PAUSED.lock:
            _PAUSED.depth -= 1
            if _PAUSED.depth == 0 and _PAUSED.restore:
                gc.enable()
