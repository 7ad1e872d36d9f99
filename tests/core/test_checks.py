"""Every draft check of SPEC §7 (GR101–GR112, GR114–GR116), with its exact range (§7.7).

Ranges are compared as SPEC §9 prints them: 1-based line and column, end column exclusive,
columns in code points (so CJK and emoji count one each). A citation finding covers its
definition from the ID to the line's end; an undefined label covers ``[^label]``; sentence
findings cover the sentence; GR108/GR109 cover the item in ``fields``; draft-level findings
sit on line 1.

``today`` is pinned to 2026-05-01 (``support.TODAY``) for every check.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from support import (
    TODAY,
    MakeWorkspace,
    check,
    errors,
    json_answer,
    names,
    only,
    pos,
    sha256,
    write_files,
)

from grounding_core.model import Finding, Severity, Status
from grounding_core.workspace import Workspace

SCHEDULE = (
    "---\r\n"                           # 1
    "doc_id: schedule\r\n"              # 2
    "version: 2\r\n"                    # 3
    "title: 秋季开放日通知\r\n"           # 4
    "subject: 开放日\r\n"                # 5
    "---\r\n"                           # 6
    "- 活动时间：周四16:30\r\n"           # 7
    "- 地点：三楼报告厅 🎉\r\n"           # 8
    "- 版本说明：更正了活动时间\r\n"       # 9
    "- 报名截止时间：5月1日。\r\n"         # 10
)
POSTER = "主题：开放日\n* 活动时间：周四 16:30\n"  # agrees with schedule after NFKC + no spaces
HOURS = (
    "---\n"                             # 1
    "doc_id: hours\n"                   # 2
    "version: 1\n"                      # 3
    "---\n"                             # 4
    "主题：图书馆\n"                      # 5
    "- 开放时间：8:00-22:00\n"            # 6
    "- 来源：校园网\n"                    # 7
)
GYM = "---\ndoc_id: gym\neffective_until: 2026-01-31\n---\n主题：体育馆\n- 开放时间：9:00-21:00\n"
POOL = "---\ndoc_id: pool\neffective_from: 2027-01-01\n---\n主题：游泳馆\n- 开放时间：10:00-20:00\n"
CANTEEN = "---\ndoc_id: canteen\nstatus: revoked\n---\n主题：食堂\n- 开放时间：6:30-21:00\n"

FILES: dict[str, str | bytes] = {
    "evidence/schedule.md": SCHEDULE,
    "evidence/poster.md": POSTER,
    "evidence/hours.md": HOURS,
    "evidence/gym.md": GYM,
    "evidence/pool.md": POOL,
    "evidence/canteen.md": CANTEEN,
}
SHA = {name.split("/")[1][:-3]: sha256(content) for name, content in FILES.items()}


@pytest.fixture
def ws(make_workspace: MakeWorkspace) -> Workspace:
    return make_workspace(FILES)


def cite(label: str, doc: str, version: int, line: int, quote: str) -> str:
    return f'[^{label}]: {doc}@{version}:{line} sha256:{SHA[doc][:12]} "{quote}"'


def md(*body: str, fields: str = "[活动时间]", context: str | None = '{units: ["schedule@2"]}',
       extra: str = "") -> str:
    """A CRLF Markdown draft: front matter (4 or 3 lines), then ``body`` lines."""
    front = ["---", "question: 开放日什么时候？", f"fields: {fields}"]
    if context is not None:
        front.append(f"context: {context}")
    if extra:
        front.append(extra)
    return "\r\n".join([*front, "---", *body]) + "\r\n"


def at(text: str, needle: str, nth: int = 0) -> tuple[int, int, int, int]:
    """The 1-based range of the ``nth`` occurrence of ``needle`` (on one line) in ``text``."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return (line, col, line, col + len(needle))


def definition(text: str, label: str) -> tuple[int, int, int, int]:
    """§7.7: a definition line from its ID to the line's end."""
    head = f"[^{label}]: "
    line_no, col, _, _ = at(text, "\n" + head)
    line = text.split("\n")[line_no].rstrip("\r")
    return (line_no + 1, len(head) + 1, line_no + 1, len(line) + 1)


