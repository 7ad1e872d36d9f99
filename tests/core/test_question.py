"""The closed question grammar and ``grounding answer --question`` (SPEC §13, §15 "§13 questions").

Known subjects and field names match verbatim after NFKC, longest first; whatever is left after
matches, whitespace, punctuation and ``query_stopwords`` must be empty, or the answer abstains
with reason ``unsupported_terms`` and the leftover runs. A question about one subject's field
never gets another subject's line; the sixth source of a key makes a conflict, with every
source counted and listed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import CASES, TODAY, MakeWorkspace, write_files

from grounding import cli
from grounding_core.index import VocabularyTerm
from grounding_core.question import CombinedVocabulary, SnapshotVocabulary, answer_question, parse_question
from grounding_core.workspace import Workspace

BOOK_FAIR = ("---\ndoc_id: book-fair\nsubject: 冬季书展\n---\n"
             "- 展期：12月10日至12月14日\n- 地点：图书馆一层大厅\n- 门票：10元，学生半价\n- 来源：读者服务部\n")
OPEN_DAY = ("---\ndoc_id: open-day\nsubject: 秋季开放日\n---\n"
            "- 地点：主楼报告厅\n- 开放日：周六\n- 签到地点：主楼东门\n")
VOLUNTEERS = "---\ndoc_id: volunteers\n---\n主题：秋季开放日\n- 签到地点：图书馆北门\n"
EMOJI = "---\ndoc_id: club\nsubject: 社团招新🎸\n---\n- 报名方式：扫码🎉\n- ＡＢ：全角\n"


@pytest.fixture
def ws(make_workspace: MakeWorkspace) -> Workspace:
    return make_workspace({
        "evidence/book-fair.md": BOOK_FAIR, "evidence/open-day.md": OPEN_DAY,
        "evidence/volunteers.md": VOLUNTEERS, "evidence/club.md": EMOJI,
    })


def parse(ws: Workspace, question: str, stopwords: list[str] | None = None) -> Any:
    return parse_question(question, SnapshotVocabulary(ws.store.snapshot()), TODAY, stopwords)


def answer(ws: Workspace, question: str, **kw: Any) -> dict[str, Any]:
    ws.store.build_fts()  # the answer's context is ranked by full-text search
    draft = answer_question(ws.store.state, ws.config, TODAY, question, **kw)
    return json.loads(draft.json_text())  # type: ignore[no-any-return]


# -- the grammar -------------------------------------------------------------------------------


def test_vocabulary_in_finds_subjects_and_field_names_but_not_values_or_meta_fields(ws: Workspace) -> None:
    found = {(t.text, t.kind) for t in ws.store.snapshot().vocabulary_in(
        "冬季书展的门票和图书馆一层大厅，来源，秋季开放日", TODAY)}
    assert found == {("冬季书展", "subject"), ("门票", "field"), ("秋季开放日", "subject"),
                     ("开放日", "field")}


def test_subjects_and_fields_match_longest_first_and_the_rest_is_question_words(ws: Workspace) -> None:
    parsed = parse(ws, "请问秋季开放日的签到地点在哪里？")
    assert parsed.subjects == ("秋季开放日",)          # not the field 开放日 inside it
    assert parsed.fields == ("签到地点",)              # not the field 地点 inside it
    assert parsed.unsupported == ()
    assert [m.term.text for m in parsed.matches] == ["秋季开放日", "签到地点"]


def test_matching_is_after_nfkc_and_emoji_in_names_match(ws: Workspace) -> None:
    parsed = parse(ws, "社团招新🎸的AB是什么？")   # ＡＢ in the evidence is NFKC AB
    assert parsed.subjects == ("社团招新🎸",) and parsed.fields == ("ＡＢ",)
    assert parse(ws, "社团招新🎸的ＡＢ是什么").fields == ("ＡＢ",)


@pytest.mark.parametrize("question, unsupported", [
    ("冬季书展的门票是什么材质的？", ("材质",)),
    ("重量 用途", ("重量", "用途")),
    ("冬季书展的门票🎉多少$", ("🎉", "$")),
    ("冬季书展，门票！", ()),
    ("What is the 门票 of 冬季书展?", ()),
    ("WHAT IS THE 门票 OF 冬季书展?", ()),      # question words in any ASCII case
    ("This 门票", ("This",)),          # "is" is a whole-word stopword, never part of "This"
    ("开放日活动什么时候开始？", ("活动", "开始")),
])
def test_leftovers_are_the_maximal_unsupported_runs(ws: Workspace, question: str,
                                                     unsupported: tuple[str, ...]) -> None:
    assert parse(ws, question).unsupported == unsupported


def test_query_stopwords_are_configurable(make_workspace: MakeWorkspace, tmp_path: Path) -> None:
    ws = make_workspace({"evidence/book-fair.md": BOOK_FAIR,
                         "grounding.toml": 'query_stopwords = ["的", "是", "材质", "？"]\n'})
    assert ws.config.query_stopwords == ("的", "是", "材质", "？")
    ws.store.build_fts()
    draft = answer_question(ws.store.state, ws.config, TODAY, "冬季书展的门票是什么材质？")
    assert draft.facts["unsupported_terms"] == ["什么"]          # the default list is replaced
    draft = answer_question(ws.store.state, ws.config, TODAY, "冬季书展的门票是材质？")
    assert draft.facts["reason"] == "answered"


def test_the_vocabulary_source_is_pluggable(ws: Workspace) -> None:
    class Measured:
        def terms_in(self, text: str, today: Any) -> list[VocabularyTerm]:
            return [VocabularyTerm(t, "measured", (t,)) for t in ("红色", "圆形", "小") if t in text]

    vocabulary = CombinedVocabulary((SnapshotVocabulary(ws.store.snapshot()), Measured()))
    parsed = parse_question("红色 小 圆形 材质", vocabulary, TODAY)
    assert parsed.measured == ("红色", "小", "圆形") and parsed.unsupported == ("材质",)
    assert parse_question("红色 小 圆形", vocabulary, TODAY).unsupported == ()


# -- answers -----------------------------------------------------------------------------------


def test_an_unsupported_question_abstains_with_its_terms_and_no_claims(ws: Workspace) -> None:
    out = answer(ws, "冬季书展的门票是什么材质的？")
    assert out["status"] == "abstain" and out["claims"] == []
    assert out["reason"] == "unsupported_terms" and out["unsupported_terms"] == ["材质"]
    assert out["support_scope"] == "complete_current_subject_field_source_set"


def test_a_subject_scoped_field_never_borrows_another_subjects_line(ws: Workspace) -> None:
    out = answer(ws, "冬季书展的地点在哪里？")
    assert out["reason"] == "answered" and out["subject"] == "冬季书展"
    assert [c["id"] for c in out["claims"]] == ["book-fair@1:6"]
    missing = answer(ws, "冬季书展的签到地点在哪里？")      # only 秋季开放日 has 签到地点
    assert missing["status"] == "abstain" and missing["claims"] == []
    assert missing["reason"] == "missing_fields" and missing["missing_fields"] == ["签到地点"]


def test_two_subjects_are_ambiguous_and_listed(ws: Workspace) -> None:
    out = answer(ws, "冬季书展和秋季开放日的地点在哪里？")
    assert out["reason"] == "ambiguous_subject" and out["claims"] == []
    assert out["subjects"] == ["冬季书展", "秋季开放日"]
    unnamed = answer(ws, "地点在哪里？")                     # two subjects have 地点
    assert unnamed["reason"] == "ambiguous_subject"
    assert unnamed["subjects"] == ["冬季书展", "秋季开放日"]


def test_a_question_naming_no_field_is_no_field(ws: Workspace) -> None:
    out = answer(ws, "冬季书展在哪里？")
    assert (out["status"], out["reason"], out["claims"]) == ("abstain", "no_field", [])


def test_a_conflict_lists_every_source_and_cites_none(ws: Workspace) -> None:
    out = answer(ws, "秋季开放日的签到地点在哪里？")
    assert out["status"] == "conflict" and out["reason"] == "conflicting_evidence" and out["claims"] == []
    assert out["same_key_sources_checked"] == 2
    assert out["conflict_evidence"] == [
        {"id": "open-day@1:7", "doc_id": "open-day", "version": 1, "line": 7, "value": "主楼东门",
         "path": "evidence/open-day.md"},
        {"id": "volunteers@1:5", "doc_id": "volunteers", "version": 1, "line": 5, "value": "图书馆北门",
         "path": "evidence/volunteers.md"}]


def test_explicit_fields_skip_the_grammar_and_unknown_fields_are_no_evidence(ws: Workspace) -> None:
    out = answer(ws, "随便问问材质", fields=["门票"])
    assert out["reason"] == "answered" and out["subject"] == "冬季书展"
    assert answer(ws, "问", fields=["材质"])["reason"] == "no_evidence"


def sixth_source(tmp_path: Path, extra: int = 0) -> Path:
    if not (CASES / "sixth-source").is_dir():  # a clone without the shared acceptance cases beside it
        pytest.skip("../shared/cases is not beside the repository (the public acceptance cases)")
    root = tmp_path / "sixth-source"
    shutil.copytree(CASES / "sixth-source", root)
    for i in range(extra):
        write_files(root, {f"evidence/extra{i}.md": "主题：新台\n开放时间：上午九点。\n"})
    return root


@pytest.mark.parametrize("extra, agreeing", [(0, 5), (1, 6)])
def test_the_sixth_source_makes_a_conflict_with_every_source_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: int, agreeing: int) -> None:
    root = sixth_source(tmp_path, extra)
    code = cli.main(["answer", "--root", str(root), "--question", "新台的开放时间是什么时候？", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["status"] == "conflict" and out["reason"] == "conflicting_evidence" and out["claims"] == []
    assert out["same_key_sources_checked"] == agreeing + 1
    values = [e["value"] for e in out["conflict_evidence"]]
    assert sorted(values) == sorted(["上午九点。"] * agreeing + ["上午十点。"])
    assert all(set(e) == {"id", "doc_id", "version", "line", "value", "path"} for e in out["conflict_evidence"])


# -- the command line --------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("question", ["冬季书展的门票是多少？", "秋季开放日的签到地点在哪里？",
                                      "冬季书展的门票是什么材质的？", "冬季书展在哪里？"])
def test_every_printed_answer_exits_0_and_checks_as_it_is(
        ws: Workspace, capsys: pytest.CaptureFixture[str], question: str) -> None:
    root = str(ws.config.root)
    code, out, _ = run(capsys, "answer", "--root", root, "--question", question, "--format", "json")
    assert code == 0
    (ws.config.root / "answers").mkdir(exist_ok=True)
    (ws.config.root / "answers" / "gen.answer.json").write_text(out, encoding="utf-8")
    code, md, _ = run(capsys, "answer", "--root", root, "--question", question)
    assert code == 0
    (ws.config.root / "answers" / "gen.md").write_text(md, encoding="utf-8")
    status = json.loads(out)["status"]
    for path in ("answers/gen.answer.json", "answers/gen.md"):
        report = checked(capsys, root, path)
        names = {d["name"] for d in report["diagnostics"]}
        assert report["status"] == status, (path, report)
        assert not names & {"malformed-citation", "status-mismatch", "quote-mismatch"}, (path, names)


def checked(capsys: pytest.CaptureFixture[str], root: str, path: str) -> dict[str, Any]:
    """``grounding check PATH --format json``: the draft's report."""
    cli.main(["check", "--root", root, path, "--format", "json", "--today", TODAY.isoformat()])
    return json.loads(capsys.readouterr().out)["drafts"][0]  # type: ignore[no-any-return]


