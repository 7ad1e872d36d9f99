"""An index this process cannot write is read, never replaced (docs/decisions.md, "Index").

- A read-only file system (a CI cache mounted read-only; here a read-only bind mount in a
  user and mount namespace, ``unshare -rm``, skipped where the system refuses one): SQLite
  opens the index ``mode=ro`` (``immutable=1`` when no ``-shm`` file exists and none can be
  made, which is safe there), ``grounding check`` answers from the committed state with a
  note that it could not be updated, ``--at N`` works, ``grounding log`` lists the log, and
  ``grounding index`` exits 2 naming the cause. The file's bytes do not change. The language
  server (pytest-lsp) checks drafts from it and says once that it cannot be updated.
- A read-only file in a read-only folder (as a user other than root, who ignores modes).
- A reader never creates an index: once the file is deleted, a new reader connection fails
  instead of leaving an empty database behind (only the writer creates one).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from lsprotocol import types

from grounding_core.sqlite_backend import SqliteBackend
from grounding_core.workspace import Workspace
from tests.support import lsp

from .helpers import PYTHON, SERVER_ENV
from .test_hardening_adversary import grounding, workspace

CHANGED = "主题：开放日 🎉\r\n- 活动时间：周五16:30 𠮷\r\n"


def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c",
                               f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe}"],
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        probe.rmdir()
    return done.returncode == 0


def read_only_run(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``grounding ARGS`` in ``ws`` with ``ws/.grounding`` mounted read-only (its own namespace)."""
    folder = shlex.quote(str(ws / ".grounding"))
    command = " ".join(shlex.quote(a) for a in (PYTHON, "-m", "grounding.cli", *args))
    script = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec {command}"
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=ws, capture_output=True,
                          env={**SERVER_ENV, "PYTHONIOENCODING": "utf-8"}, timeout=120, encoding="utf-8")


def history(tmp_path: Path) -> Path:
    """Two indexed contents of ``schedule``: event 1 imports version 1, event 2 version 2."""
    ws = workspace(tmp_path)
    assert grounding(ws, "index").returncode == 0
    (ws / "evidence/schedule.md").write_text(CHANGED, encoding="utf-8", newline="")
    assert grounding(ws, "index").returncode == 0
    return ws


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def mountable(tmp_path: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("this system refuses a user and mount namespace (unshare -rm)")


def _assert_checks_from_the_committed_state(ws: Path) -> None:
    at = read_only_run(ws, "check", "--at", "1", "answers/a.md")
    assert at.returncode == 0, at.stdout + at.stderr  # the draft cites version 1: clean at event 1
    assert "in-memory" not in at.stderr
    now = read_only_run(ws, "check", "answers/a.md")
    assert now.returncode == 1, now.stdout + now.stderr
    assert "GR104 stale-citation" in now.stdout  # version 2 is current in the committed state
    assert "is on a read-only file system, so it was not updated: checking against it as last committed" \
        " (2 events)" in now.stderr
    assert "Traceback" not in now.stderr
    log = read_only_run(ws, "log")
    assert log.returncode == 0 and "schedule@2" in log.stdout
    index = read_only_run(ws, "index")
    assert index.returncode == 2
    assert "cannot update the index .grounding/index.sqlite: it is on a read-only file system" in index.stderr


@pytest.mark.sqlite_only
@pytest.mark.usefixtures("mountable")
def test_a_read_only_file_system_is_read_from_its_committed_state(tmp_path: Path) -> None:
    ws = history(tmp_path)
    index = ws / ".grounding/index.sqlite"
    with sqlite3.connect(index) as conn:  # the last connection: -wal and -shm go with it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not (ws / ".grounding/index.sqlite-shm").exists()  # so mode=ro alone cannot read it
    before = digest(index)
    (ws / "evidence/schedule.md").write_text(CHANGED.replace("周五", "周六"), encoding="utf-8")
    _assert_checks_from_the_committed_state(ws)
    assert digest(index) == before
    assert sorted(p.name for p in (ws / ".grounding").iterdir()) == ["index.sqlite"]


@pytest.mark.sqlite_only
@pytest.mark.usefixtures("mountable")
def test_a_read_only_file_system_with_a_live_write_ahead_log(tmp_path: Path) -> None:
    """Another process holds the index open (its ``-wal`` and ``-shm`` exist): ``mode=ro``."""
    ws = history(tmp_path)
    holder = Workspace.open(ws)  # keeps -wal and -shm in place
    try:
        assert (ws / ".grounding/index.sqlite-shm").exists()
        _assert_checks_from_the_committed_state(ws)
    finally:
        holder.store.close()


@pytest.mark.sqlite_only
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes; the read-only mount covers it")
def test_a_read_only_file_in_a_read_only_folder(tmp_path: Path) -> None:
    ws = history(tmp_path)
    folder = ws / ".grounding"
    (folder / "index.sqlite").chmod(0o444)
    folder.chmod(0o555)
    try:
        now = grounding(ws, "check", "--at", "1", "answers/a.md")
        assert now.returncode == 0, now.stderr
        assert "in-memory" not in now.stderr
        assert grounding(ws, "index").returncode == 2
    finally:
        folder.chmod(0o755)


@pytest.mark.sqlite_only
def test_a_reader_never_creates_a_deleted_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    backend = SqliteBackend(str(path))
    try:
        backend.create_schema()
        backend.reader().execute("SELECT COUNT(*) FROM events").fetchone()
        backend.writer.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        failures: list[BaseException] = []

        def read() -> None:  # a new thread: a new reader connection
            try:
                backend.reader().execute("SELECT COUNT(*) FROM events").fetchone()
            except sqlite3.Error as exc:
                failures.append(exc)

        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
        assert failures and "unable to open database file" in str(failures[0])
        assert not path.exists()  # no empty index left behind
    finally:
        backend._closed = True


@pytest.mark.sqlite_only
@pytest.mark.usefixtures("mountable")
async def test_the_server_on_a_read_only_index_checks_from_it_and_says_so_once(tmp_path: Path) -> None:
    ws = history(tmp_path)
    folder = shlex.quote(str(ws / ".grounding"))
    command = ["unshare", "-rm", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
               f" && exec {shlex.quote(PYTHON)} -m server"]
    client = await lsp.start(ws, "minimal", command=command)
    try:
        uri = (ws / "answers" / "a.md").as_uri()
        await client.recorder.wait_until(lambda: any("is on a read-only file system" in m.message
                                                     for m in client.recorder.messages), what="the read-only note")
        lsp.open_document(client, uri, (ws / "answers" / "a.md").read_text(encoding="utf-8"))
        published = await client.recorder.wait_publish(uri, lambda p: bool(p.diagnostics), what="the draft's check")
        assert "stale-citation" in lsp.names_of(published.diagnostics)  # version 2 is committed: read, not lost
        notes = [m for m in client.recorder.messages if "read-only" in m.message]
        assert len(notes) == 1 and notes[0].type == types.MessageType.Warning
        assert "in-memory" not in " ".join(m.message for m in client.recorder.messages)
    finally:
        await lsp.stop(client)