FIRST_LINE = (1, 1, 1, 1)
VALID = cite("1", "schedule", 2, 7, "- 活动时间：周四16:30")


def findings_named(findings: list[Finding], name: str) -> list[Finding]:
    return [f for f in findings if f.name == name]


def test_the_baseline_draft_is_answered_with_no_findings(ws: Workspace) -> None:
    report = check(ws, "answers/a.md", md("活动时间是周四16:30[^1]。", "", VALID))
    assert report.findings == []
    assert report.status is Status.ANSWERED


# -- GR101 malformed-citation --------------------------------------------------------------------


def test_undefined_label_is_malformed_citation_covering_the_reference(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^9]。🎉", "", VALID)
    report = check(ws, "answers/a.md", text)
    finding = only(report, "malformed-citation")
    assert pos(finding) == at(text, "[^9]") == (6, 13, 6, 17)
    assert report.status is Status.ABSTAIN


def test_bad_id_grammar_is_malformed_citation_covering_the_definition(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID.replace("schedule@2:7", "schedule@2"))
    report = check(ws, "answers/a.md", text)
    assert pos(only(report, "malformed-citation")) == definition(text, "1")


def test_second_definition_of_a_label_is_malformed_citation(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID, cite("1", "hours", 1, 6, "- 开放时间：8:00-22:00"))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "malformed-citation")
    assert "defined twice" in finding.message
    assert finding.span.start_line + 1 == 9
    assert report.status is Status.ANSWERED  # the first definition wins


def test_bad_draft_front_matter_is_malformed_citation_on_line_one(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID, fields="{a: 1}")
    report = check(ws, "answers/a.md", text)
    finding = only(report, "malformed-citation")
    assert finding.span.start_line == 0
    # checked as if it had none: no fields, no context
    assert report.required_fields == []
    assert "context-undeclared" in names(report)


def test_escaped_reference_is_text_and_does_not_swallow_the_next_one(ws: Workspace) -> None:
    text = md("活动\\[^9]时间是周四16:30[^1]。", "", VALID)
    report = check(ws, "answers/a.md", text)
    assert report.findings == []
    assert report.status is Status.ANSWERED
    assert [c.label for c in report.claims] == ["1"]


def test_reference_inside_a_code_span_is_code_not_a_citation(ws: Workspace) -> None:
    text = md("用`[^1]`表示脚注。活动时间是周四16:30[^1]。", "", VALID)
    report = check(ws, "answers/a.md", text)
    assert report.findings == []
    assert [c.sentence for c in report.claims] == ["活动时间是周四16:30[^1]。"]
    assert report.claims[0].sentence_span.start_col == len("用`[^1]`表示脚注。")


# -- GR102 unknown-source ------------------------------------------------------------------------


@pytest.mark.parametrize("ident, message", [
    ("schedul@2:7", "no evidence document has doc_id 'schedul'"),
    ("schedule@5:7", "'schedule' has no version 5; the newest is 2"),
    ("schedule@2:11", "schedule@2 has 10 lines; there is no line 11"),
])
def test_unknown_doc_version_or_line_is_unknown_source(
        ws: Workspace, ident: str, message: str) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID.replace("schedule@2:7", ident))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "unknown-source")
    assert finding.message == message
    assert pos(finding) == definition(text, "1")
    assert errors(report) == ["unknown-source"]


# -- GR103 quote-mismatch, GR104 stale-citation, GR105 hash-mismatch ------------------------------


def test_quote_of_another_line_is_quote_mismatch_on_the_definition(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID.replace("周四16:30\"", "周四16:30。\""))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "quote-mismatch")
    assert pos(finding) == definition(text, "1")
    assert "U+3002 IDEOGRAPHIC FULL STOP" in finding.message
    assert finding.related[0].path == "evidence/schedule.md"
    assert finding.related[0].line == 7


def test_older_version_never_indexed_is_stale_without_hash_or_quote_checks(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "",
              '[^1]: schedule@1:7 sha256:00000000 "anything at all"')
    report = check(ws, "answers/a.md", text)
    assert errors(report) == ["stale-citation"]
    assert pos(only(report, "stale-citation")) == definition(text, "1")


