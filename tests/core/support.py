"""Helpers shared by the core suite (imported as ``support``; pytest puts ``tests/core`` on the path).

Positions: :func:`pos` turns a finding's 0-based span into SPEC §9's 1-based line/column with an
exclusive end column, counted in code points, which is what every range assertion compares.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

from grounding_core.model import DraftReport, Finding, Severity
from grounding_core.workspace import Workspace
from tests.support.workspace import event_kinds as event_kinds
from tests.support.workspace import write_files as write_files  # the one workspace builder

REPO = Path(__file__).resolve().parents[2]
SHARED = (REPO / ".." / "shared").resolve()
CASES = SHARED / "cases"
EXAMPLE_EVIDENCE = REPO / "examples" / "evidence"

TODAY = dt.date(2026, 5, 1)
"""The date every engine check in this suite runs on, unless a test pins another."""


def sha256(data: bytes | str) -> str:
    """Lowercase hex sha256 of raw bytes (``str`` is encoded as UTF-8 first)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


class MakeWorkspace(Protocol):
    """The ``make_workspace`` fixture: files -> an opened (and by default scanned) workspace."""

    def __call__(self, files: dict[str, str | bytes], *, scan: bool = True,
                 **overrides: Any) -> Workspace: ...


def check(ws: Workspace, path: str, text: str | None = None,
          today: dt.date = TODAY) -> DraftReport:
    """Check one draft: its file, or ``text`` as if it were the editor buffer of ``path``."""
    if text is None:
        return ws.check_file(path, today=today)
    return ws.check_text(path, text, today=today)


def names(report: DraftReport | list[Finding]) -> list[str]:
    """The finding names of a report (or of a finding list), in report order."""
    findings = report.findings if isinstance(report, DraftReport) else report
    return [f.name for f in findings]


def errors(report: DraftReport) -> list[str]:
    """Names of the error-severity findings."""
    return [f.name for f in report.findings if f.effective_severity is Severity.ERROR]


def only(report: DraftReport | list[Finding], name: str) -> Finding:
    """The single finding called ``name``; fails when there is none or several."""
    findings = report.findings if isinstance(report, DraftReport) else report
    found = [f for f in findings if f.name == name]
    assert len(found) == 1, f"expected one {name}, got {names(findings)}"
    return found[0]


def pos(finding: Finding) -> tuple[int, int, int, int]:
    """(line, column, end_line, end_column) as SPEC §9 prints them: 1-based, end exclusive."""
    s = finding.span
    return (s.start_line + 1, s.start_col + 1, s.end_line + 1, s.end_col + 1)


def json_answer(**top: Any) -> str:
    """A JSON answer, non-ASCII kept, indented so every claim key sits on its own line."""
    return json.dumps(top, ensure_ascii=False, indent=2)


def fixture_fingerprints() -> dict[str, str]:
    """sha256 of every file under ``../shared/cases`` and ``examples/evidence``, by path."""
    out: dict[str, str] = {}
    for base in (CASES, EXAMPLE_EVIDENCE):
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file():
                    out[str(path)] = sha256(path.read_bytes())
    return out
