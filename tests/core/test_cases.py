"""The public acceptance cases (``../shared/cases``) pass through the real CLI (SPEC §9).

``check_cases.py`` runs ``grounding check --root CASE --format json`` on a copy of every case
and compares with its ``expect.json``. The whole run must end ``6 passed, 0 failed``; one
parametrized test per case folder names the failing case on its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import CASES, REPO

CHECK_CASES = (REPO / ".." / "shared" / "tools" / "check_cases.py").resolve()
GROUNDING = [sys.executable, "-m", "grounding.cli"]
CASE_NAMES = sorted(p.name for p in CASES.iterdir() if (p / "expect.json").is_file()) \
    if CASES.is_dir() else []

pytestmark = pytest.mark.skipif(not CHECK_CASES.is_file() or not CASE_NAMES,
                                reason="../shared/cases is not beside the repository")


def run_check_cases(cases: Path) -> subprocess.CompletedProcess[str]:
    """``python3 check_cases.py CASES python -m grounding.cli`` from the repository root."""
    return subprocess.run(
        [sys.executable, str(CHECK_CASES), str(cases), *GROUNDING],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )


def test_all_public_cases_pass_through_the_cli() -> None:
    proc = run_check_cases(CASES)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr
    assert lines[-1] == f"{len(CASE_NAMES)} passed, 0 failed", proc.stdout
    assert lines[-1] == "6 passed, 0 failed"
    assert proc.returncode == 0


@pytest.mark.parametrize("case", CASE_NAMES)
def test_public_case_passes(case: str, tmp_path: Path) -> None:
    # check_cases.py runs every folder holding an expect.json: give it a folder with just one
    (tmp_path / case).symlink_to(CASES / case, target_is_directory=True)
    proc = run_check_cases(tmp_path)
    assert proc.stdout.strip().splitlines()[-1] == "1 passed, 0 failed", proc.stdout + proc.stderr
