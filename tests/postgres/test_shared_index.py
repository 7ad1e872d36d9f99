"""A team's shared index on PostgreSQL (issue 17; SPEC §2 ``index``, §4): selection, one writer,
change announcements, copying a SQLite log, failures, and search parity with SQLite.

Every test runs against the session's real PostgreSQL cluster (``pg_cluster``/``pg_url`` in
``tests/conftest.py``); they are skipped, saying why, only when the PostgreSQL binaries are not
installed. Evidence mixes CJK (full-width colons, CJK punctuation, numbered lists), emoji on the
astral plane and CRLF files.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grounding_core.backend import has_password, is_url, redact
from grounding_core.config import ConfigError, load_config
from grounding_core.index import ParseSettings
from grounding_core.store import IndexError_, Store
from grounding_core.workspace import Workspace
from tests.postgres.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
GROUNDING = [sys.executable, "-m", "grounding.cli"]

SCHEDULE = ("---\r\ndoc_id: schedule\r\nversion: 2\r\ntitle: 开放日安排\r\n---\r\n"
            "主题：开放日\r\n1. 活动时间：周四16:30\r\n2. 地点：三楼报告厅 🎉\r\n")
NOTICE = "主题：开放日\n- 报名方式：线上报名（截止周三）。\n- 费用：免费 𠮷\n"
FEES = "---\ndoc_id: fees\n---\nSubject: Library\nFee: 10 USD per day\nLate fee: 2 USD\n"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.stat().st_mtime_ns if path.exists() else None
        path.write_bytes(text.encode("utf-8"))
        if before is not None and path.stat().st_mtime_ns <= before:
            os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def workspace(root: Path, files: dict[str, str] | None = None) -> Path:
    write(root, files if files is not None else {"evidence/schedule.md": SCHEDULE,
                                                 "evidence/notice.md": NOTICE,
                                                 "evidence/en/fees.md": FEES})
    return root


def settings_of(root: Path) -> ParseSettings:
    config = load_config(root)
    return ParseSettings(config.field_separators, config.meta_fields, config.subject_fields)


def cli(*args: str | Path, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "GROUNDING_INDEX"}
    full.update(env or {})
    return subprocess.run([*GROUNDING, *map(str, args)], capture_output=True, text=True, env=full, cwd=cwd,
                          timeout=300)


def log_of(store: Store) -> list[tuple[Any, ...]]:
    return [(e.seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.declared, e.reason, e.text)
            for e in store.events()]


# -- selection and configuration (SPEC §2) --------------------------------------------------------


def test_urls_are_told_apart_from_paths_and_passwords_never_printed() -> None:
    assert is_url("postgresql://team@db.example/grounding") and is_url("postgres://h/d")
    assert not is_url(".grounding/index.sqlite") and not is_url(":memory:") and not is_url("C:/x.sqlite")
    url = "postgresql://alice:s3cr%40t@db.example:5432/grounding?sslmode=require&password=other"
    assert has_password(url) and has_password("postgresql://h/d?password=x")
    assert not has_password("postgresql://alice@h/d?options=-csearch_path%3D知识库")
    shown = redact(url)
    assert "s3cr" not in shown and "other" not in shown
    assert shown == "postgresql://alice@db.example:5432/grounding?sslmode=require"


def test_index_url_comes_from_grounding_toml_or_the_environment(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = workspace(tmp_path / "ws")
    monkeypatch.delenv("GROUNDING_INDEX", raising=False)
    (root / "grounding.toml").write_text('index = "postgresql://team@db.example/grounding"\n', encoding="utf-8")
    config = load_config(root)
    assert config.index_shared and config.index_path == "postgresql://team@db.example/grounding"
    monkeypatch.setenv("GROUNDING_INDEX", "postgresql://ci@other.example/grounding")
    assert load_config(root).index == "postgresql://ci@other.example/grounding"
    # an explicit override (CLI flag, editor setting) still wins over the environment
    assert load_config(root).with_overrides(index=".grounding/index.sqlite").index_shared is False


def test_a_password_in_grounding_toml_is_a_configuration_error_naming_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = workspace(tmp_path / "ws")
    monkeypatch.delenv("GROUNDING_INDEX", raising=False)
    (root / "grounding.toml").write_text('index = "postgresql://team:hunter2@db/grounding"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"grounding.toml: index .*holds a password.*pgpass") as caught:
        load_config(root)
    assert "hunter2" not in str(caught.value)
    proc = cli("check", "--root", root)
    assert proc.returncode == 2
    assert "index" in proc.stderr and "password" in proc.stderr and "hunter2" not in proc.stderr


# -- failures at start ----------------------------------------------------------------------------------


def test_an_unreachable_database_is_exit_2_naming_the_url_without_its_password(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://alice:s3cret@127.0.0.1:{port}/grounding?connect_timeout=2"
    proc = cli("check", "--root", root, env={"GROUNDING_INDEX": url})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"postgresql://alice@127.0.0.1:{port}/grounding" in proc.stderr
    assert "cannot reach the index" in proc.stderr and "s3cret" not in proc.stderr + proc.stdout
    with pytest.raises(IndexError_, match="cannot reach the index"):
        Workspace.open(root, index=redact(url))  # a shared index never falls back silently


# -- one writer, many readers ---------------------------------------------------------------------------


def test_one_writer_at_a_time_others_read_the_same_state(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    config = load_config(root)
    writer, reader = Store(pg_url, settings_of(root)), Store(pg_url, settings_of(root))
    try:
        first = writer.scan(config)
        assert first.writer is None and len(first.events) == 3
        write(root, {"evidence/notice.md": NOTICE.replace("免费", "五元")})
        mine = reader.scan(config)  # the reader's own folder changed, but it does not write
        assert mine.events == [] and mine.writer is not None and "grounding" in mine.writer
        assert reader.event_count() == 3
        assert mine.snapshot.newest("notice").sha256 == first.snapshot.newest("notice").sha256  # type: ignore[union-attr]
        assert sorted(mine.evidence) == ["en/fees.md", "notice.md", "schedule.md"]  # the writer's findings
        assert reader.search("报名方式") and reader.search("报名方式") == writer.search("报名方式")
        later = writer.scan(config)
        assert [e.kind for e in later.events] == ["import"]
        assert reader.snapshot().seq == writer.snapshot().seq == 4
        writer.close()
        again = reader.scan(config)  # the lock went with the writer: the reader may write now
        assert again.writer is None and again.events == []
    finally:
        writer.close()
        reader.close()


def test_a_cli_reader_says_who_writes_and_appends_nothing(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    writer = Store(pg_url, settings_of(root))
    try:
        writer.scan(load_config(root))
        write(root, {"evidence/notice.md": NOTICE.replace("免费", "五元 🎉")})
        proc = cli("index", "--root", root, "--format", "json", env={"GROUNDING_INDEX": pg_url})
        assert proc.returncode == 0, proc.stderr
        assert "writes the shared index" in proc.stderr and "appended nothing" in proc.stderr
        summary = json.loads(proc.stdout)
        assert summary["events_appended"] == 0 and summary["events"] == 3
        assert writer.event_count() == 3
    finally:
        writer.close()


def test_the_event_log_refuses_update_delete_and_truncate(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    store = Store(pg_url, settings_of(root))
    try:
        store.scan(load_config(root))
        conn = store.backend.writer
        for statement in ("UPDATE events SET doc_id = 'forged'", "DELETE FROM events WHERE seq = 1",
                          "TRUNCATE events"):
            with pytest.raises(psycopg.Error, match="append-only"):
                conn.execute(statement)
        assert store.event_count() == 3
    finally:
        store.close()


def test_notify_wakes_every_waiting_reader_when_the_writer_commits(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    config = load_config(root)
    writer = Store(pg_url, settings_of(root))
    readers = [Store(pg_url, settings_of(root)) for _ in range(3)]
    try:
        writer.scan(config)
        known = writer.event_count()
        seen: list[int | None] = [None] * len(readers)
        listening = threading.Barrier(len(readers) + 1, timeout=120)

        def wait(i: int) -> None:
            assert readers[i].wait_for_events(known, timeout=0.0) is None  # nothing new yet
            listening.wait()
            seen[i] = readers[i].wait_for_events(known, timeout=120)

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(readers))]
        for t in threads:
            t.start()
        listening.wait()
        write(root, {"evidence/schedule.md": SCHEDULE.replace("version: 2", "version: 3")})
        result = writer.scan(config)
        for t in threads:
            t.join(timeout=120)
        assert [e.kind for e in result.events] == ["import", "revoke"]
        assert seen == [known + 2] * len(readers)
        assert all(r.snapshot().newest("schedule").version == 3 for r in readers)  # type: ignore[union-attr]
    finally:
        for store in (writer, *readers):
            store.close()


def test_closing_a_store_ends_its_waiting_listener_and_leaves_no_connection(pg_cluster: Cluster,
                                                                            tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    url = pg_cluster.schema_url()
    with psycopg.connect(pg_cluster.url, autocommit=True) as probe:
        def listeners() -> set[int]:
            # backends of other tests' closed stores may still be exiting: compare pids, not counts
            rows = probe.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                                 " AND query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()").fetchall()
            return {int(r[0]) for r in rows}

        before = listeners()
        store = Store(url, settings_of(root))
        try:
            assert store.wait_for_events(0, timeout=0.0) is None  # the listener is connected
            ours = listeners() - before
            assert len(ours) == 1
            got: list[int | None] = []
            thread = threading.Thread(target=lambda: got.append(store.wait_for_events(0, timeout=120)))
            thread.start()
        finally:
            store.close()  # from another thread than the waiting one, as a server's shutdown does
        thread.join(timeout=30)
        assert not thread.is_alive() and got == [None]
        assert store.wait_for_events(0, timeout=5.0) is None  # closed: at once, opening nothing
        deadline = time.monotonic() + 10  # a backend exits after its client hung up: poll the server
        while ours & listeners() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not ours & listeners()


def test_wait_for_events_on_sqlite_sees_another_process_append(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    db = str(tmp_path / "index.sqlite")
    reader = Store(db, settings_of(root))
    try:
        got: list[int | None] = []
        thread = threading.Thread(target=lambda: got.append(reader.wait_for_events(0, timeout=120)))
        thread.start()
        proc = cli("index", "--root", root, "--format", "json", env={"GROUNDING_INDEX": db})
        assert proc.returncode == 0, proc.stderr
        thread.join(timeout=120)
        assert got == [3]
    finally:
        reader.close()


# -- copying a SQLite log, --at N on both -----------------------------------------------------------------


def test_index_to_copies_the_log_idempotently_and_check_at_n_agrees(pg_url: str, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    sha = hashlib.sha256(SCHEDULE.encode("utf-8")).hexdigest()[:12]
    write(root, {"answers/a.md": "活动时间是周四16:30[^1]。\n\n"
                 f"[^1]: schedule@2:7 sha256:{sha} \"1. 活动时间：周四16:30\"\n"})
    assert cli("index", "--root", root).returncode == 0
    write(root, {"evidence/schedule.md": SCHEDULE.replace("version: 2", "version: 3").replace("16:30", "17:00")})
    (root / "evidence" / "notice.md").unlink()
    first = cli("index", "--root", root, "--to", pg_url, "--format", "json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["events_appended"] == summary["events"] == 6 and summary["events_already_there"] == 0
    assert "@" in summary["to"] and "sqlite" in summary["from"]
    second = json.loads(cli("index", "--root", root, "--to", pg_url, "--format", "json").stdout)
    assert second["events_appended"] == 0 and second["events_already_there"] == 6
    local = Store(str(root / ".grounding" / "index.sqlite"), settings_of(root))
    shared = Store(pg_url, settings_of(root))
    try:
        assert log_of(local) == log_of(shared)
        assert shared.evidence_findings() == local.evidence_findings()
    finally:
        local.close()
        shared.close()
    for n in range(7):
        a = cli("check", "--root", root, "--at", str(n), "--format", "json")
        b = cli("check", "--root", root, "--at", str(n), "--format", "json", env={"GROUNDING_INDEX": pg_url})
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout), n
    assert json.loads(a.stdout)["drafts"][0]["status"] != "answered"  # the cited version was replaced
    assert json.loads(cli("check", "--root", root, "--at", "3", "--format", "json").stdout)[
        "drafts"][0]["status"] == "answered"


def test_index_to_refuses_a_different_log(pg_url: str, tmp_path: Path) -> None:
    one = workspace(tmp_path / "one")
    two = workspace(tmp_path / "two", {"evidence/other.md": "主题：别的\n- 地点：二楼\n"})
    assert cli("index", "--root", one, "--to", pg_url).returncode == 0
    proc = cli("index", "--root", two, "--to", pg_url)
    assert proc.returncode == 2 and "holds another log" in proc.stderr


# -- losing the server mid-scan ---------------------------------------------------------------------------


def _corpus(root: Path, n: int) -> None:
    files = {}
    for i in range(n):
        files[f"evidence/d{i:04d}.md"] = (
            f"---\ndoc_id: d{i:04d}\nversion: 1\n---\n主题：课程{i % 40}\n"
            + "".join(f"- 字段{j}：值{i}-{j}，时间周{j % 7}🎉\n" for j in range(12)))
    write(root, files)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_stopping_the_server_mid_scan_loses_and_duplicates_nothing(
        mode: str, pg_cluster: Cluster, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _corpus(root, 1200)
    config = load_config(root)
    url = pg_cluster.schema_url()
    store = Store(url, settings_of(root))
    store.reconnect_seconds = 120
    watcher = psycopg.connect(pg_cluster.url, autocommit=True)
    outcome: list[object] = []
    try:
        pid = store.backend.writer.raw.info.backend_pid  # type: ignore[attr-defined]
        thread = threading.Thread(target=lambda: outcome.append(store.scan(config)))
        thread.start()
        while True:  # wait until the scan's transaction is writing rows
            row = watcher.execute("SELECT query, state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
            assert thread.is_alive(), "the scan ended before it could be interrupted"
            if row and row[1] == "active" and str(row[0]).lstrip().upper().startswith("INSERT"):
                break
        watcher.close()
        pg_cluster.stop(mode)
        assert thread.is_alive()
        pg_cluster.start()
        thread.join(timeout=300)
        assert outcome and not isinstance(outcome[0], BaseException), outcome
        assert len(outcome[0].events) == 1200  # type: ignore[attr-defined]
        assert store.scan(config).events == []  # the rescan finds nothing left to do
        fresh = Store(str(tmp_path / "fresh.sqlite"), settings_of(root))
        try:
            fresh.scan(config)
            assert log_of(store) == log_of(fresh)
            seqs = [e.seq for e in store.events()]
            assert seqs == list(range(1, len(seqs) + 1))
            snapshot = store.snapshot()
            assert snapshot.stats(config.today_or()) == fresh.snapshot().stats(config.today_or())
        finally:
            fresh.close()
    finally:
        if not watcher.closed:
            watcher.close()
        store.close()


def test_a_reader_and_a_listener_reconnect_after_a_restart(pg_cluster: Cluster, tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    config = load_config(root)
    url = pg_cluster.schema_url()
    writer, reader = Store(url, settings_of(root)), Store(url, settings_of(root))
    try:
        writer.scan(config)
        assert reader.snapshot().doc_ids() == ["fees", "notice", "schedule"]
        assert reader.wait_for_events(3, timeout=0.0) is None  # the listener is connected
        pg_cluster.stop("fast")
        pg_cluster.start()
        assert reader.snapshot().doc_ids() == ["fees", "notice", "schedule"]  # reconnected read
        got: list[int | None] = []
        thread = threading.Thread(target=lambda: got.append(reader.wait_for_events(3, timeout=120)))
        thread.start()
        write(root, {"evidence/notice.md": NOTICE + "- 地点：二楼\n"})
        result = writer.scan(config)  # the writer reconnects and takes its lock again
        thread.join(timeout=120)
        assert result.writer is None and len(result.events) == 1
        assert got == [4]
    finally:
        writer.close()
        reader.close()


# -- search: pg_trgm ranked like FTS5 ------------------------------------------------------------------


def _copy_tree(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.suffix in (".md", ".txt"):
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())


def _search_corpus(root: Path) -> None:
    _copy_tree(REPO / "examples" / "evidence", root / "evidence" / "examples")
    cases = (REPO / ".." / "shared" / "cases").resolve()
    for case in sorted(cases.iterdir()) if cases.is_dir() else []:
        if (case / "evidence").is_dir():
            _copy_tree(case / "evidence", root / "evidence" / "cases" / case.name)
    workspace(root)
    write(root, {"evidence/mixed.md": "Opening HOURS：周一至周五 9:00–18:00\r\n"
                 "opening hours (holidays)：closed 🎉\r\n1、报名时间：即日起至5月20日。\r\n"
                 "𠮷野家 Fee：¥500\r\n", "grounding.toml": 'field_separators = ["：", ":"]\n'})


QUERIES = ["活动时间", "周四16", "开放日", "报名", "fee", "FEE", "Opening hours", "hours", "𠮷野家",
           "三楼报告厅", "USD per", "9:00", "2 USD", "ab", "时间", "周", "截止 周三", "免费 五元",
           "closed 🎉", "\"quoted\" *star NEAR(x", "活动时间是几点 报名截止", "opening fee hours"]


def test_postgresql_search_returns_the_same_ranked_candidates_as_fts5(pg_url: str, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _search_corpus(root)
    config = load_config(root)
    settings = settings_of(root)
    lite, shared = Store(str(tmp_path / "lite.sqlite"), settings), Store(pg_url, settings)
    try:
        lite.scan(config)
        shared.scan(config)
        write(root, {"evidence/notice.md": NOTICE.replace("免费", "五元")})  # an old version stays in bm25
        lite.scan(config)
        shared.scan(config)
        compared = 0
        for query in QUERIES + [line[2:9] for line in NOTICE.splitlines()]:
            for any_term in (False, True):
                a = lite.search(query, limit=15, any_term=any_term)
                b = shared.search(query, limit=15, any_term=any_term)
                assert [(h.doc_id, h.version, h.line, h.text) for h in a] == \
                    [(h.doc_id, h.version, h.line, h.text) for h in b], (query, any_term)
                assert [h.rank for h in b] == pytest.approx([h.rank for h in a], rel=1e-12), (query, any_term)
                compared += len(a)
        assert compared > 100
        # any replay(n) at which both logs hold the same events: every n when the two scans
        # appended in the same order, at least each scan's end (within one scan, doc_ids whose
        # file was still settling are imported after the others, so the order of different
        # doc_ids may differ between two scans of one folder; docs/decisions.md, Index §4)
        def kinds(store: Store) -> list[tuple[str, str, int]]:
            return [(str(e.kind), e.doc_id, e.version) for e in store.events()]

        a_log, b_log = kinds(lite), kinds(shared)
        assert sorted(a_log) == sorted(b_log)
        same = [n for n in range(len(a_log) + 1) if sorted(a_log[:n]) == sorted(b_log[:n])]
        assert len(same) >= 3 and same[-1] == len(a_log)
        for n in same:
            assert [(h.doc_id, h.line) for h in lite.snapshot(at=n).search("报名")] == \
                [(h.doc_id, h.line) for h in shared.snapshot(at=n).search("报名")], n
    finally:
        lite.close()
        shared.close()


def test_search_folds_case_like_fts5_and_treats_every_query_as_text(pg_url: str, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _search_corpus(root)
    store = Store(pg_url, settings_of(root))
    try:
        store.scan(load_config(root))
        count = store.event_count()
        upper = [(h.doc_id, h.line) for h in store.search("OPENING HOURS")]
        assert upper == [(h.doc_id, h.line) for h in store.search("opening hours")]
        assert {("mixed", 1), ("mixed", 2)} <= set(upper)
        for hostile in ("%", "_", "\\", "100%_done", "a\x00b", "\ud800abc", "'; DROP TABLE events; --", "(?=x)"):
            assert isinstance(store.search(hostile), list)
        assert store.search("%%%") == [] and store.event_count() == count
    finally:
        store.close()


# -- a derived-version upgrade (SPEC §2 index) ------------------------------------------------------


def _set_definition(store: Store, version: int) -> None:
    """Make the index look derived by another Grounding (``meta.fingerprint``'s definition)."""
    with store.backend.write() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        stamped = {**json.loads(row[0]), "definition": version}
        conn.execute("UPDATE meta SET value = ? WHERE key = 'fingerprint'", (json.dumps(stamped, ensure_ascii=False),))


@pytest.fixture
def indexed(pg_url: str, tmp_path: Path) -> Iterator[tuple[Path, Store]]:
    """A workspace and the store that indexed it and holds the writer lock (closed after)."""
    root = workspace(tmp_path / "ws")
    writer = Store(pg_url, settings_of(root))
    try:
        writer.scan(load_config(root))
        yield root, writer
    finally:
        writer.close()


@pytest.mark.parametrize("offset, said", [
    (-1, "was built by an older Grounding (derived version {old}; this one derives version {new})"),
    (+1, "was built by a newer Grounding (derived version {old}; this one derives version {new})"),
])
def test_a_reader_of_an_index_derived_by_another_grounding_says_so_and_what_to_do(
        pg_url: str, indexed: tuple[Path, Store], offset: int, said: str) -> None:
    from grounding_core.backend import DERIVED_VERSION

    root, writer = indexed
    said = said.format(old=DERIVED_VERSION + offset, new=DERIVED_VERSION)
    _set_definition(writer, DERIVED_VERSION + offset)  # the writer is that other Grounding
    with pytest.raises(IndexError_) as refused:
        Store(pg_url, settings_of(root))
    message = str(refused.value)
    assert said in message and "writes it" in message and "field_separators" not in message
    if offset < 0:
        assert "run `grounding index` (or start a writer) with this Grounding once to upgrade it" in message
    else:
        assert "upgrade this Grounding" in message
    proc = cli("check", "--root", root, env={"GROUNDING_INDEX": pg_url})  # the CLI says the same
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
    if offset > 0:
        return
    writer.close()  # the old writer stopped: a store of this Grounding upgrades the index once
    upgraded = Store(pg_url, settings_of(root))
    try:
        row = upgraded.backend.reader().execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        assert json.loads(row[0])["definition"] == DERIVED_VERSION
        assert upgraded.snapshot().newest("schedule") is not None
    finally:
        upgraded.close()


def test_a_reader_with_other_parse_settings_is_still_told_to_use_the_writers(
        pg_url: str, indexed: tuple[Path, Store]) -> None:
    with pytest.raises(IndexError_, match="derived with other settings") as refused:
        Store(pg_url, ParseSettings(("：", "=", "🎉"), (), ("主题",)))
    assert "field_separators" in str(refused.value) and "older Grounding" not in str(refused.value)
