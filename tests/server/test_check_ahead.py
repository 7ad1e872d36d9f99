"""The check ahead of a keystroke's debounce (``server.features.diagnostics``, docs/decisions.md
"The check ahead of the debounce"; SPEC §10 names no timing).

Two harnesses: the real server over stdio (pytest-lsp; the ``GROUNDING_CHECK_AHEAD_MS`` /
``GROUNDING_DEBOUNCE_MS`` hooks set the window), and an in-process session whose module
constants the tests set, so a test can wait until the work ahead is done (the draft's stored
result has the new version) before it types again or edits evidence: nothing is timed except
lower bounds ("not before the debounce ended"). Drafts and evidence are CRLF, CJK, with
astral-plane characters (𠮷 🎉), and conflict on one field (GR108 with related information),
so the publication compared holds converted ranges of both kinds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter

from server.features import diagnostics, workspace
from tests.support.inprocess import InProcess, in_process
from tests.support.lsp import lsp_session, open_document, replace_document
from tests.support.workspace import build_workspace, sha256, write

PRICE = "---\r\ndoc_id: 价目\r\nversion: 1\r\nsubject: 开放日🎉\r\n---\r\n- 票价：免费𠮷\r\n- 时间：周四16:30\r\n"
POSTER = "---\r\ndoc_id: 海报\r\nversion: 1\r\nsubject: 开放日🎉\r\n---\r\n- 票价：20元🎉\r\n"
PRICE_V2 = "---\r\ndoc_id: 价目\r\nversion: 2\r\nsubject: 开放日🎉\r\n---\r\n- 票价：免费𠮷\r\n- 时间：周五10:00\r\n"
DRAFT = ("---\r\nquestion: 开放日票价和时间？\r\nfields: [票价, 时间]\r\n---\r\n"
         "1. 开放日票价：免费𠮷[^1]。🎉\r\n2. 时间：周四16:30[^2]。\r\n3. 报名截止是9月{n}日。\r\n\r\n"
         '[^1]: 价目@1:6 sha256:{sha} "- 票价：免费𠮷"\r\n'
         '[^2]: 价目@1:7 sha256:{sha} "- 时间：{quote}"\r\n')
DEBOUNCE = diagnostics.DEBOUNCE_SECONDS
WIDE_DEBOUNCE, WIDE_AHEAD = 2.0, 1.9
"""A window a test acts in (seconds): the work ahead starts 0.1 s after a keystroke and the
deadline is 1.9 s later, far more than the test needs to type again or re-index."""


def draft(n: int) -> str:
    """Version ``n`` of the draft: odd versions after the first misquote [^2] (not verbatim)."""
    return DRAFT.format(n=n, sha=sha256(PRICE)[:12], quote="周四16:30" if n == 1 or n % 2 == 0 else f"周四16:3{n}")


def workspace_files() -> dict[str, str]:
    return {"grounding.toml": 'today = "2026-06-01"\n', "evidence/价目.md": PRICE, "evidence/海报.md": POSTER}


def plain(params: types.PublishDiagnosticsParams, root: Path) -> Any:
    """A publication as the JSON the client received, with the root folder's URI taken out."""
    text = json.dumps(default_converter().unstructure(params), ensure_ascii=False, sort_keys=True)
    assert root.as_uri() in text
    return json.loads(text.replace(root.as_uri(), "ROOT"))


@contextlib.asynccontextmanager
async def opened(tmp_path: Path) -> AsyncIterator[tuple[InProcess, str, types.PublishDiagnosticsParams]]:
    """An in-process server on :func:`workspace_files` with ``answers/开放日.md`` open at
    :func:`draft` 1 and published: (the harness, the draft's URI, that first publication).
    """
    root = build_workspace(tmp_path / "ws", workspace_files())
    async with in_process(root) as here:
        uri = here.open("answers/开放日.md", draft(1))
        yield here, uri, await here.recorder.wait_publish(uri, lambda p: p.version == 1)


