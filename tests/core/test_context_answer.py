"""Compiled contexts, output budgets and the offline answer generator (SPEC §6, §8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import TODAY, MakeWorkspace, check, errors, names, sha256

from grounding_core.answer import generate_answer
from grounding_core.budget import BudgetError
from grounding_core.context import compile_context, units_of
from grounding_core.drafts import ContextSpec
from grounding_core.index import IndexSnapshot
from grounding_core.workspace import Workspace

SCHEDULE = (
    "---\ndoc_id: schedule\nversion: 2\ntitle: 秋季开放日通知\n---\n"
    "- 活动时间：周四16:30\n- 地点：三楼报告厅🎉\n\n"
    "## 报名\n- 报名截止时间：周二12:00\n- 版本说明：更正了活动时间\n"
)
NOTICE = "---\ndoc_id: notice\nversion: 1\n---\n- 报名方式：线上填写表格\n"
CONFLICT = "---\ndoc_id: schedule-conflict\nversion: 1\n---\n- 活动时间：周四17:30\n" + "".join(
    f"- 备注{i}：这是一段很长的补充说明，用来让这份文件在预算里放不下。\n" for i in range(60)
)


def indexed(ws: Workspace) -> IndexSnapshot:
    """The newest snapshot once its full-text rows are built (they are built after the scan)."""
    ws.store.build_fts()
    return ws.store.snapshot()


def cite(text: str, doc_id: str, version: int, line: int) -> str:
    quote = text.split("\n")[line - 1]
    return f'{doc_id}@{version}:{line} sha256:{sha256(text)[:12]} "{quote}"'


def draft(context: str, body: str, fields: str = "[活动时间]") -> str:
    return f"---\nquestion: 活动什么时候开始？\nfields: {fields}\ncontext: {context}\n---\n{body}"


def test_units_are_blocks_of_consecutive_body_lines(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    units = units_of(ws.store.state, "schedule", TODAY)
    assert [(u.start_line, u.end_line) for u in units] == [(6, 7), (9, 11)]
    assert units[0].text == "- 活动时间：周四16:30\n- 地点：三楼报告厅🎉"


def test_compiled_context_is_deterministic_and_lists_kept_units(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/notice.md": NOTICE})
    spec = ContextSpec("query", query="活动时间 报名截止时间", limit=1500, reserve=240)
    a = compile_context(indexed(ws), ws.config, spec, "活动什么时候开始？", TODAY)
    b = compile_context(indexed(ws), ws.config, spec, "活动什么时候开始？", TODAY)
    assert a.summary() == b.summary()
    kept = [u["unit"] for u in a.summary()["kept"]]  # type: ignore[index]
    assert "schedule@2:6-7" in kept and "schedule@2:9-11" in kept
    assert all(u.doc_id != "notice" for u in a.kept)  # no hit for the query: not a candidate


def test_unit_that_does_not_fit_is_skipped_and_a_later_one_kept(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/schedule-conflict.md": CONFLICT})
    spec = ContextSpec("query", query="活动时间", limit=400, reserve=100)
    compiled = compile_context(indexed(ws), ws.config, spec, "活动时间？", TODAY)
    skipped = [u.unit.id for u in compiled.pack.skipped]
    kept = [u.id for u in compiled.kept]
    assert any(s.startswith("schedule-conflict@1") for s in skipped)
    assert "schedule@2:6-7" in kept
    assert compiled.pack.input_tokens + 100 <= 400


def test_removing_the_key_line_from_context_abstains_while_support_holds(make_workspace: MakeWorkspace) -> None:
    body = f"活动时间是周四16:30[^1]。\n\n[^1]: {cite(SCHEDULE, 'schedule', 2, 6)}\n"
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE, "evidence/notice.md": NOTICE,
        "answers/with.md": draft('{units: ["schedule@2:6-7"]}', body),
        "answers/without.md": draft('{units: ["schedule@2:7-11", "notice@1"]}', body),
    })
    with_line = check(ws, "answers/with.md")
    without = check(ws, "answers/without.md")
    assert with_line.status.value == "answered" and errors(with_line) == []
    assert without.status.value == "abstain"
    assert errors(without) == ["invisible-source"]  # P holds: no quote/hash/stale finding
    assert "quote-mismatch" not in names(without) and "hash-mismatch" not in names(without)


def test_query_context_visibility_follows_the_budget(make_workspace: MakeWorkspace) -> None:
    body = f"活动时间是周四16:30[^1]。\n\n[^1]: {cite(SCHEDULE, 'schedule', 2, 6)}\n"
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE,
        "answers/q.md": draft("{query: 活动时间, limit: 1500, reserve: 240}", body),
        "answers/tight.md": draft("{query: 活动时间, limit: 120, reserve: 100}", body),
    })
    assert check(ws, "answers/q.md").status.value == "answered"
    tight = check(ws, "answers/tight.md")
    (invisible,) = [f for f in tight.findings if f.name == "invisible-source"]
    assert "the query ranked it, but its unit" in invisible.message  # why, not "add the unit"
    assert "limit − reserve = 20 tokens" in invisible.message and "Raise the query context's limit" in invisible.hint


def test_conflict_status_even_when_the_conflicting_source_is_outside_the_budget(
    make_workspace: MakeWorkspace,
) -> None:
    body = f"活动时间是周四16:30[^1]。\n\n[^1]: {cite(SCHEDULE, 'schedule', 2, 6)}\n"
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE, "evidence/schedule-conflict.md": CONFLICT,
        "answers/q.md": draft("{query: 活动时间, limit: 400, reserve: 100}", body),
    })
    spec = ContextSpec("query", query="活动时间", limit=400, reserve=100)
    compiled = compile_context(indexed(ws), ws.config, spec, "活动什么时候开始？", TODAY)
    assert all(u.doc_id != "schedule-conflict" for u in compiled.kept)
    report = check(ws, "answers/q.md")
    assert report.status.value == "conflict"
    assert "field-conflict" in names(report)


def test_output_over_budget_when_the_wire_exceeds_the_reserve(make_workspace: MakeWorkspace) -> None:
    body = f"活动时间是周四16:30[^1]。\n\n[^1]: {cite(SCHEDULE, 'schedule', 2, 6)}\n"
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE,
        "answers/small.md": draft('{units: ["schedule@2"], reserve: 30}', body),
        "answers/ok.md": draft('{units: ["schedule@2"], reserve: 240}', body),
    })
    small = check(ws, "answers/small.md")
    assert "output-over-budget" in errors(small)
    assert small.output_tokens is not None and small.output_tokens > 30
    ok = check(ws, "answers/ok.md")
    assert errors(ok) == [] and ok.output_reserve == 240


def test_reserve_of_one_token_raises_budget_error(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    with pytest.raises(BudgetError):
        generate_answer(indexed(ws), ws.config, TODAY, "活动什么时候开始？", ["活动时间"], reserve=1)


def test_generated_answer_cites_only_visible_lines_and_passes_check(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/notice.md": NOTICE})
    answer = generate_answer(indexed(ws), ws.config, TODAY, "活动什么时候开始，在哪里？",
                             ["活动时间", "地点"])
    assert answer.wire.status.value == "answered"
    assert [c["id"] for c in answer.wire.claims] == ["schedule@2:6", "schedule@2:7"]
    md = answer.markdown()
    (ws.config.root / "answers").mkdir(exist_ok=True)
    (ws.config.root / "answers" / "gen.md").write_text(md, encoding="utf-8")
    (ws.config.root / "answers" / "gen.answer.json").write_text(answer.json_text(), encoding="utf-8")
    for path in ("answers/gen.md", "answers/gen.answer.json"):
        report = check(ws, path)
        assert errors(report) == [], (path, report.findings)
        assert report.status.value == "answered"


def test_generated_answer_reports_missing_fields_and_conflicts(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/schedule-conflict.md": CONFLICT})
    partial = generate_answer(indexed(ws), ws.config, TODAY, "地点和联系电话？", ["地点", "联系电话"])
    assert partial.wire.status.value == "partial"
    assert partial.wire.missing_fields == ("联系电话",)
    conflict = generate_answer(indexed(ws), ws.config, TODAY, "活动时间？", ["活动时间"])
    assert conflict.wire.status.value == "conflict"
    assert conflict.conflicts and "周四17:30" in conflict.conflicts[0]
    assert conflict.wire.claims == ()  # no side is picked
    assert "no side is cited" in conflict.markdown()


def test_generated_answer_names_claims_left_out_for_the_reserve(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/schedule.md": SCHEDULE})
    answer = generate_answer(indexed(ws), ws.config, TODAY, "活动时间、地点和报名截止时间？",
                             ["活动时间", "地点", "报名截止时间"], reserve=90)
    assert answer.wire.skipped, "the reserve should force a claim out"
    assert any("left out for the output reserve" in n for n in answer.notes)
    assert "left out for the output reserve of 90 tokens" in answer.markdown()


def test_generated_answer_does_not_mix_subjects(make_workspace: MakeWorkspace) -> None:
    other = "---\ndoc_id: sports\nversion: 1\nsubject: 运动会\n---\n- 报名截止时间：周五18:00\n"
    mine = SCHEDULE.replace("title: 秋季开放日通知", "title: 秋季开放日通知\nsubject: 开放日")
    ws = make_workspace({"evidence/schedule.md": mine, "evidence/sports.md": other})
    mixed = generate_answer(indexed(ws), ws.config, TODAY, "报名截止时间？", ["报名截止时间"])
    assert mixed.wire.status.value == "abstain" and any("--subject" in n for n in mixed.notes)
    chosen = generate_answer(indexed(ws), ws.config, TODAY, "报名截止时间？", ["报名截止时间"],
                             subject="开放日")
    assert chosen.wire.status.value == "answered"
    assert [c["doc_id"] for c in chosen.wire.claims] == ["schedule"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grounding.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])


def test_cli_context_and_answer(make_workspace: MakeWorkspace) -> None:
    body = f"活动时间是周四16:30[^1]。\n\n[^1]: {cite(SCHEDULE, 'schedule', 2, 6)}\n"
    ws = make_workspace({
        "evidence/schedule.md": SCHEDULE,
        "answers/q.md": draft("{query: 活动时间, limit: 1500, reserve: 240}", body),
    })
    root = str(ws.config.root)
    out = _cli("context", "--root", root, str(ws.config.root / "answers/q.md"), "--format", "json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["kept"][0]["unit"] == "schedule@2:6-7" and summary["kept"][0]["tokens"] > 0
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0 and summary["reserve"] == 240
    gen = _cli("answer", "--root", root, "--question", "活动什么时候开始？", "--fields", "活动时间",
               "--format", "md")
    assert gen.returncode == 0, gen.stderr
    (ws.config.root / "answers" / "gen.md").write_text(gen.stdout, encoding="utf-8")
    checked = _cli("check", "--root", root, "answers/gen.md", "--format", "json", "--today", TODAY.isoformat())
    assert checked.returncode == 0, checked.stdout
    assert json.loads(checked.stdout)["drafts"][0]["status"] == "answered"
    tiny = _cli("answer", "--root", root, "--question", "x", "--fields", "活动时间", "--reserve", "1")
    assert tiny.returncode == 1 and "GR113" in tiny.stderr and "BudgetError" not in tiny.stderr
