"""Core values -> lsprotocol types: the only place protocol types are born (SPEC §10).

Each translator is named for what it returns (``lsp_range``, ``lsp_diagnostic``,
``lsp_workspace_edit`` ...). Spans are core :class:`~grounding_core.model.Span` values
(0-based lines, code-point columns) in a text whose SPEC §3 lines (no terminators) the caller
passes; columns convert through the session's :class:`server.positions.PositionCodec`, one
line at a time (never a copy of the text per call).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from lsprotocol import types

from grounding_core.complete import Completions, Entry
from grounding_core.model import Edit, Finding, Location, Severity, Span
from server.positions import PositionCodec
from server.render.conflicts import editor_conflicts, evidence_conflicts

__all__ = [
    "DRAFT_MORE", "EVIDENCE_MORE", "MAX_CONVERTED", "MAX_DIAGNOSTICS", "MAX_RELATED", "MAX_RELATED_LISTS",
    "PAUSE_EVERY", "SAME_CONFLICT", "SEVERITIES", "SOURCE",
    "LinesOf", "RelatedLists", "RelatedOf", "UriOf",
    "lsp_completion_item", "lsp_completion_list", "lsp_diagnostic", "lsp_diagnostics", "lsp_hover",
    "lsp_line_location", "lsp_location", "lsp_range", "lsp_related", "lsp_workspace_edit", "span_from_json",
]

SOURCE = "grounding"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}
MAX_DIAGNOSTICS = 1000
"""Diagnostics published for one file; errors first. A pasted log can hold 100k sentences,
and publishing each would stall the client; the rest are counted in one information item."""

MAX_RELATED = 100
"""Related locations shown on one diagnostic (SPEC §7.4 lists at most 5 sources per value;
this bounds a finding with very many values, the way :data:`MAX_DIAGNOSTICS` bounds a file)."""
PAUSE_EVERY = 128
"""Diagnostics converted between two calls of a background caller's ``pause``."""
MAX_CONVERTED = 20_000
"""Converted related locations a shared ``locations`` mapping keeps (then it starts over)."""

MAX_RELATED_LISTS = 2_000
"""Converted ``relatedInformation`` lists a shared ``related_lists`` mapping keeps."""

LinesOf = Callable[[str], Sequence[str]]
"""Lines (no terminators) of a file relative to the workspace root (related locations)."""
UriOf = Callable[[str], str]
"""The URI of a path relative to the workspace root."""
RelatedOf = Callable[[tuple[Location, ...]], list[types.DiagnosticRelatedInformation]]
"""A finding's related locations -> its ``relatedInformation``."""
RelatedLists = MutableMapping[tuple[Location, ...], list[types.DiagnosticRelatedInformation]]
"""Converted ``relatedInformation`` lists by the related tuple they were made from."""

_KINDS = {"document": types.CompletionItemKind.Module, "version": types.CompletionItemKind.EnumMember,
          "line": types.CompletionItemKind.Reference, "region": types.CompletionItemKind.Color,
          # memory ids (SPEC §11): memory:SCOPE/KEY@VERSION
          "scope": types.CompletionItemKind.Folder, "key": types.CompletionItemKind.Field,
          "memory-version": types.CompletionItemKind.Reference}


def lsp_range(span: Span, lines: Sequence[str], codec: PositionCodec) -> types.Range:
    """A core span -> an LSP range in the negotiated encoding."""
    return codec.lsp_range(span, lines)


