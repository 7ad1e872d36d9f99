"""tryout2 #18: hover on a citation id typed with an input-method slip (``refund＠2：６``): the
real server over stdio (pytest-lsp) shows the diagnostic's explanation and the evidence line
the id means, over the id as typed; a definition malformed in another way still has no
hover. Evidence: CJK, emoji, CRLF.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lsprotocol import types

from tests.support.lsp import names_of, open_document, start, stop
from tests.support.workspace import write_files

REFUND = ("---\r\ndoc_id: refund\r\nversion: 2\r\n---\r\n主题：退款政策\r\n- 到账时间：3–5个工作日 🎉\r\n")
LINE = "- 到账时间：3–5个工作日 🎉"
SLIPPED = "refund＠2：６"


def draft() -> str:
    digest = hashlib.sha256(REFUND.encode()).hexdigest()[:12]
    return ("---\nfields: [到账时间]\n---\n到账时间是3–5个工作日 🎉[^1]。𠮷\n\n"
            f'[^1]: {SLIPPED} sha256:{digest} "{LINE}"\n')


async def test_hover_on_an_ime_slip_shows_why_and_the_line_it_means(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, {"grounding.toml": "", "evidence/refund.md": REFUND})
    client = await start(root, "visual-studio-code")
    try:
        uri = (root / "answers" / "a.md").as_uri()
        open_document(client, uri, draft())
        published = await client.recorder.wait_publish(
            uri, lambda p: "malformed-citation" in names_of(p.diagnostics), what="the slip diagnostic")
        [slip] = [d for d in published.diagnostics if d.data and d.data.get("name") == "malformed-citation"]
        start_col = len("[^1]: ")
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=5, character=start_col + 3)))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        text = hover.contents.value
        assert text.startswith("**Input-method slip:** column ")
        assert "FULLWIDTH COMMERCIAL AT" in text or "＠" in text
        assert slip.message.split(": ", 1)[-1][:20] in text  # the diagnostic's explanation
        assert "Write the id as refund@2:6." in text and "It means `refund@2:6`" in text
        assert LINE in text  # the evidence line the id means
        assert hover.range == types.Range(start=types.Position(line=5, character=start_col),
                                          end=types.Position(line=5, character=start_col + len(SLIPPED)))
        # a definition line that is malformed in another way still shows nothing
        open_document(client, (root / "answers" / "b.md").as_uri(), '[^1]: refund@2:6 "no hash"\n')
        none = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=(root / "answers" / "b.md").as_uri()),
            position=types.Position(line=0, character=8)))
        assert none is None
    finally:
        await stop(client)
