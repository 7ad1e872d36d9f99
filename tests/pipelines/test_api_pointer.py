"""tryout2 #23: ``Diagnostic.pointer`` (SPEC §14 Python API) is a JSON Pointer string for every
diagnostic of a JSON answer — ``""`` (RFC 6901: the whole document) when the finding is about
the answer as a whole, whether the text parsed or not — and None for every diagnostic of a
Markdown draft. ``Report.summary`` shows ``line:column`` where the pointer is the document.
"""

from __future__ import annotations

from grounding import Verifier

from .conftest import answer, claim, dumps


def test_a_json_answer_that_does_not_parse_points_at_the_document(verifier: Verifier) -> None:
    report = verifier.check("{\"status\": \"answered\", 🎉", kind="json")
    assert report.diagnostics and [d.pointer for d in report.diagnostics] == [""] * len(report.diagnostics)


def test_a_finding_on_the_root_object_points_at_the_document(verifier: Verifier) -> None:
    wire = answer(claim("schedule", 2, 7), fields=["活动时间"])
    del wire["missing_fields"]
    report = verifier.check(dumps(wire), kind="json")
    missing = [d for d in report.diagnostics if d.name == "malformed-citation"]
    assert missing and {d.pointer for d in missing} == {""}
    assert all(isinstance(d.pointer, str) for d in report.diagnostics)
    assert report.summary().startswith(f"{missing[0].line}:{missing[0].column} error GR101")


def test_every_diagnostic_of_a_json_answer_has_a_pointer_and_of_markdown_none(verifier: Verifier) -> None:
    forged = claim("schedule", 2, 7, quote="- 活动时间：周五16:30 🎉")
    report = verifier.check(dumps(answer(forged, fields=["活动时间"])), kind="json")
    assert "/claims/0/quote" in [d.pointer for d in report.diagnostics]
    assert all(isinstance(d.pointer, str) for d in report.diagnostics)  # context-undeclared: ""
    markdown = verifier.check("活动时间是周四16:30[^1]。\r\n\r\n[^1]: schedule@2:7 sha256:00000000 \"x\"\r\n",
                              kind="markdown")
    assert markdown.diagnostics and {d.pointer for d in markdown.diagnostics} == {None}
