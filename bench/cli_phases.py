"""Where a ``grounding check`` process spends its time: run it the way the console script does,
with the parts timed in process (wall and CPU, ms) and printed to stderr.

    cd WORKSPACE && python3 /path/to/bench/cli_phases.py answers/bench.md [more check args]

Parts: the imports (``import grounding.cli``, interpreter start-up before it is the first
line's CPU), opening the workspace, the full walk (``scan.walk_evidence``), loading and
comparing stored stat keys (``_Scan._load_rows`` / ``_read_changed``: absent when the walk's
digest answered, docs/decisions.md "Unchanged full walks"), the rest of the scan, the check
of each draft and the output. ``PYTHONPATH=OTHER_CHECKOUT`` times another checkout's code
(what BENCHMARKS.md's before / after columns compare). The process ends with ``os._exit``
like ``grounding.cli.run`` does for ``check``. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

START = (time.perf_counter(), time.process_time())
MARKS: list[tuple[str, float, float]] = []
TIMES: dict[str, list[float]] = {}


def mark(name: str) -> None:
    MARKS.append((name, time.perf_counter(), time.process_time()))


def timed(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its wall and CPU time to ``TIMES[label]``."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            acc = TIMES.setdefault(label, [0.0, 0.0, 0])
            acc[0] += time.perf_counter() - wall
            acc[1] += time.process_time() - cpu
            acc[2] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    import grounding.cli as cli  # the imports a check process makes

    mark("imports")
    from grounding_core import scan, store
    from grounding_core.collector import process_start

    timed(cli, "open_workspace", "open workspace")
    timed(scan, "walk_evidence", "walk")
    timed(store._Scan, "_load_rows", "load stored stat keys")
    timed(store._Scan, "_read_changed", "compare + read changed")
    timed(store._Scan, "run", "scan after the walk")
    timed(store.Store, "scan", "Store.scan")
    timed(cli, "_check_one", "check one draft")
    timed(cli, "print_text", "text output")
    process_start()
    cli._COLLECTOR_SET = True
    sys.argv = ["grounding", "check", *sys.argv[1:]]
    code = cli.main()
    mark("main")
    sys.stdout.flush()
    prev = START
    for name, wall, cpu in MARKS:
        print(f"{name:26s} wall {1000 * (wall - prev[0]):7.1f} cpu {1000 * (cpu - prev[1]):7.1f}", file=sys.stderr)
        prev = (wall, cpu)
    for label, (wall, cpu, calls) in TIMES.items():
        print(f"  {label:24s} wall {1000 * wall:7.1f} cpu {1000 * cpu:7.1f} x{calls:g}", file=sys.stderr)
    print(f"process CPU since start: {1000 * time.process_time():.1f} ms", file=sys.stderr)
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
