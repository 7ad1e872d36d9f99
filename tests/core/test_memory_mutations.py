"""Single-field mutations of one valid memory claim (SPEC §11, §15): each part is checked alone.

The memory holds ``memory:客户-李华🎉/语言`` version 1 (``中文``, forgotten, then remembered
again as) version 2 (``中文``, active), and version 3 (``日文``, a proposal nobody approved).
A valid JSON claim (exactly the seven keys of §11) and a valid Markdown citation (§5.1 shape,
CRLF draft) of version 2 answer with no finding; then exactly one field is changed per test
and the claim must be rejected with the evidence finding's name, at the right place (§7.7: a
Markdown citation finding covers its definition from the ID to the line's end, a JSON
finding covers the offending value).
"""

from __future__ import annotations

from typing import Any

import pytest
from support import MakeWorkspace, check, errors, json_answer, names, only, pos, sha256

from grounding_core.model import DraftReport, Status
from grounding_core.workspace import Workspace

SCOPE = "客户-李华🎉"
QUOTE = "语言：中文"
SHA = sha256(QUOTE)
ID = f"memory:{SCOPE}/语言@2"

VALID_CLAIM: dict[str, Any] = {
    "text": QUOTE, "quote": QUOTE, "id": ID, "scope": SCOPE, "key": "语言", "version": 2, "sha256": SHA,
}


@pytest.fixture
def ws(make_workspace: MakeWorkspace) -> Workspace:
    ws = make_workspace({"evidence/notice.md": "- 地点：三楼报告厅\n"})
    ws.store.remember(SCOPE, "语言", "中文", approved_by="王芳")
    ws.store.forget(SCOPE, "语言", "重新确认")
    ws.store.remember(SCOPE, "语言", "中文", approved_by="王芳")
    ws.store.remember(SCOPE, "语言", "日文")
    ws.store.remember(SCOPE, "称呼", "李先生", approved_by="王芳")
    return ws


# -- JSON memory claims ----------------------------------------------------------------------


def check_json(ws: Workspace, claim: dict[str, Any]) -> tuple[DraftReport, str]:
    text = json_answer(status="answered", claims=[claim], missing_fields=[], fields=["语言"],
                       context={"units": [f"memory:{SCOPE}"]})
    return check(ws, "answers/a.answer.json", text), text


def mutated(**changes: Any) -> dict[str, Any]:
    return {**VALID_CLAIM, **changes}


def value_pos(text: str, key: str) -> tuple[int, int, int, int]:
    for number, line in enumerate(text.splitlines(), 1):
        head = f'"{key}": '
        if line.lstrip().startswith(head) and line.startswith("      "):
            start = line.index(head) + len(head)
            return (number, start + 1, number, len(line.rstrip(",")) + 1)
    raise AssertionError(f"{key} not in {text}")


def assert_rejected(report: DraftReport, name: str) -> None:
    assert set(errors(report)) == {name}, names(report)
    assert report.status is Status.ABSTAIN
    assert report.valid_claims == []
    assert report.missing_fields == ["语言"]


def test_valid_json_memory_claim_answers_with_no_findings(ws: Workspace) -> None:
    report, _ = check_json(ws, VALID_CLAIM)
    assert report.status is Status.ANSWERED and report.findings == []


@pytest.mark.parametrize("key, value", [("scope", "客户-王五"), ("key", "称呼"), ("version", 1)])
def test_json_part_disagreeing_with_the_id_is_malformed_citation(ws: Workspace, key: str, value: object) -> None:
    report, text = check_json(ws, mutated(**{key: value}))
    assert_rejected(report, "malformed-citation")
    finding = only(report, "malformed-citation")
    assert "disagrees with scope/key/version" in finding.message
    assert pos(finding) == value_pos(text, "id")


@pytest.mark.parametrize("changes, name, at", [
    ({"scope": "客户-王五", "id": "memory:客户-王五/语言@2"}, "unknown-source", "scope"),
    ({"key": "语气", "id": f"memory:{SCOPE}/语气@2"}, "unknown-source", "key"),
    ({"version": 4, "id": f"memory:{SCOPE}/语言@4"}, "unknown-source", "version"),
    ({"version": 1, "id": f"memory:{SCOPE}/语言@1"}, "stale-citation", None),
    ({"sha256": sha256("语言：英文")}, "hash-mismatch", "sha256"),
    ({"quote": "语言：中文 ", "text": "语言：中文 "}, "quote-mismatch", "quote"),
    ({"quote": "语言:中文", "text": "语言:中文"}, "quote-mismatch", "quote"),
    ({"text": "中文"}, "quote-mismatch", "text"),
], ids=["scope", "key", "future-version", "old-version", "hash", "quote-space",
        "quote-ascii-colon", "text"])
def test_json_memory_mutation_is_rejected_with_the_evidence_name(
        ws: Workspace, changes: dict[str, Any], name: str, at: str | None) -> None:
    report, text = check_json(ws, mutated(**changes))
    assert_rejected(report, name)
    finding = only(report, name)
    if at is not None:
        assert pos(finding) == value_pos(text, at)


@pytest.mark.parametrize("key, value", [("version", "2"), ("version", True), ("version", 0),
                                        ("sha256", SHA[:12]), ("sha256", SHA.upper()), ("quote", ""),
                                        ("scope", None), ("text", 5)])