def codes(params: types.PublishDiagnosticsParams) -> list[str]:
    return [str(d.code) for d in params.diagnostics]


# ----------------------------------------------------------------- the real server (stdio)


async def typed(root: Path, env: dict[str, str]) -> tuple[list[Any], list[float]]:
    """Open the draft, then type five edits, each after the previous one's publication; the
    publications of the edits (plain JSON) and, per edit, publication arrival - didChange send.
    """
    async with lsp_session(root, env=env) as client:
        uri = (root / "answers" / "开放日.md").as_uri()
        open_document(client, uri, draft(1))
        await client.recorder.wait_publish(uri, lambda p: p.version == 1)
        await settled(client, uri)
        seen, waited = [], []
        for version in range(2, 7):
            mark = client.recorder.mark()
            sent = time.perf_counter()
            replace_document(client, uri, draft(version), version)
            published = await client.recorder.wait_publish(uri, lambda p, v=version: p.version == v, after=mark)
            arrived = [p for p in client.recorder.of(uri, since=sent) if p.version == version]
            assert len(arrived) == 1  # one publication per pause, of its text
            waited.append(arrived[0].at - sent)
            seen.append(plain(published, root))
        return seen, waited


async def settled(client: Any, uri: str) -> None:
    """Wait for the first index pass, then for a save's publication (the recheck after the
    pass, when there is one, has arrived before it).
    """
    await client.recorder.wait_until(lambda: bool(client.recorder.passes_since(0.0)), "the first index pass")
    mark = client.recorder.mark()
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
    await client.recorder.wait_publish(uri, after=mark)


