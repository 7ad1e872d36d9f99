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

import functools
import json
import re
import unicodedata
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import html_inline as _markdown_html_inline
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from . import image_claims
from . import memory as memory_claims
from .evidence import DOC_ID_FORBIDDEN, YAML_LOADER, YAML_MERGE_TAG, front_matter_too_deep
from .memory import MemoryUnitSpec
from .model import CLAIM_KEYS, FIRST_LINE, CitationRef, Claim, Edit, Finding, MemoryRef, RegionRef, Span
from .text import LineIndex, char_name, has_letter_or_digit, shorten, split_lines

NUMBER = r"[1-9][0-9]{0,17}"
"""A version or line number: SPEC's ``[1-9][0-9]*``, capped at 18 digits (no real document has
a longer one, and SQLite integers end at 2**63 - 1)."""
ID_RE = re.compile(rf"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>{NUMBER}):(?P<line>{NUMBER})")
HEX_RE = re.compile(r"[0-9a-f]{8,64}")
UNIT_RE = re.compile(
    rf"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>{NUMBER})(?::(?P<start>{NUMBER})(?:-(?P<end>{NUMBER}))?)?"
)
REF_RE = re.compile(r"\[\^([^\[\]\s]+)\]")
"""A footnote reference whose label has no whitespace or brackets. Linear to scan (a label
cannot hold ``[``, so a run of ``[^`` never backtracks); the server uses it to find the label
under the cursor. The draft parser finds references with :func:`_candidates`, which also
sees labels that are not valid (U+3000, tabs ...) so it can report them."""
SENTENCE_END = "。！？!?"
MAX_INLINE_BRACKETS = 64
"""Inline content with more ``[`` than this skips markdown-it's inline rules (see
:func:`_bounded_inline`): they are super-linear on runs of ``[`` / ``[^``."""
STATUSES = ("answered", "partial", "abstain", "conflict")
MAX_SOURCE_MAP_CHARS = 4_000_000
"""JSON answers longer than this get their findings on line 1 (no source map): an answer wire
is a few hundred tokens, and json-source-map spends seconds on megabytes of escapes."""
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
    """CommonMark + front matter + footnotes, with two bounds on the inline parser.

    - Inline footnotes (``^[...]``) are off: they are not citations (SPEC §5.1), and on a run
      of ``[^`` each ``^[`` started a nested parse.
    - ``footnote_ref`` is :func:`_footnote_ref`, which finds a label's end in amortised
      constant time (mdit-py-plugins 0.7's rule walks to the line's end from every ``[^``:
      quadratic on a run of them).
    - the core ``inline`` rule is :func:`_bounded_inline` (see there).
    - inline HTML comments end at their first ``-->`` (:func:`_html_inline`).
    """
    md = MarkdownIt("commonmark").use(front_matter_plugin).use(footnote_plugin, inline=False)
    md.disable("footnote_tail")  # keep definitions in place, with their line maps
    md.inline.ruler.at("footnote_ref", _footnote_ref)
    md.inline.ruler.at("html_inline", _html_inline)
    md.core.ruler.at("inline", _bounded_inline)
    return md


def _html_inline(state: StateInline, silent: bool) -> bool:
    """markdown-it's ``html_inline`` rule, with comments read as CommonMark 0.31 defines them.

    A comment is ``<!-->``, ``<!--->``, or ``<!--`` up to the first ``-->`` after it. The
    rule of markdown-it-py 4.3 matches comments with a regex that rescans to the end of the
    paragraph whenever it fails (a comment whose text ends in ``-``, e.g. ``<!-- a --->``), so
    a run of them was quadratic (``<!----><!--*<div>`` x 4,000: 5 s; found by
    tests/robustness/test_hardening_properties.py). The closers' offsets are found once per
    source string (cached in ``env``, as :func:`_footnote_ref` does), so each comment costs a
    bisection. Every other tag goes to markdown-it's own rule. A comment token's ``meta``
    holds its ``comment`` extent ``(start, end)``: code-point offsets in the source string.
    """
    src, pos = state.src, state.pos
    if not src.startswith("<!--", pos) or not state.md.options.get("html"):
        return _markdown_html_inline(state, silent)
    if src.startswith("<!-->", pos):
        end = pos + 5
    elif src.startswith("<!--->", pos):
        end = pos + 6
    else:
        cached = state.env.get("_grounding_comment_ends")
        if cached is None or cached[0] is not src:
            cached = (src, [m.end() for m in re.finditer("(?=-->)", src)])
            state.env["_grounding_comment_ends"] = cached
        closers: list[int] = cached[1]  # offsets where a "-->" starts
        i = bisect_right(closers, pos + 3)  # the text may be empty: "<!---->"
        if i == len(closers):
            return False
        end = closers[i] + 3
    if end > state.posMax:
        return False
    if not silent:
        token = state.push("html_inline", "", 0)
        token.content = src[pos:end]
        token.meta = {"comment": (pos, end)}  # offsets in the paragraph's content (_sentences)
    state.pos = end
    return True


_LABEL_STOP = re.compile(r"[\] \n]")


