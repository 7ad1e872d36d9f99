#!/usr/bin/env python3
"""Grounding benchmarks: one command, one table (see BENCHMARKS.md).

    python3 bench/run.py            # full run: generated 1k, 10k and 30k files, Debian copyright files
    python3 bench/run.py --quick    # CI smoke run: tiny corpora, same code, < 60 s

Corpora are built by ``bench/corpus.py`` under ``bench/.corpus/`` (gitignored, deterministic).
For each corpus the run measures, each phase in a fresh worker process (``--worker``):

- ``index`` worker: the read+sha256 floor (walk, read and hash every evidence file; best of
  three, page cache warm), the cold index until it is usable for checks (no database ->
  ``Workspace.open`` + ``scan``), then the full-text rows built after it (``build_fts``,
  what the server does in the background); writes a 100-citation draft from the index
  (``answers/bench.md``), times ``grounding_core.verify.check_draft`` on it, and ``rg -F -x``
  over the same corpus for the same 100 quotes;
- ``warm`` worker: a new process opens the existing database and rescans with nothing
  changed, then checks the draft once (the first check after start), and reads the rows that
  check's conflict gate had to read the plainest way, on a fresh connection (its floor); one
  evidence file (cited by the draft) is changed and, once the file has settled, re-indexed
  (``scan(paths=...)``, as the watcher drives it) and the draft re-checked, five times; then
  the uncited-claim scan
  (GR110) on a one-megabyte value and a one-megabyte sentence;
- ``grounding check`` as users run it: the whole process (``python -m grounding.cli check``,
  warm index) against ``rg -F -x -f quotes`` over the evidence, and its peak RSS;
- the language server (``python -m server`` over stdio, driven by pygls's
  ``LanguageClient`` as an editor would): its own cold index (a separate database) until the
  draft's first ``publishDiagnostics``, with hovers sent all along; its peak RSS
  (``VmHWM``); ``didChange`` and ``didSave`` -> ``publishDiagnostics`` latency; an evidence
  file edited on disk -> the draft's diagnostics refreshed with the new finding (and
  restored -> gone again); and hovers while up to 1,000 evidence files change on disk.

In-process timings exclude interpreter start-up and imports (the ``grounding check`` row is
the whole process). Targets are reported, never asserted: "ok" or "MISS" next to a figure
compares it with the target in the same row.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import hashlib
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO)]
if os.environ.get("GROUNDING_BENCH_CODE"):  # measure another checkout's grounding_core
    sys.path.insert(0, os.environ["GROUNDING_BENCH_CODE"])

import corpus as corpora  # noqa: E402  (bench/corpus.py, found through sys.path above)

ROWS: list[tuple[str, str, str]] = [
    # (key, label, target)
    ("size", "evidence files / bytes", ""),
    ("floor", "read+sha256 floor (walk, read, hash)", ""),
    ("cli", "grounding check, whole process vs rg -F -x -f quotes", "<= 1x rg at 10k"),
    ("python_floor", "a Python check's floor: start-up, the parsers' imports, bare walk, draft parse",
     "(whole process as x this floor)"),
    ("startup", "start-up alone: the interpreter and every module a check imports, nothing run",
     "(whole process = start-up + the check's work)"),
    ("cli_rss", "grounding check peak RSS", "<= 150 MB, flat 1k->30k"),
    ("one_file", "one file changed: re-index + re-check draft", "<= 20 ms"),
    ("warm", "warm start, nothing changed (new process)", "<= 0.5 s"),
    ("cold", "cold index, usable for checks (x floor)", "<= 10x floor"),
    ("storage_floor", "storage floor: the same rows into the same schema (executemany)",
     "(cold cpu as x parse + storage floors)"),
    ("cold_rss", "cold index peak RSS (the indexing process, VmHWM)", "flat 1k->30k (within 50 MB)"),
    ("rebuild", "settings change: every derived row rebuilt from the log, wall / peak RSS",
     "flat 1k->30k (within 50 MB)"),
    ("fts", "full-text rows, built after (background)", ""),
    ("first_check", "first check after start", "<= 50 ms"),
    ("first_check_floor", "first check floor: bare read of the checked keys' rows", "(first check as x floor)"),
    ("check", "check_draft, 100 citations p50 / p95", "p95 <= 20 ms"),
    ("rg", "100 quotes: check_draft vs rg -F -x (ratio)", "<= 0.2x rg"),
    ("uncited", "uncited-claim scan: 1 MB value, 1 MB sentence", "< 2 s"),
    ("question", "question grammar (SPEC §13): vocabulary_in of a question p50 / of 1 MB", "≤ 20 ms / < 2 s"),
    ("lsp_index", "server cold index -> first draft diagnostics", "<= 5 s (debian)"),
    ("hover_index", "hover p95 while the server starts (answered with text, window)", "p95 <= 100 ms"),
    ("rss", "server peak RSS (VmHWM) after indexing / at the end", "<= 300 MB at 155 MB"),
    ("stdio_change", "stdio didChange -> publishDiagnostics p50 / p95", "p95 <= 200 ms (debounce 150 + 50)"),
    ("stdio_save", "stdio didSave -> publishDiagnostics p50 / p95", ""),
    ("evidence_edit", "evidence edit on disk -> refreshed diagnostics p50 / max", "<= 500 ms"),
    ("hover_storm", "hover p95 while 1,000 evidence files change (files)", "p95 <= 100 ms"),
]
"""Every row the table prints, in order; tests/test_bench_smoke.py checks they all appear."""

DRAFT_CITATIONS = 100
STORM_FILES = 1000
"""Evidence files rewritten at once (like ``git checkout``) for the hover-under-storm row."""
START_TAIL_S = 2.0
"""Hovers of the start-up row go on this long after the first index pass (the first evidence
refresh runs then)."""
STORM_TIMEOUT = 300.0
"""Seconds to wait for the storm's index passes (then the row says so and the run goes on)."""
DEBOUNCE_S = 0.15
STORAGE_FLOOR_TIMEOUT = 1800.0
"""Seconds the storage-floor child process may take (reading back and re-inserting every row)."""
"""The server's typing debounce (server/session.py ``DEBOUNCE_SECONDS``)."""
LSP_INDEX_TIMEOUT = {"gen-1k": 300.0, "gen-10k": 600.0, "gen-30k": 600.0, "debian": 90.0}
"""Seconds to wait for the server's first draft diagnostics (its cold index) per corpus."""
EDIT_COUNTER_TEXT = "Benchmark edit 0000 restates evidence lines."


# ------------------------------------------------------------------------------- helpers


