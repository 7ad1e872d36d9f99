"""Evidence globs that match none of the indexed files, in the real server (pytest-lsp): the
scan refuses (``store.NoEvidenceMatched``), the writer is told how to fix the globs, the index
keeps its last state, and the fixed globs index again without a restart (tryout5 #4).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from tests.support.lsp import lsp_session
from tests.support.recorder import WAIT_SECONDS
from tests.support.workspace import build_workspace, event_kinds

BOOK_FAIR = "---\r\ndoc_id: book-fair\r\nsubject: 冬季书展🎉\r\n---\r\n- 门票：10元，学生半价\r\n"




async def test_globs_matching_nothing_keep_the_index_and_say_how_to_fix_them(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", {"grounding.toml": "", "evidence/书展/冬季.md": BOOK_FAIR})
    async with lsp_session(root) as client:
        recorder = client.recorder
        await recorder.wait_until(lambda: bool(recorder.passes_since(0.0)), "the initial index pass")
        assert event_kinds(root) == ["import"]
        shown = client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
        (root / "grounding.toml").write_text('evidence_globs = ["**/*.mdx"]\n', encoding="utf-8")
        message = await asyncio.wait_for(shown, WAIT_SECONDS)
        assert message.type == types.MessageType.Error
        assert "evidence_globs (**/*.mdx) match none of the 1 file in the evidence folder" in message.message
        assert "Fix evidence_globs in grounding.toml" in message.message
        assert event_kinds(root) == ["import"]  # nothing revoked
        passes = len(recorder.passes_since(0.0))
        (root / "grounding.toml").write_text('evidence_globs = ["**/*.md"]\n', encoding="utf-8")
        await recorder.wait_until(lambda: len(recorder.passes_since(0.0)) > passes, "an index pass after the fix")
    assert event_kinds(root) == ["import"]  # the same file, the same state
