"""LangChain output parser: parse and verify the model's answer (SPEC §14; ``grounding[langchain]``).

::

    from grounding import Verifier
    from grounding.langchain import GroundingOutputParser

    verifier = Verifier("workspace")
    parser = GroundingOutputParser(verifier=verifier, context=hits, fields=["活动时间"])
    chain = (prompt | llm | parser).with_retry(stop_after_attempt=3)
    result = chain.invoke({...})          # VerifiedAnswer: .answer (Answer), .report (Report)

The parser reads the model's text as JSON (a Markdown code fence around it is allowed),
verifies it with the same checks as ``grounding check`` against the index and the **hits**
(``context``: the SPEC §6 units the model was shown), and returns a :class:`VerifiedAnswer`.
An answer with any error-severity finding (a forged quote, a stale or inactive source, a line
that was not in the hits, a same-field conflict, bad JSON) raises
:class:`GroundingParserError`, an ``OutputParserException`` whose message lists the findings
and whose ``llm_output`` is the model's text, so ``with_retry`` and ``with_fallbacks`` act on it.

Two answer shapes are accepted: the §5.2 wire (``{"status", "claims", "missing_fields"}``)
and the chunk shape ``{"answer", "citations": [{"chunk_id", "quote"}]}``, mapped to claims by
:mod:`grounding.adapters` through ``chunks`` (chunk id -> §6 unit).

Hits differ per question: build one parser per request (cheap: the :class:`Verifier` holds
the index), or derive one with :meth:`GroundingOutputParser.with_hits`.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.output_parsers import BaseOutputParser
from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel, ConfigDict, ValidationError

from .adapters import ChunkError, is_chunk_answer
from .api import UnitInput, Verifier
from .models import Answer, Report, json_schema


class VerifiedAnswer(BaseModel):
    """A verified answer: the §5.2 ``answer``, its §9 ``report`` and, for the chunk shape, the
    model's prose ``text``.
    """

    answer: Answer
    report: Report
    text: str | None = None


class GroundingParserError(OutputParserException):
    """An answer Grounding rejects; ``report`` holds every finding (None for unparsable output)."""

    def __init__(self, message: str, llm_output: str, report: Report | None = None) -> None:
        super().__init__(message, observation=message, llm_output=llm_output)
        self.report = report


def _strict_json(text: str) -> str:
    json.loads(text)
    return text


class GroundingOutputParser(BaseOutputParser[VerifiedAnswer]):
    """Parse the model's JSON answer into :class:`VerifiedAnswer` and verify it against the hits.

    ``verifier`` is an open :class:`grounding.Verifier`; ``context`` the §6 units the model was
    shown (None: the answer's own declared context, else visibility is not checked);
    ``chunks`` maps chunk ids to units for the chunk shape (its units are then the context
    when ``context`` is None); ``fields`` the required fields of the question; ``question``
    is written into chunk-shaped answers; ``fail_on_warnings`` also rejects answers with
    warnings (a missing field, a status that differs from the computed one).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    verifier: Verifier
    context: list[Any] | None = None
    chunks: dict[str, Any] | None = None
    fields: list[str] | None = None
    question: str | None = None
    fail_on_warnings: bool = False

    @property
    def _type(self) -> str:
        return "grounding"

    def with_hits(self, context: list[UnitInput] | None = None,
                  chunks: dict[str, UnitInput] | None = None) -> GroundingOutputParser:
        """A copy of this parser for another request's hits."""
        return self.model_copy(update={"context": context, "chunks": chunks})

    def parse(self, text: str) -> VerifiedAnswer:
        """Verify ``text``; raises :class:`GroundingParserError` when Grounding rejects it."""
        try:
            body = parse_json_markdown(text, parser=_strict_json)
        except json.JSONDecodeError:
            body = text  # not JSON even inside a fence: the core reports where it breaks
        prose: str | None = None
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            data = None
        if is_chunk_answer(data):
            try:
                report, wire = self.verifier.verify_chunks(data, self.chunks or {}, fields=self.fields,
                                                           question=self.question)
            except ChunkError as exc:
                raise GroundingParserError(f"Grounding rejected the answer: {exc}", text) from None
            prose = data.get("answer") if isinstance(data.get("answer"), str) else None
        else:
            wire = body
            report = self.verifier.verify(body, context=self.context)
        failing = [d for d in report.diagnostics
                   if d.severity == "error" or (self.fail_on_warnings and d.severity == "warning")]
        if failing:
            raise GroundingParserError(_message(report, failing), text, report)
        try:
            answer = Answer.model_validate(wire if isinstance(wire, dict) else json.loads(wire))
        except (ValidationError, json.JSONDecodeError) as exc:  # the checks accepted what the model rejects
            raise GroundingParserError(f"Grounding rejected the answer: {exc}", text, report) from None
        return VerifiedAnswer(answer=answer, report=report, text=prose)

    def get_format_instructions(self) -> str:
        """What to tell the model: the §5.2 wire and its JSON Schema."""
        schema = json.dumps(json_schema("answer"), ensure_ascii=False)
        return (
            "Answer with one JSON object and nothing else: {\"status\": ..., \"claims\": [...],"
            " \"missing_fields\": [...]}. Each claim cites one whole line of a context unit: \"quote\""
            " is that line copied exactly (list marker included), \"text\" the quote without its list"
            " marker, \"field\" the text before its first field separator, \"id\" DOC_ID@VERSION:LINE"
            " with the line number shown before the line, \"sha256\" the document's hash. Cite only"
            " lines shown in the context; if a required field is not in it, leave it out and list it in"
            f" missing_fields. JSON Schema: {schema}"
        )


def _message(report: Report, failing: list[Any]) -> str:
    head = (f"Grounding rejected the answer (status {report.status}): {len(failing)} finding(s)"
            " must be fixed:")
    lines = []
    for d in failing[:20]:
        where = d.pointer or f"{d.line}:{d.column}"
        lines.append(f"- {where}: {d.code} {d.name}: {d.message}" + (f" Hint: {d.hint}" if d.hint else ""))
    if len(failing) > 20:
        lines.append(f"- ... and {len(failing) - 20} more")
    return "\n".join([head, *lines])


__all__ = ["GroundingOutputParser", "GroundingParserError", "VerifiedAnswer"]
