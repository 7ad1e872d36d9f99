"""Crash safety of the index (SPEC §4; docs/decisions.md "Index").

An indexer process (``Store.scan`` then ``Store.build_fts`` in a loop) is SIGKILLed 20 times
at random points (while it reads files; while it appends events, derived rows and commits;
while it builds full-text rows; at a random moment; just after a committed scan) while the
corpus (300 files) changes between and during its runs. After every kill the database
opens, ``replay(event_count)`` works and equals the live state, the log only ever grew (the
events seen before are still its prefix), no version is lost or duplicated (automatic
versions are contiguous and never change content; no import repeats what the log already
says), the derived tables equal a rebuild from the log, and every content that was ever
active has either all of its FTS rows or a place in the FTS queue (never half, never both).
After a final scan, the index equals a fresh index of the same files: same documents, newest
contents, searchable lines and evidence findings.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from grounding_core.config import Config, load_config
from grounding_core.derived import Deriver
from grounding_core.events import Event
from grounding_core.index import IndexSnapshot
from grounding_core.model import Finding
from grounding_core.sqlite_backend import LINE_BITS, LINE_MASK, SqliteBackend
from grounding_core.store import Store, fts_rows
from tests.support.rows import sorted_rows

from .helpers import PYTHON, SERVER_ENV

FILES = 300
ROUNDS = 20

INDEXER = """
import sys
from pathlib import Path
from grounding_core.config import load_config
from grounding_core.store import Store

append = Store._append
def announced_append(self, conn, events):
    print("appending", flush=True)
    return append(self, conn, events)
Store._append = announced_append
import grounding_core.sqlite_backend as backend
insert = backend.SqliteBackend.fts_insert
def announced_insert(self, conn, rows):
    print("fts", flush=True)
    return insert(self, conn, rows)
backend.SqliteBackend.fts_insert = announced_insert

config = load_config(Path(sys.argv[1]))
lockstep = sys.argv[2] == "lockstep"
store = Store.for_config(config)
print("ready", flush=True)
def progress(done, total, path):
    print("read", flush=True)
    if lockstep:  # wait for the test's go-ahead: it kills us at an exact file
        sys.stdin.readline()
while True:
    store.scan(config, progress)
    print("scanned", flush=True)
    store.build_fts(batch=20)
"""
"""Prints ``read`` after each file it re-reads (in ``lockstep`` mode it then waits for a line
on stdin), ``appending`` when a scan starts writing its events (then derived rows and the
commit follow), ``scanned`` after each committed scan and ``fts`` before each batch of
full-text rows (20 contents per transaction)."""


class Corpus:
    """300 evidence files; a fifth declare their version, the rest get automatic versions."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.evidence = root / "evidence"
        self.rng = rng
        self.generation: dict[int, int] = {}
        self.declared: dict[int, int] = {}
        self.deleted: set[int] = set()
        for i in range(FILES):
            self.generation[i] = 0
            if i % 5 == 0:
                self.declared[i] = 1
            self.write(i)

    def path(self, i: int) -> Path:
        return self.evidence / f"d{i % 10}" / f"doc{i:03d}.md"

    def write(self, i: int) -> None:
        gen = self.generation[i]
        head = f"---\ndoc_id: declared-{i}\nversion: {self.declared[i]}\n---\n" if i in self.declared else ""
        body = "".join(f"- 字段{k}：值{i}-{gen}-{k}\n" for k in range(12))
        path = self.path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{head}主题：主题{i}\n{body}" + "说明文字。" * 40 + "\n", encoding="utf-8")

    def mutate(self, count: int) -> int:
        """Change ``count`` files (edit, delete or restore); returns how many were written."""
        written = 0
        for i in self.rng.sample(range(FILES), count):
            roll = self.rng.random()
            if i in self.deleted:
                self.deleted.discard(i)
                self.write(i)  # restored with the content it had
            elif roll < 0.1:
                self.path(i).unlink()
                self.deleted.add(i)
                continue
            else:
                self.generation[i] += 1
                if i in self.declared and roll < 0.9:
                    self.declared[i] += 1  # otherwise: version-reuse, allowed with a warning
                self.write(i)
            written += 1
        return written


