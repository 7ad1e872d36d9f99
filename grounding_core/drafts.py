"""Drafts -> claims with spans (SPEC §5). Markdown through markdown-it-py; JSON answers.

Pure: text in, :class:`ParsedDraft` out; never raises on bad input (problems become
``malformed-citation`` findings). Spans are 0-based lines and code-point columns into the
draft text, split with the SPEC §3 splitter (markdown-it's own line maps agree with it: it
normalises only ``\\r\\n``/``\\r`` to ``\\n``).

Markdown decisions where SPEC §5.1 is silent (documented in docs/decisions.md):

- a ``.`` ends a sentence when followed by whitespace, a line end, or a footnote reference;
- a definition must start at column 1 of a top-level line; only its first line is read;
- a malformed ``context`` is ``invalid-context`` (fail closed: nothing is visible), not a
  reason to ignore the front matter;
- a backslash inside QUOTE is an ordinary character (no escaping, as SPEC §5.1 says), so a
  quote keeps any ``\\`` that the evidence line has, and gains none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import json_source_map
import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from . import memory as memory_claims
from .evidence import DOC_ID_FORBIDDEN, YAML_LOADER, front_matter_too_deep
from .memory import MemoryUnitSpec
from .model import CLAIM_KEYS, FIRST_LINE, CitationRef, Claim, Finding, MemoryRef, Span
from .text import LineIndex, has_letter_or_digit, shorten, split_lines

NUMBER = r"[1-9][0-9]{0,17}"
"""A version or line number: SPEC's ``[1-9][0-9]*``, capped at 18 digits (no real document has
a longer one, and SQLite integers end at 2**63 - 1)."""
ID_RE = re.compile(rf"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>{NUMBER}):(?P<line>{NUMBER})")
HEX_RE = re.compile(r"[0-9a-f]{8,64}")
UNIT_RE = re.compile(
    rf"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>{NUMBER})(?::(?P<start>{NUMBER})(?:-(?P<end>{NUMBER}))?)?"
)
REF_RE = re.compile(r"\[\^([^\]\s]+)\]")
CODE_SPAN_RE = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")
"""A CommonMark code span on one line: a backtick run closed by a run of the same length."""
SENTENCE_END = "。！？!?"
STATUSES = ("answered", "partial", "abstain", "conflict")
JSON_TOP_KEYS = ("status", "claims", "missing_fields", "question", "fields", "subject", "context",
                 *("reason", "support_scope", "same_key_sources_checked", "conflict_evidence",
                   "unsupported_terms", "subjects"))
"""Keys of a JSON answer; the second row is what ``grounding answer --format json`` adds (SPEC
§13), accepted so its output checks as it is, and not checked (docs/decisions.md)."""
QUOTE_LOOKALIKES = "“”„‟«»「」『』＂〝〞'‘’"


@dataclass(frozen=True, slots=True)
class ContextUnitSpec:
    """A visible unit: a whole version, or 1-based inclusive lines ``start..end``; or text."""

    doc_id: str
    version: int
    start: int | None = None
    end: int | None = None
    text: str | None = None


@dataclass(frozen=True)
class ContextSpec:
    """A draft's declared context (SPEC §6). ``error`` set means ``invalid-context``."""

    kind: str  # "units" | "log" | "query"
    units: tuple[ContextUnitSpec, ...] = ()
    log: str | None = None
    query: str | None = None
    limit: int | None = None
    reserve: int | None = None
    error: str | None = None
    memory_units: tuple[MemoryUnitSpec, ...] = ()
    """Memory units (SPEC §11): ``memory:...`` items of ``units`` and the ``memory`` key."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a Markdown paragraph with its references (label, span)."""

    text: str
    span: Span
    refs: tuple[tuple[str, Span], ...]


