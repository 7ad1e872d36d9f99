"""The one line splitter and the normalisation rules shared by the index, drafts and server.

SPEC §3: only ``\\r\\n``, ``\\r`` and ``\\n`` end a line (never U+2028, U+0085, form feed or
the other breaks ``str.splitlines`` honours); the terminator is not part of the line; a final
terminator does not start an extra empty line. Lines are numbered from 1 in the SPEC and in
user-facing output; the functions here return Python lists, so index 0 is line 1.

SPEC §7.3/§7.4: ``normalize`` is NFKC followed by removing all whitespace. It is used for
value comparison only, never for quotes, which stay verbatim.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence

LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""The only line terminators (SPEC §3)."""

_WHITESPACE = re.compile(r"\s+")

VALUE_TRAILING_PUNCTUATION = "。！？!?.,，;；"
"""Stripped from the end of a value before the claim-value check and GR110 (SPEC §7.3)."""

BOM = "\ufeff"


def split_lines(text: str) -> list[str]:
    """Split ``text`` into physical lines (SPEC §3).

    Returns a list of line texts without terminators; ``""`` gives ``[]``, ``"a\\n"`` gives
    ``["a"]`` and ``"a\\n\\n"`` gives ``["a", ""]``. U+2028, U+0085 and form feed stay inside
    their line.
    """
    if not text:
        return []
    if "\r" not in text:  # the common case: str.split is several times faster than the regex
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        return lines
    lines = LINE_BREAK.split(text)
    if lines[-1] == "" and LINE_BREAK.search(text[-2:]) is not None:
        lines.pop()
    return lines


def line_is(data: bytes, line: int, want: bytes, limit: int = 1024) -> bool:
    """True when 1-based ``line`` of the text whose UTF-8 bytes are ``data`` is exactly
    ``want`` (UTF-8 bytes holding neither CR nor LF), by :func:`split_lines`'s rule without
    splitting; False when it is not, when ``want`` is empty, or when more than ``limit``
    occurrences of ``want`` come before the line (undecided: the caller reads the lines).

    Each occurrence of ``want`` is found with ``bytes.find``, its line number counted with
    ``bytes.count`` from the previous one (``\r\n``, ``\r`` and ``\n`` end a line, once
    each), and it must span its whole line: a pass over the bytes up to the line, in C, with
    no string made. Raises ``ValueError`` for a ``want`` holding CR or LF.
    """
    if b"\n" in want or b"\r" in want:
        raise ValueError("a line holds no CR or LF")
    if not want or line < 1:
        return False
    crs = b"\r" in data
    size, length = len(data), len(want)
    number, last = 1, 0
    at = data.find(want)
    for _ in range(limit):
        if at < 0:
            return False
        # no terminator straddles ``last`` or ``at``: each starts an occurrence of ``want``
        number += data.count(b"\n", last, at)
        if crs:
            number += data.count(b"\r", last, at) - data.count(b"\r\n", last, at)
        if number > line:
            return False
        last = at
        end = at + length
        if (number == line and (at == 0 or data[at - 1] in (10, 13))
                and (end == size or data[end] in (10, 13))):
            return True
        at = data.find(want, at + 1)
    return False


def split_lines_keepends(text: str) -> list[str]:
    """Like :func:`split_lines` but every line keeps its terminator (``"a\\r\\n"``).

    ``"".join(split_lines_keepends(t)) == t`` always holds; used by the server's document model.
    """
    out: list[str] = []
    start = 0
    for match in LINE_BREAK.finditer(text):
        out.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


class LineIndex:
    """Maps code-point offsets of one text to 0-based (line, column) pairs and back.

    Columns count Unicode code points. A position may sit on a terminator (the column just
    past the line's last character). Built once per text, O(log n) per lookup.
    """

    __slots__ = ("_starts", "_text_len", "lines")

    def __init__(self, text: str) -> None:
        self.lines: list[str] = split_lines(text)
        starts = [0]
        for match in LINE_BREAK.finditer(text):
            starts.append(match.end())
        self._starts = starts
        self._text_len = len(text)

    def position(self, offset: int) -> tuple[int, int]:
        """Code-point offset -> (0-based line, code-point column)."""
        offset = max(0, min(offset, self._text_len))
        line = bisect_right(self._starts, offset) - 1
        return line, offset - self._starts[line]

    def offset(self, line: int, column: int) -> int:
        """(0-based line, code-point column) -> code-point offset, clamped to the text."""
        if line >= len(self._starts):
            return self._text_len
        return min(self._starts[line] + column, self._text_len)


def strip_bom(text: str) -> str:
    """Remove one leading UTF-8 byte order mark (SPEC §3)."""
    return text[1:] if text.startswith(BOM) else text


