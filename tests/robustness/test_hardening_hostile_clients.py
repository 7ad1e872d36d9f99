"""Third adversarial round, through the real server (pytest-lsp): clients that send
notifications for documents they never opened, and an index that cannot be written
(README "What Grounding guarantees": every request is answered, nothing crashes on input).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness
from tests.support.lsp import names_of

from .helpers import sha256
from .test_hardening_adversary_server import DRAFT, WAIT, diagnostics_of, workspace


def _said(client: harness.RecordingClient) -> list[str]:
    return [e.params.message for e in client.recorder.events
            if e.method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE)]


async def test_notifications_for_a_document_never_opened_are_ignored(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    client = await harness.start(ws, "minimal")
    try:
        ghost = (ws / "answers/ghost🎉.md").as_uri()
        ident = types.TextDocumentIdentifier(ghost)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=ghost, version=3),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="活动时间是周四。")]))
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=ghost, version=4),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="活动时间是周四。")]))
        client.text_document_did_save(types.DidSaveTextDocumentParams(ident))
        client.text_document_did_close(types.DidCloseTextDocumentParams(ident))
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=424242))
        uri = (ws / "answers/a.md").as_uri()
        published = await diagnostics_of(client, uri, DRAFT)
        assert not [d for d in published if d.severity == types.DiagnosticSeverity.Error], published
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(5, 12))), WAIT)
        assert hover is not None and "周四16:30" in str(hover.contents)
        assert await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            ident, types.Position(0, 2))), WAIT) is None
        said = _said(client)
        assert not [m for m in said if "Error in server" in m or "KeyError" in m], said
        assert not [p for p in client.recorder.publications if p.uri == ghost and p.diagnostics]
    finally:
        assert await harness.stop(client) == 0


async def test_an_index_deleted_or_replaced_under_the_server_is_opened_again(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        assert not [d for d in await diagnostics_of(client, uri, DRAFT) if d.severity == types.DiagnosticSeverity.Error]
        index = ws / ".grounding/index.sqlite"
        for name in [p.name for p in index.parent.iterdir()]:  # `rm -rf .grounding/*` while the editor runs
            (index.parent / name).unlink()
        later = "- 地点：礼堂 B 🎉\r\n"
        draft = (DRAFT + "\r\n地点是礼堂 B 🎉[^2]。\r\n\r\n"
                 f'[^2]: later@1:1 sha256:{sha256(later)[:12]} "- 地点：礼堂 B 🎉"\r\n')
        await _evidence_added(client, ws / "evidence/later.md", later)
        harness.replace_document(client, uri, draft, 2)
        await client.recorder.wait_until(
            # "was deleted", or "was replaced by another file" when a reader thread's first
            # connection made a new empty file there first
            lambda: any("while the server had it open" in m.message for m in client.recorder.messages),
            "the deleted-index message", WAIT)
        await client.recorder.wait_until(
            lambda: "unknown-source" not in names_of(client.recorder.of(uri)[-1].diagnostics)
            and client.recorder.of(uri)[-1].version == 2, "diagnostics from the reopened index", WAIT)
        log = subprocess.run([sys.executable, "-m", "grounding.cli", "log"], cwd=ws, env=harness.SERVER_ENV,
                             capture_output=True, text=True, timeout=120)
        assert log.returncode == 0 and "later@1" in log.stdout and "schedule@1" in log.stdout, log
        # now a folder where the index was: said, and the session goes on from memory
        for name in [p.name for p in index.parent.iterdir()]:
            (index.parent / name).unlink()
        index.mkdir()
        await _evidence_added(client, ws / "evidence/later2.md", later.replace("B", "C"))
        await client.recorder.wait_until(
            lambda: any("was replaced by a folder" in m.message for m in client.recorder.messages),
            "the replaced-index message", WAIT)
        await client.recorder.wait_until(
            lambda: any("in-memory index" in m.message for m in client.recorder.messages), "the fallback", WAIT)
        harness.replace_document(client, uri, draft + "\r\n", 3)
        await client.recorder.wait_until(
            lambda: client.recorder.of(uri)[-1].version == 3
            and "unknown-source" not in names_of(client.recorder.of(uri)[-1].diagnostics), "answered", WAIT)
        assert index.is_dir() and list(index.iterdir()) == []
        said = _said(client)
        assert not [m for m in said if "Traceback" in m or "Error in server" in m], said
    finally:
        assert await harness.stop(client) == 0


async def _evidence_added(client: harness.RecordingClient, path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(path.as_uri(), types.FileChangeType.Created)]))


async def test_a_half_typed_grounding_toml_keeps_the_configuration_in_effect(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "evidence").rename(ws / "policies")  # a configured folder: the defaults would lose it
    toml = ws / "grounding.toml"
    valid = 'today = "2026-05-01"\nevidence = "policies"\n'
    toml.write_text(valid, encoding="utf-8")
    client = await harness.start(ws, "minimal")
    try:
        uri = (ws / "answers/a.md").as_uri()
        assert not [d for d in await diagnostics_of(client, uri, DRAFT) if d.severity == types.DiagnosticSeverity.Error]
        version = 1
        for bad in ('today = "2026-05-01"\nevidence = "poli', 'today = "2026-05-01"\nevidence = "../x"\n'):
            mark = len(client.recorder.messages)
            toml.write_text(bad, encoding="utf-8")
            client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
                [types.FileEvent(toml.as_uri(), types.FileChangeType.Changed)]))
            await client.recorder.wait_until(
                lambda mark=mark: any("keeping the configuration in effect" in m.message
                            for m in client.recorder.messages[mark:]), f"the message for {bad!r}", WAIT)
            version += 1
            harness.replace_document(client, uri, DRAFT + " 🎉" * version, version)
            await client.recorder.wait_until(lambda version=version: client.recorder.of(uri)[-1].version == version,
                                             "the draft checked after the edit", WAIT)
            assert "unknown-source" not in names_of(client.recorder.of(uri)[-1].diagnostics)
            hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
                types.TextDocumentIdentifier(uri), types.Position(5, 12))), WAIT)
            assert hover is not None and "周四16:30" in str(hover.contents)
        said = _said(client)
        assert not [m for m in said if "does not exist" in m or "default configuration" in m], said
        assert not (ws / "evidence").exists()
        mark = len(client.recorder.messages)
        toml.write_text(valid, encoding="utf-8")  # fixed: said once, and in effect
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(toml.as_uri(), types.FileChangeType.Changed)]))
        await client.recorder.wait_until(
            lambda: any("grounding.toml is valid again" in m.message for m in client.recorder.messages[mark:]),
            "the message that grounding.toml is valid again", WAIT)
    finally:
        assert await harness.stop(client) == 0