def pct(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def fmt_mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def remove_index(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()


def evidence_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, names in os.walk(root / "evidence"):
        dirnames.sort()
        out.extend(os.path.join(dirpath, n) for n in sorted(names))
    return out


def floor_seconds(root: Path) -> tuple[float, int, float]:
    """Best of three: list, read and sha256 every evidence file. Returns the best wall time,
    the bytes read and the best CPU time of this process (``time.process_time``).
    """
    best = best_cpu = math.inf
    total = 0
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        total = 0
        for path in evidence_files(root):
            with open(path, "rb") as handle:
                data = handle.read()
            hashlib.sha256(data).hexdigest()
            total += len(data)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, total, best_cpu


def parse_floor_seconds(root: Path) -> float:
    """CPU time to read, hash, decode and parse every evidence file into lines, front matter
    and field lines (``parse_evidence``, the same parse the index does), with no database:
    what any indexer written in Python pays before it stores a row.
    """
    from grounding_core.config import load_config
    from grounding_core.evidence import EvidenceError, parse_evidence

    config = load_config(root)
    base = config.evidence_root
    c0 = time.process_time()
    for path in evidence_files(root):
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            doc = parse_evidence(Path(path).relative_to(base).as_posix(), data, config.field_separators,
                                 config.subject_fields)
        except EvidenceError:
            continue
        doc.field_lines  # noqa: B018  (the field lines are computed on first access)
    return time.process_time() - c0


def storage_floor(db: Path, scratch: Path) -> dict[str, Any]:
    """The storage floor of the cold index: every row the cold index wrote before it was usable
    for checks (every table of ``db`` but the FTS5 table and SQLite's own), read back into
    memory as plain tuples, then inserted into a fresh database of the same schema (the
    backend's own ``create_schema``, so the two cannot drift; its connection, so the same
    pragmas: WAL, ``synchronous=NORMAL``, cache and temp store; the source's page size) with
    one ``executemany`` per table, all in one transaction as the scan writes them, indexes
    present. What SQLite needs to store those rows and maintain those B-trees, with no Python
    parse or grouping. Returns wall and CPU seconds (``time.process_time``), the rows and CPU
    seconds per table (and of the commit: the WAL write) and the file's bytes. The rows stay
    in bench memory only while they are inserted.
    """
    import sqlite3

    from grounding_core.sqlite_backend import SqliteBackend

    source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    page_size = int(source.execute("PRAGMA page_size").fetchone()[0])
    tables = [str(r[0]) for r in source.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND name NOT LIKE 'lines_fts%' ORDER BY rowid")]
    rows = {t: source.execute(f"SELECT * FROM {t}").fetchall() for t in tables}  # noqa: S608
    source.close()
    remove_index(scratch)
    init = sqlite3.connect(scratch)
    init.execute(f"PRAGMA page_size = {page_size}")  # before the first page is written
    init.close()
    backend = SqliteBackend(str(scratch))
    try:
        backend.create_schema()
        conn = backend.writer
        fresh = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in tables if t not in fresh]
        if missing:
            raise RuntimeError(f"the backend's schema has no table {missing}: the storage floor drifted")
        for t in tables:  # create_schema may write rows of its own (meta): the floor starts empty
            conn.execute(f"DELETE FROM {t}")  # noqa: S608
        t0, c0 = time.perf_counter(), time.process_time()
        per_table: dict[str, float] = {}
        conn.execute("BEGIN IMMEDIATE")
        for t in tables:
            if rows[t]:
                marks = ", ".join("?" * len(rows[t][0]))
                c1 = time.process_time()
                conn.executemany(f"INSERT INTO {t} VALUES ({marks})", rows[t])  # noqa: S608
                per_table[t] = time.process_time() - c1
        c1 = time.process_time()
        conn.execute("COMMIT")
        per_table["COMMIT"] = time.process_time() - c1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        backend.close()
    counts = {t: len(r) for t, r in rows.items() if r}
    del rows
    out = {"storage_floor_s": wall, "storage_floor_cpu_s": cpu, "storage_floor_rows": counts,
           "storage_floor_table_cpu_s": per_table,
           "storage_floor_db_bytes": sum(os.path.getsize(p) for p in scratch.parent.glob(scratch.name + "*"))}
    remove_index(scratch)
    return out


def worker_rebuild(root: Path, _unused: int) -> dict[str, Any]:
    """A settings change (``field_separators`` edited in ``grounding.toml``): the next open
    rebuilds every derived table from the log (``derived.rebuild``). Measured in this child
    process on a copy of the cold index (SQLite's backup API): wall and CPU seconds of the
    open, and its peak RSS (VmHWM, reset after the copy through ``/proc/self/clear_refs``).
    """
    import sqlite3

    from grounding_core.config import load_config
    from grounding_core.index import ParseSettings
    from grounding_core.store import Store

    config = load_config(root)
    copy = root / ".grounding" / "rebuild.sqlite"
    remove_index(copy)
    source = sqlite3.connect(f"file:{root / '.grounding' / 'index.sqlite'}?mode=ro", uri=True)
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.close()
    with open("/proc/self/clear_refs", "w") as handle:  # VmHWM from here on
        handle.write("5")
    separators = (*config.field_separators, "=")  # one more separator: every derived row changes
    t0, c0 = time.perf_counter(), time.process_time()
    store = Store(str(copy), ParseSettings(separators, config.meta_fields, config.subject_fields,
                                           config.image_language))
    out = {"rebuild_s": time.perf_counter() - t0, "rebuild_cpu_s": time.process_time() - c0,
           "rebuild_rss": _proc_status(os.getpid())}
    store.close()
    remove_index(copy)
    return out


def worker_storage(root: Path, _unused: int) -> dict[str, Any]:
    """The storage floor (:func:`storage_floor`) of the index the index worker just built."""
    return storage_floor(root / ".grounding" / "index.sqlite", root / ".grounding" / "storage-floor.sqlite")


# --------------------------------------------------------------------------- the draft


BAD_VALUE_CHARS = set('"[]^*_`<>|\\&~#{}。！？!?\t')


def _usable(field: str, value: str, quote: str) -> bool:
    if not value or len(value) > 80 or len(field) > 40 or not field[0].isalnum():
        return False
    if any(c in BAD_VALUE_CHARS for c in field + value) or '"' in quote:
        return False
    return ". " not in value and not value.endswith(".") and ":" not in field


def build_draft(state: Any, today: dt.date, seed: int = 7) -> tuple[str, list[str], dict[str, Any]]:
    """A Markdown draft with 100 citations to field lines of the index (SPEC §5.1).

    About 95 cite active lines (valid unless a conflict or a value check says otherwise) and
    up to 5 cite superseded versions (stale). Returns the text, the 100 quoted lines (for
    ``rg``) and facts the workers need (cited doc ids, the edit-counter line).
    """
    rng = random.Random(seed)
    active = list(state.iter_active(today))
    rng.shuffle(active)
    picks: list[tuple[Any, int, Any]] = []

    def pick_from(record: Any) -> tuple[Any, int, Any] | None:
        doc = state.document(record)
        lines = [(n, fl) for n, fl in sorted(doc.field_lines.items())
                 if not state.is_meta_field(fl.field) and not doc.is_front_matter_line(n)
                 and _usable(fl.field, fl.value, doc.lines[n - 1])]
        if not lines:
            return None
        number, fl = rng.choice(lines)
        return record, number, fl

    stale: list[tuple[Any, int, Any]] = []
    for doc_id in sorted(state.doc_ids()):
        versions = state.versions(doc_id)
        if len(versions) > 1 and len(stale) < 5:
            old = versions[min(versions)]
            got = pick_from(old)
            if got is not None:
                stale.append(got)
    wanted = DRAFT_CITATIONS - len(stale)
    for record in active:  # one line per document first, then more (tiny corpora)
        if len(picks) >= wanted:
            break
        got = pick_from(record)
        if got is not None:
            picks.append(got)
    for _ in range(4):
        for record in active:
            if len(picks) >= wanted:
                break
            got = pick_from(record)
            if got is not None and (got[0].doc_id, got[1]) not in {(r.doc_id, n) for r, n, _ in picks}:
                picks.append(got)
    picks += stale
    if not picks:
        raise SystemExit("bench: the corpus has no usable field lines")
    cited_fields = sorted({fl.field for _, _, fl in picks})
    required = rng.sample(cited_fields, min(3, len(cited_fields)))
    units = sorted({f"{r.doc_id}@{r.version}" for r, _, _ in picks})
    head = [
        "---",
        "question: Benchmark draft citing one hundred evidence lines",
        "fields: " + json.dumps(required, ensure_ascii=False),
        "context: {units: " + json.dumps(units, ensure_ascii=False) + "}",
        "---",
        "# Benchmark answer",
        "",
        EDIT_COUNTER_TEXT,
        f"Also note {picks[0][2].value} without a footnote.",
        "",
    ]
    counter_line = head.index(EDIT_COUNTER_TEXT)
    body: list[str] = []
    notes: list[str] = []
    quotes: list[str] = []
    for n, (record, number, fl) in enumerate(picks, 1):
        if any("\u4e00" <= c <= "\u9fff" for c in fl.field):
            body.append(f"{fl.field}是{fl.value}[^{n}]。")
        else:
            body.append(f"The {fl.field} is {fl.value}[^{n}].")
        quote = state.document(record).lines[number - 1]
        quotes.append(quote)
        notes.append(f'[^{n}]: {record.doc_id}@{record.version}:{number} sha256:{record.sha256[:12]}'
                     f' "{quote}"')
    text = "\n".join(head + body + [""] + notes) + "\n"
    facts = {
        "citations": len(picks),
        "stale": len(stale),
        "counter_line": counter_line,
        "cited": [[r.doc_id, r.version, r.path] for r, _, _ in picks],
        "keys": [[r.subject, fl.field] for r, _, fl in picks],
    }
    return text, quotes, facts


# ---------------------------------------------------------------------------- workers


def _imports() -> float:
    t0 = time.perf_counter()
    import grounding_core.drafts  # noqa: F401
    import grounding_core.verify  # noqa: F401
    import grounding_core.workspace  # noqa: F401

    return time.perf_counter() - t0


def worker_index(root: Path, iterations: int) -> dict[str, Any]:
    """Floor, cold index (usable for checks), FTS build, the draft, check_draft percentiles, rg."""
    import_s = _imports()
    from grounding_core.drafts import draft_kind, parse_draft
    from grounding_core.verify import check_draft
    from grounding_core.workspace import Workspace

    out: dict[str, Any] = {"imports_s": import_s}
    out["floor_s"], out["bytes"], out["floor_cpu_s"] = floor_seconds(root)
    out["files"] = len(evidence_files(root))
    out["parse_floor_cpu_s"] = parse_floor_seconds(root)

    remove_index(root / ".grounding" / "index.sqlite")
    t0, c0 = time.perf_counter(), time.process_time()
    ws = Workspace.open(root)
    result = ws.scan()
    out["cold_s"] = time.perf_counter() - t0
    out["cold_cpu_s"] = time.process_time() - c0
    out["cold_rss"] = _proc_status(os.getpid())  # before anything else this worker does
    # in a child process: its rows in memory must not raise this worker's peak RSS (index_rss)
    out.update(run_worker("storage", root, 0, timeout=STORAGE_FLOOR_TIMEOUT))
    out.update(run_worker("rebuild", root, 0, timeout=STORAGE_FLOOR_TIMEOUT))
    t0, c0 = time.perf_counter(), time.process_time()
    ws.store.build_fts()
    out["fts_s"] = time.perf_counter() - t0
    out["fts_cpu_s"] = time.process_time() - c0
    out["db_bytes"] = sum(os.path.getsize(p) for p in (root / ".grounding").glob("index.sqlite*"))
    out["index_rss"] = _proc_status(os.getpid())
    state = result.snapshot
    today = ws.today()
    out["docs"] = state.stats(today).documents
    out["events"] = len(result.events)
    out["evidence_findings"] = sum(len(v) for v in result.evidence.values())

    text, quotes, facts = build_draft(state, today)
    ws.config.root.joinpath("answers").mkdir(exist_ok=True)
    draft_path = root / "answers" / "bench.md"
    draft_path.write_text(text, encoding="utf-8")
    (root / "quotes.txt").write_text("\n".join(quotes) + "\n", encoding="utf-8")
    (root / "draft-facts.json").write_text(json.dumps(facts, ensure_ascii=False), encoding="utf-8")
    out.update({k: v for k, v in facts.items() if k != "cited"})

    rel = "answers/bench.md"
    draft = parse_draft(text, draft_kind(rel))

    def check() -> Any:
        return check_draft(draft, state, ws.config, today, rel, ws.read_text)

    t0 = time.perf_counter()
    report = check()
    out["first_check_cold_s"] = time.perf_counter() - t0
    out["status"] = report.status.value
    out["findings"] = _finding_counts(report)
    samples = []
    cpu_samples = []
    for _ in range(iterations):
        t0, c0 = time.perf_counter(), time.process_time()
        check()
        samples.append(time.perf_counter() - t0)
        cpu_samples.append(time.process_time() - c0)
    out["check_p50_s"] = statistics.median(samples)
    out["check_p95_s"] = pct(samples, 95)
    out["check_cpu_p50_s"] = statistics.median(cpu_samples)
    out["check_cpu_p95_s"] = pct(cpu_samples, 95)
    parse_samples = []
    for _ in range(max(3, iterations // 3)):
        t0 = time.perf_counter()
        parse_draft(text, draft_kind(rel))
        parse_samples.append(time.perf_counter() - t0)
    out["parse_p50_s"] = statistics.median(parse_samples)

    rg_phase(root, out)
    ws.store.close()
    return out


def rg_phase(root: Path, out: dict[str, Any]) -> None:
    """``rg -F -x -c -f quotes.txt evidence/`` (median of 5 runs): wall and CPU time."""
    rg = shutil.which("rg")
    if rg is None:
        out["rg_s"] = None
        return
    cmd = [rg, "--no-ignore", "--hidden", "--no-config", "-F", "-x", "-c",
           "-f", str(root / "quotes.txt"), str(root / "evidence")]
    rg_samples = []
    rg_cpu = []
    for _ in range(5):
        wall, cpu, stdout = _run_measured(cmd)
        rg_samples.append(wall)
        rg_cpu.append(cpu)
    out["rg_s"] = statistics.median(rg_samples)
    out["rg_cpu_s"] = statistics.median(rg_cpu)
    out["rg_matching_files"] = len(stdout.splitlines())


def checked_rows_floor(db: Path, state: Any, today: dt.date, repeats: int = 3) -> dict[str, Any]:
    """The first check's physical floor: the rows the conflict gate must read (SPEC §7.4: every
    active line of each checked key), read the plainest way SQLite can, on a fresh connection
    (a cold page cache, like the first check's): one ``SELECT`` of the compared value per
    checked key, iterated in Python, no grouping, nothing built per row. The keys are the
    ones the first check just summarised (its snapshot's summary cache). Median of
    ``repeats`` fresh connections; ``floor_rows`` must equal the check's
    ``same_key_sources_checked``.
    """
    import sqlite3

    keys = sorted({entry[0] for entry in state.caches.summaries}, key=repr)
    active, active_params = state._active(today)
    sql = ("SELECT f.norm FROM field_lines AS f JOIN versions AS v ON v.content_id = f.content_id"
           f" WHERE {state.KEY_WHERE} AND {active}")
    walls, cpus, rows = [], [], 0
    for _ in range(repeats):
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            rows = 0
            for key in keys:
                stored = state._key(key)
                if stored is None:
                    continue
                for _row in conn.execute(sql, (*stored, *active_params)):
                    rows += 1
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        finally:
            conn.close()
    return {"floor_read_s": statistics.median(walls), "floor_read_cpu_s": statistics.median(cpus),
            "floor_rows": rows, "floor_keys": len(keys)}


def _run_measured(cmd: list[str]) -> tuple[float, float, bytes]:
    """Run ``cmd``; its wall time, its CPU time (user + system, from ``wait4``) and stdout."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    stdout = child.stdout.read()
    _pid, _status, usage = os.wait4(child.pid, 0)
    child.stdout.close()
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, stdout


def worker_warm(root: Path, edits: int) -> dict[str, Any]:
    """Warm start (new process, nothing changed), the first check after it, one-file changes
    re-indexed (watcher paths) + re-checked, and the 1 MB uncited-claim scan.
    """
    import_s = _imports()
    from grounding_core.drafts import draft_kind, parse_draft
    from grounding_core.scan import SETTLE_NS
    from grounding_core.text import normalize
    from grounding_core.verify import check_draft
    from grounding_core.workspace import Workspace

    out: dict[str, Any] = {"imports_s": import_s}
    # warm start and first check in a process set up as `grounding check` sets its own (the
    # code measured decides: grounding_core.collector where it exists); the later rows, which
    # model the editor's re-checks, run with the interpreter's defaults again
    collector_defaults = gc.get_threshold()
    try:
        from grounding_core.collector import process_start
    except ImportError:
        out["collector"] = "interpreter defaults"
    else:
        process_start()
        out["collector"] = f"grounding_core.collector (freeze, young threshold {gc.get_threshold()[0]})"
    t0, c0 = time.perf_counter(), time.process_time()
    ws = Workspace.open(root)
    result = ws.scan()
    out["warm_s"] = time.perf_counter() - t0
    out["warm_cpu_s"] = time.process_time() - c0
    out["warm_changed"] = len(result.changed)
    state = result.snapshot
    today = ws.today()
    rel = "answers/bench.md"
    draft = parse_draft((root / rel).read_text(encoding="utf-8"), draft_kind(rel))
    t0, c0 = time.perf_counter(), time.process_time()
    first = check_draft(draft, state, ws.config, today, rel, ws.read_text)
    out["warm_first_check_s"] = time.perf_counter() - t0
    out["warm_first_check_cpu_s"] = time.process_time() - c0
    out["first_check_rows"] = first.same_key_sources_checked
    out.update(checked_rows_floor(root / ".grounding" / "index.sqlite", state, today))
    gc.unfreeze()
    gc.set_threshold(*collector_defaults)

    facts = json.loads((root / "draft-facts.json").read_text(encoding="utf-8"))
    cited = facts["cited"][0][2]
    target = ws.config.evidence_root / cited
    original = target.read_bytes()
    samples = []
    cpu_samples = []
    scan_samples = []
    full_samples = []
    saw_change = True
    before = _finding_set(check_draft(draft, state, ws.config, today, rel, ws.read_text))
    try:
        for i in range(edits):
            target.write_bytes(original + f"- Bench edit {i}: value {i}\n".encode())
            time.sleep(SETTLE_NS / 1e9 + 0.02)  # the settle window (deliberate latency, not work)
            t0, c0 = time.perf_counter(), time.process_time()
            result = ws.scan(paths=[cited])
            t1 = time.perf_counter()
            report = check_draft(draft, result.snapshot, ws.config, today, rel, ws.read_text)
            t2 = time.perf_counter()
            cpu_samples.append(time.process_time() - c0)
            scan_samples.append(t1 - t0)
            samples.append(t2 - t0)
            after = _finding_set(report)  # hash-mismatch, or a stale-citation naming v(n+1)
            saw_change &= after != before and len(result.changed) == 1
            before = after
            t0 = time.perf_counter()
            ws.scan()  # a full walk finds nothing more to do
            full_samples.append(time.perf_counter() - t0)
    finally:
        target.write_bytes(original)
        time.sleep(SETTLE_NS / 1e9 + 0.02)
        ws.scan()
    out["one_file_p50_s"] = statistics.median(samples)
    out["one_file_cpu_p50_s"] = statistics.median(cpu_samples)
    out["one_file_scan_p50_s"] = statistics.median(scan_samples)
    out["one_file_full_walk_p50_s"] = statistics.median(full_samples)
    out["one_file_saw_change"] = saw_change

    # GR110 on hostile sizes (issue 13 item 11): a one-megabyte value in the index and a
    # one-megabyte sentence, one that holds no known term and one that holds the value
    value = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(333_334))  # 1 MB of UTF-8
    long_path = ws.config.evidence_root / "bench-long-value.md"
    separator = ws.config.field_separators[0]  # the workspace's own (Debian's is ":")
    long_path.write_text(f"- Bench long value{separator}{value}\n", encoding="utf-8")
    try:
        time.sleep(SETTLE_NS / 1e9 + 0.02)
        snapshot = ws.scan(paths=["bench-long-value.md"]).snapshot
        miss = normalize("".join(chr(0x4E00 + (i * 104729) % 20000) for i in range(333_334)))
        hit = normalize("这句话说的是" + value + "。")
        t0, c0 = time.perf_counter(), time.process_time()
        assert snapshot.known_term_in(miss, today) is None
        found = snapshot.known_term_in(hit, today)
        out["uncited_s"] = time.perf_counter() - t0
        out["uncited_cpu_s"] = time.process_time() - c0
        out["uncited_found"] = found == normalize(value)
    finally:
        long_path.unlink()
        ws.scan(paths=["bench-long-value.md"])
    # the closed question grammar (SPEC §13): the names a question holds, by indexed anchors
    questions = [f"{subject or ''}的{field}是什么？" for subject, field in
                 ((s, f) for s, f in facts.get("keys", [])[:20])] or ["营业时间是什么？"]
    samples = []
    for question in questions * 3:
        text = unicodedata.normalize("NFKC", question)
        t0 = time.perf_counter()
        state.vocabulary_in(text, today)
        samples.append(time.perf_counter() - t0)
    out["question_p50_s"] = statistics.median(samples)
    hostile = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(333_334))  # 1 MB of UTF-8
    t0 = time.perf_counter()
    state.vocabulary_in(hostile, today)
    out["question_1mb_s"] = time.perf_counter() - t0
    out["warm_rss"] = _proc_status(os.getpid())
    ws.store.close()
    return out


def cli_phase(root: Path, runs: int, out: dict[str, Any]) -> None:
    """``grounding check answers/bench.md`` as a user runs it (warm index): whole-process wall
    time (median of ``runs``) and peak RSS (``ru_maxrss`` of the child, largest run).
    """
    cmd = [sys.executable, "-m", "grounding.cli", "check", "--root", str(root), str(root / "answers" / "bench.md")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if os.environ.get("GROUNDING_BENCH_CODE"):
        env["PYTHONPATH"] = os.environ["GROUNDING_BENCH_CODE"] + os.pathsep + env["PYTHONPATH"]
    # an installed package has its bytecode compiled (pip does it); this checkout may not, and
    # PYTHONDONTWRITEBYTECODE may be set: compile it once so imports read .pyc files
    compile_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code_root = os.environ.get("GROUNDING_BENCH_CODE") or str(REPO)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(os.path.join(code_root, p) for p in (
        "grounding", "grounding_core"))], env=compile_env, capture_output=True, check=False)
    walls = []
    cpus = []
    rss = 0
    for _ in range(runs + 1):  # the first run settles the index after the warm worker's edits
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=str(root), env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        _pid, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - t0)
        cpus.append(usage.ru_utime + usage.ru_stime)
        rss = max(rss, usage.ru_maxrss * 1024)
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            raise RuntimeError(f"grounding check exited {code}: {child.stderr.read().decode()[-2000:]}")
        child.stderr.close()
    out["cli_s"] = statistics.median(walls[1:])
    out["cli_cpu_s"] = statistics.median(cpus[1:])
    out["cli_rss"] = rss
    floor_cmd = [sys.executable, str(BENCH / "python_floor.py"), str(root / "evidence"),
                 str(root / "answers" / "bench.md")]
    floor_walls, floor_cpus = [], []
    for _ in range(runs + 1):  # the same count and warm-up as the check's runs
        wall, cpu, _stdout = _run_measured(floor_cmd)
        floor_walls.append(wall)
        floor_cpus.append(cpu)
    out["python_floor_s"] = statistics.median(floor_walls[1:])
    out["python_floor_cpu_s"] = statistics.median(floor_cpus[1:])
    startup = _startup_script(cmd, root, env)
    start_walls, start_cpus = [], []
    for _ in range(runs + 1):
        wall, cpu, _stdout = _run_measured([sys.executable, str(startup)])
        start_walls.append(wall)
        start_cpus.append(cpu)
    startup.unlink()
    out["startup_s"] = statistics.median(start_walls[1:])
    out["startup_cpu_s"] = statistics.median(start_cpus[1:])


def _startup_script(check: list[str], root: Path, env: dict[str, str]) -> Path:
    """A script that imports, in the same order, every module the ``check`` process imported
    (``python -X importtime``, its stderr) and ends like it (``os._exit``): what the whole
    process costs before it does any work, with the same interpreter, path and bytecode.
    """
    done = subprocess.run([check[0], "-X", "importtime", *check[1:]], cwd=str(root), env=env,
                          capture_output=True, text=True, check=False)
    names = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and " " not in name and "__main__" not in name:  # (not the header line)
                names.append(name)
    if not names:
        raise RuntimeError(f"no import times from the check process: {done.stderr[-2000:]}")
    script = root / ".grounding" / "bench-startup.py"
    script.write_text(f"import importlib, os, sys\nsys.path[:0] = {env['PYTHONPATH'].split(os.pathsep)!r}\n"
                      f"for name in {names!r}:\n    try:\n        importlib.import_module(name)\n"
                      "    except ImportError:\n        pass  # tried and failed in the check too (_winapi)\n"
                      "os._exit(0)\n",
                      encoding="utf-8")
    probe = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    if probe.returncode != 0:  # every import must work, or the row would time a failure
        raise RuntimeError(f"the start-up script failed: {probe.stderr[-2000:]}")
    return script


def _finding_set(report: Any) -> set[tuple[str, str]]:
    return {(f.name, f.message) for f in report.findings}


def _finding_counts(report: Any) -> dict[str, int]:  # noqa: D103
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.name] = counts.get(f.name, 0) + 1
    return counts


def run_worker(phase: str, root: Path, arg: int, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", phase, str(root), str(arg)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {phase} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# ------------------------------------------------------------------- language server


async def lsp_phase(root: Path, changes: int, edits: int, index_timeout: float,
                    out: dict[str, Any], from_index: str | None = None) -> None:
    """Drive ``python -m server`` over stdio like an editor; see the module docstring.

    The server indexes into its own database (``initializationOptions``, named after this
    process so two runs on one corpus never share it), so this measures its cold index.
    ``from_index`` (``--server-from-index [DB]``): the database starts as a copy of ``DB`` or
    (``""``) of the corpus's ``.grounding/index.sqlite`` (what the ``index`` worker built), so
    the first row measures a warm start (a rebuild, if another version of the code wrote it)
    and the others run without a background full-text build. If the draft's first
    diagnostics do not arrive within ``index_timeout`` seconds, the RSS and the evidence files
    published so far are recorded, the server is killed, and the other server rows stay empty.
    The server's CPU time (user + system, ``/proc/<pid>/stat``) is recorded after each phase.
    """
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    out["evidence_publishes"] = 0
    server_index = f".grounding/server-bench-{os.getpid()}.sqlite"
    remove_index(root / server_index)
    if from_index is not None:
        import sqlite3

        source_path = Path(from_index) if from_index else root / ".grounding" / "index.sqlite"
        source = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)
        target = sqlite3.connect(root / server_index)
        with source, target:
            source.backup(target)  # a consistent copy, even while another process writes it
        source.close()
        target.close()
        out["lsp_from_index"] = str(source_path)
    draft_path = root / "answers" / "bench.md"
    draft_uri = draft_path.as_uri()
    text = draft_path.read_text(encoding="utf-8")
    facts = json.loads((root / "draft-facts.json").read_text(encoding="utf-8"))
    evidence_target = root / "evidence" / facts["cited"][min(1, len(facts["cited"]) - 1)][2]

    client = LanguageClient("grounding-bench", "1")
    published: asyncio.Queue[tuple[float, types.PublishDiagnosticsParams]] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        if params.uri == draft_uri:
            published.put_nowait((time.perf_counter(), params))
        else:
            out["evidence_publishes"] += 1

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params: types.ShowMessageParams) -> None:
        out.setdefault("messages", []).append(params.message)

    @client.feature("grounding/status")
    def on_status(params: Any) -> None:
        """The server's status-bar notification; not measured."""

    index_passes: list[float] = []

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        if params.message.startswith("Grounding: index pass"):
            index_passes.append(time.perf_counter())

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                     os.environ.get("PYTHONPATH")]))}
    await client.start_io(sys.executable, "-m", "server", cwd=str(REPO), env=env)
    server = client._server
    assert server is not None and server.stderr is not None
    stderr_tail: list[bytes] = []

    async def drain() -> None:
        assert server.stderr is not None
        while line := await server.stderr.readline():
            stderr_tail.append(line)
            del stderr_tail[:-50]

    drainer = asyncio.create_task(drain())

    async def next_publish(timeout: float, want: Any = None) -> tuple[float, Any]:
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no matching publishDiagnostics within {timeout:.0f} s;"
                                   " server stderr:\n"
                                   + b"".join(stderr_tail).decode(errors="replace")[-2000:])
            try:
                stamp, params = await asyncio.wait_for(published.get(), left)
            except TimeoutError:
                continue  # reported above, with the server's stderr
            if want is None or want(params):
                return stamp, params

    def findings(params: Any) -> list[tuple[str, str]]:
        """(name, message) of each diagnostic: what an edit to the evidence must change."""
        return sorted(((d.data or {}).get("name", "") if isinstance(d.data, dict) else "",
                       d.message) for d in params.diagnostics)

    clean_exit = False
    try:
        t0 = time.perf_counter()
        await client.initialize_async(types.InitializeParams(
            process_id=os.getpid(),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options={"grounding": {"index": server_index}},
            capabilities=types.ClientCapabilities(
                text_document=types.TextDocumentClientCapabilities(
                    synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
                    publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                        related_information=True, version_support=True),
                ),
            ),
        ))
        client.initialized(types.InitializedParams())
        version = 1
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=draft_uri, language_id="markdown", version=version, text=text)))
        hover = _hover_params(draft_uri, text)
        hovering = _HoverLoop(client, hover)
        try:
            t_first, last = await next_publish(index_timeout)
        except TimeoutError:
            out["lsp_timeout_s"] = index_timeout
            out["rss_at_timeout"] = _proc_status(server.pid)
            await hovering.stop()
            raise
        out["lsp_index_s"] = t_first - t0
        out["lsp_cpu_index_s"] = _proc_cpu(server.pid)

        async def started() -> None:
            """Hovers go on while the server starts: until :data:`START_TAIL_S` after its first
            index pass (the startup walk, or the cold index) was logged, so the row also covers
            the hovers sent beside the walk and the first evidence refresh (which follows the
            pass), not only those before the first diagnostics; then the row is reported. The
            didChange samples below start at the first diagnostics, as before, so they run
            beside the same start-up work (and beside these hovers).
            """
            try:
                while not index_passes or time.perf_counter() < index_passes[0] + START_TAIL_S:
                    await asyncio.sleep(0.05)
            finally:
                await hovering.stop()
                out["hover_index_window_s"] = time.perf_counter() - t0
                if index_passes:
                    out["first_pass_s"] = index_passes[0] - t0
                hovering.report("hover_index", out)

        starting = asyncio.create_task(started())
        out["lsp_first_names"] = sorted({name for name, _ in findings(last)})
        out["rss_after_index"] = _proc_status(server.pid)

        # didChange: edit the counter in one uncited sentence, wait for that version's report
        line = facts["counter_line"]
        col = EDIT_COUNTER_TEXT.index("0000")
        change_samples = []
        change_sent = []
        out["evidence_publishes_before_change"] = out["evidence_publishes"]
        for i in range(changes):
            version += 1
            sent = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=draft_uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(line, col), types.Position(line, col + 4)),
                    text=f"{(i + 1) % 10000:04d}")]))
            stamp, last = await next_publish(60, lambda p, v=version: p.version == v)
            change_samples.append(stamp - sent)
            change_sent.append(sent - t0)
        await asyncio.wait_for(starting, index_timeout)
        out["change_p50_s"] = statistics.median(change_samples)
        out["change_n"] = len(change_samples)
        out["change_timeline"] = [(round(t, 3), round(s, 4)) for t, s in zip(change_sent, change_samples, strict=True)]
        out["evidence_publishes_after_change"] = out["evidence_publishes"]
        out["change_p95_s"] = pct(change_samples, 95)
        out["lsp_cpu_change_s"] = _proc_cpu(server.pid)

        # didSave: checked at once (no debounce)
        save_samples = []
        for _ in range(changes):
            sent = time.perf_counter()
            client.text_document_did_save(types.DidSaveTextDocumentParams(
                types.TextDocumentIdentifier(uri=draft_uri)))
            stamp, last = await next_publish(60)
            save_samples.append(stamp - sent)
        out["save_p50_s"] = statistics.median(save_samples)
        out["save_p95_s"] = pct(save_samples, 95)
        out["lsp_cpu_save_s"] = _proc_cpu(server.pid)

        # an evidence file cited by the draft is edited on disk, then restored: each write
        # must change the draft's findings (hash-mismatch or a newer stale-citation)
        original = evidence_target.read_bytes()
        edit_samples = []
        await asyncio.sleep(0.5)  # let the watcher settle after start-up
        try:
            for i in range(edits):
                for content in (original + f"- Bench edit {i}: value {i}\n".encode(), original):
                    before = findings(last)
                    sent = time.perf_counter()
                    evidence_target.write_bytes(content)
                    stamp, last = await next_publish(60, lambda p, b=before: findings(p) != b)
                    edit_samples.append(stamp - sent)
        finally:
            evidence_target.write_bytes(original)
        out["edit_p50_s"] = statistics.median(edit_samples)
        out["edit_max_s"] = max(edit_samples)
        out["edit_samples_s"] = edit_samples
        out["lsp_cpu_edit_s"] = _proc_cpu(server.pid)

        await _hover_storm(client, root, hover, index_passes, out)
        out["rss_end"] = _proc_status(server.pid)
        out["lsp_cpu_storm_s"] = _proc_cpu(server.pid)

        await asyncio.wait_for(client.shutdown_async(None), 60)
        client.exit(None)
        clean_exit = True
    finally:
        if not clean_exit and server.returncode is None:
            server.kill()
        try:
            await asyncio.wait_for(server.wait(), 20)
        except TimeoutError:
            server.kill()
        drainer.cancel()
        await client.stop()
        remove_index(root / server_index)


