"""The store behaviours main hardened on SQLite, on a shared PostgreSQL index (issue 17; SPEC §4,
§9, §11): a locked index is :class:`IndexBusy` after the lock wait and ``check`` answers from the
committed state; a newer layout is refused and left alone; full-text rows are NFKC on both
backends (``cite --grep`` answers alike); only the writer writes memory (a reader's CLI exits 2).

The lock a PostgreSQL writer can meet is a table lock another session holds (``LOCK TABLE``, a
``VACUUM FULL``, a migration); readers' ``ACCESS SHARE`` locks stay compatible with the
``EXCLUSIVE`` lock taken here, as SQLite's readers are with its write lock.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from grounding_core.config import load_config
from grounding_core.postgres_backend import LAYOUT
from grounding_core.store import IndexBusy, IndexTooNew, Store, fts_rows
from grounding_core.workspace import Workspace
from tests.postgres.test_shared_index import SCHEDULE, cli, settings_of, workspace, write

pytestmark = pytest.mark.postgres

HASH_LINE = "1. 活动时间：周四16:30"
DRAFT = "---\nfields: [活动时间]\n---\n活动时间是周四16:30[^1]。🎉\r\n\r\n"


def _draft(root: Path) -> None:
    import hashlib

    digest = hashlib.sha256(SCHEDULE.encode("utf-8")).hexdigest()[:12]
    write(root, {"answers/a.md": DRAFT + f'[^1]: schedule@2:7 sha256:{digest} "{HASH_LINE}"\r\n'})


def test_a_locked_shared_index_is_index_busy_and_check_answers_from_the_committed_state(
        pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "grounding.toml").write_text('today = "2026-05-01"\n', encoding="utf-8")
    _draft(root)
    env = {"GROUNDING_INDEX": pg_url}
    assert cli("check", "--root", root, env=env).returncode == 0  # the index holds schedule@2
    write(root, {"evidence/later.md": "- 地点：礼堂 B 𠮷\r\n"})
    with psycopg.connect(pg_url, autocommit=True) as locker:
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE events IN EXCLUSIVE MODE")  # reads go on; writes wait
        store = Store(pg_url, settings_of(root))
        try:
            with pytest.raises(IndexBusy, match=r"another process is writing the index .* more than 0.3 s"):
                store.scan(load_config(root), lock_wait=0.3)
            assert store.event_count() == 3 and "later.md" not in store.evidence_findings()
        finally:
            store.close()
        proc = cli("check", "--root", root, "--format", "json", env=env)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "another process is writing the index" in proc.stderr and "last committed (3 events)" in proc.stderr
        report = json.loads(proc.stdout)
        assert report["drafts"][0]["status"] == "answered"
        assert "evidence/later.md" not in [e["path"] for e in report["evidence"]]  # not scanned
        locker.execute("ROLLBACK")
    after = cli("check", "--root", root, "--format", "json", env=env)
    assert after.returncode == 0, after.stderr
    assert "evidence/later.md" in [e["path"] for e in json.loads(after.stdout)["evidence"]]  # caught up


def test_a_shared_index_with_a_newer_layout_is_refused_and_left_alone(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    env = {"GROUNDING_INDEX": pg_url}
    assert cli("index", "--root", root, env=env).returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("UPDATE meta SET value = '99' WHERE key = 'layout'")
        before = (raw.execute("SELECT seq, kind, sha256 FROM events ORDER BY seq").fetchall(),
                  raw.execute("SELECT key, value FROM meta ORDER BY key").fetchall())
    write(root, {"evidence/schedule.md": SCHEDULE.replace("周四", "周五")})
    for args in (("check",), ("index",), ("log",), ("memory", "list")):
        proc = cli(*args, "--root", root, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "written by a newer Grounding (layout 99)" in proc.stderr, (args, proc.stderr)
        assert f"this one reads layout {LAYOUT}" in proc.stderr and "in-memory" not in proc.stderr
    with pytest.raises(IndexTooNew):
        Workspace.open(root, index=pg_url)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        assert (raw.execute("SELECT seq, kind, sha256 FROM events ORDER BY seq").fetchall(),
                raw.execute("SELECT key, value FROM meta ORDER BY key").fetchall()) == before


FULL_WIDTH = "---\r\ndoc_id: hotline\r\n---\r\n- 客服：２４小时在线 🎉\r\n3、运费：满９９元包邮𠮷\r\n"
REFUND = "---\ndoc_id: refund\n---\n退款说明\n- 审核通过后3个工作日内退回。\n"


@pytest.mark.parametrize("query", ["审核通过后３个工作日", "周四１６:30", "24小时", "９９", "99元", "２４小时在线"])
def test_cite_grep_answers_alike_on_both_backends_after_nfkc(pg_url: str, tmp_path: Path, query: str) -> None:
    root = workspace(tmp_path / "pg", {"evidence/schedule.md": SCHEDULE, "evidence/hotline.md": FULL_WIDTH,
                                       "evidence/refund.md": REFUND})
    local = tmp_path / "sqlite"
    shutil.copytree(root, local)
    on_pg = cli("cite", "--root", root, "--grep", query, env={"GROUNDING_INDEX": pg_url})
    on_sqlite = cli("cite", "--root", local, "--grep", query)
    assert on_pg.returncode == on_sqlite.returncode == 0, (on_pg.stderr, on_sqlite.stderr)
    assert on_pg.stdout == on_sqlite.stdout and on_pg.stdout.startswith("[^1]: ")
    first = on_pg.stdout.splitlines()[0]
    assert "２４" in first or "９９" in first or "3个" in first or "周四16:30" in first  # quotes as written


def test_full_text_rows_as_written_are_refolded_when_a_shared_index_opens(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws", {"evidence/hotline.md": FULL_WIDTH})
    store = Store(pg_url, settings_of(root))
    try:
        store.scan(load_config(root))
        assert [h.line for h in store.search("24小时")] == [4]
        assert store.search("24小时")[0].text == "- 客服:24小时在线 🎉"  # the NFKC line
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as raw:  # an index from before NFKC rows
        rows = raw.execute("SELECT rowid FROM lines_fts ORDER BY rowid").fetchall()
        raw.execute("DELETE FROM lines_fts")
        lines = FULL_WIDTH.split("\r\n")
        for (rowid,) in rows:
            text = lines[(rowid & 0xFFFFFF) - 1]
            raw.execute("INSERT INTO lines_fts (rowid, text, fold, ntok) VALUES (%s, %s, %s, %s)",
                        (rowid, text, text.lower(), max(len(text) - 2, 0)))
        raw.execute("DELETE FROM meta WHERE key = 'fts_form'")
        assert raw.execute("SELECT COUNT(*) FROM lines_fts WHERE strpos(text, '２４') > 0").fetchone()[0] == 1
    again = Store(pg_url, settings_of(root))
    try:
        assert again.fts_pending() == 1  # re-queued on open
        assert [h.line for h in again.search("24小时")] == [4]
        assert again.backend.reader().execute(
            "SELECT value FROM meta WHERE key = 'fts_form'").fetchone()[0] == "nfkc"
    finally:
        again.close()
    assert fts_rows(1, "- ２４小时\n", 0) == [(1 << 24 | 1, "- 24小时")]


def test_a_cli_reader_may_not_write_memory_and_says_who_writes(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    writer = Store(pg_url, settings_of(root))
    try:
        writer.scan(load_config(root))  # this process now holds the writer lock
        env = {"GROUNDING_INDEX": pg_url}
        proc = cli("memory", "add", "--root", root, "--scope", "学生-李华🎉", "--key", "语言", "--value", "中文",
                   env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("grounding: error: only the index's writer writes memory:")
        assert "writes the index" in proc.stderr and "grounding" in proc.stderr
        assert writer.event_count() == 3
        writer.remember("学生-李华🎉", "语言", "中文", approved_by="王芳")  # the writer may
        listed = cli("memory", "list", "--root", root, "--format", "json", env=env)
        assert listed.returncode == 0 and "中文" in listed.stdout, listed.stderr
    finally:
        writer.close()


async def test_the_server_reads_a_locked_shared_index_as_committed_and_scans_once_free(
        pg_url: str, tmp_path: Path) -> None:
    from lsprotocol import types

    from tests.support import lsp as harness
    from tests.support.lsp import names_of, open_document

    root = workspace(tmp_path / "ws")
    (root / "grounding.toml").write_text('today = "2026-05-01"\n', encoding="utf-8")
    env = {"GROUNDING_INDEX": pg_url}
    assert cli("index", "--root", root, env=env).returncode == 0
    later = "- 地点：礼堂 B 🎉\n"
    write(root, {"evidence/later.md": later})
    import hashlib

    digest = hashlib.sha256(SCHEDULE.encode("utf-8")).hexdigest()[:12]
    later_digest = hashlib.sha256(later.encode("utf-8")).hexdigest()[:12]
    draft = (DRAFT + f'[^1]: schedule@2:7 sha256:{digest} "{HASH_LINE}"\r\n'
             "\r\n地点是礼堂 B 🎉[^2]。\r\n\r\n"
             f'[^2]: later@1:1 sha256:{later_digest} "- 地点：礼堂 B 🎉"\r\n')
    uri = (root / "answers/a.md").as_uri()
    with psycopg.connect(pg_url, autocommit=True) as locker:
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE events IN EXCLUSIVE MODE")
        client = await harness.start(root, "minimal", env=env)
        try:
            open_document(client, uri, draft)
            await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), "diagnostics", 60.0)
            assert "unknown-source" in names_of(client.recorder.of(uri)[-1].diagnostics)  # not committed
            await client.recorder.wait_until(
                lambda: any("another process is writing the index" in m.message for m in client.recorder.messages),
                "the busy message", 60.0)
            locker.execute("ROLLBACK")
            await client.recorder.wait_until(
                lambda: "unknown-source" not in names_of(client.recorder.of(uri)[-1].diagnostics),
                "diagnostics after the retried scan", 60.0)
            assert not [d for d in client.recorder.of(uri)[-1].diagnostics
                        if d.severity == types.DiagnosticSeverity.Error]
        finally:
            assert await harness.stop(client) == 0
