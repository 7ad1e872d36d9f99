"""The reference lens over drafts on disk, through the real server (pytest-lsp): a lens request
over an unchanged workspace answers from the draft cache, and a draft rewritten on disk (or
deleted) is counted anew at the next request (its stat key changed). CJK, emoji, CRLF.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lsprotocol import types

from tests.support.lsp import RecordingClient, open_document, start, stop
from tests.support.workspace import write_files

SCHEDULE = ("---\r\ndoc_id: schedule\r\nversion: 1\r\n---\r\n主题：开放日\r\n- 活动时间：周四16:30 🎉\r\n"
            "- 地点：二楼 𠮷\r\n")
HASH = hashlib.sha256(SCHEDULE.encode()).hexdigest()[:12]


def draft(line: int, quote: str) -> str:
    return ("---\r\nfields: [活动时间]\r\n---\r\n它是这样[^1]。\r\n\r\n"
            f'[^1]: schedule@1:{line} sha256:{HASH} "{quote}"\r\n')


async def lens_titles(client: RecordingClient, uri: str) -> list[tuple[int, str | None]]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    return [(lens.range.start.line, lens.command.title if lens.command else None) for lens in lenses or []]


async def test_the_lens_counts_a_draft_rewritten_on_disk_anew(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"grounding.toml": "", "evidence/schedule.md": SCHEDULE,
                       "answers/a.md": draft(6, "- 活动时间：周四16:30 🎉"),
                       "answers/b.md": draft(6, "- 活动时间：周四16:30 🎉")})
    client = await start(root, "visual-studio-code")
    try:
        evidence = (root / "evidence" / "schedule.md").as_uri()
        other = (root / "answers" / "c.md").as_uri()  # cites nothing: its check means the index is there
        open_document(client, other, "---\r\nfields: []\r\n---\r\n没有引用 🎉。\r\n")
        await client.recorder.wait_publish(other, what="the open draft's check after the first scan")
        assert await lens_titles(client, evidence) == [(5, "cited by 2 drafts")]
        assert await lens_titles(client, evidence) == [(5, "cited by 2 drafts")]  # from the cache
        (root / "answers" / "b.md").write_bytes(draft(7, "- 地点：二楼 𠮷").encode())  # another size
        assert await lens_titles(client, evidence) == [(5, "cited by 1 draft"), (6, "cited by 1 draft")]
        (root / "answers" / "a.md").unlink()
        assert await lens_titles(client, evidence) == [(6, "cited by 1 draft")]
    finally:
        await stop(client)
