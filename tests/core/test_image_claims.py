"""Image claims in drafts (SPEC §12, §15): the ``DOC_ID@VERSION#rN`` citation grammar in
Markdown definitions and the nine-key JSON image claim. Parsing only: the checks against a
real index are in ``test_image_evidence.py``.
"""

from __future__ import annotations

import json

import pytest

from grounding_core.budget import render_answer_wire
from grounding_core.drafts import parse_draft
from grounding_core.image_claims import is_region_id, parse_region_id, split_quote
from grounding_core.model import IMAGE_CLAIM_KEYS, RegionRef

HEX = "9f86d0818ab1"
FULL = "9f86d0818ab1" + "0" * 52


def markdown(*definitions: str, sentence: str = "警示灯是红色的[^1]。", crlf: bool = False) -> str:
    text = "\n".join(["---", "question: 面板上的警示灯是什么颜色？", "fields: [颜色]", "---",
                      sentence, "", *definitions]) + "\n"
    return text.replace("\n", "\r\n") if crlf else text


@pytest.mark.parametrize("crlf", [False, True])
def test_a_region_citation_is_a_claim_with_a_region_and_no_line(crlf: bool) -> None:
    draft = parse_draft(markdown(f'[^1]: shapes@1#r2 sha256:{HEX} "颜色：红色"', crlf=crlf))
    assert draft.findings == []
    (claim,) = draft.claims
    assert claim.region == RegionRef("shapes", 1, 2)
    assert claim.region.id == "shapes@1#r2" and claim.region.name == "r2"
    assert claim.citation is None
    assert (claim.hash_prefix, claim.quote) == (HEX, "颜色：红色")
    # the span runs from the id to the line's end, in code points (SPEC §7.7)
    assert claim.citation_span.start_col == len("[^1]: ")
    assert claim.citation_span.end_col == len(f'[^1]: shapes@1#r2 sha256:{HEX} "颜色：红色"')


def test_cjk_doc_ids_emoji_quotes_and_two_regions_in_one_sentence() -> None:
    text = markdown(f'[^甲]: 面板🎉图@3#r1 sha256:{HEX} "颜色：红色"',
                    f'[^乙]: 面板🎉图@3#r12 sha256:{HEX} "形状：𠮷"',
                    sentence="警示灯是红色的[^甲]，旁边是𠮷形[^乙]。")
    draft = parse_draft(text)
    assert draft.findings == []
    assert [c.region for c in draft.claims] == [RegionRef("面板🎉图", 3, 1), RegionRef("面板🎉图", 3, 12)]
    assert draft.claims[1].quote == "形状：𠮷"


@pytest.mark.parametrize(("id_text", "why"), [
    ("shapes@1#2", "#r and its number"),
    ("shapes@1#r0", "there is no r0"),
    ("shapes@1#r02", "region number '02'"),
    ("shapes@01#r2", "version '01'"),
    ("shapes@1＃r2", "full-width '＃'"),
    ("shapes@1#R2", "#r and its number"),
    ("sha pes@1#r2", None),  # whitespace ends the id: not a region id at all
])
def test_malformed_region_ids_fail_closed(id_text: str, why: str | None) -> None:
    draft = parse_draft(markdown(f'[^1]: {id_text} sha256:{HEX} "颜色：红色"'))
    (finding,) = [f for f in draft.findings if f.name == "malformed-citation"]
    if why is not None:
        assert why in finding.message
        assert "DOC_ID@VERSION#rN" in finding.hint
    assert draft.claims[0].region is None and draft.claims[0].citation is None


def test_a_region_citation_keeps_the_rest_of_the_definition_grammar() -> None:
    for bad, why in ((f'shapes@1#r2 sha256:{HEX.upper()} "颜色：红色"', "lowercase"),
                     ('shapes@1#r2 sha256:9f86 "颜色：红色"', "too short"),
                     (f'shapes@1#r2 sha256:{HEX} “颜色：红色”', "U+201C"),
                     (f"shapes@1#r2 sha256:{HEX}", "quote is missing")):
        (finding,) = parse_draft(markdown(f"[^1]: {bad}")).findings
        assert finding.name == "malformed-citation" and why in finding.message, bad


def test_region_id_helpers() -> None:
    assert is_region_id("shapes@1#r2") and is_region_id("a#b@1＃r2")
    assert not is_region_id("a#b@1:2") and not is_region_id("shapes#r2")
    assert parse_region_id("a#b@7#r3") == (RegionRef("a#b", 7, 3), "")
    assert split_quote("颜色：红色", ("：",)) == ("颜色", "红色")
    assert split_quote(" color : red ", (":",)) == ("color", "red")
    assert split_quote("红色", ("：",)) is None and split_quote("：红色", ("：",)) is None


def image_claim(**changes: object) -> dict[str, object]:
    claim: dict[str, object] = {"text": "颜色：红色", "quote": "颜色：红色", "id": "shapes@1#r1",
                                "doc_id": "shapes", "version": 1, "region": "r1", "sha256": FULL,
                                "field": "颜色", "support_type": "measured"}
    claim.update(changes)
    return {k: v for k, v in claim.items() if v is not None}


