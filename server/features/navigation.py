"""Hover, go to definition, references and ``grounding/versionText`` (SPEC §10).

``textDocument/hover`` (drafts)
    On a footnote reference ``[^label]`` in a sentence, on a definition line (any column) or
    inside a claim object of a ``*.answer.json``: the citation hover; on the draft's
    ``context`` key: the context summary (both rendered by ``server/render/hover.py``). The
    hover range is the reference, the definition's ID, the JSON claim object or the context
    declaration. Before the first index exists a citation hover says so instead of waiting.

``textDocument/definition`` (drafts)
    The cited evidence line, range = the whole line (columns in the client's encoding,
    counted on the evidence text). The real file only when the cited version is the newest
    and the file on disk still holds exactly that content; otherwise a read-only version
    document: the copy ``.grounding/versions/DOC_ID@VERSION.md`` or, for a client that set
    ``versionDocuments: "virtual"``, ``grounding-evidence:/DOC_ID@VERSION``
    (``server/features/versions.py``). On a memory citation (SPEC §11): hover and definition
    of the entry, whose view is a version document of the same kind (``server/features/memory.py``).

``grounding/versionText`` ``{uri}``
    The indexed text of the version a ``grounding-evidence:`` URI names (shape in
    ``server/protocol.py``); for an image version, its regions' measured attributes, one
    ``FIELD：VALUE`` line each (the index keeps no pixels of old versions).

Image citations (SPEC §12): hover shows the region cropped from the PNG
(``server/render/image_hover.py``); go to definition opens the PNG file itself when it still
holds the cited version, else the read-only attribute listing.

``textDocument/references`` (evidence files, ``grounding-evidence:`` documents, version copies)
    Every citation of the line under the cursor in open drafts (their editor text) and in the
    draft files on disk that are not open (``grounding_core.navigate.citing_spans``: the same
    version and line, or the same text in another version). The evidence file resolves to the
    newest indexed version whose path it is. With ``includeDeclaration`` the evidence line
    itself comes first.

Each handler captures the document and the index view on the loop and does the rest (parsing,
reading files, rendering) in one worker call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from grounding_core.drafts import ParsedDraft, draft_kind, parse_draft
from grounding_core.model import DraftReport, Span
from grounding_core.navigate import (
    CitationTarget,
    RegionTarget,
    citing_spans,
    locate,
    locate_region,
    target_at,
    version_bytes,
)
from server.convert import lsp_hover, lsp_line_location, lsp_range
from server.documents import DocumentSnapshot
from server.features import memory, versions
from server.protocol import markup_kind, param, parse_version_uri, version_uri
from server.render.hover import ContextInputs, citation_hover, context_hover
from server.render.image_hover import region_hover
from server.session import IndexView, Session

__all__ = ["INDEXING_HOVER", "definition", "hover", "references", "version_text"]

INDEXING_HOVER = "Grounding is still indexing the evidence folder; hover again in a moment."


@dataclass(frozen=True, slots=True)
class _Draft:
    """An open draft captured on the loop, with the parse and report of a result for exactly
    its text when one exists (else the worker parses it).
    """

    document: DocumentSnapshot
    rel: str
    draft: ParsedDraft | None
    report: DraftReport | None


def _capture(session: Session, uri: str) -> _Draft | None:
    document = session.document(uri)
    rel = session.draft_rel(uri)
    if document is None or rel is None:
        return None
    stored = session.results.get(uri)
    if stored is not None and stored.document.text_hash == document.text_hash:
        fresh = session.is_fresh(stored)
        return _Draft(document, rel, stored.draft, stored.report if fresh else None)
    return _Draft(document, rel, session.parsed(uri, document.text_hash), None)


def _parsed(captured: _Draft) -> ParsedDraft:
    return captured.draft or parse_draft(captured.document.text, draft_kind(captured.rel))


def _keep_parse(session: Session, captured: _Draft, draft: ParsedDraft) -> None:
    """Remember a parse the worker made, for the next request on the same text."""
    if captured.draft is None:
        session.remember_parse(captured.document.uri, captured.document.text_hash, draft)


# --------------------------------------------------------------------------------- hover


async def hover(session: Session, params: types.HoverParams) -> types.Hover | None:
    """``textDocument/hover`` on a draft (see the module docstring)."""
    captured = _capture(session, params.text_document.uri)
    if captured is None:
        return None
    hover, draft = await session.readers.run(_hover, captured, session.current_view(), params.position,
                                             markup_kind(session.capabilities))
    _keep_parse(session, captured, draft)
    return hover


def _hover(captured: _Draft, view: IndexView | None, position: types.Position,
           kind: types.MarkupKind) -> tuple[types.Hover | None, ParsedDraft]:
    document = captured.document
    draft = _parsed(captured)
    line, col = document.codec.core_position(position, document.lines)
    remembered = memory.hover_at(draft, document, view, line, col, kind)  # memory hook (SPEC §11)
    if remembered is not None:
        return remembered, draft
    target = target_at(draft, line, col)
    if target is None:
        return None, draft
    if view is None:
        if not isinstance(target, CitationTarget | RegionTarget):
            return None, draft
        text = INDEXING_HOVER
    elif isinstance(target, CitationTarget):
        text = citation_hover(target, view.snapshot, view.config, view.today)
    elif isinstance(target, RegionTarget):  # image hook (SPEC §12): the region cropped from the image
        record = view.snapshot.record(target.region.doc_id, target.region.version)
        png = (version_bytes(view.config.evidence_root, record)
               if record is not None and kind == types.MarkupKind.Markdown else None)
        text = region_hover(target, view.snapshot, view.config, view.today, png)
    else:
        report = captured.report
        if report is None:
            from grounding_core.check import check_parsed

            report = check_parsed(draft, captured.rel, view.snapshot, view.config, view.today, view.read_text)
        text = context_hover(draft, report, ContextInputs(view.snapshot, view.config, view.today, view.read_text))
    return lsp_hover(text, target.span, document.lines, document.codec, kind), draft


# ---------------------------------------------------------------------------- definition


async def definition(session: Session, params: types.DefinitionParams) -> list[types.Location] | None:
    """``textDocument/definition`` on a citation: the evidence line (see the module docstring)."""
    captured = _capture(session, params.text_document.uri)
    view = session.current_view()
    if captured is None or view is None:
        return None
    found, draft = await session.readers.run(_definition, captured, view, params.position,
                                             versions.mode(session))
    _keep_parse(session, captured, draft)
    return found


def _definition(captured: _Draft, view: IndexView, position: types.Position,
                version_mode: str) -> tuple[list[types.Location] | None, ParsedDraft]:
    document = captured.document
    line, col = document.codec.core_position(position, document.lines)
    draft = _parsed(captured)
    return _definition_of(draft, document, view, line, col, version_mode), draft


def _definition_of(draft: ParsedDraft, document: DocumentSnapshot, view: IndexView, line: int,
                   col: int, version_mode: str = versions.VIRTUAL) -> list[types.Location] | None:
    if memory.on_memory_citation(draft, line, col):  # memory hook (SPEC §11): the entry's view
        return memory.definition_at(draft, document, view, line, col, version_mode)
    target = target_at(draft, line, col)
    if isinstance(target, RegionTarget):  # image hook (SPEC §12): open the image itself
        image = locate_region(target.region, view.snapshot, view.config.evidence_root)
        if image is None:
            return None
        record = image.record
        uri = (view.evidence_uri(record.path) if image.on_disk
               else versions.version_document(version_mode, view.config.root, view, record))
        return [types.Location(uri=uri, range=types.Range(types.Position(0, 0), types.Position(0, 0)))]
    if not isinstance(target, CitationTarget):
        return None
    found = locate(target.citation, view.snapshot, view.config.evidence_root)
    if found is None:
        return None
    record = found.record
    uri = (view.evidence_uri(record.path) if found.on_disk
           else versions.version_document(version_mode, view.config.root, view, record))
    return [lsp_line_location(uri, found.lines, found.line, document.codec)]


async def version_text(session: Session, params: Any) -> dict[str, Any] | None:
    """``grounding/versionText {uri}``: the indexed text of a ``grounding-evidence:`` version."""
    uri = param(params, "uri")
    parsed = parse_version_uri(uri) if isinstance(uri, str) else None
    view = session.current_view()
    if parsed is None or view is None:
        return None
    return await session.readers.run(_version_text, view, *parsed)


def _version_text(view: IndexView, doc_id: str, version: int) -> dict[str, Any] | None:
    remembered = memory.version_text(view, doc_id, version)  # memory hook (SPEC §11)
    if remembered is not None:
        return remembered or None
    record = view.snapshot.record(doc_id, version)
    if record is None:
        return None
    doc = view.snapshot.document(record)
    text = versions.version_text_of(doc)  # an image version: its measured attributes (SPEC §12)
    return {
        "uri": version_uri(record.doc_id, record.version),
        "text": text,
        "title": f"{doc.title} ({record.doc_id}@{record.version}, read-only)",
        "readOnly": True,
        "docId": record.doc_id,
        "version": record.version,
        "path": view.config.evidence_display(record.path) if record.path else record.path,
        "languageId": "markdown" if record.path.endswith(".md") else "plaintext",
    }


# ---------------------------------------------------------------------------- references


async def references(session: Session, params: types.ReferenceParams) -> list[types.Location] | None:
    """``textDocument/references`` from an evidence line: every citation of it."""
    uri = params.text_document.uri
    view = session.current_view()
    if view is None:
        return None
    version = parse_version_uri(uri) or versions.version_of_file(session, uri)
    evidence_rel = None if version is not None else session.evidence_rel(uri)
    if version is None and evidence_rel is None:
        return None
    open_drafts = []
    for doc_uri in session.open_uris():
        rel = session.draft_rel(doc_uri)
        document = session.document(doc_uri)
        if rel is not None and document is not None:
            open_drafts.append((document, rel))
    return await session.readers.run(_references, view, uri, version, evidence_rel, params.position.line + 1,
                                     params.context.include_declaration, open_drafts, session.codec)


def _references(view: IndexView, uri: str, version: tuple[str, int] | None, evidence_rel: str | None, line: int,
                declaration: bool, open_drafts: list[tuple[DocumentSnapshot, str]],
                codec: Any) -> list[types.Location] | None:
    snapshot = view.snapshot
    if version is not None:
        record = snapshot.record(*version)
    else:
        record = snapshot.record_for_path(evidence_rel) if evidence_rel is not None else None
    if record is None:
        return None
    lines = snapshot.document(record).lines
    if not 1 <= line <= len(lines):
        return None
    line_text = lines[line - 1]
    found: list[types.Location] = []

    def cite(draft: ParsedDraft, where: str) -> None:
        found.extend(types.Location(uri=where, range=lsp_range(span, draft.lines, codec))
                     for span in citing_spans(draft, record.doc_id, record.version, line, line_text, snapshot))

    open_paths = set()
    for document, rel in open_drafts:
        open_paths.add(_fs_key(document.uri))
        cite(parse_draft(document.text, draft_kind(rel)), document.uri)
    for rel in view.discover_drafts():
        file_uri = view.root_uri(rel)
        if _fs_key(file_uri) in open_paths:
            continue
        text = view.read_text(rel)
        if text is not None:
            cite(parse_draft(text, draft_kind(rel)), file_uri)
    found.sort(key=lambda loc: (loc.uri, loc.range.start.line, loc.range.start.character))
    if declaration:
        found.insert(0, types.Location(uri=uri, range=lsp_range(Span.line(line - 1, 0, len(line_text)), lines, codec)))
    return found


def _fs_key(uri: str) -> str:
    """A comparable key for a file URI (its decoded file-system path), else the URI itself."""
    path = to_fs_path(uri)
    return str(Path(path)) if path else uri
