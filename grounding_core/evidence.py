"""Evidence documents: raw bytes -> a parsed document, or a reason it cannot be indexed.

SPEC §3. Pure: no file system access (the scanner in ``store.py`` reads the bytes). Lines are
1-based in every public field here, as in citations.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import yaml

from .model import FieldLine, Span
from .text import char_name, shorten, split_lines, strip_bom

LIST_MARKERS = ("- ", "* ", "+ ")
"""The bullet markers (SPEC §3); ordered markers are in :data:`LIST_MARKER_RE`."""

_DIGIT = "[0-9\uff10-\uff19]"  # ASCII or full-width ０-９
_CJK_NUMERAL = "[一二三四五六七八九十]{1,3}"
_SPACE = "[ \t\u3000]"
LIST_MARKER_RE = re.compile(
    rf"{_SPACE}*"                                   # indentation (U+3000 included)
    rf"(?:[-*+] {_SPACE}*)?"                        # at most one bullet
    r"(?:"                                          # at most one ordered marker:
    rf"{_DIGIT}{{1,9}}(?:[.)] |[、．）])"             #   1. 2) 3、 4． 5） (1 to 9 digits)
    rf"|[(]{_DIGIT}{{1,9}}[)] |（{_DIGIT}{{1,9}}）"    #   (6) （7）
    rf"|{_CJK_NUMERAL}、|（{_CJK_NUMERAL}）"            #   一、 （二）
    r"|[\u2460-\u2473]"                            #   ① to ⑳
    rf"){{0,1}}{_SPACE}*"                           # and the spaces after them
)
"""SPEC §3/§15 list markers: what :func:`split_marker` removes from the start of a line.

Anchored (``match``), no nested quantifiers: linear in the marker's length. Ten or more
digits are not a marker (the ``{1,9}`` then needs a ``.``/``)``/``、`` where a digit is)."""

_MARKER_START = frozenset(" \t\u3000-*+(（0123456789\uff10\uff11\uff12\uff13\uff14\uff15"
                          "\uff16\uff17\uff18\uff19一二三四五六七八九十"
                          + "".join(chr(c) for c in range(0x2460, 0x2474)))
"""First characters a line with a list marker can start with (a fast path for field_lines)."""
VERSION_RE = re.compile(r"[1-9][0-9]*")
ISO_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
DOC_ID_FORBIDDEN = re.compile(r"[\s@:\[\]\"\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
"""Characters a doc_id may not hold (SPEC §3): whitespace, ``@ : [ ] "``, and the invisible
format characters (zero-width spaces and joiners, bidi marks and isolates, word joiner, BOM),
which would make two doc_ids that look the same (docs/decisions.md, "Evidence")."""
DOC_ID_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

FRONT_MATTER_KEYS = ("doc_id", "subject", "title", "version", "status", "effective_from", "effective_until")
STATUSES = ("active", "revoked")


YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader on libyaml when the wheel has it (about 10x faster), else pure Python."""


YAML_MERGE_TAG = "tag:yaml.org,2002:merge"
"""The tag PyYAML's resolver gives a plain ``<<`` key (YAML 1.1 merge keys)."""

MAX_FRONT_MATTER_NESTING = 64
"""Front matter nested deeper than this (flow brackets, block collections) is refused before
a YAML parser composes it: PyYAML's composer can overflow the C stack on deep nesting (a
crash, not an exception), and its scanner slows down on deep flow nesting."""

_BRACKETS = re.compile(r"[\[\]{}]")
_BLOCK_RUN = re.compile(r"(?:[-?:](?:[ \t]+|$))+")
_OPENS = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
          yaml.BlockMappingStartToken)
_CLOSES = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)


