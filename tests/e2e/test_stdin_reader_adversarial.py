"""Bad and unusual input for the server's input reader (``server.app.PipeReader``), fed to
the real server process: one socket as both stdin and stdout (inetd/``socat`` style), a
socketpair per stream (as Node/VS Code spawn), a 10 MB CJK/emoji didOpen, every message in
one write with ``shutdown`` and ``exit`` together, ``exit`` without ``shutdown``, garbage,
NUL bytes and invalid UTF-8 before a valid message, header variants, and the end of input at
every point of a frame (the server ends, never hangs).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest

from server.app import PipeReader
from tests.e2e.test_stdin_reader import EXIT, TEXT, frame, responses, run_server, session_frames, workspace
from tests.support.lsp import SERVER_COMMAND, SERVER_ENV

BIG = "开放日票价：免费𠮷 🎉\r\n" * 200_000  # 5.2 MB of UTF-8 text, a 10 MB JSON body (escaped)


def big_frames(root: Path) -> list[bytes]:
    uri = (root / "answers" / "大稿🎉.md").as_uri()
    return [
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}}),
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        frame({"jsonrpc": "2.0", "method": "textDocument/didOpen",
               "params": {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": BIG}}}),
        frame({"jsonrpc": "2.0", "id": 2, "method": "grounding/documentText", "params": {"uri": uri}}),
        frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
    ]


async def serve_on_sockets(root: Path, *, shared: bool) -> tuple[int, dict[int, object]]:
    """Run the server with a socket as stdin (and as stdout too when ``shared``), send the big
    session, read until the shutdown response, send ``exit``; the exit code and responses.
    """
    ours, theirs = socket.socketpair()
    out_ours, out_theirs = (ours, theirs) if shared else socket.socketpair()
    process = await asyncio.create_subprocess_exec(*SERVER_COMMAND, stdin=theirs, stdout=out_theirs,
                                                   stderr=subprocess.DEVNULL, env=SERVER_ENV)
    theirs.close()
    if not shared:
        out_theirs.close()
    loop = asyncio.get_running_loop()
    ours.setblocking(False)
    out_ours.setblocking(False)
    sending = asyncio.ensure_future(loop.sock_sendall(ours, b"".join(big_frames(root))))
    out = b""
    found: dict[int, object] = {}
    try:
        while 3 not in found:
            chunk = await asyncio.wait_for(loop.sock_recv(out_ours, 1 << 20), timeout=60)
            assert chunk, "the server closed its output before the shutdown response"
            out += chunk
            try:
                found = responses(out)
            except (ValueError, StopIteration):  # a message not whole yet
                continue
        await sending
        await loop.sock_sendall(ours, EXIT)
        ours.shutdown(socket.SHUT_WR)
        code = await asyncio.wait_for(process.wait(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        ours.close()
        out_ours.close()
    return code, found


@pytest.mark.parametrize("shared", [True, False], ids=["one-socket-for-stdin-and-stdout", "socketpair-per-stream"])
async def test_a_10_mb_cjk_didopen_over_sockets_is_read_and_answered_whole(shared: bool, tmp_path: Path) -> None:
    # One socket as stdin and stdout: the transport's non-blocking flag is shared by the
    # output, whose writes failed with BlockingIOError and lost bytes (the client hung).
    code, found = await serve_on_sockets(workspace(tmp_path), shared=shared)
    text = found[2]
    assert isinstance(text, dict) and text["text"] == BIG
    assert code == 0


async def test_every_message_and_shutdown_with_exit_in_one_write(tmp_path: Path) -> None:
    data = b"".join(session_frames(workspace(tmp_path))) + EXIT
    code, stdout = await run_server(subprocess.PIPE, [data])
    found = responses(stdout)
    assert found[2]["text"] == TEXT and found[3] is None
    assert code == 0


async def test_exit_without_shutdown_ends_with_code_1(tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path), shutdown=False)
    code, stdout = await run_server(subprocess.PIPE, [b"".join(frames) + EXIT])
    assert 1 in responses(stdout)
    assert code == 1


GARBAGE = [
    pytest.param(bytes(range(256)) * 300 + b"\r\n\r\n", id="binary-garbage"),
    pytest.param(b"\x00" * 70_000 + b"\r\n", id="nul-bytes-over-the-line-limit"),
    pytest.param(b"Content-Length: 9\r\n\r\n\xff\xfe\"\xe7\xa5\xa8\x00\x80}", id="invalid-utf8-body"),
    pytest.param(b"content-length: 5\r\n\r\n", id="lowercase-content-length-ignored"),
    pytest.param(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n", id="content-type-before"),
]


@pytest.mark.parametrize("junk", GARBAGE)
async def test_junk_before_a_message_leaves_the_next_message_read(junk: bytes, tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path))
    code, stdout = await run_server(subprocess.PIPE, [frames[0], frames[1], junk, *frames[2:]], wait_for=3)
    assert responses(stdout)[2]["text"] == TEXT
    assert code == 0


async def test_content_type_after_content_length_is_read(tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path))
    typed = [f.replace(b"\r\n\r\n", b"\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n", 1)
             for f in frames]
    code, stdout = await run_server(subprocess.PIPE, typed, wait_for=3)
    assert responses(stdout)[2]["text"] == TEXT
    assert code == 0


def cut_points() -> list[int]:
    message = frame({"jsonrpc": "2.0", "id": 2, "method": "grounding/documentText", "params": {"uri": "file:///草稿🎉"}})
    head = message.index(b"\r\n\r\n")
    return sorted({1, 10, head, head + 1, head + 2, head + 3, head + 4, head + 5, len(message) - 1})


@pytest.mark.parametrize("cut", cut_points())
async def test_the_end_of_input_at_any_point_of_a_frame_ends_the_server(cut: int, tmp_path: Path) -> None:
    frames = session_frames(workspace(tmp_path), shutdown=False)
    message = frame({"jsonrpc": "2.0", "id": 2, "method": "grounding/documentText", "params": {"uri": "file:///草稿🎉"}})
    code, stdout = await run_server(subprocess.PIPE, [*frames[:3], message[:cut]])
    assert 1 in responses(stdout) and 2 not in responses(stdout)
    assert code == 1


async def test_open_declines_a_socket_the_server_also_writes() -> None:
    ours, theirs = socket.socketpair()
    twin = os.dup(theirs.fileno())  # stdout as the same socket (``2>&1``-like duplicate)
    try:
        with theirs.makefile("rb") as stdin:
            assert await PipeReader.open(stdin, written=(twin,)) is None
            assert theirs.getblocking()  # left alone
            reader = await PipeReader.open(stdin, written=(ours.fileno(),))  # a different socket
            assert reader is not None
            reader.close()
    finally:
        os.close(twin)
        ours.close()
        theirs.close()