def test_hash_that_is_not_a_prefix_is_hash_mismatch(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID.replace(SHA["schedule"][:12], SHA["hours"][:12]))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "hash-mismatch")
    assert pos(finding) == definition(text, "1")
    assert SHA["schedule"][:12] in finding.message


def test_longer_hash_prefix_up_to_the_full_hash_verifies(ws: Workspace) -> None:
    for n in (8, 40, 64):
        text = md("活动时间是周四16:30[^1]。", "", VALID.replace(SHA["schedule"][:12], SHA["schedule"][:n]))
        assert check(ws, "answers/a.md", text).error_count == 0


# -- GR106 inactive-source -----------------------------------------------------------------------


@pytest.mark.parametrize("doc, message", [
    ("gym", "gym@1 is not active: it expired on 2026-01-31"),
    ("pool", "pool@1 is not active: it is not effective until 2027-01-01"),
    ("canteen", "canteen@1 is not active: it is revoked (status: revoked)"),
])
def test_expired_future_or_revoked_source_is_inactive(ws: Workspace, doc: str, message: str) -> None:
    line = {"gym": "- 开放时间：9:00-21:00", "pool": "- 开放时间：10:00-20:00",
            "canteen": "- 开放时间：6:30-21:00"}[doc]
    text = md(f"开放时间是{line[7:]}[^1]。", "", cite("1", doc, 1, 6, line), fields="[开放时间]",
              context=f'{{units: ["{doc}@1"]}}')
    report = check(ws, "answers/a.md", text)
    finding = only(report, "inactive-source")
    assert finding.message == message
    assert pos(finding) == definition(text, "1")
    assert errors(report) == ["inactive-source"]
    assert report.status is Status.ABSTAIN


def test_expiry_follows_the_pinned_day(ws: Workspace) -> None:
    line = "- 开放时间：9:00-21:00"
    text = md(f"开放时间是{line[7:]}[^1]。", "", cite("1", "gym", 1, 6, line), fields="[开放时间]",
              context=None)
    assert "inactive-source" not in names(ws.check_text("answers/a.md", text, today=dt.date(2026, 1, 31)))
    assert "inactive-source" in names(ws.check_text("answers/a.md", text, today=dt.date(2026, 2, 1)))
    pinned = Workspace(ws.config.with_overrides(today="2026-01-15"), ws.store)
    assert "inactive-source" not in names(pinned.check_text("answers/a.md", text))


def test_deleted_source_is_inactive(ws: Workspace) -> None:
    (ws.config.evidence_root / "hours.md").unlink()
    scan = ws.scan()
    assert [(e.kind, e.doc_id, e.reason) for e in scan.events] == [("revoke", "hours", "deleted")]
    text = md("开放时间是8:00-22:00[^1]。", "", cite("1", "hours", 1, 6, "- 开放时间：8:00-22:00"),
              fields="[开放时间]", context=None)
    finding = only(check(ws, "answers/a.md", text), "inactive-source")
    assert finding.message == "hours@1 is not active: it was deleted"


# -- GR107 invisible-source, GR115 context-undeclared, GR116 invalid-context ----------------------

HOURS_CLAIM = ("图书馆开放时间是8:00-22:00[^1]。", "", cite("1", "hours", 1, 6, "- 开放时间：8:00-22:00"))


@pytest.mark.parametrize("context, visible", [
    ('{units: ["hours@1"]}', True),
    ('{units: ["hours@1:5-6"]}', True),
    ('{units: ["hours@1:6"]}', True),
    ('{units: ["hours@1:5-5", "hours@1:7-7"]}', False),
    ('{units: ["schedule@2"]}', False),
    ('{units: []}', False),
])
def test_units_context_decides_visibility(ws: Workspace, context: str, visible: bool) -> None:
    text = md(*HOURS_CLAIM, fields="[开放时间]", context=context)
    report = check(ws, "answers/a.md", text)
    if visible:
        assert report.findings == [] and report.status is Status.ANSWERED
    else:
        finding = only(report, "invisible-source")
        assert pos(finding) == definition(text, "1")
        assert errors(report) == ["invisible-source"]
        assert report.status is Status.ABSTAIN


