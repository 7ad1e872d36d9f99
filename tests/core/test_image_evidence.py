"""Image evidence in the index and in checks (SPEC §12, §13, §15): PNG files drawn with Pillow
in each test, sidecars (CRLF, CJK), region citations in Markdown and JSON drafts.

Every workspace is real: files on disk, the SQLite store, ``Workspace.scan`` and
``Workspace.check_text``. Regions of the pictures below (white 400x300 background):

- ``panel()``: r1 a small red circle at the top left, r2 a medium blue square at the top
  right, r3 a large green rectangle along the bottom (colours as named by the palette).
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from support import MakeWorkspace, check, names, only, sha256

from grounding_core.image_questions import MeasuredVocabulary, answer_measured, measured_terms_in
from grounding_core.images import measure
from grounding_core.index import VocabularyTerm
from grounding_core.model import IMAGE_CLAIM_KEYS, Status
from grounding_core.question import answer_question, default_vocabulary, parse_question
from grounding_core.workspace import Workspace
from tests.support.workspace import write

RED, BLUE, GREEN = (230, 30, 30), (30, 60, 220), (20, 170, 60)


def panel(circle: tuple[int, int, int] = RED, *, square: bool = True, scale: int = 4) -> bytes:
    """The test panel as PNG bytes (anti-aliased: drawn ``scale`` times larger, downsampled)."""
    big = Image.new("RGB", (400 * scale, 300 * scale), (255, 255, 255))
    pen = ImageDraw.Draw(big)

    def box(x0: int, y0: int, x1: int, y1: int) -> list[int]:
        return [x0 * scale, y0 * scale, x1 * scale - 1, y1 * scale - 1]

    pen.ellipse(box(20, 20, 56, 56), fill=circle)
    if square:
        pen.rectangle(box(300, 24, 370, 94), fill=BLUE)
    pen.rectangle(box(20, 180, 380, 280), fill=GREEN)
    out = io.BytesIO()
    big.resize((400, 300), Image.Resampling.LANCZOS).save(out, format="PNG")
    return out.getvalue()


SIDECAR = "\r\n".join(["# 面板示意图的元数据", "doc_id: 面板", "subject: 控制面板", "title: 控制面板示意图", ""])


def draft(*definitions: str, sentence: str = "警示灯是红色的[^1]。", fields: str = "[颜色]",
          context: str = '{units: ["面板@1"]}') -> str:
    lines = ["---", "question: 警示灯是什么颜色？", f"fields: {fields}"]
    if context:
        lines.append(f"context: {context}")
    return "\r\n".join([*lines, "---", sentence, "", *definitions, ""])


def cite(label: str, region: str, quote: str, data: bytes, doc: str = "面板@1") -> str:
    return f'[^{label}]: {doc}#{region} sha256:{sha256(data)[:12]} "{quote}"'


@pytest.fixture
def png() -> bytes:
    return panel()


def test_a_png_is_an_image_document_whose_lines_are_its_measured_attributes(make_workspace: MakeWorkspace,
                                                                             png: bytes) -> None:
    ws = make_workspace({"evidence/images/面板.png": png, "evidence/images/面板.png.yaml": SIDECAR})
    snapshot = ws.store.snapshot()
    record = snapshot.newest("面板")
    assert record is not None and record.path == "images/面板.png" and record.sha256 == sha256(png)
    assert snapshot.inactive_reason(record, ws.today()) is None
    doc = snapshot.document(record)
    assert doc.title == "控制面板示意图" and doc.subject == "控制面板"
    assert doc.lines[2:5] == ("颜色：红色", "形状：圆形", "大小：小")
    assert doc.lines[7:10] == ("颜色：蓝色", "形状：正方形", "大小：中")
    assert doc.lines[12:15] == ("颜色：绿色", "形状：长方形", "大小：大")
    measured = snapshot.measurement(record.sha256)
    assert measured is not None and measured == measure(png)
    assert ws.store.evidence_findings().get("images/面板.png", []) == []


def test_valid_region_citations_answer_and_count_as_lines(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/images/面板.png": png, "evidence/images/面板.png.yaml": SIDECAR})
    text = draft(cite("1", "r1", "颜色：红色", png), cite("2", "r2", "形状：正方形", png),
                 sentence="警示灯是红色的[^1]，按钮是正方形[^2]。", fields="[颜色, 形状]")
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.ANSWERED, names(report)
    assert names(report) == []
    assert report.covered_fields == ["颜色", "形状"]
    # keys: (控制面板#r1, 颜色) and (控制面板#r2, 形状), the cited subjects of each field: one line each
    assert report.same_key_sources_checked == 2
    assert report.coverage == 1.0
    wire = report.wire_claims
    assert [tuple(c) for c in wire] == [IMAGE_CLAIM_KEYS, IMAGE_CLAIM_KEYS]
    assert wire[0] == {"text": "颜色：红色", "quote": "颜色：红色", "id": "面板@1#r1", "doc_id": "面板",
                       "version": 1, "region": "r1", "sha256": sha256(png), "field": "颜色",
                       "support_type": "measured"}


def test_an_unmeasured_attribute_is_unsupported_attribute_alone(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    text = draft(cite("1", "r1", "颜色：红色", png), cite("2", "r1", "材质：塑料", png),
                 sentence="警示灯是红色的[^1]，外壳是塑料的[^2]。")
    report = check(ws, "answers/a.md", text)
    finding = only(report, "unsupported-attribute")
    assert finding.code == "GR117" and "材质" in finding.message
    assert "位置, 面积, 颜色, 形状, 大小" in finding.message
    assert "quote-mismatch" not in names(report)
    assert report.status is Status.ANSWERED  # the valid claim still answers 颜色
    line = text.split("\r\n").index(cite("2", "r1", "材质：塑料", png))
    assert (finding.span.start_line, finding.span.start_col) == (line, len("[^2]: "))


def test_a_measured_attribute_with_another_value_is_quote_mismatch_naming_the_measured_value(
        make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    report = check(ws, "answers/a.md", draft(cite("1", "r1", "颜色：蓝色", png), sentence="警示灯是蓝色的[^1]。"))
    finding = only(report, "quote-mismatch")
    assert "颜色 '红色', not '蓝色'" in finding.message
    assert report.status is Status.ABSTAIN


@pytest.mark.parametrize(("definition", "words"), [
    ('[^1]: 面板@1#r9 sha256:{h} "颜色：红色"', "3 measured region(s) (r1 to r3); there is no r9"),
    ('[^1]: 面板@2#r1 sha256:{h} "颜色：红色"', "has no version 2"),
    ('[^1]: 手册@1#r1 sha256:{h} "颜色：红色"', "is a text document, not an image"),
    ('[^1]: 面板@1:3 sha256:{h} "颜色：红色"', "is an image: cite a region"),
])
def test_unknown_regions_and_the_wrong_kind_of_citation_are_unknown_source(
        make_workspace: MakeWorkspace, png: bytes, definition: str, words: str) -> None:
    manual = "---\ndoc_id: 手册\n---\n- 颜色：红色\n"
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR, "evidence/manual.md": manual})
    hashes = {"面板": sha256(png)[:12], "手册": sha256(manual)[:12]}
    text = draft(definition.format(h=hashes["手册" if "手册" in definition else "面板"]))
    finding = only(check(ws, "answers/a.md", text), "unknown-source")
    assert words in finding.message


def test_changed_pixels_make_the_citation_stale_with_old_and_new_values(make_workspace: MakeWorkspace,
                                                                        tmp_path: Path, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png})  # no sidecar: doc_id 面板, automatic versions
    text = draft(cite("1", "r1", "颜色：红色", png), cite("2", "r2", "颜色：蓝色", png),
                 sentence="警示灯是红色的[^1]，按钮是蓝色的[^2]。")
    assert check(ws, "answers/a.md", text).status is Status.ANSWERED
    blue = panel(circle=BLUE)
    write(tmp_path, "evidence/面板.png", blue)
    result = ws.scan()
    assert result.measured == 1
    report = check(ws, "answers/a.md", text)
    stale = [f for f in report.findings if f.name == "stale-citation"]
    assert len(stale) == 2
    assert "颜色 of r1 was 红色 at version 1 and is 蓝色 at version 2" in stale[0].message
    assert "颜色 of r2 is still 蓝色 at version 2" in stale[1].message
    assert stale[0].fix is None  # the value changed: nothing to re-anchor
    assert stale[1].fix is not None and stale[1].fix.new_text == f'面板@2#r2 sha256:{sha256(blue)[:12]} "颜色：蓝色"'


def test_changed_pixels_under_the_same_declared_version_fail_the_hash_with_both_values(
        make_workspace: MakeWorkspace, tmp_path: Path, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR + "version: 1\r\n"})
    text = draft(cite("1", "r1", "颜色：红色", png))
    assert check(ws, "answers/a.md", text).status is Status.ANSWERED
    write(tmp_path, "evidence/面板.png", panel(circle=BLUE))
    ws.scan()
    report = check(ws, "answers/a.md", text)
    mismatch = only(report, "hash-mismatch")
    assert "its 颜色 was measured 红色 there and is 蓝色 now" in mismatch.message
    assert "颜色 '蓝色', not '红色'" in only(report, "quote-mismatch").message
    assert "version-reuse" in names(ws.store.evidence_findings()["面板.png"])


def test_a_byte_identical_resave_measures_nothing_and_changes_nothing(make_workspace: MakeWorkspace,
                                                                      tmp_path: Path, png: bytes) -> None:
    ws = make_workspace({"evidence/a/面板.png": png, "evidence/a/面板.png.yaml": SIDECAR}, scan=False)
    first = ws.scan()
    assert first.measured == 1
    events = ws.store.event_count()
    write(tmp_path, "evidence/a/面板.png", png)  # the same bytes, a new mtime
    again = ws.scan()
    assert "a/面板.png" in again.changed  # read and hashed again (its stat key changed) ...
    assert again.measured == 0  # ... but its sha256 was measured already
    assert ws.store.event_count() == events  # and no event: the content is the same
    # a second file with the same bytes is a cache hit too; so is a fresh store on the same index
    write(tmp_path, "evidence/b/copy.png", png)
    assert ws.scan().measured == 0
    ws.store.close()
    reopened = Workspace.open(tmp_path)
    try:
        write(tmp_path, "evidence/a/面板.png", png)
        assert reopened.scan().measured == 0
        assert check(reopened, "answers/a.md", draft(cite("1", "r1", "颜色：红色", png))).status is Status.ANSWERED
    finally:
        reopened.store.close()


def test_the_sidecar_is_watched_with_its_image(make_workspace: MakeWorkspace, tmp_path: Path, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    text = draft(cite("1", "r1", "颜色：红色", png))
    assert check(ws, "answers/a.md", text).status is Status.ANSWERED
    events = ws.store.event_count()
    write(tmp_path, "evidence/面板.png.yaml", SIDECAR)  # saved again, byte for byte: a new mtime only
    assert ws.scan(paths=["面板.png.yaml"]).events == [] and ws.scan().events == []
    assert ws.store.event_count() == events
    write(tmp_path, "evidence/面板.png.yaml", SIDECAR + "status: revoked\r\n")
    ws.scan(paths=["面板.png.yaml"])  # what a watcher reports: only the sidecar changed
    report = check(ws, "answers/a.md", text)
    assert "revoked" in only(report, "inactive-source").message
    write(tmp_path, "evidence/面板.png.yaml", "doc_id: [不是, 文本]\r\n")
    ws.scan()
    bad = ws.store.evidence_findings()["面板.png"]
    assert names(bad) == ["invalid-front-matter"] and "sidecar" in bad[0].message
    assert only(check(ws, "answers/a.md", text), "inactive-source")  # no longer indexed: revoked


def test_a_full_walk_reads_an_image_again_only_when_it_or_its_sidecar_changed(
        make_workspace: MakeWorkspace, tmp_path: Path, png: bytes) -> None:
    """The walk's fast path for text files leaves images to the sidecar-aware stat key."""
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR,
                         "evidence/说明.md": "- 颜色：红色\n"})
    ws.scan()
    assert ws.scan().changed == []  # nothing changed: neither the image nor the text file is read
    write(tmp_path, "evidence/面板.png.yaml", SIDECAR + "title: 新面板\r\n")
    assert ws.scan().changed == ["面板.png"]  # only the sidecar changed: its image is read again
    assert ws.scan().changed == []


