r"""The server's model of open documents: text kept equal to the editor's (SPEC §3, §10).

pygls 2.1.1 keeps a ``TextDocument`` per open URI and applies ``didChange`` edits itself.
Its defaults disagree with editors and with SPEC §3 in ways that make the server's text drift
from the buffer:

* ``TextDocument.lines`` is ``source.splitlines(True)``, which also breaks on U+2028, U+2029,
  U+0085, form feed, vertical tab and the FS/GS/RS controls, so line numbers no longer match
  the editor's (which, like SPEC §3, break only on ``\r\n``, ``\r`` and ``\n``);
* its ``PositionCodec`` turns a column past the end of a line into ``len - 1`` (and mutates
  the client's ``Position`` while doing it), so such an edit lands one character early;
* an edit that starts on the line after the last is appended wherever its end points.

:class:`GroundingDocument` fixes these by replacing the line model with
:func:`grounding_core.text.split_lines_keepends` and applying every incremental edit as one
replacement between two code-point offsets, each computed from the client position with the
session's :class:`server.positions.PositionCodec` and clamped the way VS Code's
``TextDocument`` clamps (past a line's end -> that line's end, before its terminator; past
the last line -> the end of the text).

pygls has no constructor hook for the document or workspace class: the protocol builds
``Workspace(...)`` inside its ``initialize`` handler. ``server/app.py`` therefore overrides
that one handler and builds a :class:`GroundingWorkspace`, which creates
:class:`GroundingDocument` instances through pygls's ``_create_text_document`` factory.

Background work must not hold a live document: take a :class:`DocumentSnapshot` (frozen uri,
version, text, lines) and, when done, compare it with the current version before publishing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import ServerTextPosition

from grounding_core.model import Span
from grounding_core.text import LineIndex, split_lines, split_lines_keepends
from server.positions import PositionCodec

__all__ = ["DocumentSnapshot", "GroundingDocument", "GroundingWorkspace", "text_hash"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DocumentSnapshot:
    """An immutable view of one document at one version, safe to hand to another thread.

    ``lines`` are the SPEC §3 lines without terminators (``split_lines(text)``); ``codec`` is
    the session's position codec, for converting results back into client ranges;
    ``text_hash`` is :func:`text_hash` of ``text`` (with ``version``, the document half of a
    result's freshness key, see ``server/session.py``).
    """

    uri: str
    version: int | None
    text: str
    lines: tuple[str, ...]
    codec: PositionCodec = field(compare=False)
    language_id: str | None = None
    text_hash: str = ""

    @classmethod
    def of(cls, uri: str, version: int | None, text: str, codec: PositionCodec,
           language_id: str | None = None) -> DocumentSnapshot:
        """A snapshot of ``text`` (a file read from disk, or a test's text)."""
        return cls(uri, version, text, tuple(split_lines(text)), codec, language_id, text_hash(text))

    def lsp_range(self, span: Span) -> types.Range:
        """A core :class:`Span` in this text -> an LSP range in the negotiated encoding."""
        return self.codec.lsp_range(span, self.lines)

    def core_span(self, range: types.Range) -> Span:
        """An LSP range in the negotiated encoding -> a core :class:`Span` in this text."""
        return self.codec.core_span(range, self.lines)


def text_hash(text: str) -> str:
    """A 128-bit BLAKE2b digest of ``text`` (UTF-8, lone surrogates passed through), hex."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class GroundingDocument(TextDocument):
    """A pygls ``TextDocument`` whose lines and edits follow SPEC §3 and the editor.

    Extra read-only views, cached per text: :attr:`text_lines` (lines without terminators,
    the numbering ``grounding_core`` uses), :attr:`line_index` (offsets <-> code-point
    positions) and :meth:`snapshot`. All pygls helpers (``offset_at_position``,
    ``range_from_client_units``, ``word_at_position`` ...) keep working and use the session's
    :class:`PositionCodec`.
    """

    _cache_source: str | None = None
    _cache_keepends: tuple[str, ...] = ()
    _cache_lines: tuple[str, ...] = ()
    _cache_index: LineIndex | None = None
    _cache_hash: str = ""

    def __init__(
        self,
        uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
        local: bool = True,
        sync_kind: types.TextDocumentSyncKind = types.TextDocumentSyncKind.Incremental,
        position_codec: PositionCodec | None = None,
    ) -> None:
        super().__init__(
            uri,
            source=source,
            version=version,
            language_id=language_id,
            local=local,
            sync_kind=sync_kind,
            position_codec=position_codec or PositionCodec(),
        )

    @property
    def position_codec(self) -> PositionCodec:
        """The session's codec (a :class:`server.positions.PositionCodec`)."""
        codec = self._position_codec
        assert isinstance(codec, PositionCodec)  # set in __init__
        return codec

    # ------------------------------------------------------------ line views

    def _refresh(self) -> str:
        source = self.source
        if source is not self._cache_source:
            self._cache_source = source
            self._cache_keepends = tuple(split_lines_keepends(source))
            self._cache_lines = tuple(split_lines(source))
            self._cache_index = None
            self._cache_hash = ""
        return source

    @property
    def lines(self) -> Sequence[str]:
        r"""The lines *with* their terminators, split only on ``\r\n|\r|\n`` (pygls API)."""
        self._refresh()
        return self._cache_keepends

    @property
    def text_lines(self) -> tuple[str, ...]:
        """The SPEC §3 lines without terminators; index 0 is line 1 of the SPEC."""
        self._refresh()
        return self._cache_lines

    @property
    def line_index(self) -> LineIndex:
        """A :class:`LineIndex` over the current text (code-point offsets <-> positions)."""
        source = self._refresh()
        if self._cache_index is None:
            self._cache_index = LineIndex(source)
        return self._cache_index

    def snapshot(self) -> DocumentSnapshot:
        """Freeze the current uri, version and text (see :class:`DocumentSnapshot`)."""
        self._refresh()
        return DocumentSnapshot(
            uri=self.uri,
            version=self.version,
            text=self.source,
            lines=self._cache_lines,
            codec=self.position_codec,
            language_id=self.language_id,
            text_hash=self.text_hash,
        )

    @property
    def text_hash(self) -> str:
        """:func:`text_hash` of the current text (computed once per text)."""
        source = self._refresh()
        if not self._cache_hash:
            self._cache_hash = text_hash(source)
        return self._cache_hash

    # ------------------------------------------------------------- offsets

    def offset_at_server_position(self, server_position: ServerTextPosition) -> int:
        """(0-based line, code-point column) -> code-point offset into the text (pygls API).

        Clamped like an editor: a column past the line's end stops before its terminator; a
        line past the last one is the end of the text.
        """
        return self._offset(server_position.line, server_position.character)

    def offset_at_position(self, client_position: types.Position) -> int:
        """An LSP position in client units -> code-point offset, clamped (pygls API)."""
        lines = self.text_lines
        line = client_position.line
        if line >= len(lines):
            return len(self.source)
        line = max(line, 0)
        column = self.position_codec.from_client_column(lines[line], client_position.character)
        return self._offset(line, column)

    def _offset(self, line: int, column: int) -> int:
        lines = self.text_lines
        if line >= len(lines):
            return len(self.source)
        line = max(line, 0)
        column = min(max(column, 0), len(lines[line]))
        return self.line_index.offset(line, column)

    def server_position_at_offset(self, offset: int) -> ServerTextPosition:
        """Code-point offset -> (0-based line, code-point column), clamped (pygls API)."""
        line, column = self.line_index.position(offset)
        return ServerTextPosition(line, column)

    # --------------------------------------------------------------- edits

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        """Replace the text between the change's two (clamped) positions with its text.

        The same rule as VS Code's ``TextDocument.update``: positions are clamped, not
        rejected; a reversed range is treated as its normalised form.
        """
        source = self.source
        start = self.offset_at_position(change.range.start)
        end = self.offset_at_position(change.range.end)
        if end < start:
            start, end = end, start
        self._source = source[:start] + change.text + source[end:]


class GroundingWorkspace(Workspace):
    """A pygls ``Workspace`` that holds :class:`GroundingDocument` objects and our codec.

    Built by ``server/app.py`` at ``initialize`` time with the negotiated encoding.
    """

    def __init__(
        self,
        root_uri: str | None,
        sync_kind: types.TextDocumentSyncKind = types.TextDocumentSyncKind.Incremental,
        workspace_folders: Sequence[types.WorkspaceFolder] | None = None,
        position_encoding: types.PositionEncodingKind | str = types.PositionEncodingKind.Utf16,
    ) -> None:
        super().__init__(root_uri, sync_kind, workspace_folders, position_encoding)
        self._position_codec = PositionCodec(position_encoding)

    @property
    def position_codec(self) -> PositionCodec:
        """The session's codec, shared by every document of this workspace."""
        codec = self._position_codec
        assert isinstance(codec, PositionCodec)  # set in __init__
        return codec

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> GroundingDocument:
        return GroundingDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )

    def get_text_document(self, doc_uri: str) -> GroundingDocument:
        """The open document for ``doc_uri``, else one reading the file from disk (pygls)."""
        document = super().get_text_document(doc_uri)
        assert isinstance(document, GroundingDocument)  # made by _create_text_document
        return document

    def update_text_document(self, text_doc: types.VersionedTextDocumentIdentifier,
                             change: types.TextDocumentContentChangeEvent) -> None:
        """Apply one ``didChange`` edit (pygls API). A change to a document the client never
        opened (or already closed) is a client error the server cannot apply: it is logged and
        ignored, never an "Error in server" message (pygls raised ``KeyError``).
        """
        if unquote(text_doc.uri) not in self.text_documents:
            logger.warning("didChange for %s, which is not open (no didOpen, or after didClose): ignored",
                           text_doc.uri)
            return
        super().update_text_document(text_doc, change)

    def open_document(self, doc_uri: str) -> GroundingDocument | None:
        """The open (editor-synced) document for ``doc_uri``, or None if it is not open."""
        document = self.text_documents.get(unquote(doc_uri))
        return document if isinstance(document, GroundingDocument) else None
