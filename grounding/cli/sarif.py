"""SARIF 2.1.0 output for ``grounding check --format sarif`` (SPEC §9).

Rule ids are the GR codes; columns are Unicode code points (``columnKind``), 1-based, end
exclusive, matching the JSON output. Artifact URIs are the root-relative ``/``-paths,
percent-encoded (RFC 3986), so paths with spaces or CJK names stay valid URI references.

Each result carries ``partialFingerprints["grounding/v1"]``, a hash of its rule, file and the
content it covers (:mod:`grounding.report`), so code-scanning dashboards keep tracking an
alert when lines are added or removed above it, and ``check --baseline`` can compare runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from grounding_core.model import RULES, DraftReport, Finding, Severity

from ..report import FINGERPRINT_KEY, Fingerprints, fingerprint_map

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning",
          Severity.INFORMATION: "note", Severity.HINT: "note"}


ROOT_BASE_ID = "%SRCROOT%"


def report(reports: list[DraftReport], evidence: dict[str, list[Finding]],
           root: Path | None = None, fingerprints: Fingerprints | None = None) -> dict[str, Any]:
    """One SARIF log with one run over every draft and evidence finding.

    Artifact URIs are relative to the workspace root and carry ``uriBaseId`` ``%SRCROOT%``;
    ``originalUriBaseIds`` maps it to ``root`` (a file URI ending in ``/``) when given, so
    code-scanning tools can resolve them. ``fingerprints`` (``id(finding)`` -> fingerprint)
    default to :func:`grounding.report.fingerprint_map` over ``root`` (drafts are read again
    from disk for their text).
    """
    rules = sorted(RULES.values(), key=lambda r: r.code)
    rule_index = {r.name: i for i, r in enumerate(rules)}
    if fingerprints is None:
        fingerprints = fingerprint_map(root, reports, evidence) if root is not None else {}
    results: list[dict[str, Any]] = []
    for path, findings in list(evidence.items()) + [(r.path, r.findings) for r in reports]:
        for f in findings:
            results.append(_result(path, f, rule_index[f.name], fingerprints.get(id(f))))
    from importlib.metadata import PackageNotFoundError, version

    try:
        tool_version = version("grounding")
    except PackageNotFoundError:
        tool_version = "0.0.0"
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "grounding",
                "version": tool_version,
                "rules": [{
                    "id": r.code, "name": r.name,
                    "shortDescription": {"text": r.summary},
                    "defaultConfiguration": {"level": LEVELS[r.severity]},
                } for r in rules],
            }},
            "columnKind": "unicodeCodePoints",
            **({"originalUriBaseIds": {ROOT_BASE_ID: {"uri": root.resolve().as_uri().rstrip("/") + "/"}}}
               if root is not None else {}),
            "results": results,
        }],
    }


def artifact_uri(path: str) -> str:
    """A root-relative ``/``-path as a relative URI reference (RFC 3986).

    ``/`` is kept; everything else outside the unreserved set is percent-encoded as UTF-8
    (``答 案.md`` -> ``%E7%AD%94%20%E6%A1%88.md``), so a ``:`` is never read as a scheme.
    """
    return quote(path, safe="/")


def _result(path: str, f: Finding, index: int, fingerprint: str | None = None) -> dict[str, Any]:
    region = {
        "startLine": f.span.start_line + 1, "startColumn": f.span.start_col + 1,
        "endLine": f.span.end_line + 1, "endColumn": f.span.end_col + 1,
    }
    text = f.message.rstrip(".") + (f". Hint: {f.hint}" if f.hint else "")
    out: dict[str, Any] = {
        "ruleId": f.code, "ruleIndex": index, "level": LEVELS[f.effective_severity],
        "message": {"text": text},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": artifact_uri(path), "uriBaseId": ROOT_BASE_ID}, "region": region}}],
    }
    if fingerprint is not None:
        out["partialFingerprints"] = {FINGERPRINT_KEY: fingerprint}
    if f.related:
        out["relatedLocations"] = [
            {"id": i, "physicalLocation": {"artifactLocation": {"uri": artifact_uri(r.path), "uriBaseId": ROOT_BASE_ID},
                                           "region": {"startLine": r.line}},
             **({"message": {"text": r.message}} if r.message else {})}
            for i, r in enumerate(f.related)]
    if f.citation:
        out["properties"] = {"citation": f.citation, "name": f.name}
    else:
        out["properties"] = {"name": f.name}
    return out
