"""End to end: image citations in the editor (SPEC §10, §12) against the real server over stdio.

Profiles VS Code (UTF-16) and Neovim (UTF-8). The workspace holds a PNG drawn with Pillow
(a red circle, a blue square and a green bar on white) with a CRLF sidecar, a text document,
and a draft whose sentence starts with an emoji (so columns differ between encodings):

- hover on an image citation: a Markdown image whose source is a ``data:image/png;base64,``
  URI decoding to a PNG crop of the region (checked by decoding it with Pillow: its size and
  its colour), the five measured attributes with the quoted one marked, an unmeasured quote
  called out (GR117), and the document facts;
- completion after ``面板@1#`` offers every region's attributes; accepting one writes a
  verified citation that checks clean;
- go to definition opens the PNG file itself.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types
from PIL import Image, ImageDraw

from tests.support.lsp import PROFILES, RecordingClient, lsp_session, names_of
from tests.support.workspace import build_workspace, sha256

in_module_loop = pytest.mark.asyncio(loop_scope="module")


def panel() -> bytes:
    big = Image.new("RGB", (1600, 1200), (255, 255, 255))
    pen = ImageDraw.Draw(big)
    pen.ellipse([80, 80, 223, 223], fill=(230, 30, 30))
    pen.rectangle([1200, 96, 1479, 375], fill=(30, 60, 220))
    pen.rectangle([80, 720, 1519, 1119], fill=(20, 170, 60))
    out = io.BytesIO()
    big.resize((400, 300), Image.Resampling.LANCZOS).save(out, format="PNG")
    return out.getvalue()


PNG = panel()
H = sha256(PNG)
SIDECAR = "doc_id: 面板\r\nsubject: 控制面板\r\ntitle: 控制面板示意图\r\n"
DRAFT_LINES = [
    "---",
    "question: 警示灯是什么颜色？",
    "fields: [颜色]",
    'context: {units: ["面板@1"]}',
    "---",
    "🎉警示灯是红色的[^1]，外壳是塑料的[^2]。",
    "",
    f'[^1]: 面板@1#r1 sha256:{H[:12]} "颜色：红色"',
    f'[^2]: 面板@1#r1 sha256:{H[:12]} "材质：塑料"',
    "[^3]: 面板@1#",
]
DRAFT = "\n".join(DRAFT_LINES) + "\n"


def units(text: str, encoding: str) -> int:
    return len(text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(text.encode("utf-8"))


def position(line: int, col: int, encoding: str) -> types.Position:
    return types.Position(line=line, character=units(DRAFT_LINES[line][:col], encoding))


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(PROFILES))
async def client(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RecordingClient]:
    root = build_workspace(tmp_path_factory.mktemp(f"image-{request.param}"), {
        "grounding.toml": 'index = ":memory:"\ntoday = "2026-05-01"\n',
        "evidence/images/面板.png": PNG,
        "evidence/images/面板.png.yaml": SIDECAR,
        "evidence/manual.md": "---\ndoc_id: 手册\n---\n- 颜色：红色\n",
    })
    async with lsp_session(root, request.param) as lsp:
        uri = (root / "answers/a.md").as_uri()
        mark = lsp.recorder.mark()
        lsp.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=DRAFT)))
        await lsp.recorder.wait_publish(uri, after=mark, timeout=60)
        yield lsp


def draft_uri(client: RecordingClient) -> str:
    return (client.root / "answers/a.md").as_uri()


async def hover_at(client: RecordingClient, line: int, col: int) -> str:
    result = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=draft_uri(client)),
        position=position(line, col, client.encoding)))
    assert result is not None and isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


@in_module_loop
async def test_the_draft_gets_unsupported_attribute_on_the_material_claim(client: RecordingClient) -> None:
    published = client.recorder.latest(draft_uri(client))
    assert published is not None
    assert "unsupported-attribute" in names_of(published.diagnostics)
    gr117 = next(d for d in published.diagnostics if d.code == "GR117")
    assert gr117.range.start == position(8, len("[^2]: "), client.encoding)


@in_module_loop
async def test_hover_on_an_image_citation_shows_the_cropped_region_and_its_attributes(client: RecordingClient) -> None:
    text = await hover_at(client, 5, DRAFT_LINES[5].index("[^1]") + 1)
    assert text.startswith("**控制面板示意图** · `面板@1#r1`")
    match = re.search(r"!\[面板@1#r1\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert match is not None, text[:300]
    crop = Image.open(io.BytesIO(base64.b64decode(match[1])))
    assert crop.format == "PNG"
    assert crop.size == (44, 44)  # the 36x36 circle's box plus 4 pixels each side
    assert crop.convert("RGB").getpixel((22, 22)) == (230, 30, 30)  # the red circle's middle
    assert "- **颜色：红色** ← quoted" in text
    for line in ("- 位置：20,20,36,36", "- 形状：圆形", "- 大小：小"):
        assert line in text
    assert "- Status: active" in text and f"sha256: `{H[:12]}`" in text
    assert "File: `evidence/images/面板.png`" in text


@in_module_loop
async def test_hover_on_an_unmeasured_attribute_says_it_is_not_measured(client: RecordingClient) -> None:
    text = await hover_at(client, 8, 2)
    assert "data:image/png;base64," in text
    assert "**材质 is not measured**" in text and "GR117" in text


@in_module_loop
async def test_completion_offers_regions_with_their_attributes(client: RecordingClient) -> None:
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=draft_uri(client)),
        position=position(9, len(DRAFT_LINES[9]), client.encoding),
        context=types.CompletionContext(trigger_kind=types.CompletionTriggerKind.TriggerCharacter,
                                        trigger_character="#")))
    assert isinstance(result, types.CompletionList)
    labels = [item.label for item in result.items]
    assert labels[:5] == ["r1 位置：20,20,36,36", "r1 面积：1044", "r1 颜色：红色", "r1 形状：圆形", "r1 大小：小"]
    assert "r2 颜色：蓝色" in labels and "r3 形状：长方形" in labels and len(labels) == 15
    item = next(i for i in result.items if i.label == "r2 颜色：蓝色")
    assert item.detail is not None and item.detail.startswith("r2: 蓝色 正方形 中")
    edit = item.text_edit
    assert isinstance(edit, types.TextEdit)
    assert edit.new_text == f'面板@1#r2 sha256:{H[:12]} "颜色：蓝色"'
    assert edit.range.start == position(9, len("[^3]: "), client.encoding)


@in_module_loop
async def test_go_to_definition_opens_the_image(client: RecordingClient) -> None:
    result = await client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=draft_uri(client)),
        position=position(7, len("[^1]: 面板"), client.encoding)))
    assert isinstance(result, list) and len(result) == 1
    location = result[0]
    assert isinstance(location, types.Location)
    assert location.uri == (client.root / "evidence/images/面板.png").as_uri()
    assert location.range.start == types.Position(line=0, character=0)


def test_the_test_image_has_the_regions_the_assertions_expect() -> None:
    from grounding_core.images import measure

    regions = measure(PNG).regions
    assert [r.attributes[2][1] for r in regions] == ["红色", "蓝色", "绿色"]
    assert regions[0].bbox == (20, 20, 36, 36)