def front_matter_too_deep(source: str) -> bool:
    """True when YAML ``source`` nests collections deeper than :data:`MAX_FRONT_MATTER_NESTING`.

    Nesting is counted on the YAML scanner's tokens (collection starts and ends), so
    brackets inside quoted or plain scalars never count (``title: "[[[…"`` is one string).
    Cheap: a regex pass gives an upper bound first (brackets, block indicators starting a
    line, line count), and only front matter over it is scanned, and only up to the limit.
    A scanner error is not "too deep" (the composer reports it as a YAML error), except
    libyaml's own nesting limit.
    """
    if not _may_be_too_deep(source):
        return False
    depth = 0
    try:
        for token in yaml.scan(source, Loader=YAML_LOADER):
            if isinstance(token, _OPENS):
                depth += 1
                if depth > MAX_FRONT_MATTER_NESTING:
                    return True
            elif isinstance(token, _CLOSES):
                depth -= 1
    except yaml.YAMLError as exc:
        # libyaml's own limit (1000 levels) can fire while it still holds tokens back
        return "nesting depth" in str(getattr(exc, "problem", "") or "")
    return False


def _may_be_too_deep(source: str) -> bool:
    """An upper bound of :func:`front_matter_too_deep`: every level of nesting opens with a
    flow bracket, or a block collection on a new line or after ``- ``/``? ``/``: `` at the
    start of a line, so their count bounds the depth.
    """
    bound = sum(1 for match in _BRACKETS.finditer(source) if match[0] in "[{")
    for line in source.split("\n"):
        run = _BLOCK_RUN.match(line.lstrip(" "))
        bound += 1 + (sum(run[0].count(c) for c in "-?:") if run is not None else 0)
        if bound > MAX_FRONT_MATTER_NESTING:
            return True
    return bound > MAX_FRONT_MATTER_NESTING


