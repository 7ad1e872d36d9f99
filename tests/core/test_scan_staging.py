"""A scan's per-file state lives in its transaction, not in Python (SPEC §4; issue 10's flat
memory; docs/decisions.md "A scan's file rows").

A scan stages its file rows in ``scan_files`` and the doc_ids it reconciles in ``scan_docs``,
empties both before it commits, reconciles the doc_ids :data:`store.SCAN_CHUNK` at a time and
returns its events as :class:`store.AppendedEvents`, read back from the log. These tests run
on both backends (``GROUNDING_TEST_BACKEND=postgres``) with CJK and emoji paths and doc_ids and
CRLF files.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grounding_core import store as store_module
from grounding_core.config import Config, load_config
from grounding_core.events import Event
from grounding_core.scan import FileRow
from grounding_core.store import AppendedEvents, IndexError_, Store
from tests.support.workspace import build_workspace, write

TOML = 'field_separators = ["：", ":"]\n'


def _document(i: int, newline: str = "\n") -> str:
    """A small document; every fifth shares a doc_id with an archived older version."""
    lines = [f"- 开放时间：周{'一二三四五六日'[i % 7]} 9:{i % 60:02d}", f"- Fee: {i % 3} 元 🎉", "说明：见正文。"]
    return newline.join(lines) + newline


def _corpus(root: Path, files: int) -> None:
    contents: dict[str, str] = {"grounding.toml": TOML}
    for i in range(files):
        newline = "\r\n" if i % 4 == 0 else "\n"
        if i % 5 == 0:  # a doc_id with two declared versions (an archive) and a CJK / emoji name
            front = f"---\ndoc_id: 通知-{i}🎉\nversion: 2\n---\n"
            contents[f"evidence/通知/{i:04d}.md"] = front + _document(i, newline)
            contents[f"evidence/归档/{i:04d}-v1.md"] = front.replace("version: 2", "version: 1") + _document(i + 1)
        else:
            contents[f"evidence/资料/{i:04d}📄.md"] = _document(i, newline)
    build_workspace(root, contents)


def _opened(tmp_path: Path, store_location: Callable[[Path, str], str], files: int) -> tuple[Path, Config, Store]:
    """A workspace of :func:`_corpus` ``files`` under ``tmp_path``, its configuration and a new index."""
    root = tmp_path / "ws"
    _corpus(root, files)
    return root, load_config(root), Store(store_location(tmp_path, "index"))


def _live(kind: type) -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is kind)


def _staged_rows(store: Store) -> tuple[int, int]:
    """Rows in the staging tables, as the writer's connection sees them (on PostgreSQL they are
    temporary tables of its session).
    """
    writer = store.backend.writer
    return (int(writer.execute("SELECT COUNT(*) FROM scan_files").fetchone()[0]),
            int(writer.execute("SELECT COUNT(*) FROM scan_docs").fetchone()[0]))


def test_a_cold_index_keeps_no_file_row_or_event_per_file_in_memory(
        tmp_path: Path, store_location: Callable[[Path, str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SCAN_CHUNK", 8)
    monkeypatch.setattr(store_module, "STAGE_CHUNK", 8)
    root, config, store = _opened(tmp_path, store_location, 240)  # 288 files, 240 doc_ids
    seen: dict[str, int] = {}
    reconcile = store_module._Scan._reconcile_chunk

    def counting(scan: store_module._Scan, doc_ids: list[str]) -> None:
        reconcile(scan, doc_ids)
        seen["rows"] = max(seen.get("rows", 0), _live(FileRow))
        seen["events"] = max(seen.get("events", 0), _live(Event))

    def progress(done: int, total: int, _path: str) -> None:
        if done == total:  # every file read: the old scan held a FileRow per file here
            seen["read rows"], seen["read events"] = _live(FileRow), _live(Event)

    write_rows = store_module._Scan._write_rows

    def writing(scan: store_module._Scan, rows: Any, findings: Any) -> None:
        write_rows(scan, rows, findings)
        seen["written rows"] = max(seen.get("written rows", 0), _live(FileRow))

    monkeypatch.setattr(store_module._Scan, "_reconcile_chunk", counting)
    monkeypatch.setattr(store_module._Scan, "_write_rows", writing)
    for i in range(60):  # files that are no documents: not UTF-8, or front matter that does not parse
        write(root, f"evidence/坏/{i:03d}🚫.md", b"\xff\xfe" if i % 2 else "---\ndoc_id: [\n---\n- 地点：北门\n")
    try:
        result = store.scan(config, progress=progress)
        assert len(result.events) == 288 and len(result.changed) == 348
        assert seen["read rows"] <= 8 + 2 and seen["read events"] <= 2, seen  # (8: the rows waiting for one insert)
        assert seen["rows"] <= 3 * 8 and seen["events"] <= 2, seen  # one chunk's groups at a time
        assert seen["written rows"] <= 3 * 8, seen  # the files that are no documents too
        assert _staged_rows(store) == (0, 0)
        assert result.evidence[f"资料/{1:04d}📄.md"] == [] and len(result.evidence) == 348
        assert {f.name for f in result.evidence["坏/001🚫.md"]} == {"unreadable-evidence"}
        assert {f.name for f in result.evidence["坏/002🚫.md"]} == {"invalid-front-matter"}
    finally:
        store.close()


def test_the_staging_tables_are_empty_after_every_scan_and_after_a_failed_one(
        tmp_path: Path, store_location: Callable[[Path, str], str]) -> None:
    root, config, store = _opened(tmp_path, store_location, 12)
    try:
        store.scan(config)
        assert _staged_rows(store) == (0, 0)
        events = store.event_count()
        write(root, "evidence/资料/0001📄.md", _document(99, "\r\n"))
        write(root, "evidence/资料/0002📄.md", "\xff".encode("latin-1"))  # not UTF-8: a problem row

        def fail(done: int, total: int, _path: str) -> None:
            if done == total:
                raise RuntimeError("stop the scan after its reads")

        with pytest.raises(RuntimeError):
            store.scan(config, progress=fail)
        assert _staged_rows(store) == (0, 0) and store.event_count() == events  # rolled back whole
        result = store.scan(config)
        assert [(e.kind, e.path) for e in result.events] == [("import", "资料/0001📄.md"), ("revoke", "")]
        assert [f.name for f in result.evidence["资料/0002📄.md"]] == ["unreadable-evidence"]
        assert _staged_rows(store) == (0, 0)
    finally:
        store.close()


def test_a_scans_events_are_read_back_from_the_log_without_their_texts(
        tmp_path: Path, store_location: Callable[[Path, str], str]) -> None:
    root, config, store = _opened(tmp_path, store_location, 6)
    try:
        first = store.scan(config)
        assert isinstance(first.events, AppendedEvents)
        logged = [dataclasses.replace(e, text="") for e in store.events()]
        assert len(first.events) == len(logged) == 8
        assert list(first.events) == logged and first.events == logged
        assert first.events[0] == logged[0] and first.events[-1] == logged[-1]
        assert first.events[1:3] == logged[1:3]
        with pytest.raises(IndexError):
            first.events[8]
        assert {e.doc_id for e in first.events} >= {"通知-0🎉", "资料/0001📄"}
        write(root, "evidence/资料/0003📄.md", _document(30, "\r\n"))
        second = store.scan(config)
        assert [(e.seq, e.kind, e.doc_id, e.text) for e in second.events] == [(9, "import", "资料/0003📄", "")]
        assert list(first.events) == logged  # a later scan's events are not the first's
        nothing = store.scan(config)
        assert nothing.events == [] and len(nothing.events) == 0 and list(nothing.events) == []
    finally:
        store.close()


@pytest.mark.parametrize("chunk", [1, 3])
def test_reconciling_doc_ids_in_chunks_appends_the_same_events_and_findings(
        tmp_path: Path, store_location: Callable[[Path, str], str], monkeypatch: pytest.MonkeyPatch,
        chunk: int) -> None:
    root = tmp_path / "ws"
    _corpus(root, 20)
    # duplicates: two files declaring the same doc_id and version (SPEC §3)
    write(root, "evidence/资料/dup-a.md", "---\ndoc_id: 重复😀\nversion: 1\n---\n- 地点：北门\n")
    write(root, "evidence/资料/dup-b.md", "---\ndoc_id: 重复😀\nversion: 1\n---\r\n- 地点：南门\r\n")
    config = load_config(root)

    def run(name: str, size: int) -> tuple[list[tuple[object, ...]], dict[str, list[str]], list[object]]:
        monkeypatch.setattr(store_module, "SCAN_CHUNK", size)
        store = Store(store_location(tmp_path, name))
        try:
            store.scan(config)
            write(root, "evidence/归档/0005-v1.md", "---\ndoc_id: 通知-5🎉\nversion: 1\n---\n- 开放时间：周日\n")
            (root / "evidence/资料/0001📄.md").unlink()
            result = store.scan(config)
            events = sorted((e.kind, e.doc_id, e.version, e.sha256, e.path, e.reason) for e in store.events())
            evidence = {p: [f.name for f in fs] for p, fs in result.evidence.items()}
            files = store.backend.reader().execute(
                "SELECT path, sha256, doc_id, declared_version, findings FROM files ORDER BY path").fetchall()
            return events, evidence, [tuple(r) for r in files]
        finally:
            store.close()
            root.joinpath("evidence/资料/0001📄.md").write_text(_document(1), encoding="utf-8")
            write(root, "evidence/归档/0005-v1.md", "---\ndoc_id: 通知-5🎉\nversion: 1\n---\n" + _document(6))

    whole = run("whole", 512)
    chunked = run("chunked", chunk)
    assert chunked == whole
    assert whole[1]["资料/dup-b.md"] == ["duplicate-doc-id"]


def test_reading_a_scans_events_after_closing_the_store_says_to_read_them_before(
        tmp_path: Path, store_location: Callable[[Path, str], str]) -> None:
    _root, config, store = _opened(tmp_path, store_location, 2)
    result = store.scan(config)
    store.close()
    assert len(result.events) == 3  # known without a read
    with pytest.raises(IndexError_, match="is closed: read a scan's events"):
        list(result.events)
    with pytest.raises(IndexError_, match="before closing its store"):
        result.events[0]


@pytest.mark.parametrize("known", [-5, 0, 2, 3, 99])
def test_changes_since_any_count_lists_the_events_after_it_within_the_log(
        tmp_path: Path, store_location: Callable[[Path, str], str], known: int) -> None:
    _root, config, store = _opened(tmp_path, store_location, 2)
    try:
        store.scan(config)
        changes = store.changes_since(known)
        expected = [e.seq for e in store.events()][min(max(known, 0), 3):]
        assert len(changes.events) == len(expected) and [e.seq for e in changes.events] == expected
    finally:
        store.close()