@dataclass
class ParsedDraft:
    """A draft read into claims (SPEC §5). ``fields`` pairs each required field with the
    span of its item in front matter (or the JSON value); ``uncited`` holds sentences with
    no reference (for GR110).
    """

    kind: str
    text: str
    lines: list[str]
    question: str | None = None
    fields: list[tuple[str, Span]] = field(default_factory=list)
    subject: str | None = None
    context: ContextSpec | None = None
    claims: list[Claim] = field(default_factory=list)
    uncited: list[Sentence] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    declared_status: str | None = None
    declared_status_span: Span = FIRST_LINE
    declared_missing: list[str] | None = None
    front_matter_lines: int = 0


def parse_draft(text: str, kind: str = "markdown") -> ParsedDraft:
    """Parse a draft; ``kind`` is ``"markdown"`` or ``"json"`` (``*.answer.json``)."""
    if kind == "json":
        return parse_json_answer(text)
    return parse_markdown(text)


def draft_kind(path: str) -> str:
    """``"json"`` for ``*.answer.json`` (and other ``.json``), else ``"markdown"``."""
    return "json" if path.endswith(".json") else "markdown"


# -- Markdown ------------------------------------------------------------------------------


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark").use(front_matter_plugin).use(footnote_plugin)
    md.disable("footnote_tail")  # keep definitions in place, with their line maps
    return md


@dataclass(frozen=True, slots=True)
class Definition:
    """A footnote definition line (SPEC §5.1). ``error`` set means malformed-citation."""

    label: str
    line: int
    span: Span
    id_text: str
    citation: CitationRef | None
    hash_prefix: str | None
    quote: str | None
    error: str | None = None
    hint: str = ""
    memory: MemoryRef | None = None
    """Set (and ``citation`` None) for a memory citation ``memory:S/K@N`` (SPEC §11)."""


def parse_markdown(text: str) -> ParsedDraft:
    """SPEC §5.1: front matter, definitions, sentences and claims of a Markdown draft."""
    lines = split_lines(text)
    draft = ParsedDraft(kind="markdown", text=text, lines=lines)
    tokens = _markdown().parse(text, {})
    definitions: dict[str, Definition] = {}
    paragraphs: list[Token] = []
    depth_footnote = 0
    front_seen = False
    for token in tokens:
        if token.type == "front_matter" and token.map:
            front_seen = True
            draft.front_matter_lines = token.map[1]
            _read_draft_front_matter(draft, token.content)
        elif token.type == "footnote_reference_open":
            depth_footnote += 1
            if depth_footnote == 1 and token.map:
                d = parse_definition(lines[token.map[0]], token.map[0], str(token.meta.get("label", "")))
                if d.label in definitions:
                    first = definitions[d.label]
                    draft.findings.append(Finding(
                        "malformed-citation", d.span if d.span.end_col else Span.line(d.line, 0, len(lines[d.line])),
                        f"[^{d.label}] is defined twice; the first definition (line {first.line + 1}) wins",
                        hint="Remove this definition or give it another label.",
                    ))
                else:
                    definitions[d.label] = d
        elif token.type == "footnote_reference_close":
            depth_footnote -= 1
        elif token.type == "inline" and depth_footnote == 0 and token.map:
            paragraphs.append(token)
    if not front_seen and lines and lines[0] == "---":
        draft.findings.append(Finding(
            "malformed-citation", Span.line(0, 0, 3),
            "the front matter opened on line 1 is never closed",
            hint="Add a closing '---' line after question/fields.",
        ))
    heading_inlines = {id(t) for t in _heading_inlines(tokens)}
    used: set[str] = set()
    for inline in paragraphs:
        if id(inline) in heading_inlines:
            continue
        for sentence in _sentences(inline, lines, set(definitions)):
            if not sentence.refs:
                draft.uncited.append(sentence)
                continue
            for label, ref_span in sentence.refs:
                definition = definitions.get(label)
                if definition is None:
                    draft.findings.append(Finding(
                        "malformed-citation", ref_span,
                        f"[^{label}] has no definition",
                        hint=f'Add a line "[^{label}]: DOC_ID@VERSION:LINE sha256:HASH "QUOTE"" '
                        "or use the insert-citation action.",
                    ))
                    draft.claims.append(Claim(sentence.text, sentence.span, ref_span, None, None, None, label))
                    continue
                used.add(label)
                if definition.error is not None:
                    draft.findings.append(Finding(
                        "malformed-citation", definition.span, definition.error,
                        hint=definition.hint, citation=definition.id_text or None,
                    ))
                draft.claims.append(Claim(
                    sentence.text, sentence.span, definition.span,
                    definition.citation if definition.error is None else None,
                    definition.hash_prefix, definition.quote, label,
                    memory=definition.memory if definition.error is None else None,
                ))
    draft.findings = _dedupe(draft.findings)
    unique: dict[tuple[Span, str | None], Claim] = {}
    for claim in draft.claims:
        unique.setdefault((claim.sentence_span, claim.label), claim)
    draft.claims = list(unique.values())
    return draft