def write_log(ws: Workspace, units: list[dict[str, object]], name: str = "runs/ctx.json") -> None:
    write_files(ws.config.root, {name: json.dumps({"units": units}, ensure_ascii=False)})


@pytest.mark.parametrize("unit, visible", [
    ({"lines": [6, 7]}, True),
    ({"lines": [1, 5]}, False),
    ({"text": "主题：图书馆\n- 开放时间：8:00-22:00"}, True),
    ({"text": "主题：图书馆\r\n- 开放时间：8:00-22:00\r\n- 来源：校"}, True),
    ({"text": "主题：图书馆\n- 开放时间：8:00-22"}, False),         # cut mid-line
    ({"text": "- 开放时间：8:00-22:00 以及更多"}, False),          # not between line ends
    ({"text": "放时间：8:00-22:00\n- 来源：校园网"}, False),         # starts mid-line
])
def test_log_context_lines_and_text_units(ws: Workspace, unit: dict[str, object], visible: bool) -> None:
    write_log(ws, [{"doc_id": "hours", "version": 1, **unit}])
    text = md(*HOURS_CLAIM, fields="[开放时间]", context="{log: runs/ctx.json}")
    report = check(ws, "answers/a.md", text)
    assert ("invisible-source" not in names(report)) is visible, names(report)
    assert report.status is (Status.ANSWERED if visible else Status.ABSTAIN)


def test_missing_log_file_is_invalid_context_and_nothing_is_visible(ws: Workspace) -> None:
    text = md(*HOURS_CLAIM, fields="[开放时间]", context="{log: runs/missing.json}")
    report = check(ws, "answers/a.md", text)
    finding = only(report, "invalid-context")
    assert pos(finding) == FIRST_LINE
    assert "runs/missing.json" in finding.message
    assert "invisible-source" in names(report)
    assert report.status is Status.ABSTAIN


@pytest.mark.parametrize("context, log", [
    ("{units: 5}", None),
    ('{units: ["hours"]}', None),
    ('{units: ["hours@1:7-5"]}', None),
    ("{query: 开放时间, log: runs/ctx.json}", None),
    ("[hours@1]", None),
    ("{log: runs/ctx.json}", "not json {"),
    ("{log: runs/ctx.json}", '{"units": [{"doc_id": "hours", "version": 1}]}'),
    ("{log: runs/ctx.json}", '{"units": [{"doc_id": "hours", "version": true, "lines": [6, 6]}]}'),
])
def test_unusable_context_is_invalid_context_on_line_one(
        ws: Workspace, context: str, log: str | None) -> None:
    if log is not None:
        write_files(ws.config.root, {"runs/ctx.json": log})
    text = md(*HOURS_CLAIM, fields="[开放时间]", context=context)
    report = check(ws, "answers/a.md", text)
    assert pos(only(report, "invalid-context")) == FIRST_LINE
    assert only(report, "invalid-context").effective_severity is Severity.ERROR
    assert report.status is Status.ABSTAIN


def test_no_context_is_context_undeclared_information_on_line_one(ws: Workspace) -> None:
    report = check(ws, "answers/a.md", md("活动时间是周四16:30[^1]。", "", VALID, context=None))
    finding = only(report, "context-undeclared")
    assert pos(finding) == FIRST_LINE
    assert finding.effective_severity is Severity.INFORMATION
    assert report.status is Status.ANSWERED  # visibility not checked, the claim counts


# -- GR108 field-conflict ------------------------------------------------------------------------

SPELLINGS = {"a.md": "周四16:30", "b.md": "周四 16:30", "c.md": "周四１６:３０"}


def time_doc(value: str) -> str:
    return f"主题：迎新\r\n- 集合时间：{value}\r\n"


@pytest.fixture
def times(make_workspace: MakeWorkspace) -> Workspace:
    return make_workspace({f"evidence/t/{name}": time_doc(v) for name, v in SPELLINGS.items()})


def time_draft(extra_cites: str = "") -> str:
    quote = "- 集合时间：周四16:30"
    body = ["集合时间是周四16:30[^1]。", "", f'[^1]: t/a@1:2 sha256:{sha256(time_doc("周四16:30"))[:12]} "{quote}"']
    return md(*body, fields="[集合时间]", context=None, extra=extra_cites)