async def test_the_publication_made_ahead_equals_the_check_at_the_deadline_and_never_comes_early(
        tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    other = tmp_path / "off"
    shutil.copytree(root, other)
    ahead, waited = await typed(root, {})
    at_deadline, waited_off = await typed(other, {diagnostics.CHECK_AHEAD_ENV: "0"})
    assert ahead == at_deadline
    assert {"GR108", "GR115"} <= {d["code"] for d in ahead[-1]["diagnostics"]}
    assert ahead[0]["diagnostics"] != ahead[1]["diagnostics"]  # the edits change the findings
    assert any(d.get("relatedInformation") for d in ahead[-1]["diagnostics"])
    assert all(w >= DEBOUNCE for w in waited + waited_off), (waited, waited_off)


async def test_a_keystroke_inside_the_window_gives_one_publication_of_the_newest_text(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    env = {diagnostics.DEBOUNCE_ENV: str(WIDE_DEBOUNCE * 1000), diagnostics.CHECK_AHEAD_ENV: str(WIDE_AHEAD * 1000)}
    async with lsp_session(root, env=env) as client:
        uri = (root / "answers" / "开放日.md").as_uri()
        open_document(client, uri, draft(1))
        before = await client.recorder.wait_publish(uri, lambda p: p.version == 1)
        await settled(client, uri)
        mark = client.recorder.mark()
        replace_document(client, uri, draft(2), 2)
        # no notification tells the client that the work ahead (begun 0.1 s after the change,
        # a few ms long for this draft) is done: 0.5 s is well inside the 1.9 s window
        await asyncio.sleep(0.5)
        sent = time.perf_counter()
        replace_document(client, uri, draft(3), 3)
        newest = await client.recorder.wait_publish(uri, lambda p: p.version == 3, after=mark)
        # (version 1 may be published again after the mark: the full-text build's end is a new
        # index view, re-checked before the change arrived)
        assert [p.version for p in client.recorder.for_uri(uri, after=mark) if p.version != 1] == [3]
        assert client.recorder.of(uri, since=sent)[0].at - sent >= WIDE_DEBOUNCE
        assert codes(newest) != codes(before)


# ------------------------------------------------------------------------- in process


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagnostics, "TYPING_DEBOUNCE_SECONDS", WIDE_DEBOUNCE)
    monkeypatch.setattr(diagnostics, "CHECK_AHEAD_SECONDS", WIDE_AHEAD)


@pytest.mark.usefixtures("wide")
async def test_work_ahead_of_an_older_text_is_dropped_and_never_published(tmp_path: Path) -> None:
    async with opened(tmp_path) as (here, uri, first):
        session = here.session
        mark = here.recorder.mark()
        here.change(uri, 2, draft(2))
        await here.recorder.wait_until(lambda: _checked(session, uri) == 2, "the check ahead of version 2", poll=0.01)
        assert here.recorder.for_uri(uri, after=mark) == []  # done ahead, held until the deadline
        sent = time.perf_counter()
        here.change(uri, 3, draft(3))
        newest = await here.recorder.wait_publish(uri, lambda p: p.version == 3, after=mark)
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [3]
        assert here.recorder.of(uri, since=sent)[0].at - sent >= WIDE_DEBOUNCE
        assert "9月3日" in session.results[uri].document.text and codes(newest) != codes(first)


@pytest.mark.usefixtures("wide")
async def test_an_index_change_inside_the_window_publishes_against_the_new_generation(tmp_path: Path) -> None:
    async with opened(tmp_path) as (here, uri, first):
        session = here.session
        assert "GR104" not in codes(first)
        mark = here.recorder.mark()
        sent = time.perf_counter()
        here.change(uri, 2, draft(2))
        await here.recorder.wait_until(lambda: _checked(session, uri) == 2, "the check ahead of version 2", poll=0.01)
        older = session.results[uri].key.generation
        write(here.root, "evidence/价目.md", PRICE_V2)  # the cited document has a version 2: stale citations
        workspace.request_reindex(session)
        await here.recorder.wait_until(lambda: (session.view is not None and session.view.generation > older),
                                       "the new index generation", poll=0.01)
        published = await here.recorder.wait_publish(uri, lambda p: p.version == 2, after=mark)
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [2]  # once, never the older one
        assert here.recorder.of(uri, since=sent)[0].at - sent >= WIDE_DEBOUNCE  # the debounce kept
        assert "GR104" in codes(published)
        assert session.results[uri].key.generation > older


async def test_a_check_ahead_orphaned_by_a_keystroke_releases_the_foreground(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = build_workspace(tmp_path / "ws", workspace_files())
    monkeypatch.setattr(diagnostics, "TYPING_DEBOUNCE_SECONDS", WIDE_DEBOUNCE)
    monkeypatch.setattr(diagnostics, "CHECK_AHEAD_SECONDS", WIDE_DEBOUNCE)  # the work starts at the keystroke
    async with in_process(root) as here:
        session = here.session
        uri = here.open("answers/开放日.md", draft(1))
        first = await here.recorder.wait_publish(uri, lambda p: p.version == 1)
        mark = here.recorder.mark()
        here.change(uri, 2, draft(2))
        await here.recorder.wait_until(lambda: session.foreground.jobs == 1 or _checked(session, uri) == 2,
                                       "the check ahead of version 2 running or done", poll=0.001)
        here.change(uri, 3, draft(3))  # cancels the work ahead of version 2 (or drops its result)
        await here.recorder.wait_until(lambda: _checked(session, uri) == 3, "the check ahead of version 3", poll=0.01)
        await here.recorder.wait_until(lambda: session.foreground.jobs == 0, "the foreground released", poll=0.01)
        published = await here.recorder.wait_publish(uri, lambda p: p.version == 3, after=mark)
        assert [p.version for p in here.recorder.for_uri(uri, after=mark)] == [3]
        assert codes(published) != codes(first)


def _checked(session: Any, uri: str) -> int | None:
    """The version of the draft's stored (fresh) result: the work ahead stores it when done."""
    result = session.fresh_result(uri)
    return result.key.version if result is not None else None