def test_a_png_that_does_not_decode_is_unreadable_evidence(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/broken.png": png[: len(png) // 2], "evidence/notpng.png": b"GIF89a....",
                         "evidence/ok.png": png})
    findings = ws.store.evidence_findings()
    assert names(findings["broken.png"]) == ["unreadable-evidence"]
    assert "does not decode" in findings["broken.png"][0].message
    assert "not a PNG" in findings["notpng.png"][0].message
    assert findings.get("ok.png", []) == []
    report = check(ws, "answers/a.md", draft(f'[^1]: broken@1#r1 sha256:{sha256(png)[:12]} "颜色：红色"'))
    assert "no evidence document has doc_id 'broken'" in only(report, "unknown-source").message


def test_conflict_keys_are_per_region(make_workspace: MakeWorkspace, png: bytes) -> None:
    other = panel(circle=GREEN)
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR,
                         "evidence/旧面板.png": other,
                         "evidence/旧面板.png.yaml": SIDECAR.replace("doc_id: 面板", "doc_id: 旧面板")})
    # r1 of two images of one subject disagree on 颜色: (控制面板#r1, 颜色) conflicts ...
    report = check(ws, "answers/a.md", draft(cite("1", "r1", "颜色：红色", png)))
    # on the fields item and on the definition (SPEC §15), one message
    conflicts = [f for f in report.findings if f.name == "field-conflict"]
    assert len(conflicts) == 2 and conflicts[0].message == conflicts[1].message
    message = conflicts[0].message
    assert "'红色' (1 source: 面板@1#r1)" in message and "'绿色' (1 source: 旧面板@1#r1)" in message
    assert "for subject '控制面板#r1'" in message
    assert report.status is Status.CONFLICT
    # the image files get the finding too: on their first line, naming the region
    from grounding_core.evidence_findings import ConflictCache, file_findings

    cache = ConflictCache(ws.store.snapshot(), ws.today(), ws.config.evidence_display)
    (on_file,) = file_findings("面板.png", [], cache)
    assert on_file.name == "field-conflict" and on_file.span.start_line == 0
    assert on_file.message.startswith("r1 颜色：红色: active sources disagree on '颜色' for subject '控制面板#r1'")
    assert [r.message for r in on_file.related] == ["旧面板@1#r1 颜色：绿色"]
    # ... while r2 (the same blue square in both) has one value, and r1 never meets r2
    report = check(ws, "answers/a.md", draft(cite("1", "r2", "颜色：蓝色", png), sentence="按钮是蓝色的[^1]。"))
    assert report.status is Status.ANSWERED and names(report) == []


