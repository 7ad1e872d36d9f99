"""Second adversarial round, through the real server (pytest-lsp, tests/support's harness):
names that are not UTF-8, a locked index, a ``.grounding`` symlink, lone surrogates in front
matter, a missing evidence folder and URIs holding ``%00`` (README "What Grounding
guarantees").
"""

from __future__ import annotations

import asyncio
import os
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