def _hover_params(uri: str, text: str) -> Any:
    """A hover on the draft's first footnote definition (a citation: the full hover path)."""
    from lsprotocol import types

    line = next(n for n, row in enumerate(text.split("\n")) if row.startswith("[^1]: "))
    return types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri),
                             position=types.Position(line=line, character=8))


class _HoverLoop:
    """Hovers one position back to back (20 ms apart) until stopped; records the latencies
    and how many answers carried the citation's text (not "still indexing").
    """

    def __init__(self, client: Any, params: Any) -> None:
        self.samples: list[float] = []
        self.sent: list[float] = []
        self.answered = 0
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(client, params))

    async def _run(self, client: Any, params: Any) -> None:
        while not self._stop.is_set():
            sent = time.perf_counter()
            result = await asyncio.wait_for(client.text_document_hover_async(params), 120)
            self.samples.append(time.perf_counter() - sent)
            self.sent.append(sent)
            value = getattr(getattr(result, "contents", None), "value", "")
            self.answered += "still indexing" not in value and bool(value)
            try:
                await asyncio.wait_for(self._stop.wait(), 0.02)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        self._stop.set()
        try:
            await asyncio.wait_for(self._task, 130)
        except TimeoutError:
            self._task.cancel()

    def report(self, key: str, out: dict[str, Any]) -> None:
        if self.samples:
            out[f"{key}_p95_s"] = pct(self.samples, 95)
            out[f"{key}_n"] = len(self.samples)
            out[f"{key}_answered"] = self.answered
            out[f"{key}_timeline"] = [(round(t - self.sent[0], 3), round(s, 4))  # (sent at, latency) s
                                      for t, s in zip(self.sent, self.samples, strict=True)]