def _footnote_ref(state: StateInline, silent: bool) -> bool:
    """mdit-py-plugins' ``footnote_ref`` with the same result, linear on runs of ``[^``.

    A label runs from ``[^`` to the first ``]``, without spaces or line breaks, and must be a
    defined one. The first stop character after a position is cached per source string, so
    a run of ``[^`` costs one search, not one per ``[^``.
    """
    start, maximum, src = state.pos, state.posMax, state.src
    if start + 3 > maximum or src[start] != "[" or src[start + 1] != "^":
        return False
    footnotes = state.env.get("footnotes")
    if not footnotes or not footnotes.get("refs"):
        return False
    cached = state.env.get("_grounding_label_stop")
    if cached is not None and cached[0] is src and cached[1] <= start + 2 <= cached[2]:
        stop = cached[2]
    else:
        match = _LABEL_STOP.search(src, start + 2)
        stop = match.start() if match is not None else len(src)
        state.env["_grounding_label_stop"] = (src, start + 2, stop)
    if stop >= maximum or src[stop] != "]" or stop == start + 2:
        return False
    label = src[start + 2:stop]
    refs: dict[str, int] = footnotes["refs"]
    if ":" + label not in refs:
        return False
    if not silent:
        notes: dict[int, Any] = footnotes.setdefault("list", {})
        if refs[":" + label] < 0:
            note_id = len(notes)
            notes[note_id] = {"label": label, "count": 0}
            refs[":" + label] = note_id
        else:
            note_id = refs[":" + label]
        sub_id = notes[note_id]["count"]
        notes[note_id]["count"] += 1
        token = state.push("footnote_ref", "", 0)
        token.meta = {"id": note_id, "subId": sub_id, "label": label}
    state.pos = stop + 1
    return True


def _bounded_inline(state: StateCore) -> None:
    """markdown-it's core ``inline`` rule, bounded (issue 13 item 12).

    markdown-it-py's link rule walks from every unmatched ``[`` to the end of its paragraph,
    and its inline parser spends microseconds on every markup character, so a paragraph of
    ``[^[^[^…`` took minutes. Two bounds keep the parser near-linear:

    - ``[`` that no ``]`` can close (:func:`_unmatched_brackets`, ignoring code spans and
      backslash escapes) cannot start a link or a reference, so they are hidden from the
      inline parser (replaced by ``［``, same length). Reference labels come from the raw
      lines, so nothing else changes;
    - inline content holding more than :data:`MAX_INLINE_BRACKETS` ``[`` is not given to the
      inline parser at all (``token.meta["raw_refs"]``): its references are read from the
      raw lines by :func:`_candidates` (code spans and escapes honoured; a ``[^x]`` written
      inside a link destination, an autolink or an HTML tag then counts as a reference,
      which fails closed: it is checked as a citation).
    """
    for token in state.tokens:
        if token.type != "inline":
            continue
        token.children = []
        content = token.content
        if content.count("[") > MAX_INLINE_BRACKETS:
            token.meta = {**(token.meta or {}), "raw_refs": True}
            continue
        state.md.inline.parse(_hide_unmatched(content), state.md, state.env, token.children)


def _hide_unmatched(content: str, mark: str = "［") -> str:
    """``content`` with the ``[`` of :func:`_unmatched_brackets` replaced by ``mark``."""
    unmatched = _unmatched_brackets(content)
    if not unmatched:
        return content
    chars = list(content)
    for i in unmatched:
        chars[i] = mark
    return "".join(chars)


_BRACKET_OR_ESCAPE = re.compile(r"\\.|[\[\]]", re.DOTALL)


def _unmatched_brackets(content: str) -> list[int]:
    """Offsets of the ``[`` in ``content`` that no later ``]`` closes (stack matching).

    Backslash-escaped brackets and brackets inside code spans take no part. Linear.
    """
    if "[" not in content:
        return []
    code = _code_spans(content)
    starts = [a for a, _ in code]
    stack: list[int] = []
    for match in _BRACKET_OR_ESCAPE.finditer(content):
        at = match.start()
        k = bisect_right(starts, at) - 1
        if k >= 0 and at < code[k][1]:
            continue
        ch = match[0]
        if ch == "[":
            stack.append(at)
        elif ch == "]" and stack:
            stack.pop()
    return stack


_BACKTICKS = re.compile(r"`+")


def _code_spans(text: str) -> list[tuple[int, int]]:
    """CommonMark code spans of ``text``: ``(start, end)`` offsets, sorted, end exclusive.

    A backtick run opens a span closed by the next run of the same length; a run with no
    such closer is literal. Linear: each run length keeps a pointer into its own list.
    """
    if "`" not in text:
        return []
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(i)
    cursor = dict.fromkeys(by_length, 0)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        a, b = runs[i]
        same = by_length[b - a]
        k = cursor[b - a]
        while k < len(same) and same[k] <= i:
            k += 1
        cursor[b - a] = k
        if k < len(same):
            j = same[k]
            spans.append((a, runs[j][1]))
            i = j + 1
        else:
            i += 1
    return spans


