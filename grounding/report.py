"""The SPEC §9 JSON report and content-based finding fingerprints.

``draft_json`` is the §9 draft object (what ``grounding check --format json`` prints per
draft, what :func:`grounding.verify` returns as a typed model, what the MCP ``check_answer``
tool returns as structured content). Lines and columns are 1-based, columns count Unicode
code points, ``end_column`` is exclusive.

A **fingerprint** names a finding by its content, not its position, so it survives lines
added or removed above it (code-scanning dashboards track alerts by it, and
``grounding check --baseline`` compares by it)::

    sha256("grounding/v1" NUL rule code NUL path NUL citation id NUL normalised text)[:32] ":" occurrence

``normalised text`` is the text the finding's range covers (the citation definition from
the id to the line's end, the sentence, the ``fields`` item, the JSON claim object), after
Unicode NFKC with all whitespace removed, so CRLF/LF and re-indentation do not change it;
``occurrence`` counts earlier findings of the same file with the same hash (0, 1, ...), so
two identical findings stay two. Evidence findings use their message as the text: the
evidence file is not opened again (a refused symlink must never be read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grounding_core.model import DraftReport, Finding, Span
from grounding_core.text import normalize, split_lines

FINGERPRINT_KEY = "grounding/v1"
"""The key of Grounding's fingerprint in SARIF ``partialFingerprints``."""

Fingerprints = Mapping[int, str]
"""``id(finding)`` -> fingerprint, for the findings of one run."""


def finding_json(f: Finding, fingerprint: str | None = None) -> dict[str, Any]:
    """SPEC §9 diagnostic object (1-based line/column, code points, end exclusive)."""
    out: dict[str, Any] = {
        "code": f.code, "name": f.name, "severity": f.effective_severity.value,
        "line": f.span.start_line + 1, "column": f.span.start_col + 1,
        "end_line": f.span.end_line + 1, "end_column": f.span.end_col + 1,
        "message": f.message,
    }
    if f.hint:
        out["hint"] = f.hint
    if f.citation:
        out["citation"] = f.citation
    if f.related:
        out["related"] = [{"path": r.path, "line": r.line, **({"message": r.message} if r.message else {})}
                          for r in f.related]
    if f.fix:
        out["fix"] = {"title": f.fix.title, "new_text": f.fix.new_text}
    if fingerprint is not None:
        out["fingerprint"] = fingerprint
    return out


def draft_json(r: DraftReport, fingerprints: Fingerprints | None = None) -> dict[str, Any]:
    """The SPEC §9 draft object of one report."""
    fps = fingerprints or {}
    return {
        "path": r.path, "status": r.status.value, "required_fields": r.required_fields,
        "covered_fields": r.covered_fields, "missing_fields": r.missing_fields,
        "field_completeness": r.field_completeness, "coverage": r.coverage,
        "same_key_sources_checked": r.same_key_sources_checked,
        **({"output_tokens": r.output_tokens, "output_reserve": r.output_reserve}
           if r.output_tokens is not None else {}),
        "diagnostics": [finding_json(f, fps.get(id(f))) for f in r.findings],
    }


def report_json(reports: list[DraftReport], evidence: dict[str, list[Finding]],
                fingerprints: Fingerprints | None = None) -> dict[str, Any]:
    """The whole ``grounding check --format json`` object (SPEC §9)."""
    fps = fingerprints or {}
    return {
        "drafts": [draft_json(r, fps) for r in reports],
        "evidence": [{"path": p, "diagnostics": [finding_json(f, fps.get(id(f))) for f in fs]}
                     for p, fs in evidence.items()],
    }


# -- fingerprints ------------------------------------------------------------------------------


def span_text(lines: list[str], span: Span) -> str:
    """The text a span covers in ``lines`` (0-based lines, code-point columns), lines joined by ``\\n``."""
    if not lines or span.start_line >= len(lines):
        return ""
    if span.start_line == span.end_line:
        return lines[span.start_line][span.start_col:span.end_col]
    parts = [lines[span.start_line][span.start_col:]]
    parts.extend(lines[span.start_line + 1:min(span.end_line, len(lines))])
    if span.end_line < len(lines):
        parts.append(lines[span.end_line][:span.end_col])
    return "\n".join(parts)


def fingerprints_of(path: str, findings: Iterable[Finding], text: str | None,
                    by_message: bool = False) -> dict[int, str]:
    """Fingerprints of one file's findings (see the module docstring).

    ``text`` is the file's text as checked (None when it cannot be read: then only rule, path
    and citation count); ``by_message`` uses each finding's message instead of its text.
    """
    lines = split_lines(text) if text is not None else []
    seen: dict[str, int] = {}
    out: dict[int, str] = {}
    for f in findings:
        content = normalize(f.message if by_message else span_text(lines, f.span))
        digest = hashlib.sha256("\0".join(
            (FINGERPRINT_KEY, f.code, path, f.citation or "", content)).encode("utf-8")).hexdigest()[:32]
        occurrence = seen.get(digest, 0)
        seen[digest] = occurrence + 1
        out[id(f)] = f"{digest}:{occurrence}"
    return out


def read_checked_text(path: Path) -> str | None:
    """A file's text as the checks saw it (UTF-8, BOM removed), or None when unreadable."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    return text[1:] if text.startswith("\ufeff") else text


def fingerprint_map(root: Path, reports: list[DraftReport], evidence: dict[str, list[Finding]]) -> dict[int, str]:
    """Fingerprints of every finding of a ``grounding check`` run; paths are relative to ``root``."""
    out: dict[int, str] = {}
    for path, findings in evidence.items():
        out.update(fingerprints_of(path, findings, None, by_message=True))
    for r in reports:
        if r.findings:
            out.update(fingerprints_of(r.path, r.findings, read_checked_text(root / r.path)))
    return out
