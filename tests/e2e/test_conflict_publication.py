"""End to end: how the real server publishes a draft's GR108 (field-conflict) diagnostics
(SPEC §7.4, §15; docs/decisions.md "GR108 in the editor"), under the VS Code (UTF-16) and
Neovim (UTF-8) profiles.

The evidence gives the key (开放日, 活动时间) 25 distinct values: ``周四16:30`` (also written
``周四１６：３０``, full-width digits and colon, in a CRLF file: the same value after NFKC) and
24 values with an astral CJK character and an emoji. The CRLF draft cites three lines of the
key. Expected ranges are computed here from the test's own text (code points -> client units).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.support.lsp import PROFILES, RecordingClient, lsp_session
from tests.support.workspace import build_workspace, sha256

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "---\ndoc_id: {doc}\nsubject: 开放日\n---\n- 活动时间：{value}\n"
FULL_WIDTH = "周四１６：３０"


def value(n: int) -> str:
    return "周四16:30" if n == 0 else f"𠮷野家🎉第{n}场"


FILES: dict[str, str | bytes] = {
    "grounding.toml": 'today = "2026-06-01"\n',
    **{f"evidence/v{n:02d}.md": KEY.format(doc=f"v{n:02d}", value=value(n)) for n in range(25)},
    "evidence/zfull.md": KEY.format(doc="zfull", value=FULL_WIDTH).replace("\n", "\r\n"),
    "evidence/w24.md": KEY.format(doc="w24", value=value(24)),
}


def cite(label: int, doc: str, text: str) -> str:
    return f'[^{label}]: {doc}@1:5 sha256:{sha256(FILES[f"evidence/{doc}.md"])[:12]} "- 活动时间：{text}"'


SENTENCES = [f"活动时间是{value(3)}[^1]。", f"活动时间是{value(7)}[^2]。", "活动时间是周四16:30[^3]。"]
DEFINITIONS = [cite(1, "v03", value(3)), cite(2, "v07", value(7)), cite(3, "zfull", FULL_WIDTH)]
DRAFT = "\r\n".join([*SENTENCES, "", *DEFINITIONS]) + "\r\n"


def units(text: str, encoding: str) -> int:
    return len(text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(text.encode("utf-8"))


def definition_range(text: str, label: int, encoding: str) -> types.Range:
    """The range of definition ``label``'s citation (from its id to the line's end)."""
    lines = re.split(r"\r\n|\r|\n", text)
    head = f"[^{label}]: "
    number = next(i for i, line in enumerate(lines) if line.startswith(head))
    return types.Range(types.Position(number, units(head, encoding)),
                       types.Position(number, units(lines[number], encoding)))


def evidence_line(client: RecordingClient, doc: str) -> tuple[str, types.Range]:
    """(URI, range) of line 5 (0-based 4) of an evidence file, the key's line."""
    text = FILES[f"evidence/{doc}.md"]
    assert isinstance(text, str)
    line = re.split(r"\r\n|\n", text)[4]
    return ((client.root / "evidence" / f"{doc}.md").as_uri(),
            types.Range(types.Position(4, 0), types.Position(4, units(line, client.encoding))))


def conflicts(params: types.PublishDiagnosticsParams) -> list[types.Diagnostic]:
    return [d for d in params.diagnostics if d.code == "GR108"]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(PROFILES))
async def client(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path_factory.mktemp(f"conflicts-{request.param}"), FILES)
    async with lsp_session(root, request.param) as lsp:
        yield lsp


def open_draft(client: RecordingClient, name: str, text: str) -> str:
    uri = (client.root / "answers" / name).as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)))
    return uri


async def test_a_key_with_25_values_names_20_and_says_how_to_see_the_rest(client: RecordingClient) -> None:
    uri = open_draft(client, "named.md", DRAFT)
    published = await client.recorder.wait_publish(uri, lambda p: len(conflicts(p)) == 3, what="3 GR108")
    messages = {d.message for d in conflicts(published)}
    assert len(messages) == 1
    message = messages.pop()
    head = message.split("\n")[0]  # the hint follows on its own line
    assert head.startswith("active sources disagree on '活动时间' for subject '开放日': "
                           f"'{value(3)}' (1 source) vs '{value(7)}' (1 source) vs '周四16:30' (2 sources) vs ")
    assert sum(f"'{value(n)}'" in head for n in range(25)) == 20
    assert all(f"'{value(n)}'" not in head for n in range(20, 25))
    assert head.endswith("and 5 more values (6 sources); `grounding conflicts` lists every source;"
                         " Grounding does not pick a side")