def _escaped(text: str, at: int) -> bool:
    """True when an odd number of backslashes precede offset ``at``."""
    n = 0
    while at - n - 1 >= 0 and text[at - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _candidates(text: str, start: int = 0) -> Iterator[tuple[str, int, int]]:
    """Reference-like ``[^label]`` in ``text`` from ``start``: ``(label, start, end)``.

    A label runs from ``[^`` to the first ``]`` and holds no ``[`` (a ``[`` starts the next
    candidate) and no line break; it may hold characters a valid label must not have
    (:func:`label_problem`), so those can be reported. Candidates do not overlap. Linear:
    each ``]`` is visited once, and only the last ``[`` before it can start its candidate.
    """
    pos = start
    while True:
        close = text.find("]", pos)
        if close < 0:
            return
        p = text.rfind("[", pos, close)
        if (p >= 0 and p + 2 < close and text[p + 1] == "^"
                and text.find("\n", p + 2, close) < 0):
            yield text[p + 2:close], p, close + 1
        pos = close + 1


def label_problem(label: str) -> str | None:
    """Why ``label`` is not a valid footnote label, or None (decisions.md, SPEC §5.1).

    A label is one or more characters, none of them whitespace (any Unicode space: U+3000
    IDEOGRAPHIC SPACE, no-break spaces, tabs), a control or format character (zero-width
    spaces, U+FEFF), ``[`` or ``]``. The message names the first bad character and its
    1-based column in the label.
    """
    for i, ch in enumerate(label):
        if ch.isspace() or ch in "[]" or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Cn"):
            return f"column {i + 1} of the label is {char_name(ch)}"
    return None if label else "the label is empty"


@dataclass(frozen=True, slots=True)
class Definition:
    """A footnote definition line (SPEC §5.1). ``error`` set means malformed-citation;
    ``fix`` is a safe repair of it (an IME slip in the id), when there is one.
    """

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
    fix: Edit | None = None
    region: RegionRef | None = None
    """Set (and ``citation`` None) for an image citation ``DOC_ID@VERSION#rN`` (SPEC §12)."""


def parse_markdown(text: str) -> ParsedDraft:
    """SPEC §5.1: front matter, definitions, sentences and claims of a Markdown draft.

    Sentences come from paragraphs and from HTML blocks (text inside HTML is prose; comments,
    ``<script>``/``<style>``/``<pre>``/``<code>`` and deleted text are not). Near-linear in
    the draft's length, whatever it holds (see :func:`_bounded_inline`).
    """
    lines = split_lines(text)
    draft = ParsedDraft(kind="markdown", text=text, lines=lines)
    tokens = _markdown().parse(text, {})
    definitions: dict[str, Definition] = {}
    not_prose: set[int] = set()  # code and front matter: never footnote syntax
    blocks: list[Token] = []
    depth_footnote = 0
    front_seen = False
    heading_inlines = {id(t) for t in _heading_inlines(tokens)}
    for token in tokens:
        if token.type in ("fence", "code_block", "front_matter") and token.map:
            not_prose.update(range(*token.map))
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
                        f"[^{shorten(d.label, 40)}] is defined twice; the first definition"
                        f" (line {first.line + 1}) wins",
                        hint="Remove this definition or give it another label.",
                    ))
                else:
                    definitions[d.label] = d
        elif token.type == "footnote_reference_close":
            depth_footnote -= 1
        elif (token.type in ("inline", "html_block") and depth_footnote == 0 and token.map
              and id(token) not in heading_inlines):
            blocks.append(token)
    if not front_seen and lines and lines[0] == "---":
        draft.findings.append(Finding(
            "malformed-citation", Span.line(0, 0, 3),
            "the front matter opened on line 1 is never closed",
            hint="Add a closing '---' line after question/fields.",
        ))
    defined = set(definitions)
    slips, slipped = _footnote_slips(
        lines, (n for n in range(len(lines)) if n not in not_prose and n not in _definition_lines(definitions)),
        definitions)
    draft.findings.extend(slips)
    slipped_lines = set(slipped.values())
    problems: dict[str, str | None] = {}
    claimed: set[tuple[Span, str]] = set()
    for block in blocks:
        sentences = (_html_sentences(block, lines) if block.type == "html_block"
                     else _sentences(block, lines, defined))
        for sentence in sentences:
            if sentence.span.start_line in slipped_lines:  # a definition typed with a slip
                continue
            if not sentence.refs:  # GR110 and the Cite action read what a reader sees
                draft.uncited.append(Sentence(prose_text(sentence.text), sentence.span, ()))
                continue
            for label, ref_span in sentence.refs:
                if label not in problems:
                    problems[label] = label_problem(label)
                is_first = (sentence.span, label) not in claimed
                claimed.add((sentence.span, label))
                _add_claim(draft, sentence, label, ref_span, definitions, problems[label], is_first,
                           slipped.get(label))
    draft.findings = _dedupe(draft.findings)
    return draft


def _definition_lines(definitions: dict[str, Definition]) -> set[int]:
    return {d.line for d in definitions.values()}


