"""The evidence index (SPEC §2–§4): the event log, replay, rescans, versions, odd files.

Every workspace is built in ``tmp_path`` with a file-backed index (``.grounding/index.sqlite``)
so reopening the database is a real close + open. Evidence mixes CJK, emoji, CRLF, a BOM and
U+2028; the citation helpers compute hashes from the raw bytes written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support import MakeWorkspace, check, errors, names, only, pos, sha256, write_files

from grounding_core import store as store_module
from grounding_core.evidence import EvidenceError, parse_evidence
from grounding_core.fixes import apply_edits
from grounding_core.model import Severity, Status
from grounding_core.state import IndexState
from grounding_core.store import Store
from grounding_core.workspace import Workspace


def schedule(version: int | None, value: str = "周四16:30", extra: str = "") -> str:
    """A CRLF schedule; the 活动时间 line is line 5 (or 2 without front matter) + extra lines."""
    front = f"---\r\ndoc_id: schedule\r\nversion: {version}\r\n---\r\n" if version else ""
    return f"{front}{extra}- 活动时间：{value}\r\n- 地点：三楼报告厅 🎉\r\n"


def citation_draft(doc_id: str, version: int, line: int, content: str, quote: str,
                   sentence: str = "活动时间是周四16:30") -> str:
    return (
        "---\r\nfields: [活动时间]\r\n---\r\n"
        f"{sentence}[^1]。\r\n\r\n"
        f'[^1]: {doc_id}@{version}:{line} sha256:{sha256(content)[:12]} "{quote}"\r\n'
    )


def snapshot(state: IndexState) -> dict[str, dict[int, tuple[str, str, bool]]]:
    """Every doc's versions as (sha256, path, revoked): what 'the same state' compares."""
    return {d: {v: (r.sha256, r.path, r.revoked) for v, r in state.versions(d).items()}
            for d in state.doc_ids()}


def rows(ws: Workspace, sql: str) -> list[tuple[object, ...]]:
    """Rows of the workspace's index database (SQLite or PostgreSQL), read through its store."""
    return list(ws.store.backend.reader().execute(sql).fetchall())


# -- the log, replay and reopening (§4) -----------------------------------------------------------


@pytest.fixture
def history(make_workspace: MakeWorkspace) -> Workspace:
    """Four scans: import two docs, bump schedule 2 -> 3, change notice (auto v2), delete it."""
    ws = make_workspace({"evidence/schedule.md": schedule(2),
                         "evidence/notice.md": "主题：开放日\r\n- 报名：线上 🎉\r\n"})
    write_files(ws.config.root, {"evidence/schedule.md": schedule(3, "周五16:30")})
    ws.scan()
    write_files(ws.config.root, {"evidence/notice.md": "主题：开放日\r\n- 报名：线下\r\n"})
    ws.scan()
    (ws.config.evidence_root / "notice.md").unlink()
    ws.scan()
    return ws


def test_event_log_records_imports_and_revokes_in_order(history: Workspace) -> None:
    events = history.store.events()
    assert [(e.seq, e.kind, e.doc_id, e.version) for e in events] == [
        (1, "import", "notice", 1), (2, "import", "schedule", 2),
        (3, "import", "schedule", 3), (4, "revoke", "schedule", 2),
        (5, "import", "notice", 2),
        (6, "revoke", "notice", 2),
    ]
    assert events[-1].reason == "deleted"
    assert events[0].text == "主题：开放日\r\n- 报名：线上 🎉\r\n"  # full text kept, CRLF included


def test_replay_n_gives_the_state_after_n_events(history: Workspace) -> None:
    store = history.store
    assert snapshot(store.replay(0)) == {}
    assert snapshot(store.replay(1)) == {
        "notice": {1: (sha256("主题：开放日\r\n- 报名：线上 🎉\r\n"), "notice.md", False)}}
    after3 = store.replay(3)
    assert sorted(after3.versions("schedule")) == [2, 3]
    assert after3.newest("schedule").sha256 == sha256(schedule(3, "周五16:30"))  # type: ignore[union-attr]
    assert after3.seq == 3
    full = store.replay(store.event_count())
    assert snapshot(full) == snapshot(store.state)
    assert full.record("notice", 2).revoked  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="holds 6 events"):
        store.replay(7)
    with pytest.raises(ValueError):
        store.replay(-1)


