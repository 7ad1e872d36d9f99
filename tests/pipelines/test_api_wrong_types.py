"""The Python API given arguments of the wrong type (README "What Grounding guarantees": a
clear error, never an AttributeError from deep inside): each is a TypeError naming the
parameter, what it takes and what it got, or a ValueError for a value out of range; a
malformed *answer* stays a finding (SPEC §14). The verifier keeps working afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest

from grounding import Verifier

from .conftest import answer, claim

TIME = claim("schedule", 2, 7)

CALLS: list[tuple[str, Any, str]] = [
    ("check(None)", lambda v: v.check(None), "text must be the draft or JSON answer as a str"),
    ("check(bytes)", lambda v: v.check("- 活动时间：周四16:30 🎉".encode()), "text must be"),
    ("check(kind=pdf)", lambda v: v.check("活动🎉", kind="pdf"), "kind must be 'json', 'markdown' or None"),
    ("cite(5)", lambda v: v.cite(5), "target must be a str"),
    ("cite(grep=5)", lambda v: v.cite(grep=5), "grep must be a str or None"),
    ("cite(limit=-5)", lambda v: v.cite(grep="活动时间", limit=-5), "limit must be at least 1, got -5"),
    ("cite(limit='3')", lambda v: v.cite(grep="活动时间", limit="3"), "limit must be an int"),
    ("compile(None)", lambda v: v.compile(None), "question must be a str"),
    ("compile(limit='a')", lambda v: v.compile("活动时间？", limit="a"), "limit must be an int (tokens)"),
    ("compile(reserve=True)", lambda v: v.compile("活动时间？", reserve=True), "reserve must be an int"),
    ("verify_chunks(None, {})", lambda v: v.verify_chunks(None, {}), "payload must be a dict or a pydantic"),
    ("verify_chunks({}, None)", lambda v: v.verify_chunks({"answer": "x", "citations": []}, None),
     "chunks must be a dict"),
    ("evidence_path(None)", lambda v: v.evidence_path(None), "target must be a str"),
    ("verify(today=5)", lambda v: v.verify(answer(TIME), today=5), "today must be a datetime.date"),
]


@pytest.mark.parametrize(("name", "call", "said"), CALLS, ids=[c[0] for c in CALLS])
def test_a_wrong_type_is_a_clear_error_and_the_verifier_goes_on(verifier: Verifier, name: str, call: Any,
                                                                 said: str) -> None:
    with pytest.raises((TypeError, ValueError)) as raised:
        call(verifier)
    assert said in str(raised.value), (name, str(raised.value))
    assert type(raised.value) in (TypeError, ValueError)
    assert verifier.verify(answer(TIME)).ok


def test_a_nul_in_a_cite_target_names_the_target_not_the_os(verifier: Verifier) -> None:
    with pytest.raises(ValueError) as raised:
        verifier.cite("sched\0ule:7")
    assert "embedded null byte" not in str(raised.value)
    assert "no evidence document has doc_id" in str(raised.value)
    assert verifier.evidence_path("evidence/schedule.md\0:7") is None
