"""The memory feature functions (``server/features/memory.py``), in-process on a real session
(SPEC §10, §11, §13).

The workspace holds CJK evidence with an astral subject (``𠮷野家🎉``), a CRLF draft citing a
memory entry whose scope holds an emoji, and an index file with memory written before the
session starts (as ``grounding memory add`` writes it). Commands are called as
``server/app.py`` forwards them; the session's client port answers the confirmation question
with :attr:`RecordingPort.choice`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from grounding_core.store import Store
from server.features import commands, completion, memory, navigation, status
from tests.support.inprocess import InProcess, RecordingPort, in_process
from tests.support.workspace import build_workspace, event_kinds

SCOPE = "客户-李华🎉"
EVIDENCE = "---\ndoc_id: shop\nsubject: 𠮷野家🎉\n---\n第1条 营业时间：上午九点\n- 地址：一号楼\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cite(version: int, value: str, key: str = "语言") -> str:
    quote = f"{key}：{value}"
    return f'memory:{SCOPE}/{key}@{version} sha256:{sha(quote)[:12]} "{quote}"'


DRAFT = "\r\n".join([
    "---", "question: 用什么语言？", "fields: [语言]", f'context: {{units: ["memory:{SCOPE}"]}}', "---",
    "回复时使用中文🎉[^1]。", "", f"[^1]: {cite(2, '中文')}", "",
])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = build_workspace(tmp_path / "ws", {
        "grounding.toml": 'today = "2026-05-01"\n', "evidence/shop.md": EVIDENCE, "answers/memory.md": DRAFT,
        "answers/ask.md": "---\nquestion: 𠮷野家🎉的第1条 营业时间是几点？\n---\n",  # 第1条 is no list marker
        "answers/bad.md": "---\nquestion: 𠮷野家🎉的停车费是多少？\n---\n",
    })
    store = Store(str(root / ".grounding" / "index.sqlite"))
    store.remember(SCOPE, "语言", "英文", approved_by="王芳")
    store.remember(SCOPE, "语言", "中文", approved_by="王芳")
    store.close()
    return root




def port(here: InProcess) -> RecordingPort:
    client = here.session.client
    assert isinstance(client, RecordingPort)
    return client


async def test_status_and_lens_count_memory_claims(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/memory.md", DRAFT)
        found = await here.recorder.wait_status(uri)
        assert (found["memoryClaims"], found["validMemoryClaims"], found["errors"]) == (1, 1, 0)
        lenses = await status.code_lens(here.session, types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert lenses and lenses[0].command is not None
        assert lenses[0].command.title.endswith(" · 1 memory claim")


async def test_hover_definition_and_completion_read_the_sessions_snapshot(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/memory.md", DRAFT)
        await here.recorder.wait_status(uri)
        doc = types.TextDocumentIdentifier(uri=uri)
        line = "回复时使用中文🎉[^1]。"
        at = types.Position(line=5, character=len(line[:line.index("[^1]")].encode("utf-16-le")) // 2 + 1)
        hover = await navigation.hover(here.session, types.HoverParams(text_document=doc, position=at))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert "语言：中文" in hover.contents.value and "**active**" in hover.contents.value
        found = await navigation.definition(here.session, types.DefinitionParams(
            text_document=doc, position=types.Position(line=7, character=10)))
        copy = root / ".grounding" / "versions" / f"memory%3A{SCOPE}" / "语言@2.md"  # the default: a file
        assert found is not None and found[0].uri == copy.as_uri() and copy.stat().st_mode & 0o222 == 0
        lines = copy.read_text(encoding="utf-8").split("\n")
        assert lines[found[0].range.start.line] == "- @2 语言：中文 — active: approved by 王芳"
        view = await navigation.version_text(here.session, {"uri": f"grounding-evidence:/memory%3A{SCOPE}%2F语言@2"})
        assert view is not None and view["readOnly"] is True and "- @2 语言：中文 — active" in view["text"]
        typed = f"[^1]: memory:{SCOPE}/语言@"
        here.change(uri, 2, DRAFT.replace(f"[^1]: {cite(2, '中文')}", typed))
        items = await completion.completion(here.session, types.CompletionParams(
            text_document=doc, position=types.Position(line=7, character=len(typed.encode("utf-16-le")) // 2)))
        assert items is not None
        assert [(i.label, i.kind) for i in items.items] == [("2", types.CompletionItemKind.Reference),
                                                             ("1", types.CompletionItemKind.Reference)]
        assert items.items[0].text_edit is not None and items.items[0].text_edit.new_text == cite(2, "中文")


async def test_remember_writes_only_when_confirmed_then_rechecks_open_drafts(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/memory.md", DRAFT.replace(cite(2, "中文"), cite(1, "李老师", key="称呼")))
        first = await here.recorder.wait_status(uri)
        assert first["validMemoryClaims"] == 0
        before = event_kinds(root)
        argument = {"scope": SCOPE, "key": "称呼", "value": "李老师", "approvedBy": "王芳"}
        port(here).choice = None  # dismissed
        assert await memory.remember(here.session, argument) == {"written": False, "message": "Nothing was written."}
        port(here).choice = "Cancel"
        assert (await memory.remember(here.session, argument))["written"] is False
        assert event_kinds(root) == before
        asked = here.recorder.events[-1].params
        assert isinstance(asked, types.ShowMessageRequestParams)
        assert [a.title for a in asked.actions or []] == ["Remember", "Cancel"]
        port(here).choice = "Remember"
        mark = here.recorder.mark()
        written = await memory.remember(here.session, argument)
        assert written["written"] is True and written["entry"]["id"] == f"memory:{SCOPE}/称呼@1"
        assert event_kinds(root) == [*before, "remember"]
        again = await here.recorder.wait_status(uri, after=mark)
        assert again["validMemoryClaims"] == 1
        view = here.session.current_view()
        assert view is not None and view.snapshot.memory_active(SCOPE, "称呼") is not None


async def test_bad_arguments_are_invalid_params_and_write_nothing(root: Path) -> None:
    async with in_process(root) as here:
        port(here).choice = "Forget"
        before = event_kinds(root)
        with pytest.raises(JsonRpcInvalidParams):
            await memory.forget(here.session, {"id": f"memory:{SCOPE}/语言@2"})
        with pytest.raises(JsonRpcInvalidParams):
            await memory.approve(here.session, {"id": "memory:a b/c@1", "by": "王芳"})
        port(here).choice = "Approve"
        out = await memory.approve(here.session, {"id": f"memory:{SCOPE}/语言@2", "by": "王芳"})
        assert out["written"] is False and "already approved" in out["message"]
        assert event_kinds(root) == before


async def test_draft_answer_reads_the_drafts_question_and_refuses_unsupported_terms(root: Path) -> None:
    async with in_process(root) as here:
        asked = here.open("answers/ask.md", (root / "answers/ask.md").read_text(encoding="utf-8"))
        out = await commands.draft_answer(here.session, {"uri": asked})
        assert (out["status"], out["reason"], out["claims"]) == ("answered", "answered", ["shop@1:5"])
        bad = here.open("answers/bad.md", (root / "answers/bad.md").read_text(encoding="utf-8"))
        mark = here.recorder.mark()
        out = await commands.draft_answer(here.session, {"uri": bad})
        assert (out["applied"], out["reason"], out["unsupportedTerms"]) == (False, "unsupported_terms", ["停车费"])
        shown = here.recorder.messages[-1]
        assert "停车费" in shown.message and here.recorder.mark() > mark
        assert event_kinds(root).count("import") == 1  # answering never writes memory
