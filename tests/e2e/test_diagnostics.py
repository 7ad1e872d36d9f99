"""End to end: the real server's diagnostics, as an editor sees them (SPEC §7, §10).

Every test talks to ``python -m server`` over stdio through pytest-lsp, under two client
profiles with the capabilities pytest-lsp captured from real editors: VS Code (UTF-16
positions) and Neovim (UTF-8 positions); a third profile, VS Code plus pull-diagnostics
capabilities, covers ``textDocument/diagnostic`` and ``workspace/diagnostic/refresh``.

No test sleeps: each one waits for the publication (or refresh request) it expects, through
the recording client of ``tests/support/lsp.py`` (``client.recorder``), with a 30 s upper bound.
Expected ranges are computed here, from
code-point columns found in the test's own text, converted with this module's own
:func:`units` (never with the server's codec).

The workspace (:func:`build_workspace`) pins ``today`` and holds one evidence document per
behaviour and one draft per draft diagnostic, so each GR code is provoked by a draft that
exists for it. Tests that change evidence on disk start their own server on their own copy.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.support.lsp import SERVER_ENV, RecordingClient, lsp_session
from tests.support.workspace import write

pytestmark = pytest.mark.asyncio(loop_scope="module")
"""The module-scoped servers live in the module's event loop; so must the tests."""

PROFILES = {"visual-studio-code": "utf-16", "neovim": "utf-8"}
"""pytest-lsp client name -> the position encoding the server negotiates with it."""

SOURCE = "grounding"
WAIT_SECONDS = 30.0
"""Upper bound for a request to the server (the recorder's waits use the same bound)."""
NAMES = {
    "GR101": "malformed-citation", "GR102": "unknown-source", "GR103": "quote-mismatch",
    "GR104": "stale-citation", "GR105": "hash-mismatch", "GR106": "inactive-source",
    "GR107": "invisible-source", "GR108": "field-conflict", "GR109": "missing-field",
    "GR110": "uncited-claim", "GR111": "claim-value-mismatch", "GR112": "meta-field",
    "GR113": "output-over-budget", "GR114": "status-mismatch", "GR115": "context-undeclared",
    "GR116": "invalid-context", "GR201": "unreadable-evidence", "GR202": "duplicate-doc-id",
    "GR203": "version-reuse", "GR204": "invalid-front-matter",
}
"""SPEC §7: every code and its stable name."""
ERROR, WARNING, INFO = (types.DiagnosticSeverity.Error, types.DiagnosticSeverity.Warning,
                        types.DiagnosticSeverity.Information)
SEVERITIES = {
    **dict.fromkeys(["GR101", "GR102", "GR103", "GR104", "GR105", "GR106", "GR107", "GR108",
                     "GR112", "GR113", "GR116", "GR202", "GR204"], ERROR),
    **dict.fromkeys(["GR109", "GR110", "GR111", "GR114", "GR201", "GR203"], WARNING),
    "GR115": INFO,
}
"""SPEC §7: the severity of each code."""

# ------------------------------------------------------------------------------ evidence

SCHEDULE = (
    "---\n"                        # 1
    "doc_id: schedule\n"           # 2
    "version: 2\n"                 # 3
    "title: 秋季开放日通知\n"        # 4
    "subject: 开放日\n"             # 5
    "---\n"                        # 6
    "- 活动时间：周四16:30\n"        # 7
    "- 地点：三楼报告厅\n"           # 8
    "- 版本说明：更正了活动时间\n"    # 9  (a meta field)
    "- 报名截止时间：5月1日\n"        # 10
)
POSTER = "---\ndoc_id: poster\nsubject: 开放日\n---\n- 地点：图书馆一层\n"  # conflicts on 地点
CANTEEN = "---\ndoc_id: canteen\nstatus: revoked\nsubject: 食堂\n---\n- 开放时间：6:30-21:00\n"
HOURS = "---\ndoc_id: hours\nsubject: 图书馆\n---\n- 开放时间：8:00-22:00\n"
REUSED_BEFORE = "---\ndoc_id: reused\nversion: 1\nsubject: 复用\n---\n- 电话：1234\n"
REUSED_AFTER = "---\ndoc_id: reused\nversion: 1\nsubject: 复用\n---\n- 电话：12345678\n"

