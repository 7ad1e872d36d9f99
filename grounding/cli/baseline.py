"""``grounding check --baseline FILE``: report only findings that are not in a baseline.

A baseline is a previous report of ``grounding check``: a SARIF log (``--format sarif``,
fingerprints in ``results[].partialFingerprints["grounding/v1"]``) or a JSON report
(``--format json``, ``drafts[].diagnostics[].fingerprint`` and
``evidence[].diagnostics[].fingerprint``). Findings are compared by their content fingerprint
(:mod:`grounding.report`), so lines added above a known finding do not make it new. Drafts keep
their status and coverage; only the findings listed, and the exit status, change.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from grounding_core.model import DraftReport, Finding

from ..report import FINGERPRINT_KEY, Fingerprints


def load(path: Path) -> set[str]:
    """The fingerprints of a baseline file; ValueError (with the reason) when it is not one."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except OSError as exc:
        raise ValueError(f"--baseline {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--baseline {path}: not a JSON or SARIF report ({exc})") from None
    found: set[str] = set()
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        for run in data["runs"]:
            for result in (run.get("results") or []) if isinstance(run, dict) else []:
                fps = result.get("partialFingerprints") if isinstance(result, dict) else None
                fp = fps.get(FINGERPRINT_KEY) if isinstance(fps, dict) else None
                if isinstance(fp, str):
                    found.add(fp)
        kind, total = "SARIF log", sum(len(r.get("results") or []) for r in data["runs"] if isinstance(r, dict))
    elif isinstance(data, dict) and isinstance(data.get("drafts"), list):
        groups: list[Any] = [*data["drafts"], *(data.get("evidence") or [])]
        diagnostics = [d for g in groups if isinstance(g, dict) for d in (g.get("diagnostics") or [])]
        found.update(d["fingerprint"] for d in diagnostics
                     if isinstance(d, dict) and isinstance(d.get("fingerprint"), str))
        kind, total = "JSON report", len(diagnostics)
    else:
        raise ValueError(f"--baseline {path}: expected a report of `grounding check --format sarif` or"
                         " `--format json`")
    if total and not found:
        raise ValueError(f"--baseline {path}: this {kind} has findings but no Grounding fingerprints;"
                         " write it again with this version of `grounding check`")
    return found


def apply(known: set[str], reports: list[DraftReport], evidence: dict[str, list[Finding]],
          fingerprints: Fingerprints) -> tuple[list[DraftReport], dict[str, list[Finding]], int]:
    """Drop findings whose fingerprint is in ``known``; returns the reports, evidence and the count dropped."""
    hidden = 0

    def new(findings: list[Finding]) -> list[Finding]:
        nonlocal hidden
        kept = [f for f in findings if fingerprints.get(id(f)) not in known]
        hidden += len(findings) - len(kept)
        return kept

    out_reports = [replace(r, findings=new(r.findings)) for r in reports]
    out_evidence = {path: new(fs) for path, fs in evidence.items()}
    return out_reports, out_evidence, hidden
