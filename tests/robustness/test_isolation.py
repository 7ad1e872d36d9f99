"""What Grounding never does: use the network, or read outside the workspace.

- A full language-server session runs under an audit hook (``sys.addaudithook``) that
  refuses and records every network operation (an IP socket, connect, bind, DNS) and
  records every file the server opens; the session still works, nothing touched the
  network, and no file outside the workspace was opened, although the evidence folder holds
  a symlink to a file outside it.
- ``grounding check`` on the examples gives the same report inside a network namespace with
  no interfaces (``unshare -n``, when the system allows it): token counting is offline.
- An in-process scan and check of a workspace with escaping symlinks opens only files of
  the workspace, of Python and of installed packages; the file outside is never opened.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from grounding_core.workspace import Workspace
from tests.support.lsp import names_of, open_document, start, stop

from .helpers import EXAMPLES, PYTHON, SCHEDULE, SERVER_ENV, TODAY, definition, md_draft, write_files

SECRET = "主题：秋季开放日\n- 活动时间：周五9:00\n"

GUARDED_SERVER = r"""
import os, socket, sys
LOG = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
NETWORK = ("socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
           "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "urllib.Request")
IP = (socket.AF_INET, socket.AF_INET6)

def hook(event, args):
    if event == "open" and isinstance(args[0], str):
        os.write(LOG, ("open\t" + args[0] + "\n").encode("utf-8", "surrogateescape"))
    elif event in NETWORK or (event == "socket.__new__" and args[1] in IP):
        os.write(LOG, ("network\t" + event + " " + repr(args)[:200] + "\n").encode())
        raise PermissionError("network use refused by the test: " + event)

sys.addaudithook(hook)
from server.app import serve_stdio
raise SystemExit(serve_stdio())
"""


def _workspace_with_an_escape(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose evidence folder links to a file and a folder outside it."""
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    write_files(outside, {"secret.md": SECRET, "more/secret2.md": SECRET})
    write_files(root, {"evidence/schedule.md": SCHEDULE})
    (root / "evidence" / "leak.md").symlink_to(outside / "secret.md")
    (root / "evidence" / "elsewhere").symlink_to(outside / "more", target_is_directory=True)
    (root / "evidence" / "loop.md").symlink_to("loop.md")
    return root, outside


def _allowed(path: str, root: Path) -> bool:
    """Inside the workspace, or part of Python / an installed package / the OS runtime."""
    full = os.path.realpath(path)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    prefixes.update(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p))
    prefixes.discard(os.path.realpath(str(root.parent)))  # never whitelist the test folder
    if full.startswith(str(root.resolve()) + os.sep) or full == str(root.resolve()):
        return True
    if full.startswith(("/dev/", "/proc/", "/sys/", "/etc/", "/usr/", "/lib")):
        return True
    return any(full.startswith(p + os.sep) for p in prefixes if p not in ("/", ""))


async def test_a_server_session_uses_no_network_and_reads_nothing_outside(tmp_path: Path) -> None:
    root, outside = _workspace_with_an_escape(tmp_path)
    log = tmp_path / "audit.log"
    draft_uri = (root / "answers" / "a.md").as_uri()
    (root / "answers").mkdir()
    client = await start(root, "minimal", command=[PYTHON, "-c", GUARDED_SERVER, str(log)])
    try:
        leak_uri = (root / "evidence" / "leak.md").as_uri()
        await client.recorder.wait_until(lambda: client.recorder.of(leak_uri), timeout=60, what="evidence diagnostics")
        assert names_of(client.recorder.of(leak_uri)[-1].diagnostics) == ["unreadable-evidence"]
        text = md_draft("活动时间是周四16:30[^1]。",
                        [definition("1", "schedule@1:6", SCHEDULE, "- 活动时间：周四16:30")])
        open_document(client, draft_uri, text)
        await client.recorder.wait_until(lambda: client.recorder.of(draft_uri), timeout=30, what="draft diagnostics")
        assert names_of(client.recorder.of(draft_uri)[-1].diagnostics) == []  # valid, visible, no conflict
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=draft_uri),
            position=types.Position(line=5, character=13)))
        assert hover is not None and "周四16:30" in str(hover.contents)
    finally:
        code = await stop(client)
    assert code == 0
    entries = log.read_text(encoding="utf-8").splitlines()
    assert entries, "the audit hook recorded nothing: was it installed?"
    network = [e for e in entries if e.startswith("network")]
    assert network == []
    opened = [e.split("\t", 1)[1] for e in entries if e.startswith("open\t")]
    assert not [p for p in opened if str(outside) in os.path.realpath(p)], "read outside the root"
    assert not [p for p in opened if not _allowed(p, root)]