def test_json_memory_value_of_the_wrong_type_is_malformed_citation(ws: Workspace, key: str, value: object) -> None:
    report, text = check_json(ws, mutated(**{key: value}))
    assert_rejected(report, "malformed-citation")
    assert pos(only(report, "malformed-citation")) == value_pos(text, key)


@pytest.mark.parametrize("change", ["extra", "missing", "evidence-keys", "bad-id"])
def test_json_memory_claim_shape_is_strict(ws: Workspace, change: str) -> None:
    claim = dict(VALID_CLAIM)
    if change == "extra":
        claim["field"] = "语言"
    elif change == "missing":
        del claim["scope"]
    elif change == "evidence-keys":
        claim.update(doc_id="memory", line=1)
    else:
        claim["id"] = f"{SCOPE}/语言@2"  # the memory: prefix dropped
    report, _ = check_json(ws, claim)
    assert_rejected(report, "malformed-citation")


# -- Markdown memory citations ----------------------------------------------------------------

DRAFT = (
    "---\r\n"
    "question: 回复李华时用什么语言？\r\n"
    "fields: [语言]\r\n"
    f'context: {{units: ["memory:{SCOPE}"]}}\r\n'
    "---\r\n"
    "回复李华时使用中文[^1]。🎉\r\n"
    "\r\n"
    f'[^1]: {ID} sha256:{SHA[:12]} "{QUOTE}"\r\n'
)
DEF_LINE = 8


def check_md(ws: Workspace, old: str = "", new: str = "") -> tuple[DraftReport, str]:
    head, definition = DRAFT.rsplit("[^1]:", 1)
    text = head + "[^1]:" + definition.replace(old, new, 1)
    return check(ws, "answers/a.md", text), text


def definition_pos(text: str) -> tuple[int, int, int, int]:
    line = text.split("\r\n")[DEF_LINE - 1]
    assert line.startswith("[^1]: ")
    return (DEF_LINE, 7, DEF_LINE, len(line) + 1)


def test_valid_markdown_memory_citation_answers_with_no_findings(ws: Workspace) -> None:
    report, _ = check_md(ws)
    assert report.status is Status.ANSWERED and report.findings == []


@pytest.mark.parametrize("old, new, name", [
    (f":{SCOPE}/", ":客户-王五/", "unknown-source"),
    ("/语言@", "/语气@", "unknown-source"),
    ("@2 ", "@9 ", "unknown-source"),
    ("@2 ", "@1 ", "stale-citation"),
    (SHA[:12], sha256("语言：英文")[:12], "hash-mismatch"),
    ('"语言：中文"', '"语言：英文"', "quote-mismatch"),
    ('"语言：中文"', '"中文"', "quote-mismatch"),
    ('"语言：中文"', '"语言:中文"', "quote-mismatch"),
    ('"语言：中文"', "\u201c语言：中文\u201d", "malformed-citation"),
    (f"sha256:{SHA[:12]}", f"sha256:{SHA[:12].upper()}", "malformed-citation"),
    (f"sha256:{SHA[:12]}", f"sha256:{SHA[:7]}", "malformed-citation"),
    (f" sha256:{SHA[:12]}", "", "malformed-citation"),
    ("@2 ", "@02 ", "malformed-citation"),
    ("@2 ", " ", "malformed-citation"),
    ("memory:", "", "malformed-citation"),
    ("/语言@2", "@2", "malformed-citation"),
    ("@2 ", "@2:1 ", "malformed-citation"),
], ids=["scope", "key", "future-version", "old-version", "hash", "quote-value",
        "quote-without-key", "quote-ascii-colon", "curly-quotes", "uppercase-hex", "short-hex",
        "no-hash", "leading-zero-version", "no-version", "no-prefix", "no-key", "line-number"])
def test_markdown_memory_definition_mutation_is_rejected(ws: Workspace, old: str, new: str, name: str) -> None:
    report, text = check_md(ws, old, new)
    assert set(errors(report)) == {name}, names(report)
    assert report.status is Status.ABSTAIN
    assert report.missing_fields == ["语言"]
    assert pos(only(report, name)) == definition_pos(text)


def test_citing_the_proposal_is_inactive_source_whatever_else_differs(ws: Workspace) -> None:
    # version 3 holds another value, so its hash and quote differ too: every part fails on its own
    proposal = f'memory:{SCOPE}/语言@3 sha256:{sha256("语言：日文")[:12]} "语言：日文"'
    report, _ = check_md(ws, f'{ID} sha256:{SHA[:12]} "{QUOTE}"', proposal)
    assert errors(report) == ["inactive-source"]
    assert "proposal" in only(report, "inactive-source").message
    report, _ = check_md(ws, "@2 ", "@3 ")
    assert {"inactive-source", "hash-mismatch", "quote-mismatch"} == set(errors(report))


def test_markdown_memory_citation_outside_the_context_is_invisible(ws: Workspace) -> None:
    text = DRAFT.replace(f'["memory:{SCOPE}"]', '["memory:客户-王五"]')
    report = check(ws, "answers/a.md", text)
    assert errors(report) == ["invisible-source"]
    assert "invalid-context" not in names(report)