def test_region_values_are_not_known_terms_for_uncited_claims(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR,
                         "evidence/notes.md": "---\ndoc_id: notes\n---\n- 安装位置：机房\n"})
    text = draft(cite("1", "r1", "颜色：红色", png),
                 sentence="警示灯是红色的[^1]。\r\n面板很大，颜色鲜艳，形状是圆形。\r\n它装在机房。")
    report = check(ws, "answers/a.md", text)
    uncited = [f for f in report.findings if f.name == "uncited-claim"]
    assert len(uncited) == 1 and "机房" in uncited[0].message  # a text value still is one


def test_a_region_is_visible_through_its_attribute_lines(make_workspace: MakeWorkspace, tmp_path: Path,
                                                         png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR,
                         "runs/ctx.json": json.dumps({"units": [{"doc_id": "面板", "version": 1, "lines": [6, 10]}]})})
    definition = cite("1", "r1", "颜色：红色", png)  # r1's 颜色 is line 3 of the image version
    for context in ('{units: ["面板@1"]}', '{units: ["面板@1:1-5"]}', '{units: ["面板@1:3"]}'):
        assert check(ws, "answers/a.md", draft(definition, context=context)).status is Status.ANSWERED, context
    for context in ('{units: ["面板@1:6-10"]}', '{units: ["其他@1"]}', '{log: "runs/ctx.json"}'):
        report = check(ws, "answers/a.md", draft(definition, context=context))
        finding = only(report, "invisible-source")
        assert '"面板@1:1-5" (r1\'s attribute lines)' in finding.hint, context
    r2 = cite("1", "r2", "颜色：蓝色", png)
    logged = draft(r2, sentence="按钮是蓝色的[^1]。", context='{log: "runs/ctx.json"}')
    assert check(ws, "answers/a.md", logged).status is Status.ANSWERED
    report = check(ws, "answers/a.md", draft(definition, context=""))
    assert "context-undeclared" in names(report) and report.status is Status.ANSWERED