class EvidenceError(ValueError):
    """A file that cannot be indexed. ``name`` is the SPEC §7 name, ``line`` 1-based."""

    def __init__(self, name: str, message: str, line: int = 1, hint: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.message = message
        self.line = line
        self.hint = hint


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """Evidence front matter (SPEC §3). ``end_line`` is the 1-based closing ``---`` line, 0 if none."""

    end_line: int = 0
    doc_id: str | None = None
    subject: str | None = None
    title: str | None = None
    version: int | None = None
    status: str = "active"
    effective_from: dt.date | None = None
    effective_until: dt.date | None = None


def split_marker(line: str) -> str:
    """A line's ``text`` (SPEC §3, §15): the line without its indentation and list markers.

    Removed from the start, in order: indentation (spaces, tabs, U+3000), at most one bullet
    (``- ``, ``* ``, ``+ ``), at most one ordered marker (``1. ``, ``2) ``, ``3、``, ``１．``,
    ``(4) ``, ``（5）``, ``一、``, ``（二）``, ``①``...), and the spaces after them. The one
    marker rule of the product: evidence field lines, a claim's ``text``, the JSON ``text``
    check and the answer generator all call it. ``"- 2. 发货时间：x"`` -> ``"发货时间：x"``.
    """
    if not line or line[0] not in _MARKER_START:
        return line
    match = LIST_MARKER_RE.match(line)
    return line[match.end():] if match is not None and match.end() else line


def parse_field_line(line: str, separators: Sequence[str]) -> FieldLine | None:
    """SPEC §3 field line: after the list markers (:func:`split_marker`), text holding a separator.

    ``field`` is the text before the earliest separator that is not between two digits
    (:func:`_separator_pattern`), stripped; ``value`` the text after it, stripped. Returns
    None when no separator occurs or the field would be empty.
    """
    text = split_marker(line)
    match = _separator_pattern(tuple(separators)).search(text)
    if match is None:
        return None
    field = text[: match.start()].strip()
    if not field:
        return None
    return FieldLine(text=text, field=field, value=text[match.end() :].strip())


@functools.cache
def _separator_pattern(separators: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``separators``, in their order (regex alternation is leftmost, then first),
    except an occurrence between two digits (``\\d``: ASCII, full-width and other decimal
    digits): ``08:30``, ``16：30`` and ``3:1`` are a time or a ratio, never the end of a field
    name (docs/decisions.md "Field lines": with ``:`` configured, ``08:30 签到：主楼`` is the
    field ``08:30 签到``, not ``08``).
    """
    # each branch starts with its separator, so the search keeps SRE's literal-prefix scan (a
    # leading lookbehind made the parse of every line 3-10x slower); the lookahead then
    # refuses the occurrence only when a digit precedes it and one follows
    return re.compile("|".join(f"{re.escape(sep)}(?!(?<=\\d{re.escape(sep)})\\d)" for sep in separators))


def decode_evidence(data: bytes) -> str:
    """Bytes -> text with the BOM removed. Raises :class:`EvidenceError` (unreadable-evidence)."""
    if b"\x00" in data:
        return _unreadable("it holds a NUL byte (binary file?)", data.index(b"\x00"), data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _unreadable(f"it is not valid UTF-8 (byte 0x{data[exc.start]:02x})", exc.start, data)
    return strip_bom(text)


def _unreadable(reason: str, byte_offset: int, data: bytes) -> str:
    line = data.count(b"\n", 0, byte_offset) + 1
    raise EvidenceError(
        "unreadable-evidence",
        f"evidence file not indexed: {reason} at byte {byte_offset}",
        line=line,
        hint="Save the file as UTF-8 text; nothing else in the index is affected.",
    )


def parse_front_matter(lines: Sequence[str]) -> FrontMatter:
    """Parse the YAML front matter at the top of ``lines`` (SPEC §3).

    Raises :class:`EvidenceError` ``invalid-front-matter`` for unclosed front matter, YAML
    errors, a repeated key, or an empty/null/bad value of a known key.
    """
    if not lines or lines[0] != "---":
        return FrontMatter()
    try:
        end = lines.index("---", 1)
    except ValueError:
        raise EvidenceError(
            "invalid-front-matter",
            "front matter opened with '---' on line 1 is never closed",
            hint="Add a closing '---' line after the front matter keys.",
        ) from None
    source = "\n".join(lines[1:end])
    if front_matter_too_deep(source):
        raise EvidenceError(
            "invalid-front-matter",
            f"front matter is nested too deeply to read (more than {MAX_FRONT_MATTER_NESTING} levels)",
            line=2, hint="Front matter keys take single values; remove the nesting.",
        )
    try:
        node = yaml.compose(source, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        _reject_full_width_key_colon(lines[1:end])
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EvidenceError(
            "invalid-front-matter", f"front matter is not valid YAML: {problem}", line=line,
            hint="Fix the YAML between the '---' lines.",
        ) from None
    except RecursionError:
        raise EvidenceError(
            "invalid-front-matter", "front matter is nested too deeply to read", line=2,
            hint="Front matter keys take single values; remove the nesting.",
        ) from None
    values: dict[str, tuple[str, int]] = {}
    if node is None:
        return FrontMatter(end_line=end + 1)
    if not isinstance(node, yaml.MappingNode):
        _reject_full_width_key_colon(lines[1:end])
        raise EvidenceError(
            "invalid-front-matter", "front matter must be a mapping of keys to values", line=2
        )
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 2
        if key in seen:
            raise EvidenceError(
                "invalid-front-matter", f"key {key!r} is repeated in the front matter", line=line,
                hint=f"Keep one {key!r} line.",
            )
        seen.add(key)
        if key_node.tag == YAML_MERGE_TAG:
            raise EvidenceError(
                "invalid-front-matter",
                "a YAML merge key ('<<') is not supported in front matter: it could carry"
                " status, version or dates that Grounding would not see", line=line,
                hint="Write the keys out (doc_id, version, status, effective_from ...).",
            )
        if key not in FRONT_MATTER_KEYS:
            continue
        if not isinstance(value_node, yaml.ScalarNode):
            raise EvidenceError("invalid-front-matter", f"{key} must be a single value", line=line)
        if value_node.tag == "tag:yaml.org,2002:null" or value_node.value == "":
            raise EvidenceError(
                "invalid-front-matter", f"{key} is empty or null", line=line,
                hint=f"Give {key} a value or remove the line.",
            )
        values[key] = (str(value_node.value), line)
    return _front_matter_from(values, end + 1)


_FULL_WIDTH_KEY_RE = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_-]*)[ \t\u3000]*([\uff1a\ufe55\ufe13])")
"""A front-matter line whose key is followed by a full-width (or small/vertical) colon: an
input-method slip YAML does not read as a key (``version：1``)."""


def _reject_full_width_key_colon(body: Sequence[str]) -> None:
    """Raise ``invalid-front-matter`` naming the first line of ``body`` (the lines between the
    ``---`` lines, reported as line 2 on) whose ASCII key is followed by a full-width colon.

    Called when the front matter does not parse as a mapping, so the message names the slip
    and its line instead of the parser's complaint about the line after it. SPEC §3;
    docs/decisions.md "Full-width colon in front matter".
    """
    for offset, text in enumerate(body):
        match = _FULL_WIDTH_KEY_RE.match(text)
        if match is None:
            continue
        key, colon = match[1], match[2]
        column = match.start(2) + 1
        value = text[match.end():].strip()
        raise EvidenceError(
            "invalid-front-matter",
            f"column {column} of the line: {char_name(colon)} after the key {key!r} where YAML"
            " needs ':' (an input-method slip), so the line is not read as that key",
            line=offset + 2,
            hint=f"Write it as '{key}: {value}' (an ASCII colon and a space)." if value
            else f"Write the key as '{key}:' (an ASCII colon).",
        )


def _front_matter_from(values: dict[str, tuple[str, int]], end_line: int) -> FrontMatter:
    def bad(key: str, why: str, hint: str = "") -> EvidenceError:
        return EvidenceError("invalid-front-matter", f"{key}: {why}", line=values[key][1], hint=hint)

    doc_id = values.get("doc_id", (None, 0))[0]
    if doc_id is not None and DOC_ID_FORBIDDEN.search(doc_id):
        invisible = DOC_ID_INVISIBLE.sub(lambda m: f"\\u{ord(m[0]):04x}", doc_id)  # shown as \uXXXX
        shown = f"'{invisible}'" if invisible != doc_id else repr(doc_id)
        raise bad("doc_id", f"{shown} holds whitespace, '@', ':', '[', ']', '\"' or an invisible character",
                  "Choose a doc_id without those characters, e.g. 'returns-policy'.")
    version = None
    if "version" in values:
        raw = values["version"][0]
        if not VERSION_RE.fullmatch(raw):
            raise bad("version", f"{raw!r} is not a positive integer without leading zeros")
        if len(raw) > 18:
            raise bad("version", f"{shorten(raw)} is too large (at most 18 digits)")
        version = int(raw)
    status = values.get("status", ("active", 0))[0]
    if status not in STATUSES:
        raise bad("status", f"{status!r} is neither 'active' nor 'revoked'")
    dates: dict[str, dt.date | None] = {}
    for key in ("effective_from", "effective_until"):
        raw_date = values.get(key, (None, 0))[0]
        dates[key] = None
        if raw_date is not None:
            try:
                if not ISO_DATE_RE.fullmatch(raw_date):
                    raise ValueError
                dates[key] = dt.date.fromisoformat(raw_date)
            except ValueError:
                raise bad(key, f"{raw_date!r} is not an ISO date YYYY-MM-DD") from None
    start, until = dates["effective_from"], dates["effective_until"]
    if start is not None and until is not None and until < start:
        raise bad("effective_until", f"{until.isoformat()} is earlier than effective_from {start.isoformat()},"
                  " so the document would never be active",
                  "Swap the two dates, or correct the one that is wrong.")
    return FrontMatter(
        end_line=end_line,
        doc_id=doc_id,
        subject=values.get("subject", (None, 0))[0],
        title=values.get("title", (None, 0))[0],
        version=version,
        status=status,
        effective_from=dates["effective_from"],
        effective_until=dates["effective_until"],
    )


def default_doc_id(rel_path: str) -> str:
    """SPEC §3: path relative to the evidence root, ``/``-separated, without extension."""
    head, _, name = rel_path.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return f"{head}/{stem}" if head else stem


@dataclass(frozen=True)
class EvidenceDocument:
    """One parsed evidence file (SPEC §3).

    ``lines[0]`` is line 1. ``field_lines`` maps 1-based body line numbers to their fields
    (front matter lines are never field lines).
    """

    path: str
    sha256: str
    text: str
    lines: tuple[str, ...]
    front: FrontMatter
    doc_id: str
    separators: tuple[str, ...]
    subject_fields: tuple[str, ...] = ("主题",)

    @cached_property
    def field_lines(self) -> dict[int, FieldLine]:
        # parse_field_line() inlined: one regex search finds the earliest separator that is
        # not between two digits (the first listed wins a tie, as there); this runs for every
        # line of every document
        out: dict[int, FieldLine] = {}
        search = _separator_pattern(self.separators).search
        marker_match, marker_start = LIST_MARKER_RE.match, _MARKER_START
        lines = self.lines
        for number in range(self.front.end_line + 1, len(lines) + 1):
            line = lines[number - 1]
            text = line
            if line and line[0] in marker_start:  # split_marker() inlined, same rule
                marker = marker_match(line)
                if marker is not None and marker.end():
                    text = line[marker.end():]
            match = search(text)
            if match is not None:
                field = text[: match.start()].strip()
                if field:
                    out[number] = FieldLine(text, field, text[match.end() :].strip())
        return out

    @cached_property
    def subject(self) -> str | None:
        if self.front.subject is not None:
            return self.front.subject
        for field_line in self.field_lines.values():
            if field_line.field in self.subject_fields and field_line.value:
                return field_line.value
        return None

    @property
    def title(self) -> str:
        return self.front.title or self.doc_id

    def is_front_matter_line(self, line: int) -> bool:
        return 1 <= line <= self.front.end_line


def parse_evidence(
    rel_path: str,
    data: bytes,
    separators: Sequence[str] = ("：",),
    subject_fields: Sequence[str] = ("主题",),
) -> EvidenceDocument:
    """Parse one evidence file's raw bytes (SPEC §3).

    ``rel_path`` is ``/``-separated, relative to the evidence root. Raises
    :class:`EvidenceError` with name ``unreadable-evidence`` (not UTF-8, NUL byte) or
    ``invalid-front-matter`` (front matter or default doc_id invalid).
    """
    sha = hashlib.sha256(data).hexdigest()
    text = decode_evidence(data)
    return parse_evidence_text(rel_path, text, sha, separators, subject_fields)


def parse_evidence_text(
    rel_path: str,
    text: str,
    sha256: str,
    separators: Sequence[str] = ("：",),
    subject_fields: Sequence[str] = ("主题",),
) -> EvidenceDocument:
    """Parse already decoded evidence text (BOM removed) whose raw-bytes hash is ``sha256``."""
    lines = tuple(split_lines(text))
    front = parse_front_matter(lines)
    doc_id = front.doc_id
    if doc_id is None:
        doc_id = default_doc_id(rel_path)
        if not doc_id or DOC_ID_FORBIDDEN.search(doc_id):
            raise EvidenceError(
                "invalid-front-matter",
                f"the default doc_id {doc_id!r} (from the file path) holds whitespace, '@', ':',"
                " '[', ']' or '\"'",
                hint="Add front matter with an explicit doc_id, e.g. '---\\ndoc_id: my-doc\\n---'.",
            )
    return EvidenceDocument(
        path=rel_path, sha256=sha256, text=text, lines=lines, front=front, doc_id=doc_id,
        separators=tuple(separators), subject_fields=tuple(subject_fields),
    )


def line_span(lines: Sequence[str], line: int) -> Span:
    """The whole 1-based ``line`` as a :class:`Span` (0-based, code points)."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return Span.line(line - 1, 0, len(text))