EVIDENCE: dict[str, str | bytes] = {
    "schedule.md": SCHEDULE,
    "poster.md": POSTER,
    "canteen.md": CANTEEN,
    "hours.md": HOURS,
    "binary.md": b"\xff\xfe\x00 not text",                         # GR201
    "dup-a.md": "---\ndoc_id: dup\n---\n- 备注：甲\n",               # GR202 (both files)
    "dup-b.md": "---\ndoc_id: dup\n---\n- 备注：乙\n",
    "bad-front.md": "---\ndoc_id: bad id\n---\n- 备注：丙\n",         # GR204 on line 2
    "reused.md": REUSED_BEFORE,                                     # GR203 once rewritten
}
EVIDENCE_CASES = {  # code -> (file, 0-based line of the finding)
    "GR201": ("binary.md", 0),
    "GR202": ("dup-b.md", 0),
    "GR203": ("reused.md", 0),
    "GR204": ("bad-front.md", 1),
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cite(label: str, cid: str, quote: str, hex_: str | None = None) -> str:
    """A footnote definition (SPEC §5.1); the hash defaults to the schedule's."""
    return f'[^{label}]: {cid} sha256:{hex_ or sha(SCHEDULE)[:12]} "{quote}"'


def md(*body: str, fields: str = "[活动时间]", context: str | None = '{units: ["schedule@2"]}',
       newline: str = "\n") -> str:
    """A Markdown draft: front matter (4 lines, 3 without context), then ``body``."""
    front = ["---", "question: 开放日什么时候？", f"fields: {fields}"]
    if context is not None:
        front.append(f"context: {context}")
    return newline.join([*front, "---", *body]) + newline


VALID = cite("1", "schedule@2:7", "- 活动时间：周四16:30")
CLAIM = "活动时间是周四16:30[^1]。"
UNCITED = "报名截止时间是5月1日。"  # states a known value with no citation: GR110


def json_answer() -> str:
    claim = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@2:7",
             "doc_id": "schedule", "version": 2, "line": 7, "sha256": sha(SCHEDULE),
             "field": "活动时间"}
    return json.dumps({"status": "partial", "claims": [claim], "missing_fields": [],
                       "fields": ["活动时间"], "context": {"units": ["schedule@2"]}},
                      ensure_ascii=False, indent=2)


Anchor = tuple[str, str]
"""Where a finding must sit: ("def", label) = the definition from its ID to the line's end;
("text", needle) = the first occurrence of ``needle``; ("first", "") = the start of line 1."""

DRAFT_CASES: dict[str, tuple[str, str, Anchor]] = {
    # code: (draft path, text, anchor)
    "GR101": ("answers/gr101.md", md(CLAIM, "", cite("1", "schedule@x:7", "- 活动时间：周四16:30")),
              ("def", "1")),
    "GR102": ("answers/gr102.md", md(CLAIM, "", cite("1", "nosuch@1:7", "- 活动时间：周四16:30")),
              ("def", "1")),
    "GR103": ("answers/gr103.md", md(CLAIM, "", cite("1", "schedule@2:7", "- 活动时间：周四")),
              ("def", "1")),
    "GR104": ("answers/gr104.md", md(CLAIM, "", cite("1", "schedule@1:7", "- 活动时间：周四16:30")),
              ("def", "1")),
    "GR105": ("answers/gr105.md",
              md(CLAIM, "", cite("1", "schedule@2:7", "- 活动时间：周四16:30", "deadbeef0000")),
              ("def", "1")),
    "GR106": ("answers/gr106.md",
              md("食堂6:30-21:00开放[^1]。", "",
                 cite("1", "canteen@1:6", "- 开放时间：6:30-21:00", sha(CANTEEN)[:12]),
                 fields="[开放时间]", context='{units: ["canteen@1"]}'),
              ("def", "1")),
    "GR107": ("answers/gr107.md", md(CLAIM, "", VALID, context='{units: ["hours@1"]}'),
              ("def", "1")),
    "GR108": ("answers/gr108.md",
              md("地点在三楼报告厅[^1]。", "", cite("1", "schedule@2:8", "- 地点：三楼报告厅"),
                 fields="[地点]"),
              ("text", "地点")),
    "GR109": ("answers/gr109.md", md(CLAIM, "", VALID, fields="[活动时间, 报名截止时间]"),
              ("text", "报名截止时间")),
    "GR110": ("answers/gr110.md", md(CLAIM + UNCITED, "", VALID), ("text", UNCITED)),
    "GR111": ("answers/gr111.md", md("活动时间是周三16:30[^1]。", "", VALID),
              ("text", "活动时间是周三16:30[^1]。")),
    "GR112": ("answers/gr112.md",
              md("活动时间更正了[^1]。", "", cite("1", "schedule@2:9", "- 版本说明：更正了活动时间")),
              ("def", "1")),
    "GR113": ("answers/gr113.md",
              md(CLAIM, "", VALID, context="{query: 活动时间, limit: 1500, reserve: 8}"),
              ("first", "")),
    "GR114": ("answers/gr114.answer.json", json_answer(), ("text", '"partial"')),
    "GR115": ("answers/gr115.md", md(CLAIM, "", VALID, context=None), ("first", "")),
    "GR116": ("answers/gr116.md", md(CLAIM, "", VALID, context="{log: runs/missing.json}"),
              ("first", "")),
}
CLEAN = md(CLAIM, "", VALID)
"""A draft with no finding at all: answered, visible, no conflict."""