def _add_claim(draft: ParsedDraft, sentence: Sentence, label: str, ref_span: Span,
               definitions: dict[str, Definition], problem: str | None, first: bool,
               slipped_line: int | None = None) -> None:
    """One reference of a sentence: a claim (once per sentence and label), and a finding when
    the reference is unusable (``problem``: :func:`label_problem` of the label).
    ``slipped_line``: the 0-based line of a definition of the label typed with a full-width
    slip (:func:`_footnote_slips`), named by the "has no definition" finding.
    """
    shown = shorten(label, 40)
    definition = definitions.get(label)
    if problem is not None:
        draft.findings.append(Finding(
            "malformed-citation", ref_span,
            f"[^{shown}] is not a valid footnote label: {problem}",
            hint="A label is letters, digits or punctuation without spaces, e.g. [^1] or [^schedule];"
            " rename the reference and its definition.",
        ))
        if first:
            draft.claims.append(Claim(sentence.text, sentence.span, ref_span, None, None, None, label))
        return
    if definition is None:
        draft.findings.append(Finding(
            "malformed-citation", ref_span,
            f"[^{shown}] has no definition"
            + (f": line {slipped_line + 1} would be it but for an input-method slip (see the finding there)"
               if slipped_line is not None else ""),
            hint=f"Write line {slipped_line + 1} in ASCII (`grounding check --fix` does)." if slipped_line is not None
            else f"Add its definition on a line of its own: [^{shown}]: DOC_ID@VERSION:LINE sha256:HASH"
            ' "WHOLE LINE" (`grounding cite DOC_ID:LINE` prints one to paste).',
        ))
        if first:
            draft.claims.append(Claim(sentence.text, sentence.span, ref_span, None, None, None, label))
        return
    if not first:
        return
    if definition.error is not None:
        draft.findings.append(Finding(
            "malformed-citation", definition.span, definition.error,
            hint=definition.hint, citation=definition.id_text or None, fix=definition.fix,
        ))
    draft.claims.append(Claim(
        sentence.text, sentence.span, definition.span,
        definition.citation if definition.error is None else None,
        definition.hash_prefix, definition.quote, label,
        region=definition.region if definition.error is None else None,
        memory=definition.memory if definition.error is None else None,
    ))


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
    region: RegionRef | None = None
    memory_ref: MemoryRef | None = None
    if memory_claims.is_memory_id(id_text):  # memory hook (SPEC §11): memory:SCOPE/KEY@VERSION
        shape = f'write it as [^{label}]: memory:SCOPE/KEY@VERSION sha256:HASH "KEY：VALUE"'
        memory_ref, problem = memory_claims.parse_memory_id(id_text)
        if memory_ref is None:
            return bad(problem, shape, id_text)
    else:
        m = ID_RE.fullmatch(id_text)
        if m is None and image_claims.is_region_id(id_text):  # image hook (SPEC §12): DOC_ID@VERSION#rN
            shape = image_claims.definition_shape(label)
            region, problem = image_claims.parse_region_id(id_text)
            if region is None:
                return bad(problem, shape, id_text)
        elif m is None:
            slip = ime_slip(id_text)
            if slip is None:
                return bad(_id_problem(id_text), shape, id_text)
            fixed, at = slip
            return Definition(
                label, line_no, span, id_text, None, None, None,
                f"column {id_col + at + 1} of the line: {_slip_message(id_text, fixed, at)}",
                f"Write the id as {fixed}.",
                fix=Edit(Span.line(line_no, id_col, id_col + len(id_text)), fixed,
                         f"Write the citation id in ASCII: {shorten(fixed, 60)}"),
            )
        else:
            ref = CitationRef(m["doc_id"], int(m["version"]), int(m["line"]))
    if len(parts) < 2 or not parts[1].startswith("sha256:"):
        return bad("the sha256 hash is missing after the citation id", shape, id_text)
    hex_text = parts[1][len("sha256:"):]
    if not HEX_RE.fullmatch(hex_text):
        if hex_text.lower() != hex_text and HEX_RE.fullmatch(hex_text.lower()):
            start = id_col + len(id_text) + 1 + len("sha256:")
            lower = hex_text.lower()
            return Definition(
                label, line_no, span, id_text, None, None, None,
                "the hash must be lowercase hex (sha256 is written in lowercase)",
                f"Write it as sha256:{lower}.",
                fix=Edit(Span.line(line_no, start, start + len(hex_text)), lower, "Write the hash in lowercase"),
            )
        if len(hex_text) < 8 and re.fullmatch(r"[0-9a-f]*", hex_text):
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
            message = (f"the quote starts with {tail[0]!r} (U+{ord(tail[0]):04X}); only the straight"
                       ' double quote " (U+0022) is accepted')
            body = tail.rstrip(" ")
            if len(body) < 2 or body[-1] not in QUOTE_LOOKALIKES:
                return bad(message, shape, id_text)
            # curly (or CJK) quote marks around the quote, as Chinese input methods type them:
            # the fix changes the two marks only; the recheck compares what is between them
            start = id_col + len(id_text) + 1 + len(parts[1]) + 1
            straight = f'"{body[1:-1]}"'
            return Definition(label, line_no, span, id_text, None, None, None, message,
                              f"Write it as {shorten(straight, 60)}.",
                              fix=Edit(Span.line(line_no, start, start + len(body)), straight,
                                       "Use straight double quotes around the quote"))
        return bad("the quote must start with a straight double quote \" right after one space",
                   shape, id_text)
    last = tail.rfind('"')
    if last == 0:
        return bad("the quote is not closed with a straight double quote \"", shape, id_text)
    after = tail[last + 1:]
    if after.strip(" "):
        return bad(f"only spaces may follow the closing quote, found {after.strip()!r}", shape, id_text)
    quote = tail[1:last]
    return Definition(label, line_no, span, id_text, ref, hex_text, quote, memory=memory_ref, region=region)


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




_ASCII_FORMS = {"＠": "@", "：": ":", **{chr(0xFF10 + d): str(d) for d in range(10)}}
"""Full-width characters an input method types for the ASCII ones a citation id needs."""


_FOOTNOTE_ASCII = {"［": "[", "＾": "^", "］": "]", "：": ":", "﹕": ":", "︓": ":"}
"""Full-width characters an input method types for the ASCII ones of footnote syntax."""
SLIPPED_DEFINITION_RE = re.compile(r"([\[［])([\^＾])([^\[\]［］\s]+)([\]］])([:：﹕︓])")
"""The start of a line that would be a footnote definition ``[^label]:`` but for full-width
characters (``[^3]：``, ``［^3］：``); checked only where at least one is full-width."""
SLIPPED_REF_RE = re.compile(r"([\[［])([\^＾])([^\[\]［］\s]+)([\]］])")
"""A reference ``[^label]`` typed with full-width brackets or caret (``［^2］``)."""


