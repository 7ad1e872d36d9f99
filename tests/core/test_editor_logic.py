"""The protocol-free logic behind the editor features, in the core (SPEC §7.4, §8, §10):
checks against one snapshot (grounding_core/check.py), evidence findings
(evidence_findings.py), citation candidates (candidates.py), completion (complete.py) and
edits (edits.py). Every input is CJK, astral (𠮷🎉) or CRLF text.
"""

from __future__ import annotations

import pytest
from support import TODAY, MakeWorkspace, sha256

from grounding_core.candidates import citation_candidates
from grounding_core.check import check_text, compile_query_context, resolve_visibility
from grounding_core.complete import citation_completions
from grounding_core.drafts import ContextSpec, parse_draft
from grounding_core.edits import (
    append_answer,
    citation_edits,
    context_unit_edits,
    fix_all_edits,
    new_label,
    sentence_at,
)
from grounding_core.evidence_findings import (
    MAX_RELATED,
    PER_VALUE,
    ConflictCache,
    affected_paths,
    conflict_paths,
    file_findings,
)
from grounding_core.fixes import apply_edits
from grounding_core.index import IndexSnapshot
from grounding_core.model import CitationRef, Edit, Finding, Span
from grounding_core.text import split_lines
from grounding_core.workspace import Workspace

NOTICE = "---\ndoc_id: notice\nsubject: 开放日\n---\n- 活动时间：周四16:30\n- 地点：𠮷野家🎉二楼\n"
POSTER = "---\ndoc_id: poster\nsubject: 开放日\n---\n- 活动时间：周五9:00\n"


def conflicting(n_same: int) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {"evidence/notice.md": NOTICE, "evidence/poster.md": POSTER}
    for i in range(n_same):
        files[f"evidence/copy{i:02d}.md"] = f"---\ndoc_id: copy{i:02d}\nsubject: 开放日\n---\n- 活动时间：周四 16:30\n"
    return files


# ------------------------------------------------------------------- one snapshot, exactly


def _two_versions(make_workspace: MakeWorkspace) -> tuple[Workspace, IndexSnapshot, IndexSnapshot]:
    ws = make_workspace({"evidence/notice.md": NOTICE})
    old = ws.store.snapshot()
    (ws.config.evidence_root / "notice.md").write_text(NOTICE.replace("周四16:30", "周六10:00"), encoding="utf-8")
    ws.scan()
    ws.store.build_fts()  # full-text rows are built after a scan (the server: in the background)
    return ws, old, ws.store.snapshot()


DRAFT = ("---\nquestion: q\nfields: [活动时间]\ncontext: {units: [notice@1]}\n---\n活动时间是周四16:30[^1]。\n\n"
         f'[^1]: notice@1:5 sha256:{sha256(NOTICE)[:12]} "- 活动时间：周四16:30"\n')


def test_a_check_reads_only_the_snapshot_it_is_given(make_workspace: MakeWorkspace) -> None:
    ws, old, new = _two_versions(make_workspace)
    assert [f.name for f in check_text(DRAFT, "answers/a.md", old, ws.config, TODAY, ws.read_text).report.findings
            ] == []
    against_new = check_text(DRAFT, "answers/a.md", new, ws.config, TODAY, ws.read_text).report
    assert "stale-citation" in [f.name for f in against_new.findings]


def test_a_query_context_compiles_against_the_snapshot_it_is_given(make_workspace: MakeWorkspace) -> None:
    ws, old, new = _two_versions(make_workspace)
    spec = ContextSpec("query", query="活动时间", limit=1500, reserve=240)
    assert [u.unit.id for u in compile_query_context(new, ws.config, spec, "q", TODAY).pack.kept] == ["notice@2:5-6"]
    assert [u.unit.id for u in compile_query_context(old, ws.config, spec, "q", TODAY).pack.kept] == ["notice@1:5-6"]


# ------------------------------------------------------------------------ evidence findings


