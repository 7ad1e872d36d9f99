"""Scan rules and the index's hardening (SPEC §4, §7.4, §7.6; issues 12 and 13).

- the stat key is size, mtime, ctime and inode: a same-size rewrite that restores mtime
  (``cp -p``, ``rsync -a``, ``tar x``) is read again (issue 13 item 1);
- a file written in chunks while scans run never becomes a half-written version (item 2);
- a draft ``subject`` never switches off the conflict check of a cited line (item 3);
- hostile text in a ``query`` context (NUL, quotes, FTS5 syntax) is searched literally and
  an unexpected failure in one draft is a finding on that draft, never a crash (item 10);
- the uncited-claim scan is near-linear in the sentence and the value (item 11);
- an evidence path longer than PATH_MAX is reported (item 14);
- saving then reverting an evidence file clears the version-reuse warning (issue 12);
- a watcher-driven scan (``paths``) reads only the named paths.
"""

from __future__ import annotations

import datetime as dt
import errno
import gc
import json
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import TODAY, MakeWorkspace, check, names, only, sha256, write_files

from grounding import cli
from grounding_core.derived import normalize_fast
from grounding_core.model import Status
from grounding_core.text import normalize
from grounding_core.workspace import Workspace

SCHEDULE = "---\ndoc_id: schedule\n---\n主题：开放日\n- 活动时间：周四16:30\n"
"""Line 5 is the 活动时间 line."""


def cite_schedule(content: str, quote: str = "- 活动时间：周四16:30", line: int = 5) -> str:
    return (f"---\nfields: [活动时间]\n---\n活动时间是{quote.split('：')[1]}[^1]。\n\n"
            f'[^1]: schedule@1:{line} sha256:{sha256(content)[:12]} "{quote}"\n')


# -- the stat key (issue 13 item 1) ---------------------------------------------------------------