async def _hover_storm(client: Any, root: Path, hover: Any, index_passes: list[float],
                       out: dict[str, Any]) -> None:
    """Rewrite up to :data:`STORM_FILES` evidence files at once (a line appended), hover until
    the server's re-index settles (no index pass for 1.5 s), then restore them.
    """
    paths = [Path(p) for p in evidence_files(root)][:STORM_FILES]
    originals = {p: p.read_bytes() for p in paths}
    await asyncio.sleep(0.5)  # the previous edits' passes are over
    hovering = _HoverLoop(client, hover)
    started = time.perf_counter()
    try:
        for path, data in originals.items():
            path.write_bytes(data + b"\n- Bench storm: changed\n")

        async def settled() -> None:
            while True:
                passes = [t for t in index_passes if t >= started]
                if passes and time.perf_counter() - passes[-1] > 1.5:
                    return
                await asyncio.sleep(0.05)

        out["storm_files"] = len(paths)
        try:
            await asyncio.wait_for(settled(), STORM_TIMEOUT)
        except TimeoutError:  # recorded, so the other rows of the corpus survive
            out["storm_timeout_s"] = STORM_TIMEOUT
        out["storm_passes"] = len([t for t in index_passes if t >= started])
        if out["storm_passes"]:
            out["storm_settle_s"] = max(t for t in index_passes if t >= started) - started
    finally:
        await hovering.stop()
        for path, data in originals.items():
            path.write_bytes(data)
    hovering.report("hover_storm", out)
    restored = time.perf_counter()

    async def restored_pass() -> None:
        while not [t for t in index_passes if t >= restored]:
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(restored_pass(), STORM_TIMEOUT)
    except TimeoutError:
        out["storm_restore_timeout_s"] = STORM_TIMEOUT


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_status(pid: int) -> dict[str, int]:
    """VmHWM / VmRSS of a process, in bytes."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0]) * 1024
    return values


# ----------------------------------------------------------------------------- table


def mark(ok: bool | None) -> str:
    return "" if ok is None else (" ok" if ok else " MISS")


def cells(r: dict[str, Any], corpus: corpora.Corpus) -> dict[str, str]:
    """Format one corpus's results; a missing result prints as 'error'."""
    c: dict[str, str] = {}

    def get(*keys: str) -> Any:
        for k in keys:
            if r.get(k) is None:
                raise KeyError(k)
        return [r[k] for k in keys]

    def put(key: str, fn: Any, fallback: Any = None) -> None:
        try:
            c[key] = fn()
        except KeyError:
            try:
                c[key] = fallback() if fallback else ""
            except KeyError:
                c[key] = ""
            c[key] = c[key] or ("error" if r.get("error") else
                                ("n/a (no rg)" if key == "rg" and "rg_s" in r and r["rg_s"] is None else "n/a"))

    def cpu(key: str) -> str:
        """The CPU time next to a wall time, when the worker measured it."""
        return f" [cpu {fmt_s(r[key])}]" if r.get(key) is not None else ""

    put("size", lambda: f"{get('files')[0]} / {fmt_mb(get('bytes')[0])}")
    put("floor", lambda: fmt_s(get("floor_s")[0]) + cpu("floor_cpu_s"))

    def cli() -> str:
        ours, theirs = get("cli_s", "rg_s")
        ratio = ours / theirs
        goal = corpus.files >= 10_000 or "debian" in corpus.name
        cpu_ratio = (f" [cpu {fmt_s(r['cli_cpu_s'])} vs {fmt_s(r['rg_cpu_s'])}]"
                     if r.get("cli_cpu_s") is not None and r.get("rg_cpu_s") is not None else "")
        return f"{fmt_s(ours)} vs {fmt_s(theirs)} ({ratio:.1f}x rg){mark(ratio <= 1) if goal else ''}{cpu_ratio}"

    put("cli", cli)

    def python_floor() -> str:
        floor, ours = get("python_floor_s", "cli_s")
        theirs = f", rg {r['rg_s'] / floor:.1f}x" if r.get("rg_s") else ""
        return (fmt_s(floor) + cpu("python_floor_cpu_s")
                + f"; the check is {ours / floor:.1f}x it{theirs}")

    put("python_floor", python_floor)

    def startup() -> str:
        start, ours, rg = get("startup_s", "cli_s", "rg_s")
        return (fmt_s(start) + cpu("startup_cpu_s") + f"; {start / rg:.2f}x rg; the check's work after it"
                f" {fmt_s(ours - start)} = {(ours - start) / rg:.2f}x rg")

    put("startup", startup)
    put("cli_rss", lambda: f"{get('cli_rss')[0] / 1e6:.0f} MB" + mark(get("cli_rss")[0] <= 150e6))
    put("one_file", lambda: (fmt_s(get("one_file_p50_s")[0]) + mark(get("one_file_p50_s")[0] <= 0.02)
                             + f" (scan {fmt_s(get('one_file_scan_p50_s')[0])})" + cpu("one_file_cpu_p50_s")))
    put("warm", lambda: fmt_s(get("warm_s")[0]) + mark(get("warm_s")[0] <= 0.5) + cpu("warm_cpu_s"))

    def cold() -> str:
        cold_s, floor_s = get("cold_s", "floor_s")
        ratio = cold_s / floor_s
        return f"{fmt_s(cold_s)} ({ratio:.0f}x){mark(ratio <= 10)}" + (
            f" [cpu {fmt_s(r['cold_cpu_s'])}: {r['cold_cpu_s'] / r['floor_cpu_s']:.0f}x the floor's cpu"
            + (f", {r['cold_cpu_s'] / r['parse_floor_cpu_s']:.1f}x the parse floor's"
               if r.get("parse_floor_cpu_s") else "")
            + "]" if r.get("cold_cpu_s") and r.get("floor_cpu_s") else "")

    put("cold", cold)

    def storage() -> str:
        wall, cpu_s, cold_cpu, parse_cpu = get("storage_floor_s", "storage_floor_cpu_s", "cold_cpu_s",
                                               "parse_floor_cpu_s")
        rows = sum(r.get("storage_floor_rows", {}).values())
        ratio = cold_cpu / (parse_cpu + cpu_s)
        return (f"{fmt_s(wall)} [cpu {fmt_s(cpu_s)}] ({rows:,} rows); cold index cpu {fmt_s(cold_cpu)}"
                f" = {ratio:.2f}x parse {fmt_s(parse_cpu)} + storage {fmt_s(cpu_s)}")

    put("storage_floor", storage)
    put("cold_rss", lambda: f"{get('cold_rss')[0]['VmHWM'] / 1e6:.0f} MB")
    put("rebuild", lambda: (f"{fmt_s(get('rebuild_s')[0])} / {get('rebuild_rss')[0]['VmHWM'] / 1e6:.0f} MB"
                            + cpu("rebuild_cpu_s")))
    put("fts", lambda: fmt_s(get("fts_s")[0]) + cpu("fts_cpu_s"))
    put("first_check", lambda: (fmt_s(get("warm_first_check_s")[0]) + mark(get("warm_first_check_s")[0] <= 0.05)
                                + cpu("warm_first_check_cpu_s")))

    def first_floor() -> str:
        floor_s, first_s = get("floor_read_s", "warm_first_check_s")
        text = (f"{fmt_s(floor_s)}{cpu('floor_read_cpu_s')}: {get('floor_rows')[0]:,} rows of"
                f" {get('floor_keys')[0]} keys" + (f"; first check {first_s / floor_s:.1f}x" if floor_s > 0 else ""))
        if r.get("warm_first_check_cpu_s") and r.get("floor_read_cpu_s"):
            text += f" [cpu {r['warm_first_check_cpu_s'] / r['floor_read_cpu_s']:.1f}x]"
        if r.get("first_check_rows") is not None and r["first_check_rows"] != get("floor_rows")[0]:
            text += f" (the check read {r['first_check_rows']:,} rows)"
        return text

    put("first_check_floor", first_floor)
    put("check", lambda: (f"{fmt_s(get('check_p50_s')[0])} / {fmt_s(get('check_p95_s')[0])}"
                          + mark(get("check_p95_s")[0] <= 0.02)
                          + (f" [cpu {fmt_s(r['check_cpu_p50_s'])} / {fmt_s(r['check_cpu_p95_s'])}]"
                             if r.get("check_cpu_p95_s") is not None else "")))
    put("uncited", lambda: (fmt_s(get("uncited_s")[0]) + mark(get("uncited_s")[0] < 2 and bool(r.get("uncited_found")))
                            + cpu("uncited_cpu_s")))
    put("question", lambda: (f"{fmt_s(get('question_p50_s')[0])} / {fmt_s(get('question_1mb_s')[0])}"
                             + mark(get("question_p50_s")[0] <= 0.02 and get("question_1mb_s")[0] < 2)))

    def rg() -> str:
        ours, theirs = get("check_p50_s", "rg_s")
        ratio = ours / theirs
        return f"{fmt_s(ours)} vs {fmt_s(theirs)} ({ratio:.2f}x){mark(ratio <= 0.2)}"

    put("rg", rg)
    def timed_out() -> str:
        if r.get("lsp_skipped"):
            return f"skipped ({r['lsp_skipped']})"
        if r.get("lsp_timeout_s") is None:
            raise KeyError("lsp_timeout_s")
        return f"timeout (> {r['lsp_timeout_s']:.0f} s)"

    def lsp_index() -> str:
        if r.get("lsp_skipped"):
            return f"skipped ({r['lsp_skipped']})"
        if r.get("lsp_timeout_s") is not None:
            return (f"timeout (> {r['lsp_timeout_s']:.0f} s; {r.get('evidence_publishes', 0)}"
                    " evidence files published)")
        seconds = get("lsp_index_s")[0]
        return fmt_s(seconds) + (mark(seconds <= 5) if corpus.name.startswith("debian") else "")

    put("lsp_index", lsp_index)

    def rss() -> str:
        if r.get("lsp_skipped"):
            return f"skipped ({r['lsp_skipped']})"
        if r.get("rss_at_timeout"):
            return f">= {r['rss_at_timeout']['VmHWM'] / 1e6:.0f} MB (at the timeout)"
        hwm = get("rss_after_index")[0]["VmHWM"]
        end = (r.get("rss_end") or {}).get("VmHWM", hwm)
        big = corpus.bytes >= 40e6  # the target is stated at 155 MB; hold 40 MB and up to it too
        return f"{hwm / 1e6:.0f} / {end / 1e6:.0f} MB" + (mark(max(hwm, end) <= 300e6) if big else "")

    put("rss", rss)

    def hover_row(key: str, extra: str) -> Callable[[], str]:
        def cell() -> str:
            if r.get("lsp_skipped"):
                return f"skipped ({r['lsp_skipped']})"
            p95, n = get(f"{key}_p95_s", f"{key}_n")
            late = (f"; no index pass within {r['storm_timeout_s']:.0f} s" if key == "hover_storm"
                    and r.get("storm_timeout_s") else "")
            window = (f", {r['hover_index_window_s']:.1f} s" if key == "hover_index"
                      and r.get("hover_index_window_s") else "")
            return f"{fmt_s(p95)} over {n} ({r.get(extra, '?')}{late}{window}){mark(p95 <= 0.1)}"
        return cell

    put("hover_index", hover_row("hover_index", "hover_index_answered"), timed_out)
    put("hover_storm", hover_row("hover_storm", "storm_files"), timed_out)
    put("stdio_change", lambda: (f"{fmt_s(get('change_p50_s')[0])} / {fmt_s(get('change_p95_s')[0])}"
                                 + mark(get("change_p95_s")[0] <= DEBOUNCE_S + 0.05)), timed_out)
    put("stdio_save", lambda: f"{fmt_s(get('save_p50_s')[0])} / {fmt_s(get('save_p95_s')[0])}",
        timed_out)
    put("evidence_edit", lambda: (f"{fmt_s(get('edit_p50_s')[0])} / {fmt_s(get('edit_max_s')[0])}"
                                  + mark(get("edit_max_s")[0] <= 0.5)), timed_out)
    return c


