"""Second adversarial round (README "What Grounding guarantees"), through the real command
line: each case runs ``python -m grounding.cli`` in a workspace built under ``tmp_path``.

1. file names that are not valid UTF-8; 2. an index another process holds locked;
3. a ``.grounding`` symlink out of the workspace; 4. a lone surrogate in draft front matter;
5. ``--at`` over a fallback index; 6. huge evidence files; 8. ``log`` is read-only;
9. an index with a newer layout; and the small decisions (dates, invisible characters,
a revoked current version).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .helpers import PYTHON, SCHEDULE, SERVER_ENV, sha256, write_files

HASH = sha256(SCHEDULE)
DRAFT = ("---\nfields: [活动时间]\n---\n活动时间是周四16:30[^1]。🎉\r\n\r\n"
         f'[^1]: schedule@1:6 sha256:{HASH[:12]} "- 活动时间：周四16:30"\r\n')


def grounding(ws: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``grounding ARGS`` run in ``ws`` as a separate process (stdout must stay UTF-8 clean)."""
    return subprocess.run([PYTHON, "-m", "grounding.cli", *args], cwd=ws, capture_output=True,
                          env={**SERVER_ENV, "PYTHONIOENCODING": "utf-8"}, timeout=timeout,
                          encoding="utf-8", errors="strict")


def workspace(tmp_path: Path, **extra: str) -> Path:
    ws = tmp_path / "ws"
    write_files(ws, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/schedule.md": SCHEDULE,
                     "answers/a.md": DRAFT, **extra})
    return ws


def write_raw(folder: Path, name: bytes, text: str) -> None:
    """A file whose name is the raw bytes ``name`` (not necessarily UTF-8)."""
    with open(os.fsencode(folder) + b"/" + name, "wb") as handle:
        handle.write(text.encode("utf-8"))


# -- 1. file names that are not UTF-8 ----------------------------------------------------------


