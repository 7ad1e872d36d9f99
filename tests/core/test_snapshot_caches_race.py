"""``SnapshotCaches.inherit`` runs in the scan's thread while reader threads (checks, hovers)
still fill the same caches: it must copy them, never iterate them live. debtype2's bench run
saw "dictionary changed size during iteration" fail a scan ("indexing failed; keeping the
previous index"), so an evidence edit was seen only at the next scan.
"""

from __future__ import annotations

import datetime as dt
import threading

from grounding_core.sql_snapshot import SnapshotCaches

DAY = dt.date(2026, 5, 1)


def test_inherit_never_fails_while_readers_add_entries() -> None:
    caches = SnapshotCaches()
    for n in range(2000):  # a populated cache: every inherit walks all of it
        caches.summaries[(("主题", f"字段{n}🎉"), DAY, 5)] = object()  # type: ignore[assignment]
        caches.terms[(f"词{n}", DAY)] = True
        caches.known[(f"句子{n}𠮷", DAY)] = None
    stop = threading.Event()

    def reader() -> None:  # what check threads do: add entries as they answer
        n = 0
        while not stop.is_set():  # a bounded churn: entries come and go, as _put's clear does
            n = (n + 1) % 500
            caches.summaries.pop((("主题", f"新{(n + 250) % 500}"), DAY, 5), None)
            caches.summaries[(("主题", f"新{n}"), DAY, 5)] = object()  # type: ignore[assignment]
            caches.terms[(f"新{n}", DAY)] = False
            caches.known[(f"新句{n}", DAY)] = None
            caches.versions[f"doc{n}"] = {}

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            later = caches.inherit({"doc1"}, {("主题", "字段1🎉")}, {"词1"})
            assert (("主题", "字段1🎉"), DAY, 5) not in later.summaries
            assert (("主题", "字段2🎉"), DAY, 5) in later.summaries
    finally:
        stop.set()
        thread.join(10)