def test_normalised_spellings_of_one_value_do_not_conflict(times: Workspace) -> None:
    report = check(times, "answers/t.md", time_draft())
    assert "field-conflict" not in names(report)
    assert report.status is Status.ANSWERED
    assert report.same_key_sources_checked == 3
    assert report.coverage == pytest.approx(1 / 3)  # two sources with the same value: two identities


def test_a_different_value_is_field_conflict_on_the_fields_item_and_the_citation(times: Workspace) -> None:
    write_files(times.config.root, {"evidence/t/d.md": time_doc("周三16:30")})
    times.scan()
    text = time_draft()
    report = check(times, "answers/t.md", text)
    # SPEC §15: on the fields item and on the definition citing a line of the key (both hold)
    on_item, on_definition = findings_named(report.findings, "field-conflict")
    assert pos(on_item) == at(text, "集合时间") == (3, 10, 3, 14)
    assert pos(on_definition) == definition(text, "1")
    finding = on_item
    assert "'周四16:30' (3 sources: t/a@1:2, t/b@1:2, t/c@1:2)" in finding.message
    assert "'周三16:30' (1 source: t/d@1:2)" in finding.message
    assert sorted(r.path for r in finding.related) == [f"evidence/t/{n}.md" for n in "abcd"]
    assert report.status is Status.CONFLICT
    assert report.same_key_sources_checked == 4
    assert "missing-field" not in names(report)  # the conflict is the finding for that item


def test_conflict_on_a_field_that_is_only_cited_covers_each_definition(times: Workspace) -> None:
    write_files(times.config.root, {"evidence/t/d.md": time_doc("周三16:30")})
    times.scan()
    text = time_draft().replace("fields: [集合时间]", "fields: []")
    text = text.replace("集合时间是周四16:30[^1]。", "集合时间是周四16:30[^1]，也就是周四16:30[^2]。")
    text += f'[^2]: t/b@1:2 sha256:{sha256(time_doc("周四 16:30"))[:12]} "- 集合时间：周四 16:30"\r\n'
    report = check(times, "answers/t.md", text)
    conflicts = findings_named(report.findings, "field-conflict")
    assert [pos(f) for f in conflicts] == [definition(text, "1"), definition(text, "2")]
    assert report.status is Status.CONFLICT


def test_conflict_gate_reads_the_whole_index_not_the_context(times: Workspace) -> None:
    write_files(times.config.root, {"evidence/t/d.md": time_doc("周三16:30")})
    times.scan()
    text = time_draft().replace("fields: [集合时间]", 'fields: [集合时间]\r\ncontext: {units: ["t/a@1"]}')
    report = check(times, "answers/t.md", text)
    assert report.status is Status.CONFLICT
    assert report.same_key_sources_checked == 4


def test_draft_subject_selects_the_conflict_key(ws: Workspace) -> None:
    # 开放时间 exists for 图书馆 (active) and three inactive subjects; the draft names one
    text = md("图书馆开放时间是8:00-22:00[^1]。", "", cite("1", "hours", 1, 6, "- 开放时间：8:00-22:00"),
              fields="[开放时间]", context=None, extra="subject: 图书馆")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.ANSWERED
    assert report.same_key_sources_checked == 1


# -- GR109 missing-field, coverage and status numbers (§7.5) ---------------------------------------


def test_status_numbers_for_a_partial_answer(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID, fields="[活动时间, 报名截止时间]")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.PARTIAL
    assert report.required_fields == ["活动时间", "报名截止时间"]
    assert report.covered_fields == ["活动时间"]
    assert report.missing_fields == ["报名截止时间"]
    assert report.field_completeness is False
    # D = schedule:7, poster:2 (活动时间 of 开放日) and schedule:10 (报名截止时间)
    assert report.coverage == pytest.approx(1 / 3)
    assert report.same_key_sources_checked == 3
    finding = only(report, "missing-field")
    assert pos(finding) == at(text, "报名截止时间") == (3, 16, 3, 22)
    assert finding.effective_severity is Severity.WARNING
    assert report.error_count == 0