def _identity(e: Event) -> tuple[object, ...]:
    return (e.seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text, e.declared, e.reason)


def _summary(state: IndexSnapshot) -> dict[tuple[str, int], tuple[str, str, bool]]:
    return {(d, v): (r.sha256, r.path, r.revoked)
            for d in state.doc_ids() for v, r in state.versions(d).items()}


def check_log(events: list[Event]) -> None:
    """No version lost or duplicated (see the module docstring)."""
    current: dict[tuple[str, int], tuple[str, str, bool]] = {}
    automatic_shas: dict[tuple[str, int], str] = {}
    automatic_versions: dict[str, set[int]] = {}
    for e in events:
        key = (e.doc_id, e.version)
        if e.kind == "import":
            assert current.get(key) != (e.sha256, e.path, False), f"duplicate import {e}"
            current[key] = (e.sha256, e.path, False)
            if not e.declared:
                assert automatic_shas.setdefault(key, e.sha256) == e.sha256, \
                    f"automatic version {key} changed content"
                automatic_versions.setdefault(e.doc_id, set()).add(e.version)
        else:
            assert key in current, f"revoke of an unknown version {e}"
            sha, path, _ = current[key]
            current[key] = (sha, path, True)
    for doc_id, versions in automatic_versions.items():
        assert versions == set(range(1, max(versions) + 1)), f"{doc_id}: versions {sorted(versions)}"


def _wait_for(child: subprocess.Popen[str], word: str, count: int = 1) -> bool:
    """Consume output up to the ``count``-th ``word``; False if a scan committed first."""
    assert child.stdout is not None
    while count > 0:
        line = child.stdout.readline().strip()
        if line == word:
            count -= 1
        elif line in ("scanned", ""):
            return False
    return True