def test_evidence_conflict_related_lists_other_values_first_five_per_value(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace(conflicting(12))
    snapshot = ws.store.snapshot()
    cache = ConflictCache(snapshot, TODAY, ws.config.evidence_display)
    findings = file_findings("poster.md", (), cache)
    assert [f.name for f in findings] == ["field-conflict"]
    conflict = findings[0]
    assert conflict.span == Span.line(4, 0, len("- 活动时间：周五9:00"))
    assert "'周四 16:30' (13 sources) vs '周五9:00' (1 source)" in conflict.message  # first spelling
    assert [r.path for r in conflict.related] == ["evidence/copy00.md", "evidence/copy01.md", "evidence/copy02.md",
                                                  "evidence/copy03.md", "evidence/copy04.md"]
    assert conflict.related[0].line_text == "- 活动时间：周四 16:30"  # spelled as that source spells it
    on_notice = file_findings("notice.md", (), cache)
    related = on_notice[0].related
    assert related[0].path == "evidence/poster.md"  # the other value first
    assert "evidence/notice.md" not in [r.path for r in related]  # never the line itself
    assert len(related) == MAX_RELATED and MAX_RELATED <= 1 + PER_VALUE
    assert [f.name for f in file_findings("notice.md", (Finding("version-reuse", Span(0, 0, 0, 3), "m"),), cache)
            ] == ["version-reuse", "field-conflict"]


def test_a_cache_told_the_conflicting_keys_finds_the_same_conflicts(make_workspace: MakeWorkspace) -> None:
    files = conflicting(3)
    # no subject (the key's subject is None), CRLF, astral text, a key that does not conflict
    files["evidence/bare1.txt"] = "版权：𠮷野家🎉\r\n许可：MIT\r\n备注：无\r\n"
    files["evidence/bare2.txt"] = "版权：Debian 项目\r\n许可：MIT\r\n"
    ws = make_workspace(files)
    snapshot = ws.store.snapshot()
    keys = frozenset(snapshot.conflicting_keys(TODAY))
    assert keys == {("开放日", "活动时间"), (None, "版权")}
    paths = conflict_paths(snapshot, TODAY, keys)
    assert paths == conflict_paths(snapshot, TODAY)
    told = ConflictCache(snapshot, TODAY, ws.config.evidence_display, conflicting=keys)
    plain = ConflictCache(snapshot, TODAY, ws.config.evidence_display)
    for path in sorted(paths):
        found = file_findings(path, (), told)
        assert found == file_findings(path, (), plain)
        assert [f.name for f in found] == ["field-conflict"]
    assert set(told.keys) == keys  # the other keys were never summarised
    assert (None, "许可") in plain.keys and plain.keys[(None, "许可")] is None


def test_affected_paths_follow_the_keys_a_change_touches(make_workspace: MakeWorkspace) -> None:
    files = conflicting(2)
    files["evidence/other.md"] = "---\ndoc_id: other\nsubject: 食堂\n---\n- 开放时间：6:30\n"
    ws = make_workspace(files)
    before = ws.store.snapshot()
    assert set(conflict_paths(before, TODAY)) == {"notice.md", "poster.md", "copy00.md", "copy01.md"}
    (ws.config.evidence_root / "other.md").write_text(files["evidence/other.md"] + "- 备注：无\n",  # type: ignore[operator]
                                                      encoding="utf-8")
    ws.scan()
    assert affected_paths(before, ws.store.snapshot(), ["other"], TODAY) == {}
    before = ws.store.snapshot()
    (ws.config.evidence_root / "poster.md").write_text(POSTER.replace("周五9:00", "周四16:30"), encoding="utf-8")
    ws.scan()
    after = ws.store.snapshot()
    affected = affected_paths(before, after, ["poster"], TODAY)
    assert set(affected) == {"notice.md", "poster.md", "copy00.md", "copy01.md"}  # the key conflicted before
    cache = ConflictCache(after, TODAY, ws.config.evidence_display)
    assert all(file_findings(path, (), cache, record) == () for path, record in affected.items())


# ------------------------------------------------------------------------------ candidates


def test_candidates_put_visible_lines_and_values_in_the_sentence_first(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/notice.md": NOTICE, "evidence/poster.md": POSTER.replace("subject: 开放日", "")})
    ws.store.build_fts()  # candidates are ranked by full-text search
    snapshot = ws.store.snapshot()
    sentence = "开放日在𠮷野家🎉二楼举行。"
    best = citation_candidates(snapshot, sentence, TODAY, None)
    assert best[0].id == "notice@1:6" and best[0].value_in_sentence and best[0].text == "- 地点：𠮷野家🎉二楼"
    draft = parse_draft("---\ncontext: {units: [\"poster@1\"]}\n---\n" + sentence + "\n")
    visible = citation_candidates(snapshot, "活动时间是什么时候", TODAY,
                                  resolve_visibility(draft, snapshot, ws.config, TODAY))
    assert visible and visible[0].doc_id == "poster" and visible[0].visible


# ------------------------------------------------------------------------------ completion


def test_completion_stages_on_a_definition_line(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/notice.md": NOTICE, "evidence/poster.md": POSTER})
    snapshot = ws.store.snapshot()
    lines = ["[^𠮷]: no"]
    found = citation_completions(lines, 0, len(lines[0]), snapshot, TODAY)
    assert found is not None and [e.label for e in found.entries] == ["notice"]
    assert found.entries[0].span == Span.line(0, len("[^𠮷]: "), len(lines[0])) and not found.incomplete
    lines = ["[^1]: notice@1:"]
    found = citation_completions(lines, 0, len(lines[0]), snapshot, TODAY)
    assert found is not None and [(e.label, e.detail) for e in found.entries] == [
        ("5", "- 活动时间：周四16:30"), ("6", "- 地点：𠮷野家🎉二楼")]
    assert found.entries[1].new_text == f'notice@1:6 sha256:{sha256(NOTICE)[:12]} "- 地点：𠮷野家🎉二楼"'
    assert citation_completions(["plain text"], 0, 3, snapshot, TODAY) is None


# -------------------------------------------------------------------------------- edits


def apply(text: str, edits: list[Edit]) -> str:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return starts[line] + col if line < len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col), reverse=True):
        a, b = offset(edit.span.start_line, edit.span.start_col), offset(edit.span.end_line, edit.span.end_col)
        text = text[:a] + edit.new_text + text[b:]
    return text


def test_citation_edits_insert_before_the_end_mark_with_the_drafts_line_end() -> None:
    text = "---\r\nfields: [地点]\r\n---\r\n地点在𠮷野家🎉二楼。\r\n"
    draft = parse_draft(text)
    sentence = sentence_at(draft, 3, 2)
    assert sentence is not None
    edits, label = citation_edits(text, split_lines(text), sentence.span, CitationRef("notice", 1, 6), "ab" * 32,
                                  "- 地点：𠮷野家🎉二楼")
    assert label == "1"
    assert apply(text, edits) == ("---\r\nfields: [地点]\r\n---\r\n地点在𠮷野家🎉二楼[^1]。\r\n"
                                  '\r\n[^1]: notice@1:6 sha256:abababababab "- 地点：𠮷野家🎉二楼"\r\n')
    assert new_label("a[^1] b[^7] c[^x]") == "8"


def test_append_answer_renumbers_labels_and_drops_the_front_matter() -> None:
    existing = "---\nfields: [地点]\n---\n地点[^1]。\n\n[^1]: a@1:5 sha256:abcdef12 \"- 地点：一楼\"\n"
    generated = '---\nquestion: q\n---\n活动时间：周四[^1]\n\n[^1]: b@1:5 sha256:abcdef12 "- 活动时间：周四"\n'
    edit = append_answer(existing, split_lines(existing), generated)
    assert apply(existing, [edit]).endswith('活动时间：周四[^2]\n\n[^2]: b@1:5 sha256:abcdef12 "- 活动时间：周四"\n')
    assert append_answer("", [], generated).new_text == generated


def test_fix_all_keeps_the_first_of_overlapping_fixes() -> None:
    reanchor = Edit(Span.line(3, 6, 40), "new id and quote", "Re-anchor")
    quote = Edit(Span.line(3, 20, 40), "new quote", "Replace the quote")
    findings = [Finding("quote-mismatch", Span.line(3, 6, 40), "m", fix=quote),
                Finding("stale-citation", Span.line(3, 6, 40), "m", fix=reanchor),
                Finding("uncited-claim", Span.line(1, 0, 4), "m")]
    assert fix_all_edits(findings) == [reanchor]


# ------------------------------------------------------- context units follow a re-anchor


def _units_draft(units: str, newline: str = "\n") -> str:
    return newline.join(["---", "question: 几点？", f"context: {units}", "---", "𠮷野家🎉活动时间是周四16:30[^1]。", "",
                         '[^1]: notice@1:5 sha256:0123456789ab "- 活动时间：周四16:30"']) + newline


@pytest.mark.parametrize(("units", "expected"), [
    ('{units: ["notice@1"]}', '{units: ["notice@2"]}'),
    ("{units: ['notice@1', 'poster@1']}", "{units: ['notice@2', 'poster@1']}"),
    ("{units: [notice@1]}", "{units: [notice@2]}"),
])
def test_context_unit_of_the_old_version_follows_a_reanchor(units: str, expected: str) -> None:
    for newline in ("\n", "\r\n"):
        draft = parse_draft(_units_draft(units, newline))
        edits, advice = context_unit_edits(draft, CitationRef("notice", 1, 5), CitationRef("notice", 2, 6))
        assert advice == ""
        assert apply_edits(draft.text, edits) == _units_draft(expected, newline)


def test_context_unit_naming_lines_is_left_and_the_advice_says_what_to_add() -> None:
    draft = parse_draft(_units_draft('{units: ["notice@1:4-6"]}'))
    assert context_unit_edits(draft, CitationRef("notice", 1, 5), CitationRef("notice", 2, 6)) == (
        [], "add notice@2:6 to context.units")
    covered = parse_draft(_units_draft('{units: ["notice@1", "notice@2:5-9"]}'))
    assert context_unit_edits(covered, CitationRef("notice", 1, 5), CitationRef("notice", 2, 6)) == ([], "")
    query = parse_draft(_units_draft("{query: 活动时间, limit: 200}"))
    assert context_unit_edits(query, CitationRef("notice", 1, 5), CitationRef("notice", 2, 6)) == ([], "")


def test_fix_all_applies_the_context_edit_with_the_reanchor(make_workspace: MakeWorkspace) -> None:
    ws, _old, _new = _two_versions(make_workspace)
    (ws.config.evidence_root / "notice.md").write_text(
        "---\ndoc_id: notice\nsubject: 开放日\n---\n- 签到：15:30 🎉\n- 活动时间：周四16:30\n- 地点：𠮷野家🎉二楼\n",
        encoding="utf-8")
    ws.scan()
    snapshot = ws.store.snapshot()
    report = check_text(DRAFT, "answers/a.md", snapshot, ws.config, TODAY, ws.read_text).report
    stale = next(f for f in report.findings if f.name == "stale-citation")
    assert stale.fix is not None and stale.fix.title == "Re-anchor to notice@3:6"
    assert [(e.new_text, e.title) for e in stale.also] == [("notice@3", "Update context unit notice@1 to notice@3")]
    fixed = apply_edits(DRAFT, fix_all_edits(report.findings))
    assert "context: {units: [notice@3]}" in fixed
    assert [f.name for f in check_text(fixed, "answers/a.md", snapshot, ws.config, TODAY, ws.read_text)
            .report.findings] == []


# ------------------------------------------------------------ candidates say why


PARKING = "---\ndoc_id: parking\n---\n- 停车地点：𠮷野家🎉后院\n- 收费标准：每小时5元\n"
SCHEDULE = "---\ndoc_id: schedule\n---\n- 地点：𠮷野家🎉二楼\n- 活动时间：周四16:30\n"


def test_candidates_rank_by_value_and_field_and_drop_unrelated_lines(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace({"evidence/parking.md": PARKING, "evidence/schedule.md": SCHEDULE})
    assert ws.store.build_fts()  # the field-name candidates come from full-text search
    snapshot = ws.store.snapshot()
    by_value = citation_candidates(snapshot, "访客请把车停在𠮷野家🎉后院。", TODAY, None, 3)
    assert [(c.id, c.reasons) for c in by_value] == [
        ("parking@1:4", ("value in the sentence", "current version"))]  # 𠮷野家🎉二楼 shares letters only
    by_field = citation_candidates(snapshot, "收费标准是多少？", TODAY, None, 3, ["收费标准"])
    assert [(c.id, c.reasons) for c in by_field] == [
        ("parking@1:5", ("field 收费标准 asked for", "current version"))]
    named = citation_candidates(snapshot, "活动时间另行通知。", TODAY, None, 3)
    assert [(c.id, c.reasons) for c in named] == [("schedule@1:5", ("field 活动时间 in the sentence",
                                                                    "current version"))]


def test_file_findings_call_pause_every_128_lines_and_find_the_same(make_workspace: MakeWorkspace) -> None:
    files = conflicting(2)
    # one evidence file with 300 conflicting lines of one key (CRLF, CJK, an emoji), as on Debian
    files["evidence/long.txt"] = "".join(f"版权：𠮷野家🎉 {n}\r\n" for n in range(300))
    ws = make_workspace(files)
    snapshot = ws.store.snapshot()
    cache = ConflictCache(snapshot, TODAY, ws.config.evidence_display)
    calls: list[int] = []
    paused = file_findings("long.txt", (), cache, pause=lambda: calls.append(1))
    assert len(paused) == 300 and all(f.name == "field-conflict" for f in paused)
    assert len(calls) == 2  # after line 128 and line 256
    assert paused == file_findings("long.txt", (), cache)