def test_reopening_the_database_yields_the_same_state(history: Workspace) -> None:
    db = history.config.index_path
    before = {n: snapshot(history.store.replay(n)) for n in range(history.store.event_count() + 1)}
    history.store.close()
    reopened = Store.for_config(history.config)
    try:
        assert snapshot(reopened.state) == before[6]
        assert {n: snapshot(reopened.replay(n)) for n in range(7)} == before
        assert reopened.event_count() == 6
    finally:
        reopened.close()
    # a plain Store on the same database (default settings) agrees too
    plain = Store(db)
    try:
        assert snapshot(plain.state) == before[6]
    finally:
        plain.close()


def test_old_citations_still_check_against_replay(history: Workspace) -> None:
    text = citation_draft("schedule", 2, 5, schedule(2), "- 活动时间：周四16:30")
    now = history.check_text("answers/a.md", text, state=history.store.state)
    assert "stale-citation" in names(now)
    then = history.check_text("answers/a.md", text, state=history.store.replay(2))
    assert then.status is Status.ANSWERED and then.error_count == 0


def test_event_log_is_append_only(history: Workspace) -> None:
    backend = history.store.backend
    conn = backend.writer  # a connection that may write: only the triggers stand in the way
    with pytest.raises(backend.errors, match="append-only"):
        conn.execute("UPDATE events SET doc_id = 'forged' WHERE seq = 1")
    with pytest.raises(backend.errors, match="append-only"):
        conn.execute("DELETE FROM events WHERE seq = 6")
    with pytest.raises(backend.errors, match="append-only"):
        conn.execute("DELETE FROM events")
    assert history.store.event_count() == 6


# -- incremental rescans (§4) ----------------------------------------------------------------------


def test_rescan_rereads_only_the_changed_file(make_workspace: MakeWorkspace) -> None:
    files: dict[str, str | bytes] = {f"evidence/d{i}.md": f"- 编号：{i} 🎉\r\n" for i in range(5)}
    ws = make_workspace(files, scan=False)
    first = ws.scan()
    assert sorted(first.changed) == [f"d{i}.md" for i in range(5)]
    assert len(first.events) == 5
    write_files(ws.config.root, {"evidence/d3.md": "- 编号：三十三\r\n"})
    second = ws.scan()
    assert second.changed == ["d3.md"]
    assert second.hashed_bytes == len("- 编号：三十三\r\n".encode())
    assert [(e.kind, e.doc_id, e.version) for e in second.events] == [("import", "d3", 2)]


def _cold_corpus() -> dict[str, str | bytes]:
    """Thirty documents (CJK, emoji, CRLF), an archive before its newer file, and an undeclared
    file before a declared duplicate of its doc_id.
    """
    files: dict[str, str | bytes] = {
        f"evidence/d{i:02}.md": f"---\r\ndoc_id: 文档-{i}\r\n---\r\n- 编号：{i} 𠮷🎉\r\n- 地点：{i}楼\r\n"
        for i in range(30)}
    files["evidence/archive/notice-v1.md"] = "---\ndoc_id: 通知\nversion: 1\n---\n- 报名：线上\n"
    files["evidence/notice.md"] = "---\ndoc_id: 通知\nversion: 2\n---\n- 报名：线下 🎉\n"
    files["evidence/a-dup.md"] = "---\ndoc_id: 重复\n---\n- 时间：周一\n"
    files["evidence/z-dup.md"] = "---\ndoc_id: 重复\nversion: 3\n---\n- 时间：周二\n"
    return files


