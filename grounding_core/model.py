"""Frozen value types shared by every module of the core (SPEC §3, §5, §7).

Positions: a :class:`Span` holds 0-based lines and code-point columns, end exclusive. The
CLI prints them 1-based; the server converts columns to the client's units in
``server/positions.py``. Nothing here knows about LSP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, TypeVar, overload

if TYPE_CHECKING:
    from .index import KeySummary


class Severity(str, Enum):
    """The LSP severity names (SPEC §7)."""

    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"


class Status(str, Enum):
    """Answer status (SPEC §7.5)."""

    ANSWERED = "answered"
    PARTIAL = "partial"
    ABSTAIN = "abstain"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class Rule:
    """One check: stable name, code and default severity (SPEC §7 table)."""

    code: str
    name: str
    severity: Severity
    summary: str


RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule("GR101", "malformed-citation", Severity.ERROR, "A citation does not follow the grammar."),
        Rule("GR102", "unknown-source", Severity.ERROR,
             "The cited document, version or line does not exist."),
        Rule("GR103", "quote-mismatch", Severity.ERROR, "The quote is not the cited whole line, verbatim."),
        Rule("GR104", "stale-citation", Severity.ERROR, "The cited version is older than the current one."),
        Rule("GR105", "hash-mismatch", Severity.ERROR,
             "The hash is not a prefix of the cited version's sha256."),
        Rule("GR106", "inactive-source", Severity.ERROR,
             "The cited source is revoked, deleted, expired or not yet effective."),
        Rule("GR107", "invisible-source", Severity.ERROR, "The cited line was not in the declared context."),
        Rule("GR108", "field-conflict", Severity.ERROR, "Active sources disagree on the same field."),
        Rule("GR109", "missing-field", Severity.WARNING, "A required field is covered by no valid claim."),
        Rule("GR110", "uncited-claim", Severity.WARNING,
             "A sentence states a known field or value without a citation."),
        Rule("GR111", "claim-value-mismatch", Severity.WARNING, "The sentence does not restate the cited value."),
        Rule("GR112", "meta-field", Severity.ERROR, "The cited line is a meta field or front matter."),
        Rule("GR113", "output-over-budget", Severity.ERROR, "The answer exceeds the output reserve."),
        Rule("GR114", "status-mismatch", Severity.WARNING,
             "Declared status or missing_fields differ from the computed ones."),
        Rule("GR115", "context-undeclared", Severity.INFORMATION, "No context declared; visibility not checked."),
        Rule("GR116", "invalid-context", Severity.ERROR, "The declared context cannot be used."),
        Rule("GR117", "unsupported-attribute", Severity.ERROR,
             "An image claim quotes an attribute the measurement does not produce."),
        Rule("GR201", "unreadable-evidence", Severity.WARNING,
             "Evidence file not UTF-8, binary, or outside the root."),
        Rule("GR202", "duplicate-doc-id", Severity.ERROR, "Two evidence files claim one doc_id."),
        Rule("GR203", "version-reuse", Severity.WARNING, "Content changed under the same declared version."),
        Rule("GR204", "invalid-front-matter", Severity.ERROR, "Evidence front matter is invalid."),
    )
}
RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES.values()}

CLAIM_KEYS: tuple[str, ...] = ("text", "quote", "id", "doc_id", "version", "line", "sha256", "field")
"""The eight keys of a claim, in the order of SPEC §5; the answer wire writes them in this order."""

IMAGE_CLAIM_KEYS: tuple[str, ...] = (
    "text", "quote", "id", "doc_id", "version", "region", "sha256", "field", "support_type")
"""The nine keys of an image claim (SPEC §12, §15), in the order the answer wire writes them;
``support_type`` is always ``"measured"`` and ``region`` is ``"r1"``, ``"r2"``, …"""

MEMORY_CLAIM_KEYS: tuple[str, ...] = ("text", "quote", "id", "scope", "key", "version", "sha256")
"""The seven keys of a memory claim (SPEC §11), in the order the answer wire writes them."""


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """A range in one text: 0-based lines, code-point columns, end exclusive."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @staticmethod
    def line(line: int, start: int, end: int) -> Span:
        """A span on one 0-based line from code-point column ``start`` to ``end``."""
        return Span(line, start, line, end)


