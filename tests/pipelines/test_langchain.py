"""The LangChain output parser (SPEC §14) in real chains: ``prompt | FakeListChatModel | parser``.

``langchain-core`` is the real library; the chat model is its own fake, replaying answers. A
rejected answer must raise ``OutputParserException`` (with the findings in its message and
the model's text as ``llm_output``), so ``with_retry`` and ``with_fallbacks`` act on it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable

from grounding import Verifier
from grounding.langchain import GroundingOutputParser, GroundingParserError, VerifiedAnswer

from .conftest import answer, claim, dumps

PROMPT = ChatPromptTemplate.from_messages([("system", "{instructions}"), ("human", "{question}\n\n{context}")])
HITS = [{"doc_id": "schedule", "version": 2, "lines": [7, 8]}]
INPUT = {"instructions": "Answer in JSON.", "question": "开放日什么时候、在哪里？", "context": "schedule@2:7-8 ..."}
VALID = answer(claim("schedule", 2, 7), claim("schedule", 2, 8), fields=["活动时间", "地点"])
FORGED = answer(claim("schedule", 2, 7, "- 活动时间：周四16:00 🎉"), fields=["活动时间"])
STALE = answer(claim("schedule", 1, 5), fields=["活动时间"])
INVISIBLE = answer(claim("refund", 1, 2), fields=["退款方式"])
CONFLICTING = answer(claim("gym", 1, 4), fields=["开放时间"])


def chain(verifier: Verifier, *responses: str, **parser: Any) -> Runnable[Any, VerifiedAnswer]:
    options = {"context": HITS, **parser}
    return PROMPT | FakeListChatModel(responses=list(responses)) | GroundingOutputParser(verifier=verifier, **options)


def rejected(verifier: Verifier, response: str, **parser: Any) -> GroundingParserError:
    with pytest.raises(OutputParserException) as info:
        chain(verifier, response, **parser).invoke(INPUT)
    assert isinstance(info.value, GroundingParserError)
    assert info.value.llm_output == response
    return info.value


def test_a_valid_answer_becomes_a_verified_answer(verifier: Verifier) -> None:
    result = chain(verifier, dumps(VALID)).invoke(INPUT)
    assert isinstance(result, VerifiedAnswer)
    assert result.report.status == "answered" and result.report.ok
    assert [c.id for c in result.answer.claims] == ["schedule@2:7", "schedule@2:8"]
    assert result.answer.claims[0].quote == "- 活动时间：周四16:30 🎉"


def test_a_json_code_fence_around_the_answer_is_accepted(verifier: Verifier) -> None:
    fenced = "Here is the answer:\n```json\n" + dumps(VALID) + "\n```\n"
    assert chain(verifier, fenced).invoke(INPUT).report.status == "answered"


def test_a_forged_quote_raises_with_the_finding_in_the_message(verifier: Verifier) -> None:
    exc = rejected(verifier, dumps(FORGED))
    assert "/claims/0/quote: GR103 quote-mismatch" in str(exc)
    assert "U+0030 DIGIT ZERO" in str(exc) and "Hint:" in str(exc)
    assert exc.report is not None and exc.report.status == "abstain"
    assert exc.observation == str(exc).split("\nFor troubleshooting")[0]


def test_a_stale_citation_raises(verifier: Verifier) -> None:
    exc = rejected(verifier, dumps(STALE), context=[{"doc_id": "schedule", "version": 1, "lines": [5, 5]}])
    assert "GR104 stale-citation" in str(exc) and "version 2 of 'schedule' is current" in str(exc)


def test_a_line_the_model_was_not_shown_raises_invisible_source(verifier: Verifier) -> None:
    exc = rejected(verifier, dumps(INVISIBLE))
    assert "GR107 invisible-source" in str(exc) and "refund@1:2" in str(exc)


def test_a_same_field_conflict_raises_field_conflict(verifier: Verifier) -> None:
    exc = rejected(verifier, dumps(CONFLICTING), context=[{"doc_id": "gym", "version": 1, "lines": [4, 4]}])
    assert "GR108 field-conflict" in str(exc) and "does not pick a side" in str(exc)
    assert exc.report is not None and exc.report.status == "conflict"


def test_output_that_is_not_json_raises_malformed_citation(verifier: Verifier) -> None:
    exc = rejected(verifier, "活动时间是周四16:30。")
    assert "GR101 malformed-citation" in str(exc) and "not valid JSON" in str(exc)


def test_warnings_pass_unless_fail_on_warnings(verifier: Verifier) -> None:
    partial = dumps(answer(claim("schedule", 2, 7), fields=["活动时间", "地点"]))  # declares answered, is partial
    result = chain(verifier, partial).invoke(INPUT)
    assert result.report.status == "partial"
    assert {d.name for d in result.report.diagnostics} == {"missing-field", "status-mismatch"}
    exc = rejected(verifier, partial, fail_on_warnings=True)
    assert "GR114 status-mismatch" in str(exc)


def test_with_retry_asks_again_after_a_rejected_answer(verifier: Verifier) -> None:
    model = FakeListChatModel(responses=[dumps(FORGED), dumps(VALID)])
    retrying = (PROMPT | model | GroundingOutputParser(verifier=verifier, context=HITS)).with_retry(
        retry_if_exception_type=(OutputParserException,), stop_after_attempt=2, wait_exponential_jitter=False)
    result = retrying.invoke(INPUT)
    assert result.report.status == "answered"
    assert [c.id for c in result.answer.claims] == ["schedule@2:7", "schedule@2:8"]  # the second answer


def test_with_retry_gives_up_with_the_last_rejection(verifier: Verifier) -> None:
    retrying = chain(verifier, dumps(FORGED), dumps(STALE)).with_retry(
        retry_if_exception_type=(OutputParserException,), stop_after_attempt=2, wait_exponential_jitter=False)
    with pytest.raises(GroundingParserError, match="stale-citation|invisible-source"):
        retrying.invoke(INPUT)


def test_with_fallbacks_turns_to_the_fallback_chain_when_the_answer_is_rejected(verifier: Verifier) -> None:
    primary = chain(verifier, dumps(INVISIBLE))
    fallback = chain(verifier, dumps(VALID))
    result = primary.with_fallbacks([fallback], exceptions_to_handle=(OutputParserException,)).invoke(INPUT)
    assert result.report.status == "answered"


def test_format_instructions_carry_the_answer_schema(verifier: Verifier) -> None:
    text = GroundingOutputParser(verifier=verifier).get_format_instructions()
    schema = json.loads(text.split("JSON Schema: ", 1)[1])
    items = schema["properties"]["claims"]["items"]  # a text claim or an image claim (SPEC §15)
    assert sorted(ref["$ref"].rsplit("/", 1)[1] for ref in items["anyOf"]) == ["Claim", "ImageClaim"]


def test_with_hits_binds_another_requests_hits(verifier: Verifier) -> None:
    parser = GroundingOutputParser(verifier=verifier, context=HITS)
    other = parser.with_hits(context=[{"doc_id": "refund", "version": 1, "lines": [2, 3]}])
    assert other.parse(dumps(INVISIBLE)).report.ok
    with pytest.raises(GroundingParserError):
        parser.parse(dumps(INVISIBLE))


# -- the chunk adapter: {"answer", "citations": [{"chunk_id", "quote"}]} ------------------------------

CHUNKS = {
    "c1": {"doc_id": "schedule", "version": 2, "lines": [7, 10]},
    "c2": {"doc_id": "refund", "version": 1, "text": "- 退款方式：原路退回\n- 退款到账时间：审核通过后3个工作日内"},
}


def chunk_answer(*citations: tuple[str, str]) -> str:
    return json.dumps({"answer": "活动周四16:30在三楼报告厅。",
                       "citations": [{"chunk_id": c, "quote": q} for c, q in citations]}, ensure_ascii=False)


def test_chunk_citations_map_to_claims_on_the_cited_lines(verifier: Verifier) -> None:
    response = chunk_answer(("c1", "- 活动时间：周四16:30 🎉"), ("c2", "- 退款到账时间：审核通过后3个工作日内"))
    result = chain(verifier, response, context=None, chunks=CHUNKS, fields=["活动时间"]).invoke(INPUT)
    assert [c.id for c in result.answer.claims] == ["schedule@2:7", "refund@1:3"]
    assert result.answer.status == "answered" and result.answer.missing_fields == []
    assert result.text == "活动周四16:30在三楼报告厅。"
    assert result.report.ok


def test_a_forged_chunk_quote_is_quote_mismatch_on_the_most_similar_line(verifier: Verifier) -> None:
    exc = rejected(verifier, chunk_answer(("c1", "- 地点：三楼报告厅")), context=None, chunks=CHUNKS)
    assert "GR103 quote-mismatch" in str(exc) and "schedule@2" in str(exc) and "line 8" in str(exc)


def test_a_chunk_quote_without_its_list_marker_finds_the_line_and_fails_as_a_half_line(verifier: Verifier) -> None:
    exc = rejected(verifier, chunk_answer(("c2", "退款方式：原路退回")), context=None, chunks=CHUNKS)
    assert "line 2 of refund@1" in str(exc)


def test_a_chunk_the_model_was_not_shown_is_rejected(verifier: Verifier) -> None:
    exc = rejected(verifier, chunk_answer(("c9", "- 地点：三楼报告厅𠮷")), context=None, chunks=CHUNKS)
    assert "'c9', which the model was not shown (chunks shown: c1, c2)" in str(exc)


def test_a_chunk_of_a_superseded_version_is_stale(verifier: Verifier) -> None:
    chunks = {"old": {"doc_id": "schedule", "version": 1, "lines": [5, 5]}}
    exc = rejected(verifier, chunk_answer(("old", "- 活动时间：周三16:30")), context=None, chunks=chunks)
    assert "GR104 stale-citation" in str(exc)


def test_a_chunk_quote_cut_from_a_text_unit_is_not_visible(verifier: Verifier) -> None:
    chunks = {"c3": {"doc_id": "schedule", "version": 2, "text": "- 活动时间：周四16:30 🎉\n- 地点：三楼"}}
    exc = rejected(verifier, chunk_answer(("c3", "- 地点：三楼报告厅𠮷")), context=None, chunks=chunks)
    assert "GR107 invisible-source: schedule@2:8" in str(exc) and "GR103" not in str(exc)
