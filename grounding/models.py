"""Typed models of the pipeline wire (SPEC §5.2, §6, §9) with exported JSON Schemas.

- :class:`Answer` / :class:`Claim`: the JSON answer an LLM or pipeline emits (SPEC §5.2).
  The types are as strict as the checker's: ``version`` and ``line`` are integers ≥ 1 (a
  boolean is not), ``sha256`` is 64 lowercase hex digits, strings are non-empty, no key is
  extra and ``id`` agrees with ``doc_id``/``version``/``line``. :class:`ImageClaim`: an image
  claim (SPEC §12, §15), nine keys with ``region`` instead of ``line`` and ``support_type:
  "measured"``. Memory claims (§11) have other keys.
- :class:`ContextUnit`: one unit the model was shown (SPEC §6 log unit): whole lines
  ``{"doc_id", "version", "lines": [first, last]}`` (1-based, inclusive) or exact text
  ``{"doc_id", "version", "text"}``.
- :class:`Report` / :class:`Diagnostic`: the §9 draft object (1-based lines and columns,
  columns in Unicode code points, ``end_column`` exclusive).

``grounding schema answer|report|context`` prints these schemas. Validation here is for
callers who build or receive these objects in code; :func:`grounding.verify` never needs it
(a malformed answer is a ``malformed-citation`` finding in its report, with a position).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from grounding_core.model import CLAIM_KEYS, IMAGE_CLAIM_KEYS

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Positive = Annotated[StrictInt, Field(ge=1, le=999_999_999_999_999_999)]
Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$",
                                    description="sha256 of the file's raw bytes, 64 lowercase hex")]
Status = Literal["answered", "partial", "abstain", "conflict"]
Severity = Literal["error", "warning", "information", "hint"]
_ID_RE = re.compile(r"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>[1-9][0-9]{0,17}):(?P<line>[1-9][0-9]{0,17})")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Claim(_Wire):
    """One claim of a JSON answer: exactly the eight keys of SPEC §5, in that order."""

    text: NonEmpty = Field(description="the quote without its list marker")
    quote: NonEmpty = Field(description="the whole cited line, verbatim")
    id: NonEmpty = Field(description="DOC_ID@VERSION:LINE")
    doc_id: NonEmpty
    version: Positive
    line: Positive = Field(description="1-based physical line, front matter included")
    sha256: Sha256
    field: NonEmpty = Field(description="the text before the line's first field separator")

    @model_validator(mode="after")
    def _id_agrees(self) -> Claim:
        m = _ID_RE.fullmatch(self.id)
        if m is None or (m["doc_id"], int(m["version"]), int(m["line"])) != (self.doc_id, self.version, self.line):
            raise ValueError(f"id {self.id!r} is not {self.doc_id}@{self.version}:{self.line}")
        return self


_REGION_ID_RE = re.compile(
    r"(?P<doc_id>[^\s@:\[\]\"]+)@(?P<version>[1-9][0-9]{0,17})#(?P<region>r[1-9][0-9]{0,17})")


class ImageClaim(_Wire):
    """One image claim of a JSON answer: exactly the nine keys of SPEC §15, in that order."""

    text: NonEmpty = Field(description="FIELD：VALUE, the same as quote")
    quote: NonEmpty = Field(description="one measured attribute, FIELD：VALUE (e.g. 颜色：红色)")
    id: NonEmpty = Field(description="DOC_ID@VERSION#rN")
    doc_id: NonEmpty
    version: Positive
    region: Annotated[StrictStr, Field(pattern=r"^r[1-9][0-9]{0,17}$", description="r1, r2, … in reading order")]
    sha256: Sha256
    field: NonEmpty = Field(description="the measured attribute: 位置, 面积, 颜色, 形状 or 大小")
    support_type: Literal["measured"]

    @model_validator(mode="after")
    def _id_agrees(self) -> ImageClaim:
        m = _REGION_ID_RE.fullmatch(self.id)
        if m is None or (m["doc_id"], int(m["version"]), m["region"]) != (self.doc_id, self.version, self.region):
            raise ValueError(f"id {self.id!r} is not {self.doc_id}@{self.version}#{self.region}")
        return self


class UnitsContext(_Wire):
    """``{"units": ["schedule@2", "notice@1:1-12"]}``: whole versions or line ranges (SPEC §6)."""

    units: list[StrictStr] | StrictStr
    limit: Positive | None = None
    reserve: Positive | None = None


class LogContext(_Wire):
    """``{"log": "runs/ctx.json"}``: a context log, relative to the workspace root (SPEC §6)."""

    log: NonEmpty
    limit: Positive | None = None
    reserve: Positive | None = None


class QueryContext(_Wire):
    """``{"query": "...", "limit": N, "reserve": M}``: compiled by the engine (SPEC §8)."""

    query: NonEmpty
    limit: Positive | None = None
    reserve: Positive | None = None


class Answer(_Wire):
    """A JSON answer (SPEC §5.2): ``status``, ``claims``, ``missing_fields`` and optional keys."""

    status: Status
    claims: list[Claim | ImageClaim]
    missing_fields: list[StrictStr]
    question: StrictStr | None = None
    fields: list[NonEmpty] | StrictStr | None = None
    subject: NonEmpty | None = None
    context: UnitsContext | LogContext | QueryContext | None = None

    def wire(self) -> dict[str, Any]:
        """The answer as plain JSON values (optional keys left out when None)."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        """The answer as JSON text (non-ASCII kept)."""
        return json.dumps(self.wire(), ensure_ascii=False, indent=1)


class LinesUnit(_Wire):
    """Whole lines ``first..last`` (1-based, inclusive) of one version."""

    doc_id: NonEmpty
    version: Positive
    lines: Annotated[list[Positive], Field(min_length=2, max_length=2)]

    @model_validator(mode="after")
    def _ordered(self) -> LinesUnit:
        if self.lines[1] < self.lines[0]:
            raise ValueError("lines must be [first, last] with first <= last")
        return self


class TextUnit(_Wire):
    """The exact text shown of one version; a line is visible only if it appears in it whole."""

    doc_id: NonEmpty
    version: Positive
    text: StrictStr


ContextUnit = LinesUnit | TextUnit
"""One SPEC §6 log unit: the lines or the text of one version that the model was shown."""


class ContextLog(_Wire):
    """A context log file (SPEC §6): ``{"units": [...]}``."""

    units: list[LinesUnit | TextUnit]


class Citation(BaseModel):
    """One verified citation of an active line (``grounding cite``, the MCP ``cite`` tool)."""

    footnote: str = Field(description='paste-ready Markdown: [^1]: DOC_ID@V:LINE sha256:HEX12 "LINE"')
    id: str = Field(description="DOC_ID@VERSION:LINE, or DOC_ID@VERSION#rN for an image region")
    doc_id: str
    version: int
    line: int = Field(description="1-based, front matter included (an image: the attribute's line)")
    sha256: str = Field(description="the full sha256 of the evidence file's bytes")
    quote: str = Field(description="the whole line, verbatim")
    text: str = Field(description="the line without its list marker")
    field: str | None = Field(description="the field name, for a field line")
    value: str | None = Field(description="the field value, for a field line")
    path: str = Field(description="the evidence file, relative to the workspace root")
    region: str | None = Field(default=None, description="an image's region (r1, r2, …), SPEC §12")
    claim: Claim | ImageClaim | None = Field(
        description="the eight-key JSON claim (field lines only); an image region's nine-key claim")


class Skipped(BaseModel):
    """A matching line that cannot be cited, and why."""

    doc_id: str
    line: int
    name: str = Field(description="the finding a citation of it would get, e.g. meta-field")
    message: str


class Related(BaseModel):
    """Another place a diagnostic points to: a root-relative path and a 1-based line."""

    path: str
    line: int
    message: str | None = None


class Fix(BaseModel):
    """A mechanical fix: replace the diagnostic's range with ``new_text``."""

    title: str
    new_text: str


