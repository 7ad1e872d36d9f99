"""An index that cannot be written (a full disk, here a file size limit: ``ulimit -f``), through
the real command line and the real SQLite file (README "What Grounding guarantees": a crash
loses nothing; never a traceback). The scan rolls back, ``grounding check`` answers from the
index as last committed and says so, ``grounding index`` exits 2 naming the cause, and no
write lock is left behind.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sqlite3
import subprocess
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness

from .helpers import PYTHON, SERVER_ENV
from .test_hardening_adversary import DRAFT, grounding, workspace

LIMIT_BYTES = 400_000
"""RLIMIT_FSIZE for the limited runs: more than the indexed workspace, less than 300 more files."""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


def limited(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``grounding ARGS`` under a file size limit (Python ignores SIGXFSZ: writes fail with EFBIG)."""
    return subprocess.run([PYTHON, "-m", "grounding.cli", *args], cwd=ws, capture_output=True,
                          env={**SERVER_ENV, "PYTHONIOENCODING": "utf-8"}, timeout=300,
                          encoding="utf-8", preexec_fn=_limited)


def crowded(tmp_path: Path) -> Path:
    """An indexed workspace, then 300 new evidence files that cannot fit under the limit."""
    ws = workspace(tmp_path)
    assert grounding(ws, "index").returncode == 0
    assert (ws / ".grounding/index.sqlite").stat().st_size < LIMIT_BYTES
    for i in range(300):
        (ws / f"evidence/f{i}.md").write_text(
            "".join(f"- 字段{j}：值{i}-{j} 🎉 𠮷\r\n" for j in range(30)), encoding="utf-8")
    return ws


def events(ws: Path) -> int:
    with sqlite3.connect(ws / ".grounding/index.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def test_check_on_an_unwritable_index_answers_from_the_committed_state(tmp_path: Path) -> None:
    ws = crowded(tmp_path)
    before = events(ws)
    proc = limited(ws, "check", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "cannot write the index" in proc.stderr and "nothing was written" in proc.stderr
    assert "checking against the index as last committed" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["drafts"][0]["status"] == "answered"
    assert events(ws) == before  # rolled back whole
    # no write lock left behind: an unlimited run indexes at once and sees every file
    free = grounding(ws, "index", "--format", "json", timeout=300)
    assert free.returncode == 0, free.stderr
    assert json.loads(free.stdout)["events_appended"] == 300


def test_index_on_an_unwritable_index_exits_2_naming_the_cause(tmp_path: Path) -> None:
    ws = crowded(tmp_path)
    before = events(ws)
    proc = limited(ws, "index")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "cannot write the index" in proc.stderr and "free disk space" in proc.stderr
    assert events(ws) == before


def test_index_that_cannot_be_opened_is_no_in_memory_success(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / ".grounding").mkdir()
    (ws / ".grounding/index.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"garbage" * 200)
    proc = grounding(ws, "index")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "nothing was indexed" in proc.stderr and ":memory:" not in proc.stdout
    check = grounding(ws, "check")  # a reading command still answers, and says why
    assert check.returncode == 0 and "using an in-memory index" in check.stderr


LIMITED_SERVER = [PYTHON, "-c", "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE,"
                  f" ({LIMIT_BYTES}, {LIMIT_BYTES})); from server.app import serve_stdio;"
                  " sys.exit(serve_stdio())"]
"""The language server under the same file size limit."""


async def test_the_server_on_an_unwritable_index_says_so_and_keeps_answering(tmp_path: Path) -> None:
    ws = crowded(tmp_path)
    before = events(ws)
    client = await harness.start(ws, "minimal", command=LIMITED_SERVER)
    try:
        uri = (ws / "answers/a.md").as_uri()
        harness.open_document(client, uri, DRAFT)
        await client.recorder.wait_until(
            lambda: any("cannot write the index" in m.message and m.type == types.MessageType.Error
                        for m in client.recorder.messages), "the unwritable-index message")
        await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), "the draft's diagnostics")
        published = client.recorder.of(uri)[-1].diagnostics
        assert not [d for d in published if d.severity == types.DiagnosticSeverity.Error], published
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(5, 12))), harness.WAIT_SECONDS)
        assert hover is not None and "周四16:30" in str(hover.contents)
        assert events(ws) == before
        # the failed commit left no write lock held: a CLI indexes at once, while the server runs
        free = grounding(ws, "index", "--format", "json", timeout=300)
        assert free.returncode == 0 and "another process" not in free.stderr, free.stderr
        assert json.loads(free.stdout)["events_appended"] == 300
        said = [e.params.message for e in client.recorder.events
                if e.method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE)]
        assert not [m for m in said if "Traceback" in m or "Error in server" in m], said
    finally:
        assert await harness.stop(client) == 0
