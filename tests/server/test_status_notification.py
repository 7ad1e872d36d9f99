"""``grounding/status`` tells the client which open documents are not drafts (server/features/status.py).

The VS Code client shows a "checking the draft…" spinner for a Markdown document until its first
status arrives. A Markdown file that is not a draft (a README, an evidence file) never gets a
report, so the server sends ``{"uri": ..., "status": null}`` for it once, on open; a draft gets
its real status and never the null one. Runs the real server over stdio (pytest-lsp, ``tests/support``) on a
workspace with CJK, astral-plane and CRLF text.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.lsp import RecordingClient, lsp_session, open_document
from tests.support.recorder import STATUS, Recorder, plain
from tests.support.workspace import build_workspace

EVIDENCE = "\r\n".join([
    "---", "doc_id: schedule", "version: 1", "subject: 开放日", "---",
    "# 开放日安排",
    "- 活动时间：周六9:30",          # line 7
    "- 地点：𠮷野家🎉二楼",
]) + "\r\n"


class StatusLog:
    """The ``grounding/status`` params the recorder saw, with a wait (no sleeping)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    @property
    def seen(self) -> list[dict[str, Any]]:
        """Every status in arrival order (plain JSON)."""
        return [plain(e.params) for e in self.recorder.events if e.method == STATUS]

    async def wait_for(self, uri: str, *, null: bool) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def check() -> bool:
            found[:] = [p for p in self.recorder.statuses(uri) if (p["status"] is None) == null]
            return bool(found)

        await self.recorder.wait_until(check, f"grounding/status of {uri} (null={null})")
        return found[0]


@pytest_asyncio.fixture
async def client(tmp_path: Path) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path, {"grounding.toml": 'today = "2026-06-01"\n',
                                      "evidence/schedule.md": EVIDENCE})
    (root / "answers").mkdir()
    async with lsp_session(root, "visual-studio-code") as lsp:
        yield lsp


def open_markdown(client: RecordingClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    open_document(client, uri, text)
    return uri


@pytest.mark.asyncio
async def test_only_non_drafts_get_a_null_status(client: RecordingClient) -> None:
    root = client.root
    log = StatusLog(client.recorder)
    digest = hashlib.sha256(EVIDENCE.encode("utf-8")).hexdigest()[:12]
    draft = open_markdown(client, root / "answers" / "开放日.md", (
        "---\r\nquestion: 开放日什么时候？\r\nfields: [活动时间]\r\n---\r\n"
        "开放日活动时间是周六9:30[^1]。🎉\r\n\r\n"
        f'[^1]: schedule@1:7 sha256:{digest} "- 活动时间：周六9:30"\r\n'))
    status = await log.wait_for(draft, null=False)
    assert (status["status"], status["claims"], status["validClaims"]) == ("answered", 1, 1)

    readme = open_markdown(client, root / "说明 𠮷.md", "# 说明\r\n\r\n活动时间：周六9:30 🎉\r\n")
    evidence = open_markdown(client, root / "evidence" / "schedule.md", EVIDENCE)
    assert await log.wait_for(readme, null=True) == {"uri": readme, "status": None}
    assert await log.wait_for(evidence, null=True) == {"uri": evidence, "status": None}

    # The draft got its report and never the "not a draft" status; the others got nothing else.
    assert [p["status"] for p in log.seen if p["uri"] == draft and p["status"] is None] == []
    assert [p for p in log.seen if p["uri"] in (readme, evidence) and p["status"] is not None] == []
