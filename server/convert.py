"""Core findings -> lsprotocol types. The only place diagnostics are born (SPEC §10).

Names say what they return (``lsp_diagnostic``, ``lsp_location``). Column conversion goes
through the session's :class:`server.positions.PositionCodec`; lines are SPEC §3 lines
without terminators.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lsprotocol import types

from grounding_core.model import Finding, Location, Severity, Span
from server.positions import PositionCodec

SOURCE = "grounding"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}

LinesOf = Callable[[str], Sequence[str]]
"""Lines of a file relative to the workspace root (for related-information ranges)."""
UriOf = Callable[[str], str]
"""URI of a path relative to the workspace root."""


def lsp_range(span: Span, lines: Sequence[str], codec: PositionCodec) -> types.Range:
    """A core span -> an LSP range in the negotiated encoding."""
    return codec.lsp_range(span, list(lines))


def lsp_location(location: Location, uri_of: UriOf, lines_of: LinesOf, codec: PositionCodec) -> types.Location:
    """A related location (1-based whole line) -> an LSP location covering that line."""
    lines = lines_of(location.path)
    line = max(location.line - 1, 0)
    text = lines[line] if line < len(lines) else ""
    end = codec.to_client_column(text, len(text))  # only this line is converted, never the file
    return types.Location(uri=uri_of(location.path),
                          range=types.Range(types.Position(line, 0), types.Position(line, end)))


def lsp_diagnostic(
    finding: Finding,
    lines: Sequence[str],
    codec: PositionCodec,
    uri_of: UriOf,
    lines_of: LinesOf,
    related_info: bool = True,
) -> types.Diagnostic:
    """One finding -> one diagnostic: ``code`` = GR code, ``source`` = grounding,
    ``data`` = {name, citation, fix}; the hint follows the message on its own line.
    """
    data: dict[str, Any] = {"name": finding.name}
    if finding.citation:
        data["citation"] = finding.citation
    if finding.fix is not None:
        data["fix"] = {
            "title": finding.fix.title, "new_text": finding.fix.new_text,
            "range": _span_json(finding.fix.span),
        }
    related = None
    if related_info and finding.related:
        related = [
            types.DiagnosticRelatedInformation(
                location=lsp_location(r, uri_of, lines_of, codec),
                message=r.message or f"{r.path}:{r.line}",
            )
            for r in finding.related
        ]
    message = finding.message + (f"\n{finding.hint}" if finding.hint else "")
    return types.Diagnostic(
        range=lsp_range(finding.span, lines, codec),
        message=message,
        severity=SEVERITIES[finding.effective_severity],
        code=finding.code,
        code_description=None,
        source=SOURCE,
        related_information=related,
        data=data,
    )


def _span_json(span: Span) -> dict[str, int]:
    return {"start_line": span.start_line, "start_col": span.start_col,
            "end_line": span.end_line, "end_col": span.end_col}


def span_from_json(data: dict[str, int]) -> Span:
    """Inverse of the ``data.fix.range`` encoding (0-based lines, code points)."""
    return Span(int(data["start_line"]), int(data["start_col"]), int(data["end_line"]), int(data["end_col"]))