def render_table(results: list[tuple[corpora.Corpus, dict[str, Any]]]) -> str:
    header = ["metric", "target"] + [c.name for c, _ in results]
    formatted = [cells(r, c) for c, r in results]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, label, target in ROWS:
        lines.append("| " + " | ".join([label, target or "-"] + [f[key] for f in formatted]) + " |")
    return "\n".join(lines)


def machine() -> dict[str, str]:
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = next(line for line in open("/proc/meminfo", encoding="ascii")
                   if line.startswith("MemTotal")).split()[1]
        mem_s = f"{int(mem) / 1e6:.1f} GB RAM"
    except (OSError, StopIteration):
        mem_s = "? RAM"
    import sqlite3

    rg = shutil.which("rg")
    rg_v = (subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
            if rg else "rg missing")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip() or "?"
    return {
        "machine": f"{cpu}, {os.cpu_count()} cores, {mem_s}",
        "os": platform.platform(),
        "python": f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {rg_v}",
        "commit": commit,
        "date": dt.datetime.now().astimezone().isoformat(timespec="minutes"),
    }


# ------------------------------------------------------------------- images (SPEC §12)


IMAGE_ROWS: list[tuple[str, str, str]] = [
    # (key, label, target)
    ("flat", "4-megapixel PNG, flat shapes (screenshot-like): measure p50 / max", "<= 200 ms"),
    ("photo", "4-megapixel PNG, photo-like (gradient + noise): measure p50 / max", "<= 200 ms"),
    ("decode", "of which PNG decoding, flat / photo-like (p50)", ""),
    ("first", "first measurement in a process (loads numpy, scikit-image)", ""),
    ("cold", "index 50 PNGs (400x300, 3 shapes each; --quick: 10): scan, images measured", ""),
    ("resave", "the same PNGs re-saved byte-identical: rescan, images measured", "0 measured"),
    ("check", "check a draft citing 6 region attributes (in-process, p50)", ""),
]
"""Rows of the image table: ``grounding_core.images.measure`` in this process (the first call,
which imports the libraries, is its own row); the PNGs are generated in memory."""