def _footnote_slip(match: re.Match[str], what: str) -> tuple[str, int, str] | None:
    """``(ASCII text, 0-based offset of the first slip, message)`` for footnote syntax matched by
    :data:`SLIPPED_DEFINITION_RE` or :data:`SLIPPED_REF_RE` whose brackets, caret or colon are
    full-width (:data:`_FOOTNOTE_ASCII`; the label is kept as written), or None when all ASCII.
    """
    text = match[0]
    fixed = "".join(part if k == 3 else _FOOTNOTE_ASCII.get(part, part)
                    for k, part in enumerate(match.groups(), start=1))
    if fixed == text:
        return None
    first = next(i for i, (a, b) in enumerate(zip(text, fixed, strict=True)) if a != b)
    slips = sum(1 for a, b in zip(text, fixed, strict=True) if a != b)
    more = f" ({slips} full-width characters in all)" if slips > 1 else ""
    return fixed, first, (f"{char_name(text[first])} in {shorten(text, 40, quote=True)} where"
                          f" '{fixed[first]}' belongs: an input-method slip{more}, so Markdown reads"
                          f" it as text, not as {what}")


def _footnote_slips(lines: list[str], candidates: Iterable[int], definitions: dict[str, Definition]
                    ) -> tuple[list[Finding], dict[str, int]]:
    """SPEC §5.1 footnote syntax typed with full-width characters, on the ``candidates`` lines
    (0-based; prose and footnote lines, never code or front matter): a definition line
    ``[^3]：…`` or ``［^3］：…`` whose label has no real definition, and references ``［^2］``.

    Returns the malformed-citation findings (each with its fix) and ``{label: line}`` of the
    slipped definitions, so a reference without a definition can name the line that was meant.
    Linear in the lines. docs/decisions.md "Full-width footnote syntax".
    """
    findings: list[Finding] = []
    slipped: dict[str, int] = {}
    for line_no in candidates:
        line = lines[line_no]
        full_width = "［" in line or "］" in line or "＾" in line
        if not full_width and not line.startswith("[^"):
            continue
        match = SLIPPED_DEFINITION_RE.match(line)
        if match is not None and match[3] not in definitions and match[3] not in slipped:
            slip = _footnote_slip(match, f"the definition of [^{match[3]}]")
            if slip is not None:
                fixed, first, message = slip
                if not line[match.end():].startswith(" "):
                    fixed += " "
                slipped[match[3]] = line_no
                findings.append(Finding(
                    "malformed-citation", Span.line(line_no, 0, match.end()),
                    f"column {first + 1} of the line: {message}",
                    hint=f"Write it as [^{match[3]}]: DOC_ID@VERSION:LINE sha256:HASH \"WHOLE LINE\".",
                    fix=Edit(Span.line(line_no, 0, match.end()), fixed,
                             "Write the footnote definition in ASCII"),
                ))
                continue
        for ref in SLIPPED_REF_RE.finditer(line) if full_width else ():
            if "［" not in ref[0] and "］" not in ref[0] and "＾" not in ref[0]:
                continue
            slip = _footnote_slip(ref, f"a reference to [^{ref[3]}]")
            if slip is None:
                continue
            fixed, first, message = slip
            findings.append(Finding(
                "malformed-citation", Span.line(line_no, ref.start(), ref.end()),
                f"column {ref.start() + first + 1} of the line: {message}",
                hint=f"Write the reference as {fixed}.",
                fix=Edit(Span.line(line_no, ref.start(), ref.end()), fixed,
                         "Write the footnote reference in ASCII"),
            ))
    return findings, slipped


def ime_slip(id_text: str) -> tuple[str, int] | None:
    """An id that is valid once its input-method slips are undone: ``(fixed id, offset)``.

    Slips: a full-width ``＠`` before the version, a full-width ``：`` before the line, and
    full-width digits in the version or line (``schedule＠2：６`` -> ``schedule@2:6``); in an
    image region id, ``＠`` and the version's digits (``shapes＠１#r1`` -> ``shapes@1#r1``; what
    follows ``#`` is not rewritten: :func:`~grounding_core.image_claims.parse_region_id` names a
    full-width ``＃`` or digit there, a usage error for ``grounding cite``). The
    doc_id is never changed (full-width characters are allowed in it). ``offset`` is the 0-based
    code-point offset of the first slip in ``id_text``. None when the id is fine as it is or
    is wrong in another way.
    """
    at = max(id_text.rfind("@"), id_text.rfind("＠"))
    if at <= 0:
        return None
    fixed = id_text[:at] + "@" + "".join(_ASCII_FORMS.get(ch, ch) for ch in id_text[at + 1:])
    if fixed == id_text:
        return None
    if ID_RE.fullmatch(fixed) is None:  # a region id: only '＠' and the version's digits are slips
        cut = fixed.find("#")
        if cut < 0 or fixed[cut:] != id_text[cut:] or image_claims.parse_region_id(fixed)[0] is None:
            return None
    first = next(i for i, (a, b) in enumerate(zip(id_text, fixed, strict=True)) if a != b)
    return fixed, first


def _slip_message(id_text: str, fixed: str, at: int) -> str:
    slips = sum(1 for a, b in zip(id_text, fixed, strict=True) if a != b)
    more = f" ({slips} full-width characters in all)" if slips > 1 else ""
    return (f"{char_name(id_text[at])} in the citation id {shorten(id_text, 60, quote=True)} where"
            f" '{fixed[at]}' belongs: an input-method slip{more}; an id's '@', ':' and numbers are ASCII"
            f" ({shorten(fixed, 60)})")