def _kill_rounds(tmp_path: Path) -> tuple[Config, int]:
    """Run the indexer ROUNDS times, killing it at a point chosen by the round's mode (see
    the module docstring); check the index after each kill. Returns the config and the
    final event count.
    """
    rng = random.Random(20261129)
    corpus = Corpus(tmp_path, rng)
    config = load_config(tmp_path)
    seen: list[tuple[object, ...]] = []
    modes: dict[str, int] = {"reading": 0, "committing": 0, "anytime": 0, "after": 0, "fts": 0}
    for round_no in range(ROUNDS):
        written = corpus.mutate(rng.randint(30, 120)) if round_no else FILES
        mode = list(modes)[round_no % 5]
        child = subprocess.Popen([PYTHON, "-c", INDEXER, str(tmp_path),
                                  "lockstep" if mode == "reading" else "free"], env=SERVER_ENV,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            first = child.stdout.readline().strip()
            assert first == "ready", child.stderr.read() if child.stderr else first
            finished = False  # a scan committed before the kill
            if mode == "reading":  # at an exact file of the read loop: nothing written yet
                assert child.stdin is not None
                for _ in range(rng.randint(0, max(0, written // 2))):
                    if not _wait_for(child, "read"):
                        finished = True
                        break
                    child.stdin.write("go\n")
                    child.stdin.flush()
                else:
                    finished = not _wait_for(child, "read")  # now blocked inside the scan
            elif mode == "committing":  # appending events, FTS rows, commit
                finished = not _wait_for(child, "appending")
                time.sleep(rng.uniform(0, 0.02))
            elif mode == "anytime":
                if rng.random() < 0.5:
                    finished = not _wait_for(child, "read", rng.randint(1, 10))
                    corpus.mutate(rng.randint(1, 10))  # the corpus changes under the indexer
                time.sleep(rng.uniform(0, 0.3))
            elif mode == "fts":  # building full-text rows, after the scan committed
                finished = _wait_for(child, "fts", rng.randint(1, 4))
                time.sleep(rng.uniform(0, 0.01))
            else:  # after a committed scan, in the next one (which rewrites the file rows)
                finished = _wait_for(child, "scanned")
                time.sleep(rng.uniform(0, 0.02))
        finally:
            child.send_signal(signal.SIGKILL)
            rest, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        if mode == "fts" or (not finished and "scanned" not in rest):
            modes[mode] += 1  # killed before its first scan committed (or while building FTS)
        store = Store.for_config(config)
        try:
            n = store.event_count()
            replayed = store.replay(n)
            assert _summary(replayed) == _summary(store.state)
            events = store.events()
            identities = [_identity(e) for e in events]
            assert identities[: len(seen)] == seen, "the log lost or rewrote events"
            seen = identities
            check_log(events)
            check_fts(store)
            check_derived(store)
        finally:
            store.close()
    print(f"kills before the scan committed (fts: while building FTS), by mode: {modes}")
    assert modes["reading"] == len(range(0, ROUNDS, 5)) and modes["after"] == 0, modes
    return config, len(seen)


def _fts_rows(store: Store) -> set[tuple[int, int, str]]:
    rows = store.backend.reader().execute("SELECT rowid, text FROM lines_fts").fetchall()
    return {(int(r[0]) >> LINE_BITS, int(r[0]) & LINE_MASK, r[1]) for r in rows}


def check_fts(store: Store) -> None:
    """Every ever-active content has all its FTS rows or a place in the queue, never both,
    never half; no other content has FTS rows.
    """
    conn = store.backend.reader()
    ever = {int(cid): (str(text), int(front)) for cid, text, front in conn.execute(
        "SELECT v.content_id, e.text, v.front_end FROM versions AS v JOIN events AS e ON e.seq = v.content_id"
        " WHERE v.active_from IS NOT NULL").fetchall()}
    queued = {int(r[0]) for r in conn.execute("SELECT content_id FROM fts_queue").fetchall()}
    rows = _fts_rows(store)
    indexed = {cid for cid, _line, _text in rows}
    assert queued <= set(ever), "queued content that was never active"
    assert not queued & indexed, "a content both queued and indexed"
    lines = {cid: {(cid, rowid & LINE_MASK, text) for rowid, text in fts_rows(cid, *ever[cid])}
             for cid in ever}
    assert indexed | queued >= {cid for cid, want in lines.items() if want}, "a content lost"
    assert indexed <= set(ever), "FTS rows of a content that was never active"
    expected = set().union(*(lines[cid] for cid in indexed)) if indexed else set()
    assert rows == expected, "FTS rows of a content are not exactly its lines"


def check_derived(store: Store) -> None:
    """The derived tables equal a rebuild of the same log (a fresh store fed the events)."""
    conn = store.backend.reader()
    tables = {t: sorted_rows(conn.execute(f"SELECT * FROM {t}").fetchall())
              for t in ("versions", "revocations", "field_lines", "terms", "key_values", "dated_lines")}
    fresh = SqliteBackend(":memory:")
    try:
        fresh.create_schema()
        copy = fresh.writer
        copy.execute("BEGIN")
        for e in store.events():
            copy.execute("INSERT INTO events (seq, kind, doc_id, version, sha256, path, text, declared,"
                         " reason, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'x')",
                         (e.seq, e.kind, e.doc_id, e.version, e.sha256, e.path, e.text, int(e.declared),
                          e.reason))
        deriver = Deriver(copy, fresh, store.settings)
        for e in store.events():
            deriver.apply(e)
        deriver.flush()
        copy.execute("COMMIT")
        again = {t: sorted_rows(copy.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}
        assert tables == again, "derived tables differ from a rebuild of the log"
    finally:
        fresh.close()


def _searchable(store: Store) -> set[tuple[str, int, str]]:
    """(doc_id, line, text) of the FTS rows of currently active contents."""
    rows = store.backend.reader().execute(
        f"SELECT v.doc_id, f.rowid & {LINE_MASK}, f.text FROM lines_fts AS f"
        f" JOIN versions AS v ON v.content_id = f.rowid >> {LINE_BITS}"
        " WHERE v.active_from IS NOT NULL AND v.active_to IS NULL").fetchall()
    return {(str(d), int(line), str(text)) for d, line, text in rows}


def _current(state: IndexSnapshot) -> dict[str, tuple[str, str]]:
    out = {}
    for doc_id in state.doc_ids():
        newest = state.newest(doc_id)
        if newest is not None and not newest.revoked:
            out[doc_id] = (newest.sha256, state.document(newest).text)
    return out


def _problems(evidence: dict[str, list[Finding]]) -> dict[str, list[str]]:
    """Evidence finding names by path, except version-reuse (which depends on history)."""
    return {p: [f.name for f in fs if f.name != "version-reuse"] for p, fs in evidence.items()}


def test_sigkilled_indexer_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    config, events = _kill_rounds(tmp_path)
    assert events > FILES, "the indexer never got far enough to be tested"
    store = Store.for_config(config)
    fresh = Store.for_config(config.with_overrides(index=str(tmp_path / "fresh.sqlite")))
    try:
        final = store.scan(config)
        again = fresh.scan(config)
        store.build_fts()
        fresh.build_fts()
        assert _current(final.state) == _current(again.state)
        assert len(_current(final.state)) > FILES * 0.8
        assert _searchable(store) == _searchable(fresh)
        check_fts(store)
        assert store.fts_pending() == 0
        assert _problems(final.evidence) == _problems(again.evidence)
        assert store.replay(store.event_count()).doc_ids() == store.state.doc_ids()
        check_log(store.events())
        check_derived(store)
    finally:
        store.close()
        fresh.close()


# ------------------------------------------------------------ deterministic interruptions


def _workspace(tmp_path: Path) -> Config:
    for i in range(5):
        path = tmp_path / "evidence" / f"doc{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"主题：主题{i}\n- 字段：值{i}\n", encoding="utf-8")
    return load_config(tmp_path)


class Interrupted(BaseException):
    """Stands in for a kill at a chosen point (a BaseException, like KeyboardInterrupt)."""


@pytest.mark.parametrize("where", ["progress", "derived"])
def test_a_scan_interrupted_midway_commits_nothing_and_the_next_redoes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    config = _workspace(tmp_path)
    store = Store.for_config(config)
    try:
        def stop(*_args: object) -> None:
            raise Interrupted

        if where == "derived":
            monkeypatch.setattr(Deriver, "flush", stop)  # after the events were appended
            with pytest.raises(Interrupted):
                store.scan(config)
            monkeypatch.undo()
        else:
            with pytest.raises(Interrupted):
                store.scan(config, progress=stop)
        assert store.event_count() == 0 and store.state.doc_ids() == []
        assert store.fts_pending() == 0 and _fts_rows(store) == set()
        result = store.scan(config)
        assert len(result.events) == 5
        assert store.fts_pending() == 5
        assert store.build_fts()
        check_fts(store)
        assert {d for d, _line, _text in _searchable(store)} == {f"doc{i}" for i in range(5)}
    finally:
        store.close()


def test_an_interrupted_fts_batch_leaves_its_contents_queued(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _workspace(tmp_path)
    store = Store.for_config(config)
    try:
        store.scan(config)
        calls = []

        def stop_second(self: SqliteBackend, conn: object, rows: object) -> None:
            calls.append(1)
            if len(calls) == 2:
                raise Interrupted
            real(self, conn, rows)  # type: ignore[arg-type]

        real = SqliteBackend.fts_insert
        monkeypatch.setattr(SqliteBackend, "fts_insert", stop_second)
        with pytest.raises(Interrupted):
            store.build_fts(batch=2)
        monkeypatch.undo()
        assert store.fts_pending() == 3  # the first batch committed, the second rolled back
        check_fts(store)
        assert not store.snapshot().search_complete
        assert store.build_fts() and store.snapshot().search_complete
        check_fts(store)
    finally:
        store.close()


def test_reopened_index_replays_to_the_same_state(tmp_path: Path) -> None:
    config = _workspace(tmp_path)
    store = Store.for_config(config)
    store.scan(config)
    (tmp_path / "evidence" / "doc0.md").write_text("主题：主题0\n- 字段：改了\n", encoding="utf-8")
    os.remove(tmp_path / "evidence" / "doc1.md")
    store.scan(config)
    before = _summary(store.state)
    store.close()
    reopened = Store.for_config(config)
    try:
        assert _summary(reopened.state) == before
        assert _summary(reopened.replay(reopened.event_count())) == before
        assert reopened.scan(config).events == []
    finally:
        reopened.close()
