"""A writer types, hovers and cancels while a long evidence refresh runs (over stdio).

The workspace has 400 evidence files (CRLF, CJK, full-width colons, emoji, 𠮷) that all
conflict on two fields of one subject, so the first evidence refresh publishes GR108 on each
in chunks. While it runs, the tests (found by the ``breaker`` session's attacks, all passing):

- type 39 quick edits with a hover, an erroring request and a request cancelled on the wire
  (``$/cancelRequest``) after each, close another draft and edit ``grounding.toml``: every
  request is answered (a cancelled one with RequestCancelled or its result) and the draft's
  last publication is of the last version, with the diagnostics of the last text (inline
  comments before the claim: UTF-16 ranges);
- hover without pause: the refresh is never starved (it publishes every file);
- change ``field_separators``: no evidence file keeps a stale GR108;
- ``shutdown``/``exit``: the server exits 0 at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from tests.support.lsp import lsp_session, names_of, open_document, replace_document, start, stop
from tests.support.recorder import WAIT_SECONDS
from tests.support.workspace import build_workspace, sha256

FILES = 400


def evidence(n: int) -> str:
    return "\r\n".join(["---", f"doc_id: 价目-{n:03d}", "version: 1", "subject: 开放日🎉", "---",
                        f"- 票价：{n} 元𠮷", f"- 地点：图书馆{n}层", ""])


def draft(k: int) -> str:
    """A draft with ``k`` uncited sentences stating 票价, each after an inline comment."""
    body = "".join(f"𠮷🎉<!-- 注。 -->票价是{i} 元。\n\n" for i in range(k))
    return ("---\nquestion: 票价多少？🎉\nfields: [票价]\n---\n开放日票价：0 元𠮷[^1]。\n\n" + body
            + f'[^1]: 价目-000@1:6 sha256:{sha256(evidence(0))[:12]} "- 票价：0 元𠮷"\n')


def workspace(tmp_path: Path) -> Path:
    files: dict[str, str | bytes] = {"grounding.toml": 'today = "2026-06-01"\n'}
    for n in range(FILES):
        files[f"evidence/价目/{n:03d}.md"] = evidence(n)
    return build_workspace(tmp_path / "ws", {**files, "answers/a.md": draft(0), "answers/b.md": draft(1)})


def evidence_uris(root: Path) -> set[str]:
    return {(root / "evidence" / "价目" / f"{n:03d}.md").as_uri() for n in range(FILES)}


async def test_quick_edits_hovers_errors_and_cancels_during_the_refresh_end_on_the_last_text(
        tmp_path: Path) -> None:
    root = workspace(tmp_path)
    uri, b_uri = (root / "answers/a.md").as_uri(), (root / "answers/b.md").as_uri()
    evidence_files = evidence_uris(root)
    async with lsp_session(root, "visual-studio-code") as lsp:
        rec = lsp.recorder
        open_document(lsp, uri, draft(0))
        open_document(lsp, b_uri, draft(1))
        await rec.wait_until(lambda: any(p.diagnostics for p in rec.publications if p.uri in evidence_files),
                             "the refresh's first GR108")
        requests: list[asyncio.Future[object]] = []
        cancelled: list[asyncio.Future[object]] = []
        last = 40
        for v in range(2, last + 1):
            replace_document(lsp, uri, draft(v % 9), v)
            if v == 10:
                (root / "grounding.toml").write_text('today = "2026-06-01"\nstrict = false\n', encoding="utf-8")
            if v == 15:
                lsp.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(b_uri)))
            requests.append(asyncio.ensure_future(lsp.text_document_hover_async(types.HoverParams(
                types.TextDocumentIdentifier(uri), types.Position(line=4 + v % 5, character=3)))))
            requests.append(asyncio.ensure_future(lsp.workspace_execute_command_async(
                types.ExecuteCommandParams("grounding.rememberMemory", [None]))))  # answered with an error
            future = lsp.protocol.send_request(types.TEXT_DOCUMENT_HOVER, types.HoverParams(
                types.TextDocumentIdentifier(uri), types.Position(line=4, character=2)), msg_id=f"cancel-{v}")
            cancelled.append(asyncio.wrap_future(future))
            lsp.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=f"cancel-{v}"))
        results = await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), WAIT_SECONDS)
        hovers, commands = results[0::2], results[1::2]
        assert not any(isinstance(h, BaseException) for h in hovers), hovers
        assert all(isinstance(c, Exception) and "argument" in str(c) for c in commands), commands
        for outcome in await asyncio.wait_for(asyncio.gather(*cancelled, return_exceptions=True), WAIT_SECONDS):
            assert outcome is None or isinstance(outcome, (types.Hover, JsonRpcRequestCancelled)), outcome
        final = await rec.wait_publish(uri, lambda p: p.version == last, what="the last version's diagnostics")
        uncited = [d for d in final.diagnostics if names_of([d]) == ["uncited-claim"]]
        assert [(d.range.start.line, d.range.start.character, d.range.end.character) for d in uncited] == [
            (6 + 2 * i, 0, 22) for i in range(last % 9)]  # 𠮷🎉 are 4 UTF-16 units, the comment 11
        mark = rec.mark()  # a round trip after the last publication: nothing older follows it
        await asyncio.wait_for(lsp.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri), types.Position(line=4, character=2))), WAIT_SECONDS)
        assert all(p.version == last for p in rec.for_uri(uri, mark)), [p.version for p in rec.for_uri(uri, mark)]


async def test_hovers_without_pause_do_not_starve_the_refresh(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    uri = (root / "answers/a.md").as_uri()
    evidence_files = evidence_uris(root)
    async with lsp_session(root, "visual-studio-code") as lsp:
        rec = lsp.recorder

        def published() -> int:
            return len({p.uri for p in rec.publications if p.diagnostics} & evidence_files)

        open_document(lsp, uri, draft(2))
        await rec.wait_until(lambda: published() > 0, "the refresh's first GR108")
        loop = asyncio.get_running_loop()
        start_at, version = loop.time(), 2
        while published() < FILES and loop.time() - start_at < WAIT_SECONDS:
            batch = [lsp.text_document_hover_async(types.HoverParams(
                types.TextDocumentIdentifier(uri), types.Position(line=4, character=3))) for _ in range(8)]
            version += 1
            replace_document(lsp, uri, draft(version % 5), version)
            await asyncio.wait_for(asyncio.gather(*batch), WAIT_SECONDS)
        assert published() == FILES


async def test_a_settings_change_during_the_refresh_leaves_no_stale_evidence_diagnostic(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    evidence_files = evidence_uris(root)
    async with lsp_session(root, "minimal") as lsp:
        rec = lsp.recorder

        def with_diagnostics() -> int:
            return sum(1 for u in evidence_files if (p := rec.latest(u)) is not None and p.diagnostics)

        open_document(lsp, (root / "answers/a.md").as_uri(), draft(2))
        await rec.wait_until(lambda: with_diagnostics() > 0, "the refresh's first GR108")
        (root / "grounding.toml").write_text('today = "2026-06-01"\nfield_separators = ["="]\n', encoding="utf-8")
        await rec.wait_until(lambda: with_diagnostics() == 0, "every evidence file's GR108 withdrawn",
                             timeout=2 * WAIT_SECONDS)


async def test_shutdown_during_the_refresh_exits_at_once(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    uri = (root / "answers/a.md").as_uri()
    evidence_files = evidence_uris(root)
    lsp = await start(root, "visual-studio-code")
    try:
        rec = lsp.recorder
        open_document(lsp, uri, draft(3))
        await rec.wait_until(lambda: any(p.diagnostics for p in rec.publications if p.uri in evidence_files),
                             "the refresh's first GR108")
        for v in range(2, 6):
            replace_document(lsp, uri, draft(v), v)
        assert len({p.uri for p in rec.publications} & evidence_files) < FILES
    finally:
        code = await stop(lsp)
    assert code == 0
