"""Second adversarial round, through the real server (pytest-lsp, tests/support's harness):
names that are not UTF-8, a locked index, a ``.grounding`` symlink, lone surrogates in front
matter, a missing evidence folder and URIs holding ``%00`` (README "What Grounding
guarantees").
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness
from tests.support.lsp import names_of, open_document

from .helpers import SCHEDULE, sha256, write_files

WAIT = 60.0
HASH = sha256(SCHEDULE)
DRAFT = ("---\nfields: [活动时间]\n---\n活动时间是周四16:30[^1]。🎉\r\n\r\n"
         f'[^1]: schedule@1:6 sha256:{HASH[:12]} "- 活动时间：周四16:30"\r\n')


def workspace(tmp_path: Path, **extra: str) -> Path:
    write_files(tmp_path, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/schedule.md": SCHEDULE,
                           "answers/a.md": DRAFT, **extra})
    return tmp_path


async def diagnostics_of(client: harness.RecordingClient, uri: str, text: str,
                         wait: float = WAIT) -> list[types.Diagnostic]:
    open_document(client, uri, text)
    await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), f"diagnostics of {uri}", wait)
    return list(client.recorder.of(uri)[-1].diagnostics)


async def test_a_gbk_evidence_name_leaves_the_index_whole(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    with open(os.fsencode(ws / "evidence") + b"/" + "开放日.md".encode("gbk"), "wb") as handle:
        handle.write("- 甲：乙\n".encode())
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        published = await diagnostics_of(client, uri, DRAFT)
        assert "unknown-source" not in names_of(published)
        assert not [d for d in published if d.severity == types.DiagnosticSeverity.Error], published
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(5, 12))), WAIT)
        assert hover is not None and "周四16:30" in str(hover.contents)
    finally:
        assert await harness.stop(client) == 0


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
sys.stdin.read()
"""


async def test_a_locked_index_is_read_as_committed_and_scanned_once_free(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    subprocess.run([sys.executable, "-m", "grounding.cli", "index"], cwd=ws, env=harness.SERVER_ENV,
                   capture_output=True, check=True, timeout=120)
    later = "- 地点：礼堂 B 🎉\n"
    (ws / "evidence/later.md").write_text(later, encoding="utf-8")
    draft = (DRAFT + "\r\n地点是礼堂 B 🎉[^2]。\r\n\r\n"
             f'[^2]: later@1:1 sha256:{sha256(later)[:12]} "- 地点：礼堂 B 🎉"\r\n')
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, str(ws / ".grounding/index.sqlite"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert locker.stdin is not None and locker.stdout is not None
    assert await locker.stdout.readline() == b"locked\n"
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        published = await diagnostics_of(client, uri, draft)
        assert "unknown-source" in names_of(published)  # later.md is not in the committed index
        await client.recorder.wait_until(
            lambda: any("another process is writing the index" in m.message for m in client.recorder.messages),
            "the busy message", WAIT)
        locker.stdin.write(b"release\n")
        await locker.stdin.drain()
        assert await locker.stdout.readline() == b"released\n"
        await client.recorder.wait_until(
            lambda: "unknown-source" not in names_of(client.recorder.of(uri)[-1].diagnostics),
            "diagnostics after the retried scan", WAIT)
        assert not [d for d in client.recorder.of(uri)[-1].diagnostics
                    if d.severity == types.DiagnosticSeverity.Error]
    finally:
        locker.stdin.close()
        await locker.wait()
        assert await harness.stop(client) == 0


async def test_a_dot_grounding_symlink_out_is_shown_and_nothing_is_written_there(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".grounding").symlink_to(elsewhere)
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        published = await diagnostics_of(client, uri, DRAFT)
        assert not [d for d in published if d.severity == types.DiagnosticSeverity.Error], published
        assert any("outside the workspace root" in m.message for m in client.recorder.messages)
    finally:
        assert await harness.stop(client) == 0
    assert list(elsewhere.iterdir()) == []


async def test_a_nul_in_a_document_uri_is_no_draft_and_breaks_nothing(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    client = await harness.start(ws, "minimal")
    try:
        good = (ws / "answers/a.md").as_uri()
        assert not [d for d in await diagnostics_of(client, good, DRAFT)
                    if d.severity == types.DiagnosticSeverity.Error]
        for bad in (ws.as_uri() + "/answers/%00.md", ws.as_uri() + "/evidence/a%00b.md"):
            client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
                [types.FileEvent(bad, types.FileChangeType.Changed)]))
            open_document(client, bad, DRAFT)
            hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
                types.TextDocumentIdentifier(bad), types.Position(5, 12))), WAIT)
            assert hover is None  # not a draft: nothing to show, and no error
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(good), types.Position(5, 12))), WAIT)
        assert hover is not None and "周四16:30" in str(hover.contents)
        said = [e.params.message for e in client.recorder.events
                if e.method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE)]
        assert not [m for m in said if "null byte" in m or "ValueError" in m or "Traceback" in m], said
    finally:
        assert await harness.stop(client) == 0


async def test_a_lone_surrogate_in_front_matter_gets_a_diagnostic(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        text = DRAFT.replace("fields:", "question: 开放日\ud83d\nfields:")  # half of a pasted emoji
        published = await diagnostics_of(client, uri, text)
        front = [d for d in published if "lone surrogate U+D83D" in d.message]
        assert front and front[0].range.start.line == 0 and names_of(front) == ["malformed-citation"]
        assert "Grounding could not check" not in " ".join(d.message for d in published)
    finally:
        assert await harness.stop(client) == 0


async def test_a_missing_evidence_folder_is_shown_and_nothing_stays_answered(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        assert "unknown-source" not in names_of(await diagnostics_of(client, uri, DRAFT))
        (ws / "grounding.toml").write_text('evidence = "nope"\ntoday = "2026-05-01"\n', encoding="utf-8")
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent((ws / "grounding.toml").as_uri(), types.FileChangeType.Changed)]))
        await client.recorder.wait_until(
            lambda: any("does not exist" in m.message and m.type == types.MessageType.Error
                        for m in client.recorder.messages), "the configuration error", WAIT)
        await client.recorder.wait_until(
            lambda: "unknown-source" in names_of(client.recorder.of(uri)[-1].diagnostics),
            "the draft checked against no evidence", WAIT)
    finally:
        assert await harness.stop(client) == 0
