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

The language server keeps its own policy (``server/heap.py``: a collection and a freeze after
each burst of work), and library callers (the Python API, tests calling ``main(argv)``
in-process) keep whatever their process chose: only the console script and
``python -m grounding.cli`` call this (docs/decisions.md, "Garbage collector settings of the
CLI").
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "process_start"]

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
