"""The corpus-wide summaries ``grounding index`` and ``grounding conflicts`` print are kept in
the index's ``meta`` table for the state they describe (``Store.stats``,
``Store.conflicting_keys``), so a run with nothing changed costs a warm start (tryout
finding #14). A kept answer is used only for the same state: the same events, ``today``,
parse settings and meta fields; every other state is computed again.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import write_files

from grounding_core.store import SUMMARY_FORM
from grounding_core.workspace import Workspace

TOML = 'field_separators = ["：", ":"]\nsubject_fields = ["主题"]\n'
POSTER = "---\ndoc_id: poster\nsubject: 开放日\n---\n- 活动时间：周四 16:30 🎉\n- 地点：三楼𠮷\n"
FLYER = "---\ndoc_id: flyer\neffective_until: 2026-12-31\n---\r\n主题：开放日\r\n- 活动时间：周三16:30\r\n"
TODAY = dt.date(2026, 11, 30)

pytestmark = pytest.mark.sqlite_only  # reads the SQLite file, its WAL or a SQLite-only process


@contextmanager
def opened(root: Path) -> Iterator[Workspace]:
    ws = Workspace.open(root)
    try:
        yield ws
    finally:
        ws.store.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_files(tmp_path, {"grounding.toml": TOML, "evidence/poster.md": POSTER, "evidence/flyer.md": FLYER})
    return tmp_path


def kept(root: Path, name: str) -> dict[str, object]:
    with sqlite3.connect(root / ".grounding" / "index.sqlite") as conn:
        (value,) = conn.execute("SELECT value FROM meta WHERE key = ?", (f"summary:{name}",)).fetchone()
    held = json.loads(value)
    assert isinstance(held, dict)
    return held


def forge(root: Path, name: str, value: object) -> None:
    """Replace the kept answer by another one for the same state (to see whether it is read)."""
    held = kept(root, name)
    with sqlite3.connect(root / ".grounding" / "index.sqlite") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = ?",
                     (json.dumps({"state": held["state"], "value": value}, ensure_ascii=False), f"summary:{name}"))


def test_the_answer_kept_for_a_state_is_the_one_the_next_process_reads(root: Path) -> None:
    with opened(root) as ws:
        snapshot = ws.scan().snapshot
        keys = ws.store.conflicting_keys(snapshot, TODAY)
        assert keys == snapshot.conflicting_keys(TODAY) == [("开放日", "活动时间")]
        stats = ws.store.stats(snapshot, TODAY)
        assert stats == snapshot.stats(TODAY) and stats.active_field_lines == 4
    state = json.loads(str(kept(root, "conflicting_keys")["state"]))
    assert state[:3] == [SUMMARY_FORM, snapshot.seq, TODAY.isoformat()]
    forge(root, "conflicting_keys", [["主题甲", "字段乙"]])
    with opened(root) as ws:  # a new process, nothing changed: the kept row answers
        snapshot = ws.scan().snapshot
        assert ws.store.conflicting_keys(snapshot, TODAY) == [("主题甲", "字段乙")]
        # another day is another state: computed (the flyer has expired), and kept instead
        later = dt.date(2027, 1, 2)
        assert ws.store.conflicting_keys(snapshot, later) == snapshot.conflicting_keys(later) == []
        assert ws.store.stats(snapshot, later).active_field_lines == 2
    assert json.loads(str(kept(root, "conflicting_keys")["state"]))[2] == "2027-01-02"


def test_a_change_of_evidence_or_settings_is_never_answered_from_an_older_row(root: Path) -> None:
    with opened(root) as ws:
        first = ws.scan().snapshot
        assert ws.store.conflicting_keys(first, TODAY) == [("开放日", "活动时间")]
    forge(root, "conflicting_keys", [["陈旧", "答案"]])
    write_files(root, {"evidence/flyer.md": FLYER.replace("周三16:30", "周四 16:30 🎉")})
    with opened(root) as ws:
        changed = ws.scan().snapshot
        assert changed.seq > first.seq
        assert ws.store.conflicting_keys(changed, TODAY) == []
        # the state before the change (check --at N) has its own answer
        before = ws.store.snapshot(at=first.seq)
        assert ws.store.conflicting_keys(before, TODAY) == [("开放日", "活动时间")]
    forge(root, "conflicting_keys", [["陈旧", "答案"]])
    write_files(root, {"grounding.toml": TOML + 'meta_fields = ["活动时间"]\n'})
    with opened(root) as ws:  # other meta fields: no conflict on a meta field (SPEC §7.4)
        snapshot = ws.scan().snapshot
        assert ws.store.conflicting_keys(snapshot, TODAY) == snapshot.conflicting_keys(TODAY) == []


def test_an_unreadable_kept_row_is_computed_again(root: Path) -> None:
    with opened(root) as ws:
        snapshot = ws.scan().snapshot
        ws.store.stats(snapshot, TODAY)
    with sqlite3.connect(root / ".grounding" / "index.sqlite") as conn:
        conn.execute("UPDATE meta SET value = '{not json' WHERE key = 'summary:stats'")
    with opened(root) as ws:
        snapshot = ws.scan().snapshot
        assert ws.store.stats(snapshot, TODAY) == snapshot.stats(TODAY)
    assert kept(root, "stats")["value"] == [2, 2, 2, 12, 4]