def _sentences(inline: Token, lines: list[str], defined: set[str]) -> Iterator[Sentence]:
    """Split a paragraph's source lines into sentences (SPEC §5.1); never across lines.

    References are the ``[^label]`` of the raw lines that markdown-it read as references (or
    as text with an undefined label), in order; for content markdown-it did not parse inline
    (``raw_refs``, see :func:`_bounded_inline`) every candidate outside code spans that is not
    backslash-escaped.

    Inline HTML comments are notes, never prose (issue 13 item 5): their extent as parsed
    (:func:`_html_inline`; a comment ends at its first ``-->``) is blanked before sentences and
    references are read, so a ``。`` or ``!`` inside a comment ends no sentence and a
    ``[^x]`` inside one is no reference. A sentence's text is still its raw source (the
    comment included), which :func:`prose_text` renders without it.
    """
    assert inline.map is not None
    raw_mode = bool((inline.meta or {}).get("raw_refs"))
    expected = None if raw_mode else deque(_expected_refs(inline, defined))
    start, end = inline.map
    content_lines = inline.content.split("\n")
    comments = _comment_columns(inline, content_lines)
    for offset, line_no in enumerate(range(start, end)):
        raw = lines[line_no] if line_no < len(lines) else ""
        content = content_lines[offset].strip() if offset < len(content_lines) else raw.strip()
        col = raw.find(content) if content else len(raw)
        if col < 0:
            col = len(raw) - len(raw.lstrip())
        hidden = comments.get(offset)
        if not hidden:
            yield from _split_line(raw, line_no, col, _line_refs(raw, col, expected, defined))
            continue
        line = content_lines[offset]
        shift = col - (len(line) - len(line.lstrip()))  # content column -> raw column
        masked, at = [], 0
        for a, b in hidden:
            a, b = max(at, min(len(raw), a + shift)), max(at, min(len(raw), b + shift))
            masked += [raw[at:a], " " * (b - a)]
            at = b
        masked.append(raw[at:])
        text = "".join(masked)
        for sentence in _split_line(text, line_no, col, _line_refs(text, col, expected, defined)):
            yield Sentence(raw[sentence.span.start_col:sentence.span.end_col], sentence.span, sentence.refs)


def _comment_columns(inline: Token, content_lines: list[str]) -> dict[int, list[tuple[int, int]]]:
    """The inline comments of a paragraph by content line: ``{line offset: [(start, end)]}``.

    Columns are code points in ``content_lines`` (the paragraph's content split at ``\\n``),
    end exclusive, in order; a comment over several lines has a piece on each. Comments
    inside an image's description are not listed (they are parsed from another string).
    Linear in the paragraph.
    """
    out: dict[int, list[tuple[int, int]]] = {}
    starts: list[int] = []
    for child in inline.children or []:
        extent = (child.meta or {}).get("comment") if child.type == "html_inline" else None
        if extent is None:
            continue
        if not starts:
            starts = [0]
            for line in content_lines[:-1]:
                starts.append(starts[-1] + len(line) + 1)
        a, b = extent
        k = bisect_right(starts, a) - 1
        while k < len(starts) and starts[k] < b:
            out.setdefault(k, []).append((max(a, starts[k]) - starts[k],
                                          min(b, starts[k] + len(content_lines[k])) - starts[k]))
            k += 1
    return out


def _line_refs(raw: str, col: int, expected: deque[str] | None,
               defined: set[str]) -> list[tuple[str, int, int]]:
    """The references of one raw line from ``col``: ``(label, start, end)``. Linear.

    With ``expected`` (labels in markdown-it's order), a ``[^`` is a reference when its label
    is the next expected one; without it, every candidate of :func:`_candidates` is.
    """
    refs: list[tuple[str, int, int]] = []
    if "[^" not in raw:
        return refs
    code = _code_spans(raw)
    code_starts = [a for a, _ in code]

    def in_code(at: int) -> bool:
        k = bisect_right(code_starts, at) - 1
        return k >= 0 and at < code[k][1]

    if expected is None:
        for label, s, e in _candidates(raw, col):
            if not in_code(s) and not _escaped(raw, s):
                refs.append((label, s, e))
        return refs
    pos = col
    while expected:
        p = raw.find("[^", pos)
        if p < 0:
            break
        label = expected[0]
        end = p + 2 + len(label)
        is_next = raw.startswith(label, p + 2) and raw[end:end + 1] == "]"
        if not is_next or in_code(p):
            pos = p + 1  # `[^x]` inside a code span is code, never a reference
            continue
        expected.popleft()
        if _escaped(raw, p):
            # ``\[^x]`` is literal text "[^x]"; _expected_refs listed it when x is undefined
            if label in defined:
                expected.appendleft(label)
            pos = p + 1
            continue
        refs.append((label, p, end + 1))
        pos = end + 1
    return refs


def _expected_refs(inline: Token, defined: set[str]) -> list[str]:
    """Labels markdown-it saw in a paragraph, in order: references, and text ``[^x]`` whose
    label is not defined (reported as undefined or invalid, never silently ignored).
    """
    out: list[str] = []
    for child in inline.children or []:
        if child.type == "footnote_ref":
            out.append(str(child.meta.get("label", "")))
        elif child.type == "text" and "[^" in child.content:
            out.extend(label for label, _, _ in _candidates(child.content) if label not in defined)
    return out


