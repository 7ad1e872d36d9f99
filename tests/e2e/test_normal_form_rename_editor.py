"""The editor on an evidence file renamed from its NFD spelling to NFC (SPEC §3; docs/decisions.md,
"Checks"): the real server over stdio (pytest-lsp) publishes ``inactive-source`` naming the
rename on the draft that cites the old spelling, and offers the exact re-anchor as a quick
fix. CJK, emoji and CRLF in evidence and draft.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path

from lsprotocol import types

from grounding_core.workspace import Workspace
from tests.support.lsp import names_of, open_document, start, stop
from tests.support.workspace import write_files

CONTENT = "主题：开放日 🎉\r\n- 地点：café 二楼 𠮷\r\n"
LINE = "- 地点：café 二楼 𠮷"
OLD, NEW = unicodedata.normalize("NFD", "通知-café"), unicodedata.normalize("NFC", "通知-café")


def draft(doc_id: str) -> str:
    digest = hashlib.sha256(CONTENT.encode()).hexdigest()[:12]
    return ("---\r\nfields: [地点]\r\n---\r\n地点是café 二楼 𠮷[^1]。\r\n\r\n"
            f'[^1]: {doc_id}@1:2 sha256:{digest} "{LINE}"\r\n')


async def test_the_draft_of_a_renamed_file_gets_the_rename_and_its_fix(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"grounding.toml": "", f"evidence/{OLD}.md": CONTENT})
    indexed = Workspace.open(root)  # the index knows the old spelling before the rename
    indexed.scan()
    indexed.store.close()
    os.rename(root / "evidence" / f"{OLD}.md", root / "evidence" / f"{NEW}.md")
    client = await start(root, "visual-studio-code")
    try:
        uri = (root / "answers" / "a.md").as_uri()
        mark = client.recorder.mark()
        open_document(client, uri, draft(OLD))
        published = await client.recorder.wait_publish(
            uri, lambda p: "inactive-source" in names_of(p.diagnostics), after=mark, what="the rename finding")
        [inactive] = [d for d in published.diagnostics if d.data and d.data.get("name") == "inactive-source"]
        assert "its file was renamed to evidence/" in inactive.message
        assert "composed (NFC) characters, with the same content" in inactive.message
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=inactive.range,
            context=types.CodeActionContext(diagnostics=[inactive])))
        edits = [e for a in actions or [] if isinstance(a, types.CodeAction) and a.edit is not None
                 for changes in (a.edit.document_changes or []) if isinstance(changes, types.TextDocumentEdit)
                 for e in changes.edits]
        assert any(f"{NEW}@1:2 sha256:" in e.new_text for e in edits), [a.title for a in actions or []]
    finally:
        await stop(client)