def image_pngs() -> dict[str, bytes]:
    """Two deterministic 2000x2000 PNGs: 25 flat shapes; the same with a gradient and noise."""
    import io

    import numpy as np
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (2000, 2000), "white")
    pen = ImageDraw.Draw(image)
    colours = [(230, 30, 30), (30, 80, 200), (20, 160, 40), (250, 200, 0), (128, 0, 128)]
    for i in range(5):
        for j in range(5):
            x, y = 100 + i * 380, 100 + j * 380
            shape = [pen.ellipse, pen.rectangle][(i * j) % 2]
            shape([x, y, x + 250, y + 250], fill=colours[(i + j) % 5])
    pixels = np.asarray(image).astype(np.float64)
    pixels -= np.linspace(0, 30, 2000)[:, None, None]
    pixels += np.random.default_rng(12).normal(0, 6, pixels.shape)
    photo = Image.fromarray(np.clip(pixels, 0, 255).round().astype(np.uint8), "RGB")
    out: dict[str, bytes] = {}
    for name, picture in (("flat", image), ("photo", photo)):
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        out[name] = buffer.getvalue()
    return out


def images_section(repeats: int) -> dict[str, Any]:
    """Time ``measure`` (and ``decode_png`` alone) on :func:`image_pngs`, ``repeats`` times each."""
    pngs = image_pngs()
    t0 = time.perf_counter()
    from grounding_core.images import decode_png, measure

    regions = {"flat": len(measure(pngs["flat"]).regions)}
    out: dict[str, Any] = {"first_s": time.perf_counter() - t0}
    for name, data in pngs.items():
        samples, decode = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            regions[name] = len(measure(data).regions)
            samples.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            decode_png(data)
            decode.append(time.perf_counter() - t0)
        out[f"{name}_p50_s"] = statistics.median(samples)
        out[f"{name}_max_s"] = max(samples)
        out[f"{name}_decode_p50_s"] = statistics.median(decode)
        out[f"{name}_bytes"] = len(data)
    out["regions"] = regions
    out.update(image_store_rows(10 if repeats < 10 else 50))
    return out


