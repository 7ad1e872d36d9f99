"""Foreground before background (``server.session.Foreground``), in process.

Background loops here are real threads calling :meth:`Foreground.pause` at their unit
boundaries (as the startup walk and the evidence refresh do), or coroutines awaiting
:meth:`Foreground.wait`; foreground jobs are real asyncio tasks holding the gate. Nothing is
timed: each test waits for events, and the bounds are either far away (60 s, never reached)
or the point of the test.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from lsprotocol import types

from server.features import diagnostics, navigation, workspace
from server.session import OUTPUT_MARGIN_SECONDS, Foreground, output_margin
from tests.support.inprocess import in_process
from tests.support.workspace import build_workspace, sha256

FAR = 60.0
"""A bound the tests never reach."""


class Loop:
    """A background loop in its own thread: ``units`` units, each after a ``pause()``. The
    first unit runs once :meth:`go` is called; :attr:`stamps` holds when each unit ran.
    """

    def __init__(self, gate: Foreground, units: int) -> None:
        self.gate = gate
        self.stamps: list[float] = []
        self.waited: list[float] = []
        self.at_boundary = threading.Event()
        self._go = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(units,), daemon=True)
        self.thread.start()

    def _run(self, units: int) -> None:
        self._go.wait()
        for _ in range(units):
            self.at_boundary.set()
            self.waited.append(self.gate.pause())
            self.stamps.append(time.monotonic())

    def go(self) -> None:
        self._go.set()


async def hold_until_set(release: asyncio.Event) -> None:
    """A foreground job held from outside (``Foreground.hold(task)``) until ``release`` is set."""
    await release.wait()


async def hold_until(gate: Foreground, release: asyncio.Event, held: asyncio.Event) -> None:
    """A foreground job: holds the gate until ``release`` is set."""
    gate.hold()
    held.set()
    await release.wait()


async def test_a_background_loop_pauses_while_a_foreground_job_runs_and_resumes_after() -> None:
    gate = Foreground(grace=0.005, max_wait=FAR)
    release, held = asyncio.Event(), asyncio.Event()
    job = asyncio.create_task(hold_until(gate, release, held))
    await held.wait()
    assert gate.busy()
    loop = Loop(gate, units=3)
    loop.go()
    await asyncio.to_thread(loop.at_boundary.wait)  # the loop reached its first boundary
    assert loop.stamps == []  # and stays there while the job runs
    released_at = time.monotonic()
    release.set()
    await job
    await asyncio.to_thread(loop.thread.join)
    assert len(loop.stamps) == 3
    # the first unit ran only after the job ended (plus the grace); the later ones at once
    assert loop.stamps[0] >= released_at + gate.grace
    assert loop.waited[0] > 0 and loop.waited[1:] == [0.0, 0.0]
    assert not gate.busy() and gate.forced == 0


async def test_the_starvation_bound_lets_background_run_under_endless_foreground_work() -> None:
    gate = Foreground(grace=0.005, max_wait=0.05, quantum=FAR)
    release, held = asyncio.Event(), asyncio.Event()
    job = asyncio.create_task(hold_until(gate, release, held))  # never released in time
    await held.wait()
    loop = Loop(gate, units=4)
    loop.go()
    await asyncio.to_thread(loop.thread.join)
    # the first unit waited out the bound, then the quantum let the others through unpaused
    assert loop.waited[0] >= gate.max_wait
    assert loop.waited[1:] == [0.0, 0.0, 0.0]
    assert gate.forced == 1
    assert gate.busy() is False  # inside the quantum, although the job still runs
    release.set()
    await job


async def test_a_coroutine_waits_for_the_foreground_job_on_the_loop() -> None:
    gate = Foreground(grace=0.005, max_wait=FAR)
    release, held = asyncio.Event(), asyncio.Event()
    job = asyncio.create_task(hold_until(gate, release, held))
    await held.wait()
    waiting = asyncio.create_task(gate.wait())
    await asyncio.sleep(0)  # let it start waiting
    assert not waiting.done()
    released_at = time.monotonic()
    release.set()
    waited = await waiting
    assert time.monotonic() >= released_at + gate.grace
    assert waited > 0
    await job
    assert await gate.wait() == 0.0  # nothing held: no wait


async def test_the_async_wait_is_bounded_too() -> None:
    gate = Foreground(grace=0.005, max_wait=0.05, quantum=FAR)
    release, held = asyncio.Event(), asyncio.Event()
    job = asyncio.create_task(hold_until(gate, release, held))
    await held.wait()
    assert await gate.wait() >= gate.max_wait
    assert gate.forced == 1
    release.set()
    await job


async def test_two_jobs_hold_the_gate_until_the_last_one_ends() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR)
    first, second = asyncio.Event(), asyncio.Event()
    held1, held2 = asyncio.Event(), asyncio.Event()
    job1 = asyncio.create_task(hold_until(gate, first, held1))
    job2 = asyncio.create_task(hold_until(gate, second, held2))
    await held1.wait()
    await held2.wait()
    first.set()
    await job1
    assert gate.busy()  # the second job still runs
    waiting = asyncio.create_task(gate.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    second.set()
    await job2
    await waiting
    assert not gate.busy()


async def test_holding_a_task_twice_is_holding_it_once() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR)
    release = asyncio.Event()

    async def job() -> None:
        gate.hold()
        gate.hold()
        await release.wait()

    task = asyncio.create_task(job())
    await asyncio.sleep(0)
    assert gate.busy()
    release.set()
    await task
    assert not gate.busy()


# ------------------------------------------------------------------------ the output lane


def test_the_output_margin_grows_with_the_message_and_stays_under_the_debounce() -> None:
    least, most = OUTPUT_MARGIN_SECONDS
    assert output_margin(0) == least
    assert least < output_margin(100_000) < output_margin(200_000) <= most
    assert output_margin(1_600_000) == most < diagnostics.DEBOUNCE_SECONDS


async def debounced(gate: Foreground, delay: float, release: asyncio.Event) -> None:
    """A scheduled check: expected for ``delay`` seconds, then it would hold the gate."""
    await release.wait()


async def test_an_expected_check_due_soon_holds_the_output_lane_but_not_background_work() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, 0.0, release))
    gate.expect(task, 0.0)  # due now: within any message's margin
    assert not gate.busy()
    assert await asyncio.to_thread(gate.pause) == 0.0  # computation goes on during a debounce
    writing = asyncio.ensure_future(asyncio.to_thread(gate.pause_output, 1_000_000))
    await asyncio.to_thread(lambda: None)  # a thread hop: the output lane has started waiting
    assert not writing.done()
    release.set()
    await task
    assert await writing > 0  # it went once the check ended
    assert gate.forced == 0


async def test_an_expected_check_due_later_than_the_margin_lets_a_small_message_go() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, FAR, release))
    gate.expect(task, FAR)
    assert await asyncio.to_thread(gate.pause_output, 10) == 0.0
    release.set()
    await task


async def test_the_output_lane_is_bounded_by_the_starvation_bound() -> None:
    gate = Foreground(grace=0.0, max_wait=0.05, quantum=FAR)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, 0.0, release))
    gate.expect(task, 0.0)
    assert await asyncio.to_thread(gate.pause_output, 0) >= gate.max_wait
    assert gate.forced == 1
    assert await asyncio.to_thread(gate.pause_output, 0) >= gate.max_wait  # no quantum: it waits again
    assert gate.forced == 2
    release.set()
    await task


# ------------------------------------------------------------------------- bulk work


async def test_bulk_work_waits_for_an_expected_check_due_within_the_lead_and_scans_do_not() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR, bulk_lead=0.1)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, 0.0, release))
    gate.expect(task, 0.0)  # a keystroke's check at the end of its debounce
    assert await asyncio.to_thread(gate.pause) == 0.0  # a scan goes on
    bulk = asyncio.ensure_future(asyncio.to_thread(gate.pause_bulk))
    waiting = asyncio.create_task(gate.wait(bulk=True))
    for _ in range(10_000):  # until the bulk thread and the bulk coroutine wait at the gate
        if gate.waiting >= 2:  # (a thread hop alone let the thread arrive after the release)
            break
        await asyncio.sleep(0.001)
    assert not bulk.done() and not waiting.done()
    assert await gate.wait() == 0.0  # a loop coroutine that is not bulk work does not wait
    release.set()
    await task  # the check ended (published): bulk work goes on
    assert await bulk > 0 and await waiting > 0
    assert gate.forced == 0


async def test_bulk_work_runs_while_the_expected_check_is_due_later_than_the_lead() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR, bulk_lead=0.1)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, FAR, release))
    gate.expect(task, FAR)  # the start of a debounce
    assert await asyncio.to_thread(gate.pause_bulk) == 0.0
    assert await gate.wait(bulk=True) == 0.0
    release.set()
    await task


async def test_a_replaced_check_lets_waiting_bulk_work_go_when_the_new_one_is_due_later() -> None:
    gate = Foreground(grace=0.0, max_wait=FAR, bulk_lead=0.1)
    first, second = asyncio.Event(), asyncio.Event()
    old = asyncio.create_task(debounced(gate, 0.0, first))
    gate.expect(old, 0.0)
    waiting = asyncio.create_task(gate.wait(bulk=True))
    await asyncio.sleep(0)
    assert not waiting.done()
    new = asyncio.create_task(debounced(gate, FAR, second))
    gate.expect(new, FAR)  # the next keystroke: its check is due later than the lead
    old.cancel()  # ... and replaces the old one (Tasks.start)
    assert await waiting > 0
    second.set()
    await new


async def test_bulk_work_is_bounded_and_the_bound_frees_a_quantum() -> None:
    gate = Foreground(grace=0.0, max_wait=0.05, quantum=FAR, bulk_lead=0.1)
    release = asyncio.Event()
    task = asyncio.create_task(debounced(gate, 0.0, release))
    gate.expect(task, 0.0)  # a check that never starts (e.g. it waits for the first index)
    assert await asyncio.to_thread(gate.pause_bulk) >= gate.max_wait
    assert gate.forced == 1
    assert await asyncio.to_thread(gate.pause_bulk) == 0.0  # inside the quantum
    release.set()
    await task


# ------------------------------------------------------------- the session's foreground jobs

CJK = "---\r\ndoc_id: 价目\r\nversion: 1\r\nsubject: 开放日🎉\r\n---\r\n- 票价：免费𠮷\r\n"
DRAFT = ("---\nquestion: 票价多少？\nfields: [票价]\n---\n开放日票价：免费𠮷[^1]。\n\n"
         '[^1]: 价目@1:6 sha256:{sha} "- 票价：免费𠮷"\n')


async def test_a_draft_check_and_a_hover_are_foreground_jobs_until_their_task_ends(tmp_path: Path) -> None:
    root = build_workspace(tmp_path / "ws", {"grounding.toml": 'today = "2026-06-01"\n',
                                             "evidence/price.md": CJK})
    draft = DRAFT.format(sha=sha256(CJK)[:12])
    async with in_process(root) as here:
        session = here.session
        uri = here.open("answers/a.md", draft)
        await here.recorder.wait_publish(uri)
        here.change(uri, 2, draft + "\n")
        session.tasks.cancel(diagnostics.CHECK_PREFIX + uri)  # this test checks version 2 itself

        async def check() -> int:
            result = await session.current_result(uri)  # a check of version 2 in a worker
            assert result is not None and result.key.version == 2
            return session.foreground.jobs  # still this task's job

        assert await asyncio.create_task(check()) == 1
        await asyncio.sleep(0)  # the task's done callbacks (the release among them) run
        assert session.foreground.jobs == 0

        line = draft.split("\n").index(next(r for r in draft.split("\n") if r.startswith("[^1]:")))

        async def hover() -> tuple[types.Hover | None, int]:
            params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                       position=types.Position(line=line, character=7))
            found = await session.guard("hover", navigation.hover, params, foreground=True)
            return found, session.foreground.jobs

        found, jobs = await asyncio.create_task(hover())
        await asyncio.sleep(0)
        assert jobs == 1 and session.foreground.jobs == 0
        assert found is not None and "免费𠮷" in str(found.contents)


# --------------------------------------------------- a real evidence refresh waits for a job

CONFLICTING = 200
"""Evidence files conflicting on one key (CRLF, CJK, emoji): a refresh of 13 chunks."""


def conflicting(n: int) -> str:
    return f"---\r\ndoc_id: 价目-{n:03d}\r\nsubject: 开放日🎉\r\n---\r\n- 票价：{n} 元𠮷\r\n"


async def test_a_running_evidence_refresh_publishes_nothing_while_a_foreground_job_holds_the_gate(
        tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {"grounding.toml": 'today = "2026-06-01"\n'}
    files.update({f"evidence/价目/{n:03d}.md": conflicting(n) for n in range(CONFLICTING)})
    root = build_workspace(tmp_path / "ws", files)
    uris = {(root / "evidence" / "价目" / f"{n:03d}.md").as_uri() for n in range(CONFLICTING)}
    async with in_process(root) as here:
        session, recorder = here.session, here.recorder
        session.foreground.max_wait = FAR  # this test holds the gate: no bound may end the wait

        def published(after: int = 0) -> int:
            return len({p.uri for p in recorder.publications[after:] if p.diagnostics} & uris)

        # the start-up refresh may still run or be over: wait for all of it, then start a new
        # refresh of every file (each one's value changes) and catch it in the middle
        await recorder.wait_until(lambda: published() == CONFLICTING, "the start-up refresh")
        for n in range(CONFLICTING):
            (root / "evidence" / "价目" / f"{n:03d}.md").write_bytes(conflicting(n).replace("元𠮷", "元整𠮷").encode())
        mark = len(recorder.publications)
        release, held = asyncio.Event(), asyncio.Event()
        job = asyncio.create_task(hold_until_set(release))

        def hold_at_first_publication() -> bool:
            # runs inside the publication's send (on the loop, in the refresh's chunk loop): the
            # job holds the gate before the refresh reaches its next boundary, deterministically
            if published(mark) == 0:
                return False
            session.foreground.hold(job)
            held.set()
            return True

        waiting_for_first = asyncio.ensure_future(
            recorder.wait_until(hold_at_first_publication, "the new refresh's first chunk"))
        workspace.request_reindex(session, {f"价目/{n:03d}.md" for n in range(CONFLICTING)})
        await waiting_for_first
        await held.wait()
        # the refresh reaches its next boundary (the next chunk or file) and waits there
        await recorder.wait_until(lambda: session.foreground.waiting > 0, "the refresh to pause", poll=0.01)
        before = published(mark)
        assert 0 < before < CONFLICTING
        # a real hover-sized piece of foreground work runs meanwhile: nothing is published
        view = session.current_view()
        assert view is not None
        record = await session.readers.run(view.snapshot.record_for_path, "价目/000.md")
        assert record is not None and record.doc_id == "价目-000"
        assert published(mark) == before and session.foreground.waiting > 0
        release.set()
        await job
        await recorder.wait_until(lambda: published(mark) == CONFLICTING, "the rest of the refresh")
        assert session.foreground.forced == 0