def build_workspace(root: Path, env: dict[str, str] = SERVER_ENV, *, reuse: bool = True) -> Path:
    """A workspace provoking every GR code; returns the resolved root.

    With ``reuse``, the evidence is indexed once by ``grounding index`` and ``reused.md`` is
    then rewritten under the same declared version, so the server starts with GR203.
    """
    root = root.resolve()
    write(root, "grounding.toml", 'today = "2026-05-01"\n')
    for rel, content in EVIDENCE.items():
        write(root, f"evidence/{rel}", content)
    for path, text, _ in DRAFT_CASES.values():
        write(root, path, text)
    if reuse:
        subprocess.run(
            [sys.executable, "-c", "import sys; from grounding.cli import main; sys.exit(main())",
             "index", "--root", str(root)],
            env=env, check=True, capture_output=True, timeout=120,
        )
        write(root, "evidence/reused.md", REUSED_AFTER)
    return root


# ------------------------------------------------------------- positions, independently

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def units(text: str, encoding: str) -> int:
    """Length of ``text`` in the client's position units."""
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


def lines_of(text: str) -> list[str]:
    return LINE_BREAK.split(text)


def client_range(text: str, line: int, start: int, end: int, encoding: str) -> types.Range:
    """Code-point columns ``start``..``end`` on 0-based ``line`` -> a range in client units."""
    line_text = lines_of(text)[line]
    return types.Range(
        start=types.Position(line=line, character=units(line_text[:start], encoding)),
        end=types.Position(line=line, character=units(line_text[:end], encoding)),
    )


def locate(text: str, needle: str) -> tuple[int, int, int]:
    """(0-based line, start, end) code-point columns of the first ``needle`` (on one line)."""
    for number, line in enumerate(lines_of(text)):
        if needle in line:
            start = line.index(needle)
            return number, start, start + len(needle)
    raise AssertionError(f"{needle!r} not in the text")


def anchor_range(text: str, anchor: Anchor, encoding: str) -> types.Range:
    kind, value = anchor
    if kind == "first":
        return client_range(text, 0, 0, 0, encoding)
    if kind == "def":
        head = f"[^{value}]: "
        line, _, _ = locate(text, head)
        return client_range(text, line, len(head), len(lines_of(text)[line]), encoding)
    line, start, end = locate(text, value)
    return client_range(text, line, start, end, encoding)


async def test_units_and_ranges_are_computed_independently() -> None:
    line = "𠮷野家🎉的x"
    assert units(line, "utf-16") == 8 and units(line, "utf-8") == 4 + 6 + 4 + 3 + 1
    text = "a\r\n" + line + "\r\nz"
    assert client_range(text, 1, 4, 6, "utf-16") == types.Range(
        start=types.Position(line=1, character=6), end=types.Position(line=1, character=8))
    assert client_range(text, 1, 4, 6, "utf-8") == types.Range(
        start=types.Position(line=1, character=14), end=types.Position(line=1, character=18))


# ------------------------------------------------------------------------------ sessions


# One server per client profile for the module, on a workspace of its own.
@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(PROFILES))
async def client(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path_factory.mktemp(f"ws-{request.param}"))
    async with lsp_session(root, request.param) as lsp:
        yield lsp