FIRST_LINE = Span(0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Location:
    """A place in another file: path relative to the workspace root, 1-based line.

    ``line_text`` is that line's text (no terminator) when the producer has it at hand, so an
    editor range covering the line can be computed without reading the file again.
    """

    path: str
    line: int
    message: str = ""
    line_text: str | None = None


T = TypeVar("T")


class TupleView(Sequence[T]):
    """A read-only sequence that behaves as the tuple :meth:`items` returns: indexing, slicing
    (a tuple), iteration, ``in``, and ``==`` / ``hash`` / ``repr`` as that tuple, so a value
    holding a view equals one holding the tuple. Subclasses make the tuple when first read
    (:class:`DeferredLocations`, ``sql_snapshot.KeptSources``) and know ``len`` without it.
    """

    __slots__ = ()

    def items(self) -> tuple[T, ...]:
        """The elements as a tuple (made on first read by a subclass)."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self.items()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self.items())

    def __contains__(self, value: object) -> bool:
        return value in self.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TupleView):
            return self is other or self.items() == other.items()
        if isinstance(other, tuple):
            return self.items() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.items())

    def __repr__(self) -> str:
        return repr(self.items())


class DeferredLocations(TupleView[Location]):
    """Related locations made on first read: what a ``field-conflict`` (GR108) finding carries
    as ``related`` (SPEC §7.4: up to 5 sources per value, 16,000 for Debian's 100-citation
    draft), so a check whose output never shows them (text output, a status) never builds them,
    and one that does (JSON, SARIF, the Python API, the editor) builds them once.

    It is the tuple ``make()`` returns, read only: ``len`` (known without making it),
    indexing, slicing (a tuple), iteration, ``in``, and ``==`` / ``hash`` as that tuple (so a
    :class:`Finding` holding it equals one holding the tuple). ``make`` must return exactly
    ``size`` locations, the same on every call; it runs at most once, except that two threads
    reading at the same moment may both run it (each gets the same value).
    """

    __slots__ = ("_items", "_make", "_size")

    def __init__(self, size: int, make: Callable[[], tuple[Location, ...]]) -> None:
        self._size = size
        self._make: Callable[[], tuple[Location, ...]] | None = make
        self._items: tuple[Location, ...] | None = None

    def items(self) -> tuple[Location, ...]:
        """The locations as a tuple (made now if they were not yet)."""
        items = self._items
        if items is None:
            make = self._make
            if make is None:  # another thread made them between the two reads
                items = self._items
                assert items is not None
                return items
            items = make()
            if len(items) != self._size:
                raise ValueError(f"DeferredLocations: made {len(items)} locations, announced {self._size}")
            self._items = items
            self._make = None
        return items

    @property
    def made(self) -> bool:
        """Whether the locations were made (read) already."""
        return self._items is not None

    def __len__(self) -> int:
        return self._size


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in a draft or an evidence file (SPEC §7).

    ``span`` is in the file's own text; ``hint`` says how to fix it; ``citation`` is the
    citation id text when the finding is about one; ``fix`` optionally carries a mechanical
    replacement (span + new text) the CLI ``--fix`` and the server's code actions apply.
    """

    name: str
    span: Span
    message: str
    hint: str = ""
    citation: str | None = None
    related: Sequence[Location] = ()
    """Related locations, in order: a tuple, or for a conflict's sources a
    :class:`DeferredLocations` (made when first read; equal to its tuple)."""
    fix: Edit | None = None
    severity: Severity | None = None
    also: tuple[Edit, ...] = ()
    """Edits that belong to ``fix`` and are applied with it (a re-anchor also updates the
    draft's context units, issue 12); never without it."""
    conflict: ConflictDetail | None = field(default=None, compare=False, repr=False)
    """A draft's ``field-conflict`` (GR108) only: what it is about, for a renderer that shows
    less than the whole message (the editor, ``server/render/conflicts.py``); not compared."""

    @property
    def rule(self) -> Rule:
        return RULES[self.name]

    @property
    def code(self) -> str:
        return RULES[self.name].code

    @property
    def effective_severity(self) -> Severity:
        return self.severity or RULES[self.name].severity


@dataclass(frozen=True, slots=True)
class ConflictDetail:
    """The key behind a draft's ``field-conflict`` finding (SPEC §7.4, §15).

    ``summary`` is the key's summary the message was made from (every value with its count
    and at most 5 sources, the draft's cited ones first); the finding's ``related`` lists
    exactly those sources, in that order (value by value). ``cited`` are the draft's cited
    lines of this key, (doc_id, version, 1-based line), in draft order; ``own`` the line this
    finding's citation cites (None on the ``fields`` item).
    """

    summary: KeySummary
    cited: tuple[tuple[str, int, int], ...]
    own: tuple[str, int, int] | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``span`` (in the draft) with ``new_text``; ``title`` names the fix for a user."""

    span: Span
    new_text: str
    title: str


@dataclass(frozen=True, slots=True)
class FieldLine:
    """A parsed field line (SPEC §3): ``text`` is the line without one list marker."""

    text: str
    field: str
    value: str


@dataclass(frozen=True, slots=True)
class CitationRef:
    """The parts a claim cites: ``doc_id@version:line`` (SPEC §5); line is 1-based."""

    doc_id: str
    version: int
    line: int

    @property
    def id(self) -> str:
        return f"{self.doc_id}@{self.version}:{self.line}"


@dataclass(frozen=True, slots=True)
class RegionRef:
    """The parts an image claim cites: ``DOC_ID@VERSION#rN`` (SPEC §12); ``region`` is N (1-based)."""

    doc_id: str
    version: int
    region: int

    @property
    def name(self) -> str:
        """``r2`` for region 2, as written after ``#``."""
        return f"r{self.region}"

    @property
    def id(self) -> str:
        return f"{self.doc_id}@{self.version}#r{self.region}"


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """The parts a memory claim cites: ``memory:SCOPE/KEY@VERSION`` (SPEC §11)."""

    scope: str
    key: str
    version: int

    @property
    def id(self) -> str:
        return f"memory:{self.scope}/{self.key}@{self.version}"


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of a draft: a sentence (or JSON claim object) and the citation it holds.

    ``citation`` is None when the citation could not be parsed (a GR101 finding was raised
    already) or when the claim cites an image region (``region`` is set) or a memory entry
    (``memory`` is set). ``sentence`` is the claim text as written in the draft (Markdown: the
    sentence with references; JSON: the ``text`` value). Spans are in the draft.
    """

    sentence: str
    sentence_span: Span
    citation_span: Span
    citation: CitationRef | None
    hash_prefix: str | None
    quote: str | None
    label: str | None = None
    json_text: str | None = None
    json_field: str | None = None
    json_sha256: str | None = None
    value_spans: tuple[tuple[str, Span], ...] = ()
    region: RegionRef | None = None
    """Set for an image claim (SPEC §12); ``citation`` is then None."""
    memory: MemoryRef | None = None
    """Set for a memory claim (SPEC §11); ``citation`` is then None."""

    def value_span(self, key: str) -> Span:
        """The span of one JSON key's value, else the claim's citation span."""
        for name, span in self.value_spans:
            if name == key:
                return span
        return self.citation_span


@dataclass(frozen=True, slots=True)
class ReportLine:
    """A (doc_id, version, 1-based line) identity of an evidence line."""

    doc_id: str
    version: int
    line: int


@dataclass(slots=True)
class DraftReport:
    """The result of checking one draft (SPEC §7.5, §9 JSON shape)."""

    path: str
    status: Status
    required_fields: list[str]
    covered_fields: list[str]
    missing_fields: list[str]
    field_completeness: bool
    coverage: float
    same_key_sources_checked: int
    findings: list[Finding] = field(default_factory=list)
    valid_claims: list[Claim] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    output_tokens: int | None = None
    output_reserve: int | None = None
    wire_claims: list[dict[str, object]] = field(default_factory=list)
    index_complete: bool = True
    """False when a compiled ``query`` context ranked an index whose full-text rows were
    still being built ("still indexing"): check again once indexing is done."""

    @property
    def error_count(self) -> int:
        return sum(1 for f in self.findings if f.effective_severity is Severity.ERROR)
