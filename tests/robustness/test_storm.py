"""Storms and failing watchers: the language server keeps answering and loses no change.

- 1,000 evidence files rewritten at once (like ``git checkout``) cause a bounded number of
  re-index passes (counted through the server's "Grounding: index pass" log messages; an
  always-broken probe file shows the initial index is done), and hover and diagnostics keep answering meanwhile: the
  p95 latencies are printed and asserted loosely.
- When the OS watcher cannot start (``GROUNDING_FORCE_WATCH_ERROR``, see
  server/features/workspace.py) the server warns once and polls: a later change still lands.

The server runs as a subprocess over stdio (``python -m server``), as an editor starts it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness
from tests.support.lsp import RecordingClient, names_of, open_document, replace_document

from .helpers import SCHEDULE, definition, md_draft, percentile, sha256, write_files

STORM_FILES = 1000
PROBE = b"\x00 never readable\n"


def _doc(i: int, gen: int) -> str:
    return f"主题：主题{i}\n- 字段{i}：值{i}-{gen}\n- 说明：第{gen}版\n"


def _storm_workspace(root: Path) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"evidence/bulk/doc{i:04d}.md": _doc(i, 1)
                                     for i in range(STORM_FILES)}
    files["evidence/schedule.md"] = SCHEDULE
    files["evidence/probe.md"] = PROBE
    write_files(root, files)
    return files


def _draft(gen: int) -> str:
    """Cites schedule (stable) and doc0007 at the automatic version ``gen`` holds."""
    doc7 = _doc(7, gen)
    return md_draft(
        f"活动时间是周四16:30[^1]。字段7是值7-{gen}[^2]。",
        [definition("1", "schedule@1:6", SCHEDULE, "- 活动时间：周四16:30"),
         definition("2", f"bulk/doc0007@{gen}:2", doc7, f"- 字段7：值7-{gen}")],
        context=None)


async def _hover_latency(client: RecordingClient, uri: str, stop: asyncio.Event,
                         samples: list[float]) -> None:
    params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri),
                               position=types.Position(line=4, character=13))  # on [^1]
    while not stop.is_set():
        started = time.perf_counter()
        result = await asyncio.wait_for(client.text_document_hover_async(params), timeout=10)
        samples.append(time.perf_counter() - started)
        assert result is not None, "hover stopped answering"
        await asyncio.sleep(0.02)


async def _diagnostics_latency(client: RecordingClient, uri: str, stop: asyncio.Event,
                               samples: list[float], first_version: int) -> int:
    """Time didChange -> publishDiagnostics of that version, repeatedly; returns the last version."""
    version = first_version
    text = _draft(1)
    while not stop.is_set():
        version += 1
        text = text.replace("。\n", "。 \n", 1) if version % 2 else text.replace("。 \n", "。\n", 1)
        started = time.perf_counter()
        replace_document(client, uri, text, version)
        await client.recorder.wait_until(
            lambda v=version, t=started: any(p.version == v for p in client.recorder.of(uri, t)),
            timeout=20, what=f"diagnostics of version {version}")
        samples.append(time.perf_counter() - started)
    return version


async def test_checkout_of_1000_files_is_a_bounded_number_of_passes_and_the_server_answers(
        tmp_path: Path) -> None:
    _storm_workspace(tmp_path)
    evidence = tmp_path / "evidence"
    probe_uri = (evidence / "probe.md").as_uri()
    draft_uri = (tmp_path / "answers" / "a.md").as_uri()
    (tmp_path / "answers").mkdir()
    client = await harness.start(tmp_path, "minimal")
    try:
        await client.recorder.wait_until(lambda: client.recorder.of(probe_uri), timeout=60, what="the initial index")
        open_document(client, draft_uri, _draft(1))
        await client.recorder.wait_until(lambda: client.recorder.of(draft_uri), timeout=30, what="draft diagnostics")
        assert "unknown-source" not in names_of(client.recorder.of(draft_uri)[-1].diagnostics)
        await asyncio.sleep(0.5)  # let the watcher settle

        stop = asyncio.Event()
        hover_ms: list[float] = []
        diag_ms: list[float] = []
        hovering = asyncio.create_task(_hover_latency(client, draft_uri, stop, hover_ms))
        changing = asyncio.create_task(_diagnostics_latency(client, draft_uri, stop, diag_ms, 1))
        await asyncio.sleep(0.3)
        storm_started = time.perf_counter()
        for i in range(STORM_FILES):  # git checkout: every file rewritten, as fast as possible
            (evidence / "bulk" / f"doc{i:04d}.md").write_text(_doc(i, 2), encoding="utf-8")
        written = time.perf_counter() - storm_started

        def settled() -> bool:
            passes = client.recorder.passes_since(storm_started)
            return bool(passes) and time.perf_counter() - passes[-1] > 1.5

        await client.recorder.wait_until(settled, timeout=90, what="the storm's re-index to settle", poll=0.05)
        stop.set()
        await asyncio.gather(hovering, changing)
        passes = len(client.recorder.passes_since(storm_started))
        hover_p95 = percentile(hover_ms, 95) * 1000
        diag_p95 = percentile(diag_ms, 95) * 1000
        stats = (f"storm: {STORM_FILES} files written in {written * 1000:.0f} ms; {passes}"
                 f" re-index passes; hover p95 {hover_p95:.0f} ms over {len(hover_ms)} requests;"
                 f" didChange->publishDiagnostics p95 {diag_p95:.0f} ms over {len(diag_ms)} edits")
        print("\n" + stats)
        assert 1 <= passes <= 6, stats
        assert len(hover_ms) >= 10 and len(diag_ms) >= 3, stats
        # Latency targets (hover 100 ms, diagnostics 1 s) are bench rows, not asserted here:
        # the server kept answering hovers and publishing every edit's diagnostics.

        # the new contents landed: the draft citing version 2 of doc0007 is now clean
        final_version = 1000
        replace_document(client, draft_uri, _draft(2), final_version)
        await client.recorder.wait_until(
            lambda: any(p.version == final_version for p in client.recorder.of(draft_uri)),
            timeout=20, what="diagnostics of the final draft")
        final = [p for p in client.recorder.of(draft_uri) if p.version == final_version][-1]
        assert "unknown-source" not in names_of(final.diagnostics)
        assert "stale-citation" not in names_of(final.diagnostics)
    finally:
        await harness.stop(client)


async def test_failing_watcher_falls_back_to_polling_with_one_warning(tmp_path: Path) -> None:
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "evidence/probe.md": PROBE})
    (tmp_path / "answers").mkdir()
    draft_uri = (tmp_path / "answers" / "a.md").as_uri()
    probe_uri = (tmp_path / "evidence" / "probe.md").as_uri()
    client = await harness.start(tmp_path, "minimal", env={"GROUNDING_FORCE_WATCH_ERROR": "1"})
    try:
        await client.recorder.wait_until(lambda: client.recorder.of(probe_uri), timeout=60, what="the initial index")
        text = md_draft("活动时间是周四16:30[^1]。",
                        [definition("1", "schedule@1:6", SCHEDULE, "- 活动时间：周四16:30")])
        open_document(client, draft_uri, text)
        await client.recorder.wait_until(lambda: client.recorder.of(draft_uri), timeout=30, what="draft diagnostics")
        assert "stale-citation" not in names_of(client.recorder.of(draft_uri)[-1].diagnostics)
        await client.recorder.wait_until(lambda: any("polling" in m.message for m in client.messages),
                              timeout=10, what="the polling warning")
        await asyncio.sleep(0.5)
        changed = SCHEDULE.replace("周四16:30", "周五9:00")
        started = time.perf_counter()
        (tmp_path / "evidence" / "schedule.md").write_text(changed, encoding="utf-8")

        def stale() -> bool:
            return any("stale-citation" in names_of(p.diagnostics)
                       for p in client.recorder.of(draft_uri, started))

        await client.recorder.wait_until(stale, timeout=15, what="the polled change to reach the draft")
        print(f"\npolling picked the change up in {(time.perf_counter() - started) * 1000:.0f} ms")
        warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
        assert len(warnings) == 1, [m.message for m in warnings]
        assert "cannot watch" in warnings[0].message and "polling for changes instead" in warnings[0].message
        assert "OS file watch limit reached" in warnings[0].message
        assert sha256((tmp_path / "evidence" / "schedule.md").read_bytes()) == sha256(changed)
    finally:
        await harness.stop(client)