def encoding_of(client: RecordingClient) -> str:
    return client.encoding  # "utf-16", "utf-8"


def root_of(client: RecordingClient) -> Path:
    return client.root


def open_draft(client: RecordingClient, uri: str, text: str, version: int = 1) -> None:
    language = "json" if uri.endswith(".json") else "markdown"
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version,
                                             text=text)))


def change(client: RecordingClient, uri: str, version: int,
           *changes: types.TextDocumentContentChangePartial) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=list(changes)))


def insert_at(line: int, character: int, text: str) -> types.TextDocumentContentChangePartial:
    here = types.Position(line=line, character=character)
    return types.TextDocumentContentChangePartial(range=types.Range(start=here, end=here),
                                                  text=text)


def codes(params: types.PublishDiagnosticsParams) -> list[str]:
    return [str(d.code) for d in params.diagnostics]


def has(code: str) -> Callable[[types.PublishDiagnosticsParams], bool]:
    return lambda params: code in codes(params)


def only(params: types.PublishDiagnosticsParams, code: str) -> types.Diagnostic:
    found = [d for d in params.diagnostics if d.code == code]
    assert len(found) == 1, f"expected one {code}, got {codes(params)}"
    return found[0]


def assert_identity(diagnostic: types.Diagnostic, code: str) -> None:
    """SPEC §10: code = the GR code, source = grounding, data.name = the stable name."""
    assert diagnostic.code == code
    assert diagnostic.source == SOURCE
    assert isinstance(diagnostic.data, dict) and diagnostic.data["name"] == NAMES[code]
    assert diagnostic.severity == SEVERITIES[code]


def whole_line(path: Path, line: int, encoding: str) -> types.Range:
    text = path.read_bytes().decode("utf-8")
    return client_range(text, line, 0, len(lines_of(text)[line]), encoding)


# ------------------------------------------------------------------------------- tests


async def test_server_negotiates_the_profile_encoding(client: RecordingClient) -> None:
    offered = client.capabilities.general.position_encodings if (  # type: ignore[union-attr]
        client.capabilities and client.capabilities.general) else None
    assert encoding_of(client) == ("utf-8" if offered and "utf-8" in offered else "utf-16")
    assert encoding_of(client) in PROFILES.values()


async def test_every_spec_code_is_provoked_here() -> None:
    assert set(DRAFT_CASES) | set(EVIDENCE_CASES) == set(NAMES) == set(SEVERITIES)


@pytest.mark.parametrize("code", list(DRAFT_CASES))
async def test_draft_diagnostic_has_code_source_name_severity_and_range(
    client: RecordingClient, code: str
) -> None:
    path, text, anchor = DRAFT_CASES[code]
    uri = (root_of(client) / path).as_uri()
    open_draft(client, uri, text)
    published = await client.recorder.wait_publish(uri, has(code), what=f"{code} on {path}")
    assert published.version == 1
    wanted = anchor_range(text, anchor, encoding_of(client))
    if code == "GR108":  # SPEC §15: on the fields item and on the definition citing the key
        assert len([d for d in published.diagnostics if d.code == code]) == 2
        diagnostic = next(d for d in published.diagnostics if d.code == code and d.range == wanted)
    else:
        diagnostic = only(published, code)
    assert_identity(diagnostic, code)
    assert diagnostic.range == wanted
    assert diagnostic.message


@pytest.mark.parametrize("code", list(EVIDENCE_CASES))
async def test_evidence_file_diagnostic_is_pushed_without_opening_it(
    client: RecordingClient, code: str
) -> None:
    name, line = EVIDENCE_CASES[code]
    uri = (root_of(client) / "evidence" / name).as_uri()
    published = await client.recorder.wait_publish(uri, has(code), what=f"{code} on {name}")
    diagnostic = only(published, code)
    assert_identity(diagnostic, code)
    assert diagnostic.range.start.line == line


async def test_both_files_sharing_a_doc_id_are_reported(client: RecordingClient) -> None:
    for name in ("dup-a.md", "dup-b.md"):
        uri = (root_of(client) / "evidence" / name).as_uri()
        await client.recorder.wait_publish(uri, has("GR202"), what=f"GR202 on {name}")


