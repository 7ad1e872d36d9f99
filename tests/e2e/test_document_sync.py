"""End to end: the real server over stdio keeps each document equal to the editor's (SPEC §10).

Two client profiles, with the capabilities pytest-lsp captured from real editors:
VS Code (offers no ``positionEncodings``, so UTF-16) and Neovim (offers utf-8, utf-16,
utf-32, so UTF-8). A seeded replay applies random incremental edits, computed in the
negotiated encoding, to both the server and a reference string here, and compares after
every edit through the ``grounding/documentText`` request. Each server is rooted in a
temporary workspace (``tests/support``), never the checkout.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.support import lsp as harness
from tests.support.lsp import RecordingClient, lsp_session
from tests.support.workspace import build_workspace

PROFILES = {"visual-studio-code": "utf-16", "neovim": "utf-8"}
"""pytest-lsp client name -> the encoding the server must negotiate with it."""

in_module_loop = pytest.mark.asyncio(loop_scope="module")
"""The module-scoped server fixture lives in the module's event loop; so must its tests."""

INITIAL_TEXT = (
    "---\r\nquestion: 活动什么时候开始？\r\n---\r\n"
    "活动时间是周四16:30🎉[^1]。\n"
    "𠮷野家\rlone CR line\u2028still the same line\n"
    "\r\n"
    '[^1]: schedule@2:6 sha256:9f86d0818ab1 "- 活动时间：周四16:30"'
)

PIECES = [
    "活动",
    "时间",
    "中",
    "🎉",
    "😋",
    "𠮷",
    "\r\n",
    "\n",
    "\r",
    "\u2028",
    "a",
    "bc",
    " ",
    "x:y",
]

# --------------------------------------------------- the reference editor (independent)

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end-before-terminator) code-point offsets of every editor line.

    An editor always has one more line than terminators: after a final terminator there is
    an empty last line.
    """
    bounds = []
    start = 0
    for match in LINE_BREAK.finditer(text):
        bounds.append((start, match.start()))
        start = match.end()
    bounds.append((start, len(text)))
    return bounds


def units(text: str, encoding: str) -> int:
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


def to_offset(text: str, position: types.Position, encoding: str) -> int:
    """An LSP position -> code-point offset, clamped the way VS Code's TextDocument clamps."""
    bounds = line_bounds(text)
    if position.line >= len(bounds):
        return len(text)
    start, end = bounds[position.line]
    used = 0
    offset = start
    while offset < end:
        width = units(text[offset], encoding)
        if used + width > position.character:
            break
        used += width
        offset += 1
    return offset


def to_position(text: str, offset: int, encoding: str) -> types.Position:
    """A code-point offset that is not inside a terminator -> an LSP position."""
    for line, (start, end) in enumerate(line_bounds(text)):
        if start <= offset <= end:
            return types.Position(line=line, character=units(text[start:offset], encoding))
    raise AssertionError(f"offset {offset} is inside a line terminator")


def apply_edit(text: str, change: types.TextDocumentContentChangePartial, encoding: str) -> str:
    start = to_offset(text, change.range.start, encoding)
    end = to_offset(text, change.range.end, encoding)
    return text[:start] + change.text + text[end:]


def random_position(rng: random.Random, text: str, encoding: str) -> types.Position:
    """A position on a character boundary; sometimes past its line's end or past the text."""
    bounds = line_bounds(text)
    roll = rng.random()
    if roll < 0.05:
        return types.Position(line=len(bounds) + rng.randrange(3), character=rng.randrange(5))
    line = rng.randrange(len(bounds))
    start, end = bounds[line]
    if roll < 0.20:
        past = units(text[start:end], encoding) + rng.randrange(1, 6)
        return types.Position(line=line, character=past)
    return to_position(text, rng.randint(start, end), encoding)


def random_change(
    rng: random.Random, text: str, encoding: str
) -> types.TextDocumentContentChangePartial:
    a = random_position(rng, text, encoding)
    b = random_position(rng, text, encoding) if rng.random() < 0.6 else a
    if to_offset(text, b, encoding) < to_offset(text, a, encoding):
        a, b = b, a
    new_text = "" if rng.random() < 0.25 else "".join(rng.choices(PIECES, k=rng.randint(1, 4)))
    return types.TextDocumentContentChangePartial(range=types.Range(start=a, end=b), text=new_text)


def test_reference_editor_clamps_and_counts_units() -> None:
    text = "a🎉b\r\nc"
    assert to_offset(text, types.Position(line=0, character=3), "utf-16") == 2
    assert to_offset(text, types.Position(line=0, character=5), "utf-8") == 2
    assert to_offset(text, types.Position(line=0, character=99), "utf-16") == 3
    assert to_offset(text, types.Position(line=7, character=0), "utf-8") == len(text)
    assert to_position(text, 6, "utf-8") == types.Position(line=1, character=1)


# ------------------------------------------------------------------------- fixtures


# One server per client profile for the whole module (starting Python + pygls takes ~1 s), on
# a temporary workspace; every test opens its own document URI so tests cannot see each
# other's text.
@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(PROFILES))
async def client(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path_factory.mktemp(f"sync-{request.param}"),
                           {"grounding.toml": 'index = ":memory:"\n', "evidence/.keep": ""})
    async with lsp_session(root, request.param) as lsp:
        yield lsp