def test_cold_index_reads_every_new_document_once(make_workspace: MakeWorkspace,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # a scan cache far smaller than one document: nothing read can wait in it for the import
    monkeypatch.setattr(store_module, "FRESH_CHARS", 8)
    files = _cold_corpus()
    ws = make_workspace(files, scan=False)
    cold = ws.scan()
    assert cold.hashed_bytes == sum(len(str(t).encode()) for t in files.values())
    assert len(cold.changed) == len(files)
    # only the later file of a doc_id seen earlier in the scan is imported at the end (read again)
    assert cold.read_again == 1
    state = cold.snapshot
    assert {v: (r.path, r.revoked) for v, r in state.versions("通知").items()} == {
        1: ("archive/notice-v1.md", False), 2: ("notice.md", False)}
    assert state.newest("通知").path == "notice.md"  # type: ignore[union-attr]
    assert {v: r.path for v, r in state.versions("重复").items()} == {1: "a-dup.md"}
    assert names(cold.evidence["a-dup.md"]) == names(cold.evidence["z-dup.md"]) == ["duplicate-doc-id"]
    assert "this file is indexed" in cold.evidence["a-dup.md"][0].message
    assert [r.path for r in state.versions("文档-7").values()] == ["d07.md"]
    imports = [e for e in cold.events if e.kind == "import"]
    assert len(imports) == 33 and len({(e.doc_id, e.version) for e in imports}) == 33
    # per doc_id the imports keep path order (the archive's version before the newer file's)
    assert [e.path for e in imports if e.doc_id == "通知"] == ["archive/notice-v1.md", "notice.md"]


def test_cold_index_resolves_doc_ids_like_a_scan_that_keeps_every_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_location: Callable[[Path, str], str]) -> None:
    """The same folder indexed with a cache that holds every document and with one that holds
    none: the same versions, findings and log (up to the order of different doc_ids' events).
    """
    states = []
    for n, chars in enumerate((10_000_000, 8)):
        monkeypatch.setattr(store_module, "FRESH_CHARS", chars)
        root = tmp_path / f"ws{n}"
        write_files(root, _cold_corpus())
        monkeypatch.setenv("GROUNDING_INDEX", store_location(root, "index"))  # a fresh index each
        ws = Workspace.open(root)
        try:
            result = ws.scan()
            state = result.snapshot
            by_doc: dict[str, list[tuple[str, int, str]]] = {}
            for e in result.events:
                by_doc.setdefault(e.doc_id, []).append((e.kind, e.version, e.path))
            states.append((snapshot(state), by_doc,
                           {p: [(f.name, f.message) for f in fs] for p, fs in result.evidence.items()}))
        finally:
            ws.store.close()
    assert states[0] == states[1]


def test_new_documents_in_a_rescan_are_read_once(make_workspace: MakeWorkspace,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "FRESH_CHARS", 8)  # holds one document
    ws = make_workspace({"evidence/a-old.md": "---\ndoc_id: 旧\n---\n- 地点：二楼\n",
                         "evidence/b-old.md": "- 地点：一楼\n"})
    write_files(ws.config.root, {
        "evidence/a-old.md": "---\ndoc_id: 旧\n---\n- 地点：五楼\n",
        "evidence/b-old.md": "- 地点：六楼 𠮷\r\n",
        "evidence/new-a.md": "---\ndoc_id: 新\n---\n- 地点：三楼 🎉\r\n",
        "evidence/new-b.md": "---\ndoc_id: 另一个\n---\n- 地点：四楼\n"})
    again = ws.scan()
    assert sorted(again.changed) == ["a-old.md", "b-old.md", "new-a.md", "new-b.md"]
    # the new doc_ids are imported as read; the known ones' new contents are decided at the
    # end against their stored versions, and the first of them no longer fits the cache
    assert again.read_again == 1
    assert sorted((e.kind, e.doc_id, e.version) for e in again.events) == [
        ("import", "b-old", 2), ("import", "另一个", 1), ("import", "新", 1), ("import", "旧", 2)]
    assert again.snapshot.newest("旧").path == "a-old.md"  # type: ignore[union-attr]


