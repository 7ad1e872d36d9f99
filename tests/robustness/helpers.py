"""Helpers shared by the robustness suite (bad input, faults, storms; see README "What
Grounding guarantees").

Everything here builds throw-away workspaces under ``tmp_path``; files are written
byte-exactly (``str`` as UTF-8, no newline translation), so CRLF, lone ``\\r``, U+2028 and a
BOM reach the disk unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
from pathlib import Path

from grounding_core.model import DraftReport, Finding
from tests.support.workspace import write_files as write_files  # the one workspace builder

REPO = Path(__file__).resolve().parents[2]
SHARED_CASES = (REPO / ".." / "shared" / "cases").resolve()
EXAMPLES = REPO / "examples"
TODAY = dt.date(2026, 5, 1)
"""The date every check in this suite runs on."""

SERVER_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
}
"""Environment for server subprocesses: the repository importable, nothing else changed."""

PYTHON = sys.executable

SCHEDULE = (
    "---\n"                        # 1
    "doc_id: schedule\n"           # 2
    "title: 秋季开放日安排\n"        # 3
    "---\n"                        # 4
    "主题：秋季开放日\n"             # 5
    "- 活动时间：周四16:30\n"        # 6
    "- 地点：礼堂 A\n"              # 7
    "- 备注：请带*学生证*\n"         # 8
)
"""A small evidence document; comments give the 1-based line numbers."""


def sha256(data: bytes | str) -> str:
    """Lowercase hex sha256 of raw bytes (``str`` is encoded as UTF-8 first)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()




def fingerprints(*bases: Path) -> dict[str, str]:
    """sha256 of every regular file under ``bases`` (symlinks not followed), by path."""
    out: dict[str, str] = {}
    for base in bases:
        if not base.is_dir():
            continue
        for dirpath, _dirs, names in os.walk(base, followlinks=False):
            if ".grounding" in Path(dirpath).parts:
                continue
            for name in names:
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    out[str(path)] = sha256(path.read_bytes())
    return out


def definition(label: str, cid: str, raw: bytes | str, quote: str, hex_len: int = 12) -> str:
    """A footnote definition line citing ``cid`` with the hash of the evidence bytes ``raw``."""
    return f'[^{label}]: {cid} sha256:{sha256(raw)[:hex_len]} "{quote}"'


def md_draft(body: str, definitions: list[str], *, fields: str = "[活动时间]",
             context: str | None = '{units: ["schedule@1"]}') -> str:
    """A Markdown draft: front matter, ``body`` paragraphs, then the definition lines."""
    front = ["---", "question: 活动什么时候开始？", f"fields: {fields}"]
    if context is not None:
        front.append(f"context: {context}")
    front.append("---")
    return "\n".join(front) + "\n" + body + "\n\n" + "\n".join(definitions) + "\n"


def names(report: DraftReport | list[Finding]) -> list[str]:
    """Finding names of a report or finding list, in order."""
    findings = report.findings if isinstance(report, DraftReport) else report
    return [f.name for f in findings]


def only(report: DraftReport | list[Finding], name: str) -> Finding:
    """The single finding called ``name``; fails when there is none or several."""
    findings = report.findings if isinstance(report, DraftReport) else report
    found = [f for f in findings if f.name == name]
    assert len(found) == 1, f"expected one {name}, got {[(f.name, f.message) for f in findings]}"
    return found[0]


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank-ish percentile (``pct`` in 0..100) of ``samples``; NaN when empty."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]
