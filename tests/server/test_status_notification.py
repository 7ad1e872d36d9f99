"""``grounding/status`` tells the client which open documents are not drafts (server/features/status.py).

The VS Code client shows a "checking the draft…" spinner for a Markdown document until its first
status arrives. A Markdown file that is not a draft (a README, an evidence file) never gets a
report, so the server sends ``{"uri": ..., "status": null}`` for it once, on open; a draft gets
its real status and never the null one. Runs the real server over stdio (pytest-lsp) on a
workspace with CJK, astral-plane and CRLF text.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

REPO_ROOT = Path(__file__).resolve().parents[2]
STATUS = "grounding/status"
TIMEOUT = 30.0

EVIDENCE = "\r\n".join([
    "---", "doc_id: schedule", "version: 1", "subject: 开放日", "---",
    "# 开放日安排",
    "- 活动时间：周六9:30",          # line 7
    "- 地点：𠮷野家🎉二楼",
]) + "\r\n"


class StatusLog:
    """Every ``grounding/status`` params in arrival order, with a waiter (no sleeping)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    def record(self, params: Any) -> None:
        self.seen.append(plain(params))
        self.changed.set()

    async def wait_for(self, uri: str, *, null: bool) -> dict[str, Any]:
        async def first() -> dict[str, Any]:
            while True:
                for p in self.seen:
                    if p["uri"] == uri and (p["status"] is None) == null:
                        return p
                self.changed.clear()
                await self.changed.wait()
        return await asyncio.wait_for(first(), TIMEOUT)


def plain(value: Any) -> Any:
    """Custom params arrive as namedtuple-like objects: make them plain JSON."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    log = StatusLog()
    client.status_log = log  # type: ignore[attr-defined]
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[STATUS] = lambda ls, params: log.record(params)
    # Requests VS Code answers with null (the file watcher, the code-lens refresh).
    for method in (types.CLIENT_REGISTER_CAPABILITY, types.CLIENT_UNREGISTER_CAPABILITY,
                   types.WORKSPACE_CODE_LENS_REFRESH):
        features[method] = lambda ls, params: None
    register_lsp_features(client, features)
    return client


CONFIG = ClientServerConfig(
    server_command=[sys.executable, "-m", "server"],
    server_env={**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))},
    client_factory=make_client,
)


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    root = tmp_path
    (root / "grounding.toml").write_text('today = "2026-06-01"\n', encoding="utf-8")
    (root / "evidence").mkdir()
    (root / "evidence" / "schedule.md").write_bytes(EVIDENCE.encode("utf-8"))
    (root / "answers").mkdir()
    lsp_client.root = root  # type: ignore[attr-defined]
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")]))
    yield
    await lsp_client.shutdown_session()


def open_markdown(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="markdown", version=1, text=text)))
    return uri


@pytest.mark.asyncio
async def test_only_non_drafts_get_a_null_status(client: LanguageClient) -> None:
    root: Path = client.root  # type: ignore[attr-defined]
    log: StatusLog = client.status_log  # type: ignore[attr-defined]
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