def lsp_line_location(uri: str, lines: Sequence[str], line: int, codec: PositionCodec) -> types.Location:
    """The whole 1-based ``line`` of a text with ``lines`` -> an LSP location at ``uri``."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return types.Location(uri=uri, range=types.Range(
        types.Position(line - 1, 0), types.Position(line - 1, codec.units(text))))


def lsp_location(location: Location, uri_of: UriOf, lines_of: LinesOf, codec: PositionCodec) -> types.Location:
    """A related location (1-based whole line) -> an LSP location covering that line.

    Uses ``location.line_text`` when the producer gave it, else reads the file's lines.
    """
    line = max(location.line - 1, 0)
    text = location.line_text
    if text is None:
        lines = lines_of(location.path)
        text = lines[line] if line < len(lines) else ""
    end = codec.units(text)
    return types.Location(uri=uri_of(location.path),
                          range=types.Range(types.Position(line, 0), types.Position(line, end)))


def lsp_diagnostic(finding: Finding, lines: Sequence[str], codec: PositionCodec, uri_of: UriOf,
                   lines_of: LinesOf, related_info: bool = True,
                   location_of: Callable[[Location], types.Location] | None = None,
                   related_of: RelatedOf | None = None) -> types.Diagnostic:
    """One finding -> one diagnostic: ``code`` = GR code, ``source`` = grounding,
    ``data`` = {name, citation, fix}; the hint follows the message on its own line.
    ``location_of`` converts a related location (default :func:`lsp_location`);
    ``related_of`` converts a finding's whole related tuple (it may return a list it made
    before: callers must not change it).
    """
    if location_of is None:
        def location_of(r: Location) -> types.Location:
            return lsp_location(r, uri_of, lines_of, codec)

    data: dict[str, Any] = {"name": finding.name}
    if finding.citation:
        data["citation"] = finding.citation
    if finding.fix is not None:
        data["fix"] = {"title": finding.fix.title, "new_text": finding.fix.new_text,
                       "range": _span_json(finding.fix.span)}
    related = None
    if related_info and finding.related:
        if related_of is not None:
            related = related_of(tuple(finding.related[:MAX_RELATED]))
        else:
            related = lsp_related(finding.related[:MAX_RELATED], location_of)
    message = finding.message + (f"\n{finding.hint}" if finding.hint else "")
    return types.Diagnostic(
        range=lsp_range(finding.span, lines, codec), message=message,
        severity=SEVERITIES[finding.effective_severity], code=finding.code, source=SOURCE,
        related_information=related, data=data)


def lsp_related(related: Sequence[Location],
                location_of: Callable[[Location], types.Location]) -> list[types.DiagnosticRelatedInformation]:
    """Related locations -> a diagnostic's ``relatedInformation``."""
    return [types.DiagnosticRelatedInformation(location=location_of(r), message=r.message or f"{r.path}:{r.line}")
            for r in related]


DRAFT_MORE = "run 'grounding check' on this draft to see them all."
EVIDENCE_MORE = "run 'grounding conflicts' and 'grounding index' to see them all."


SAME_CONFLICT = "same conflict as line {line}: its sources are listed there"
"""The related location a later GR108 diagnostic of a key has at the key's first one (1-based line)."""


def lsp_diagnostics(findings: Sequence[Finding], lines: Sequence[str], codec: PositionCodec, uri_of: UriOf,
                    lines_of: LinesOf, related_info: bool = True, limit: int = MAX_DIAGNOSTICS,
                    more: str = DRAFT_MORE,
                    locations: MutableMapping[Location, types.Location] | None = None,
                    related_lists: RelatedLists | None = None, uri: str | None = None,
                    evidence: bool = False, pause: Callable[[], object] | None = None) -> list[types.Diagnostic]:
    """The diagnostics of one file: at most ``limit`` findings (the most severe, in their
    order), plus one information item at 1:1 counting the ones left out (``more`` says where
    to see them). With the file's own ``uri`` (a draft), ``field-conflict`` findings are shown
    the editor's way (:func:`server.render.conflicts.editor_conflicts`: at most 20 values named;
    a key's related sources on its first diagnostic, a later one points at the first with
    :data:`SAME_CONFLICT`). ``locations`` keeps converted related locations across calls (it must be
    for the same ``uri_of``, ``codec`` and files; at most :data:`MAX_CONVERTED` are kept);
    ``related_lists`` keeps whole converted ``relatedInformation`` lists the same way, by
    the findings' related tuples (a draft's conflict findings carry the same ones on every
    keystroke): equal tuples get the same list object, which a serialiser may cache by
    identity (``PyglsClient.prepare_diagnostics``). ``evidence`` (with the evidence file's own
    ``uri``): its conflicts are shown with :func:`server.render.conflicts.evidence_conflicts`
    instead (a key's related sources on its first line in the file; later lines point there).
    ``pause`` (a background caller's yield point) is called every :data:`PAUSE_EVERY` findings.
    """
    shown = _most_severe(findings, limit)
    files: dict[str, Sequence[str]] = {}  # each related file read once per call
    if locations is None:  # and each related location converted once
        locations = {}

    def lines_once(path: str) -> Sequence[str]:
        found = files.get(path)
        if found is None:
            found = files[path] = lines_of(path)
        return found

    def location_once(location: Location) -> types.Location:
        found = locations.get(location)
        if found is None:
            if len(locations) >= MAX_CONVERTED:
                locations.clear()
            found = locations[location] = lsp_location(location, uri_of, lines_once, codec)
        return found

    related_of = None
    if related_lists is not None:
        held = related_lists

        def related_once(related: tuple[Location, ...]) -> list[types.DiagnosticRelatedInformation]:
            found = held.get(related)
            if found is None:
                if len(held) >= MAX_RELATED_LISTS:
                    held.clear()
                found = held[related] = lsp_related(related, location_once)
            return found

        related_of = related_once
    if uri is None:
        out = [lsp_diagnostic(f, lines, codec, uri_of, lines_once, related_info, location_once, related_of)
               for f in shown]
    else:
        out = []
        for at, shown_as in enumerate((evidence_conflicts if evidence else editor_conflicts)(shown)):
            if pause is not None and at and at % PAUSE_EVERY == 0:
                pause()
            diagnostic = lsp_diagnostic(shown_as.finding, lines, codec, uri_of, lines_once, related_info,
                                        location_once, related_of)
            if shown_as.first is not None and related_info:
                first = types.DiagnosticRelatedInformation(
                    location=types.Location(uri=uri, range=lsp_range(shown_as.first, lines, codec)),
                    message=SAME_CONFLICT.format(line=shown_as.first.start_line + 1))
                diagnostic.related_information = [*(diagnostic.related_information or ()), first]
            out.append(diagnostic)
    if len(findings) > len(shown):
        out.append(types.Diagnostic(
            range=types.Range(types.Position(0, 0), types.Position(0, 0)),
            message=f"{len(findings) - len(shown)} more findings are not shown in the editor; {more}",
            severity=types.DiagnosticSeverity.Information, source=SOURCE))
    return out


