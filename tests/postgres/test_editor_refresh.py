"""The language server on a shared index (issue 17): another writer's evidence change reaches an
open draft through ``LISTEN/NOTIFY``, and an unreachable database falls back to the local SQLite
index, named in ``grounding/status`` (``index.fallback``).

The real server (``python -m server``) runs under pytest-lsp against the session's real
PostgreSQL; the writer is a :class:`Store` in this process on *another* folder, so the only
way the server can learn of the change is the shared index.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from grounding_core.config import load_config
from grounding_core.index import ParseSettings
from grounding_core.store import Store

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0

SCHEDULE = ("---\r\ndoc_id: schedule\r\nversion: 2\r\n---\r\n主题：开放日\r\n"
            "1. 活动时间：周四16:30\r\n2. 地点：三楼报告厅 🎉\r\n")
SCHEDULE_V3 = SCHEDULE.replace("version: 2", "version: 3").replace("周四16:30", "周五10:00")


def draft() -> str:
    sha = hashlib.sha256(SCHEDULE.encode("utf-8")).hexdigest()[:12]
    return f"活动时间是周四16:30[^1]。\n\n[^1]: schedule@2:6 sha256:{sha} \"1. 活动时间：周四16:30\"\n"


def folder(root: Path, evidence: str) -> Path:
    (root / "evidence").mkdir(parents=True, exist_ok=True)
    (root / "answers").mkdir(exist_ok=True)
    (root / "evidence" / "schedule.md").write_bytes(evidence.encode("utf-8"))
    (root / "answers" / "a.md").write_text(draft(), encoding="utf-8")
    return root


class StatusClient(LanguageClient):
    """Records ``grounding/status`` notifications; :meth:`wait_status` awaits one matching."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.statuses: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    async def wait_status(self, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        async def first() -> dict[str, Any]:
            seen = 0
            while True:
                for status in self.statuses[seen:]:
                    if check(status):
                        return status
                seen = len(self.statuses)
                self.arrived.clear()
                await self.arrived.wait()

        try:
            return await asyncio.wait_for(first(), WAIT)
        except TimeoutError:
            raise AssertionError(f"no grounding/status {what}; got {self.statuses[-5:]}") from None


def _client() -> StatusClient:
    client = StatusClient(converter_factory=default_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    register_lsp_features(client, features)

    @client.feature("grounding/status")
    def status(ls: StatusClient, params: Any) -> None:
        ls.statuses.append(_plain(params))
        ls.arrived.set()

    return client


def _plain(value: Any) -> Any:
    """A custom notification's params (pygls hands them over as named tuples) as plain data."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


async def _session(root: Path, index: str) -> StatusClient:
    env = {k: v for k, v in os.environ.items() if k != "GROUNDING_INDEX"}
    env["GROUNDING_INDEX"] = index
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    config = ClientServerConfig(server_command=[sys.executable, "-m", "server"], server_env=env,
                                client_factory=_client)
    client = await config.start()
    assert isinstance(client, StatusClient)
    await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)])), WAIT)
    uri = (root / "answers" / "a.md").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="markdown", version=1, text=draft())))
    return client


async def _end(client: LanguageClient) -> None:
    process = client._server
    if process is not None and process.returncode is None:
        try:
            await asyncio.wait_for(client.shutdown_session(), WAIT)
        except Exception:  # noqa: BLE001  (a server that does not answer is killed below)
            pass
        if process.returncode is None:
            process.kill()
    await client.stop()


def _settings(root: Path) -> ParseSettings:
    config = load_config(root)
    return ParseSettings(config.field_separators, config.meta_fields, config.subject_fields)


@pytest.mark.postgres
async def test_a_writers_evidence_change_refreshes_an_open_draft(pg_url: str, tmp_path: Path) -> None:
    writer_root = folder(tmp_path / "writer", SCHEDULE)
    editor_root = folder(tmp_path / "editor", SCHEDULE)
    writer = Store(pg_url, _settings(writer_root))
    try:
        assert writer.scan(load_config(writer_root)).writer is None  # this process writes
        client = await _session(editor_root, pg_url)
        try:
            uri = (editor_root / "answers" / "a.md").as_uri()
            first = await client.wait_status(lambda s: s["uri"] == uri and s["status"] == "answered",
                                             "answered for the open draft")
            assert first["index"]["backend"] == "postgresql" and first["index"]["role"] == "reader"
            assert first["index"]["fallback"] is None and "@" in first["index"]["location"]
            # the change happens in the writer's folder only; the editor's files stay as they were
            (writer_root / "evidence" / "schedule.md").write_bytes(SCHEDULE_V3.encode("utf-8"))
            result = writer.scan(load_config(writer_root))
            assert [e.kind for e in result.events] == ["import", "revoke"]
            after = await client.wait_status(lambda s: s["uri"] == uri and s["errors"] > 0,
                                             "with an error after the writer's change")
            assert after["status"] != "answered"
        finally:
            await _end(client)
    finally:
        writer.close()


async def test_an_unreachable_shared_index_falls_back_to_the_local_sqlite_index(tmp_path: Path) -> None:
    root = folder(tmp_path / "editor", SCHEDULE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = await _session(root, f"postgresql://team@127.0.0.1:{port}/grounding?connect_timeout=2")
    try:
        uri = (root / "answers" / "a.md").as_uri()
        status = await client.wait_status(lambda s: s["uri"] == uri and s["status"] == "answered",
                                          "answered from the local index")
        assert status["index"]["backend"] == "sqlite" and status["index"]["role"] == "local"
        assert status["index"]["location"].endswith(".grounding/index.sqlite")
        assert f"postgresql://team@127.0.0.1:{port}/grounding" in status["index"]["fallback"]
        assert (root / ".grounding" / "index.sqlite").is_file()
    finally:
        await _end(client)
