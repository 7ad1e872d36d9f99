r"""The one place where code-point columns and client position units convert (SPEC §10).

Everything inside the server and ``grounding_core`` counts columns in Unicode code points
(a :class:`~grounding_core.model.Span` holds 0-based lines and code-point columns, end
exclusive). LSP clients count columns in the *negotiated position encoding*:

* ``utf-16`` — UTF-16 code units (the LSP default; VS Code): 🎉 and 𠮷 are 2 units, 中 is 1;
* ``utf-8`` — bytes of the UTF-8 encoding (Neovim prefers it): 🎉 is 4, 中 is 3, é is 2;
* ``utf-32`` — code points, the same as our columns.

Lines are the physical lines of SPEC §3 (only ``\r\n``, ``\r`` and ``\n`` end a line, see
:func:`grounding_core.text.split_lines`) and never include their terminator, so a column can
address at most the position just past a line's last character. LSP line numbers are 0-based
like :class:`Span` lines, so lines pass through unchanged; only columns convert.

Conversions are total, never raising on client input:

* a column past the end of a line clamps to the line's end (the LSP rule: "if the character
  value is greater than the line length it defaults back to the line length");
* a client column that falls inside one character (between the two UTF-16 units of a
  surrogate pair, or inside a multi-byte UTF-8 sequence) snaps back to that character's start;
* a line past the last line maps to the end of the text: ``(len(lines), 0)``.

:class:`PositionCodec` subclasses pygls's ``PositionCodec`` so the same object can be handed
to pygls's ``TextDocument``/``Workspace`` (see ``server/documents.py``); pygls's own methods
are overridden to route through the conversions here, so no other conversion code runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec as _PyglsPositionCodec
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from grounding_core.model import Span

__all__ = [
    "PositionCodec",
    "negotiate",
    "encoding_kind",
    "strip_terminator",
]

_UTF8 = types.PositionEncodingKind.Utf8
_UTF16 = types.PositionEncodingKind.Utf16
_UTF32 = types.PositionEncodingKind.Utf32

_TERMINATOR = re.compile(r"(?:\r\n|\r|\n)\Z")


def encoding_kind(encoding: types.PositionEncodingKind | str | None) -> types.PositionEncodingKind:
    """Normalise an encoding name (``"utf-8"``, ``"utf-16"``, ``"utf-32"``) to the enum.

    ``None`` means the LSP default, UTF-16. Raises ``ValueError`` for any other name.
    """
    if encoding is None:
        return _UTF16
    return types.PositionEncodingKind(encoding)


def negotiate(client_capabilities: types.ClientCapabilities | None) -> types.PositionEncodingKind:
    """Choose the position encoding for a session from the client's ``initialize`` capabilities.

    SPEC §10: UTF-16 unless the client offers UTF-8 or UTF-32 in
    ``general.positionEncodings``. When it offers both, the client's order of preference
    decides. Unknown names are ignored. A client that lists nothing gets UTF-16, which every
    client must support.
    """
    general = client_capabilities.general if client_capabilities is not None else None
    offered = (general.position_encodings if general is not None else None) or ()
    for name in offered:
        if name in (_UTF8, _UTF32):
            return types.PositionEncodingKind(name)
    return _UTF16


def strip_terminator(line: str) -> str:
    r"""Remove one trailing ``\r\n``, ``\r`` or ``\n`` (pygls hands over lines with ends)."""
    match = _TERMINATOR.search(line)
    return line[: match.start()] if match else line


def _utf16_width(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _utf8_width(ch: str) -> int:
    code = ord(ch)
    if code < 0x80:
        return 1
    if code < 0x800:
        return 2
    if code < 0x10000:
        return 3  # lone surrogates too (WTF-8), so a stray one never raises
    return 4


class PositionCodec(_PyglsPositionCodec):
    """Converts between code-point columns and client units for one negotiated encoding.

    Immutable after construction; one instance per session (held by the workspace, see
    ``server/documents.py``). Also a drop-in pygls ``PositionCodec``.
    """

    def __init__(
        self, encoding: types.PositionEncodingKind | str | None = types.PositionEncodingKind.Utf16
    ) -> None:
        kind = encoding_kind(encoding)
        super().__init__(kind)
        self.encoding: types.PositionEncodingKind = kind
        self._width = {_UTF8: _utf8_width, _UTF16: _utf16_width}.get(kind)

    def __repr__(self) -> str:
        return f"PositionCodec({self.encoding.value!r})"

    # ------------------------------------------------------------------ columns

    def units(self, text: str) -> int:
        """Length of ``text`` in client units (UTF-16 units, UTF-8 bytes or code points)."""
        if self._width is None or text.isascii():
            return len(text)
        if self.encoding is _UTF8:
            return len(text.encode("utf-8", "surrogatepass"))
        return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)

    def to_client_column(self, line_text: str, cp_col: int) -> int:
        """Code-point column on ``line_text`` -> client-unit column.

        ``line_text`` is one line without its terminator. ``cp_col`` is clamped to
        ``[0, len(line_text)]``. Returns the number of client units before that column.
        """
        cp_col = min(max(cp_col, 0), len(line_text))
        return self.units(line_text[:cp_col])

    def from_client_column(self, line_text: str, unit_col: int) -> int:
        """Client-unit column on ``line_text`` -> code-point column.

        ``line_text`` is one line without its terminator. A column past the line's end clamps
        to ``len(line_text)``; a negative one to 0; a column inside a character (half a
        surrogate pair, the middle of a UTF-8 sequence) snaps to that character's start.
        """
        if unit_col <= 0:
            return 0
        if self._width is None or line_text.isascii():
            return min(unit_col, len(line_text))
        width = self._width
        consumed = 0
        for index, ch in enumerate(line_text):
            consumed += width(ch)
            if consumed > unit_col:
                return index
        return len(line_text)

    # ------------------------------------------------------------- positions

    def lsp_position(self, line: int, cp_col: int, lines: Sequence[str]) -> types.Position:
        """A 0-based line and code-point column -> an LSP ``Position`` in client units.

        ``lines`` are the document's lines without terminators (``split_lines``). A line past
        the last one becomes ``(len(lines), 0)``, the end of the text.
        """
        if line < 0:
            return types.Position(line=0, character=0)
        if line >= len(lines):
            return types.Position(line=len(lines), character=0)
        return types.Position(line=line, character=self.to_client_column(lines[line], cp_col))

    def core_position(self, position: types.Position, lines: Sequence[str]) -> tuple[int, int]:
        """An LSP ``Position`` in client units -> (0-based line, code-point column).

        ``lines`` are without terminators. Past a line's end clamps to the line's end; past the
        last line gives ``(len(lines), 0)``, which ``LineIndex.offset`` maps to the text's end.
        """
        if position.line >= len(lines):
            return len(lines), 0
        line = max(position.line, 0)
        return line, self.from_client_column(lines[line], position.character)

    def lsp_range(self, span: Span, lines: Sequence[str]) -> types.Range:
        """A core :class:`Span` (0-based lines, code-point columns) -> an LSP ``Range``.

        ``lines`` are the text's lines without terminators (``split_lines``).
        """
        return types.Range(
            start=self.lsp_position(span.start_line, span.start_col, lines),
            end=self.lsp_position(span.end_line, span.end_col, lines),
        )

    def core_span(self, range: types.Range, lines: Sequence[str]) -> Span:
        """An LSP ``Range`` in client units -> a core :class:`Span` (code-point columns).

        ``lines`` are without terminators; clamping as in :meth:`core_position`.
        """
        start_line, start_col = self.core_position(range.start, lines)
        end_line, end_col = self.core_position(range.end, lines)
        return Span(start_line, start_col, end_line, end_col)

    # ----------------------------------------------- pygls PositionCodec API
    # pygls's TextDocument passes lines *with* their terminators; strip them so clamping
    # happens at the line's last character, never between ``\r`` and ``\n``.

    def client_num_units(self, string: str) -> int:
        """Length of ``string`` in client units (pygls API)."""
        return self.units(string)

    def position_from_client_units(
        self, lines: Sequence[str], position: types.Position
    ) -> ServerTextPosition:
        """Client-unit position -> code-point ``ServerTextPosition`` (pygls API)."""
        if position.line >= len(lines):
            return ServerTextPosition(len(lines), 0)
        line = max(position.line, 0)
        text = strip_terminator(lines[line])
        return ServerTextPosition(line, self.from_client_column(text, position.character))

    def position_to_client_units(
        self, lines: Sequence[str], position: ServerTextPosition | types.Position
    ) -> types.Position:
        """Code-point position -> client-unit ``Position`` (pygls API)."""
        if position.line >= len(lines):
            return types.Position(line=len(lines), character=0)
        line = max(position.line, 0)
        text = strip_terminator(lines[line])
        return types.Position(line=line, character=self.to_client_column(text, position.character))

    def range_from_client_units(self, lines: Sequence[str], range: types.Range) -> ServerTextRange:
        """Client-unit range -> code-point ``ServerTextRange`` (pygls API)."""
        return ServerTextRange(
            start=self.position_from_client_units(lines, range.start),
            end=self.position_from_client_units(lines, range.end),
        )

    def range_to_client_units(
        self, lines: Sequence[str], range: ServerTextRange | types.Range
    ) -> types.Range:
        """Code-point range -> client-unit ``Range`` (pygls API)."""
        return types.Range(
            start=self.position_to_client_units(lines, range.start),
            end=self.position_to_client_units(lines, range.end),
        )