def normalize(text: str) -> str:
    """SPEC §7.4 comparison rule: Unicode NFKC, then all whitespace removed."""
    return _WHITESPACE.sub("", unicodedata.normalize("NFKC", text))


def normalize_value(value: str) -> str:
    """SPEC §7.3: :func:`normalize`, then trailing ``。！？!?.,，;；`` stripped."""
    return normalize(value).rstrip(VALUE_TRAILING_PUNCTUATION)


def has_letter_or_digit(text: str) -> bool:
    """True if any character is a Unicode letter or digit (CJK ideographs count)."""
    return any(ch.isalnum() for ch in text)


def describe_difference(expected: str, actual: str, what: str = "the quote",
                        source: str = "the source line") -> str | None:
    """Name the first invisible or look-alike difference between two strings, or None.

    Used by quote messages (ANCHORS: name the exact character and column). Columns are
    1-based code points of ``actual`` and always say so: ``"column 7 of the quote: U+00A0
    NO-BREAK SPACE where the source has U+0020 SPACE"``, ``"the quote ends at column 8 of the
    source line, which goes on with ' A'"`` (``what`` / ``source`` name the two strings).
    """
    if expected == actual:
        return None
    if unicodedata.normalize("NFC", expected) == unicodedata.normalize("NFC", actual):
        quote_form, source_form = _normal_form(actual), _normal_form(expected)
        if quote_form == source_form:
            forms = f"{what} and the source use different Unicode normalisation forms"
        else:
            forms = f"{what} is in Unicode {quote_form} while the source is {source_form}"
        return forms + "; the characters look identical but the code points differ"
    limit = min(len(expected), len(actual))
    index = next((i for i in range(limit) if expected[i] != actual[i]), limit)
    if index == limit:
        if len(actual) > len(expected):
            extra = actual[limit:]
            return f"column {limit + 1} of {what}: extra text at the end: {_char_list(extra)}"
        return (f"{what} ends at column {limit + 1} of {source}, which goes on with"
                f" {shorten(expected[limit:], 40, quote=True)}")
    return (
        f"column {index + 1} of {what}: {char_name(actual[index])} where the source has "
        f"{char_name(expected[index])}"
    )


def shorten(text: str, limit: int = 80, quote: bool = False) -> str:
    """``text`` for a message: at most ``limit`` code points, then how many were left out.

    ``quote`` shows it as a Python literal (``repr``). Messages echo evidence and drafts, and a
    one-megabyte line must not become a one-megabyte diagnostic.
    """
    head = text[:limit]
    shown = repr(head) if quote else head
    return shown if len(text) <= limit else f"{shown}… ({len(text) - limit} more characters)"


def _normal_form(text: str) -> str:
    if unicodedata.is_normalized("NFC", text):
        return "NFC"
    if unicodedata.is_normalized("NFD", text):
        return "NFD"
    return "a mixed form"


_CONTROL_NAMES = {
    "\t": "CHARACTER TABULATION", "\n": "LINE FEED", "\x0b": "LINE TABULATION",
    "\x0c": "FORM FEED", "\r": "CARRIAGE RETURN", "\x85": "NEXT LINE", "\x00": "NULL",
    "\x1b": "ESCAPE", "\x7f": "DELETE",
}
"""Names for control characters, which ``unicodedata.name`` does not know (Unicode aliases)."""


def char_name(ch: str) -> str:
    """``"U+3000 IDEOGRAPHIC SPACE"`` (plus the character itself when it is visible).

    Control characters get their Unicode alias (``U+0000 NULL``); used by every message that
    names a character.
    """
    name = _CONTROL_NAMES.get(ch) or unicodedata.name(ch, "control character"
                                                      if unicodedata.category(ch) == "Cc"
                                                      else "unnamed character")
    shown = ch if ch.isprintable() and not ch.isspace() else ""
    return f"U+{ord(ch):04X} {name}" + (f" ({shown})" if shown else "")


def _char_list(chars: Sequence[str]) -> str:
    items = [char_name(c) for c in chars[:3]]
    more = f" and {len(chars) - 3} more" if len(chars) > 3 else ""
    return ", ".join(items) + more


def printable_path(path: str) -> str:
    """``path`` with the bytes of an undecodable file name shown as ``\\xNN``.

    A name read from disk that is not valid UTF-8 (GBK or Latin-1 from an unzipped Windows
    archive) arrives from ``os`` with surrogate escapes (``os.fsdecode``); such a string
    cannot be printed, stored in SQLite or hashed. Returns the path unchanged when it is
    valid (``"caf\\udce9.md"`` gives ``"caf\\\\xe9.md"``, ten characters).
    """
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no decoder escaped
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def is_printable_path(path: str) -> bool:
    """True when ``path`` holds no surrogate (it is valid UTF-8 text); see :func:`printable_path`."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
