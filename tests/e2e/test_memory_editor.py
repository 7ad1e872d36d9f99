"""End to end: memory citations and the memory commands in the real server (SPEC §10, §11, §13).

The server runs over stdio (pytest-lsp, ``tests/support/lsp.py``), once per client profile: VS
Code (UTF-16 positions) and Neovim (UTF-8). The memory scope ``客户-李华🎉`` holds an emoji, so every
column after it differs between the two encodings; expected positions are computed here from
code points. The index is a file the test writes memory into before the server starts
(``grounding memory add`` would do the same), and reads back after each command to see what was
appended.

The commands that write memory ask first (``window/showMessageRequest`` with explicit choices):
the client's handler answers with the choice the test sets, and only the confirming choice
appends an event.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from lsprotocol import types

from grounding_core.store import Store
from server.features.workspace import FTS_GATE_ENV
from tests.support.lsp import PROFILES, RecordingClient, lsp_session, open_document
from tests.support.recorder import WAIT_SECONDS, plain
from tests.support.workspace import build_workspace, event_kinds

SCOPE = "客户-李华🎉"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def citation(version: int, value: str, key: str = "语言") -> str:
    quote = f"{key}：{value}"
    return f'memory:{SCOPE}/{key}@{version} sha256:{sha(quote)[:12]} "{quote}"'


DRAFT_LINES = [
    "---",
    "question: 回复李华时用什么语言？",
    "fields: [语言]",
    f'context: {{units: ["memory:{SCOPE}"]}}',
    "---",
    "回复李华时使用中文[^1]。旧的偏好是英文[^2]。",
    "",
    f"[^1]: {citation(2, '中文')}",
    f"[^2]: {citation(1, '英文')}",
    "",
]
DRAFT = "\r\n".join(DRAFT_LINES)  # a CRLF draft
REJECTED = "---\nquestion: 冬季书展的门票是什么材质的？\n---\n这个问题无法根据证据回答。\n"
ACCEPTED = "---\nquestion: 冬季书展的门票是多少？\n---\n"
BOOK_FAIR = "---\ndoc_id: book-fair\nsubject: 冬季书展\n---\n- 门票：10元，学生半价\n"


def build(root: Path) -> Path:
    build_workspace(root, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/book-fair.md": BOOK_FAIR,
                           "answers/memory.md": DRAFT, "answers/rejected.md": REJECTED,
                           "answers/accepted.md": ACCEPTED})  # byte-exact: the draft stays CRLF
    store = Store(str(root / ".grounding" / "index.sqlite"))
    store.remember(SCOPE, "语言", "英文", approved_by="王芳")
    store.remember(SCOPE, "语言", "中文", approved_by="王芳")
    store.remember(SCOPE, "称呼", "李先生")
    store.close()
    return root




def units(text: str, encoding: str) -> int:
    return len(text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(text.encode("utf-8"))


def position(line_text: str, line: int, column: int, encoding: str) -> types.Position:
    return types.Position(line=line, character=units(line_text[:column], encoding))


class Editor:
    """One server session (:mod:`tests.support.lsp`): the client, and the choice it answers
    ``window/showMessageRequest`` with (None: the writer dismisses the question).
    """

    def __init__(self, client: RecordingClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.encoding = client.encoding
        self.choice: str | None = None
        self.requests: list[types.ShowMessageRequestParams] = []

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def ask(ls: Any, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
            self.requests.append(params)
            return types.MessageActionItem(title=self.choice) if self.choice else None

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    def open(self, rel: str, text: str | None = None) -> str:
        uri = self.uri(rel)
        open_document(self.client, uri, text if text is not None else (self.root / rel).read_bytes().decode("utf-8"))
        return uri

    async def status(self, uri: str, predicate: Any = lambda s: True) -> dict[str, Any]:
        """The latest ``grounding/status`` of ``uri`` satisfying ``predicate`` (waits for one)."""
        recorder = self.client.recorder
        await recorder.wait_until(lambda: any(predicate(s) for s in recorder.statuses(uri)),
                                  f"a matching grounding/status for {uri}")
        return [s for s in recorder.statuses(uri) if predicate(s)][-1]

    async def execute(self, command: str, argument: Any) -> Any:
        return plain(await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=[argument])))


@pytest.fixture(params=list(PROFILES))
async def editor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Editor]:
    """A session per client profile (positions differ between them)."""
    async for session in _session(request.param, tmp_path_factory):
        yield session


@pytest.fixture
async def vscode(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Editor]:
    """One VS Code session, for behaviour that does not depend on the position encoding."""
    async for session in _session("visual-studio-code", tmp_path_factory):
        yield session


async def _session(profile: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Editor]:
    root = build(tmp_path_factory.mktemp(f"memory-{profile}").resolve())
    # VS Code shows version documents through its content provider; Neovim opens the copies
    options = {"versionDocuments": "virtual"} if profile == "visual-studio-code" else None
    async with lsp_session(root, profile, initialization_options=options) as client:
        assert client.encoding == PROFILES[profile]
        # The index holds memory events before the server starts, so drafts are checked against
        # it at once, while the initial scan still runs (SPEC §10): a test that counts the log's
        # events starts once that scan (book-fair.md's import) is committed.
        recorder = client.recorder
        await recorder.wait_until(lambda: bool(recorder.passes_since(0.0)), "the initial index pass")
        assert event_kinds(root).count("import") == 1
        yield Editor(client, root)


async def test_hover_shows_the_entry_its_state_and_the_current_version(editor: Editor) -> None:
    uri = editor.open("answers/memory.md", DRAFT)
    await editor.status(uri)
    line = DRAFT_LINES[5]
    ref = line.index("[^1]")
    hover = await editor.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=position(line, 5, ref + 1, editor.encoding)))
    assert hover is not None
    text = hover.contents.value
    assert f"memory:{SCOPE}/语言@2" in text and "语言：中文" in text
    assert "**active** — approved by 王芳" in text and f"sha256 `{sha('语言：中文')[:12]}`" in text
    assert hover.range == types.Range(start=position(line, 5, ref, editor.encoding),
                                      end=position(line, 5, ref + 4, editor.encoding))
    stale_line = DRAFT_LINES[8]
    hover = await editor.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=position(stale_line, 8, 12, editor.encoding)))
    assert hover is not None
    assert "**superseded** — version 2 supersedes it" in hover.contents.value
    assert f"Current: `memory:{SCOPE}/语言@2` — `语言：中文`" in hover.contents.value
    start = len("[^2]: ")
    assert hover.range == types.Range(
        start=position(stale_line, 8, start, editor.encoding),
        end=position(stale_line, 8, start + len(f"memory:{SCOPE}/语言@1"), editor.encoding))


async def test_completion_goes_scope_then_key_then_version_and_writes_a_verified_citation(editor: Editor) -> None:
    lines = ["---", "question: 语言？", "---", "用中文[^9]。", "", "[^9]: memory:客"]
    uri = editor.open("answers/complete.md", "\n".join(lines) + "\n")
    await editor.status(uri)

    async def complete(text: str) -> list[types.CompletionItem]:
        lines[5] = text
        editor.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=len(text)),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="\n".join(lines) + "\n")]))
        at = position(text, 5, len(text), editor.encoding)
        result = await editor.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=at))
        assert isinstance(result, types.CompletionList)
        return result.items

    start = len("[^9]: ")
    scopes = await complete("[^9]: memory:客")
    assert [i.label for i in scopes] == [SCOPE]
    assert scopes[0].text_edit is not None and scopes[0].text_edit.new_text == f"memory:{SCOPE}/"
    assert scopes[0].filter_text == f"memory:{SCOPE}/"  # matched against the typed id, as editors do
    keys = await complete(f"[^9]: memory:{SCOPE}/")
    assert [(i.label, i.detail) for i in keys] == [("称呼", "no active version"), ("语言", "语言：中文")]
    typed = f"[^9]: memory:{SCOPE}/语言@"
    versions = await complete(typed)
    assert [(i.label, i.detail) for i in versions] == [("2", "active: 语言：中文"), ("1", "superseded: 语言：英文")]
    edit = versions[0].text_edit
    assert isinstance(edit, types.TextEdit)
    assert edit.new_text == citation(2, "中文")
    assert edit.range == types.Range(start=position(typed, 5, start, editor.encoding),
                                     end=position(typed, 5, len(typed), editor.encoding))


async def test_definition_opens_a_read_only_view_of_the_entry_and_its_history(editor: Editor) -> None:
    uri = editor.open("answers/memory.md", DRAFT)
    await editor.status(uri)
    line = DRAFT_LINES[7]
    found = await editor.client.text_document_definition_async(types.DefinitionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=position(line, 7, 10, editor.encoding)))
    assert isinstance(found, list) and len(found) == 1
    location = found[0]
    if editor.encoding == "utf-16":  # VS Code: the virtual document, filled by grounding/versionText
        assert location.uri == "grounding-evidence:/" + quote(f"memory:{SCOPE}/语言", safe="") + "@2"
        assert location.uri.startswith("grounding-evidence:/memory%3A%E5%AE%A2")  # percent-encoded UTF-8
        view = plain(await editor.client.protocol.send_request_async("grounding/versionText", {"uri": location.uri}))
        assert view["readOnly"] is True and view["languageId"] == "markdown"
        text = view["text"]
    else:  # Neovim: a read-only copy under .grounding/versions (never indexed, never evidence)
        copy = editor.root / ".grounding" / "versions" / f"memory%3A{SCOPE}" / "语言@2.md"
        assert location.uri == copy.as_uri()
        assert copy.stat().st_mode & 0o222 == 0
        text = copy.read_bytes().decode("utf-8")
    text_lines = text.split("\n")
    target = text_lines[location.range.start.line]
    assert target == "- @2 语言：中文 — active: approved by 王芳"
    assert location.range.end == types.Range(
        start=types.Position(line=location.range.start.line, character=0),
        end=position(target, location.range.start.line, len(target), editor.encoding)).end
    assert "## History (event number, time recorded)" in text
    assert any(row.startswith("- event 2 (") and row.endswith("remember @2 语言：中文 (approved by 王芳)")
               for row in text_lines)


async def test_status_counts_memory_claims(vscode: Editor) -> None:
    uri = vscode.open("answers/memory.md", DRAFT)
    status = await vscode.status(uri)
    assert (status["claims"], status["validClaims"]) == (2, 1)
    assert (status["memoryClaims"], status["validMemoryClaims"]) == (2, 1)
    lenses = await vscode.client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lenses and lenses[0].command is not None and lenses[0].command.title.endswith(" · 2 memory claims")


async def test_the_remember_command_writes_only_after_the_writer_confirms(vscode: Editor) -> None:
    draft = DRAFT.replace(citation(1, "英文"), citation(2, "李老师", key="称呼"))
    uri = vscode.open("answers/memory.md", draft)
    first = await vscode.status(uri)
    assert first["errors"] >= 1          # memory:…/称呼@2 does not exist yet
    before = event_kinds(vscode.root)
    argument = {"scope": SCOPE, "key": "称呼", "value": "李老师 ", "approvedBy": "王芳"}
    vscode.choice = "Cancel"
    declined = await vscode.execute("grounding.rememberMemory", argument)
    assert declined == {"written": False, "message": "Nothing was written."}
    assert event_kinds(vscode.root) == before
    asked = vscode.requests[-1]
    assert [a.title for a in asked.actions or []] == ["Remember", "Cancel"]
    assert f"memory:{SCOPE}/称呼@2 = “称呼：李老师”" in asked.message
    vscode.choice = None                 # the writer dismissed the question
    assert (await vscode.execute("grounding.rememberMemory", argument))["written"] is False
    assert event_kinds(vscode.root) == before
    vscode.choice = "Remember"
    written = await vscode.execute("grounding.rememberMemory", argument)
    assert written["written"] is True, written
    assert written["entry"] == {"id": f"memory:{SCOPE}/称呼@2", "status": "active", "quote": "称呼：李老师",
                                "citation": citation(2, "李老师", key="称呼")}
    assert event_kinds(vscode.root) == [*before, "remember"]
    fixed = await vscode.status(uri, lambda s: s["errors"] == 0)
    assert fixed["validMemoryClaims"] == 2


async def test_forget_and_approve_ask_first_and_recheck_open_drafts(vscode: Editor) -> None:
    uri = vscode.open("answers/memory.md", DRAFT)
    await vscode.status(uri, lambda s: s["validMemoryClaims"] == 1)
    vscode.choice = "Forget"
    gone = await vscode.execute("grounding.forgetMemory", {"id": f"memory:{SCOPE}/语言", "reason": "客户撤回"})
    assert gone["written"] is True and vscode.requests[-1].actions[0].title == "Forget"  # type: ignore[index]
    await vscode.status(uri, lambda s: s["validMemoryClaims"] == 0)
    vscode.choice = "Approve"
    refused = await vscode.execute("grounding.approveMemory", {"id": f"memory:{SCOPE}/称呼@1", "by": "张老师"})
    assert refused["written"] is True and refused["entry"]["status"] == "active"
    again = await vscode.execute("grounding.approveMemory", {"id": f"memory:{SCOPE}/称呼@1", "by": "张老师"})
    assert again["written"] is False and "already approved" in again["message"]
    assert event_kinds(vscode.root)[-2:] == ["forget", "approve"]


async def test_draft_answer_uses_the_drafts_question_and_shows_unsupported_terms(vscode: Editor) -> None:
    rejected = vscode.open("answers/rejected.md")
    await vscode.status(rejected)
    shown = vscode.client.protocol.wait_for_notification_async(types.WINDOW_SHOW_MESSAGE)
    out = await vscode.execute("grounding.draftAnswer", {"uri": rejected})
    assert out["applied"] is False and out["reason"] == "unsupported_terms"
    assert out["unsupportedTerms"] == ["材质"]
    message = await asyncio.wait_for(shown, WAIT_SECONDS)
    assert "材质" in message.message and "unsupported_terms" in message.message
    accepted = vscode.open("answers/accepted.md")
    await vscode.status(accepted)
    out = await vscode.execute("grounding.draftAnswer", {"uri": accepted})
    assert out["status"] == "answered" and out["reason"] == "answered"
    assert out["claims"] == ["book-fair@1:5"]
    assert event_kinds(vscode.root).count("import") == 1  # answering never writes memory


async def test_draft_answer_waits_for_the_full_text_rows_its_context_is_ranked_by(tmp_path: Path) -> None:
    """The full-text rows are built in the background after the scan; a draftAnswer that
    arrives first waits for them and answers as ``grounding answer`` does, never an abstain
    ranked on rows not built yet (CI once saw it: the command raced the build).
    """
    root = build(tmp_path / "ws")
    gate = tmp_path / "fts-gate"
    os.mkfifo(gate)
    async with lsp_session(root, env={FTS_GATE_ENV: str(gate)}) as client:
        editor = Editor(client, root)
        recorder = client.recorder
        await recorder.wait_until(lambda: bool(recorder.passes_since(0.0)), "the initial index pass")
        try:
            accepted = editor.open("answers/accepted.md")
            await editor.status(accepted)
            pending = asyncio.ensure_future(editor.execute("grounding.draftAnswer", {"uri": accepted}))
            await editor.execute("grounding.showConflicts", {})  # answered after the draftAnswer began
            assert not pending.done()  # it waits: the build is held at the gate
        finally:
            await asyncio.to_thread(lambda: gate.open("wb").close())
        out = await asyncio.wait_for(pending, WAIT_SECONDS)
    assert out["status"] == "answered" and out["reason"] == "answered"
    assert out["claims"] == ["book-fair@1:5"] and out["applied"] is True