def test_status_numbers_for_a_complete_answer(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]，报名截止时间是5月1日[^2]。", "", VALID,
              cite("2", "schedule", 2, 10, "- 报名截止时间：5月1日。"),
              cite("3", "poster", 1, 2, "* 活动时间：周四 16:30"),
              fields="[活动时间, 报名截止时间]", context=None)
    text = text.replace("5月1日[^2]。", "5月1日[^2]，海报也写周四 16:30[^3]。")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.ANSWERED
    assert report.missing_fields == [] and report.field_completeness is True
    assert report.covered_fields == ["活动时间", "报名截止时间"]
    assert report.coverage == 1.0
    assert len(report.valid_claims) == 3


def test_no_valid_claim_is_abstain_and_every_field_missing(ws: Workspace) -> None:
    text = md("我们还不知道。", fields="[活动时间, 地点]")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.ABSTAIN
    assert report.missing_fields == ["活动时间", "地点"]
    assert [pos(f) for f in findings_named(report.findings, "missing-field")] == [
        at(text, "活动时间"), at(text, "地点")]
    assert report.coverage == 0.0


def test_no_required_fields_gives_coverage_one(ws: Workspace) -> None:
    report = check(ws, "answers/a.md", md("活动时间是周四16:30[^1]。", "", VALID, fields="[]"))
    assert report.coverage == 1.0
    assert report.status is Status.ANSWERED


def test_single_string_fields_means_one_field(ws: Workspace) -> None:
    report = check(ws, "answers/a.md", md("活动时间是周四16:30[^1]。", "", VALID, fields="活动时间"))
    assert report.required_fields == ["活动时间"]
    assert report.status is Status.ANSWERED


# -- GR110 uncited-claim ---------------------------------------------------------------------------