def _heading_inlines(tokens: list[Token]) -> Iterator[Token]:
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            yield tokens[i + 1]


def parse_definition(line: str, line_no: int, label: str) -> Definition:
    """Parse one definition line ``[^label]: ID sha256:HEX "QUOTE"`` (SPEC §5.1), failing closed.

    ``line_no`` is 0-based. The span runs from the ID to the line's end (code points).
    """
    prefix = f"[^{label}]:"
    whole = Span.line(line_no, 0, len(line))
    if not line.startswith(prefix):
        return Definition(label, line_no, whole, "", None, None, None,
                          f"the definition of [^{label}] must start at column 1",
                          "Remove the indentation before '[^'.")
    rest = line[len(prefix):]
    id_col = len(prefix) + 1
    span = Span.line(line_no, min(id_col, len(line)), len(line))

    def bad(message: str, hint: str = "", id_text: str = "") -> Definition:
        return Definition(label, line_no, span, id_text, None, None, None, message, hint)

    shape = f'write it as [^{label}]: DOC_ID@VERSION:LINE sha256:HASH "WHOLE LINE"'
    if not rest.startswith(" ") or rest.startswith("  "):
        return bad(f"one space must follow '[^{label}]:'", shape)
    parts = rest[1:].split(" ", 2)
    id_text = parts[0]
    ref: CitationRef | None = None
    memory_ref: MemoryRef | None = None
    if memory_claims.is_memory_id(id_text):  # memory hook (SPEC §11): memory:SCOPE/KEY@VERSION
        shape = f'write it as [^{label}]: memory:SCOPE/KEY@VERSION sha256:HASH "KEY：VALUE"'
        memory_ref, problem = memory_claims.parse_memory_id(id_text)
        if memory_ref is None:
            return bad(problem, shape, id_text)
    else:
        m = ID_RE.fullmatch(id_text)
        if m is None:
            return bad(_id_problem(id_text), shape, id_text)
        ref = CitationRef(m["doc_id"], int(m["version"]), int(m["line"]))
    if len(parts) < 2 or not parts[1].startswith("sha256:"):
        return bad("the sha256 hash is missing after the citation id", shape, id_text)
    hex_text = parts[1][len("sha256:"):]
    if not HEX_RE.fullmatch(hex_text):
        if hex_text.lower() != hex_text and HEX_RE.fullmatch(hex_text.lower()):
            why = "the hash must be lowercase hex"
        elif len(hex_text) < 8 and re.fullmatch(r"[0-9a-f]*", hex_text):
            why = f"the hash {shorten(hex_text, 70, quote=True)} is too short: give 8 to 64 hex digits"
        else:
            why = f"the hash {shorten(hex_text, 70, quote=True)} is not 8 to 64 lowercase hex digits"
        return bad(why, shape, id_text)
    if len(parts) < 3:
        return bad("the quote is missing: put the whole cited line between straight double quotes",
                   shape, id_text)
    tail = parts[2]
    if not tail.startswith('"'):
        if tail[:1] and tail[0] in QUOTE_LOOKALIKES:
            return bad(f"the quote starts with {tail[0]!r} (U+{ord(tail[0]):04X}); only the straight"
                       ' double quote " (U+0022) is accepted', shape, id_text)
        return bad("the quote must start with a straight double quote \" right after one space",
                   shape, id_text)
    last = tail.rfind('"')
    if last == 0:
        return bad("the quote is not closed with a straight double quote \"", shape, id_text)
    after = tail[last + 1:]
    if after.strip(" "):
        return bad(f"only spaces may follow the closing quote, found {after.strip()!r}", shape, id_text)
    quote = tail[1:last]
    return Definition(label, line_no, span, id_text, ref, hex_text, quote, memory=memory_ref)