class Diagnostic(BaseModel):
    """One finding (SPEC §7, §9): 1-based ``line``/``column``, code points, ``end_column`` exclusive.

    ``pointer``: for an answer given as JSON through the Python API, the JSON Pointer (RFC 6901)
    of the offending value or key, e.g. ``/claims/0/quote``, and ``""`` (the whole document)
    for a finding about the answer as a whole (a missing top-level key, text that is not JSON,
    ``context-undeclared``): always a str. None for every diagnostic of a Markdown draft.
    ``fingerprint`` is the content-based id that ``--baseline`` and code scanning use.
    """

    code: str
    name: str
    severity: Severity
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    hint: str | None = None
    citation: str | None = None
    related: list[Related] | None = None
    fix: Fix | None = None
    fingerprint: str | None = None
    pointer: str | None = None


class Report(BaseModel):
    """The SPEC §9 draft object for one answer.

    ``status`` is the computed status (§7.5); ``coverage`` the share of the active lines
    carrying a required field that valid claims cite; ``output_tokens`` the answer wire's
    output tokens (§8). :attr:`ok` is True when no diagnostic is an error.
    """

    path: str
    status: Status
    required_fields: list[str]
    covered_fields: list[str]
    missing_fields: list[str]
    field_completeness: StrictBool
    coverage: float
    same_key_sources_checked: int
    output_tokens: int | None = None
    output_reserve: int | None = None
    diagnostics: list[Diagnostic]

    def as_json(self) -> dict[str, Any]:
        """The report as the JSON object ``grounding check --format json`` prints per draft (SPEC §9)."""
        out = self.model_dump(mode="json", exclude_none=True)
        if self.output_tokens is not None:
            out["output_reserve"] = self.output_reserve
        keys = list(Report.model_fields)
        return {k: out[k] for k in keys if k in out}

    @property
    def errors(self) -> list[Diagnostic]:
        """The error-severity diagnostics (any one makes an answer invalid for a pipeline)."""
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self, limit: int = 20) -> str:
        """One line per diagnostic: ``/claims/0/quote GR103 quote-mismatch: message (hint: ...)``;
        ``LINE:COLUMN`` (1-based, code points) instead of a pointer for a Markdown draft and for
        the whole document (pointer ``""``).
        """
        lines = []
        for d in self.diagnostics[:limit]:
            where = d.pointer if d.pointer else f"{d.line}:{d.column}"
            hint = f" (hint: {d.hint})" if d.hint else ""
            lines.append(f"{where} {d.severity} {d.code} {d.name}: {d.message}{hint}")
        if len(self.diagnostics) > limit:
            lines.append(f"... and {len(self.diagnostics) - limit} more")
        return "\n".join(lines)


SCHEMAS: dict[str, type[BaseModel]] = {"answer": Answer, "report": Report, "context": ContextLog}
"""Name -> model, for ``grounding schema NAME``."""


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``answer``, ``report`` or ``context``; KeyError otherwise."""
    schema = SCHEMAS[name].model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


assert tuple(Claim.model_fields) == CLAIM_KEYS, "Claim must have the eight keys of SPEC §5, in order"
assert tuple(ImageClaim.model_fields) == IMAGE_CLAIM_KEYS, "ImageClaim must have the nine keys of SPEC §15, in order"