def test_sentence_stating_a_known_value_without_citation_is_uncited_claim(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。 请在5月1日前报名！欢迎大家。", "", VALID)
    report = check(ws, "answers/a.md", text)
    finding = only(report, "uncited-claim")
    assert pos(finding) == at(text, "请在5月1日前报名！") == (6, 19, 6, 29)
    assert "5月1日" in finding.message
    assert finding.effective_severity is Severity.WARNING
    assert report.status is Status.ANSWERED


def test_sentence_stating_a_known_field_name_is_uncited_claim(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。", "", VALID, "", "地点另行通知。")
    report = check(ws, "answers/a.md", text)
    assert pos(only(report, "uncited-claim")) == at(text, "地点另行通知。")


def test_headings_and_fenced_code_are_not_claims(ws: Workspace) -> None:
    text = md("# 活动时间", "", "```", "地点：三楼报告厅 🎉", "```", "", "活动时间是周四16:30[^1]。", "", VALID)
    assert "uncited-claim" not in names(check(ws, "answers/a.md", text))


def test_strict_mode_flags_every_uncited_sentence(ws: Workspace) -> None:
    text = md("活动时间是周四16:30[^1]。欢迎大家！", "🎉🎉", "", VALID)
    assert "uncited-claim" not in names(check(ws, "answers/a.md", text))
    strict = Workspace(ws.config.with_overrides(strict=True), ws.store)
    report = check(strict, "answers/a.md", text)
    finding = only(report, "uncited-claim")
    assert pos(finding) == at(text, "欢迎大家！")
    assert "strict" in finding.message  # the emoji-only line holds no letter or digit


# -- GR111 claim-value-mismatch ------------------------------------------------------------------


def test_sentence_not_restating_the_cited_value_is_claim_value_mismatch(ws: Workspace) -> None:
    text = md("活动时间是周五下午[^1]。", "", VALID)
    report = check(ws, "answers/a.md", text)
    finding = only(report, "claim-value-mismatch")
    assert pos(finding) == at(text, "活动时间是周五下午[^1]。") == (6, 1, 6, 15)
    assert finding.effective_severity is Severity.WARNING
    assert report.status is Status.ANSWERED  # warnings never invalidate a claim


def test_claim_value_check_normalises_width_spaces_and_trailing_marks(ws: Workspace) -> None:
    text = md("活动时间是周四 １６:３０[^1]，报名截止时间是5月1日[^2]。", "", VALID,
              cite("2", "schedule", 2, 10, "- 报名截止时间：5月1日。"), context=None)
    assert "claim-value-mismatch" not in names(check(ws, "answers/a.md", text))


# -- GR112 meta-field -----------------------------------------------------------------------------


def test_citing_a_meta_field_line_is_meta_field(ws: Workspace) -> None:
    text = md("版本说明：更正了活动时间[^1]。", "", cite("1", "schedule", 2, 9, "- 版本说明：更正了活动时间"))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "meta-field")
    assert pos(finding) == definition(text, "1")
    assert "版本说明" in finding.message
    assert errors(report) == ["meta-field"]
    assert report.status is Status.ABSTAIN
    assert "claim-value-mismatch" not in names(report)


def test_citing_a_front_matter_line_is_meta_field(ws: Workspace) -> None:
    text = md("标题是秋季开放日通知[^1]。", "", cite("1", "schedule", 2, 4, "title: 秋季开放日通知"))
    report = check(ws, "answers/a.md", text)
    finding = only(report, "meta-field")
    assert "front-matter line" in finding.message
    assert pos(finding) == definition(text, "1")
    assert report.status is Status.ABSTAIN


def test_meta_fields_are_never_conflict_checked(ws: Workspace) -> None:
    write_files(ws.config.root, {"evidence/other.md": "- 来源：教务处\n"})
    ws.scan()
    text = md("来源是校园网[^1]。", "", cite("1", "hours", 1, 7, "- 来源：校园网"), fields="[来源]",
              context=None)
    report = check(ws, "answers/a.md", text)
    assert "field-conflict" not in names(report)
    assert "meta-field" in names(report)


# -- JSON answers: GR101 shapes and GR114 status-mismatch ----------------------------------------

JSON_CLAIM = {
    "text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@2:7",
    "doc_id": "schedule", "version": 2, "line": 7, "sha256": SHA["schedule"], "field": "活动时间",
}


def json_draft(**changes: object) -> str:
    top: dict[str, object] = {"status": "answered", "claims": [JSON_CLAIM], "missing_fields": [],
                              "question": "活动什么时候？", "fields": ["活动时间"],
                              "context": {"units": ["schedule@2"]}}
    top.update(changes)
    return json_answer(**{k: v for k, v in top.items() if v is not None})


def test_valid_json_answer_is_answered(ws: Workspace) -> None:
    report = check(ws, "answers/a.answer.json", json_draft())
    assert report.findings == []
    assert report.status is Status.ANSWERED


def test_unknown_json_status_is_malformed_citation_on_the_value(ws: Workspace) -> None:
    text = json_draft(status="done")
    finding = only(check(ws, "answers/a.answer.json", text), "malformed-citation")
    assert pos(finding) == at(text, '"done"')


@pytest.mark.parametrize("key, value", [
    ("claims", {"0": JSON_CLAIM}), ("missing_fields", "报名截止时间"), ("missing_fields", [1]),
    ("question", 5), ("fields", [None]), ("subject", ""),
])
def test_json_top_level_value_of_the_wrong_type_is_malformed_citation(
        ws: Workspace, key: str, value: object) -> None:
    text = json_draft(**{key: value})
    report = check(ws, "answers/a.answer.json", text)
    finding = [f for f in report.findings if f.name == "malformed-citation"][0]
    assert finding.span.start_line + 1 == at(text, f'"{key}": ')[0]


def test_json_extra_top_level_key_is_malformed_citation_on_the_key(ws: Workspace) -> None:
    text = json_draft(confidence=0.5)
    finding = only(check(ws, "answers/a.answer.json", text), "malformed-citation")
    assert pos(finding) == at(text, '"confidence"')


def test_json_missing_required_key_is_malformed_citation(ws: Workspace) -> None:
    text = json_draft(missing_fields=None)
    finding = only(check(ws, "answers/a.answer.json", text), "malformed-citation")
    assert "'missing_fields'" in finding.message


@pytest.mark.parametrize("text", ["", "[]", '{"status": "answered",}', '{"a": 1, "a": 2}'])
def test_json_that_is_not_an_answer_object_is_malformed_citation(ws: Workspace, text: str) -> None:
    report = check(ws, "answers/a.answer.json", text)
    assert "malformed-citation" in names(report)
    assert report.status is Status.ABSTAIN


def test_declared_status_differing_from_computed_is_status_mismatch(ws: Workspace) -> None:
    text = json_draft(status="partial")
    report = check(ws, "answers/a.answer.json", text)
    finding = only(report, "status-mismatch")
    assert pos(finding) == at(text, '"partial"')
    assert finding.effective_severity is Severity.WARNING
    assert report.status is Status.ANSWERED


def test_declared_missing_fields_are_compared_as_a_set(ws: Workspace) -> None:
    text = json_draft(status="partial", fields=["活动时间", "地点", "报名截止时间"],
                      missing_fields=["报名截止时间", "地点", "地点"])
    report = check(ws, "answers/a.answer.json", text)
    assert report.status is Status.PARTIAL
    assert "status-mismatch" not in names(report)
    text = json_draft(status="partial", fields=["活动时间", "地点"], missing_fields=["报名截止时间"])
    assert "status-mismatch" in names(check(ws, "answers/a.answer.json", text))


def test_json_missing_field_covers_the_fields_item(ws: Workspace) -> None:
    text = json_draft(status="partial", fields=["活动时间", "地点"], missing_fields=["地点"])
    report = check(ws, "answers/a.answer.json", text)
    assert report.status is Status.PARTIAL
    # the second "地点" is the fields item (the first is in missing_fields)
    assert pos(only(report, "missing-field")) == at(text, '"地点"', nth=1)


def test_json_claim_level_finding_covers_the_claim_object(ws: Workspace) -> None:
    text = json_draft(status="abstain", fields=None, context={"units": ["schedule@2:1-6"]})
    report = check(ws, "answers/a.answer.json", text)
    finding = only(report, "invisible-source")
    lines = text.split("\n")
    first = next(i for i, line in enumerate(lines) if line == "    {")
    last = next(i for i, line in enumerate(lines) if line == "    }")
    assert pos(finding) == (first + 1, 5, last + 1, 6)
    assert report.status is Status.ABSTAIN


def test_block_style_fields_items_are_located_on_their_own_lines(ws: Workspace) -> None:
    text = "\r\n".join(["---", "question: 问", "fields:", "  - 活动时间", '  - "地点"',
                       "  - 报名截止时间", "---", "还不知道。", ""])
    report = check(ws, "answers/a.md", text)
    assert [pos(f) for f in findings_named(report.findings, "missing-field")] == [
        (4, 5, 4, 9), (5, 5, 5, 9), (6, 5, 6, 11)]


def test_stale_citation_to_an_indexed_old_version_still_checks_hash_and_quote(
        make_workspace: MakeWorkspace) -> None:
    v2 = "---\ndoc_id: s\nversion: 2\n---\n- 活动时间：周四16:30\n"
    ws = make_workspace({"evidence/s.md": v2})
    write_files(ws.config.root, {"evidence/s.md": v2.replace("version: 2", "version: 3")})
    ws.scan()
    good = f'[^1]: s@2:5 sha256:{sha256(v2)[:12]} "- 活动时间：周四16:30"'
    base = md("活动时间是周四16:30[^1]。", "", good, context=None)
    assert errors(check(ws, "answers/a.md", base)) == ["stale-citation"]
    wrong_hash = base.replace(sha256(v2)[:12], "0" * 12)
    assert sorted(errors(check(ws, "answers/a.md", wrong_hash))) == ["hash-mismatch", "stale-citation"]
    wrong_quote = base.replace('16:30"', '16:31"')
    assert sorted(errors(check(ws, "answers/a.md", wrong_quote))) == ["quote-mismatch", "stale-citation"]


# -- every SPEC §7 draft code is produced ---------------------------------------------------------


def test_every_draft_rule_is_exercised_by_this_module() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    from grounding_core.model import RULES

    draft_rules = [r for r in RULES.values()
                   if r.code <= "GR116" and r.code not in ("GR113",)]
    assert len(draft_rules) == 15
    for rule in draft_rules:
        assert f'"{rule.name}"' in source, rule.name


def test_today_constant_is_the_pinned_check_date() -> None:
    assert TODAY == dt.date(2026, 5, 1)