async def test_field_conflict_lists_every_source_as_related_information(
    client: RecordingClient,
) -> None:
    encoding = encoding_of(client)
    evidence = root_of(client) / "evidence"
    path, text, anchor = DRAFT_CASES["GR108"]
    uri = (root_of(client) / path).as_uri()
    open_draft(client, uri, text)
    published = await client.recorder.wait_publish(uri, has("GR108"))
    on_item = anchor_range(text, anchor, encoding)  # the fields item (the definition has one too)
    diagnostic = next(d for d in published.diagnostics if d.code == "GR108" and d.range == on_item)
    related = diagnostic.related_information
    assert related is not None
    assert sorted((r.location.uri, r.location.range.start.line) for r in related) == sorted(
        [((evidence / "poster.md").as_uri(), 4), ((evidence / "schedule.md").as_uri(), 7)])
    for info in related:
        file = evidence / info.location.uri.rsplit("/", 1)[-1]
        assert info.location.range == whole_line(file, info.location.range.start.line, encoding)
        assert info.message

    # The evidence side: each conflicting line carries the other as related information.
    poster = (evidence / "poster.md").as_uri()
    on_poster = only(await client.recorder.wait_publish(poster, has("GR108")), "GR108")
    assert_identity(on_poster, "GR108")
    assert on_poster.range == whole_line(evidence / "poster.md", 4, encoding)
    assert on_poster.related_information is not None
    assert [(r.location.uri, r.location.range) for r in on_poster.related_information] == [
        ((evidence / "schedule.md").as_uri(), whole_line(evidence / "schedule.md", 7, encoding))]


ASTRAL_LINE = "𠮷野家🎉的活动时间是周三16:30[^1]。" + UNCITED
"""Starts with a supplementary-plane CJK character and an emoji (2 UTF-16 units, 4 bytes
each): one claim-value-mismatch sentence (周三 vs the cited 周四), then an uncited one."""


async def test_sentence_ranges_on_a_line_starting_with_astral_characters(
    client: RecordingClient,
) -> None:
    encoding = encoding_of(client)
    text = md(ASTRAL_LINE, "", VALID)
    uri = (root_of(client) / "answers/astral.md").as_uri()
    write(root_of(client), "answers/astral.md", text)
    open_draft(client, uri, text)
    published = await client.recorder.wait_publish(
        uri, lambda p: {"GR110", "GR111"} <= set(codes(p)))
    line = 5
    assert lines_of(text)[line] == ASTRAL_LINE
    first_end = ASTRAL_LINE.index("。") + 1  # code points: the first sentence ends at 。
    mismatch, uncited = only(published, "GR111"), only(published, "GR110")
    assert mismatch.range == client_range(text, line, 0, first_end, encoding)
    assert uncited.range == client_range(text, line, first_end, len(ASTRAL_LINE), encoding)
    # The same numbers, spelled out: 22 code points before the second sentence.
    assert first_end == 22
    expected = {"utf-16": (24, 36), "utf-8": (50, 82)}[encoding]
    assert (uncited.range.start.character, uncited.range.end.character) == expected
    assert mismatch.range.start == types.Position(line=line, character=0)
    assert mismatch.range.end.character == expected[0]


async def test_ranges_on_crlf_lines_stop_before_the_line_end(client: RecordingClient) -> None:
    encoding = encoding_of(client)
    definition = cite("1", "schedule@2:7", "- 活动时间：周四🎉")
    text = md(ASTRAL_LINE, "", definition, newline="\r\n")
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")
    uri = (root_of(client) / "answers/crlf.md").as_uri()
    write(root_of(client), "answers/crlf.md", text)
    open_draft(client, uri, text)
    published = await client.recorder.wait_publish(
        uri, lambda p: {"GR103", "GR110"} <= set(codes(p)))
    mismatch = only(published, "GR103")
    assert_identity(mismatch, "GR103")
    line = 7
    assert lines_of(text)[line] == definition
    assert mismatch.range == client_range(text, line, len("[^1]: "), len(definition), encoding)
    assert mismatch.range.end.character == units(definition, encoding)  # not past the \r
    uncited = only(published, "GR110")
    start = ASTRAL_LINE.index(UNCITED)
    assert uncited.range == client_range(text, 5, start, len(ASTRAL_LINE), encoding)


