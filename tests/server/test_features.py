"""Every feature function, called in-process on a real session (SPEC §10).

Each test builds a workspace under ``tmp_path`` (CJK, astral ``𠮷🎉`` and CRLF evidence), opens
a :class:`server.session.Session` on it with the real ``initialized`` (settings, the SQLite
index, the watcher, the initial scan) through ``tests/support/inprocess.py``, and calls the
plain functions of ``server/features/*.py`` that ``server/app.py`` forwards to. What the
session sends to the editor is recorded by the same recorder the stdio suite uses; waits are
on recorded messages, never sleeps.
"""

from __future__ import annotations

import hashlib
import logging
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from grounding_core.model import Finding, Span
from server.features import (
    actions,
    commands,
    completion,
    diagnostics,
    evidence,
    navigation,
    status,
    versions,
    workspace,
)
from server.session import Session, run_check
from tests.support.inprocess import in_process
from tests.support.workspace import build_workspace, write

SCHEDULE = "\r\n".join([
    "---",                         # 1
    "doc_id: schedule",            # 2
    "version: 2",                  # 3
    "title: 秋季开放日 🎉",          # 4
    "subject: 开放日",              # 5
    "---",                         # 6
    "- 活动时间：周四16:30",         # 7
    "- 地点：𠮷野家🎉二楼",          # 8
    "- 版本说明：第二版",            # 9 (meta field)
]) + "\r\n"
SCHEDULE_V1 = "---\ndoc_id: schedule\nversion: 1\nsubject: 开放日\n---\n- 活动时间：周三15:00\n"
PARKING = "---\ndoc_id: parking\ntitle: 停车\nsubject: 停车\n---\n- 停车地点：𠮷野家🎉后院\n"
CONFLICT = "---\ndoc_id: {doc}\nsubject: 报名\n---\n- 报名截止：{value}\n"
FILES: dict[str, str | bytes] = {
    "grounding.toml": 'today = "2026-06-01"\n',
    "evidence/schedule.md": SCHEDULE,
    "evidence/archive/schedule-v1.md": SCHEDULE_V1,
    "evidence/parking.md": PARKING,
    "evidence/c1.md": CONFLICT.format(doc="c1", value="9月1日"),
    "evidence/c2.md": CONFLICT.format(doc="c2", value="9月3日"),
    "evidence/binary.md": b"\xff\xfe\x00 not text",
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


H2, H1 = sha(SCHEDULE)[:12], sha(SCHEDULE_V1)[:12]
FRONT = "---\nquestion: 活动什么时候？\nfields: [活动时间]\ncontext: {units: [\"schedule@2\"]}\n---\n"
VALID = FRONT + f'活动时间是周四16:30[^1]。\n\n[^1]: schedule@2:7 sha256:{H2} "- 活动时间：周四16:30"\n'
STALE = FRONT + f'活动时间是周三15:00[^1]。\n\n[^1]: schedule@1:6 sha256:{H1} "- 活动时间：周三15:00"\n'


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def codes(params: types.PublishDiagnosticsParams) -> list[str]:
    return [str(d.code) for d in params.diagnostics]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return build_workspace(tmp_path / "ws", FILES)


# ----------------------------------------------------------------------------- session


async def test_a_result_is_fresh_only_for_its_version_text_and_generation(root: Path) -> None:
    async with in_process(root) as here:
        session = here.session
        uri = here.open("answers/a.md", VALID)
        result = await session.current_result(uri)
        assert result is not None and session.is_fresh(result)
        here.change(uri, 2, VALID + "\n")
        assert not session.is_fresh(result)  # the document moved on
        newer = await session.current_result(uri)
        assert newer is not None and newer.key.version == 2 and session.is_fresh(newer)
        view = session.current_view()
        assert view is not None
        session.set_snapshot(view.snapshot)  # a new generation: answers may have changed
        assert not session.is_fresh(newer)


async def test_a_check_captured_before_an_edit_is_not_published(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", STALE)
        await here.recorder.wait_publish(uri, lambda p: "GR104" in codes(p))
        mark = here.recorder.mark()
        job = here.session.capture(uri)
        assert job is not None
        here.change(uri, 2, VALID)
        stale_result = await here.session.check(job)  # computed for version 1
        assert stale_result.key.version == 1 and not here.session.is_fresh(stale_result)
        published = await here.recorder.wait_publish(uri, lambda p: p.version == 2, after=mark)
        assert codes(published) == []
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [2]


async def test_the_guard_logs_a_failing_feature_and_answers_null(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(session: Session, params: object) -> str:
        raise RuntimeError("boom")

    async def invalid(session: Session, params: object) -> str:
        raise JsonRpcInvalidParams("bad argument")

    async with in_process(root) as here:
        with caplog.at_level(logging.ERROR):
            assert await here.session.guard("broken", broken, None) is None
        assert "broken failed" in caplog.text and "boom" in caplog.text
        with pytest.raises(JsonRpcInvalidParams):  # protocol errors reach the client
            await here.session.guard("invalid", invalid, None)
        assert here.session.guard_sync("sync", lambda session: 1 // 0) is None


# ------------------------------------------------------------------------- diagnostics


async def test_did_open_publishes_and_did_close_clears(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/stale.md", STALE)
        published = await here.recorder.wait_publish(uri, lambda p: "GR104" in codes(p))
        assert published.version == 1
        definition = STALE.splitlines()[-1]
        stale = next(d for d in published.diagnostics if d.code == "GR104")
        assert stale.range.start == types.Position(7, len("[^1]: ")) and stale.range.end.character == utf16(definition)
        mark = here.recorder.mark()
        here.close(uri)
        cleared = await here.recorder.wait_publish(uri, after=mark)
        assert cleared.diagnostics == [] and here.session.results.get(uri) is None


async def test_did_change_is_debounced_to_the_last_version(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        await here.recorder.wait_publish(uri)
        mark = here.recorder.mark()
        body = VALID[len(FRONT):]
        for version in range(2, 6):
            here.change(uri, version, FRONT + "报名截止是9月1日。\n" * (version - 1) + body)
        last = await here.recorder.wait_publish(uri, lambda p: p.version == 5, after=mark)
        assert codes(last).count("GR110") == 4
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [5]
        assert diagnostics.document_text(here.session, {"uri": uri}) == {
            "uri": uri, "version": 5, "text": FRONT + "报名截止是9月1日。\n" * 4 + body}
        assert diagnostics.document_text(here.session, {"uri": here.uri("answers/none.md")}) is None


async def test_save_checks_again_at_once(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        await here.recorder.wait_publish(uri)
        mark = here.recorder.mark()
        here.save(uri)
        again = await here.recorder.wait_publish(uri, after=mark)
        assert again.version == 1 and codes(again) == []


async def test_pull_mode_answers_the_request_and_never_pushes_a_draft(root: Path) -> None:
    async with in_process(root, "pull") as here:
        assert diagnostics.pull_mode(here.session)
        uri = here.open("answers/a.md", STALE)
        report = await diagnostics.pull(here.session, types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
        assert "GR104" in [d.code for d in report.items]
        await here.recorder.wait_status(uri)
        refreshes = here.recorder.refreshes
        write(root, "evidence/extra.md", "---\ndoc_id: extra\n---\n- 备注：新\n")
        workspace.request_reindex(here.session)
        await here.recorder.wait_refresh(refreshes + 1)
        assert here.recorder.for_uri(uri) == []


async def test_a_recheck_of_unchanged_text_reuses_its_parse_and_a_new_text_parses_again(root: Path) -> None:
    async with in_process(root) as here:
        session = here.session
        uri = here.open("answers/a.md", VALID)
        result = await session.current_result(uri)
        assert result is not None
        view = session.current_view()
        assert view is not None
        session.set_snapshot(view.snapshot)  # an index change: the same text is checked again
        job = session.capture(uri)
        assert job is not None and job.draft is result.draft
        again = await session.current_result(uri)
        assert again is not None and again.draft is result.draft and again.key != result.key
        here.change(uri, 2, VALID.replace("周四16:30[^1]", "周四 16:30[^1]"))
        job = session.capture(uri)
        assert job is not None and job.draft is None  # another text: parsed afresh in the check
        newer = await session.current_result(uri)
        assert newer is not None and newer.draft is not result.draft
        assert newer.draft.text == here.session.document(uri).text  # type: ignore[union-attr]


async def test_related_locations_of_a_re_read_file_follow_its_new_line(root: Path) -> None:
    c1 = CONFLICT.format(doc="c1", value="9月1日")
    draft = ("---\nquestion: 报名什么时候截止？\nfields: [报名截止]\n---\n报名截止是9月1日[^1]。\n\n"
             f'[^1]: c1@1:5 sha256:{sha(c1)[:12]} "- 报名截止：9月1日"\n')
    async with in_process(root) as here:
        uri = here.open("answers/deadline.md", draft)

        def related_ends(p: types.PublishDiagnosticsParams) -> set[int]:
            return {r.location.range.end.character for d in p.diagnostics if str(d.code) == "GR108"
                    for r in d.related_information or () if r.location.uri.endswith("/evidence/c2.md")}

        first = await here.recorder.wait_publish(uri, lambda p: bool(related_ends(p)))
        assert related_ends(first) == {utf16("- 报名截止：9月3日")}
        mark = here.recorder.mark()
        # the same field and value (so the same core location), a longer line: another range
        longer = "9月3日   "
        write(root, "evidence/c2.md", CONFLICT.format(doc="c2", value=longer))
        workspace.request_reindex(here.session, ["c2.md"])
        await here.recorder.wait_publish(uri, lambda p: related_ends(p) == {utf16("- 报名截止：" + longer)},
                                         after=mark)


async def test_an_evidence_edit_rechecks_open_drafts(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        assert codes(await here.recorder.wait_publish(uri)) == []
        mark = here.recorder.mark()
        write(root, "evidence/schedule.md", SCHEDULE.replace("version: 2", "version: 3"))
        workspace.request_reindex(here.session, ["schedule.md"])
        stale = await here.recorder.wait_publish(uri, lambda p: "GR104" in codes(p), after=mark)
        assert stale.version == 1


# ------------------------------------------------------------------------------ evidence


async def test_evidence_files_get_their_own_diagnostics_with_capped_related_sources(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = dict(FILES)
    for n in range(12):  # twelve more sources of 9月1日: related lists 5 per value
        files[f"evidence/more/m{n:02d}.md"] = CONFLICT.format(doc=f"m{n:02d}", value="9月1日")
    root = build_workspace(tmp_path / "ws", files)
    async with in_process(root) as here:
        recorder = here.recorder
        binary = await recorder.wait_publish(here.uri("evidence/binary.md"), lambda p: "GR201" in codes(p))
        assert binary.diagnostics[0].range.start == types.Position(0, 0)
        on_c2 = await recorder.wait_publish(here.uri("evidence/c2.md"), lambda p: "GR108" in codes(p))
        conflict = on_c2.diagnostics[0]
        assert "'9月1日' (13 sources)" in conflict.message and "'9月3日' (1 source)" in conflict.message
        related = conflict.related_information or []
        assert len(related) == 5  # one value besides its own: its first 5 sources
        assert {r.location.uri.rsplit("/", 1)[-1] for r in related} == {"c1.md", "m00.md", "m01.md", "m02.md",
                                                                         "m03.md"}
        assert all(r.location.range.end.character == utf16("- 报名截止：9月1日") for r in related)
        on_c1 = await recorder.wait_publish(here.uri("evidence/c1.md"), lambda p: "GR108" in codes(p))
        mine = on_c1.diagnostics[0].related_information or []
        assert [r.location.uri.rsplit("/", 1)[-1] for r in mine] == ["c2.md", "m00.md", "m01.md", "m02.md",
                                                                     "m03.md"]  # the other value first
        assert here.uri("evidence/c1.md") not in [r.location.uri for r in mine]

        # an unrelated file changes: nothing else is published again
        mark = recorder.mark()
        write(root, "evidence/parking.md", PARKING + "- 收费：免费\n")
        workspace.request_reindex(here.session, ["parking.md"])
        await workspace.wait_reindexed(here.session)
        write(root, "evidence/broken.md", b"\x00")  # the barrier: a new finding of its own
        workspace.request_reindex(here.session, ["broken.md"])
        await recorder.wait_publish(here.uri("evidence/broken.md"), after=mark)
        assert {u.rsplit("/", 1)[-1] for u in recorder.published_uris(after=mark)} == {"broken.md"}

        # the conflict is resolved on disk: both sides are cleared
        mark = recorder.mark()
        write(root, "evidence/c2.md", CONFLICT.format(doc="c2", value="9月1日"))
        workspace.request_reindex(here.session, ["c2.md"])
        await recorder.wait_publish(here.uri("evidence/c2.md"), lambda p: p.diagnostics == [], after=mark)
        await recorder.wait_publish(here.uri("evidence/c1.md"), lambda p: p.diagnostics == [], after=mark)


# -------------------------------------------------------------------------------- status


async def test_status_notification_code_lens_and_null_status_of_a_non_draft(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        status_params = await here.recorder.wait_status(uri)
        assert status_params["status"] == "answered" and status_params["validClaims"] == 1
        lenses = await status.code_lens(here.session, types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert lenses is not None and lenses[0].command is not None
        assert lenses[0].command.title.startswith("answered · 1/1 claims valid · 0 conflicts · ")
        assert lenses[0].command.arguments == [uri]
        notes = here.open("notes.md", "# 笔记\n")
        assert await here.recorder.wait_status(notes) == {"uri": notes, "status": None}
        assert await status.code_lens(here.session, types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=notes))) is None


# ---------------------------------------------------------------------------- navigation


def at(text: str, line: int, needle: str, inside: int = 1) -> types.Position:
    """A UTF-16 position ``inside`` code points into ``needle`` on 0-based ``line``."""
    row = text.splitlines()[line]
    return types.Position(line, utf16(row[:row.index(needle) + inside]))


async def test_hover_definition_and_version_text(root: Path) -> None:
    text = VALID + f'[^2]: schedule@1:6 sha256:{H1} "- 活动时间：周三15:00"\n'
    async with in_process(root, initialization_options={"versionDocuments": "virtual"}) as here:
        uri = here.open("answers/a.md", text)
        doc = types.TextDocumentIdentifier(uri=uri)
        hover = await navigation.hover(here.session, types.HoverParams(doc, at(text, 5, "[^1]")))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert "> 7 | - 活动时间：周四16:30" in hover.contents.value and "\r" not in hover.contents.value
        assert hover.range == types.Range(at(text, 5, "[^1]", 0), at(text, 5, "[^1]", 4))
        context = await navigation.hover(here.session, types.HoverParams(doc, types.Position(3, 2)))
        assert context is not None and isinstance(context.contents, types.MarkupContent)
        assert context.contents.value.startswith("**Context (units)**: 1 unit(s):\n- `schedule@2` — active")
        assert await navigation.hover(here.session, types.HoverParams(doc, types.Position(5, 1))) is None

        current = await navigation.definition(here.session, types.DefinitionParams(doc, at(text, 5, "[^1]")))
        assert current == [types.Location(uri=here.uri("evidence/schedule.md"), range=types.Range(
            types.Position(6, 0), types.Position(6, utf16("- 活动时间：周四16:30"))))]
        old = await navigation.definition(here.session, types.DefinitionParams(doc, types.Position(8, 8)))
        assert old is not None and old[0].uri == "grounding-evidence:/schedule@1"
        content = await navigation.version_text(here.session, {"uri": old[0].uri})
        assert content is not None and content["text"] == SCHEDULE_V1 and content["readOnly"] is True
        assert await navigation.version_text(here.session, {"uri": "grounding-evidence:/schedule@9"}) is None


async def test_hover_before_the_first_index_says_it_is_indexing(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        here.session.view = None  # as before the first scan of a cold index
        hover = await navigation.hover(here.session, types.HoverParams(
            types.TextDocumentIdentifier(uri=uri), at(VALID, 5, "[^1]")))
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert hover.contents.value == navigation.INDEXING_HOVER


async def test_references_list_open_buffers_and_drafts_on_disk(root: Path) -> None:
    write(root, "answers/disk.md", VALID)
    async with in_process(root) as here:
        here.open("answers/open.md", "x[^1]。\n\n" + VALID.splitlines()[-1] + "\n")
        found = await navigation.references(here.session, types.ReferenceParams(
            text_document=types.TextDocumentIdentifier(uri=here.uri("evidence/schedule.md")),
            position=types.Position(6, 2), context=types.ReferenceContext(include_declaration=True)))
        assert found is not None
        assert [loc.uri.rsplit("/", 1)[-1] for loc in found] == ["schedule.md", "disk.md", "open.md"]
        assert found[2].range.start == types.Position(2, len("[^1]: "))


# -------------------------------------------------------------------------------- editing


async def test_completion_offers_doc_ids_versions_and_lines(root: Path) -> None:
    async with in_process(root) as here:
        head = FRONT + "活动时间是周四16:30[^𠮷]。\n\n"
        uri = here.open("answers/c.md", head + "[^𠮷]: ")

        async def complete(text: str, version: int) -> list[types.CompletionItem]:
            here.change(uri, version, head + text)
            line = len((head + text).splitlines()) - 1
            result = await completion.completion(here.session, types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line, utf16((head + text).splitlines()[-1]))))
            return list(result.items) if result is not None else []

        assert {i.label for i in await complete("[^𠮷]: ", 2)} == {"schedule", "parking", "c1", "c2"}
        assert [(i.label, i.detail) for i in await complete("[^𠮷]: schedule@", 3)] == [("2", "active"),
                                                                                       ("1", "stale")]
        lines = await complete("[^𠮷]: schedule@2:", 4)
        assert [i.label for i in lines] == ["7", "8", "9"]
        edit = lines[1].text_edit
        assert isinstance(edit, types.TextEdit)
        assert edit.new_text == f'schedule@2:8 sha256:{H2} "- 地点：𠮷野家🎉二楼"'
        assert edit.range.start.character == utf16("[^𠮷]: ")


async def test_code_actions_fix_a_quote_fix_all_and_cite_an_uncited_sentence(root: Path) -> None:
    text = FRONT + ("活动时间是周四16:30[^1]。访客请把车停在𠮷野家🎉后院。\n\n"
                    f'[^1]: schedule@2:7 sha256:{H2} "活动时间：周四16:30"\n')
    async with in_process(root) as here:
        uri = here.open("answers/x.md", text)
        published = await here.recorder.wait_publish(uri, lambda p: {"GR103", "GR110"} <= set(codes(p)))
        whole = types.Range(types.Position(0, 0), types.Position(9, 0))
        found = await actions.code_action(here.session, types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=whole,
            context=types.CodeActionContext(diagnostics=list(published.diagnostics))))
        assert found is not None
        titles = [a.title for a in found]
        assert "Replace the quote with the exact cited line" in titles
        # the sentence names 后院 (parking's value); schedule's 𠮷野家🎉二楼 only shares characters
        assert [t for t in titles if t.startswith("Cite ")] == [
            "Cite parking@1:6 — - 停车地点：𠮷野家🎉后院 (why: value in the sentence, current version)"]
        # Once per menu: the quick-fix menu (no kinds asked) lists it as a quickfix only.
        assert [a.kind for a in found if a.title == actions.FIX_ALL_TITLE] == [types.CodeActionKind.QuickFix]
        fix = next(a for a in found if a.title == "Replace the quote with the exact cited line")
        assert fix.diagnostics and fix.diagnostics[0].code == "GR103"
        assert fix.edit is not None and fix.edit.document_changes is not None  # VS Code: versioned edits
        only = await actions.code_action(here.session, types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=whole,
            context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll])))
        assert only is not None and [(a.title, a.kind) for a in only] == [
            (actions.FIX_ALL_TITLE, types.CodeActionKind.SourceFixAll)]


async def test_commands(root: Path) -> None:
    async with in_process(root) as here:
        session = here.session
        summary = await commands.reindex(session)
        assert summary == {"documents": 4, "versions": 5, "active": 4, "conflicts": 1, "events": summary["events"]}
        conflicts = await commands.show_conflicts(session)
        assert [(c["field"], [v["path"] for v in c["values"]]) for c in conflicts] == [
            ("报名截止", ["evidence/c1.md", "evidence/c2.md"])]

        parking = "---\nquestion: 在哪里停车？\nfields: [停车地点]\n---\n访客请把车停在𠮷野家🎉后院。\n"
        uri = here.open("answers/cite.md", parking)
        await here.recorder.wait_publish(uri)
        mark = here.recorder.mark()
        cited = await commands.insert_citation(session, {"uri": uri, "position": {"line": 4, "character": 2}})
        assert cited["applied"] is True and cited["citation"] == "parking@1:6" and cited["label"] == "1"
        applied = await here.recorder.wait_for(lambda m, p: m == types.WORKSPACE_APPLY_EDIT, mark)
        assert applied.label == "Cite parking@1:6"

        request = {"question": "活动什么时候？", "fields": ["活动时间"], "uri": None}
        answer = await commands.draft_answer(session, request)
        assert answer["status"] == "answered" and answer["claims"] == ["schedule@2:7"]
        assert f'sha256:{H2} "- 活动时间：周四16:30"' in answer["markdown"]

        wrong_hash = here.open("answers/hash.md", VALID.replace(f"sha256:{H2}", "sha256:0123456789ab"))
        await here.recorder.wait_publish(wrong_hash, lambda p: "GR105" in codes(p))
        mark = here.recorder.mark()
        fixed = await commands.fix_all(session, [wrong_hash])
        assert fixed["applied"] is True and fixed["fixes"] == 1
        edit = (await here.recorder.wait_for(lambda m, p: m == types.WORKSPACE_APPLY_EDIT, mark)).edit
        assert [e.new_text for change in edit.document_changes for e in change.edits] == [
            f'schedule@2:7 sha256:{H2} "- 活动时间：周四16:30"']
        nothing = await commands.fix_all(session, {"uri": here.open("answers/stale.md", STALE)})
        assert nothing == {"applied": False, "fixes": 0, "message": "No safe fixes to apply."}
        context = await commands.show_context(session, wrong_hash)
        assert context["kind"] == "units" and context["units"] == ["schedule@2"]

        with pytest.raises(JsonRpcInvalidParams):
            await commands.insert_citation(session, {"uri": uri, "position": "here"})
        with pytest.raises(JsonRpcInvalidParams):
            await commands.draft_answer(session, {"question": " "})
        with pytest.raises(JsonRpcInvalidParams):
            await commands.fix_all(session, {"uri": here.uri("notes.md")})


async def test_commands_read_a_draft_that_is_not_open_from_disk(root: Path) -> None:
    write(root, "answers/disk.md", STALE)
    async with in_process(root) as here:
        context = await commands.show_context(here.session, here.uri("answers/disk.md"))
        assert context["status"] == "abstain" and context["kind"] == "units"


# ------------------------------------------------------------------------------ workspace


async def test_grounding_toml_changes_take_effect_without_a_restart(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        assert codes(await here.recorder.wait_publish(uri)) == []
        generation = here.session.current_view().generation  # type: ignore[union-attr]

        # a key the scan does not read: same snapshot, a new generation, drafts re-checked
        mark = here.recorder.mark()
        write(root, "grounding.toml", 'today = "2026-06-01"\nstrict = true\n')
        await workspace.apply_settings(here.session, here.session.settings)
        view = here.session.current_view()
        assert view is not None and view.generation > generation and view.config.strict
        await here.recorder.wait_publish(uri, after=mark)

        # a parse setting: the index reopens and the folder is scanned again
        mark = here.recorder.mark()
        write(root, "grounding.toml", 'today = "2026-06-01"\nfield_separators = ["：", ":"]\n')
        write(root, "evidence/english.md", "---\ndoc_id: english\n---\n- Room: 101\n")
        await workspace.apply_settings(here.session, here.session.settings)
        await here.indexed()
        view = here.session.current_view()
        assert view is not None and view.config.field_separators == ("：", ":")
        record = view.snapshot.record("english", 1)
        assert record is not None and view.snapshot.document(record).field_lines[4].field == "Room"
        await here.recorder.wait_publish(uri, after=mark)


async def test_watched_file_events_rescan_the_paths_they_name(root: Path) -> None:
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        await here.recorder.wait_publish(uri)
        mark = here.recorder.mark()
        write(root, "evidence/schedule.md", SCHEDULE.replace("version: 2", "version: 3"))
        workspace.watched_files(here.session, types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
            uri=here.uri("evidence/schedule.md"), type=types.FileChangeType.Changed)]))
        await here.recorder.wait_publish(uri, lambda p: "GR104" in codes(p), after=mark)


async def test_no_evidence_folder_still_checks_drafts(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", {"answers/a.md": VALID})
    async with in_process(root) as here:
        uri = here.open("answers/a.md", VALID)
        published = await here.recorder.wait_publish(uri)
        assert "GR102" in codes(published)  # unknown source: there is no evidence at all


async def test_a_scan_of_some_paths_keeps_the_other_files_findings(root: Path) -> None:
    async with in_process(root) as here:
        view = here.session.current_view()
        assert view is not None
        unreadable = (Finding("unreadable-evidence", Span(0, 0, 0, 0), "not UTF-8"),)
        old = {"binary.md": unreadable, "gone.md": unreadable}
        some = evidence._plan(view, view.snapshot, old, {"gone.md": []}, False, ["gone.md"], [], {},
                              {"binary.md", "gone.md"})
        assert some.scan_map == {"binary.md": unreadable}  # not looked at: kept
        assert set(some.affected) == {"gone.md"}
        walk = evidence._plan(view, view.snapshot, old, {"binary.md": list(unreadable)}, True, [], [], {},
                              {"binary.md", "gone.md"})
        assert walk.scan_map == {"binary.md": unreadable} and set(walk.affected) == {"gone.md"}


async def test_a_check_that_raises_becomes_a_finding_on_the_draft(root: Path) -> None:
    """A bug in a check (here: the context log reader fails) is one GR101 at 1:1 and status
    abstain, as ``grounding check`` reports it; never stale squiggles or a dead check task.
    """
    def broken_reader(rel: str) -> str | None:
        raise RuntimeError(f"disk on fire reading {rel} 🎉")

    text = "---\r\nquestion: 几点？\r\ncontext: {log: logs/上下文.jsonl}\r\n---\r\n𠮷野家🎉周四16:30。\r\n"
    async with in_process(root) as here:
        uri = here.open("answers/broken.md", text)
        await here.recorder.wait_publish(uri)
        job = here.session.capture(uri)
        assert job is not None
        result = run_check(replace(job, view=replace(job.view, read_text=broken_reader)))
    assert result.report.status.value == "abstain"
    [finding] = result.report.findings
    assert finding.code == "GR101" and finding.span.start_line == 0
    assert "internal error RuntimeError (disk on fire reading logs/上下文.jsonl 🎉)" in finding.message


async def test_version_copies_are_never_evidence_even_with_evidence_at_the_root(tmp_path: Path) -> None:
    files = {**{k.removeprefix("evidence/"): v for k, v in FILES.items() if k.startswith("evidence/")},
             "grounding.toml": 'evidence = "."\ntoday = "2026-06-01"\n'}
    root = build_workspace(tmp_path / "flat", files)
    async with in_process(root) as here:
        view = here.session.current_view()
        assert view is not None
        record = view.snapshot.record("schedule", 1)
        assert record is not None
        copy = versions.write_version_file(root, view, record)
        assert copy == root / ".grounding" / "versions" / "schedule@1.md"
        assert copy.read_bytes() == SCHEDULE_V1.encode("utf-8") and stat.S_IMODE(copy.stat().st_mode) == 0o444
        assert here.session.evidence_rel(copy.as_uri()) is None  # evidence = "." matches *.md, not .grounding
        assert here.session.evidence_rel((root / "schedule.md").as_uri()) == "schedule.md"
        await commands.reindex(here.session)
        after = here.session.current_view()
        assert after is not None and after.snapshot.record_for_path(".grounding/versions/schedule@1.md") is None
        assert versions.write_version_file(root, after, record) == copy  # same bytes: left as it is
        lenses = await status.code_lens(here.session, types.CodeLensParams(types.TextDocumentIdentifier(copy.as_uri())))
        assert lenses == []  # no draft cites it (drafts cannot live under the evidence root)
