"""End to end: hover, go to definition, references and ``grounding/versionText`` (SPEC §10).

The real server runs over stdio, once per client profile: VS Code (UTF-16 positions) and
Neovim (UTF-8). Each profile gets its own temporary workspace holding CJK and emoji evidence
(``- 𠮷野家🎉：周四16:30``), a CRLF file, and a document with two versions (version 1 in an
archive file) for stale citations. Expected columns are computed here, independently of the
server, from code-point offsets; on the lines that follow ``𠮷野家🎉`` they differ between the
two encodings. The context summary is checked against ``grounding_core`` run in-process on
the same files (the core is the oracle for token counts).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types

from grounding_core.context import compile_context
from grounding_core.drafts import parse_draft
from grounding_core.workspace import Workspace
from server.features.workspace import FTS_GATE_ENV
from tests.support.lsp import PROFILES, RecordingClient, lsp_session
from tests.support.workspace import build_workspace as write_workspace

in_module_loop = pytest.mark.asyncio(loop_scope="module")

# ------------------------------------------------------------------------- workspace

OPEN_DAY_V2 = (
    "---\n"
    "title: 秋季开放日\n"
    "version: 2\n"
    "---\n"
    "主题：秋季开放日\n"
    "- 活动时间：周四16:30\n"
    "- 𠮷野家🎉：周四16:30\n"
    "- 签到地点：主楼东门\n"
)
OPEN_DAY_V1 = (
    "---\n"
    "doc_id: events/open-day\n"
    "title: 秋季开放日（旧）\n"
    "version: 1\n"
    "---\n"
    "- 𠮷野家🎉：周四16:30\n"
    "- 活动时间：周三15:00\n"
)
CRLF_NOTICE = "\r\n".join([
    "---", "doc_id: crlf-notice", "title: CRLF 通知", "---", "主题：换行", "- 地点：一号楼🎉", "- 备注：无",
]) + "\r\n"

EMOJI_LINE = "- 𠮷野家🎉：周四16:30"
CRLF_LINE = "- 地点：一号楼🎉"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


H2, H1, HC = sha(OPEN_DAY_V2), sha(OPEN_DAY_V1), sha(CRLF_NOTICE)

DRAFT_LINES = [
    "---",  # 0
    "question: 开放日什么时候开始？",  # 1
    "fields: [活动时间]",  # 2
    "context: {query: 周四16:30, limit: 1500, reserve: 240}",  # 3
    "---",  # 4
    "𠮷野家🎉周四16:30[^1]。",  # 5
    "以前是周三15:00[^2]。旧的𠮷野家🎉也是周四16:30[^3]。",  # 6
    "地点在一号楼🎉[^4]。未知来源[^5]。",  # 7
    "",  # 8
    f'[^1]: events/open-day@2:7 sha256:{H2[:12]} "{EMOJI_LINE}"',  # 9
    f'[^2]: events/open-day@1:7 sha256:{H1[:12]} "- 活动时间：周三15:00"',  # 10
    f'[^3]: events/open-day@1:6 sha256:{H1[:12]} "{EMOJI_LINE}"',  # 11
    f'[^4]: crlf-notice@1:6 sha256:{HC[:12]} "{CRLF_LINE}"',  # 12
    '[^5]: nowhere@1:1 sha256:12345678 "x"',  # 13
]
DRAFT_TEXT = "\n".join(DRAFT_LINES) + "\n"
"""The editor buffer of answers/a.md (the file on disk holds an older text, DISK_A)."""

DISK_A = f'---\nquestion: 旧稿\n---\n旧稿[^1]。\n\n[^1]: events/open-day@2:7 sha256:{H2[:12]} "{EMOJI_LINE}"\n'
OLD_DRAFT = (
    "时间是周四16:30[^1]。活动时间是周四16:30[^2]。\n\n"
    f'[^1]: events/open-day@1:6 sha256:{H1[:12]} "{EMOJI_LINE}"\n'
    f'[^2]: events/open-day@2:6 sha256:{H2[:12]} "- 活动时间：周四16:30"\n'
)
JSON_LINES = [
    "{",
    '  "status": "answered",',
    '  "claims": [' + json.dumps({
        "text": "𠮷野家🎉：周四16:30", "quote": EMOJI_LINE, "id": "events/open-day@2:7",
        "doc_id": "events/open-day", "version": 2, "line": 7, "sha256": H2, "field": "𠮷野家🎉",
    }, ensure_ascii=False) + "],",
    '  "missing_fields": [],',
    '  "context": {"units": ["events/open-day@2:5-8", "crlf-notice@1"]}',
    "}",
]
JSON_TEXT = "\n".join(JSON_LINES) + "\n"


def build_workspace(root: Path) -> Path:
    return write_workspace(root, {
        "grounding.toml": 'index = ":memory:"\ntoday = "2026-05-01"\n',
        "evidence/events/open-day.md": OPEN_DAY_V2,
        "evidence/archive/open-day-v1.md": OPEN_DAY_V1,
        "evidence/crlf.md": CRLF_NOTICE,
        "answers/a.md": DISK_A,
        "answers/old.md": OLD_DRAFT,
        "answers/b.answer.json": JSON_TEXT,
    })  # written byte-exactly: CRLF stays CRLF


# --------------------------------------------------------------- positions (independent)


def units(text: str, encoding: str) -> int:
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


def pos(lines: list[str], line: int, cp_col: int, encoding: str) -> types.Position:
    return types.Position(line=line, character=units(lines[line][:cp_col], encoding))


def rng(lines: list[str], line: int, start: int, end: int, encoding: str,
        end_line: int | None = None) -> types.Range:
    return types.Range(start=pos(lines, line, start, encoding),
                       end=pos(lines, line if end_line is None else end_line, end, encoding))


def whole_line(lines: list[str], line: int, encoding: str) -> types.Range:
    return rng(lines, line, 0, len(lines[line]), encoding)


def col_of(line_text: str, needle: str) -> int:
    at = line_text.find(needle)
    assert at >= 0, f"{needle!r} not in {line_text!r}"
    return at


def test_reference_columns_differ_between_encodings() -> None:
    line = DRAFT_LINES[5]
    at = col_of(line, "[^1]")
    assert (at, units(line[:at], "utf-16"), units(line[:at], "utf-8")) == (11, 13, 25)


# ------------------------------------------------------------------------- fixtures


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(PROFILES))
async def client(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path_factory.mktemp(f"nav-{request.param}"))
    # VS Code opens grounding-evidence: documents itself and says so; the other profile takes
    # the default, read-only files under .grounding/versions/.
    options = {"versionDocuments": "virtual"} if request.param == "visual-studio-code" else None
    async with lsp_session(root, request.param, initialization_options=options) as lsp:
        _VIRTUAL[id(lsp)] = options is not None
        yield lsp


def virtual_versions(client: RecordingClient) -> bool:
    """True when this session asked for ``grounding-evidence:`` documents (``versionDocuments``)."""
    return _VIRTUAL[id(client)]


_VIRTUAL: dict[int, bool] = {}


def root_of(client: RecordingClient) -> Path:
    return client.root


def encoding_of(client: RecordingClient) -> str:
    return client.encoding


def uri_of(client: RecordingClient, rel: str) -> str:
    return (root_of(client) / rel).as_uri()


def pull_mode(client: RecordingClient) -> bool:
    caps = client.capabilities
    workspace_diags = caps.workspace.diagnostics if caps and caps.workspace else None
    return bool(caps and caps.text_document and caps.text_document.diagnostic
                and workspace_diags and workspace_diags.refresh_support)


@asynccontextmanager
async def opened(client: RecordingClient, rel: str, text: str, language: str = "markdown") -> AsyncIterator[str]:
    """Open a draft, wait until the server has checked it (so the index is ready), close it after."""
    uri = uri_of(client, rel)
    mark = client.recorder.mark()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    if pull_mode(client):
        await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
    else:
        await client.recorder.wait_publish(uri, after=mark, timeout=60)
    try:
        yield uri
    finally:
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))


async def hover(client: RecordingClient, uri: str, position: types.Position) -> types.Hover | None:
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=position))


async def definition(client: RecordingClient, uri: str, position: types.Position) -> list[types.Location]:
    result = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=position))
    assert isinstance(result, list)
    return [loc for loc in result if isinstance(loc, types.Location)]


def hover_text(result: types.Hover | None) -> str:
    assert result is not None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


def ref_position(line: int, label: str, encoding: str, inside: int = 1) -> types.Position:
    """A position ``inside`` code points into the reference ``[^label]`` on a draft line."""
    return pos(DRAFT_LINES, line, col_of(DRAFT_LINES[line], f"[^{label}]") + inside, encoding)


def ref_range(line: int, label: str, encoding: str) -> types.Range:
    at = col_of(DRAFT_LINES[line], f"[^{label}]")
    return rng(DRAFT_LINES, line, at, at + len(f"[^{label}]"), encoding)


def id_to_eol(lines: list[str], line: int, encoding: str) -> types.Range:
    start = col_of(lines[line], "]: ") + 3
    return rng(lines, line, start, len(lines[line]), encoding)


V2_LINES = OPEN_DAY_V2.splitlines()
V1_LINES = OPEN_DAY_V1.splitlines()
CRLF_LINES = CRLF_NOTICE.split("\r\n")[:-1]


# ---------------------------------------------------------------------------- hover


@in_module_loop
async def test_hover_on_reference_shows_cited_line_with_two_lines_around(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        result = await hover(client, uri, ref_position(5, "1", enc))
    text = hover_text(result)
    assert result is not None and result.range == ref_range(5, "1", enc)
    assert text.startswith("**秋季开放日** · `events/open-day@2:7`\n\n")
    assert ("```text\n"
            "  5 | 主题：秋季开放日\n"
            "  6 | - 活动时间：周四16:30\n"
            "> 7 | - 𠮷野家🎉：周四16:30\n"
            "  8 | - 签到地点：主楼东门\n"
            "```") in text
    assert "- Document: `events/open-day@2` (newest: 2)\n" in text
    assert "- Status: active\n" in text
    assert f"- sha256: `{H2[:12]}`\n" in text
    assert text.endswith("- File: `evidence/events/open-day.md`")
    assert "Stale" not in text


@in_module_loop
async def test_hover_on_stale_reference_shows_old_and_current_line(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        moved = await hover(client, uri, ref_position(6, "3", enc, inside=0))
        gone = await hover(client, uri, ref_position(6, "2", enc, inside=3))
    text = hover_text(moved)
    assert moved is not None and moved.range == ref_range(6, "3", enc)
    assert "**Stale citation:** version 1 is cited; the newest is version 2." in text
    assert ("Cited line (version 1):\n\n```text\n"
            "  4 | version: 1\n"
            "  5 | ---\n"
            "> 6 | - 𠮷野家🎉：周四16:30\n"
            "  7 | - 活动时间：周三15:00\n"
            "```") in text
    assert ("Current line (version 2): the same text is line 7.\n\n```text\n"
            "> 7 | - 𠮷野家🎉：周四16:30\n```") in text
    assert "- Status: inactive — version 2 supersedes it\n" in text
    assert f"- sha256: `{H1[:12]}`\n" in text
    assert "- File: `evidence/archive/open-day-v1.md`" in text
    text = hover_text(gone)
    assert gone is not None and gone.range == ref_range(6, "2", enc)
    assert "> 7 | - 活动时间：周三15:00" in text
    # the text is gone; the same field's line is what the writer needs (issue 12)
    assert ("Current line (version 2): the text is no longer present; the field `活动时间` is now line 6.\n\n"
            "```text\n> 6 | - 活动时间：周四16:30\n```") in text


@in_module_loop
async def test_hover_on_definition_covers_the_id_and_shows_crlf_lines_without_cr(
    client: RecordingClient,
) -> None:
    enc = encoding_of(client)
    line = DRAFT_LINES[12]
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        result = await hover(client, uri, pos(DRAFT_LINES, 12, col_of(line, "sha256"), enc))
    text = hover_text(result)
    start = col_of(line, "crlf-notice")
    assert result is not None and result.range == rng(DRAFT_LINES, 12, start, start + len("crlf-notice@1:6"), enc)
    assert "**CRLF 通知** · `crlf-notice@1:6`" in text
    assert "  4 | ---\n  5 | 主题：换行\n> 6 | - 地点：一号楼🎉\n  7 | - 备注：无\n```" in text
    assert "\r" not in text
    assert f"- sha256: `{HC[:12]}`\n" in text
    assert "- File: `evidence/crlf.md`" in text


@in_module_loop
async def test_hover_on_unknown_source_says_so_and_plain_text_has_no_hover(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        unknown = await hover(client, uri, ref_position(7, "5", enc))
        nothing = await hover(client, uri, pos(DRAFT_LINES, 7, 1, enc))
    assert hover_text(unknown) == "**Unknown source:** no document `nowhere` is in the index (cited as `nowhere@1:1`)."
    assert unknown is not None and unknown.range == ref_range(7, "5", enc)
    assert nothing is None


@in_module_loop
async def test_hover_on_json_claim_object_covers_the_object(client: RecordingClient) -> None:
    enc = encoding_of(client)
    line = JSON_LINES[2]
    async with opened(client, "answers/b.answer.json", JSON_TEXT, "json") as uri:
        result = await hover(client, uri, pos(JSON_LINES, 2, col_of(line, '"quote"'), enc))
    text = hover_text(result)
    assert result is not None
    assert result.range == rng(JSON_LINES, 2, col_of(line, "{"), line.rindex("}") + 1, enc)
    assert "> 7 | - 𠮷野家🎉：周四16:30" in text
    assert "- Status: active\n" in text


def core_oracle(root: Path, rel: str, text: str) -> tuple[dict[str, Any], int | None]:
    """The compiled context summary and output tokens, computed by the core in-process."""
    ws = Workspace.open(root)
    try:
        ws.scan()
        draft = parse_draft(text, "json" if rel.endswith(".json") else "markdown")
        assert draft.context is not None
        ws.store.build_fts()
        summary = compile_context(ws.store.snapshot(), ws.config, draft.context, draft.question or "",
                                  ws.today()).summary() if draft.context.kind == "query" else {}
        return summary, ws.check_text(rel, text, count_output=True).output_tokens
    finally:
        ws.store.close()


async def checked_with_every_full_text_row(client: RecordingClient, uri: str, after: int) -> None:
    """Wait for a ``grounding/status`` of ``uri`` (since ``after``) whose result ranked its query
    context with every full-text row: they are built in the background after the scan, and the
    open draft is checked again once they are (CI saw a hover race the build).
    """
    await client.recorder.wait_until(
        lambda: any(s.get("indexComplete") for s in client.recorder.statuses(uri, after)),
        f"a status of {uri} checked with every full-text row")


@in_module_loop
async def test_hover_on_context_key_shows_the_compiled_context(client: RecordingClient) -> None:
    enc = encoding_of(client)
    summary, output = core_oracle(root_of(client), "answers/a.md", DRAFT_TEXT)
    mark = client.recorder.mark()
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        await checked_with_every_full_text_row(client, uri, mark)
        result = await hover(client, uri, pos(DRAFT_LINES, 3, 2, enc))
    text = hover_text(result)
    assert "Still indexing" not in text
    assert result is not None and result.range == whole_line(DRAFT_LINES, 3, enc)
    assert text.startswith("**Context (query):** `周四16:30`\n\n")
    assert "Limit 1500 tokens, reserve 240, encoding `o200k_base`." in text
    assert f"Input: {summary['input_tokens']} tokens (the prompt without units: {summary['base_tokens']})." in text
    kept = summary["kept"]
    assert [u["unit"] for u in kept] == ["events/open-day@2:5-8"]
    assert f"Kept units (1):\n- `events/open-day@2:5-8` — {kept[0]['tokens']} tokens" in text
    assert "Skipped units: none." in text
    assert output is not None
    assert text.endswith(f"Output: {output} of 240 reserved tokens (answer wire, within the reserve).")


@in_module_loop
async def test_hover_on_json_context_key_lists_the_units(client: RecordingClient) -> None:
    enc = encoding_of(client)
    line = JSON_LINES[4]
    _, output = core_oracle(root_of(client), "answers/b.answer.json", JSON_TEXT)
    async with opened(client, "answers/b.answer.json", JSON_TEXT, "json") as uri:
        result = await hover(client, uri, pos(JSON_LINES, 4, col_of(line, "context") + 1, enc))
    text = hover_text(result)
    assert result is not None
    assert result.range == rng(JSON_LINES, 4, col_of(line, '"context"'), len(line), enc)
    assert text.startswith("**Context (units)**: 2 unit(s):\n- `events/open-day@2:5-8` — active — ")
    assert "\n- `crlf-notice@1` — active — " in text
    assert re.search(r"Input: \d+ tokens \(question and these units as a prompt, `o200k_base`\)\.", text)
    assert text.endswith(f"Output: {output} tokens (answer wire); no reserve declared.")


# ----------------------------------------------------------------------- definition


@in_module_loop
async def test_definition_of_current_citation_is_the_evidence_file_line(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        from_ref = await definition(client, uri, ref_position(5, "1", enc))
        from_def = await definition(client, uri, pos(DRAFT_LINES, 9, 0, enc))
        crlf = await definition(client, uri, ref_position(7, "4", enc))
    expected = types.Location(uri=uri_of(client, "evidence/events/open-day.md"),
                              range=whole_line(V2_LINES, 6, enc))
    assert from_ref == [expected]
    assert from_def == [expected]
    assert expected.range.end.character == {"utf-16": 16, "utf-8": 30}[enc]
    assert crlf == [types.Location(uri=uri_of(client, "evidence/crlf.md"), range=whole_line(CRLF_LINES, 5, enc))]


@in_module_loop
async def test_definition_of_old_version_is_a_read_only_version_document(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        locations = await definition(client, uri, ref_position(6, "3", enc))
        unknown = await client.text_document_definition_async(types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=ref_position(7, "5", enc)))
        again = await definition(client, uri, ref_position(6, "3", enc))  # the copy exists now
    assert unknown is None
    assert locations is not None and len(locations) == 1
    assert locations[0].range == whole_line(V1_LINES, 5, enc)  # 𠮷野家🎉: units differ per encoding
    if not virtual_versions(client):
        # versionDocuments "file" (the default): a read-only copy, never in the evidence folder.
        copy = root_of(client) / ".grounding" / "versions" / "events" / "open-day@1.md"
        assert locations[0].uri == copy.as_uri()
        assert copy.read_bytes() == OPEN_DAY_V1.encode("utf-8")
        assert stat.S_IMODE(copy.stat().st_mode) == 0o444
        assert not list((root_of(client) / "evidence").rglob("*@1.md"))
        assert again == locations and copy.read_bytes() == OPEN_DAY_V1.encode("utf-8")
        return
    assert locations == [types.Location(uri="grounding-evidence:/events%2Fopen-day@1",
                                        range=whole_line(V1_LINES, 5, enc))]
    content = await client.protocol.send_request_async("grounding/versionText",
                                                       {"uri": locations[0].uri})
    assert content.text == OPEN_DAY_V1
    assert content.readOnly is True
    assert content.docId == "events/open-day" and content.version == 1
    assert content.title == "秋季开放日（旧） (events/open-day@1, read-only)"
    assert content.path == "evidence/archive/open-day-v1.md"
    assert await client.protocol.send_request_async(
        "grounding/versionText", {"uri": "grounding-evidence:/events%2Fopen-day@9"}) is None


# ----------------------------------------------------------------------- references


def references_params(uri: str, line: int, declaration: bool) -> types.ReferenceParams:
    return types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=3),
        context=types.ReferenceContext(include_declaration=declaration),
    )


def spans_json_claim(encoding: str) -> types.Range:
    line = JSON_LINES[2]
    return rng(JSON_LINES, 2, col_of(line, "{"), line.rindex("}") + 1, encoding)


@in_module_loop
async def test_references_from_an_evidence_line_list_every_citation_of_it(client: RecordingClient) -> None:
    enc = encoding_of(client)
    evidence = uri_of(client, "evidence/events/open-day.md")
    old_lines = OLD_DRAFT.splitlines()
    async with opened(client, "answers/a.md", DRAFT_TEXT) as a_uri:
        found = await client.text_document_references_async(references_params(evidence, 6, True))
        without = await client.text_document_references_async(references_params(evidence, 6, False))
    assert found is not None and list(found) == [
        types.Location(uri=evidence, range=whole_line(V2_LINES, 6, enc)),
        # open buffer, not the file on disk: [^1] cites @2:7, [^3] cites @1:6 (same text)
        types.Location(uri=a_uri, range=id_to_eol(DRAFT_LINES, 9, enc)),
        types.Location(uri=a_uri, range=id_to_eol(DRAFT_LINES, 11, enc)),
        types.Location(uri=uri_of(client, "answers/b.answer.json"), range=spans_json_claim(enc)),
        types.Location(uri=uri_of(client, "answers/old.md"), range=id_to_eol(old_lines, 2, enc)),
    ]
    assert without is not None and list(without) == list(found)[1:]


@in_module_loop
async def test_references_from_the_archived_version_and_the_virtual_document(client: RecordingClient) -> None:
    enc = encoding_of(client)
    archive = uri_of(client, "evidence/archive/open-day-v1.md")
    async with opened(client, "answers/a.md", DRAFT_TEXT) as a_uri:
        from_file = await client.text_document_references_async(references_params(archive, 6, False))
        if not virtual_versions(client):  # the read-only copy the definition writes
            await definition(client, a_uri, ref_position(6, "3", enc))
        version_document = ("grounding-evidence:/events%2Fopen-day@1" if virtual_versions(client)
                            else (root_of(client) / ".grounding/versions/events/open-day@1.md").as_uri())
        from_virtual = await client.text_document_references_async(
            references_params(version_document, 6, False))
        nothing = await client.text_document_references_async(
            references_params(uri_of(client, "evidence/events/open-day.md"), 7, False))
    assert from_file is not None
    assert list(from_file) == [types.Location(uri=a_uri, range=id_to_eol(DRAFT_LINES, 10, enc))]
    assert from_virtual is not None and list(from_virtual) == list(from_file)
    assert nothing is not None and list(nothing) == []



# ----------------------------------------------------------- symbols, links, lenses, rename


CRLF_DRAFT_LINES = [
    "---", "question: 在哪里？", "fields: [地点]", "---",
    "地点在一号楼🎉[^𠮷]。备注无[^2]。",
    "",
    f'[^𠮷]: crlf-notice@1:6 sha256:{HC[:12]} "{CRLF_LINE}"',
    f'[^2]: crlf-notice@1:7 sha256:{HC[:12]} "- 备注：无"',
]
CRLF_DRAFT = "\r\n".join(CRLF_DRAFT_LINES) + "\r\n"


def symbol_rows(symbols: Any) -> list[tuple[str, str | None, types.SymbolKind, types.Range, types.Range]]:
    return [(s.name, s.detail, s.kind, s.range, s.selection_range) for s in symbols]


@in_module_loop
async def test_document_symbols_outline_the_claims_and_citations_of_a_draft(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        found = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
    assert found is not None
    claims = [s for s in found if s.kind == types.SymbolKind.String]
    assert [s.name for s in claims] == ["𠮷野家🎉周四16:30[^1]。", "以前是周三15:00[^2]。",
                                        "旧的𠮷野家🎉也是周四16:30[^3]。", "地点在一号楼🎉[^4]。", "未知来源[^5]。"]
    first = claims[0]
    assert first.detail == "events/open-day@2:7"
    assert first.range == rng(DRAFT_LINES, 5, 0, len("𠮷野家🎉周四16:30[^1]。"), enc)
    assert [(c.name, c.kind, c.range) for c in first.children or []] == [
        ("[^1] events/open-day@2:7", types.SymbolKind.Key, ref_range(5, "1", enc))]
    definitions = [s for s in found if s.kind == types.SymbolKind.Object]
    assert [(s.name, s.detail) for s in definitions] == [
        ("[^1] events/open-day@2:7", EMOJI_LINE), ("[^2] events/open-day@1:7", "- 活动时间：周三15:00"),
        ("[^3] events/open-day@1:6", EMOJI_LINE), ("[^4] crlf-notice@1:6", CRLF_LINE), ("[^5] nowhere@1:1", "x")]
    start = col_of(DRAFT_LINES[9], "events/")
    assert definitions[0].selection_range == rng(DRAFT_LINES, 9, start, start + len("events/open-day@2:7"), enc)
    assert definitions[0].range == whole_line(DRAFT_LINES, 9, enc)


@in_module_loop
async def test_document_symbols_of_a_crlf_draft_and_of_evidence_field_lines(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/crlf.md", CRLF_DRAFT) as uri:
        draft = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
    assert draft is not None
    assert [(s.name, s.range) for s in draft if s.kind == types.SymbolKind.Object] == [
        ("[^𠮷] crlf-notice@1:6", whole_line(CRLF_DRAFT_LINES, 6, enc)),
        ("[^2] crlf-notice@1:7", whole_line(CRLF_DRAFT_LINES, 7, enc))]  # no \r in any range
    evidence = uri_of(client, "evidence/events/open-day.md")
    fields = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=evidence)))  # not open: the indexed file
    assert fields is not None
    assert symbol_rows(fields) == [
        ("主题", "秋季开放日", types.SymbolKind.Field, whole_line(V2_LINES, 4, enc), rng(V2_LINES, 4, 0, 2, enc)),
        ("活动时间", "周四16:30", types.SymbolKind.Field, whole_line(V2_LINES, 5, enc), rng(V2_LINES, 5, 2, 6, enc)),
        ("𠮷野家🎉", "周四16:30", types.SymbolKind.Field, whole_line(V2_LINES, 6, enc), rng(V2_LINES, 6, 2, 6, enc)),
        ("签到地点", "主楼东门", types.SymbolKind.Field, whole_line(V2_LINES, 7, enc), rng(V2_LINES, 7, 2, 6, enc)),
    ]
    crlf = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=uri_of(client, "evidence/crlf.md"))))
    assert crlf is not None and [(s.name, s.detail, s.range) for s in crlf] == [
        ("主题", "换行", whole_line(CRLF_LINES, 4, enc)), ("地点", "一号楼🎉", whole_line(CRLF_LINES, 5, enc)),
        ("备注", "无", whole_line(CRLF_LINES, 6, enc))]


@in_module_loop
async def test_workspace_symbols_find_doc_ids_and_field_lines(client: RecordingClient) -> None:
    enc = encoding_of(client)
    by_id = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="events/"))
    assert by_id is not None
    assert [(s.name, s.kind, s.location.uri) for s in by_id] == [
        ("events/open-day", types.SymbolKind.File, uri_of(client, "evidence/events/open-day.md"))]
    by_field = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="签到地点"))
    assert by_field is not None
    assert [(s.name, s.kind, s.container_name, s.location.uri, s.location.range) for s in by_field] == [
        ("签到地点：主楼东门", types.SymbolKind.Field, "events/open-day@2",
         uri_of(client, "evidence/events/open-day.md"), whole_line(V2_LINES, 7, enc))]
    emoji = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="一号楼🎉"))
    assert emoji is not None and [(s.name, s.location.range) for s in emoji] == [
        ("地点：一号楼🎉", whole_line(CRLF_LINES, 5, enc))]
    assert await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="")) == []


@in_module_loop
async def test_document_links_open_each_cited_evidence_line(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        links = await client.text_document_document_link_async(types.DocumentLinkParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
    assert links is not None
    old = ("grounding-evidence:/events%2Fopen-day@1" if virtual_versions(client)
           else (root_of(client) / ".grounding/versions/events/open-day@1.md").as_uri())

    def id_range(line: int, cited: str) -> types.Range:
        start = col_of(DRAFT_LINES[line], cited)
        return rng(DRAFT_LINES, line, start, start + len(cited), enc)

    tooltips = bool(client.capabilities.text_document and client.capabilities.text_document.document_link
                    and client.capabilities.text_document.document_link.tooltip_support)
    expected = [
        (id_range(9, "events/open-day@2:7"), uri_of(client, "evidence/events/open-day.md") + "#L7",
         f"events/open-day@2:7: {EMOJI_LINE}"),
        (id_range(10, "events/open-day@1:7"), old + "#L7", "events/open-day@1:7: - 活动时间：周三15:00"),
        (id_range(11, "events/open-day@1:6"), old + "#L6", f"events/open-day@1:6: {EMOJI_LINE}"),
        (id_range(12, "crlf-notice@1:6"), uri_of(client, "evidence/crlf.md") + "#L6", f"crlf-notice@1:6: {CRLF_LINE}"),
    ]  # [^5] names an unknown document: no link
    assert [(link.range, link.target, link.tooltip) for link in links] == [
        (r, target, tip if tooltips else None) for r, target, tip in expected]  # tooltips only when shown


@in_module_loop
async def test_evidence_lines_get_a_lens_counting_the_drafts_that_cite_them(client: RecordingClient) -> None:
    enc = encoding_of(client)
    evidence = uri_of(client, "evidence/events/open-day.md")
    async with opened(client, "answers/a.md", DRAFT_TEXT):
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=evidence)))
        assert lenses is not None
        # line 7 (𠮷野家🎉): a.md's buffer ([^1] @2:7, and [^3] @1:6 of the same text: stale),
        # b.answer.json (@2:7) and old.md on disk ([^1] @1:6: stale); line 6: old.md's [^2].
        assert [(lens.range, lens.command.title if lens.command else None) for lens in lenses] == [
            (whole_line(V2_LINES, 5, enc), "cited by 1 draft"),
            (whole_line(V2_LINES, 6, enc), "cited by 3 drafts, 2 stale"),
        ]
        command = lenses[1].command
        assert command is not None and command.command == "grounding.showReferences"
        shown = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=command.command, arguments=command.arguments))
        listed = await client.text_document_references_async(references_params(evidence, 6, False))
    assert shown is not None and listed is not None
    assert [(loc["uri"], loc["range"]["start"]["line"]) for loc in shown] == [
        (loc.uri, loc.range.start.line) for loc in listed]
    assert len(shown) == 4
    archive = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri_of(client, "evidence/archive/open-day-v1.md"))))
    # version 1 as a file, line 6 (the same text): old.md's [^1] cites it as @1:6 (stale), a.md
    # on disk (closed now) and b.answer.json cite that text as @2:7 (current).
    assert archive is not None and [(lens.range.start.line, lens.command.title if lens.command else None)
                                    for lens in archive] == [(5, "cited by 3 drafts, 1 stale")]


@in_module_loop
async def test_rename_a_footnote_label_renames_its_references_and_definition(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/crlf.md", CRLF_DRAFT) as uri:
        doc = types.TextDocumentIdentifier(uri=uri)
        on_ref = pos(CRLF_DRAFT_LINES, 4, col_of(CRLF_DRAFT_LINES[4], "[^𠮷]") + 2, enc)
        prepared = await client.text_document_prepare_rename_async(types.PrepareRenameParams(doc, on_ref))
        nothing = await client.text_document_prepare_rename_async(types.PrepareRenameParams(
            doc, types.Position(4, 0)))
        edit = await client.text_document_rename_async(types.RenameParams(doc, on_ref, "🎉地点"))
        from_definition = await client.text_document_rename_async(types.RenameParams(
            doc, types.Position(7, 2), "备注"))
        with pytest.raises(Exception, match="already used"):
            await client.text_document_rename_async(types.RenameParams(doc, on_ref, "2"))
        with pytest.raises(Exception, match="not a valid footnote label"):
            await client.text_document_rename_async(types.RenameParams(doc, on_ref, "a b"))
    label_col = col_of(CRLF_DRAFT_LINES[4], "[^𠮷]") + 2
    assert isinstance(prepared, types.PrepareRenamePlaceholder) and prepared.placeholder == "𠮷"
    assert prepared.range == rng(CRLF_DRAFT_LINES, 4, label_col, label_col + 1, enc)
    assert nothing is None
    assert edit is not None
    changes = ([(e.range, e.new_text) for change in edit.document_changes or [] for e in change.edits]
               or [(e.range, e.new_text) for e in (edit.changes or {}).get(uri, [])])
    assert changes == [(rng(CRLF_DRAFT_LINES, 4, label_col, label_col + 1, enc), "🎉地点"),
                       (rng(CRLF_DRAFT_LINES, 6, 2, 3, enc), "🎉地点")]
    assert from_definition is not None
    two = col_of(CRLF_DRAFT_LINES[4], "[^2]") + 2
    assert ([(e.range, e.new_text) for change in from_definition.document_changes or [] for e in change.edits]
            or [(e.range, e.new_text) for e in (from_definition.changes or {}).get(uri, [])]) == [
        (rng(CRLF_DRAFT_LINES, 4, two, two + 1, enc), "备注"), (rng(CRLF_DRAFT_LINES, 7, 2, 3, enc), "备注")]


@in_module_loop
async def test_inlay_hints_show_each_citation_state(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
        hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(len(DRAFT_LINES), 0))))
        only_line_7 = await client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(7, 0), types.Position(8, 0))))
        before_ref = await client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(7, 0), types.Position(7, 5))))  # ends before [^4]
    assert hints is not None

    def after(line: int, label: str) -> types.Position:
        return pos(DRAFT_LINES, line, col_of(DRAFT_LINES[line], f"[^{label}]") + len(f"[^{label}]"), enc)

    assert [(h.position, h.label) for h in hints] == [
        (after(5, "1"), "✓ v2"), (after(6, "2"), "stale → v2"), (after(6, "3"), "stale → v2"),
        # [^4] is supported but the context query (周四16:30) did not show crlf-notice
        (after(7, "4"), "✗ invisible-source"), (after(7, "5"), "✗ unknown-source")]
    assert hints[1].tooltip is not None and "version 2 of 'events/open-day' is current" in str(hints[1].tooltip)
    assert only_line_7 is not None and [h.label for h in only_line_7] == ["✗ invisible-source", "✗ unknown-source"]
    assert before_ref is not None and list(before_ref) == []


@in_module_loop
async def test_inlay_hint_and_outline_of_a_json_answer(client: RecordingClient) -> None:
    enc = encoding_of(client)
    async with opened(client, "answers/b.answer.json", JSON_TEXT, language="json") as uri:
        doc = types.TextDocumentIdentifier(uri=uri)
        hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=doc, range=types.Range(types.Position(0, 0), types.Position(len(JSON_LINES), 0))))
        symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc))
    id_value = '"events/open-day@2:7"'
    end = col_of(JSON_LINES[2], id_value) + len(id_value)
    assert hints is not None and [(h.position, h.label) for h in hints] == [(pos(JSON_LINES, 2, end, enc), "✓ v2")]
    assert symbols is not None
    assert [(s.name, s.detail) for s in symbols] == [("events/open-day@2:7", "𠮷野家🎉：周四16:30")]


async def test_a_query_context_hovered_before_the_full_text_rows_are_built_says_still_indexing(
        tmp_path: Path) -> None:
    """The full-text rows are held at the test gate: the hover shows what the context ranks on
    the rows built so far and says so, and the draft's status says the index was incomplete;
    once built, the draft is checked again and the hover keeps the unit.
    """
    root = build_workspace(tmp_path / "ws")
    gate = tmp_path / "fts-gate"
    os.mkfifo(gate)
    async with lsp_session(root, "visual-studio-code", env={FTS_GATE_ENV: str(gate)}) as client:
        enc = encoding_of(client)
        try:
            mark = client.recorder.mark()
            async with opened(client, "answers/a.md", DRAFT_TEXT) as uri:
                early = hover_text(await hover(client, uri, pos(DRAFT_LINES, 3, 2, enc)))
                assert "Kept units: none." in early
                assert ("Still indexing: the full-text rows are being built, so this context may keep more units"
                        " once they are; hover again in a moment.") in early
                assert [s["indexComplete"] for s in client.recorder.statuses(uri, mark)] == [False]
                await asyncio.to_thread(lambda: gate.open("wb").close())
                await checked_with_every_full_text_row(client, uri, mark)
                later = hover_text(await hover(client, uri, pos(DRAFT_LINES, 3, 2, enc)))
        finally:  # (a no-op once released above)
            await asyncio.to_thread(_release, gate)
    assert "Still indexing" not in later and "Kept units (1):\n- `events/open-day@2:5-8`" in later


def _release(gate: Path) -> None:
    """Open the gate for writing without blocking when nobody waits at it any more."""
    try:
        os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: no reader (the build already passed the gate)
        pass
