"""The cyclic collector during a scan's write (``grounding_core.collector.bulk_write``).

The collector is the process's, so every probe runs in its own interpreter: a failing
assertion can never leave this test process with its collector switched off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import REPO, write_files


def _probe(code: str, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.split()


def _evidence(root: Path, files: int = 120, lines: int = 30) -> None:
    write_files(root, {f"evidence/d{n // 40}/门店{n:03d}.md":
                       f"---\ndoc_id: store-{n:03d}\n---\r\n主题：门店{n % 20}\r\n"
                       + "".join(f"- 字段{k}：值{(n + k) % 7}\r\n" for k in range(lines)) for n in range(files)})


SCAN_PROBE = """
import gc, sys, weakref
from pathlib import Path
import grounding_core.derived as derived
from grounding_core.workspace import Workspace

derived.BATCH_LINES = 500  # several batches in a small corpus
if sys.argv[2] == "off":
    gc.disable()
seen = []
gc.callbacks.append(lambda phase, info: seen.append((info["generation"], gc.isenabled())) if phase == "start" else None)
class Node:
    pass
probes = []
enabled = []
freed = []
def progress(done, total, rel):
    enabled.append(gc.isenabled())
    if done == 3:  # cyclic garbage made while the scan writes: only a collection frees it
        node = Node(); node.self = node; probes.append(weakref.ref(node)); del node
    if done == 110:  # still inside the scan's transaction: freed by the scan's own collections or not at all
        freed.append(all(p() is None for p in probes))
ws = Workspace.open(Path(sys.argv[1]))
result = ws.scan(progress=progress)
during = [g for g, on in seen if not on]  # the collections while the automatic ones are off
print(len(result.events), any(enabled), gc.isenabled(), *freed, "/".join(map(str, sorted(set(during)))) or "none",
      len(during))
ws.store.close()
"""


def test_a_scan_writes_with_the_automatic_collector_off_and_collects_at_its_batches(tmp_path: Path) -> None:
    _evidence(tmp_path)
    events, on_during, on_after, freed, generations, collections = _probe(SCAN_PROBE, str(tmp_path), "on")
    assert events == "120"
    assert on_during == "False"  # no automatic collection while the transaction is open
    assert on_after == "True"  # the process's setting is back
    assert freed == "True"  # the scan's own collections free cyclic garbage made meanwhile
    assert generations == "1"  # young + middle at batch ends; never a full collection
    assert 7 <= int(collections) <= 20  # 120 x 30 lines in batches of 500, plus the last flush


def test_a_process_that_switched_the_collector_off_keeps_it_off_and_uncollected(tmp_path: Path) -> None:
    _evidence(tmp_path)
    events, on_during, on_after, freed, generations, collections = _probe(SCAN_PROBE, str(tmp_path), "off")
    assert (events, on_during, on_after) == ("120", "False", "False")
    assert freed == "False"  # the scan made no collection of its own: the process's choice
    assert (generations, collections) == ("none", "0")


NESTED_PROBE = """
import gc
from contextlib import ExitStack
from grounding_core.collector import bulk_write
out = [gc.isenabled()]
first, second = ExitStack(), ExitStack()
a = first.enter_context(bulk_write())
b = second.enter_context(bulk_write())  # another store's scan in another thread, say
out += [gc.isenabled(), a.active, b.active]
first.close()  # the first to begin ends first: the other still writes
out.append(gc.isenabled())
second.close()
out.append(gc.isenabled())
try:
    with bulk_write():
        raise ValueError
except ValueError:
    out.append(gc.isenabled())
print(*out)
"""


def test_overlapping_bulk_writes_switch_the_collector_back_on_when_the_last_one_ends() -> None:
    assert _probe(NESTED_PROBE) == ["True", "False", "True", "True", "False", "True", "True"]