def test_the_markdown_answer_says_why_it_did_not_answer(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "answer", "--root", str(ws.config.root), "--question", "冬季书展的门票是什么材质的？")
    assert code == 0
    assert "<!-- reason: unsupported_terms -->" in out
    assert "'材质'" in out and "'材质'" in err


def test_answer_exit_status_is_1_on_budget_error_and_2_on_usage(
        ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(ws.config.root)
    code, _, err = run(capsys, "answer", "--root", root, "--question", "冬季书展的门票是多少？", "--reserve", "1")
    assert code == 1 and "GR113" in err
    code, _, err = run(capsys, "answer", "--root", root, "--question", "  ")
    assert code == 2 and "--question is empty" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["answer", "--root", root])
    assert exc.value.code == 2
    capsys.readouterr()


# -- the vocabulary in the SQL store (SPEC §13): indexed, near-linear ----------------------------


@pytest.mark.sqlite_only
def test_vocabulary_lookups_seek_the_anchor_index_and_never_scan_the_names(ws: Workspace) -> None:
    ws.store.build_fts()
    snapshot = ws.store.snapshot()
    conn = ws.store.backend.reader()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        terms = snapshot.vocabulary_in("冬季书展的门票是什么？", TODAY)
    finally:
        conn.set_trace_callback(None)
    assert {(t.text, t.kind) for t in terms} == {("冬季书展", "subject"), ("门票", "field")}
    looked_up = [s for s in statements if "vocabulary" in s or "subject_contents" in s]
    assert looked_up, statements
    for sql in looked_up:
        plan = " | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "SCAN w" not in plan and "SCAN vocabulary" not in plan and "SCAN c" not in plan, plan
        assert "vocabulary_anchor" in plan or "subject_contents" in plan, plan


def test_a_megabyte_question_is_read_in_chunks_and_still_finds_its_names(ws: Workspace) -> None:
    filler = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(400_000))  # > GRAM_CHUNK grams
    text = filler + "社团招新🎸的报名方式" + filler
    terms = ws.store.snapshot().vocabulary_in(text, TODAY)
    found = {(t.text, t.kind) for t in terms}
    assert {("社团招新🎸", "subject"), ("报名方式", "field")} <= found
    assert all(t.text in text for t in terms)


def test_a_subject_whose_versions_are_all_inactive_is_not_vocabulary(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/old.md": "---\ndoc_id: old\nsubject: 旧活动🎉\nstatus: revoked\n---\n- 时间：周一\n",
                         "evidence/crlf.md": "---\r\ndoc_id: crlf\r\nsubject: 新活动\r\n---\r\n1. 时间：周二\r\n"})
    terms = ws.store.snapshot().vocabulary_in("旧活动🎉和新活动的时间", TODAY)
    assert {(t.text, t.kind) for t in terms} == {("新活动", "subject"), ("时间", "field")}
    out = answer(ws, "旧活动🎉的时间是什么？")
    assert out["reason"] == "unsupported_terms" and out["unsupported_terms"] == ["旧活动🎉"]
