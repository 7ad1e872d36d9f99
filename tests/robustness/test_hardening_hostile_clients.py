"""Third adversarial round, through the real server (pytest-lsp): clients that send
notifications for documents they never opened, and an index that cannot be written
(README "What Grounding guarantees": every request is answered, nothing crashes on input).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness

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