async def test_closing_a_draft_publishes_an_empty_list(client: RecordingClient) -> None:
    text = md(CLAIM, "", cite("1", "schedule@1:7", "- 活动时间：周四16:30"))
    uri = (root_of(client) / "answers/closing.md").as_uri()
    write(root_of(client), "answers/closing.md", text)
    open_draft(client, uri, text)
    await client.recorder.wait_publish(uri, has("GR104"))
    mark = client.recorder.mark()
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    cleared = await client.recorder.wait_publish(uri, after=mark, what="the clearing publish")
    assert cleared.diagnostics == ()
    assert client.recorder.for_uri(uri, after=mark) == [cleared]


async def test_fixing_a_quote_publishes_the_new_version_without_errors(
    client: RecordingClient,
) -> None:
    encoding = encoding_of(client)
    text = DRAFT_CASES["GR103"][1]
    uri = (root_of(client) / "answers/fix-quote.md").as_uri()
    write(root_of(client), "answers/fix-quote.md", text)
    open_draft(client, uri, text)
    first = await client.recorder.wait_publish(uri, has("GR103"))
    assert first.version == 1
    mark = client.recorder.mark()
    # Type the missing "16:30" before the closing quote, at a position in client units.
    line, _, _ = locate(text, '"- 活动时间：周四"')
    line_text = lines_of(text)[line]
    at = units(line_text[: line_text.rindex('"')], encoding)
    change(client, uri, 2, insert_at(line, at, "16:30"))
    fixed = await client.recorder.wait_publish(uri, lambda p: p.version == 2, after=mark)
    assert fixed.diagnostics == (), codes(fixed)
    assert [p.version for p in client.recorder.for_uri(uri, after=mark)] == [2]


async def test_rapid_changes_end_with_the_last_version_and_never_go_back(
    client: RecordingClient,
) -> None:
    uri = (root_of(client) / "answers/rapid.md").as_uri()
    write(root_of(client), "answers/rapid.md", CLEAN)
    open_draft(client, uri, CLEAN)
    assert (await client.recorder.wait_publish(uri)).diagnostics == ()
    mark = client.recorder.mark()
    body = 5  # the first line after the front matter
    for version in range(2, 7):  # five didChange in a row, no waiting in between
        change(client, uri, version, insert_at(body, 0, UNCITED + "\n"))
    sixth = await client.recorder.wait_publish(uri, lambda p: p.version == 6, after=mark)
    # Version 6 has five uncited sentences, on lines 5..9 (each one the whole line).
    assert codes(sixth) == ["GR110"] * 5
    assert sorted(d.range.start.line for d in sixth.diagnostics) == [5, 6, 7, 8, 9]
    # A seventh change is the barrier: anything stale would have to arrive before it.
    change(client, uri, 7, insert_at(body, 0, UNCITED + "\n"))
    seventh = await client.recorder.wait_publish(uri, lambda p: p.version == 7, after=mark)
    assert codes(seventh) == ["GR110"] * 6
    versions = [p.version for p in client.recorder.for_uri(uri, after=mark)]
    assert versions == sorted(versions), f"an older result was published after a newer one: {versions}"
    assert versions[-1] == 7 and versions.count(7) == 1


# -------------------------------------------------------- evidence changing on disk


BUMPED = SCHEDULE.replace("version: 2", "version: 3")


def save(path: Path, content: str, how: str) -> None:
    """Write ``content`` the way an editor saves: in place, or atomically via a temp file."""
    if how == "write":
        with open(path, "r+b") as handle:
            handle.truncate(0)
            handle.write(content.encode("utf-8"))
        return
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(content.encode("utf-8"))
    os.replace(temp, path)


@pytest.mark.parametrize("how", ["write", "atomic"])
@pytest.mark.parametrize("profile", list(PROFILES))
async def test_evidence_version_bump_on_disk_makes_open_draft_stale(
    tmp_path: Path, profile: str, how: str
) -> None:
    root = build_workspace(tmp_path, reuse=False)
    async with lsp_session(root, profile) as lsp:
        recorder = lsp.recorder
        uri = (root / "answers/valid.md").as_uri()
        write(root, "answers/valid.md", CLEAN)
        open_draft(lsp, uri, CLEAN)
        assert (await recorder.wait_publish(uri)).diagnostics == ()
        mark = recorder.mark()
        save(root / "evidence/schedule.md", BUMPED, how)
        stale = await recorder.wait_publish(uri, has("GR104"), after=mark,
                                            what=f"GR104 after a {how} save")
        assert stale.version == 1  # the draft did not change; the evidence did
        diagnostic = only(stale, "GR104")
        assert_identity(diagnostic, "GR104")
        assert diagnostic.range == anchor_range(CLEAN, ("def", "1"), PROFILES[profile])
        assert (root / "evidence/schedule.md").read_text(encoding="utf-8") == BUMPED


