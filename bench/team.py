#!/usr/bin/env python3
"""The team benchmark (issue 17): one shared index, four editors and a CI check reading while
one indexer applies a 1,000-file change; PostgreSQL, and SQLite for comparison.

    python3 bench/run.py --team            # 30k generated files (bench/corpus.py)
    python3 bench/run.py --team --quick    # 300 files, a 100-file change (smoke run)

Per backend, on a private copy of the corpus (the change is made in the copy):

1. the indexer (this process) builds the index cold (``Store.scan`` + ``build_fts``; on
   PostgreSQL it holds the writer lock) and writes a 100-citation draft from it
   (``run.build_draft``);
2. five reader processes start (``--team-worker``): four *language-server-like* readers —
   a worker thread waits in ``Store.wait_for_events`` (NOTIFY on PostgreSQL; SQLite polls
   every 0.5 s) while the main thread checks the draft in a loop against the snapshot it
   last heard of, as the server re-checks an open draft — and one *CI check* reading a fresh
   ``Store.snapshot()`` per check (``grounding check`` without its scan);
3. once every reader has checked for a while (at least ``MIN_CHECKS`` checks), the indexer
   rewrites 1,000 evidence files and scans exactly those paths (``scan(paths=...)``, as the
   watcher drives it), then drains the full-text queue;
4. each reader runs until its check has used a snapshot holding the change, plus one second.

Reported per backend: the indexer's cold index and change scan; per reader the check p50/p95
over the whole run and p95 while the indexer was writing; and the time from the indexer's
commit (timed at the scan transaction's COMMIT) until each reader finished a check against the
new state (the maximum over readers is "every editor refreshed"). Timings are wall-clock on
this machine, with every process sharing its cores (two here): figures, never assertions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO)]

import corpus as corpora  # noqa: E402

from grounding_core.config import load_config  # noqa: E402
from grounding_core.drafts import parse_draft  # noqa: E402
from grounding_core.index import ParseSettings  # noqa: E402
from grounding_core.store import Store  # noqa: E402
from grounding_core.verify import check_draft  # noqa: E402

READERS = 4
WARMUP_S = 4.0
MIN_CHECKS = 20
"""A reader says ``ready`` after WARMUP_S seconds and at least this many checks (so p95 is
not just the slowest of a handful)."""
TAIL_S = 1.0


def _settings(root: Path) -> ParseSettings:
    config = load_config(root)
    return ParseSettings(config.field_separators, config.meta_fields, config.subject_fields)


def pct(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- a reader process -------------------------------------------------------------------------


def reader(kind: str, root: Path, location: str, known: int, draft_path: Path) -> dict[str, Any]:
    """One reader (``editor`` or ``ci``); prints ``ready`` once warm, then JSON at the end."""
    config = load_config(root)
    today = config.today_or()
    store = Store(location, _settings(root))
    draft = parse_draft(draft_path.read_text(encoding="utf-8"))
    heard: list[tuple[int, float]] = []

    def listen() -> None:
        count = store.wait_for_events(known, timeout=3600)
        if count is not None:
            heard.append((count, time.time()))

    if kind == "editor":
        threading.Thread(target=listen, daemon=True).start()
    samples: list[tuple[float, float, int]] = []  # (start epoch, seconds, snapshot seq)
    seen_at = heard_at = None
    ready_at = time.monotonic() + WARMUP_S
    announced = False
    at = known
    while True:
        if kind == "editor":
            if heard and at == known:
                at, heard_at = heard[0]
            snapshot = store.snapshot(at=at)
        else:
            snapshot = store.snapshot()
        start, t0 = time.time(), time.perf_counter()
        check_draft(draft, snapshot, config, today, "answers/bench.md")
        elapsed = time.perf_counter() - t0
        samples.append((start, elapsed, snapshot.seq))
        if snapshot.seq > known and seen_at is None:
            seen_at = time.time()
        if not announced and time.monotonic() >= ready_at and len(samples) >= MIN_CHECKS:
            print("ready", flush=True)
            announced = True
        if seen_at is not None and time.time() - seen_at >= TAIL_S:
            break
    store.close()
    return {"kind": kind, "samples": samples, "seen_at": seen_at, "heard_at": heard_at}


# -- one backend ----------------------------------------------------------------------------------


def change_files(evidence: Path, count: int) -> list[str]:
    """Rewrite ``count`` evidence files (a new last line each); their paths."""
    changed = []
    for path in sorted(evidence.rglob("*.md"))[:count]:
        text = path.read_text(encoding="utf-8")
        path.write_text(text + f"\n- 团队备注：第{len(changed)}次修改 🎉\n", encoding="utf-8")
        changed.append(path.relative_to(evidence).as_posix())
    return changed


def _time_commits(store: Store) -> list[float]:
    """Record the wall-clock time at which each of ``store``'s exclusive write transactions
    commits (bench instrumentation: wraps its backend's ``write``); the list fills as they do.
    """
    commits: list[float] = []
    original = store.backend.write

    @contextmanager
    def timed(exclusive: bool = True) -> Iterator[Any]:
        with original(exclusive) as conn:
            yield conn
        if exclusive:
            commits.append(time.time())

    store.backend.write = timed  # type: ignore[method-assign]
    return commits


def run_backend(name: str, location: str, source: Path, work: Path, change: int) -> dict[str, Any]:
    """Steps 1-4 of the module docstring for one backend; the measured figures."""
    import run

    root = work / name
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".grounding"))
    config = load_config(root)
    out: dict[str, Any] = {"backend": name}
    writer = Store(location, _settings(root))
    try:
        t0 = time.perf_counter()
        writer.scan(config)
        out["cold_index_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        writer.build_fts()
        out["cold_fts_s"] = time.perf_counter() - t0
        text, _quotes, _facts = run.build_draft(writer.snapshot(), config.today_or())
        draft_path = root / "answers" / "bench.md"
        draft_path.parent.mkdir(exist_ok=True)
        draft_path.write_text(text, encoding="utf-8")
        known = writer.event_count()
        kinds = ["editor"] * READERS + ["ci"]
        procs = [subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--team-worker", kind, str(root), location, str(known),
             str(draft_path)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            for kind in kinds]
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"team reader did not start: {line!r}")
        changed = change_files(root / "evidence", change)
        commits = _time_commits(writer)
        write_start = time.time()
        t0 = time.perf_counter()
        result = writer.scan(config, paths=changed)
        out["change_scan_s"] = time.perf_counter() - t0
        committed = commits[-1]  # the scan's own transaction (scan() returns later: its snapshot)
        out["scan_returned_after_commit_s"] = time.time() - committed
        writer.build_fts()
        out["change_fts_s"] = time.time() - committed
        write_end = time.time()
        out["events_appended"] = len(result.events)
        out["files_changed"] = len(changed)
        readers = []
        for proc in procs:
            stdout, _ = proc.communicate(timeout=3600)
            readers.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        writer.close()
    rows = []
    for i, r in enumerate(readers):
        samples = r["samples"]
        all_s = [s[1] for s in samples]
        during = [s[1] for s in samples if s[0] + s[1] >= write_start and s[0] <= write_end]
        rows.append({
            "reader": f"editor {i + 1}" if r["kind"] == "editor" else "CI check",
            "checks": len(all_s), "p50_ms": statistics.median(all_s) * 1000, "p95_ms": pct(all_s, 0.95) * 1000,
            "p95_during_write_ms": pct(during, 0.95) * 1000 if during else None,
            "refreshed_after_commit_s": (r["seen_at"] - committed) if r["seen_at"] else None,
            "heard_after_commit_s": (r["heard_at"] - committed) if r.get("heard_at") else None,
        })
    out["readers"] = rows
    refreshed = [row["refreshed_after_commit_s"] for row in rows if row["refreshed_after_commit_s"] is not None]
    out["every_reader_refreshed_s"] = max(refreshed) if len(refreshed) == len(rows) else None
    return out


def render(results: list[dict[str, Any]], files: int, change: int) -> str:
    lines = [f"Team index: {files} files, {READERS} editors + 1 CI check reading while one indexer"
             f" applies a {change}-file change", "",
             "| backend | reader | checks | check p50 | check p95 | p95 while writing | refreshed after commit |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        for row in r["readers"]:
            during = f"{row['p95_during_write_ms']:.1f} ms" if row["p95_during_write_ms"] is not None else "—"
            refreshed = row["refreshed_after_commit_s"]
            seen = f"{refreshed:.2f} s" if refreshed is not None else "never"
            lines.append(f"| {r['backend']} | {row['reader']} | {row['checks']} | {row['p50_ms']:.1f} ms |"
                         f" {row['p95_ms']:.1f} ms | {during} | {seen} |")
    lines += ["", f"| backend | cold index | cold FTS | {change:,}-file change scan | its FTS rows | events |"
              " every reader refreshed |", "|---|---|---|---|---|---|---|"]
    for r in results:
        every = f"{r['every_reader_refreshed_s']:.2f} s" if r["every_reader_refreshed_s"] is not None else "—"
        lines.append(f"| {r['backend']} | {r['cold_index_s']:.1f} s | {r['cold_fts_s']:.1f} s |"
                     f" {r['change_scan_s']:.2f} s | {r['change_fts_s']:.2f} s | {r['events_appended']} |"
                     f" {every} |")
    return "\n".join(lines)


def main(quick: bool = False, json_path: Path | None = None) -> int:
    from tests.postgres.cluster import Cluster, find_bindir

    files, change = (300, 100) if quick else (30000, 1000)
    name = "gen-team-tiny" if quick else "gen-30k"
    corpus = corpora.generate(name, files)
    print(f"[team] corpus {corpus.name}: {corpus.files} files", file=sys.stderr, flush=True)
    work = Path(tempfile.mkdtemp(prefix="grounding-team-"))
    results = []
    cluster = None
    try:
        results.append(run_backend("SQLite", str(work / "index.sqlite"), corpus.root, work, change))
        print(f"[team] SQLite done: {json.dumps(results[-1])[:300]}", file=sys.stderr, flush=True)
        bindir = find_bindir()
        if bindir is None:
            print("[team] PostgreSQL is not installed: its rows are left out", file=sys.stderr)
        else:
            cluster = Cluster(bindir)
            results.append(run_backend("PostgreSQL", cluster.schema_url("team"), corpus.root, work, change))
    finally:
        if cluster is not None:
            cluster.close()
        shutil.rmtree(work, ignore_errors=True)
    table = render(results, corpus.files, change)
    print(table)
    if json_path is not None:
        json_path.write_text(json.dumps({"date": dt.date.today().isoformat(), "results": results}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--team-worker":
        kind, root, location, known, draft = sys.argv[2:7]
        print(json.dumps(reader(kind, Path(root), location, int(known), Path(draft))), flush=True)
    else:
        sys.exit(main(quick="--quick" in sys.argv))