@pytest.fixture
def doc_uri(request: pytest.FixtureRequest, client: RecordingClient) -> str:
    """A document URI unique to the running test (and client profile), in the workspace."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    return (client.root / "answers" / f"{name}.answer.md").as_uri()


async def server_text(client: RecordingClient, uri: str) -> str:
    result = await client.protocol.send_request_async("grounding/documentText", {"uri": uri})
    assert result is not None, f"{uri} is not open on the server"
    return result.text


def negotiated(client: RecordingClient) -> str:
    return client.encoding


# ---------------------------------------------------------------------------- tests


@in_module_loop
async def test_server_negotiates_the_encoding_the_client_offers(client: RecordingClient) -> None:
    caps = client.capabilities
    assert caps is not None
    offered = caps.general.position_encodings if caps.general else None
    expected = "utf-8" if offered and "utf-8" in offered else "utf-16"
    assert negotiated(client) == expected
    assert expected in PROFILES.values()


@in_module_loop
async def test_server_advertises_incremental_sync_and_save(client: RecordingClient) -> None:
    assert client.initialize_result is not None
    sync = client.initialize_result.capabilities.text_document_sync
    assert isinstance(sync, types.TextDocumentSyncOptions)
    assert sync.change == types.TextDocumentSyncKind.Incremental
    assert sync.open_close is True
    assert sync.save


@in_module_loop
async def test_open_document_text_is_returned_verbatim(
    client: RecordingClient, doc_uri: str
) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=doc_uri, language_id="markdown", version=1, text=INITIAL_TEXT
            )
        )
    )
    assert await server_text(client, doc_uri) == INITIAL_TEXT


@in_module_loop
async def test_200_random_incremental_edits_keep_server_text_equal_to_editor(
    client: RecordingClient,
    doc_uri: str,
) -> None:
    encoding = negotiated(client)
    rng = random.Random(f"grounding-sync-{encoding}")
    expected = INITIAL_TEXT
    version = 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=doc_uri, language_id="markdown", version=version, text=expected
            )
        )
    )
    applied = 0
    while applied < 200:
        # One didChange may carry several changes; each is relative to the text after the
        # previous one (LSP 3.17 §didChange).
        changes = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            change = random_change(rng, expected, encoding)
            expected = apply_edit(expected, change, encoding)
            changes.append(change)
        applied += len(changes)
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
                content_changes=changes,
            )
        )
        actual = await server_text(client, doc_uri)
        assert actual == expected, f"diverged after {applied} edits: {changes!r}"


@in_module_loop
async def test_edit_after_last_line_without_newline_and_past_line_end(
    client: RecordingClient,
    doc_uri: str,
) -> None:
    encoding = negotiated(client)
    text = "第一行🎉\r\n最后一行"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=doc_uri, language_id="markdown", version=1, text=text
            )
        )
    )
    edits = [
        ((1, 4 * 3 + 40), (1, 99), "！"),  # past the end of the last line
        ((0, 99), (0, 120), "?"),  # past the end of a CRLF line: before "\r\n"
        ((5, 0), (6, 3), "\n"),  # past the last line: appended
        ((3, 0), (3, 0), "tail"),
    ]
    for version, (start, end, new_text) in enumerate(edits, start=2):
        change = types.TextDocumentContentChangePartial(
            range=types.Range(
                start=types.Position(line=start[0], character=start[1]),
                end=types.Position(line=end[0], character=end[1]),
            ),
            text=new_text,
        )
        text = apply_edit(text, change, encoding)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
                content_changes=[change],
            )
        )
        assert await server_text(client, doc_uri) == text
    assert text == "第一行🎉?\r\n最后一行！\ntail"


@in_module_loop
async def test_closed_document_has_no_server_text(client: RecordingClient, doc_uri: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=doc_uri, language_id="markdown", version=1, text="x"
            )
        )
    )
    assert await server_text(client, doc_uri) == "x"
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc_uri))
    )
    result = await client.protocol.send_request_async("grounding/documentText", {"uri": doc_uri})
    assert result is None


# ----------------------------------------------------------------------- lifecycle


async def _start_initialized(profile: str, root: Path) -> RecordingClient:
    return await harness.start(build_workspace(root, {"evidence/.keep": ""}), profile)


@in_module_loop
@pytest.mark.parametrize("profile", list(PROFILES))
async def test_shutdown_then_exit_ends_the_process_with_code_0(profile: str, tmp_path: Path) -> None:
    lsp_client = await _start_initialized(profile, tmp_path)
    process = lsp_client._server
    assert process is not None
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), timeout=30)
        assert process.returncode == 0
    finally:
        await lsp_client.stop()


@in_module_loop
async def test_exit_without_shutdown_ends_the_process_with_code_1(tmp_path: Path) -> None:
    lsp_client = await _start_initialized("visual-studio-code", tmp_path)
    process = lsp_client._server
    assert process is not None
    try:
        lsp_client.exit(None)
        assert await asyncio.wait_for(process.wait(), timeout=30) == 1
    finally:
        await lsp_client.stop()


GROUNDING_LSP = [sys.executable, "-m", "grounding.cli", "lsp"]
"""``grounding lsp`` (the console script runs ``grounding.cli:run``)."""


@in_module_loop
@pytest.mark.parametrize("shutdown", [True, False], ids=["shutdown-then-exit", "exit-only"])
async def test_grounding_lsp_exits_with_the_protocols_code(shutdown: bool, tmp_path: Path) -> None:
    root = build_workspace(tmp_path, {"evidence/.keep": ""})
    lsp_client = await harness.start(root, "neovim", command=GROUNDING_LSP)
    process = lsp_client._server
    assert process is not None
    try:
        if shutdown:
            await asyncio.wait_for(lsp_client.shutdown_session(), timeout=30)
        else:
            lsp_client.exit(None)
        assert await asyncio.wait_for(process.wait(), timeout=30) == (0 if shutdown else 1)
    finally:
        await lsp_client.stop()