def image_store_rows(count: int = 50) -> dict[str, Any]:
    """The cache rule in the store (SPEC §12, docs/decisions.md): a cold scan of 50 generated
    PNGs measures each distinct content once; rewriting them with identical bytes re-reads and
    re-hashes them but measures none; then a check of a draft with 6 region citations.
    """
    import hashlib
    import io
    import os
    import tempfile
    from pathlib import Path

    from PIL import Image, ImageDraw

    from grounding_core.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix="grounding-bench-images-"))
    pngs: dict[str, bytes] = {}
    for i in range(count):
        image = Image.new("RGB", (400, 300), "white")
        pen = ImageDraw.Draw(image)
        pen.ellipse([20 + i, 20, 56 + i, 56], fill=(230, 30, 30))
        pen.rectangle([300, 24, 370, 94], fill=(30, 60, 220))
        pen.rectangle([20, 180, 380, 280], fill=(20, 170, 60))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        pngs[f"img{i:02d}.png"] = buffer.getvalue()
    (root / "evidence").mkdir()
    (root / "grounding.toml").write_text('index = ".grounding/index.sqlite"\n', encoding="utf-8")
    for name, data in pngs.items():
        (root / "evidence" / name).write_bytes(data)
    time.sleep(0.15)  # past the scan's settle window for fresh files
    ws = Workspace.open(root)
    try:
        t0 = time.perf_counter()
        cold = ws.scan()
        cold_s = time.perf_counter() - t0
        for name, data in pngs.items():
            path = root / "evidence" / name
            path.write_bytes(data)
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        time.sleep(0.15)
        t0 = time.perf_counter()
        again = ws.scan()
        resave_s = time.perf_counter() - t0
        sha = hashlib.sha256(pngs["img00.png"]).hexdigest()[:12]
        lines = ["---", "question: 面板", "fields: [颜色, 形状]", 'context: {units: ["img00@1"]}', "---",
                 "红色的圆形[^1][^2]，蓝色的正方形[^3][^4]，绿色的长方形[^5][^6]。", ""]
        quotes = [("r1", "颜色：红色"), ("r1", "形状：圆形"), ("r2", "颜色：蓝色"), ("r2", "形状：正方形"),
                  ("r3", "颜色：绿色"), ("r3", "形状：长方形")]
        for label, (region, quote) in enumerate(quotes, 1):
            lines.append(f'[^{label}]: img00@1#{region} sha256:{sha} "{quote}"')
        text = "\n".join(lines) + "\n"
        samples = []
        for _ in range(7):
            t0 = time.perf_counter()
            report = ws.check_text("answers/a.md", text)
            samples.append(time.perf_counter() - t0)
        return {"cold_s": cold_s, "cold_measured": cold.measured, "resave_s": resave_s,
                "resave_measured": again.measured, "resave_read": len(again.changed),
                "check_p50_s": statistics.median(samples), "check_status": report.status.value}
    finally:
        ws.store.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def render_images(r: dict[str, Any]) -> str:
    def cell(key: str) -> str:
        if "error" in r:
            return "error"
        if key in ("flat", "photo"):
            p50, top = r[f"{key}_p50_s"], r[f"{key}_max_s"]
            return f"{fmt_s(p50)} / {fmt_s(top)}{mark(p50 <= 0.2)} ({r[f'{key}_bytes'] / 1e3:,.0f} kB PNG)"
        if key == "decode":
            return f"{fmt_s(r['flat_decode_p50_s'])} / {fmt_s(r['photo_decode_p50_s'])}"
        if key == "cold":
            return f"{fmt_s(r['cold_s'])}, {r['cold_measured']} measured"
        if key == "resave":
            return (f"{fmt_s(r['resave_s'])}, {r['resave_read']} re-read, {r['resave_measured']} measured"
                    f"{mark(r['resave_measured'] == 0)}")
        if key == "check":
            return f"{fmt_s(r['check_p50_s'])} ({r['check_status']})"
        return fmt_s(r["first_s"])

    lines = ["| image metric | target | value |", "|---|---|---|"]
    lines += [f"| {label} | {target or '-'} | {cell(key)} |" for key, label, target in IMAGE_ROWS]
    return "\n".join(lines)


# ------------------------------------------------------- hostile drafts (issue 13 item 12)


HOSTILE_ROWS: list[tuple[str, str, str]] = [
    # (key, label, target)
    ("flood", "draft line of 1 MB of `[^` (a defined reference at its end): parse", "<= 2 s"),
    ("labels", "draft line of 1 MB of `[^a` U+3000 `b]` (166,666 invalid labels, each a finding): parse", ""),
    ("growth", "`[^` run 0.5 MB -> 1 MB: parse time ratio", "<= 3x"),
    ("worst", "worst hostile unit run, 40k -> 80k chars: parse time ratio (unit)", "<= 3x"),
]
"""Rows of the hostile-input table: ``grounding_core.drafts.parse_markdown`` in this process
on generated drafts (best of three each)."""

HOSTILE_DEFINITION = '\n\n[^1]: schedule@1:6 sha256:0123456789ab "- 活动时间：周四16:30"\n'