def json_draft(*claims: dict[str, object]) -> str:
    return json.dumps({"status": "answered", "claims": list(claims), "missing_fields": []},
                      ensure_ascii=False, indent=1).replace("\n", "\r\n")


def test_a_json_image_claim_has_exactly_nine_keys() -> None:
    draft = parse_draft(json_draft(image_claim()), "json")
    assert draft.findings == []
    (claim,) = draft.claims
    assert claim.region == RegionRef("shapes", 1, 1)
    assert (claim.json_text, claim.json_field, claim.json_sha256) == ("颜色：红色", "颜色", FULL)
    assert claim.quote == "颜色：红色"
    assert tuple(k for k, _ in claim.value_spans) == IMAGE_CLAIM_KEYS


@pytest.mark.parametrize(("changes", "pointer_key", "words"), [
    ({"line": 3}, "line", "unknown image claim key 'line'"),
    ({"support_type": "verbatim"}, "support_type", 'support_type of an image claim is "measured"'),
    ({"support_type": None}, None, "has no 'support_type'"),
    ({"region": "2"}, "region", 'like "r1"'),
    ({"region": 2}, "region", 'like "r1"'),
    ({"version": True}, "version", "positive integer"),
    ({"sha256": HEX}, "sha256", "64 lowercase hex"),
    ({"id": "shapes@1#r2"}, "id", "disagrees with doc_id/version/region"),
    ({"id": "shapes@1:1"}, "id", "#r and its number"),
    ({"field": ""}, "field", "non-empty text"),
])
def test_bad_json_image_claims_are_malformed(changes: dict[str, object], pointer_key: str | None,
                                             words: str) -> None:
    draft = parse_draft(json_draft(image_claim(**changes)), "json")
    messages = [f.message for f in draft.findings if f.name == "malformed-citation"]
    assert any(words in m for m in messages), messages
    assert draft.claims[0].region is None  # fail closed: nothing is checked as supported


def test_a_text_claim_with_support_type_is_malformed_and_says_why() -> None:
    text_claim = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@2:6",
                  "doc_id": "schedule", "version": 2, "line": 6, "sha256": FULL, "field": "活动时间",
                  "support_type": "verbatim"}
    draft = parse_draft(json_draft(text_claim), "json")
    (finding,) = draft.findings
    assert finding.name == "malformed-citation" and "support_type" in finding.message
    assert "text claim carries no support_type" in finding.hint


def test_the_answer_wire_writes_image_claims_with_their_nine_keys_in_order() -> None:
    wire = json.loads(render_answer_wire("answered", [{**image_claim(), "extra": 1}], []))
    assert tuple(wire["claims"][0]) == IMAGE_CLAIM_KEYS
    with pytest.raises(ValueError, match="support_type"):
        render_answer_wire("answered", [image_claim(support_type=None)], [])


def test_the_cursor_on_a_region_reference_definition_or_json_claim_is_a_region_target() -> None:
    from grounding_core.navigate import RegionTarget, target_at

    text = markdown(f'[^1]: shapes@1#r2 sha256:{HEX} "颜色：红色"', sentence="🎉警示灯是红色的[^1]。", crlf=True)
    draft = parse_draft(text)
    line = draft.lines.index("🎉警示灯是红色的[^1]。")
    on_reference = target_at(draft, line, len("🎉警示灯是红色的[^"))
    assert isinstance(on_reference, RegionTarget)
    assert on_reference.region == RegionRef("shapes", 1, 2) and on_reference.quote == "颜色：红色"
    definition_line = len(draft.lines) - 1
    on_definition = target_at(draft, definition_line, 0)
    assert isinstance(on_definition, RegionTarget) and on_definition.used
    assert (on_definition.span.start_col, on_definition.span.end_col) == (6, 6 + len("shapes@1#r2"))
    unused = parse_draft(markdown(f'[^9]: shapes@1#r2 sha256:{HEX} "颜色：红色"'))
    target = target_at(unused, len(unused.lines) - 1, 3)
    assert isinstance(target, RegionTarget) and not target.used
    json_text = json_draft(image_claim())
    parsed = parse_draft(json_text, "json")
    inside = target_at(parsed, parsed.claims[0].citation_span.start_line + 1, 4)
    assert isinstance(inside, RegionTarget) and inside.region == RegionRef("shapes", 1, 1)


@pytest.mark.parametrize("changes", [
    {}, {"line": 3}, {"support_type": "verbatim"}, {"region": "r0"}, {"id": "shapes@1#r2"},
    {"version": True}, {"sha256": HEX}, {"field": ""}, {"support_type": None},
])
def test_the_answer_model_and_the_parser_agree_on_image_claims(changes: dict[str, object]) -> None:
    from grounding.models import Answer, ImageClaim

    wire = {"status": "answered", "claims": [image_claim(**changes)], "missing_fields": []}
    try:
        model = Answer.model_validate(wire)
        model_ok = isinstance(model.claims[0], ImageClaim)
    except ValueError:
        model_ok = False
    parsed = parse_draft(json.dumps(wire, ensure_ascii=False), "json")
    parser_ok = not any(f.name == "malformed-citation" for f in parsed.findings)
    assert model_ok == parser_ok, changes
    assert model_ok == (changes == {})