def _id_problem(id_text: str) -> str:
    shown = shorten(id_text, 60, quote=True)
    if "@" not in id_text:
        return f"{shown} is not a citation id: expected DOC_ID@VERSION:LINE, e.g. schedule@2:6"
    doc_id, _, rest = id_text.partition("@")
    if not doc_id or DOC_ID_FORBIDDEN.search(doc_id):
        return f"{shown}: the doc_id is empty or holds whitespace, '@', ':', '[', ']' or '\"'"
    version, _, line = rest.partition(":")
    if len(version) > 18 or len(line) > 18:
        return f"{shorten(id_text, quote=True)}: the version or line number is too large"
    if not re.fullmatch(r"[1-9][0-9]*", version):
        return f"{shown}: the version {shorten(version, 20, quote=True)} must be a positive integer (no leading zeros)"
    return f"{shown}: the line {shorten(line, 20, quote=True)} must be a positive integer (no leading zeros)"


def _sentences(inline: Token, lines: list[str], defined: set[str]) -> Iterator[Sentence]:
    """Split a paragraph's source lines into sentences (SPEC §5.1); never across lines."""
    assert inline.map is not None
    expected = _expected_refs(inline, defined)
    start, end = inline.map
    content_lines = inline.content.split("\n")
    for offset, line_no in enumerate(range(start, end)):
        raw = lines[line_no] if line_no < len(lines) else ""
        content = content_lines[offset].strip() if offset < len(content_lines) else raw.strip()
        col = raw.find(content) if content else len(raw)
        if col < 0:
            col = len(raw) - len(raw.lstrip())
        refs: list[tuple[str, int, int]] = []
        code = [(c.start(), c.end()) for c in CODE_SPAN_RE.finditer(raw)]
        for m in REF_RE.finditer(raw, col):
            if any(a <= m.start() < b for a, b in code):
                continue  # `[^x]` inside a code span is code, never a reference
            if m.start() > 0 and raw[m.start() - 1] == "\\":
                # ``\[^x]`` is literal text "[^x]"; _expected_refs listed it when x is undefined
                if expected and m[1] == expected[0] and m[1] not in defined:
                    expected.pop(0)
                continue
            if expected and m[1] == expected[0]:
                expected.pop(0)
                refs.append((m[1], m.start(), m.end()))
        yield from _split_line(raw, line_no, col, refs)


def _expected_refs(inline: Token, defined: set[str]) -> list[str]:
    out: list[str] = []
    for child in inline.children or []:
        if child.type == "footnote_ref":
            out.append(str(child.meta.get("label", "")))
        elif child.type == "text":
            out.extend(m[1] for m in REF_RE.finditer(child.content) if m[1] not in defined)
    return out