def hostile_section() -> dict[str, Any]:
    """Time the draft parser on runs of ``[^`` (quadratic in the reference regex before)."""
    from grounding_core.drafts import parse_markdown

    def best(text: str) -> float:
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            parse_markdown(text)
            samples.append(time.perf_counter() - t0)
        return min(samples)

    def line(unit: str, size: int) -> str:
        return "活动时间是" + unit * (size // len(unit)) + "周四16:30[^1]。" + HOSTILE_DEFINITION

    mb = 1_000_000
    out: dict[str, Any] = {"flood_s": best(line("[^", mb)), "labels_s": best(line("[^a\u3000b]", mb))}
    out["half_s"] = best(line("[^", mb // 2))
    out["growth"] = out["flood_s"] / out["half_s"]
    worst = (0.0, "")
    for unit in HOSTILE_UNITS:  # growth of every kind of hostile run (was a property test)
        small, large = best(line(unit, 40_000)), best(line(unit, 80_000))
        if small > 0.002:  # below this the ratio is timer noise
            worst = max(worst, (large / small, unit))
    out["worst"], out["worst_unit"] = worst
    return out


HOSTILE_UNITS = ["[^", "[", "]", "\\", "`", "\u3000", "\0", "𠮷🎉", "<", "*", "_", "~~", "[^a\u3000b]", "<div>",
                 "<!--", "-->", "<!--`11<\r\n", "![", "<a ", "*_`[^1]", "<!-- [^1] -->\n"]
"""Runs the worst-growth row tries: markup openers that never close, alone and mixed."""


def render_hostile(r: dict[str, Any]) -> str:
    def cell(key: str) -> str:
        if "error" in r:
            return "error"
        if key == "growth":
            return f"{fmt_s(r['half_s'])} -> {fmt_s(r['flood_s'])} ({r['growth']:.2f}x){mark(r['growth'] <= 3)}"
        if key == "worst":
            return f"{r['worst']:.2f}x ({r['worst_unit']!r}){mark(r['worst'] <= 3)}"
        return fmt_s(r[f"{key}_s"]) + (mark(r[f"{key}_s"] <= 2) if key == "flood" else "")

    lines = ["| hostile draft metric | target | value |", "|---|---|---|"]
    lines += [f"| {label} | {target or '-'} | {cell(key)} |" for key, label, target in HOSTILE_ROWS]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- main


def plan(quick: bool, only: list[str] | None, base: Path) -> list[tuple[str, Any]]:
    if quick:
        items = [("gen-tiny", lambda: corpora.generate("gen-tiny", 40, base=base)),
                 ("debian-tiny", lambda: corpora.debian("debian-tiny", limit=20, base=base))]
    else:
        items = [("gen-1k", lambda: corpora.generate("gen-1k", 1000, base=base)),
                 ("gen-10k", lambda: corpora.generate("gen-10k", 10000, base=base)),
                 ("gen-30k", lambda: corpora.generate("gen-30k", 30000, base=base)),
                 ("debian", lambda: corpora.debian("debian", base=base))]
    if only:
        items = [i for i in items if i[0] in only]
    return items


PHASES = ("index", "warm", "cli", "lsp")
"""The measurement phases of a corpus, in order (``--phases``): the index worker (floors, cold
index, full-text rows, the draft, check_draft, rg), the warm worker (warm start, first check,
one file changed, uncited-claim scan, question grammar), ``grounding check`` as a process,
and the language server."""


def _images_and_hostile(quick: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The image and hostile-draft sections (no corpus)."""
    try:  # image measurement (SPEC §12): no corpus, generated PNGs
        images = images_section(5 if quick else 15)
    except Exception as exc:  # report and keep going, as for a corpus
        images = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        print(f"[bench] images: {images['error']}", file=sys.stderr, flush=True)
    try:  # hostile drafts (issue 13 item 12): generated in memory
        hostile = hostile_section()
    except Exception as exc:  # report and keep going, as for a corpus
        hostile = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        print(f"[bench] hostile: {hostile['error']}", file=sys.stderr, flush=True)
    return images, hostile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny corpora (CI smoke run)")
    parser.add_argument("--corpus", action="append", help="run only this corpus (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--corpus-dir", type=Path, default=corpora.CORPUS_ROOT,
                        help="where corpora are generated (default: bench/.corpus)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help="run only these phases, comma-separated (default: all of "
                        + ", ".join(PHASES) + "); the rows of the others print as n/a. 'warm' and"
                        " 'cli' use the draft and index the 'index' phase left in the corpus")
    parser.add_argument("--no-extras", action="store_true",
                        help="skip the image and hostile-draft tables (with --phases, to re-measure rows)")
    parser.add_argument("--server-only", action="store_true",
                        help="only the language-server rows (uses the corpus's existing draft; runs the"
                             " index worker first when there is none)")
    parser.add_argument("--server-from-index", nargs="?", const="", default=None, metavar="DB",
                        help="start the server on a copy of an index (default: the corpus's"
                             " .grounding/index.sqlite) instead of its own cold index")
    parser.add_argument("--worker", nargs=3, metavar=("PHASE", "ROOT", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--team", action="store_true",
                        help="the team section instead (bench/team.py: shared PostgreSQL index vs SQLite)")
    args = parser.parse_args(argv)
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    unknown = phases - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s): {', '.join(sorted(unknown))}; choose from {', '.join(PHASES)}")
    if args.server_only:  # the language-server rows alone
        phases, args.no_extras = {"lsp"}, True

    if args.team:
        import team

        return team.main(quick=args.quick, json_path=args.json)

    if args.worker:
        phase, root, n = args.worker
        fn = {"index": worker_index, "storage": worker_storage, "rebuild": worker_rebuild}.get(phase, worker_warm)
        print(json.dumps(fn(Path(root), int(n)), ensure_ascii=False))
        return 0

    quick = args.quick
    started = time.perf_counter()
    info = machine()
    load_before = os.getloadavg()
    results: list[tuple[corpora.Corpus, dict[str, Any]]] = []
    for name, make in plan(quick, args.corpus, args.corpus_dir.resolve()):
        t0 = time.perf_counter()
        corpus = make()
        if corpus is None:
            print(f"[bench] {name}: no files on this machine, skipped", file=sys.stderr, flush=True)
            continue
        print(f"[bench] {name}: {corpus.files} files, {fmt_mb(corpus.bytes)}"
              f" (ready in {time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        r: dict[str, Any] = {"files": corpus.files, "bytes": corpus.bytes}  # the index phase counts them again
        index_timeout = 60.0 if quick else LSP_INDEX_TIMEOUT.get(name, 300.0)
        try:
            has_draft = all((corpus.root / rel).exists() for rel in ("draft-facts.json", ".grounding/index.sqlite"))
            step = time.perf_counter()
            if "index" in phases or not has_draft:  # the other phases use its draft and index
                r.update(run_worker("index", corpus.root, 30 if quick else 100, 1800))
                print(f"[bench] {name}: index worker {time.perf_counter() - step:.1f} s", file=sys.stderr,
                      flush=True)
            step = time.perf_counter()
            if "warm" in phases:
                r.update(run_worker("warm", corpus.root, 3 if quick else 5, 900))
                print(f"[bench] {name}: warm worker {time.perf_counter() - step:.1f} s", file=sys.stderr,
                      flush=True)
            step = time.perf_counter()
            if "cli" in phases:
                if "index" not in phases:
                    rg_phase(corpus.root, r)  # the ratio's other side, measured in this run
                cli_phase(corpus.root, 3 if quick else 5, r)
                print(f"[bench] {name}: grounding check {time.perf_counter() - step:.1f} s", file=sys.stderr,
                      flush=True)
            step = time.perf_counter()
            if "lsp" not in phases:
                pass
            elif quick and name.startswith("debian"):
                r["lsp_skipped"] = "--quick"  # see BENCHMARKS.md: evidence conflicts stall it
            else:
                asyncio.run(lsp_phase(corpus.root, 10 if quick else 30, 1 if quick else 2,
                                      index_timeout, r, from_index=args.server_from_index))
                print(f"[bench] {name}: language server {time.perf_counter() - step:.1f} s",
                      file=sys.stderr, flush=True)
        except Exception as exc:  # report and keep going: the table shows 'error'
            r["error"] = f"{type(exc).__name__}: {exc}"[:600]
            print(f"[bench] {name}: {r['error']}", file=sys.stderr, flush=True)
        results.append((corpus, r))
    images: dict[str, Any] = {"skipped": "--no-extras"}
    hostile: dict[str, Any] = {"skipped": "--no-extras"}
    if not args.no_extras:
        images, hostile = _images_and_hostile(quick)
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg()

    print()
    print(f"Grounding benchmarks ({'quick' if quick else 'full'} run)")
    print(f"- command: python3 bench/run.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    for key in ("date", "machine", "os", "python", "commit"):
        print(f"- {key}: {info[key]}")
    print(f"- load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f};"
          f" wall time {elapsed:.0f} s")
    print()
    print(render_table(results))
    print()
    spreads = [("grounding check peak RSS", lambda r: r.get("cli_rss")),
               ("cold index peak RSS", lambda r: (r.get("cold_rss") or {}).get("VmHWM")),
               ("settings rebuild peak RSS", lambda r: (r.get("rebuild_rss") or {}).get("VmHWM")),
               ("server peak RSS after indexing", lambda r: (r.get("rss_after_index") or {}).get("VmHWM"))]
    for label, value in spreads:  # issue 10: memory flat within 50 MB from 1k to 30k files
        rss = {c.name: value(r) for c, r in results if value(r)}
        if "gen-1k" in rss and "gen-30k" in rss:
            growth = (rss["gen-30k"] - rss["gen-1k"]) / 1e6
            print(f"{label} gen-1k -> gen-30k: {rss['gen-1k'] / 1e6:.0f} -> {rss['gen-30k'] / 1e6:.0f} MB"
                  f" ({growth:+.0f} MB; flat within 50 MB:{mark(abs(growth) <= 50)})")
    print()
    for corpus, r in results:
        extra = {k: r[k] for k in ("docs", "events", "evidence_findings", "citations", "stale",
                                   "status", "findings", "imports_s", "parse_p50_s", "first_check_cold_s",
                                   "one_file_scan_p50_s", "one_file_full_walk_p50_s", "cold_cpu_s",
                                   "fts_cpu_s", "db_bytes", "index_rss", "cold_rss", "rebuild_rss", "rebuild_cpu_s",
                                   "warm_rss", "uncited_cpu_s",
                                   "one_file_saw_change", "evidence_publishes", "rss_end", "error",
                                   "messages", "storm_passes", "storm_settle_s", "lsp_from_index",
                                   "edit_samples_s", "lsp_cpu_index_s", "lsp_cpu_change_s", "lsp_cpu_save_s",
                                   "lsp_cpu_edit_s", "lsp_cpu_storm_s", "storage_floor_rows",
                                   "storage_floor_table_cpu_s", "storage_floor_db_bytes", "collector")
                 if k in r}
        print(f"{corpus.name}: " + json.dumps(extra, ensure_ascii=False, default=str))
    print()
    if not args.no_extras:
        print(render_images(images))
        print("images: " + json.dumps({k: images[k] for k in ("regions", "error") if k in images}))
        print()
        print(render_hostile(hostile))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"info": info, "results": [
            {"corpus": c.name, "files": c.files, "bytes": c.bytes, **r} for c, r in results],
            "images": images, "hostile": hostile}, ensure_ascii=False, indent=1, default=str))
    return 1 if any("error" in r for _, r in results) or "error" in images or "error" in hostile else 0


if __name__ == "__main__":
    raise SystemExit(main())