def _most_severe(findings: Sequence[Finding], limit: int) -> list[Finding]:
    if len(findings) <= limit:
        return list(findings)
    order = [Severity.ERROR, Severity.WARNING, Severity.INFORMATION, Severity.HINT]
    ranked = sorted(findings, key=lambda f: order.index(f.effective_severity))[:limit]
    keep = set(map(id, ranked))
    return [f for f in findings if id(f) in keep]


def lsp_workspace_edit(uri: str, version: int | None, lines: Sequence[str], edits: Sequence[Edit],
                       codec: PositionCodec, document_changes: bool) -> types.WorkspaceEdit:
    """Core edits (spans in the text with ``lines``) -> a ``WorkspaceEdit`` in client units.

    With ``document_changes`` (the client supports them) the edit names the document
    ``version``, so the client refuses it if the buffer moved on; else plain ``changes``.
    """
    text_edits = [types.TextEdit(range=lsp_range(e.span, lines, codec), new_text=e.new_text) for e in edits]
    if document_changes:
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
            edits=list(text_edits))])
    return types.WorkspaceEdit(changes={uri: list(text_edits)})


def lsp_hover(markdown: str, span: Span, lines: Sequence[str], codec: PositionCodec,
              kind: types.MarkupKind) -> types.Hover:
    """Hover text over ``span`` of the text with ``lines``."""
    return types.Hover(contents=types.MarkupContent(kind=kind, value=markdown),
                       range=lsp_range(span, lines, codec))


def lsp_completion_item(entry: Entry, lines: Sequence[str], codec: PositionCodec,
                        label_details: bool = False) -> types.CompletionItem:
    """One core completion entry -> a completion item whose edit replaces ``entry.span``.

    ``detail`` is the entry's detail (a line's text, a document's title, a version's state);
    with ``label_details`` (the client's ``labelDetailsSupport``) it is also the
    ``labelDetails.description``, which VS Code shows beside the label of *every* item, not
    only the focused one (Neovim shows ``detail`` in its menu column either way).
    """
    return types.CompletionItem(
        label=entry.label, kind=_KINDS[entry.kind], detail=entry.detail, documentation=entry.documentation,
        label_details=types.CompletionItemLabelDetails(description=entry.detail) if label_details and entry.detail
        else None,
        sort_text=entry.sort_text, filter_text=entry.filter_text, preselect=entry.preselect or None,
        text_edit=types.TextEdit(range=lsp_range(entry.span, lines, codec), new_text=entry.new_text))


def lsp_completion_list(completions: Completions, lines: Sequence[str], codec: PositionCodec,
                        label_details: bool = False) -> types.CompletionList:
    return types.CompletionList(is_incomplete=completions.incomplete,
                                items=[lsp_completion_item(e, lines, codec, label_details)
                                       for e in completions.entries])


def _span_json(span: Span) -> dict[str, int]:
    return {"start_line": span.start_line, "start_col": span.start_col,
            "end_line": span.end_line, "end_col": span.end_col}


def span_from_json(data: dict[str, int]) -> Span:
    """Inverse of the ``data.fix.range`` encoding (0-based lines, code points)."""
    return Span(int(data["start_line"]), int(data["start_col"]), int(data["end_line"]), int(data["end_col"]))