def _split_line(raw: str, line_no: int, start: int, refs: list[tuple[str, int, int]]) -> Iterator[Sentence]:
    ref_at = {s: (label, e) for label, s, e in refs}
    sentences: list[list[Any]] = []  # [start, end, refs]
    current: list[Any] | None = None
    i = start
    n = len(raw)
    while i < n:
        if i in ref_at:
            label, e = ref_at[i]
            if current is None:
                current = [i, e, []]
            current[2].append((label, Span.line(line_no, i, e)))
            current[1] = e
            i = e
            continue
        ch = raw[i]
        if current is None:
            if ch.isspace():
                i += 1
                continue
            current = [i, i + 1, []]
        current[1] = i + 1
        is_end = ch in SENTENCE_END or (
            ch == "." and (i + 1 == n or raw[i + 1].isspace() or (i + 1) in ref_at)
        )
        i += 1
        if is_end:
            # references directly after the end (spaces allowed) belong to this sentence
            j = i
            while True:
                k = j
                while k < n and raw[k] == " ":
                    k += 1
                if k in ref_at:
                    label, e = ref_at[k]
                    current[2].append((label, Span.line(line_no, k, e)))
                    current[1] = e
                    j = e
                else:
                    break
            i = j
            sentences.append(current)
            current = None
    if current is not None:
        sentences.append(current)
    for s, e, sentence_refs in sentences:
        text = raw[s:e].rstrip()
        e = s + len(text)
        if not has_letter_or_digit(REF_RE.sub("", text)):
            continue
        yield Sentence(text, Span.line(line_no, s, e), tuple(sentence_refs))


