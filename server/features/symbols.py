"""Document symbols, workspace symbols and document links (SPEC §10; issue 12 "navigation").

``textDocument/documentSymbol``
    A draft: its outline (:func:`grounding_core.navigate.outline`): each claim sentence
    (kind ``String``; children: its references, kind ``Key``), then each footnote definition a
    claim uses (kind ``Object``, name ``[^1] doc@2:7``, detail the quote); a JSON answer:
    its claim objects. An evidence file (its open text, else the file as indexed): its field
    lines (kind ``Field``, name the field, detail the value; the selection is the field name),
    front matter and meta fields excluded. At most :data:`MAX_FIELD_SYMBOLS` entries either way.
``workspace/symbol``
    Doc ids starting with the query (``IndexSnapshot.doc_ids``, kind ``File``, at the top
    of the newest version's file) and field lines whose text matches it
    (``IndexSnapshot.search``, kind ``Field``, name ``field：value``, container the doc_id),
    each at most :data:`MAX_WORKSPACE_SYMBOLS`: indexed lookups, never a walk of the corpus.
    An empty query answers nothing (a client that lists "all symbols" would list the corpus).
``textDocument/documentLink``
    Each citation id of a draft links to its evidence line: the file with ``#L<line>`` when
    it still holds the cited version, else the version document of ``versionDocuments``
    (``server/features/versions.py``). The tooltip (when the client shows them) names the line.
    At most :data:`MAX_FIELD_SYMBOLS` links.

Positions convert with the session codec in the worker that computes the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from grounding_core.drafts import ParsedDraft, draft_kind, parse_draft
from grounding_core.evidence import EvidenceDocument, EvidenceError, parse_evidence_text
from grounding_core.model import Span
from grounding_core.navigate import OutlineItem, citation_links, locate, outline
from grounding_core.text import shorten
from server.documents import DocumentSnapshot
from server.features import versions
from server.positions import PositionCodec
from server.session import IndexView, Session

__all__ = ["MAX_FIELD_SYMBOLS", "MAX_WORKSPACE_SYMBOLS", "document_link", "document_symbol", "workspace_symbol"]

MAX_FIELD_SYMBOLS = 5000
"""Field-line symbols of one evidence file, and outline entries or links of one draft (a
pasted log can hold 100k sentences; a client given that many stalls)."""
MAX_WORKSPACE_SYMBOLS = 100
"""Doc ids, and field lines, answered for one workspace-symbol query."""

_KINDS = {"claim": types.SymbolKind.String, "reference": types.SymbolKind.Key,
          "citation": types.SymbolKind.Object}


# ---------------------------------------------------------------------- document symbols


async def document_symbol(session: Session, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol] | None:
    """``textDocument/documentSymbol`` on a draft or an evidence file (module docstring)."""
    uri = params.text_document.uri
    document = session.document(uri)
    rel = session.draft_rel(uri)
    if rel is not None:
        if document is None:
            return None
        parsed = session.parsed(uri, document.text_hash)
        return await session.readers.run(_draft_symbols, document, rel, parsed)
    evidence_rel = session.evidence_rel(uri)
    view = session.current_view()
    if evidence_rel is None or view is None:
        return None
    return await session.readers.run(_evidence_symbols, view, evidence_rel, document, session.codec)


def _draft_symbols(document: DocumentSnapshot, rel: str, parsed: ParsedDraft | None) -> list[types.DocumentSymbol]:
    draft = parsed or parse_draft(document.text, draft_kind(rel))
    return [_symbol(item, document.lines, document.codec) for item in outline(draft)[:MAX_FIELD_SYMBOLS]]


def _symbol(item: OutlineItem, lines: Sequence[str], codec: PositionCodec) -> types.DocumentSymbol:
    return types.DocumentSymbol(
        name=item.name or "(empty)", detail=item.detail or None, kind=_KINDS[item.kind],
        range=codec.lsp_range(item.span, lines), selection_range=codec.lsp_range(item.selection, lines),
        children=[_symbol(child, lines, codec) for child in item.children] or None)


def _evidence_symbols(view: IndexView, rel: str, document: DocumentSnapshot | None,
                      codec: PositionCodec) -> list[types.DocumentSymbol] | None:
    doc = _evidence_document(view, rel, document)
    if doc is None:
        return None
    found = []
    for number, field_line in doc.field_lines.items():
        if doc.is_front_matter_line(number) or view.snapshot.is_meta_field(field_line.field):
            continue
        line = doc.lines[number - 1]
        start = len(line) - len(field_line.text) + (len(field_line.text) - len(field_line.text.lstrip()))
        whole = Span.line(number - 1, 0, len(line))
        name = Span.line(number - 1, start, start + len(field_line.field))
        found.append(types.DocumentSymbol(
            name=field_line.field, detail=shorten(field_line.value, 80) or None, kind=types.SymbolKind.Field,
            range=codec.lsp_range(whole, doc.lines), selection_range=codec.lsp_range(name, doc.lines)))
        if len(found) >= MAX_FIELD_SYMBOLS:
            break
    return found


def _evidence_document(view: IndexView, rel: str, document: DocumentSnapshot | None) -> EvidenceDocument | None:
    """The open text of an evidence file parsed with the workspace's settings, else the
    indexed version of its path (SPEC §3 lines either way).
    """
    config = view.config
    if document is not None:
        text = document.text[1:] if document.text.startswith("\ufeff") else document.text
        try:
            return parse_evidence_text(rel, text, "", config.field_separators, config.subject_fields)
        except EvidenceError:
            return None
    record = view.snapshot.record_for_path(rel)
    return view.snapshot.document(record) if record is not None else None


# --------------------------------------------------------------------- workspace symbols


async def workspace_symbol(session: Session, params: types.WorkspaceSymbolParams) -> list[types.SymbolInformation]:
    """``workspace/symbol``: doc ids and field lines matching the query (module docstring)."""
    view = session.current_view()
    query = params.query.strip()
    if view is None or not query:
        return []
    return await session.readers.run(_workspace_symbols, view, query, session.codec)


def _workspace_symbols(view: IndexView, query: str, codec: PositionCodec) -> list[types.SymbolInformation]:
    snapshot = view.snapshot
    found: list[types.SymbolInformation] = []
    for doc_id in snapshot.doc_ids(query, limit=MAX_WORKSPACE_SYMBOLS):
        record = snapshot.newest(doc_id)
        if record is None or not record.path:
            continue
        start = types.Position(0, 0)
        found.append(types.SymbolInformation(
            name=doc_id, kind=types.SymbolKind.File, container_name=view.config.evidence_display(record.path),
            location=types.Location(uri=view.evidence_uri(record.path), range=types.Range(start, start))))
    fields = 0
    for hit in snapshot.search(query, limit=MAX_WORKSPACE_SYMBOLS * 2):
        if fields >= MAX_WORKSPACE_SYMBOLS:
            break
        record = snapshot.record(hit.doc_id, hit.version)
        if record is None or not record.path:
            continue
        doc = snapshot.document(record)
        field_line = doc.field_lines.get(hit.line)
        if field_line is None or doc.is_front_matter_line(hit.line) or snapshot.is_meta_field(field_line.field):
            continue
        fields += 1
        found.append(types.SymbolInformation(
            name=field_line.text, kind=types.SymbolKind.Field, container_name=f"{hit.doc_id}@{hit.version}",
            location=types.Location(uri=view.evidence_uri(record.path), range=codec.lsp_range(
                Span.line(hit.line - 1, 0, len(doc.lines[hit.line - 1])), doc.lines))))
    return found


# ------------------------------------------------------------------------ document links


async def document_link(session: Session, params: types.DocumentLinkParams) -> list[types.DocumentLink] | None:
    """``textDocument/documentLink`` on a draft: each citation id -> its evidence line."""
    uri = params.text_document.uri
    document = session.document(uri)
    rel = session.draft_rel(uri)
    view = session.current_view()
    if document is None or rel is None or view is None:
        return None
    parsed = session.parsed(uri, document.text_hash)
    tooltips = bool(session.capability("text_document.document_link.tooltip_support", False))
    return await session.readers.run(_links, document, rel, parsed, view, versions.mode(session), tooltips)


def _links(document: DocumentSnapshot, rel: str, parsed: ParsedDraft | None, view: IndexView,
           version_mode: str, tooltips: bool) -> list[types.DocumentLink]:
    draft = parsed or parse_draft(document.text, draft_kind(rel))
    targets: dict[tuple[str, int], str] = {}
    found = []
    for link in citation_links(draft)[:MAX_FIELD_SYMBOLS]:
        ref = link.citation
        key = (ref.doc_id, ref.version)
        if key not in targets:
            where = locate(ref, view.snapshot, view.config.evidence_root)
            if where is None:
                continue  # unknown version or line (another citation of the version may be fine)
            if where.on_disk:
                targets[key] = view.evidence_uri(where.record.path)
            else:
                targets[key] = versions.version_document(version_mode, view.config.root, view, where.record)
        target = targets[key]
        record = view.snapshot.record(*key)
        if record is None:
            continue
        lines = view.snapshot.document(record).lines
        if not 1 <= ref.line <= len(lines):
            continue
        found.append(types.DocumentLink(
            range=document.codec.lsp_range(link.span, document.lines), target=f"{target}#L{ref.line}",
            tooltip=f"{ref.id}: {shorten(lines[ref.line - 1], 80)}" if tooltips else None))
    return found
