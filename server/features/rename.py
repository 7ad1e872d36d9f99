"""Rename a footnote label (SPEC §5.1; issue 12 "navigation").

``textDocument/prepareRename`` on a reference ``[^label]`` of a claim or on the ``[^label]``
of a definition line answers the label's range and text; elsewhere null (the editor says
nothing can be renamed there). ``textDocument/rename`` renames the label in every reference
and every definition of it together (``grounding_core.navigate.rename_label``), as one
``WorkspaceEdit`` naming the document version. A new label that is invalid or already used
is refused with a ``RequestFailed`` error whose message says why (the editor shows it).
JSON answers have no labels. Open drafts only: the edit is computed on the editor's text.
"""

from __future__ import annotations

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from grounding_core.drafts import ParsedDraft, draft_kind, parse_draft
from grounding_core.navigate import RenameError, label_at, rename_label
from server.convert import lsp_workspace_edit
from server.documents import DocumentSnapshot
from server.session import Session

__all__ = ["RenameRefused", "prepare_rename", "rename"]


class RenameRefused(JsonRpcException):
    """LSP ``RequestFailed`` (-32803): the rename is refused; the message says why."""

    CODE = types.LSPErrorCodes.RequestFailed.value


def _captured(session: Session, uri: str) -> tuple[DocumentSnapshot, str, ParsedDraft | None] | None:
    document = session.document(uri)
    rel = session.draft_rel(uri)
    if document is None or rel is None:
        return None
    return document, rel, session.parsed(uri, document.text_hash)


async def prepare_rename(session: Session,
                         params: types.PrepareRenameParams) -> types.PrepareRenamePlaceholder | None:
    """``textDocument/prepareRename``: the label under the cursor, or null."""
    captured = _captured(session, params.text_document.uri)
    if captured is None:
        return None
    return await session.readers.run(_prepare, *captured, params.position)


def _prepare(document: DocumentSnapshot, rel: str, parsed: ParsedDraft | None,
             position: types.Position) -> types.PrepareRenamePlaceholder | None:
    draft = parsed or parse_draft(document.text, draft_kind(rel))
    line, col = document.codec.core_position(position, document.lines)
    found = label_at(draft, line, col)
    if found is None:
        return None
    label, span = found
    return types.PrepareRenamePlaceholder(range=document.codec.lsp_range(span, document.lines), placeholder=label)


async def rename(session: Session, params: types.RenameParams) -> types.WorkspaceEdit | None:
    """``textDocument/rename`` of a footnote label (module docstring)."""
    captured = _captured(session, params.text_document.uri)
    if captured is None:
        return None
    document_changes = bool(session.capability("workspace.workspace_edit.document_changes", False))
    try:
        return await session.readers.run(_rename, *captured, params.position, params.new_name, document_changes)
    except RenameError as exc:
        raise RenameRefused(str(exc)) from exc


def _rename(document: DocumentSnapshot, rel: str, parsed: ParsedDraft | None, position: types.Position,
            new_name: str, document_changes: bool) -> types.WorkspaceEdit | None:
    draft = parsed or parse_draft(document.text, draft_kind(rel))
    line, col = document.codec.core_position(position, document.lines)
    found = label_at(draft, line, col)
    if found is None:
        return None
    edits = rename_label(draft, found[0], new_name)
    return lsp_workspace_edit(document.uri, document.version, document.lines, edits, document.codec,
                              document_changes)
