"""Memory entries (SPEC §11) on a shared PostgreSQL index: the writer appends them, readers see
them and may not write them, and an index made before memory (layout 1) is migrated in place.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import psycopg
import pytest

from grounding_core.config import load_config
from grounding_core.memory import MemoryWriteError
from grounding_core.postgres_backend import LAYOUT
from grounding_core.store import Store
from tests.postgres.test_shared_index import settings_of, workspace

pytestmark = pytest.mark.postgres

SCOPE = "学生-李华🎉"


def test_the_writer_remembers_readers_see_it_and_may_not_write(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    config = load_config(root)
    writer, reader = Store(pg_url, settings_of(root)), Store(pg_url, settings_of(root))
    try:
        assert len(writer.scan(config).events) == 3
        entry = writer.remember(SCOPE, "语言", "中文（简体）", approved_by="王芳")
        assert (entry.version, entry.remembered_seq, entry.approved_by) == (1, 4, "王芳")
        assert reader.backend.wait_for_events(3, 10.0) == 4
        assert reader.snapshot().memory_keys(SCOPE) == ["语言"]
        assert reader.snapshot().memory_active(SCOPE, "语言").value == "中文（简体）"  # type: ignore[union-attr]
        with pytest.raises(MemoryWriteError, match="writer"):
            reader.remember(SCOPE, "语言", "英文")
        assert reader.event_count() == writer.event_count() == 4
        names = {(t.text, t.kind) for t in reader.snapshot().vocabulary_in("开放日的费用是多少？", dt.date.today())}
        assert ("开放日", "subject") in names  # the vocabulary table, read by = ANY(array) and strpos
    finally:
        writer.close()
        reader.close()


def test_a_layout_1_index_accepts_memory_events_after_reopening(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    store = Store(pg_url, settings_of(root))
    try:
        store.scan(load_config(root))
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as raw:  # the layout before memory events
        raw.execute("DROP TABLE memory_entries")
        raw.execute("ALTER TABLE events DROP CONSTRAINT events_kind_check")
        raw.execute("ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('import', 'revoke'))")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'layout'")
        with pytest.raises(psycopg.errors.CheckViolation):
            raw.execute("INSERT INTO events (seq, kind, doc_id, version, recorded_at, data)"
                        " VALUES (99, 'remember', '', 1, '', '{}')")
    again = Store(pg_url, settings_of(root))
    try:
        assert [e.kind for e in again.events()] == ["import"] * 3
        again.remember(SCOPE, "截止日期", "12月20日", approved_by="王芳")
        again.forget(SCOPE, "截止日期", "家长要求")
        assert [e.kind for e in again.events()] == ["import"] * 3 + ["remember", "forget"]
        assert again.snapshot(4).memory_active(SCOPE, "截止日期").value == "12月20日"  # type: ignore[union-attr]
        assert again.snapshot().memory_active(SCOPE, "截止日期") is None
        layout = again.backend.reader().execute("SELECT value FROM meta WHERE key = 'layout'").fetchone()
        assert int(layout[0]) == LAYOUT == 2
    finally:
        again.close()