def test_rescan_of_untouched_evidence_reads_nothing_and_appends_nothing(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/a.md": schedule(2), "evidence/b.md": "- 地点：二楼\n"})
    count = ws.store.event_count()
    again = ws.scan()
    assert again.changed == [] and again.events == [] and again.hashed_bytes == 0
    assert ws.store.event_count() == count


def test_touched_but_unchanged_file_is_rehashed_without_events(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/a.md": schedule(2)})
    path = ws.config.evidence_root / "a.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    again = ws.scan()
    assert again.changed == ["a.md"]
    assert again.events == []
    assert ws.scan().changed == []  # the new mtime is remembered


# -- versions (§3) ---------------------------------------------------------------------------------


def test_declared_version_bump_makes_old_citations_stale_and_reanchor_fixes_them(
        make_workspace: MakeWorkspace) -> None:
    v2 = schedule(2)
    ws = make_workspace({"evidence/schedule.md": v2})
    draft = citation_draft("schedule", 2, 5, v2, "- 活动时间：周四16:30")
    assert check(ws, "answers/a.md", draft).error_count == 0
    v3 = schedule(3, extra="- 新增：签到 🎉\r\n")  # the cited line moves to line 6
    write_files(ws.config.root, {"evidence/schedule.md": v3})
    ws.scan()
    report = check(ws, "answers/a.md", draft)
    stale = only(report, "stale-citation")
    assert errors(report) == ["stale-citation"]
    assert stale.fix is not None
    assert stale.fix.new_text == f'schedule@3:6 sha256:{sha256(v3)[:12]} "- 活动时间：周四16:30"'
    fixed = apply_edits(draft, [f.fix for f in report.findings if f.fix is not None])
    assert fixed.endswith(f'[^1]: schedule@3:6 sha256:{sha256(v3)[:12]} "- 活动时间：周四16:30"\r\n')
    after = check(ws, "answers/a.md", fixed)
    assert after.error_count == 0
    assert after.status is Status.ANSWERED


def test_automatic_version_increments_when_content_changes(make_workspace: MakeWorkspace) -> None:
    v1 = schedule(None)
    ws = make_workspace({"evidence/schedule.md": v1})
    draft = citation_draft("schedule", 1, 1, v1, "- 活动时间：周四16:30")
    assert check(ws, "answers/a.md", draft).error_count == 0
    v2 = "# 开放日\r\n" + v1
    write_files(ws.config.root, {"evidence/schedule.md": v2})
    scan = ws.scan()
    assert [(e.kind, e.version, e.declared) for e in scan.events] == [("import", 2, False)]
    assert not scan.state.record("schedule", 1).revoked  # type: ignore[union-attr]  # superseded
    report = check(ws, "answers/a.md", draft)
    assert errors(report) == ["stale-citation"]
    fixed = apply_edits(draft, [f.fix for f in report.findings if f.fix is not None])
    assert "schedule@2:2 " in fixed
    assert check(ws, "answers/a.md", fixed).error_count == 0
    # unchanged content keeps the version
    assert ws.scan().events == []


def test_stale_citation_whose_line_is_gone_has_no_fix(make_workspace: MakeWorkspace) -> None:
    v2 = schedule(2)
    ws = make_workspace({"evidence/schedule.md": v2})
    write_files(ws.config.root, {"evidence/schedule.md": schedule(3, "周五16:30")})
    ws.scan()
    report = check(ws, "answers/a.md", citation_draft("schedule", 2, 5, v2, "- 活动时间：周四16:30"))
    assert only(report, "stale-citation").fix is None


def test_version_reuse_warns_and_old_hash_citation_is_hash_mismatch(
        make_workspace: MakeWorkspace) -> None:
    old = schedule(2)
    ws = make_workspace({"evidence/schedule.md": old})
    draft = citation_draft("schedule", 2, 5, old, "- 活动时间：周四16:30")
    new = schedule(2, extra="- 新增：签到\r\n")  # same declared version, line 5 is now another fact
    write_files(ws.config.root, {"evidence/schedule.md": new})
    scan = ws.scan()
    assert [(e.kind, e.version) for e in scan.events] == [("import", 2)]
    warning = only(scan.evidence["schedule.md"], "version-reuse")
    assert warning.effective_severity is Severity.WARNING
    assert sha256(old)[:12] in warning.message
    assert scan.state.record("schedule", 2).previous_shas == (sha256(old),)  # type: ignore[union-attr]
    # the log keeps both contents
    assert [e.sha256 for e in ws.store.events()] == [sha256(old), sha256(new)]
    report = check(ws, "answers/a.md", draft)
    mismatch = only(report, "hash-mismatch")
    assert "older content of this same version" in mismatch.message
    # the re-anchor follows the quoted line to its new number, never to the fact now on line 5
    assert mismatch.fix is not None
    assert mismatch.fix.new_text == f'schedule@2:6 sha256:{sha256(new)[:12]} "- 活动时间：周四16:30"'
    fixed = apply_edits(draft, [f.fix for f in report.findings if f.fix is not None])
    assert check(ws, "answers/a.md", fixed).error_count == 0


def test_deleting_a_file_revokes_it_and_citations_become_inactive(
        make_workspace: MakeWorkspace) -> None:
    content = schedule(2)
    ws = make_workspace({"evidence/schedule.md": content, "evidence/other.md": "- 地点：二楼\r\n"})
    (ws.config.evidence_root / "schedule.md").unlink()
    scan = ws.scan()
    assert [(e.kind, e.doc_id, e.version, e.reason) for e in scan.events] == [
        ("revoke", "schedule", 2, "deleted")]
    assert scan.changed == []
    report = check(ws, "answers/a.md", citation_draft("schedule", 2, 5, content, "- 活动时间：周四16:30"))
    assert errors(report) == ["inactive-source"]
    assert "deleted" in only(report, "inactive-source").message
    # restoring the same bytes makes it active again under the same version
    write_files(ws.config.root, {"evidence/schedule.md": content})
    assert [(e.kind, e.version) for e in ws.scan().events] == [("import", 2)]
    report = check(ws, "answers/a.md", citation_draft("schedule", 2, 5, content, "- 活动时间：周四16:30"))
    assert report.error_count == 0


def test_status_revoked_in_front_matter_is_a_revoke_event(make_workspace: MakeWorkspace) -> None:
    content = "---\ndoc_id: canteen\nstatus: revoked\n---\n- 开放时间：6:30\n"
    ws = make_workspace({"evidence/canteen.md": content})
    assert [(e.kind, e.reason) for e in ws.store.events()] == [
        ("import", ""), ("revoke", "status: revoked")]
    assert ws.scan().events == []


# -- line splitting, encodings and odd files (§3) -----------------------------------------------


def test_u2028_does_not_split_an_evidence_line(make_workspace: MakeWorkspace) -> None:
    content = "主题：开放日\r\n- 说明：第一段\u2028第二段\u0085第三段\x0c完\r\n- 活动时间：周四16:30\r\n"
    ws = make_workspace({"evidence/notes.md": content})
    doc = ws.store.state.document(ws.store.state.newest("notes"))  # type: ignore[arg-type]
    assert len(doc.lines) == 3
    assert doc.field_lines[2].value == "第一段\u2028第二段\u0085第三段\x0c完"
    # the line after it is line 3
    draft = citation_draft("notes", 1, 3, content, "- 活动时间：周四16:30")
    assert check(ws, "answers/a.md", draft).error_count == 0
    # a quote holding U+2028 verifies
    quote = "- 说明：第一段\u2028第二段\u0085第三段\x0c完"
    draft = citation_draft("notes", 1, 2, content, quote, sentence="说明：第一段第二段第三段完")
    report = check(ws, "answers/a.md", draft)
    assert errors(report) == [], names(report)


def test_bom_and_crlf_evidence_verifies_and_is_hashed_raw(make_workspace: MakeWorkspace) -> None:
    raw = "\ufeff---\r\ndoc_id: fee\r\n---\r\n- 费用：免费 🎉\r\n".encode()
    assert raw.startswith(b"\xef\xbb\xbf")
    ws = make_workspace({"evidence/fee.md": raw})
    record = ws.store.state.newest("fee")
    assert record is not None
    assert record.sha256 == sha256(raw)  # of the raw bytes, BOM included
    assert ws.store.state.document(record).text.startswith("---")  # BOM removed before parsing
    doc = ws.store.state.document(record)
    assert doc.lines[3] == "- 费用：免费 🎉"
    assert all("\r" not in line for line in doc.lines)
    text = (
        "---\r\nfields: [费用]\r\n---\r\n费用：免费 🎉[^1]\r\n\r\n"
        f'[^1]: fee@1:4 sha256:{sha256(raw)[:12]} "- 费用：免费 🎉"\r\n'
    )
    report = check(ws, "answers/a.md", text)
    assert report.error_count == 0 and report.status is Status.ANSWERED
    # a hash of the text without the BOM is not the file's hash
    wrong = text.replace(sha256(raw)[:12], sha256(raw[3:])[:12])
    assert errors(check(ws, "answers/a.md", wrong)) == ["hash-mismatch"]


def test_cr_only_line_ends_split_lines(make_workspace: MakeWorkspace) -> None:
    content = "主题：旧文件\r- 地点：一楼\r"
    ws = make_workspace({"evidence/old.md": content})
    text = citation_draft("old", 1, 2, content, "- 地点：一楼", sentence="地点是一楼")
    text = text.replace("fields: [活动时间]", "fields: [地点]")
    assert check(ws, "answers/a.md", text).error_count == 0


def test_symlink_escaping_the_evidence_root_is_refused_and_never_read(
        make_workspace: MakeWorkspace, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text("- 机密：绝密内容ZQX\n", encoding="utf-8")
    ws = make_workspace({"evidence/ok.md": "- 地点：二楼\n"}, scan=False)
    (ws.config.evidence_root / "escape.md").symlink_to(outside)
    (ws.config.evidence_root / "relative.md").symlink_to(os.path.relpath(outside, ws.config.evidence_root))
    scan = ws.scan()
    for name in ("escape.md", "relative.md"):
        finding = only(scan.evidence[name], "unreadable-evidence")
        assert "outside the evidence root" in finding.message
    assert scan.state.doc_ids() == ["ok"]
    assert "escape.md" not in scan.changed and "relative.md" not in scan.changed
    ws.store.build_fts()
    dump = "\n".join(str(r) for r in rows(ws, "SELECT * FROM events"))
    dump += "\n".join(str(r) for r in rows(ws, "SELECT * FROM files"))
    dump += "\n".join(str(r) for r in rows(ws, "SELECT text FROM lines_fts"))
    assert "绝密" not in dump and "ZQX" not in dump
    assert ws.store.search("绝密内容ZQX") == []


def test_symlink_to_a_file_inside_the_root_is_indexed_once_under_its_target(
        make_workspace: MakeWorkspace) -> None:
    content = "- 房间：A101 🎉\r\n"
    ws = make_workspace({"evidence/sub/room.md": content}, scan=False)
    (ws.config.evidence_root / "alias.md").symlink_to(ws.config.evidence_root / "sub" / "room.md")
    (ws.config.evidence_root / "zlink.md").symlink_to("sub/room.md")
    scan = ws.scan()
    assert scan.state.doc_ids() == ["sub/room"]
    assert scan.changed == ["sub/room.md"]
    assert [(e.doc_id, e.path) for e in scan.events] == [("sub/room", "sub/room.md")]
    assert "duplicate-doc-id" not in [f.name for fs in scan.evidence.values() for f in fs]


def test_symlinked_folders_are_not_followed(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/real/a.md": "- 地点：二楼\n", "elsewhere/b.md": "- 地点：三楼\n"},
                        scan=False)
    (ws.config.evidence_root / "linked").symlink_to(ws.config.root / "elsewhere",
                                                    target_is_directory=True)
    (ws.config.evidence_root / "again").symlink_to(ws.config.evidence_root / "real",
                                                   target_is_directory=True)
    assert ws.scan().state.doc_ids() == ["real/a"]


@pytest.mark.parametrize("data, why", [
    ("- 地点：二楼\n".encode("gb18030"), "not valid UTF-8"),
    (b"- \xe5\x9c\xb0\xe7\x82\xb9\xef\xbc\x9a\x00\n", "NUL byte"),
    ("- 地点：二楼\n".encode("utf-16"), "NUL byte"),
], ids=["gb18030", "nul-byte", "utf-16"])
def test_unreadable_evidence_is_reported_and_neighbours_still_verify(
        make_workspace: MakeWorkspace, data: bytes, why: str) -> None:
    good = schedule(2)
    ws = make_workspace({"evidence/bad.md": data, "evidence/schedule.md": good})
    scan = ws.scan()
    finding = only(scan.evidence["bad.md"], "unreadable-evidence")
    assert why in finding.message
    assert finding.effective_severity is Severity.WARNING
    assert scan.state.doc_ids() == ["schedule"]
    report = check(ws, "answers/a.md", citation_draft("schedule", 2, 5, good, "- 活动时间：周四16:30"))
    assert report.error_count == 0 and report.status is Status.ANSWERED


def test_special_token_text_in_evidence_is_plain_text_and_citable(make_workspace: MakeWorkspace) -> None:
    content = "- 口令：<|endoftext|> 🎉\r\n"
    ws = make_workspace({"evidence/token.md": content})
    text = (
        "---\r\nfields: [口令]\r\n---\r\n口令是<|endoftext|> 🎉[^1]。\r\n\r\n"
        f'[^1]: token@1:1 sha256:{sha256(content)[:12]} "- 口令：<|endoftext|> 🎉"\r\n'
    )
    report = check(ws, "answers/a.md", text)
    assert report.findings and report.error_count == 0
    assert report.status is Status.ANSWERED
    assert ws.store.search("endoftext")[0].doc_id == "token"


def test_full_text_search_finds_cjk_lines_of_newest_versions(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": schedule(2)})
    write_files(ws.config.root, {"evidence/schedule.md": schedule(3, "周五16:30")})
    ws.scan()
    hits = ws.store.search("活动时间")
    assert [(h.doc_id, h.version, h.line, h.text) for h in hits] == [
        ("schedule", 3, 5, "- 活动时间:周五16:30")]  # the hit's text is the NFKC line
    assert [h.line for h in ws.store.search("地点")] == [6]  # two code points: substring fallback


# -- duplicates and front matter (§3) --------------------------------------------------------------


def test_duplicate_doc_id_without_versions_reports_both_and_indexes_the_first(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({
        "evidence/b.md": "---\ndoc_id: dup\n---\n- 活动时间：周四16:30\n",
        "evidence/a.md": "---\ndoc_id: dup\n---\n- 活动时间：周五 🎉\n",
    })
    scan = ws.scan()
    for path in ("a.md", "b.md"):
        finding = only(scan.evidence[path], "duplicate-doc-id")
        assert finding.effective_severity is Severity.ERROR
        assert pos(finding)[:2] == (1, 1)
    assert "only evidence/a.md is indexed" in scan.evidence["b.md"][0].message
    assert [(v, r.path) for v, r in scan.state.versions("dup").items()] == [(1, "a.md")]


def test_duplicate_doc_id_keeps_the_path_first_by_code_point(make_workspace: MakeWorkspace) -> None:
    # by code point 乙 (U+4E59) < 甲 (U+7532) and "B" < "a", whatever a locale would say
    ws = make_workspace({
        "evidence/甲.md": "---\ndoc_id: 通知\n---\n- 地点：甲\n",
        "evidence/乙.md": "---\ndoc_id: 通知\n---\n- 地点：乙\n",
        "evidence/a.md": "---\ndoc_id: case\n---\n- 地点：a\n",
        "evidence/B.md": "---\ndoc_id: case\n---\n- 地点：B\n",
    })
    state = ws.store.state
    assert [r.path for r in state.versions("通知").values()] == ["乙.md"]
    assert [r.path for r in state.versions("case").values()] == ["B.md"]


def test_duplicate_doc_id_when_one_file_declares_no_version(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({
        "evidence/x/1.md": "---\ndoc_id: dup\nversion: 1\n---\n- 地点：一楼\n",
        "evidence/x/2.md": "---\ndoc_id: dup\n---\n- 地点：二楼\n",
    })
    scan = ws.scan()
    assert names(scan.evidence["x/1.md"]) == names(scan.evidence["x/2.md"]) == ["duplicate-doc-id"]
    assert [r.path for r in scan.state.versions("dup").values()] == ["x/1.md"]


def test_distinct_declared_versions_are_an_archive_not_duplicates(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({
        "evidence/archive/v1.md": "---\ndoc_id: hours\nversion: 1\n---\n- 开放时间：8:00\n",
        "evidence/hours.md": "---\ndoc_id: hours\nversion: 2\n---\n- 开放时间：9:00\n",
        "evidence/same-a.md": "---\ndoc_id: pair\nversion: 4\n---\n- 地点：一楼\n",
        "evidence/same-b.md": "---\ndoc_id: pair\nversion: 4\n---\n- 地点：二楼\n",
    })
    scan = ws.scan()
    assert scan.evidence["archive/v1.md"] == [] and scan.evidence["hours.md"] == []
    assert sorted(scan.state.versions("hours")) == [1, 2]
    assert names(scan.evidence["same-a.md"]) == names(scan.evidence["same-b.md"]) == ["duplicate-doc-id"]
    assert [r.path for r in scan.state.versions("pair").values()] == ["same-a.md"]


def fm(body: str) -> str:
    return "---\n" + body + "\n---\n- 活动时间：周四\n"


@pytest.mark.parametrize("name, content, line, message", [
    ("unclosed.md", "---\ndoc_id: x\n- 活动时间：周四\n", 1, "never closed"),
    ("yaml.md", fm("doc_id: [x\ntitle: y"), 3, "not valid YAML"),
    ("repeat.md", fm("doc_id: a1\ntitle: t\ndoc_id: a2"), 4, "'doc_id' is repeated"),
    ("null.md", fm("doc_id: n1\nsubject: null"), 3, "subject is empty or null"),
    ("tilde.md", fm("doc_id: n1\ntitle: ~"), 3, "title is empty or null"),
    ("empty.md", fm("doc_id: n2\ntitle:"), 3, "title is empty or null"),
    ("version.md", fm("doc_id: v1\nversion: 02"), 3, "'02' is not a positive integer"),
    ("version0.md", fm("doc_id: v0\nversion: 0"), 3, "'0' is not a positive integer"),
    ("at.md", fm("doc_id: a@b"), 2, "holds whitespace, '@'"),
    ("colon.md", fm("doc_id: 'a:b'"), 2, "holds whitespace"),
    ("status.md", fm("doc_id: s1\nstatus: archived"), 3, "neither 'active' nor 'revoked'"),
    ("date.md", fm("doc_id: d1\neffective_until: 2026-02-30"), 3, "not an ISO date"),
    ("list.md", fm("doc_id: [a, b]"), 2, "must be a single value"),
    ("my file.md", "- 活动时间：周四\n", 1, "default doc_id 'my file'"),
])
def test_invalid_front_matter_is_reported_and_the_file_not_indexed(
        make_workspace: MakeWorkspace, name: str, content: str, line: int, message: str) -> None:
    ws = make_workspace({f"evidence/{name}": content, "evidence/fine.md": "- 地点：二楼\n"})
    scan = ws.scan()
    finding = only(scan.evidence[name], "invalid-front-matter")
    assert message in finding.message
    assert finding.span.start_line + 1 == line
    assert finding.effective_severity is Severity.ERROR
    assert scan.state.doc_ids() == ["fine"]


def test_front_matter_strings_stay_as_written(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/x.md": fm("doc_id: 007\ntitle: 12:30\nversion: '3'\nextra: [1, 2]")})
    record = ws.store.state.newest("007")
    assert record is not None and record.version == 3 and record.declared
    assert ws.store.state.document(record).title == "12:30"


def test_parse_evidence_is_pure_and_raises_named_errors() -> None:
    doc = parse_evidence("a/b.md", "\ufeff- 活动时间：周四16:30\r\n".encode())
    assert doc.doc_id == "a/b" and doc.lines == ("- 活动时间：周四16:30",)
    assert doc.field_lines[1].field == "活动时间"
    with pytest.raises(EvidenceError) as info:
        parse_evidence("bad.md", b"\xff")
    assert info.value.name == "unreadable-evidence"


def test_scanning_and_checking_never_write_evidence(make_workspace: MakeWorkspace) -> None:
    files: dict[str, str | bytes] = {
        "evidence/schedule.md": schedule(2), "evidence/bad.md": b"\xff\n",
        "evidence/fm.md": "---\ndoc_id: a@b\n---\n", "evidence/bom.md": "\ufeff- 费用：免费\r\n",
    }
    ws = make_workspace(files, scan=False)
    root = ws.config.evidence_root
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}
    ws.scan()
    ws.scan()
    check(ws, "answers/a.md", citation_draft("schedule", 2, 5, schedule(2), "- 活动时间：周四16:31"))
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}
    assert after == before


def test_unreadable_draft_is_one_malformed_citation_on_line_one(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": schedule(2), "answers/gbk.md": "活动时间".encode("gbk")})
    report = ws.check_file("answers/gbk.md")
    assert names(report) == ["malformed-citation"]
    assert pos(report.findings[0])[:2] == (1, 1)
    assert report.status is Status.ABSTAIN


@pytest.mark.sqlite_only  # PRAGMA temp_store: the SQLite readers' setting
def test_readers_sort_large_results_in_temp_files_and_answer_the_same(make_workspace: MakeWorkspace) -> None:
    """A reader's corpus-wide sort (``conflicting_keys``) may spill to a temp file instead of
    holding the whole sort in memory; the writer keeps its sorts in memory; answers agree.
    """
    files: dict[str, str | bytes] = {
        f"evidence/d{i:03d}.md": f"---\ndoc_id: d{i:03d}\nsubject: 开放日🎉\n---\n- 活动时间：周{i % 3}16:30\r\n"
        for i in range(30)}
    ws = make_workspace(files)
    backend = ws.store.backend
    assert backend.reader().execute("PRAGMA temp_store").fetchone()[0] == 1  # FILE
    assert backend.writer.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
    snapshot = ws.store.snapshot()
    today = ws.config.today_or()
    assert snapshot.conflicting_keys(today) == [("开放日🎉", "活动时间")]
    summary = snapshot.key_summary(("开放日🎉", "活动时间"), today)
    assert [(g.spelled, g.count) for g in summary.values] == [("周016:30", 10), ("周116:30", 10), ("周216:30", 10)]
