"""Typing patterns against the check ahead of the debounce (``server.features.diagnostics``;
docs/decisions.md "The check ahead of the debounce"), on an in-process session: keystrokes
paced around the edge of the window (70-80 ms after the previous one, the real 150/80 ms
constants), a draft closed and reopened inside the window, two drafts typed alternately, and a
``didChange`` whose URI is spelled in another percent-encoding than the ``didOpen``'s. Looked
for: an older version published after a newer one, no final publication of the last text, a
publication before the last keystroke's debounce ended, a foreground job left busy.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from lsprotocol import types

from server.features import diagnostics, workspace
from tests.server.test_check_ahead import WIDE_AHEAD, WIDE_DEBOUNCE, _checked, codes, draft, opened, workspace_files
from tests.support.inprocess import in_process
from tests.support.workspace import build_workspace


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagnostics, "TYPING_DEBOUNCE_SECONDS", WIDE_DEBOUNCE)
    monkeypatch.setattr(diagnostics, "CHECK_AHEAD_SECONDS", WIDE_AHEAD)


@pytest.mark.parametrize("gap_ms", [65, 70, 72, 75, 78, 80, 85])
async def test_keystrokes_around_the_window_edge_end_with_one_publication_of_the_last_text(
        gap_ms: int, tmp_path: Path) -> None:
    async with opened(tmp_path) as (here, uri, _):
        session = here.session
        mark = here.recorder.mark()
        for version in range(2, 10):  # the typing cadence is the input (sleep paces it)
            here.change(uri, version, draft(version))
            last = time.perf_counter()
            await asyncio.sleep(gap_ms / 1000)
        published = await here.recorder.wait_publish(uri, lambda p: p.version == 9, after=mark)
        versions = [p.version for p in here.recorder.for_uri(uri, after=mark)]
        assert versions == sorted(versions) and versions[-1] == 9, versions
        assert here.recorder.of(uri, since=last)[-1].at - last >= diagnostics.TYPING_DEBOUNCE_SECONDS
        assert "9月9日" in session.results[uri].document.text and codes(published)
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)


@pytest.mark.usefixtures("wide")
async def test_a_draft_closed_and_reopened_inside_the_window_publishes_only_the_reopened_text(
        tmp_path: Path) -> None:
    async with opened(tmp_path) as (here, uri, _):
        session = here.session
        mark = here.recorder.mark()
        here.change(uri, 2, draft(2))
        await here.recorder.wait_until(lambda: _checked(session, uri) == 2, "the check ahead of version 2", poll=0.01)
        here.close(uri)
        reopened = here.open("answers/开放日.md", draft(4), version=1)
        assert reopened == uri
        got = await here.recorder.wait_publish(uri, lambda p: p.version == 1, after=mark)
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [None, 1]  # the clear, the reopen
        assert "9月4日" in session.results[uri].document.text and codes(got)
        await asyncio.sleep(0)  # (the cancelled check's finally ran)
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [None, 1]


@pytest.mark.usefixtures("wide")
async def test_two_drafts_typed_alternately_each_end_with_their_last_version(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    async with in_process(root) as here:
        session = here.session
        one = here.open("answers/开放日.md", draft(1))
        two = here.open("answers/第二稿 🎉.md", draft(1))
        for uri in (one, two):
            await here.recorder.wait_publish(uri, lambda p: p.version == 1)
        mark = here.recorder.mark()
        sent = time.perf_counter()
        for version in (2, 3):
            for uri in (one, two):
                here.change(uri, version, draft(version))
        for uri in (one, two):
            await here.recorder.wait_publish(uri, lambda p: p.version == 3, after=mark)
            assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [3]
            assert here.recorder.of(uri, since=sent)[0].at - sent >= WIDE_DEBOUNCE
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)


@pytest.mark.usefixtures("wide")
async def test_a_didchange_spelling_the_uri_otherwise_replaces_the_same_check(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    async with in_process(root) as here:
        session = here.session
        uri = here.open("answers/开放日 🎉.md", draft(1))
        assert "%" in uri
        await here.recorder.wait_publish(uri, lambda p: p.version == 1)
        mark = here.recorder.mark()
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), uri)
        assert unquote(lower) == unquote(uri) and lower != uri  # %E5 written %e5
        here.change(lower, 2, draft(2))
        here.change(uri, 3, draft(3))
        await here.recorder.wait_publish(uri, lambda p: p.version == 3, after=mark)
        drafts = [(p.uri, p.version) for p in here.recorder.events[mark:] for p in [p.params]
                  if isinstance(p, types.PublishDiagnosticsParams) and unquote(p.uri) == unquote(uri)]
        assert drafts == [(uri, 3)]  # one check, replaced, published under the didOpen's URI
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)


@pytest.mark.usefixtures("wide")
@pytest.mark.parametrize("toml", ['today = "2026-06-01"\nstrict = true\n',
                                  'today = "2026-06-01"\ndrafts = ["其他/**/*.md"]\n'],
                         ids=["strict", "no-longer-a-draft"])
async def test_a_grounding_toml_edit_inside_the_window_ends_with_the_new_settings(toml: str, tmp_path: Path) -> None:
    async with opened(tmp_path) as (here, uri, first):
        session = here.session
        assert codes(first)
        mark = here.recorder.mark()
        sent = time.perf_counter()
        here.change(uri, 2, draft(2))
        await here.recorder.wait_until(lambda: _checked(session, uri) == 2, "the check ahead of version 2", poll=0.01)
        (here.root / "grounding.toml").write_text(toml, encoding="utf-8")
        await workspace.apply_settings(session, session.settings)
        if "drafts" in toml:  # the file is no draft now: its squiggles go
            await here.recorder.wait_publish(uri, lambda p: not p.diagnostics, after=mark,
                                             what="the draft's diagnostics cleared")
        else:
            got = await here.recorder.wait_publish(uri, lambda p: p.version == 2, after=mark)
            assert here.recorder.of(uri, since=sent)[0].at - sent >= WIDE_DEBOUNCE
            assert session.results[uri].document.version == 2 and codes(got) != codes(first)
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)


@pytest.mark.usefixtures("wide")
async def test_pull_requests_while_typing_answer_the_current_text_and_nothing_is_pushed(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    async with in_process(root, "pull") as here:
        session = here.session
        uri = here.open("answers/开放日.md", draft(1))
        mark = here.recorder.mark()

        async def pulled() -> list[str]:
            report = await asyncio.ensure_future(diagnostics.pull(session, types.DocumentDiagnosticParams(
                text_document=types.TextDocumentIdentifier(uri=uri))))  # its own task, as pygls runs a request
            assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
            return [str(d.code) for d in report.items]

        first = await pulled()
        for version in (2, 3):  # a pull inside each keystroke's window (before, during the work ahead)
            here.change(uri, version, draft(version))
            during = await pulled()
            assert session.results[uri].document.version == version
            assert during != first if version == 3 else during == first  # odd versions misquote [^2]
        await here.recorder.wait_until(lambda: _checked(session, uri) == 3, "the check ahead of version 3", poll=0.01)
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)
        assert here.recorder.for_uri(uri, after=mark) == []  # pull mode never pushes a draft