# -- HTML is prose (issue 13 item 5) -------------------------------------------------------

def _mask_html(source: str) -> str:
    """``source`` with everything that is not prose replaced by spaces (line breaks kept).

    Offsets and columns stay those of ``source``, so sentence spans are draft positions.
    """
    from .prose_mask import ProseMask  # html.parser: imported by the drafts that hold HTML blocks only

    starts = [0] + [m.end() for m in re.finditer("\n", source)]
    parser = ProseMask(starts)
    # A comment opened after the last "-->" never closes: it and everything after it is not
    # prose. html.parser would retry every such "<!--" against the rest (quadratic).
    unterminated = source.find("<!--", source.rfind("-->") + 1)
    try:
        parser.feed(source if unterminated < 0 else source[:unterminated])
        parser.close()
    except (AssertionError, ValueError):  # malformed markup the tokenizer gives up on
        pass
    events = parser.events
    if unterminated >= 0:
        events = [event for event in events if event[0] < unterminated] + [(unterminated, False)]
    if not events:
        return source
    out: list[str] = [re.sub(r"[^\n]", " ", source[:events[0][0]])]
    for i, (at, prose) in enumerate(events):
        until = events[i + 1][0] if i + 1 < len(events) else len(source)
        piece = source[at:until]
        out.append(piece if prose else re.sub(r"[^\n]", " ", piece))
    return "".join(out)


def _html_sentences(block: Token, lines: list[str]) -> Iterator[Sentence]:
    """Sentences of an HTML block's text (SPEC §5.1: a claim is a sentence; HTML text is prose).

    Comments and the other non-prose parts (:func:`_mask_html`) are blanked first, so the
    answer generator's ``<!-- missing: … -->`` notes stay notes. References in the text are
    read from the raw lines (markdown-it does not parse inside HTML blocks).
    """
    assert block.map is not None
    start, end = block.map
    masked = _mask_html("\n".join(lines[start:end])).split("\n")
    for offset, text in enumerate(masked):
        line_no = start + offset
        col = len(text) - len(text.lstrip())
        if col == len(text):
            continue
        yield from _split_line(text, line_no, col, _line_refs(text, col, None, set()))


# -- rendered text (SPEC §7.3 claim-value check; issue 13 item 6) ---------------------------

_MARKUP = re.compile(r"[*_~<>&\\`\[\]!]")
_DELETED_OPEN = re.compile(r"<(?:del|s|strike)(?:\s[^>]*)?>", re.IGNORECASE)
_DELETED_CLOSE = re.compile(r"</(?:del|s|strike)\s*>", re.IGNORECASE)


@functools.cache
def _inline_markdown() -> MarkdownIt:
    """CommonMark inline rules plus GFM strikethrough (``~~deleted~~``), for rendering."""
    md = MarkdownIt("commonmark").enable("strikethrough")
    md.inline.ruler.at("html_inline", _html_inline)  # linear on runs of comments
    return md


def prose_text(fragment: str) -> str:
    """What a reader sees of one inline Markdown fragment (a sentence, a value).

    Rendered by markdown-it's inline tokens: emphasis, links and inline HTML tags are
    removed, entities decoded, code kept as its text; deleted text (``~~…~~``,
    ``<del>…</del>``, ``<s>``, ``<strike>``) and footnote references are removed. A fragment
    without markup is returned as it is (without its references when they are its only
    markup: no parse, since the claim-value check runs on every keystroke); one with more
    than :data:`MAX_INLINE_BRACKETS` ``[`` only loses its references (the inline parser is
    super-linear there). Code points in, code points out; positions are not kept.
    """
    if _MARKUP.search(fragment) is None:
        return fragment
    plain = REF_RE.sub("", fragment)
    if _MARKUP.search(plain) is None:  # references were its only markup (most cited sentences)
        return plain
    if fragment.count("[") > MAX_INLINE_BRACKETS:
        return REF_RE.sub("", fragment)
    out: list[str] = []
    deleted = 0

    def walk(children: list[Token]) -> None:
        nonlocal deleted
        for token in children:
            if token.type == "s_open":
                deleted += 1
            elif token.type == "s_close":
                deleted = max(0, deleted - 1)
            elif token.type == "html_inline":
                if _DELETED_OPEN.fullmatch(token.content):
                    deleted += 1
                elif _DELETED_CLOSE.fullmatch(token.content):
                    deleted = max(0, deleted - 1)
            elif deleted:
                continue
            elif token.type == "text":
                out.append(REF_RE.sub("", token.content))
            elif token.type == "code_inline":
                out.append(token.content)
            elif token.type in ("softbreak", "hardbreak"):
                out.append(" ")
            elif token.children:
                walk(token.children)  # an image's alt text

    hide = _HIDDEN_BRACKET not in fragment
    for token in _inline_markdown().parseInline(
            _hide_unmatched(fragment, _HIDDEN_BRACKET) if hide else fragment, {}):
        walk(token.children or [])
    text = "".join(out)
    return text.replace(_HIDDEN_BRACKET, "[") if hide else text


_HIDDEN_BRACKET = "\ue000"
"""A private-use character standing for an unmatched ``[`` while rendering (put back after)."""


_END_MARK = re.compile(r"[。！？!?.]")
_NOT_SPACE = re.compile(r"\S")


