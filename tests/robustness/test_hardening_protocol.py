"""Issue 13 item 15: every request gets an answer (LSP 3.17, JSON-RPC 2.0), through pytest-lsp.

pygls 2.1.1 drops two kinds of request silently, and a client then waits forever:

- requests after ``shutdown``: answered ``InvalidRequest`` (-32600) now; ``exit`` still ends
  the server with status 0;
- requests whose params do not deserialise (negative or 2**31 positions, ``{}``, a list):
  answered ``InvalidParams`` (-32602) now, and the server goes on serving.

Every wait is bounded (``asyncio.wait_for``), so a missing answer fails the test instead of
hanging it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.support import lsp as harness
from tests.support.lsp import open_document

from .helpers import SCHEDULE, write_files

ANSWER_SECONDS = 20.0
DRAFT = "---\nquestion: 几点？\nfields: [活动时间]\n---\n活动时间是周四16:30。🎉\r\n"


def workspace(tmp_path: Path) -> Path:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "answers/a.md": DRAFT,
                           "grounding.toml": 'today = "2026-05-01"\n'})
    return tmp_path


async def raw_request(client: Any, method: str, params: Any) -> Any:
    """Send ``params`` exactly as given (pygls's own client would refuse to serialise bad
    ones; a hostile or buggy client does not) and wait for the answer, bounded.
    """
    msg_id = f"raw-{uuid.uuid4()}"
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), ANSWER_SECONDS)


async def error_of(client: Any, method: str, params: Any) -> JsonRpcException:
    """Send a raw request and return the error it is answered with (fails on a result)."""
    try:
        result = await raw_request(client, method, params)
    except JsonRpcException as exc:
        return exc
    raise AssertionError(f"{method} was answered with a result: {result!r}")


def hover_params(uri: str, line: Any, character: Any) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


async def test_requests_after_shutdown_are_invalid_requests(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    uri = (root / "answers/a.md").as_uri()
    client = await harness.start(root, "minimal")
    try:
        open_document(client, uri, DRAFT)
        await asyncio.wait_for(client.protocol.send_request_async(types.SHUTDOWN, None), ANSWER_SECONDS)
        for method, params in [
            (types.TEXT_DOCUMENT_HOVER, hover_params(uri, 4, 2)),
            (types.TEXT_DOCUMENT_COMPLETION, hover_params(uri, 4, 2)),
            (types.TEXT_DOCUMENT_DEFINITION, hover_params(uri, 4, 2)),
            ("grounding/documentText", {"uri": uri}),
            (types.SHUTDOWN, None),
            (types.TEXT_DOCUMENT_HOVER, {}),  # bad params too: still "shutting down"
        ]:
            error = await error_of(client, method, params)
            assert error.code == types.ErrorCodes.InvalidRequest, (method, error)
            assert "shutting down" in str(error)
    finally:
        client.protocol.notify(types.EXIT, None)
    process = client._server
    assert process is not None
    assert await asyncio.wait_for(process.wait(), ANSWER_SECONDS) == 0
    await client.stop()


async def test_requests_whose_params_do_not_deserialise_are_invalid_params(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    uri = (root / "answers/a.md").as_uri()
    payloads = {
        "negative line": hover_params(uri, -1, 0),
        "negative character": hover_params(uri, 4, -5),
        "line 2**31": hover_params(uri, 2**31, 0),
        "character 2**31": hover_params(uri, 4, 2**31),
        "line 2**64": hover_params(uri, 2**64, 0),
        "line null": hover_params(uri, None, 0),
        "empty": {},
        "list": [uri, 4, 2],
        "no position": {"textDocument": {"uri": uri}},
        "no uri": {"textDocument": {"path": "answers/𠮷.md"}, "position": {"line": 0, "character": 0}},
    }
    client = await harness.start(root, "minimal")
    try:
        open_document(client, uri, DRAFT)
        for name, payload in payloads.items():
            for method in (types.TEXT_DOCUMENT_HOVER, types.TEXT_DOCUMENT_COMPLETION):
                error = await error_of(client, method, payload)
                assert error.code == types.ErrorCodes.InvalidParams, (name, method, error)
                assert method in str(error)
        # the server goes on serving: a good request is answered, the draft is diagnosed
        good = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(4, 2))), ANSWER_SECONDS)
        assert good is None or isinstance(good, types.Hover)
        await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), "diagnostics of the draft",
                                         ANSWER_SECONDS)
    finally:
        assert await harness.stop(client) == 0
