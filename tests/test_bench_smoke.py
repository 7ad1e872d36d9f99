"""Smoke run of the benchmarks (BENCHMARKS.md): ``bench/run.py --quick`` on tiny corpora.

The same code as the full run, end to end (corpus generation, the index and warm workers,
the language server over stdio), in a temporary corpus folder. It checks that the table
comes out with every row and figures for the generated corpus; it never asserts the
performance targets themselves (those are reported, not tested).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "bench" / "run.py"


def _rows() -> list[tuple[str, str, str]]:
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.ROWS)


def test_quick_bench_prints_every_row(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--corpus-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| metric | target |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[:3] == ["metric", "target", "gen-tiny"]
    for _key, label, _target in _rows():
        row = next((line for line in lines if line.startswith(f"| {label} |")), None)
        assert row is not None, f"row {label!r} missing from:\n{proc.stdout}"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == len(columns), row
        gen_tiny = cells[2]
        assert gen_tiny and gen_tiny not in ("error", "n/a"), row
    assert "- command: python3 bench/run.py --quick" in proc.stdout


def test_quick_bench_runs_selected_phases(tmp_path: Path) -> None:
    """``--phases`` re-measures some rows: the index and warm rows get figures, the rows of the
    phases left out print ``n/a``, and the image and hostile tables are left out on request.
    """
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--corpus", "gen-tiny", "--corpus-dir", str(tmp_path),
         "--phases", "index,warm", "--no-extras"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    labels = {key: label for key, label, _target in _rows()}

    def cell(key: str) -> str:
        row = next(line for line in proc.stdout.splitlines() if line.startswith(f"| {labels[key]} |"))
        return row.strip("|").split("|")[2].strip()

    for key in ("cold", "warm", "first_check", "check", "one_file"):
        assert cell(key) not in ("", "error", "n/a"), key
    for key in ("cli", "lsp_index", "stdio_change"):
        assert cell(key) == "n/a", key
    assert "--phases index,warm --no-extras" in proc.stdout
    assert "| hostile draft metric |" not in proc.stdout
