"""Key summaries kept at write time (``key_values``, ``dated_lines``; SPEC §7.4, issue 10).

The conflict gate's summary of a key (each normalised value with its count and first sources
by (doc_id, version, line)) is kept per value in the events' transaction for the head of the
log and the undated contents; a snapshot the head answers reads one row per value and the
key's dated lines live, any other reads ``field_lines``. These tests drive real scans of a
real evidence folder (SQLite, or PostgreSQL under ``GROUNDING_TEST_BACKEND=postgres``) and
check, after each change, that:

- the kept summary equals the one read from every active line (``_lines_summary``) and the
  in-memory oracle replaying the same events from scratch, for several dates and sizes;
- the head really answers from ``key_values`` (its rows are the values expected), and an
  older ``replay(n)`` falls back to ``field_lines`` and still answers exactly; keys of a
  subject are not kept (``derived.KEPT_SQL``) and read from ``field_lines``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grounding_core.config import load_config
from grounding_core.derived import KEPT_SOURCES, fingerprint
from grounding_core.index import ConflictKey, IndexSnapshot, ParseSettings
from grounding_core.sql_snapshot import SqlSnapshot
from grounding_core.state import IndexState, MemorySnapshot, ParseCache
from grounding_core.store import Store

TODAY = dt.date(2026, 1, 1)
LATER = dt.date(2026, 7, 1)
CONFIG = 'field_separators = ["：", ":"]\nmeta_fields = ["来源"]\nsubject_fields = ["主题"]\n'
TIME: ConflictKey = (None, "活动时间")


class Folder:
    """An evidence folder and a store scanning it after every change."""

    def __init__(self, root: Path, location: str) -> None:
        self.root = root
        (root / "evidence").mkdir(parents=True)
        (root / "grounding.toml").write_text(CONFIG, encoding="utf-8")
        self.config = load_config(root)
        self.settings = ParseSettings(self.config.field_separators, self.config.meta_fields,
                                      self.config.subject_fields, self.config.image_language)
        self.store = Store(location, self.settings)

    def write(self, files: dict[str, str]) -> SqlSnapshot:
        for rel, text in files.items():
            path = self.root / "evidence" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
        return self.scan()

    def delete(self, *rels: str) -> SqlSnapshot:
        for rel in rels:
            (self.root / "evidence" / rel).unlink()
        return self.scan()

    def scan(self) -> SqlSnapshot:
        self.store.scan(self.config)
        snapshot = self.store.snapshot()
        assert isinstance(snapshot, SqlSnapshot)
        return snapshot

    def oracle(self, n: int | None = None) -> IndexSnapshot:
        events = self.store.events()
        return MemorySnapshot(IndexState(cache=ParseCache(self.settings)).apply(events[:n]))

    def rows(self) -> list[tuple[Any, ...]]:
        """``key_values`` as (field, subject, norm, lines, doc_ids of the first sources)."""
        rows = self.store.backend.reader().execute(
            "SELECT field, subject, norm, lines, sources FROM key_values").fetchall()
        return sorted((str(r[0]), str(r[1]), str(r[2]), int(r[3]), [s[0] for s in json.loads(r[4])])
                      for r in rows)


@pytest.fixture
def folder(tmp_path: Path, store_location: Callable[[Path, str], str]) -> Any:
    made = Folder(tmp_path / "ws", store_location(tmp_path, "index"))
    yield made
    made.store.close()


def kept(snapshot: SqlSnapshot, key: ConflictKey, today: dt.date, per_value: int) -> Any:
    """The summary read from ``key_values`` (None when the head does not answer ``snapshot``)."""
    stored = snapshot._key(key)
    assert stored is not None
    conn = snapshot._conn()
    with snapshot._source.backend.read(conn):
        if not snapshot._head_answers(conn):
            return None
        return snapshot._kept_summary(conn, key, stored, today, per_value)


def agrees(snapshot: SqlSnapshot, oracle: IndexSnapshot, key: ConflictKey, *, head: bool,
           days: tuple[dt.date, ...] = (TODAY, LATER)) -> None:
    """The kept summary (when ``head``; else: none) equals the lines' and the oracle's."""
    stored = snapshot._key(key)
    assert stored is not None
    for today in days:
        for per_value in (0, 1, 2, 5, KEPT_SOURCES):
            lines = snapshot._lines_summary(key, stored, today, per_value)
            from_table = kept(snapshot, key, today, per_value)
            if head:
                assert from_table == lines, (key, today, per_value)
            else:
                assert from_table is None
            fresh = SqlSnapshot(snapshot._source, snapshot.seq)
            assert fresh.key_summary(key, today, (), per_value) == oracle.key_summary(key, today, (), per_value)
        cited = [kl.identity for kl in oracle.key_lines(key, today)[-1:]]
        assert SqlSnapshot(snapshot._source, snapshot.seq).key_summary(key, today, cited) == \
            oracle.key_summary(key, today, cited)


def values(snapshot: IndexSnapshot, key: ConflictKey, today: dt.date = TODAY) -> list[tuple[str, str, int, list[str]]]:
    summary = snapshot.key_summary(key, today)
    return [(g.normalized, g.spelled, g.count, [f"{kl.doc_id}@{kl.version}:{kl.line}" for kl in g.sources])
            for g in summary.values]


def test_full_width_digits_and_colons_agree_with_ascii_in_the_kept_values(folder: Folder) -> None:
    snapshot = folder.write({
        "a.md": "- 活动时间：周四16:30\n",
        "b.md": "1. 活动时间：周四１６：３０\r\n",  # full-width digits and colon: NFKC folds them
        "c.md": "活动时间：周四 16:30\n",
        "d.md": "活动时间：周三16:30 🎉\n",
        "e.md": "---\nsubject: 𠮷野家\n---\n活动时间：周五\n",
    })
    assert values(snapshot, TIME) == [
        ("周四16:30", "周四16:30", 3, ["a@1:1", "b@1:1", "c@1:1"]),
        ("周三16:30🎉", "周三16:30 🎉", 1, ["d@1:1"]),
    ]
    assert values(snapshot, ("𠮷野家", "活动时间")) == [("周五", "周五", 1, ["e@1:4"])]
    # keys without a subject are kept; a subject's keys (scoped to its documents) are read live
    assert folder.rows() == [("活动时间", "", "周三16:30🎉", 1, ["d"]),
                             ("活动时间", "", "周四16:30", 3, ["a", "b", "c"])]
    agrees(snapshot, folder.oracle(), TIME, head=True)
    subject_key: ConflictKey = ("𠮷野家", "活动时间")
    assert kept(snapshot, subject_key, TODAY, 5).values == ()  # no rows: the summary is the lines'
    assert SqlSnapshot(folder.store, snapshot.seq).key_summary(subject_key, TODAY) == \
        folder.oracle().key_summary(subject_key, TODAY)
    assert snapshot.key_summary(TIME, TODAY).values[0].sources[1].value == "周四１６：３０"


def test_revocation_supersession_and_deletion_update_the_kept_values(folder: Folder) -> None:
    first = folder.write({"a.md": "活动时间：周四16:30\n", "b.md": "活动时间：周四１６:３０\n",
                          "c.md": "---\nversion: 1\n---\n活动时间：周三\n"})
    before = first.seq
    revoked = folder.write({"c.md": "---\nversion: 1\nstatus: revoked\n---\n活动时间：周三\n"})
    assert values(revoked, TIME) == [("周四16:30", "周四16:30", 2, ["a@1:1", "b@1:1"])]
    agrees(revoked, folder.oracle(), TIME, head=True)
    superseded = folder.write({"c.md": "---\nversion: 2\n---\n活动时间：周四 16:30\n",
                               "a.md": "活动时间：周四16:30\n备注：改过\n"})
    assert values(superseded, TIME) == [("周四16:30", "周四16:30", 3, ["a@2:1", "b@1:1", "c@2:4"])]
    assert folder.rows() == [("备注", "", "改过", 1, ["a"]), ("活动时间", "", "周四16:30", 3, ["a", "b", "c"])]
    agrees(superseded, folder.oracle(), TIME, head=True)
    # an older replay(n) is not the head's: read from field_lines, exactly as the log says
    old = folder.store.replay(before)
    assert isinstance(old, SqlSnapshot)
    assert values(old, TIME) == [("周四16:30", "周四16:30", 2, ["a@1:1", "b@1:1"]), ("周三", "周三", 1, ["c@1:4"])]
    agrees(old, folder.oracle(before), TIME, head=False)
    deleted = folder.delete("a.md", "b.md")
    assert values(deleted, TIME) == [("周四16:30", "周四 16:30", 1, ["c@2:4"])]
    assert folder.rows() == [("活动时间", "", "周四16:30", 1, ["c"])]
    agrees(deleted, folder.oracle(), TIME, head=True)
    gone = folder.delete("c.md")
    assert values(gone, TIME) == [] and folder.rows() == []
    agrees(gone, folder.oracle(), TIME, head=True)


def test_a_dated_source_is_read_live_for_the_day_asked(folder: Folder) -> None:
    snapshot = folder.write({
        "a.md": "活动时间：周四16:30\n",
        "later.md": "---\neffective_from: 2026-06-01\n---\n活动时间：周四１６:３０\n",
        "old.md": "---\neffective_until: 2025-12-31\n---\n活动时间：周一\n",
        "z.md": "---\neffective_from: 2026-06-01\n---\n活动时间：周五\n",
    })
    assert folder.rows() == [("活动时间", "", "周四16:30", 1, ["a"])]  # dated lines are never kept
    assert values(snapshot, TIME, TODAY) == [("周四16:30", "周四16:30", 1, ["a@1:1"])]
    assert values(snapshot, TIME, LATER) == [("周四16:30", "周四16:30", 2, ["a@1:1", "later@1:4"]),
                                             ("周五", "周五", 1, ["z@1:4"])]
    assert values(snapshot, TIME, dt.date(2025, 1, 1)) == [("周四16:30", "周四16:30", 1, ["a@1:1"]),
                                                           ("周一", "周一", 1, ["old@1:4"])]
    agrees(snapshot, folder.oracle(), TIME, head=True, days=(dt.date(2025, 1, 1), TODAY, LATER))
    # a dated source first in (doc_id, version, line) order gives its value's first spelling
    snapshot = folder.write({"0.md": "---\neffective_from: 2026-06-01\n---\n活动时间：周四 16:30\n"})
    assert values(snapshot, TIME, LATER)[0] == ("周四16:30", "周四 16:30", 3, ["0@1:4", "a@1:1", "later@1:4"])
    agrees(snapshot, folder.oracle(), TIME, head=True, days=(TODAY, LATER))


def test_a_value_that_loses_its_first_sources_reads_the_next_ones_again(folder: Folder) -> None:
    snapshot = folder.write({f"d{i}.md": f"- 地点：南广场{'。' if i % 2 else ''}\n" for i in range(10)})
    key: ConflictKey = (None, "地点")
    assert folder.rows() == [("地点", "", "南广场", 5, ["d0", "d2", "d4", "d6", "d8"]),
                             ("地点", "", "南广场。", 5, ["d1", "d3", "d5", "d7", "d9"])]
    snapshot = folder.write({f"d{i}.md": "- 地点：南广场\n" for i in range(1, 10, 2)})
    assert folder.rows() == [("地点", "", "南广场", 10, [f"d{i}" for i in range(KEPT_SOURCES)])]
    snapshot = folder.delete("d0.md", "d1.md", "d2.md")
    assert folder.rows() == [("地点", "", "南广场", 7, [f"d{i}" for i in range(3, 3 + KEPT_SOURCES)])]
    assert values(snapshot, key)[0][2:] == (7, ["d3@2:1", "d4@1:1", "d5@2:1", "d6@1:1", "d7@2:1"])
    agrees(snapshot, folder.oracle(), key, head=True)


def test_an_index_of_the_previous_definition_is_rebuilt_with_kept_summaries(folder: Folder, tmp_path: Path) -> None:
    folder.write({"a.md": "活动时间：周四16:30\n", "b.md": "活动时间：周三\n",
                  "c.md": "---\neffective_from: 2025-01-01\n---\n活动时间：周四１６:３０\n"})
    expected = folder.rows()
    location = folder.store.path
    stamped = {**json.loads(fingerprint(folder.settings)), "definition": 6}
    with folder.store.backend.write() as conn:  # as definition 6 left it: no kept summaries
        conn.execute("DROP TABLE key_values")
        conn.execute("DROP TABLE dated_lines")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'fingerprint'",
                      (json.dumps(stamped, ensure_ascii=False),))
    folder.store.close()
    folder.store = Store(location, folder.settings)  # opening rebuilds the derived tables from the log
    assert folder.rows() == expected
    (current,) = folder.store.backend.reader().execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
    assert current == fingerprint(folder.settings)
    snapshot = folder.scan()
    assert values(snapshot, TIME) == [("周四16:30", "周四16:30", 2, ["a@1:1", "c@1:4"]), ("周三", "周三", 1, ["b@1:1"])]
    agrees(snapshot, folder.oracle(), TIME, head=True)
