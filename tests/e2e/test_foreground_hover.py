"""Foreground before background over stdio: a hover sent while a long evidence refresh runs is
answered with the cited line, and the refresh still publishes every file after it
(``server.session.Foreground``; docs/architecture.md).

The workspace's first evidence refresh is made long by many evidence files (CRLF, CJK
full-width colons, emoji and an astral-plane character) that all conflict on the same two
fields of one subject: every one of them gets GR108 diagnostics, published in chunks. The test
waits for the first of those publications (the refresh is running), hovers the draft's
citation, and checks the answer and that the refresh then finishes. Whether the answer
arrives before the last chunk is a matter of timing over stdio (on a quiet machine the whole
refresh can be sent before the hover is read), so the ordering itself is shown in process by
tests/server/test_foreground_gate.py (a refresh publishes nothing while a job holds the gate).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from tests.support.lsp import lsp_session
from tests.support.recorder import WAIT_SECONDS
from tests.support.workspace import build_workspace, sha256

FILES = 400
"""Conflicting evidence files: the refresh publishes each (16 per chunk)."""


def evidence(n: int) -> str:
    return "\r\n".join([
        "---", f"doc_id: 价目-{n:03d}", "version: 1", "subject: 开放日🎉", "---",
        f"- 票价：{n} 元𠮷", f"- 地点：图书馆{n}层", "",
    ])


async def test_a_hover_during_a_long_evidence_refresh_is_answered_before_it_ends(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {"grounding.toml": 'today = "2026-06-01"\n'}
    for n in range(FILES):
        files[f"evidence/价目/{n:03d}.md"] = evidence(n)
    first = evidence(0)
    draft = ("---\nquestion: 票价多少？🎉\nfields: [票价]\n---\n开放日票价：0 元𠮷[^1]。\n\n"
             f'[^1]: 价目-000@1:6 sha256:{sha256(first)[:12]} "- 票价：0 元𠮷"\n')
    root = build_workspace(tmp_path / "ws", {**files, "answers/a.md": draft})
    evidence_uris = {(root / "evidence" / "价目" / f"{n:03d}.md").as_uri() for n in range(FILES)}
    draft_uri = (root / "answers/a.md").as_uri()
    async with lsp_session(root, "minimal") as lsp:
        recorder = lsp.recorder

        def published() -> set[str]:
            return {p.uri for p in recorder.publications if p.diagnostics} & evidence_uris

        lsp.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=draft_uri, language_id="markdown", version=1, text=draft)))
        await recorder.wait_until(lambda: bool(published()), "the first evidence file's GR108")
        line = draft.split("\n").index(next(r for r in draft.split("\n") if r.startswith("[^1]:")))
        hover = await asyncio.wait_for(lsp.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=draft_uri),
            position=types.Position(line=line, character=8))), WAIT_SECONDS)
        assert hover is not None
        text = hover.contents.value if isinstance(hover.contents, types.MarkupContent) else str(hover.contents)
        assert "票价：0 元𠮷" in text
        await recorder.wait_until(lambda: len(published()) == FILES, "every conflicting file's GR108")