BULK_DOCUMENTS = 300
"""Enough evidence files that the initial scan outlasts one progress report's round trip."""


def progress_kind(params: types.ProgressParams) -> str | None:
    value = params.value
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)


@pytest.mark.parametrize("profile", list(PROFILES))
async def test_evidence_saved_while_the_initial_index_runs_is_not_lost(
    tmp_path: Path, profile: str
) -> None:
    root = build_workspace(tmp_path, reuse=False)
    # The schedule sorts first (the scan reads files in path order), then enough documents
    # that the scan is still running when the first progress report reaches the client.
    (root / "evidence/a").mkdir()
    os.replace(root / "evidence/schedule.md", root / "evidence/a/schedule.md")
    for n in range(BULK_DOCUMENTS):
        write(root, f"evidence/bulk/{n:04d}.md", f"---\ndoc_id: bulk-{n}\nsubject: 批量{n}\n---\n- 编号：{n}\n")
    async with lsp_session(root, profile) as lsp:
        recorder = lsp.recorder
        await recorder.wait_until(
            lambda: any(progress_kind(p) == "report" for p in recorder.progress),
            "the first indexing progress report")
        save(root / "evidence/a/schedule.md", BUMPED, "write")  # already read by the scan
        uri = (root / "answers/valid.md").as_uri()
        write(root, "answers/valid.md", CLEAN)
        open_draft(lsp, uri, CLEAN)
        stale = await recorder.wait_publish(uri, has("GR104"),
                                            what="GR104 for a save made during indexing")
        assert_identity(only(stale, "GR104"), "GR104")


# --------------------------------------------------------------------- pull diagnostics


async def pull(lsp: RecordingClient, uri: str) -> list[types.Diagnostic]:
    report = await asyncio.wait_for(lsp.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                       identifier="grounding")), WAIT_SECONDS)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport), report
    return list(report.items)


async def test_pull_mode_answers_requests_refreshes_and_never_pushes_drafts(tmp_path: Path) -> None:
    """The ``pull`` profile: VS Code's capabilities plus pull diagnostics with refresh support."""
    root = build_workspace(tmp_path, reuse=False)
    async with lsp_session(root, "pull") as lsp:
        recorder = lsp.recorder
        assert lsp.initialize_result is not None
        provider = lsp.initialize_result.capabilities.diagnostic_provider
        assert provider is not None and provider.identifier == "grounding"

        # Opened at once after `initialized`, while the server may still be indexing.
        text = md(CLAIM + UNCITED, "", VALID)
        uri = (root / "answers/pulled.md").as_uri()
        write(root, "answers/pulled.md", text)
        open_draft(lsp, uri, text)
        items = await pull(lsp, uri)
        assert [d.code for d in items] == ["GR110"]
        assert_identity(items[0], "GR110")
        assert items[0].range == anchor_range(text, ("text", UNCITED), "utf-16")

        # Evidence diagnostics are still pushed (evidence files need not be open).
        await recorder.wait_publish((root / "evidence/binary.md").as_uri(), has("GR201"))

        # An evidence change: the server asks the client to pull again, and the pull sees it.
        refreshes = recorder.refreshes
        save(root / "evidence/schedule.md", BUMPED, "write")
        await recorder.wait_refresh(refreshes + 1)
        items = await pull(lsp, uri)
        assert sorted(str(d.code) for d in items) == ["GR104", "GR109", "GR110"]  # stale: 活动时间 uncovered
        stale = next(d for d in items if d.code == "GR104")
        assert_identity(stale, "GR104")

        # A second evidence change is the barrier for any push the first one could cause.
        mark = recorder.mark()
        write(root, "evidence/broken.md", b"\x00binary")
        await recorder.wait_publish((root / "evidence/broken.md").as_uri(), has("GR201"),
                                    after=mark)
        await recorder.wait_refresh(refreshes + 2)
        assert recorder.for_uri(uri) == [], "a draft was pushed in pull mode"
        assert lsp.diagnostic_refresh_count == recorder.refreshes