def test_same_size_rewrite_with_restored_mtime_is_read_again(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    path = ws.config.evidence_root / "schedule.md"
    before = path.stat()
    changed = SCHEDULE.replace("周四16:30", "周五16:30")  # same size in bytes
    assert len(changed.encode()) == before.st_size
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # what cp -p / rsync -a / tar x do
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    scan = ws.scan()
    assert scan.changed == ["schedule.md"]
    assert [(e.kind, e.version) for e in scan.events] == [("import", 2)]
    current = cite_schedule(changed, "- 活动时间：周五16:30").replace("schedule@1:5", "schedule@2:5")
    warm = check(ws, "answers/a.md", current)
    assert warm.status is Status.ANSWERED and warm.error_count == 0
    fresh = Workspace.open(ws.config.root, index=str(ws.config.root / "fresh.sqlite"))
    try:
        fresh.scan()
        cold = check(fresh, "answers/a.md", current.replace("schedule@2:5", "schedule@1:5"))
        # the warm index and a fresh one hold the same current content and agree on the draft
        assert ws.store.snapshot().newest("schedule").sha256 == sha256(changed)  # type: ignore[union-attr]
        assert fresh.store.snapshot().newest("schedule").sha256 == sha256(changed)  # type: ignore[union-attr]
        assert cold.status is warm.status and names(cold) == names(warm)
    finally:
        fresh.store.close()


# -- half-written files (issue 13 item 2) ---------------------------------------------------------


def test_a_file_written_in_chunks_never_becomes_a_half_written_version(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/other.md": "- 地点：礼堂\n"})
    path = ws.config.evidence_root / "notice.md"
    final = "".join(f"- 字段{i}：第{i}段内容🎉\n" for i in range(40))
    chunks = [final[i:i + 97].encode() for i in range(0, len(final), 97)]
    done = threading.Event()

    def writer() -> None:
        with open(path, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                handle.flush()
                time.sleep(0.03)  # a writer that pauses between chunks (a slow copy, a sync tool)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    scans = 0
    unstable = 0
    while not done.is_set():
        # short settle budgets, so several scans run while the file is being written
        result = ws.scan(paths=["notice.md"] if scans % 2 else None, settle=0.12)
        unstable += "notice.md" in result.unstable
        scans += 1
    thread.join()
    ws.scan()
    imports = [e for e in ws.store.events() if e.kind == "import" and e.doc_id == "notice"]
    assert imports, "the finished file was never indexed"
    assert {e.text for e in imports} == {final}, [len(e.text) for e in imports]
    assert scans >= 2
    print(f"\n{scans} scans while writing, {unstable} reported the file unstable")


def test_an_unstable_file_is_reported_and_keeps_its_indexed_version(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    path = ws.config.evidence_root / "schedule.md"
    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.is_set():  # no pause: the file never stays quiet for the settle window
            n += 1
            path.write_text(SCHEDULE + f"- 备注：第{n}次\n", encoding="utf-8")

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        result = ws.store.scan(ws.config, paths=["schedule.md"], settle=0.3)
    finally:
        stop.set()
        thread.join()
    if not result.unstable:  # the machine stalled the writer for 100 ms: a complete write was read
        texts = [e.text for e in ws.store.events() if e.kind == "import"][1:]
        assert all(t.startswith(SCHEDULE) and t.endswith("次\n") for t in texts)
        pytest.skip("the writer was not scheduled for the whole settle window (a loaded machine)")
    assert result.unstable == ["schedule.md"]
    assert [f.name for f in result.evidence["schedule.md"]] == ["unreadable-evidence"]
    assert "changed while it was read" in result.evidence["schedule.md"][0].message
    assert result.events == []  # nothing indexed from an unstable read; version 1 stays
    assert check(ws, "answers/a.md", cite_schedule(SCHEDULE)).error_count == 0


# -- the conflict gate keeps the cited line's key (issue 13 item 3) -------------------------------


def test_draft_subject_never_switches_off_the_check_of_a_cited_lines_key(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE,
        "evidence/poster.md": "主题：开放日\n- 活动时间：周三16:30\n",
    })
    text = cite_schedule(SCHEDULE).replace("fields: [活动时间]", "fields: [活动时间]\nsubject: 无此主题")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.CONFLICT
    assert report.same_key_sources_checked == 2  # the cited line's key (开放日, 活动时间)
    finding = only(report, "field-conflict")  # on the definition: the listed key has no lines
    assert "'周三16:30' (1 source: poster@1:2) vs '周四16:30' (1 source: schedule@1:5)" in finding.message


# -- hostile queries (issue 13 item 10) -----------------------------------------------------------

HOSTILE_QUERIES = ["活动\x00时间", '"活动时间', 'text:活动 OR "', "NEAR(活动 时间)", "活动*", "^活动",
                   "(", "'; DROP TABLE events; --", "\ud800活动"]


def test_hostile_query_contexts_are_searched_literally_through_the_cli(
        make_workspace: MakeWorkspace, capsys: pytest.CaptureFixture[str]) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    root = ws.config.root
    files: dict[str, str | bytes] = {}
    for i, query in enumerate(HOSTILE_QUERIES):
        files[f"answers/q{i}.md"] = cite_schedule(SCHEDULE).replace(
            "fields: [活动时间]", f"fields: [活动时间]\ncontext: {{query: {json.dumps(query)}, reserve: 240}}")
    answer = {"status": "abstain", "claims": [], "missing_fields": ["活动时间"], "fields": ["活动时间"],
              "context": {"query": "活动\u0000时间\ud800"}}
    files["answers/q.answer.json"] = json.dumps(answer)
    write_files(root, files)
    ws.store.close()
    code = cli.main(["check", "--root", str(root), "--format", "json", "--today", TODAY.isoformat()])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    paths = {d["path"] for d in out["drafts"]}
    assert paths == set(files)  # every draft reported, none hidden by another's failure
    for draft in out["drafts"]:
        assert all(d["name"] != "malformed-citation" or "could not check" not in d["message"]
                   for d in draft["diagnostics"]), draft
    events = sorted(n for n in os.listdir(root / ".grounding"))
    assert "index.sqlite" in events


# -- near-linear uncited-claim scan (issue 13 item 11) --------------------------------------------


def _known_term_seconds(ws: Workspace, *sizes: int) -> list[float]:
    """Best of five CPU times of this process for the known-term lookups of a value and a
    sentence of each size (an evidence file holds one value per size). Samples interleave the
    sizes, after one warm-up lookup each, with the garbage collector paused.
    """
    def text(size: int, step: int) -> str:
        return "".join(chr(0x4E00 + (i * step) % 20000) for i in range(size))

    write_files(ws.config.root, {f"evidence/big{size}.md": f"- 字段{size}：{text(size, 7919)}\n" for size in sizes})
    ws.scan()
    snapshot = ws.store.snapshot()
    cases = [(normalize("说" + text(size, 104729)), normalize(text(size, 7919))) for size in sizes]

    def lookup(sentence: str, value: str) -> None:
        assert snapshot.known_term_in(sentence, TODAY) is None
        assert snapshot.known_term_in(value, TODAY) == value

    for case in cases:
        lookup(*case)
    best = [float("inf")] * len(cases)
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            for i, case in enumerate(cases):
                started = time.process_time()
                lookup(*case)
                best[i] = min(best[i], time.process_time() - started)
    finally:
        gc.enable()
    return best


def test_uncited_claim_scan_grows_near_linearly(make_workspace: MakeWorkspace) -> None:
    """time(2n) <= 3 x time(n) for a value and a sentence of n code points (issue 13 item
    11: 12,000 of each took 142 s). A growth ratio of CPU times, never a wall-clock limit; a
    ratio above 3x must recur from 2n to 4n, so one noisy sample on a loaded machine does
    not fail it (bench/run.py reports the 1 MB figure).
    """
    ws = make_workspace({"evidence/other.md": "- 地点：礼堂\n"})
    small, large = _known_term_seconds(ws, 40_000, 80_000)
    if large > 3 * small + 0.002:  # a real superlinear scan grows again from 2n to 4n
        again, larger = _known_term_seconds(ws, 80_000, 160_000)
        assert larger <= 3 * again + 0.002, (small, large, again, larger)


# -- PATH_MAX (issue 13 item 14) ------------------------------------------------------------------


def _deep_file(root: Path, name: str, content: bytes) -> str:
    """Create ``root/<segments>/name`` whose path exceeds PATH_MAX (4096 on Linux), using
    directory file descriptors (a plain path that long cannot be opened). Returns the path
    relative to ``root``.
    """
    segment = "d" * 200
    fd = os.open(root, os.O_RDONLY)
    parts = []
    try:
        while len(str(root)) + sum(len(p) + 1 for p in parts) < 4200:
            os.mkdir(segment, dir_fd=fd)
            new = os.open(segment, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
            parts.append(segment)
        out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, content)
        os.close(out)
    finally:
        os.close(fd)
    return "/".join([*parts, name])


def test_an_evidence_path_longer_than_path_max_is_reported_not_skipped(
        make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE}, scan=False)
    rel = _deep_file(ws.config.evidence_root, "deep.md", "- 地点：深处\n".encode())
    with pytest.raises(OSError) as info:
        os.stat(ws.config.evidence_root / rel)
    assert info.value.errno == errno.ENAMETOOLONG
    scan = ws.scan()
    reported = {p: [f.message for f in fs] for p, fs in scan.evidence.items() if fs}
    assert reported, "the long path was skipped without a finding"
    (where, messages), = reported.items()
    assert rel.startswith(where) and any("PATH_MAX" in m for m in messages)
    assert ws.store.snapshot().doc_ids() == ["schedule"]
    assert check(ws, "answers/a.md", cite_schedule(SCHEDULE)).error_count == 0


# -- version reuse after save-then-revert (issue 12) ----------------------------------------------


def test_reverting_to_the_versions_original_content_clears_version_reuse(
        make_workspace: MakeWorkspace) -> None:
    original = "---\ndoc_id: schedule\nversion: 2\n---\n主题：开放日\n- 活动时间：周四16:30\n"
    ws = make_workspace({"evidence/schedule.md": original})
    draft = cite_schedule(original).replace("schedule@1:5", "schedule@2:6")
    assert check(ws, "answers/a.md", draft).error_count == 0
    edited = original.replace("周四16:30", "周四17:30")
    write_files(ws.config.root, {"evidence/schedule.md": edited})
    scan = ws.scan()
    warning = only(scan.evidence["schedule.md"], "version-reuse")
    assert sha256(original)[:12] in warning.message  # the version's original hash
    assert "hash-mismatch" in names(check(ws, "answers/a.md", draft))
    write_files(ws.config.root, {"evidence/schedule.md": original})  # revert the save
    scan = ws.scan()
    assert scan.evidence["schedule.md"] == []
    assert "schedule.md" in scan.findings_changed
    assert check(ws, "answers/a.md", draft).error_count == 0  # pinned to the original hash again
    assert ws.scan().evidence["schedule.md"] == []  # and it stays gone


# -- watcher-driven scans --------------------------------------------------------------------------


def test_a_paths_scan_reads_only_the_named_paths(make_workspace: MakeWorkspace) -> None:
    files: dict[str, str | bytes] = {f"evidence/d{i}.md": f"- 编号：{i}\n" for i in range(6)}
    files["evidence/sub/x.md"] = "- 编号：x\n"
    ws = make_workspace(files)
    write_files(ws.config.root, {"evidence/d1.md": "- 编号：一\n", "evidence/d2.md": "- 编号：二\n"})
    result = ws.scan(paths=["d1.md"])
    assert result.changed == ["d1.md"] and not result.full
    assert [(e.doc_id, e.version) for e in result.events] == [("d1", 2)]
    assert ws.store.snapshot().newest("d2").version == 1  # type: ignore[union-attr]  # not named
    (ws.config.evidence_root / "sub" / "x.md").unlink()
    (ws.config.evidence_root / "sub").rmdir()
    gone = ws.scan(paths=["sub"])  # a folder removed: its files' versions are revoked
    assert [(e.kind, e.doc_id, e.reason) for e in gone.events] == [("revoke", "sub/x", "deleted")]
    full = ws.scan()  # the full walk reconciles what the watcher did not name
    assert full.changed == ["d2.md"] and full.full


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\t", "\u3000", "１", "ｶ", "ﾞ", "e\u0301", "é", "\xa0", "\x1c",
                                  "𠮷", "，", "。", "\u2028", "ﬁ", "Ⅻ", "\u200b", "\r\n"]), max_size=12))
