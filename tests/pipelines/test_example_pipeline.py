"""``examples/pipeline.py`` (SPEC §14): a pipeline that answers from retrieved hits with a
replayed model and verifies the answer, run as the README says, on a copy of ``examples/``
(so the index is never written into the repository).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_example_pipeline_rejects_the_misquote_then_verifies_the_second_answer(tmp_path: Path) -> None:
    copy = tmp_path / "examples"
    shutil.copytree(REPO / "examples", copy, ignore=shutil.ignore_patterns(".grounding"))
    out = subprocess.run([sys.executable, str(copy / "pipeline.py")], capture_output=True, text=True, timeout=240,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("retrieved ") and "schedule@2:14-22" in lines[0]
    assert lines[1] == "attempt 1: rejected"
    assert lines[2].startswith("  /claims/0/quote GR103 quote-mismatch: the quote is not line 14 of schedule@2")
    assert lines[3] == "attempt 2: answered, coverage 1.00, 2 verified claim(s)"
    assert '[^1]: schedule@2:14 sha256:3baa5fea5284 "- 活动时间：2026年12月5日（周六）9:30–16:00"' in lines
    assert '[^2]: schedule@2:15 sha256:3baa5fea5284 "- 地点：主楼一层报告厅"' in lines
    assert not (REPO / "examples" / "pipeline_responses.json").read_text(encoding="utf-8").count("\r")
