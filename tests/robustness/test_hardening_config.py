"""Issue 13 items 7 and 8 (SPEC §2 containment), through the real command line.

``evidence`` and ``index`` in ``grounding.toml`` must resolve inside the workspace root; the
index is never under the evidence root and never replaces a file that is not a Grounding
index. A violation is a configuration error (exit 2) naming the key, and nothing is read
or written. ``--evidence`` may name a shared folder elsewhere explicitly.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from grounding import cli

from .helpers import PYTHON, SCHEDULE, SERVER_ENV, sha256, write_files

SECRET = "- 活动时间：机密 🎉 outside the workspace\r\n"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def grounding(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """``grounding ARGS`` in-process (the console script's code): exit status and output."""
    def run(*args: str) -> Run:
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return Run(code, out, err)
    return run


def test_the_console_script_exits_2_naming_the_key(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    (ws / "grounding.toml").write_text('evidence = "../outside"\n', encoding="utf-8")
    proc = subprocess.run([PYTHON, "-m", "grounding.cli", "check", "--root", str(ws)], capture_output=True,
                          text=True, env=SERVER_ENV, timeout=120)
    assert proc.returncode == 2 and "grounding.toml: evidence = '../outside'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp_path/ws`` (the workspace, with evidence) and ``tmp_path/outside`` (evidence too)."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    write_files(ws, {"evidence/schedule.md": SCHEDULE, "evidence/empty.md": "",
                     "answers/a.md": "活动时间是周四16:30。\n", "README.md": "# 项目\n"})
    write_files(outside, {"secret.md": SECRET})
    return ws, outside


@pytest.mark.parametrize("value", ["../outside", "{outside}", "evidence/../../outside", "link"])
def test_evidence_outside_the_root_is_a_configuration_error(
        layout: tuple[Path, Path], grounding: Callable[..., Run], value: str) -> None:
    ws, outside = layout
    (ws / "link").symlink_to(outside, target_is_directory=True)
    (ws / "grounding.toml").write_text(f'evidence = "{value.format(outside=outside)}"\n', encoding="utf-8")
    for command in ("check", "index", "conflicts"):
        proc = grounding(command, "--root", str(ws), "--format", "json")
        assert proc.returncode == 2, proc
        assert "evidence = " in proc.stderr and "outside the workspace root" in proc.stderr
        assert "机密" not in proc.stdout + proc.stderr and proc.stdout == ""
    assert not (ws / ".grounding").exists()  # nothing indexed, nothing stored


def test_a_shared_evidence_folder_is_given_explicitly(layout: tuple[Path, Path],
                                                     grounding: Callable[..., Run]) -> None:
    ws, outside = layout
    proc = grounding("index", "--root", str(ws), "--evidence", str(outside), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert '"documents": 1' in proc.stdout


@pytest.mark.parametrize("value, problem", [
    ("evidence/empty.md", "inside the evidence folder"),
    ("evidence/new.sqlite", "inside the evidence folder"),
    ("evidence/sub/dir/x.db", "inside the evidence folder"),
    ("README.md", "is not an SQLite database"),
    ("answers/a.md", "is not an SQLite database"),
    ("answers", "is not a regular file"),
    ("notes.txt", "is an empty file that is not an index"),
    ("other.db", "is an SQLite database of another program"),
    ("../index.sqlite", "outside the workspace root"),
    ("{abs}/../stolen.sqlite", "outside the workspace root"),
])
def test_a_bad_index_path_is_a_configuration_error_and_nothing_is_written(
        layout: tuple[Path, Path], grounding: Callable[..., Run], value: str, problem: str) -> None:
    ws, _ = layout
    (ws / "notes.txt").write_bytes(b"")
    with sqlite3.connect(ws / "other.db") as db:
        db.execute("CREATE TABLE contacts (name TEXT)")
    db.close()
    (ws / "grounding.toml").write_text(f'index = "{value.format(abs=ws)}"\n', encoding="utf-8")
    before = {p: (p.stat().st_ino, sha256(p.read_bytes())) for p in ws.rglob("*") if p.is_file()}
    proc = grounding("check", "--root", str(ws))
    assert proc.returncode == 2, proc
    assert "index = " in proc.stderr and problem in proc.stderr, proc.stderr
    after = {p: (p.stat().st_ino, sha256(p.read_bytes())) for p in ws.rglob("*") if p.is_file()}
    assert after == before
    assert not (ws.parent / "index.sqlite").exists() and not (ws.parent / "stolen.sqlite").exists()


@pytest.mark.parametrize("toml, index", [
    ("", ".grounding/index.sqlite"),
    ('evidence = "."\nevidence_globs = ["evidence/**/*.md"]\n', ".grounding/index.sqlite"),
    ('index = "evidence/.grounding/i.sqlite"\n', "evidence/.grounding/i.sqlite"),
    ('index = "state/索引 🎉.sqlite"\n', "state/索引 🎉.sqlite"),
    ('index = "empty.db"\n', "empty.db"),
])
def test_good_index_paths_are_created_and_reused(layout: tuple[Path, Path], grounding: Callable[..., Run],
                                                 toml: str, index: str) -> None:
    ws, _ = layout
    (ws / "empty.db").write_bytes(b"")  # what a crash between create and first write leaves
    (ws / "grounding.toml").write_text(toml, encoding="utf-8")
    for _ in range(2):  # the second run reopens the index it made
        proc = grounding("index", "--root", str(ws), "--format", "json")
        assert proc.returncode == 0, proc.stderr
    assert (ws / index).stat().st_size > 0
    assert (ws / index).read_bytes()[:16] == b"SQLite format 3\x00"


def test_an_index_override_may_not_sit_in_the_evidence_folder(layout: tuple[Path, Path],
                                                             grounding: Callable[..., Run]) -> None:
    ws, _ = layout
    (ws / "grounding.toml").write_text('index = "shared.sqlite"\n', encoding="utf-8")
    proc = grounding("check", "--root", str(ws), "--evidence", ".")
    assert proc.returncode == 2 and "index = 'shared.sqlite'" in proc.stderr
    assert not (ws / "shared.sqlite").exists()