def test_the_fast_normalisation_is_the_spec_rule(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert normalize_fast(text) == normalize(text)


def test_a_settings_change_rebuilds_the_derived_tables_from_the_log(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/notes.md": "- Fee: free\n- 费用：免费\n"})
    assert ws.store.snapshot().subjects_with_field("Fee", TODAY) == []  # ":" is no separator
    ws.store.close()
    colon = Workspace.open(ws.config.root, field_separators=["：", ":"])
    try:
        assert colon.scan().events == []  # same files, no new events
        assert colon.store.snapshot().subjects_with_field("Fee", TODAY) == [None]
        assert colon.store.snapshot(at=1).key_summary((None, "Fee"), TODAY).total_lines == 1
    finally:
        colon.store.close()


def test_snapshots_of_every_n_need_no_rebuild(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    for minute in range(10, 20):
        write_files(ws.config.root, {"evidence/schedule.md": SCHEDULE.replace("16:30", f"16:{minute}")})
        ws.scan()
    count = ws.store.event_count()
    assert count == 11
    day = dt.date(2026, 5, 1)
    values = [ws.store.snapshot(at=n).key_summary(("开放日", "活动时间"), day).values for n in range(1, 12)]
    assert [v[0].spelled for v in values] == ["周四16:30", *(f"周四16:{m}" for m in range(10, 20))]