@pytest.fixture(scope="module")
def network_namespace() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a network namespace here: {probe.stderr.decode().strip()}")


def test_grounding_check_gives_the_same_report_without_a_network(
        tmp_path: Path, network_namespace: None) -> None:
    copies = []
    for name in ("online", "offline"):
        target = tmp_path / name
        shutil.copytree(EXAMPLES, target, symlinks=True,
                        ignore=shutil.ignore_patterns(".grounding"))
        # output tokens are counted for drafts that declare a budget (SPEC §8): declare one
        budgeted = (target / "answers" / "open-day.md").read_text(encoding="utf-8")
        (target / "answers" / "open-day-budget.md").write_text(budgeted.replace(
            'context: {units: ["schedule@2"]}', 'context: {units: ["schedule@2"], reserve: 240}'),
            encoding="utf-8")
        copies.append(target)
    command = [PYTHON, "-m", "grounding.cli", "check", "--format", "json"]
    online = subprocess.run([*command, "--root", str(copies[0])], env=SERVER_ENV,
                            capture_output=True, text=True, timeout=120)
    offline = subprocess.run(["unshare", "-n", *command, "--root", str(copies[1])], env=SERVER_ENV,
                             capture_output=True, text=True, timeout=120)
    assert offline.returncode == online.returncode == 1, offline.stderr  # the examples have errors
    report = json.loads(offline.stdout)
    assert report == json.loads(online.stdout)
    assert all(d["output_tokens"] > 0 for d in report["drafts"] if "output_tokens" in d)
    assert any("output_tokens" in d for d in report["drafts"])


class _OpenRecorder:
    """One process-wide audit hook (hooks cannot be removed); records while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.paths: list[str] = []
        sys.addaudithook(self)

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if not self.active:
            return
        if event == "open" and isinstance(args[0], str):
            self.paths.append(args[0])
        elif event == "sqlite3.connect" and isinstance(args[0], str):
            self.paths.append(args[0])


_RECORDER: _OpenRecorder | None = None


@pytest.fixture
def recorder() -> Iterator[_OpenRecorder]:
    global _RECORDER
    if _RECORDER is None:
        _RECORDER = _OpenRecorder()
    _RECORDER.paths = []
    yield _RECORDER
    _RECORDER.active = False


def test_a_scan_opens_nothing_outside_the_workspace(tmp_path: Path, recorder: _OpenRecorder) -> None:
    root, outside = _workspace_with_an_escape(tmp_path)
    write_files(root, {"answers/a.md": md_draft(
        "活动时间是周四16:30[^1]。", [definition("1", "schedule@1:6", SCHEDULE, "- 活动时间：周四16:30")])})
    recorder.active = True
    ws = Workspace.open(root)
    try:
        scan = ws.scan()
        reports = ws.check_all(today=TODAY)
    finally:
        recorder.active = False
        ws.store.close()
    assert [f.name for f in scan.evidence["leak.md"]] == ["unreadable-evidence"]
    assert reports[0].findings == [] or [f.name for f in reports[0].findings] == ["context-undeclared"]
    assert recorder.paths, "the audit hook recorded nothing"
    assert any(p.endswith("schedule.md") for p in recorder.paths)
    assert not [p for p in recorder.paths if str(outside) in os.path.realpath(p)]
    assert not [p for p in recorder.paths if not _allowed(p, root)]