def _split_line(raw: str, line_no: int, start: int, refs: list[tuple[str, int, int]]) -> Iterator[Sentence]:
    """SPEC §5.1 sentences of one line from column ``start``, with their references.

    Ends: ``。！？!?``, and ``.`` before whitespace, the line's end or a reference;
    references directly after an end (spaces allowed) belong to the sentence before. Regex
    searches jump between ends and references, so the cost is linear in the line, not a
    Python step per character.
    """
    sentences: list[list[Any]] = []  # [start, end, refs]
    current: list[Any] | None = None
    n = len(raw)
    r = 0
    i = start
    while i < n:
        next_ref = refs[r][1] if r < len(refs) else n
        if i >= next_ref:
            label, s, e = refs[r]
            r += 1
            if current is None:
                current = [s, e, []]
            current[2].append((label, Span.line(line_no, s, e)))
            current[1] = e
            i = e
            continue
        if current is None:
            first = _NOT_SPACE.search(raw, i, next_ref)
            if first is None:
                i = next_ref
                continue
            i = first.start()
            current = [i, i + 1, []]
        mark = _END_MARK.search(raw, i, next_ref)
        while mark is not None and mark[0] == "." and not (
                mark.end() == n or mark.end() == next_ref or raw[mark.end()].isspace()):
            mark = _END_MARK.search(raw, mark.end(), next_ref)
        if mark is None:
            current[1] = i = next_ref
            continue
        i = current[1] = mark.end()
        while r < len(refs):  # references directly after the end belong to this sentence
            k = i
            while k < n and raw[k] == " ":
                k += 1
            if refs[r][1] != k:
                break
            label, s, e = refs[r]
            r += 1
            current[2].append((label, Span.line(line_no, s, e)))
            current[1] = i = e
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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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
    surrogate = _LONE_SURROGATE.search(content)
    if surrogate is not None:  # an editor buffer can hold one; YAML's C reader cannot
        row = content.count("\n", 0, surrogate.start()) + 2  # the front matter starts on line 2
        malformed(f"line {row} holds a lone surrogate U+{ord(surrogate[0]):04X} (half of a character such as"
                  " an emoji, e.g. from a broken paste); retype that character")
        return
    try:
        node = yaml.compose(content, Loader=YAML_LOADER)
    except (UnicodeError, ValueError) as exc:  # what the YAML reader cannot take at all
        malformed(f"cannot be read ({type(exc).__name__})")
        return
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
        if key_node.tag == YAML_MERGE_TAG:
            malformed("a YAML merge key ('<<') is not supported: write question, fields, subject"
                      " and context out")
            return
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
        try:  # construct from the composed node (re-serialising took 15 s per MB)
            value = YAML_LOADER("").construct_document(node)
        except (yaml.YAMLError, RecursionError, ValueError, TypeError):
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
        data = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the context log is not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ValueError("the context log is nested too deeply to read") from None
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
    import json_source_map  # JSON answers only (SPEC §5.2): a Markdown check never loads it

    try:  # pure Python, about 1.3 µs per \u escape: bounded for hostile sizes
        spans = json_source_map.calculate(text) if len(text) <= MAX_SOURCE_MAP_CHARS else {}
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
    if image_claims.is_json_image_claim(claim):  # image hook (SPEC §12, §15): the nine keys
        parsed = image_claims.parse_json_image_claim(claim, ptr, span_of, malformed)
        draft.claims.append(Claim(
            sentence=claim["text"] if isinstance(claim.get("text"), str) else "", sentence_span=obj_span,
            citation_span=obj_span, citation=None, hash_prefix=parsed.sha256, quote=parsed.quote,
            json_text=parsed.text, json_field=parsed.field, json_sha256=parsed.sha256,
            value_spans=parsed.value_spans, region=parsed.ref,
        ))
        return
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
                  "A text claim carries no support_type (only image claims do, with region);"
                  " a claim has exactly: " + ", ".join(CLAIM_KEYS) if key == "support_type" else
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
            if isinstance(value, str) and re.fullmatch(r"[0-9A-Fa-f]{64}", value) and value != value.lower():
                draft.findings.append(Finding(
                    "malformed-citation", vspan, "sha256 must be 64 lowercase hex digits (the full hash)",
                    hint=f'Write it as "{value.lower()}".',
                    fix=Edit(vspan, json.dumps(value.lower()), "Write the hash in lowercase")))
                ok = False
            elif not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
                malformed(vspan, "sha256 must be 64 lowercase hex digits (the full hash)")
                ok = False
        elif not isinstance(value, str) or not value:
            malformed(vspan, f"{key} must be non-empty text")
            ok = False
    value_spans = tuple((key, span_of(f"{ptr}/{key}")) for key in CLAIM_KEYS if key in claim)
    if ok:
        m = ID_RE.fullmatch(claim["id"])
        if m is None:
            id_span: Span = span_of(f"{ptr}/id")
            slip = ime_slip(claim["id"])
            if slip is None:
                malformed(id_span, _id_problem(claim["id"]))
            else:
                fixed, at = slip
                written = (draft.lines[id_span.start_line][id_span.start_col + 1:id_span.end_col - 1]
                           if id_span.start_line == id_span.end_line < len(draft.lines) else "")
                where = (f"column {id_span.start_col + at + 2} of the line" if written == claim["id"]
                         else f"character {at + 1} of the id")
                draft.findings.append(Finding(
                    "malformed-citation", id_span, f"{where}: {_slip_message(claim['id'], fixed, at)}",
                    hint=f"Write the id as {fixed}.",
                    fix=Edit(id_span, json.dumps(fixed, ensure_ascii=False),
                             f"Write the citation id in ASCII: {shorten(fixed, 60)}"),
                ))
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
