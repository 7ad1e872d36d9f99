"""The Python API (SPEC §14): ``grounding.verify`` and ``grounding.Verifier`` over the real core.

Answers are given as dicts, JSON text and pydantic models; ``context`` is the list of §6 units
the model was shown. Reports are the §9 draft object, compared with ``grounding check
--format json`` for the same answer file.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import grounding
from grounding import Answer, Report, Verifier, cli
from grounding.models import Claim

from .conftest import SCHEDULE, TODAY, answer, claim, dumps, sha, write

TIME = claim("schedule", 2, 7)
PLACE = claim("schedule", 2, 8)
SHOWN = [{"doc_id": "schedule", "version": 2, "lines": [7, 8]}]


def names(report: Report) -> list[str]:
    return [d.name for d in report.diagnostics]


def test_verify_accepts_a_dict_answer_citing_cjk_and_emoji_lines_of_a_crlf_file(pipeline_root: Path) -> None:
    report = grounding.verify(answer(TIME, PLACE, fields=["活动时间", "地点"]), root=pipeline_root, context=SHOWN)
    assert isinstance(report, Report)
    assert (report.status, report.ok, report.coverage) == ("answered", True, 1.0)
    assert report.covered_fields == ["活动时间", "地点"]
    assert report.diagnostics == []


def test_json_text_and_pydantic_model_give_the_same_verdict_as_a_dict(verifier: Verifier) -> None:
    wire = answer(TIME, fields=["活动时间"])
    as_dict = verifier.verify(wire, context=SHOWN)
    as_text = verifier.verify(dumps(wire), context=SHOWN)
    as_model = verifier.verify(Answer.model_validate(wire), context=SHOWN)
    assert as_dict.status == as_text.status == as_model.status == "answered"
    assert names(as_dict) == names(as_text) == names(as_model) == []


def test_a_forged_quote_is_quote_mismatch_with_a_json_pointer_and_the_differing_character(verifier: Verifier) -> None:
    forged = claim("schedule", 2, 7, "- 活动时间：周四16:00 🎉")
    report = verifier.verify(answer(forged, fields=["活动时间"]), context=SHOWN)
    assert not report.ok and report.status == "abstain"
    mismatch = [d for d in report.errors if d.pointer == "/claims/0/quote"]
    assert [d.name for d in mismatch] == ["quote-mismatch"]
    assert "U+0030 DIGIT ZERO" in mismatch[0].message and "U+0033 DIGIT THREE" in mismatch[0].message


def test_a_stale_version_is_stale_citation(verifier: Verifier) -> None:
    report = verifier.verify(answer(claim("schedule", 1, 5)), context=[{"doc_id": "schedule", "version": 1,
                                                                         "lines": [5, 5]}])
    assert "stale-citation" in [d.name for d in report.errors]
    assert report.status == "abstain"


def test_a_line_that_was_not_in_the_hits_is_invisible_source(verifier: Verifier) -> None:
    only_time = [{"doc_id": "schedule", "version": 2, "lines": [7, 7]}]
    report = verifier.verify(answer(TIME, PLACE), context=only_time)
    assert [(d.pointer, d.name) for d in report.errors] == [("/claims/1", "invisible-source")]
    assert report.status == "answered"  # the visible claim still answers; the invisible one is not counted


def test_a_text_hit_makes_only_whole_lines_visible(verifier: Verifier) -> None:
    cut = {"doc_id": "schedule", "version": 2, "text": "- 活动时间：周四16:30 🎉\n- 地点：三楼"}
    report = verifier.verify(answer(TIME, PLACE), context=[cut])
    assert [(d.pointer, d.name) for d in report.errors] == [("/claims/1", "invisible-source")]


def test_the_hits_replace_the_context_the_answer_declares(verifier: Verifier) -> None:
    wire = {**answer(PLACE), "context": {"units": ["schedule@2"]}}
    assert verifier.verify(wire).ok  # the answer's own context: everything of schedule@2
    narrowed = verifier.verify(wire, context=[{"doc_id": "schedule", "version": 2, "lines": [7, 7]}])
    assert [d.name for d in narrowed.errors] == ["invisible-source"]


def test_without_hits_or_a_declared_context_visibility_is_not_checked(verifier: Verifier) -> None:
    report = verifier.verify(answer(PLACE))
    assert report.ok and names(report) == ["context-undeclared"]


def test_a_bad_hit_is_invalid_context_and_nothing_is_visible(verifier: Verifier) -> None:
    report = verifier.verify(answer(TIME), context=[{"doc_id": "schedule", "version": "2", "lines": [7, 7]}])
    assert {"invalid-context", "invisible-source"} <= {d.name for d in report.errors}


def test_a_same_field_conflict_is_field_conflict_and_status_conflict(verifier: Verifier) -> None:
    gym = claim("gym", 1, 4)
    report = verifier.verify(answer(gym, fields=["开放时间"]), context=[{"doc_id": "gym", "version": 1,
                                                                         "lines": [4, 4]}])
    assert report.status == "conflict"
    assert "field-conflict" in [d.name for d in report.errors]
    conflict = next(d for d in report.errors if d.name == "field-conflict")
    assert {r.path for r in conflict.related or []} == {"evidence/gym.md", "evidence/gym-notice.md"}


def test_a_revoked_source_is_inactive_source(verifier: Verifier) -> None:
    report = verifier.verify(answer(claim("old", 1, 5)))
    assert "inactive-source" in [d.name for d in report.errors]


@pytest.mark.parametrize("bad", [
    "not json at all",
    '{"status": "answered", "claims": [], "missing_fields": [], "status": "partial"}',
    dumps(answer({**TIME, "version": True})),
    dumps(answer({**TIME, "line": "7"})),
    dumps(answer({**TIME, "sha256": sha("schedule", 2).upper()})),
    dumps(answer({**TIME, "extra": 1})),
    dumps({"status": "finished", "claims": [], "missing_fields": []}),
])
def test_malformed_answers_are_findings_never_exceptions(verifier: Verifier, bad: str) -> None:
    report = verifier.verify(bad)
    assert "malformed-citation" in [d.name for d in report.errors]


def test_the_report_is_the_cli_json_draft_object(pipeline_root: Path, verifier: Verifier,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    wire = {**answer(TIME, claim("schedule", 2, 8, "- 地点：三楼报告厅"), fields=["活动时间", "地点", "票价"]),
            "context": {"units": ["schedule@2:7-8"]}}
    text = dumps(wire)
    write(pipeline_root, {"answers/a.answer.json": text})
    code = cli.main(["check", "--root", str(pipeline_root), "--format", "json", "answers/a.answer.json"])
    printed = json.loads(capsys.readouterr().out)["drafts"][0]
    assert code == 1
    ours = verifier.check(text, path="answers/a.answer.json").as_json()
    for d in ours["diagnostics"]:
        d.pop("pointer", None)
    assert ours == printed


def test_a_verifier_checks_many_answers_and_sees_evidence_changes_after_refresh(pipeline_root: Path) -> None:
    with Verifier(pipeline_root) as v:
        first = v.state
        for _ in range(3):
            assert v.verify(answer(TIME), context=SHOWN).ok
        assert v.state is first  # checks read one frozen state: nothing rescanned
        write(pipeline_root, {"evidence/schedule.md": SCHEDULE.replace("version: 2", "version: 3")})
        assert v.verify(answer(TIME), context=SHOWN).ok  # not rescanned yet
        v.refresh()
        stale = v.verify(answer(TIME), context=SHOWN)
        assert "stale-citation" in [d.name for d in stale.errors]


def test_today_pins_activity(pipeline_root: Path) -> None:
    write(pipeline_root, {"evidence/later.md": "---\ndoc_id: later\neffective_from: 2026-06-01\n---\n- 票价：免费\n"})
    wire = answer(claim_for(pipeline_root, "later", 5))
    with Verifier(pipeline_root) as v:
        assert "inactive-source" in [d.name for d in v.verify(wire).errors]
        assert v.verify(wire, today=dt.date(2026, 6, 2)).ok
        assert v.verify(wire, today="2026-06-02").ok
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            v.verify(wire, today="next week")


def claim_for(root: Path, doc_id: str, line: int) -> dict[str, Any]:
    import hashlib

    data = (root / "evidence" / f"{doc_id}.md").read_bytes()
    quote = data.decode("utf-8").split("\n")[line - 1]
    text = quote[2:]
    return {"text": text, "quote": quote, "id": f"{doc_id}@1:{line}", "doc_id": doc_id, "version": 1,
            "line": line, "sha256": hashlib.sha256(data).hexdigest(), "field": text.split("：")[0]}


def test_verify_runs_without_a_subprocess_or_language_server(pipeline_root: Path) -> None:
    script = ("import sys, json, grounding\n"
              f"r = grounding.verify(json.loads(sys.argv[1]), root=sys.argv[2], context={SHOWN!r})\n"
              "print(r.status)\n"
              "assert 'pygls' not in sys.modules and 'server' not in sys.modules, sorted(sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script, json.dumps(answer(TIME)), str(pipeline_root)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "answered"


# -- schemas ---------------------------------------------------------------------------------------


def schema_of(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["schema", name]) == 0
    return json.loads(capsys.readouterr().out)


def test_grounding_schema_answer_accepts_valid_answers_and_rejects_what_the_checker_calls_malformed(
        capsys: pytest.CaptureFixture[str], verifier: Verifier) -> None:
    schema = schema_of("answer", capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = answer(TIME, fields=["活动时间"])
    assert not list(validator.iter_errors(good))
    for bad in ({**TIME, "version": "2"}, {**TIME, "sha256": "abc"}, {**TIME, "text": ""}, {**TIME, "x": 1},
                {k: v for k, v in TIME.items() if k != "field"}):
        wire = answer(bad)
        assert list(validator.iter_errors(wire)), bad
        assert "malformed-citation" in [d.name for d in verifier.verify(wire).errors], bad


def test_the_answer_model_and_the_checker_agree_on_malformed_claims(verifier: Verifier) -> None:
    cases = [TIME, {**TIME, "version": True}, {**TIME, "line": 0}, {**TIME, "id": "schedule@2:8"},
             {**TIME, "doc_id": ""}, {**TIME, "sha256": sha("schedule", 2)[:12]}, {**TIME, "line": 10**19}]
    for case in cases:
        wire = answer(case)
        try:
            Answer.model_validate(wire)
            model_ok = True
        except ValueError:
            model_ok = False
        core_ok = "malformed-citation" not in [d.name for d in verifier.verify(wire).diagnostics]
        assert model_ok == core_ok, case


def test_grounding_schema_report_validates_a_real_report(capsys: pytest.CaptureFixture[str],
                                                         verifier: Verifier) -> None:
    schema = schema_of("report", capsys)
    report = verifier.verify(answer(claim("schedule", 2, 7, "- 活动时间：周四"))).as_json()
    jsonschema.Draft202012Validator(schema).validate(report)
    context = schema_of("context", capsys)
    jsonschema.Draft202012Validator(context).validate({"units": SHOWN})
    assert list(jsonschema.Draft202012Validator(context).iter_errors({"units": [{"doc_id": "x", "version": 1}]}))


def test_the_claim_model_has_the_eight_keys_in_spec_order() -> None:
    assert list(Claim.model_fields) == ["text", "quote", "id", "doc_id", "version", "line", "sha256", "field"]
    assert TODAY == "2026-05-01"
