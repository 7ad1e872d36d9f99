"""tryout2 finding 4: a version edited in place into a newer one is superseded, not revoked —
the hover (server/render/hover.py) and every activity message say so (SPEC §3). Against a real
store: an evidence file with CJK, emoji and CRLF edited from version 2 to 3 in place.
"""

from __future__ import annotations

import time
from pathlib import Path

from grounding_core.model import CitationRef, Span
from grounding_core.navigate import CitationTarget
from grounding_core.workspace import Workspace
from server.render.hover import citation_hover
from tests.support.workspace import write_files

V2 = "---\r\ndoc_id: refund\r\nversion: 2\r\n---\r\n- 主题：退款政策\r\n２．到账时间：3–5个工作日 🎉\r\n"


def hover(ws: Workspace, version: int) -> str:
    snapshot = ws.store.snapshot()
    target = CitationTarget(Span.line(0, 0, 1), CitationRef("refund", version, 6), None, None)
    return citation_hover(target, snapshot, ws.config, ws.today())


def test_a_version_edited_in_place_is_superseded_and_a_withdrawn_one_is_revoked(tmp_path: Path) -> None:
    write_files(tmp_path, {"grounding.toml": "", "evidence/refund.md": V2.encode()})
    ws = Workspace.open(tmp_path)
    try:
        ws.scan()
        time.sleep(0.15)   # the scan reads a file once it has been quiet for 100 ms
        write_files(tmp_path, {"evidence/refund.md": V2.replace("version: 2", "version: 3")
                               .replace("3–5", "𠮷5").encode()})
        time.sleep(0.15)
        ws.scan()
        text = hover(ws, 2)
        assert "Status: inactive — version 3 supersedes it" in text
        assert "revoked" not in text
        # a real withdrawal still says revoked
        write_files(tmp_path, {"evidence/refund.md": V2.replace("version: 2", "version: 3\r\nstatus: revoked")
                               .replace("3–5", "𠮷5").encode()})
        time.sleep(0.15)
        ws.scan()
        snapshot = ws.store.snapshot()
        record = snapshot.record("refund", 3)
        assert record is not None
        assert snapshot.inactive_reason(record, ws.today()) == "it is revoked (status: revoked)"
        assert "version 3 supersedes it" in hover(ws, 2)
    finally:
        ws.store.close()
