"""Issue 12 navigation on a draft of many claims: every answer is bounded and the server
keeps serving (document symbols, document links, inlay hints, rename, workspace symbols).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from server.features.symbols import MAX_FIELD_SYMBOLS
from tests.support import lsp as harness
from tests.support.lsp import open_document

from .helpers import SCHEDULE, sha256, write_files

WAIT = 120.0
CLAIMS = MAX_FIELD_SYMBOLS + 1000


def many_claims() -> str:
    definition = f'schedule@1:6 sha256:{sha256(SCHEDULE)[:12]} "- 活动时间：周四16:30"'
    sentences = "".join(f"𠮷野家🎉活动时间是周四16:30[^{n}]。\r\n" for n in range(1, CLAIMS + 1))
    definitions = "".join(f"[^{n}]: {definition}\r\n" for n in range(1, CLAIMS + 1))
    return "---\r\nquestion: 几点？\r\nfields: [活动时间]\r\n---\r\n" + sentences + "\r\n" + definitions


async def test_navigation_answers_on_a_draft_of_many_claims_are_bounded(tmp_path: Path) -> None:
    text = many_claims()
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": 'today = "2026-05-01"\n',
                           "answers/many.md": text})
    client = await harness.start(tmp_path, "visual-studio-code")
    try:
        uri = (tmp_path / "answers/many.md").as_uri()
        open_document(client, uri, text)
        await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), "diagnostics", WAIT)
        doc = types.TextDocumentIdentifier(uri=uri)
        symbols = await asyncio.wait_for(client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=doc)), WAIT)
        links = await asyncio.wait_for(client.text_document_document_link_async(
            types.DocumentLinkParams(text_document=doc)), WAIT)
        hints = await asyncio.wait_for(client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=doc, range=types.Range(types.Position(4, 0), types.Position(13, 0)))), WAIT)
        renamed = await asyncio.wait_for(client.text_document_rename_async(types.RenameParams(
            doc, types.Position(4, 21), "第一")), WAIT)  # on the label of [^1] (UTF-16 units)
        found = await asyncio.wait_for(client.workspace_symbol_async(types.WorkspaceSymbolParams(
            query="活动时间" * 500)), WAIT)
    finally:
        assert await harness.stop(client) == 0
    assert symbols is not None and len(symbols) == MAX_FIELD_SYMBOLS
    assert symbols[0].name == "𠮷野家🎉活动时间是周四16:30[^1]。"
    assert links is not None and len(links) == MAX_FIELD_SYMBOLS
    assert hints is not None and [h.label for h in hints] == ["✓ v1"] * 9
    assert renamed is not None and renamed.document_changes is not None
    assert [e.new_text for change in renamed.document_changes for e in change.edits] == ["第一", "第一"]
    assert found is not None and len(found) <= 200
