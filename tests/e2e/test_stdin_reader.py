"""The server's input reader (``server.app.PipeReader``): the real server process fed raw
LSP frames through a pipe (the event loop reads it) and from a regular file (pygls's own
executor reader), including frames split into single bytes, CJK/emoji bodies, a header line
over the limit and the end of input in the middle of a body.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from server.app import PipeReader
from tests.support.lsp import SERVER_COMMAND, SERVER_ENV
from tests.support.workspace import build_workspace

TEXT = "开放日票价：免费𠮷 🎉\r\n２．到账时间：3-5个工作日\r\n"


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def session_frames(root: Path, *, shutdown: bool = True) -> list[bytes]:
    uri = (root / "answers" / "草稿🎉.md").as_uri()
    frames = [
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}}),
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        frame({"jsonrpc": "2.0", "method": "textDocument/didOpen",
               "params": {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": TEXT}}}),
        frame({"jsonrpc": "2.0", "id": 2, "method": "grounding/documentText", "params": {"uri": uri}}),
    ]
    if shutdown:
        frames.append(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
    return frames


def responses(stdout: bytes) -> dict[int, Any]:
    """The responses in the server's output by id (notifications and requests skipped)."""
    found: dict[int, Any] = {}
    rest = stdout
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        length = int(next(line for line in head.split(b"\r\n") if line.startswith(b"Content-Length:")).split(b":")[1])
        message, rest = json.loads(rest[:length]), rest[length:]
        if "id" in message and "method" not in message:
            found[message["id"]] = message.get("result", message.get("error"))
    return found


def workspace(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws", {"evidence/.keep": "", "answers/.keep": ""})


EXIT = frame({"jsonrpc": "2.0", "method": "exit"})


async def run_server(stdin: int | Any, chunks: list[bytes] | None, *, wait_for: int | None = None) -> tuple[int, bytes]:
    """Run the server on ``stdin`` (a pipe fed ``chunks``, or a file), then, for a pipe, wait
    for the response ``wait_for`` (the shutdown's: a client waits for it) and send ``exit``.
    Returns the exit code and everything the server wrote.
    """
    process = await asyncio.create_subprocess_exec(*SERVER_COMMAND, stdin=stdin, stdout=subprocess.PIPE,
                                                   stderr=subprocess.DEVNULL, env=SERVER_ENV)
    assert process.stdout is not None
    out = b""
    if chunks is not None:
        assert process.stdin is not None
        for chunk in chunks:
            process.stdin.write(chunk)
            await process.stdin.drain()
        if wait_for is not None:
            while wait_for not in responses(out):
                head = await asyncio.wait_for(process.stdout.readuntil(b"\r\n\r\n"), timeout=60)
                length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                out += head + await process.stdout.readexactly(length)
            process.stdin.write(EXIT)
        process.stdin.close()
    rest, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return await process.wait(), out + rest


async def test_frames_split_into_single_bytes_through_a_pipe_are_read_whole(tmp_path: Path) -> None:
    data = b"".join(session_frames(workspace(tmp_path)))
    code, stdout = await run_server(subprocess.PIPE, [data[i:i + 1] for i in range(len(data))], wait_for=3)
    found = responses(stdout)
    assert found[2]["text"] == TEXT and found[3] is None
    assert code == 0


async def test_input_from_a_regular_file_uses_the_executor_reader(tmp_path: Path) -> None:
    source = tmp_path / "input.bin"
    source.write_bytes(b"".join(session_frames(workspace(tmp_path))) + EXIT)
    with source.open("rb") as handle:
        code, stdout = await run_server(handle, None)
    assert responses(stdout)[2]["text"] == TEXT
    assert code == 0


async def test_a_header_line_over_the_limit_is_dropped_and_the_next_message_is_read(tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path))
    junk = b"X-Junk: " + "票".encode() * (PipeReader.HEADER_LINE_LIMIT // 2) + b"\r\n"
    code, stdout = await run_server(subprocess.PIPE, [frames[0], frames[1], junk, *frames[2:]], wait_for=3)
    assert responses(stdout)[2]["text"] == TEXT
    assert code == 0


async def test_the_end_of_input_inside_a_body_ends_the_server(tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path), shutdown=False)
    cut = frames[3][: len(frames[3]) - 5]  # the documentText request loses its last bytes
    code, stdout = await run_server(subprocess.PIPE, [*frames[:3], cut])
    assert 1 in responses(stdout) and 2 not in responses(stdout)
    assert code == 1  # no shutdown came (LSP: exit code 1)


async def test_the_reader_gives_the_pipe_back_blocking(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as stdin:
        reader = await PipeReader.open(stdin)
        assert reader is not None and not os.get_blocking(read_fd)
        os.write(write_fd, "Content-Length: 6\r\n\r\n票价".encode())
        assert await reader.readline() == b"Content-Length: 6\r\n"
        assert await reader.readline() == b"\r\n"
        assert (await reader.readexactly(6)).decode() == "票价"
        os.close(write_fd)
        assert await reader.readline() == b""
        reader.close()
        assert os.get_blocking(read_fd)  # stdin stays open, blocking again


@pytest.mark.parametrize("kind", ["file", "closed"])
async def test_open_declines_what_the_selector_cannot_watch(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "plain.bin"
    path.write_bytes(b"")
    handle = path.open("rb")
    if kind == "closed":
        handle.close()
    try:
        assert await PipeReader.open(handle) is None
    finally:
        handle.close()