def test_json_answers_carry_image_claims(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    claim = {"text": "颜色：红色", "quote": "颜色：红色", "id": "面板@1#r1", "doc_id": "面板", "version": 1,
             "region": "r1", "sha256": sha256(png), "field": "颜色", "support_type": "measured"}
    answer = {"status": "answered", "claims": [claim], "missing_fields": [], "fields": ["颜色"],
              "context": {"units": ["面板@1"]}}
    report = check(ws, "answers/a.answer.json", json.dumps(answer, ensure_ascii=False, indent=2))
    assert report.status is Status.ANSWERED and names(report) == []
    bad = dict(claim, text="颜色：绿色", field="颜色 ")
    answer["claims"] = [bad]
    report = check(ws, "answers/a.answer.json", json.dumps(answer, ensure_ascii=False, indent=2))
    assert names(report).count("quote-mismatch") == 2  # text and field, each on its own value
    assert "status-mismatch" in names(report)


def test_english_attribute_names_with_image_language_en(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/panel.png": png, "grounding.toml": 'image_language = "en"\n'})
    text = "\n".join(["---", "question: What colour is the light?", "fields: [color]",
                      'context: {units: ["panel@1"]}', "---", "The light is red[^1].", "",
                      f'[^1]: panel@1#r1 sha256:{sha256(png)[:12]} "color：red"', ""])
    report = check(ws, "answers/a.md", text)
    assert report.status is Status.ANSWERED, names(report)
    assert only(check(ws, "answers/a.md", text.replace("color：red", "颜色：红色")),
                "unsupported-attribute")


def test_measured_questions_answer_with_the_region_cited(make_workspace: MakeWorkspace, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    snapshot = ws.store.snapshot()
    assert measured_terms_in("红色 小 圆形") == ["红色", "圆形", "小"]
    assert measured_terms_in("红色 小 圆形 材质") == ["红色", "圆形", "小"]  # 材质 is left over
    # three image claims need about 280 output tokens (each carries a 64-hex sha256): the default
    # reserve of 240 (SPEC §15) keeps two and says why; a reserve of 400 answers all three
    short = answer_measured(snapshot, ws.config, ws.today(), "红色 小 圆形", ["红色", "小", "圆形"])
    assert short.facts["reason"] == "output_budget" and len(short.wire.claims) == 2
    answer = answer_measured(snapshot, ws.config, ws.today(), "红色 小 圆形", ["红色", "小", "圆形"], reserve=400)
    assert answer.facts["reason"] == "answered" and answer.wire.status is Status.ANSWERED
    assert [c["quote"] for c in answer.wire.claims] == ["颜色：红色", "大小：小", "形状：圆形"]
    assert {c["id"] for c in answer.wire.claims} == {"面板@1#r1"}
    assert answer.subject == "控制面板#r1" and answer.units == ("面板@1",)
    # the rendered draft checks clean against the same index
    report = check(ws, "answers/generated.md", answer.markdown())
    assert report.status is Status.ANSWERED and names(report) == [], names(report)
    nothing = answer_measured(snapshot, ws.config, ws.today(), "紫色 圆形", ["紫色", "圆形"])
    assert nothing.facts["reason"] == "no_evidence" and not nothing.wire.claims


def test_several_matching_regions_are_an_ambiguous_subject(make_workspace: MakeWorkspace) -> None:
    two = panel(square=False)
    ws = make_workspace({"evidence/甲.png": two, "evidence/乙.png": two})
    answer = answer_measured(ws.store.snapshot(), ws.config, ws.today(), "红色圆形", ["红色", "圆形"])
    assert answer.facts["reason"] == "ambiguous_subject"
    assert answer.facts["regions"] == ["乙@1#r1", "甲@1#r1"]
    assert answer.facts["subjects"] == ["乙#r1", "甲#r1"]
    assert not answer.wire.claims


def test_grounding_cite_gives_region_citations_of_an_image(make_workspace: MakeWorkspace, png: bytes) -> None:
    from grounding_core.cite import cite_document

    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    result = cite_document(ws.store.snapshot(), "面板", ws.today(), grep="蓝色")
    (citation,) = result.citations
    assert citation.id == "面板@1#r2" and citation.region == "r2"
    assert citation.footnote() == f'[^1]: 面板@1#r2 sha256:{sha256(png)[:12]} "颜色：蓝色"'
    claim = citation.claim()
    assert claim is not None and tuple(claim) == IMAGE_CLAIM_KEYS and claim["support_type"] == "measured"
    report = check(ws, "answers/a.md", draft(citation.footnote(), sentence="按钮是蓝色的[^1]。"))
    assert report.status is Status.ANSWERED and names(report) == []


def test_the_measured_vocabulary_plugs_into_the_closed_grammar(make_workspace: MakeWorkspace, png: bytes) -> None:
    """SPEC §13: the grammar's default vocabulary (the snapshot's names plus the measured values)
    reads "红色 小 圆形" as three measured values and refuses "… 材质" for 材质.
    """
    vocabulary = MeasuredVocabulary("zh")
    assert vocabulary.terms_in("红色 小 圆形", dt.date(2026, 5, 1)) == [
        VocabularyTerm("红色", "measured", ("红色",)), VocabularyTerm("圆形", "measured", ("圆形",)),
        VocabularyTerm("小", "measured", ("小",))]
    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    combined = default_vocabulary(ws.store.snapshot(), ws.config)
    ok = parse_question("红色 小 圆形", combined, ws.today())
    assert ok.supported and ok.measured == ("红色", "小", "圆形") and ok.fields == ()
    refused = parse_question("红色 小 圆形 材质", combined, ws.today())
    assert refused.unsupported == ("材质",) and refused.measured == ("红色", "小", "圆形")
    # a field the image has (颜色) is a snapshot field name, a colour is a measured value
    both = parse_question("红色的 颜色", combined, ws.today())
    assert both.supported and both.measured == ("红色",) and both.fields == ("颜色",)


def test_grounding_answer_question_answers_measured_values_with_the_region_cited(
        make_workspace: MakeWorkspace, tmp_path: Path, png: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC §12, §13 through ``question.answer_question`` and ``grounding answer --question``:
    "红色 小 圆形" is answered from r1 (its three attributes, r1 cited), "红色 小 圆形 材质"
    abstains with ``unsupported_terms: ["材质"]`` and no claims.
    """
    from grounding import cli

    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR})
    snapshot = ws.store.snapshot()
    answer = answer_question(snapshot, ws.config, ws.today(), "红色 小 圆形", reserve=400)
    assert answer.facts["reason"] == "answered" and answer.wire.status is Status.ANSWERED
    assert [c["quote"] for c in answer.wire.claims] == ["颜色：红色", "大小：小", "形状：圆形"]
    assert {c["id"] for c in answer.wire.claims} == {"面板@1#r1"}
    assert check(ws, "answers/generated.md", answer.markdown()).status is Status.ANSWERED
    rejected = answer_question(snapshot, ws.config, ws.today(), "红色 小 圆形 材质", reserve=400)
    assert rejected.facts["reason"] == "unsupported_terms" and rejected.facts["unsupported_terms"] == ["材质"]
    assert rejected.wire.status is Status.ABSTAIN and not rejected.wire.claims
    ws.store.close()

    code = cli.main(["answer", "--root", str(tmp_path), "--question", "红色 小 圆形", "--reserve", "400",
                     "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "answered" and out["reason"] == "answered"
    assert [(c["id"], c["region"], c["quote"], c["support_type"]) for c in out["claims"]] == [
        ("面板@1#r1", "r1", "颜色：红色", "measured"), ("面板@1#r1", "r1", "大小：小", "measured"),
        ("面板@1#r1", "r1", "形状：圆形", "measured")]
    assert all(tuple(c) == IMAGE_CLAIM_KEYS for c in out["claims"])
    code = cli.main(["answer", "--root", str(tmp_path), "--question", "红色 小 圆形 材质", "--format", "json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0 and out["status"] == "abstain" and out["claims"] == []
    assert out["reason"] == "unsupported_terms" and out["unsupported_terms"] == ["材质"]
    assert "'材质'" in captured.err


def test_deleted_and_expired_images_are_inactive(make_workspace: MakeWorkspace, tmp_path: Path, png: bytes) -> None:
    ws = make_workspace({"evidence/面板.png": png,
                         "evidence/面板.png.yaml": SIDECAR + "effective_until: 2026-04-30\r\n",
                         "evidence/current.png": png})
    report = check(ws, "answers/a.md", draft(cite("1", "r1", "颜色：红色", png)))
    assert "expired on 2026-04-30" in only(report, "inactive-source").message
    text = draft(cite("1", "r1", "颜色：红色", png, doc="current@1"), context='{units: ["current@1"]}')
    assert check(ws, "answers/a.md", text).status is Status.ANSWERED
    (tmp_path / "evidence/current.png").unlink()
    ws.scan()
    assert "it was deleted" in only(check(ws, "answers/a.md", text), "inactive-source").message


@pytest.mark.sqlite_only
@pytest.mark.parametrize("side", ["images", "memory"])
def test_an_index_made_by_either_branch_before_the_merge_is_rebuilt_on_open(
        make_workspace: MakeWorkspace, tmp_path: Path, png: bytes, side: str) -> None:
    """Both branches called their derived tables definition 5; the merged layout is 6. An index
    of the images branch (``region_values``, ``measurements``, no ``vocabulary`` and an
    ``events`` CHECK without memory kinds) and one of the memory branch (``vocabulary``,
    ``memory_entries``, no ``region_values``/``measurements``, ``field_lines`` without
    ``subject``, the PNG never read) are rebuilt from the log on open and answer like a new one.
    """
    import sqlite3

    from grounding_core.sqlite_backend import DERIVED_VERSION

    ws = make_workspace({"evidence/面板.png": png, "evidence/面板.png.yaml": SIDECAR,
                         "evidence/notice.md": "---\ndoc_id: notice\nsubject: 𠮷野家🎉\n---\n营业时间：上午九点\r\n"})
    path = ws.store.backend.path
    fresh = parse_question("红色 小 圆形 颜色", default_vocabulary(ws.store.snapshot(), ws.config), ws.today())
    ws.store.close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN")
    (value,) = raw.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
    printed = json.loads(value)
    assert printed["definition"] == DERIVED_VERSION >= 6  # 7: key summaries kept at write time
    printed["definition"] = 5
    (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()
    raw.execute("ALTER TABLE events RENAME TO events_new")
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute("DROP TRIGGER IF EXISTS events_no_delete")
    if side == "images":  # its log: every import, under a CHECK without the memory kinds
        for table in ("vocabulary", "subject_contents", "memory_entries"):
            raw.execute(f"DROP TABLE {table}")
        raw.execute(sql.replace(", 'remember', 'approve', 'forget'", ""))
        raw.execute("INSERT INTO events SELECT * FROM events_new")
    else:  # its log never imported the PNG (not evidence before images)
        raw.execute(sql)
        raw.execute("INSERT INTO events SELECT * FROM events_new WHERE path NOT LIKE '%.png'")
        del printed["image_language"], printed["measurement"]
        raw.execute("DROP TABLE region_values")
        raw.execute("DROP TABLE measurements")
        raw.execute("DROP TABLE field_lines")
        raw.execute("CREATE TABLE field_lines (fh INTEGER NOT NULL, sh INTEGER NOT NULL, th INTEGER NOT NULL,"
                    " field TEXT NOT NULL, norm TEXT NOT NULL, value TEXT, line INTEGER NOT NULL,"
                    " content_id INTEGER NOT NULL)")
        raw.execute("DELETE FROM files WHERE path LIKE '%.png'")
    raw.execute("DROP TABLE events_new")
    raw.execute("UPDATE meta SET value = ? WHERE key = 'fingerprint'", (json.dumps(printed, ensure_ascii=False),))
    raw.execute("COMMIT")
    raw.close()

    reopened = Workspace.open(tmp_path)
    try:
        reopened.scan()
        snapshot = reopened.store.snapshot()
        assert parse_question("红色 小 圆形 颜色", default_vocabulary(snapshot, reopened.config),
                              reopened.today()) == fresh
        assert fresh.measured == ("红色", "小", "圆形") and fresh.fields == ("颜色",)
        report = check(reopened, "answers/a.md", draft(cite("1", "r1", "颜色：红色", png)))
        assert report.status is Status.ANSWERED and names(report) == [], names(report)
        answer = answer_question(snapshot, reopened.config, reopened.today(), "红色 小 圆形", reserve=400)
        assert {c["id"] for c in answer.wire.claims} == {"面板@1#r1"}
        entry = reopened.store.remember("客户-李华", "语言", "中文", approved_by="王芳")
        assert reopened.store.snapshot().memory_active("客户-李华", "语言") == entry
    finally:
        reopened.store.close()