def _read_draft_front_matter(draft: ParsedDraft, content: str) -> None:
    """Fill question/fields/subject/context from YAML; bad keys are malformed-citation on line 1."""
    def malformed(message: str) -> None:
        draft.findings.append(Finding(
            "malformed-citation", Span.line(0, 0, 3), f"draft front matter: {message}",
            hint="Front matter keys: question (text), fields (list of field names), subject (text),"
            " context ({units: [...]}, {log: PATH} or {query: ..., limit: N, reserve: M}).",
        ))
        draft.question = None
        draft.fields = []
        draft.subject = None
        draft.context = None

    if front_matter_too_deep(content):
        malformed("nested too deeply to read")
        return
    try:
        node = yaml.compose(content, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        malformed(f"not valid YAML ({getattr(exc, 'problem', None) or exc})")
        return
    except RecursionError:
        malformed("nested too deeply to read")
        return
    if node is None:
        return
    if not isinstance(node, yaml.MappingNode):
        malformed("expected keys and values")
        return
    seen: set[str] = set()
    for key_node, value in node.value:
        key = str(key_node.value)
        if key in seen:
            malformed(f"key {key!r} is repeated")
            return
        seen.add(key)
        if key == "question":
            if not isinstance(value, yaml.ScalarNode):
                malformed("question must be text")
                return
            draft.question = str(value.value)
        elif key == "subject":
            if not isinstance(value, yaml.ScalarNode) or not value.value or value.tag.endswith(":null"):
                malformed("subject must be non-empty text")
                return
            draft.subject = str(value.value)
        elif key == "fields":
            items = value.value if isinstance(value, yaml.SequenceNode) else [value]
            fields_out: list[tuple[str, Span]] = []
            for item in items:
                if not isinstance(item, yaml.ScalarNode) or not item.value or item.tag.endswith(":null"):
                    malformed("fields must be a list of field names")
                    return
                # front matter content starts on file line 2 (line index 1)
                line = item.start_mark.line + 1
                col = item.start_mark.column
                end_col = item.end_mark.column if item.end_mark.line == item.start_mark.line else col
                fields_out.append((str(item.value), Span.line(line, col, end_col)))
            draft.fields = fields_out
        elif key == "context":
            draft.context = parse_context_node(value)
    return


def parse_context_node(node: Any) -> ContextSpec:
    """SPEC §6 context forms from a YAML node (or plain JSON value via :func:`parse_context_value`)."""
    if isinstance(node, yaml.Node):
        try:
            value = yaml.safe_load(yaml.serialize(node))
        except (yaml.YAMLError, RecursionError, ValueError):
            return ContextSpec("units", error="context is not valid YAML")
    else:
        value = node
    return parse_context_value(value)


def parse_context_value(value: Any) -> ContextSpec:
    """Validate a context value; returns a spec with ``error`` when it cannot be used."""
    if not isinstance(value, dict):
        return ContextSpec("units", error="context must be a mapping with units, log or query")
    forms = [k for k in ("units", "log", "query") if k in value]
    unknown = sorted(set(value) - {"units", "log", "query", "limit", "reserve", "memory"})
    if len(forms) != 1 or unknown:
        return ContextSpec("units", error="context must have exactly one of units, log or query"
                           + (f" (unknown keys: {', '.join(map(str, unknown))})" if unknown else ""))
    form = forms[0]
    limit = value.get("limit")
    reserve = value.get("reserve")
    for name, number in (("limit", limit), ("reserve", reserve)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
            return ContextSpec(form, error=f"context.{name} must be a positive integer of tokens")
    memory_units: tuple[MemoryUnitSpec, ...] = ()
    if "memory" in value:  # memory hook (SPEC §11): the scopes a context may use
        memory_units, problem = memory_claims.context_memory_value(value["memory"])
        if problem is not None:
            return ContextSpec(form, error=problem)
    if form == "units":
        units = value["units"]
        if isinstance(units, str):
            units = [units]
        if not isinstance(units, list):
            return ContextSpec("units", error="context.units must be a list like [\"schedule@2\"]")
        parsed: list[ContextUnitSpec] = []
        for unit in units:
            if isinstance(unit, str) and memory_claims.is_memory_id(unit):  # memory hook (SPEC §11)
                memory_unit = memory_claims.parse_memory_unit(unit)
                if memory_unit is None:
                    return ContextSpec("units", error=f"context unit {unit!r} is not memory:SCOPE,"
                                       " memory:SCOPE/KEY or memory:SCOPE/KEY@VERSION")
                memory_units += (memory_unit,)
                continue
            m = UNIT_RE.fullmatch(unit) if isinstance(unit, str) else None
            if m is None:
                return ContextSpec("units", error=f"context unit {unit!r} is not DOC_ID@VERSION or"
                                   " DOC_ID@VERSION:START-END")
            start = int(m["start"]) if m["start"] else None
            end = int(m["end"]) if m["end"] else start
            if start is not None and end is not None and end < start:
                return ContextSpec("units", error=f"context unit {unit!r}: the range ends before it starts")
            parsed.append(ContextUnitSpec(m["doc_id"], int(m["version"]), start, end))
        return ContextSpec("units", units=tuple(parsed), limit=limit, reserve=reserve,
                           memory_units=memory_units)
    if form == "log":
        log = value["log"]
        if not isinstance(log, str) or not log:
            return ContextSpec("log", error="context.log must be a path relative to the workspace root")
        return ContextSpec("log", log=log, limit=limit, reserve=reserve, memory_units=memory_units)
    query = value["query"]
    if not isinstance(query, str) or not query.strip():
        return ContextSpec("query", error="context.query must be non-empty text")
    return ContextSpec("query", query=query, limit=limit, reserve=reserve, memory_units=memory_units)


def parse_context_log(text: str) -> tuple[ContextUnitSpec, ...]:
    """A pipeline's context log (SPEC §6). Raises ValueError with a reason when malformed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the context log is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("units"), list):
        raise ValueError('the context log must be {"units": [...]}')
    out: list[ContextUnitSpec] = []
    for i, unit in enumerate(data["units"]):
        if not isinstance(unit, dict):
            raise ValueError(f"units[{i}] must be an object")
        if "memory" in unit:
            continue  # a memory unit (SPEC §11), read by grounding_core.memory.log_units
        doc_id, version = unit.get("doc_id"), unit.get("version")
        if (not isinstance(doc_id, str) or not doc_id or not isinstance(version, int)
                or isinstance(version, bool) or version < 1):
            raise ValueError(f"units[{i}] needs a doc_id (text) and a version (positive integer)")
        if "lines" in unit:
            lines = unit["lines"]
            if (not isinstance(lines, list) or len(lines) != 2 or not all(_is_int(x) and x >= 1 for x in lines)
                    or lines[1] < lines[0]):
                raise ValueError(f"units[{i}].lines must be [first, last], 1-based, inclusive")
            out.append(ContextUnitSpec(doc_id, version, lines[0], lines[1]))
        elif "text" in unit:
            if not isinstance(unit["text"], str):
                raise ValueError(f"units[{i}].text must be text")
            out.append(ContextUnitSpec(doc_id, version, text=unit["text"]))
        else:
            raise ValueError(f"units[{i}] needs lines or text")
    return tuple(out)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- JSON answers ----------------------------------------------------------------------------


def parse_json_answer(text: str) -> ParsedDraft:
    """SPEC §5.2: a JSON answer with strict types; problems are malformed-citation findings."""
    lines = split_lines(text)
    draft = ParsedDraft(kind="json", text=text, lines=lines)
    index = LineIndex(text)

    def span_of(pointer: str, key: bool = False) -> Span:
        entry = spans.get(pointer)
        if entry is None:
            return FIRST_LINE
        start = entry.key_start if key and entry.key_start is not None else entry.value_start
        end = entry.key_end if key and entry.key_end is not None else entry.value_end
        a, b = index.position(start.position), index.position(end.position)
        return Span(a[0], a[1], b[0], b[1])

    def malformed(span: Span, message: str, hint: str = "") -> None:
        draft.findings.append(Finding("malformed-citation", span, message, hint=hint))

    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_int=_parse_int)
    except (json.JSONDecodeError, _DuplicateKey) as exc:
        if isinstance(exc, json.JSONDecodeError):
            line, col = index.position(exc.pos)
            malformed(Span.line(line, col, col + 1), f"not valid JSON: {exc.msg}")
        else:
            malformed(FIRST_LINE, str(exc))
        return draft
    except RecursionError:
        malformed(FIRST_LINE, "not valid JSON for an answer: it is nested too deeply")
        return draft
    try:
        spans = json_source_map.calculate(text)
    except Exception:  # the library raises its own error types for inputs json accepted
        spans = {}
    if not isinstance(data, dict):
        malformed(span_of(""), "a JSON answer must be an object with status, claims and missing_fields")
        return draft
    for key in sorted(set(data) - set(JSON_TOP_KEYS)):
        malformed(span_of(_ptr(key), key=True), f"unknown key {key!r} in the answer",
                  "Allowed keys: " + ", ".join(JSON_TOP_KEYS))
    for key in ("status", "claims", "missing_fields"):
        if key not in data:
            malformed(span_of(""), f"the answer has no {key!r}")
    status = data.get("status")
    if "status" in data:
        if status not in STATUSES:
            malformed(span_of("/status"), f"status {status!r} is not one of {', '.join(STATUSES)}")
        else:
            draft.declared_status = status
            draft.declared_status_span = span_of("/status")
    missing = data.get("missing_fields")
    if "missing_fields" in data:
        if isinstance(missing, list) and all(isinstance(x, str) for x in missing):
            draft.declared_missing = list(missing)
        else:
            malformed(span_of("/missing_fields"), "missing_fields must be a list of field names")
    if "question" in data:
        if isinstance(data["question"], str):
            draft.question = data["question"]
        else:
            malformed(span_of("/question"), "question must be text")
    if "subject" in data:
        if isinstance(data["subject"], str) and data["subject"]:
            draft.subject = data["subject"]
        else:
            malformed(span_of("/subject"), "subject must be non-empty text")
    if "fields" in data:
        fields_value = data["fields"]
        if isinstance(fields_value, str):
            draft.fields = [(fields_value, span_of("/fields"))]
        elif isinstance(fields_value, list) and all(isinstance(x, str) and x for x in fields_value):
            draft.fields = [(x, span_of(f"/fields/{i}")) for i, x in enumerate(fields_value)]
        else:
            malformed(span_of("/fields"), "fields must be a list of field names")
    if "context" in data:
        draft.context = parse_context_value(data["context"])
    claims = data.get("claims")
    if "claims" in data and not isinstance(claims, list):
        malformed(span_of("/claims"), "claims must be a list of claim objects")
        claims = []
    for i, claim in enumerate(claims or []):
        _json_claim(draft, claim, f"/claims/{i}", span_of, malformed)
    return draft


def _json_claim(draft: ParsedDraft, claim: Any, ptr: str, span_of: Any, malformed: Any) -> None:
    obj_span: Span = span_of(ptr)
    if memory_claims.is_json_memory_claim(claim):  # memory hook (SPEC §11): the seven keys
        draft.claims.append(memory_claims.json_claim(claim, ptr, span_of, malformed))
        return
    if not isinstance(claim, dict):
        malformed(obj_span, "a claim must be an object with the eight keys "
                  + ", ".join(CLAIM_KEYS))
        return
    ok = True
    for key in sorted(set(claim) - set(CLAIM_KEYS)):
        malformed(span_of(f"{ptr}/{_escape(key)}", key=True), f"unknown claim key {key!r}",
                  "A claim has exactly: " + ", ".join(CLAIM_KEYS))
        ok = False
    for key in CLAIM_KEYS:
        if key not in claim:
            malformed(obj_span, f"the claim has no {key!r}", "A claim has exactly: " + ", ".join(CLAIM_KEYS))
            ok = False
            continue
        value = claim[key]
        vspan = span_of(f"{ptr}/{key}")
        if key in ("version", "line"):
            if not _is_int(value) or value < 1:
                got = shorten(json.dumps(value, ensure_ascii=False))
                malformed(vspan, f"{key} must be a positive integer, got {got}")
                ok = False
        elif key == "sha256":
            if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
                malformed(vspan, "sha256 must be 64 lowercase hex digits (the full hash)")
                ok = False
        elif not isinstance(value, str) or not value:
            malformed(vspan, f"{key} must be non-empty text")
            ok = False
    value_spans = tuple((key, span_of(f"{ptr}/{key}")) for key in CLAIM_KEYS if key in claim)
    if ok:
        m = ID_RE.fullmatch(claim["id"])
        if m is None:
            malformed(span_of(f"{ptr}/id"), _id_problem(claim["id"]))
            ok = False
        elif (m["doc_id"], int(m["version"]), int(m["line"])) != (claim["doc_id"], claim["version"], claim["line"]):
            malformed(span_of(f"{ptr}/id"),
                      f"id {claim['id']!r} disagrees with doc_id/version/line "
                      f"({claim['doc_id']}@{claim['version']}:{claim['line']})")
            ok = False
    text = claim["text"] if isinstance(claim.get("text"), str) else ""
    draft.claims.append(Claim(
        sentence=text, sentence_span=obj_span, citation_span=obj_span,
        citation=CitationRef(claim["doc_id"], claim["version"], claim["line"]) if ok else None,
        hash_prefix=claim["sha256"] if ok else None,
        quote=claim["quote"] if ok else None,
        json_text=claim.get("text") if ok else None,
        json_field=claim.get("field") if ok else None,
        json_sha256=claim["sha256"] if ok else None,
        value_spans=value_spans,
    ))


def _parse_int(digits: str) -> int | float:
    """JSON integers; one longer than 18 digits becomes a float, so the type check reports it
    (Python refuses to convert integers of more than 4300 digits).
    """
    return int(digits) if len(digits.lstrip("-")) <= 18 else float("inf")


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _ptr(key: str) -> str:
    return "/" + _escape(key)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, Span, str]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.name, f.span, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