def test_an_evidence_file_name_in_gbk_is_its_own_finding(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_raw(ws / "evidence", "开放日.md".encode("gbk"), "- 甲：乙\n")
    for fmt in ("text", "json", "sarif"):
        proc = grounding(ws, "check", "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        shown = proc.stdout.replace("\\\\", "\\")  # JSON escapes the backslash
        assert "not valid UTF-8" in shown and "\\xbf\\xaa" in shown  # GBK of 开
        if fmt == "json":
            report = json.loads(proc.stdout)
            assert report["drafts"][0]["status"] == "answered"
            (bad,) = [e for e in report["evidence"] if e["diagnostics"]]
            assert bad["path"].startswith("evidence/\\x") and bad["diagnostics"][0]["name"] == "unreadable-evidence"
    index = grounding(ws, "index", "--format", "json")
    assert index.returncode == 0 and json.loads(index.stdout)["documents"] == 1
    cite = grounding(ws, "cite", "schedule:6")
    assert cite.returncode == 0 and "schedule@1:6" in cite.stdout, cite.stderr


def test_a_latin1_draft_name_gets_a_draft_level_finding(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_raw(ws / "answers", b"caf\xe9.md", DRAFT)
    for fmt in ("text", "json", "sarif"):
        proc = grounding(ws, "check", "--format", fmt)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "answers/caf\\xe9.md" in proc.stdout.replace("\\\\", "\\")
    report = json.loads(grounding(ws, "check", "--format", "json").stdout)
    by_path = {d["path"]: d for d in report["drafts"]}
    assert by_path["answers/a.md"]["status"] == "answered"
    bad = by_path["answers/caf\\xe9.md"]
    assert [d["name"] for d in bad["diagnostics"]] == ["malformed-citation"]
    assert "not valid UTF-8" in bad["diagnostics"][0]["message"]


# -- 2. another process holds the write lock ----------------------------------------------------


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()  # held until the test closes stdin
conn.execute("ROLLBACK")
"""


def test_check_answers_from_the_committed_index_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert grounding(ws, "check").returncode == 0  # the index exists and holds schedule@1
    (ws / "evidence/later.md").write_text("- 地点：礼堂 B\n", encoding="utf-8")
    locker = subprocess.Popen([PYTHON, "-c", LOCKER, str(ws / ".grounding/index.sqlite")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
        proc = grounding(ws, "check", "--format", "json")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "another process is writing the index" in proc.stderr and "last committed" in proc.stderr
        report = json.loads(proc.stdout)
        assert report["drafts"][0]["status"] == "answered"
        assert "evidence/later.md" not in [e["path"] for e in report["evidence"]]  # not scanned
        conflicts = grounding(ws, "conflicts")
        assert conflicts.returncode == 0 and "Traceback" not in conflicts.stderr
    finally:
        assert locker.stdin is not None
        locker.stdin.close()
        locker.wait(30)
    after = json.loads(grounding(ws, "check", "--format", "json").stdout)
    assert "evidence/later.md" in [e["path"] for e in after["evidence"]]  # the next scan catches up


def test_cite_says_it_waits_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    """tryout5 #6: cite used to wait silently (up to 30 s) for another process's indexing."""
    ws = workspace(tmp_path)
    assert grounding(ws, "check").returncode == 0  # the index exists
    locker = subprocess.Popen([PYTHON, "-c", LOCKER, str(ws / ".grounding/index.sqlite")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
        cite = subprocess.Popen([PYTHON, "-m", "grounding.cli", "cite", "schedule:6"], cwd=ws,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**SERVER_ENV, "PYTHONIOENCODING": "utf-8"})
        assert cite.stderr is not None
        note = cite.stderr.readline()  # printed while the lock is still held
        assert "another process is writing the index" in note and "cite waits for it" in note, note
        assert cite.poll() is None  # still waiting, not answering from a stale state
    finally:
        assert locker.stdin is not None
        locker.stdin.close()
        locker.wait(30)
    out, err = cite.communicate(timeout=60)
    assert cite.returncode == 0 and "schedule@1:6" in out and "Traceback" not in err, err


# -- 3. a .grounding symlink out of the workspace -------------------------------------------------


def test_a_dot_grounding_symlink_out_of_the_workspace_is_a_configuration_error(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".grounding").symlink_to(elsewhere)
    proc = grounding(ws, "check")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "index = '.grounding/index.sqlite'" in proc.stderr and "outside the workspace root" in proc.stderr
    assert list(elsewhere.iterdir()) == [] and proc.stdout == ""


def test_a_dangling_index_symlink_creates_nothing_outside(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / ".grounding").mkdir()
    (ws / ".grounding/index.sqlite").symlink_to(tmp_path / "nonexistent.sqlite")
    proc = grounding(ws, "check")
    assert proc.returncode == 2 and "outside the workspace root" in proc.stderr, proc.stderr
    assert not (tmp_path / "nonexistent.sqlite").exists()
    assert not list(tmp_path.glob("nonexistent.sqlite*"))


# -- 9. an index written by a newer Grounding -----------------------------------------------------


def test_an_index_with_a_newer_layout_is_refused_and_left_alone(tmp_path: Path) -> None:
    import sqlite3

    from grounding_core.sqlite_backend import LAYOUT

    ws = workspace(tmp_path)
    assert grounding(ws, "index").returncode == 0
    index = ws / ".grounding/index.sqlite"
    db = sqlite3.connect(index)
    db.execute("PRAGMA user_version = 99")
    db.execute("ALTER TABLE events ADD COLUMN future TEXT NOT NULL DEFAULT 'x'")
    db.commit()
    db.close()
    for name in list((ws / ".grounding").iterdir()):
        if name.name.endswith(("-wal", "-shm")):
            name.unlink()
    before = index.read_bytes()
    (ws / "evidence/schedule.md").write_text(SCHEDULE.replace("周四", "周五"), encoding="utf-8")
    for args in (("check",), ("index",), ("log",)):
        proc = grounding(ws, *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "written by a newer Grounding (layout 99)" in proc.stderr
        assert f"this one reads layout {LAYOUT}" in proc.stderr and "in-memory" not in proc.stderr
    assert index.read_bytes() == before


# -- 10. a NUL in a document URI ------------------------------------------------------------------


def test_a_path_with_a_nul_is_no_draft(tmp_path: Path) -> None:
    from grounding_core.workspace import Workspace
    from server.session import _fs_path

    ws = Workspace.open(workspace(tmp_path))
    try:
        assert ws.is_draft("answers/a.md") and not ws.is_draft("answers/\0.md")
        assert _fs_path((tmp_path / "ws").as_uri() + "/answers/%00.md") is None
        assert _fs_path((tmp_path / "ws").as_uri() + "/answers/a.md") == tmp_path / "ws/answers/a.md"
    finally:
        ws.store.close()


# -- 8. grounding log is read-only ----------------------------------------------------------------


def test_log_never_appends_and_shows_paths_as_stored(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert grounding(ws, "index").returncode == 0
    write_files(ws, {"other/z.md": "- 甲：乙 🎉\r\n"})
    before = json.loads(grounding(ws, "log", "--format", "json").stdout)
    assert [(e["doc_id"], e["path"]) for e in before] == [("schedule", "schedule.md")]
    for _ in range(2):  # another evidence folder, and a changed file: log still reads only
        assert json.loads(grounding(ws, "log", "--evidence", "other", "--format", "json").stdout) == before
    (ws / "evidence/schedule.md").write_text(SCHEDULE.replace("周四", "周五"), encoding="utf-8")
    text = grounding(ws, "log")
    assert text.returncode == 0 and "1 event(s)" in text.stdout and "schedule@1 sha256:" in text.stdout
    assert grounding(ws, "index", "--evidence", "other").returncode == 0
    after = json.loads(grounding(ws, "log", "--format", "json").stdout)
    assert ("z", "z.md") in [(e["doc_id"], e["path"]) for e in after]
    assert after[0]["path"] == "schedule.md"  # as stored, not under the current folder


# -- 5. --at over a fallback index ----------------------------------------------------------------


def test_at_is_refused_when_the_index_fell_back_to_memory(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert grounding(ws, "index").returncode == 0
    (ws / "evidence/schedule.md").write_text(SCHEDULE.replace("周四", "周五"), encoding="utf-8")
    assert grounding(ws, "index").returncode == 0
    assert grounding(ws, "check", "--at", "1").returncode == 0  # the healthy index: schedule@1 is current
    index = ws / ".grounding/index.sqlite"
    for name in (ws / ".grounding").iterdir():
        if name.name.endswith(("-wal", "-shm")):
            name.unlink()
    index.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)  # a corrupt copy
    proc = grounding(ws, "check", "--at", "1", "--format", "json")
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert "--at 1: the index could not be opened" in proc.stderr and "in-memory" in proc.stderr
    plain = grounding(ws, "check", "--format", "json")  # without --at the fallback still checks
    assert plain.returncode == 1 and "using an in-memory index" in plain.stderr


# -- 4. a lone surrogate in draft front matter (an editor buffer) ---------------------------------


def test_a_lone_surrogate_in_draft_front_matter_is_malformed_citation() -> None:
    from grounding_core.drafts import parse_draft

    for where in ("question: 开放日\ud83d\n", "subject: \udc00🎉\n"):
        draft = parse_draft(DRAFT.replace("fields:", where + "fields:"), "markdown")
        (finding,) = [f for f in draft.findings if "lone surrogate" in f.message]
        assert finding.name == "malformed-citation" and finding.span.start_line == 0
        assert "line 2" in finding.message and draft.fields == []


# -- 6. a huge evidence file ----------------------------------------------------------------------


def test_a_huge_sparse_evidence_file_is_refused_by_its_size(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    with open(ws / "evidence/huge.md", "wb") as handle:  # 3 GB, sparse: nothing is written but the end
        handle.truncate(3 * 1024 ** 3)
    script = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30));"
              " from grounding import cli; sys.exit(cli.main(['check', '--format', 'json']))")
    # the child caps its address space at 1 GB: reading the file whole would be a MemoryError
    proc = subprocess.run([PYTHON, "-c", script], cwd=ws, capture_output=True, text=True, env=SERVER_ENV,
                          timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    (huge,) = [e for e in report["evidence"] if e["path"] == "evidence/huge.md"]
    (finding,) = huge["diagnostics"]
    assert finding["name"] == "unreadable-evidence"
    assert "3.0 GB" in finding["message"] and "64.0 MB limit" in finding["message"]
    assert report["drafts"][0]["status"] == "answered"


# -- small decisions ------------------------------------------------------------------------------


def test_front_matter_dates_in_the_wrong_order_and_invisible_doc_ids_are_invalid(tmp_path: Path) -> None:
    ws = workspace(tmp_path, **{
        "evidence/backwards.md": ("---\ndoc_id: backwards\neffective_from: 2026-06-01\n"
                                  "effective_until: 2026-01-31\n---\n- 活动时间：周五 🎉\r\n"),
        "evidence/zwsp.md": "---\ndoc_id: sched\u200bule\n---\n- 活动时间：周六\n",
    })
    report = json.loads(grounding(ws, "check", "--format", "json").stdout)
    found = {e["path"]: e["diagnostics"] for e in report["evidence"]}
    (dates,) = found["evidence/backwards.md"]
    assert dates["name"] == "invalid-front-matter" and dates["line"] == 4
    assert "2026-01-31 is earlier than effective_from 2026-06-01" in dates["message"]
    (zwsp,) = found["evidence/zwsp.md"]
    assert zwsp["name"] == "invalid-front-matter" and "'sched\\u200bule'" in zwsp["message"]
    assert report["drafts"][0]["status"] == "answered"


def test_a_stale_citation_whose_newer_version_is_revoked_says_so(tmp_path: Path) -> None:
    newer = SCHEDULE.replace("doc_id: schedule\n", "doc_id: schedule\nversion: 2\nstatus: revoked\n")
    first = SCHEDULE.replace("doc_id: schedule\n", "doc_id: schedule\nversion: 1\n")
    ws = workspace(tmp_path, **{"evidence/schedule.md": first})
    draft = DRAFT.replace(HASH[:12], sha256(first)[:12])
    write_files(ws, {"answers/a.md": draft.replace("schedule@1:6", "schedule@1:7")})
    assert grounding(ws, "check").returncode == 0
    write_files(ws, {"evidence/schedule.md": newer})
    report = json.loads(grounding(ws, "check", "--format", "json").stdout)
    (stale,) = [d for d in report["drafts"][0]["diagnostics"] if d["name"] == "stale-citation"]
    assert "version 2 of 'schedule' is newer and not active either (it is revoked" in stale["message"]
    assert "is current" not in stale["message"]


def test_a_file_just_over_the_size_limit_says_by_how_many_bytes() -> None:
    from grounding_core.scan import MAX_EVIDENCE_BYTES, TooLarge

    message = TooLarge(MAX_EVIDENCE_BYTES + 3).strerror
    assert message.startswith("it is 67,108,867 bytes, over the 64.0 MB limit (67,108,864 bytes)"), message
    assert TooLarge(3 << 30).strerror.startswith("it is 3.0 GB, over the 64.0 MB limit for evidence files")