async def test_the_first_diagnostic_lists_the_sources_and_the_others_point_at_it(client: RecordingClient) -> None:
    uri = open_draft(client, "related.md", DRAFT)
    published = await client.recorder.wait_publish(uri, lambda p: len(conflicts(p)) == 3, what="3 GR108")
    first, second, third = conflicts(published)
    assert [d.range for d in (first, second, third)] == [definition_range(DRAFT, n, client.encoding)
                                                         for n in (1, 2, 3)]
    related = first.related_information or []
    assert [(r.location.uri, r.location.range) for r in related[:4]] == [
        evidence_line(client, doc) for doc in ("v03", "v07", "zfull", "v01")]
    assert len(related) == 20  # one source per named value (周四16:30's: the cited zfull); 20..24 are not named
    assert related[2].message == f"活动时间：{FULL_WIDTH}"
    for later, doc in ((second, "v07"), (third, "zfull")):
        own, pointer = later.related_information or []
        assert (own.location.uri, own.location.range) == evidence_line(client, doc)
        assert pointer.location == types.Location(uri=uri, range=first.range)
        assert pointer.message == "same conflict as line 5: its sources are listed there"


async def test_deleting_the_first_diagnostics_line_moves_its_list(client: RecordingClient) -> None:
    uri = open_draft(client, "moves.md", DRAFT)
    await client.recorder.wait_publish(uri, lambda p: len(conflicts(p)) == 3, what="3 GR108")
    edited = "\r\n".join([*SENTENCES[1:], "", *DEFINITIONS[1:]]) + "\r\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[
            types.TextDocumentContentChangePartial(  # the first definition's line (line 4)
                range=types.Range(types.Position(4, 0), types.Position(5, 0)), text=""),
            types.TextDocumentContentChangePartial(  # then its sentence (line 0)
                range=types.Range(types.Position(0, 0), types.Position(1, 0)), text="")]))
    published = await client.recorder.wait_publish(uri, lambda p: p.version == 2, what="version 2")
    first, later = conflicts(published)
    assert first.range == definition_range(edited, 2, client.encoding)
    related = first.related_information or []
    assert [r.location.uri for r in related[:2]] == [evidence_line(client, doc)[0] for doc in ("v07", "zfull")]
    assert all("same conflict" not in r.message for r in related)
    own, pointer = later.related_information or []
    assert own.location.uri == evidence_line(client, "zfull")[0]
    assert pointer.location == types.Location(uri=uri, range=first.range)
    assert pointer.message == "same conflict as line 4: its sources are listed there"


async def test_hover_and_code_actions_on_a_conflict_still_answer(client: RecordingClient) -> None:
    uri = open_draft(client, "hover.md", DRAFT)
    published = await client.recorder.wait_publish(uri, lambda p: len(conflicts(p)) == 3, what="3 GR108")
    second = conflicts(published)[1]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(second.range.start.line, second.range.start.character + 1)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "`v07@1:5`" in hover.contents.value and f"> 5 | - 活动时间：{value(7)}" in hover.contents.value
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=second.range,
        context=types.CodeActionContext(diagnostics=[second])))
    assert actions is not None  # answered (a list), not an error


async def test_an_emoji_line_before_the_definitions_keeps_the_ranges(client: RecordingClient) -> None:
    text = DRAFT.replace("\r\n\r\n", "\r\n🎉𠮷 备注：见下。\r\n\r\n")
    uri = open_draft(client, "emoji.md", text)
    published = await client.recorder.wait_publish(uri, lambda p: len(conflicts(p)) == 3, what="3 GR108")
    first, *rest = conflicts(published)
    assert first.range == definition_range(text, 1, client.encoding)
    for later in rest:
        assert (later.related_information or [])[-1].location.range == first.range
        assert (later.related_information or [])[-1].message == "same conflict as line 6: its sources are listed there"

