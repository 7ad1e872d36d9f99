"""``grounding cite DOC_ID@VERSION#rN`` (SPEC §9, §12): an image region cited like a line.

A region id gives the region's five measured attributes as paste-ready image citations
(``[^1]: 面板@1#r2 sha256:HEX "颜色：蓝色"``; with ``--format json`` the nine-key image claim of
SPEC §15); every printed footnote is pasted into a draft and checked. A region number that
is malformed or names no measured region is refused with a message that says which regions
exist.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from grounding import cli
from grounding_core.model import IMAGE_CLAIM_KEYS
from tests.support.workspace import write_files

from .test_image_api import panel  # a red circle (r1) and a blue square (r2) on white

PNG = panel()
HEX = hashlib.sha256(PNG).hexdigest()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_files(tmp_path, {
        "grounding.toml": 'today = "2026-05-01"\n',
        "evidence/面板.png": PNG,
        "evidence/面板.png.yaml": "doc_id: 面板🎉\r\nsubject: 控制面板\r\n",
        "evidence/schedule.md": "---\r\ndoc_id: schedule\r\n---\r\n- 活动时间：周四16:30 𠮷\r\n",
    })
    return tmp_path


def cite(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["cite", "--root", str(root), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def check(capsys: pytest.CaptureFixture[str], root: Path, sentence: str, definitions: str) -> dict[str, object]:
    (root / "answers").mkdir(exist_ok=True)
    draft = ("---\r\nquestion: 按钮是什么颜色、形状？\r\nfields: [颜色, 形状]\r\n"
             'context: {units: ["面板🎉@1"]}\r\n---\r\n'
             f"{sentence}\r\n\r\n{definitions}")
    (root / "answers" / "a.md").write_bytes(draft.encode())
    code = cli.main(["check", "--root", str(root), "--format", "json", "answers/a.md"])
    report: dict[str, object] = json.loads(capsys.readouterr().out)["drafts"][0]
    assert code == 0, report
    return report


@pytest.mark.parametrize("target", ["面板🎉@1#r2", "面板🎉#r2"])
def test_a_region_id_prints_the_regions_measured_attributes_as_image_citations(
        capsys: pytest.CaptureFixture[str], root: Path, target: str) -> None:
    code, out, _ = cite(capsys, root, target)
    assert code == 0
    lines = out.splitlines()
    assert [line.split(" sha256:")[0] for line in lines] == [f"[^{i}]: 面板🎉@1#r2" for i in range(1, 6)]
    assert f'[^3]: 面板🎉@1#r2 sha256:{HEX[:12]} "颜色：蓝色"' in lines
    assert f'[^4]: 面板🎉@1#r2 sha256:{HEX[:12]} "形状：正方形"' in lines
    report = check(capsys, root, "按钮是蓝色的[^3]，是正方形[^4]。", "\r\n".join(lines) + "\r\n")
    assert report["status"] == "answered" and report["diagnostics"] == []


def test_a_region_id_with_grep_and_json_gives_the_nine_key_image_claim(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = cite(capsys, root, "面板🎉@1#r1", "--grep", "颜色", "--format", "json")
    assert code == 0
    [citation] = json.loads(out)["citations"]
    assert citation["footnote"] == f'[^1]: 面板🎉@1#r1 sha256:{HEX[:12]} "颜色：红色"'
    assert citation["region"] == "r1"
    assert citation["claim"] == {
        "text": "颜色：红色", "quote": "颜色：红色", "id": "面板🎉@1#r1", "doc_id": "面板🎉", "version": 1,
        "region": "r1", "sha256": HEX, "field": "颜色", "support_type": "measured"}
    assert tuple(citation["claim"]) == IMAGE_CLAIM_KEYS


def test_a_region_id_with_grep_that_matches_no_attribute_is_no_match(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, _, err = cite(capsys, root, "面板🎉@1#r1", "--grep", "材质")
    assert code == 1 and "no-match" in err and "面板🎉@1#r1" in err


REFUSED = {  # target -> (exit status, what stderr says)
    "面板🎉@1#r3": (1, "GR102 unknown-source: 面板🎉@1 has 2 measured region(s) (r1 to r2); there is no r3"),
    "面板🎉#r9": (1, "there is no r9"),
    "面板🎉@2#r1": (1, "GR102 unknown-source: '面板🎉' has no indexed version 2; the newest is 1"),
    "schedule@1#r1": (1, "schedule@1 is a text document, not an image"),
    "未知@1#r1": (1, "no evidence document has doc_id '未知'"),
    "面板🎉@1#r0": (2, "regions are numbered from r1"),
    "面板🎉@1#r02": (2, "has a leading zero; write 面板🎉@1#r2"),
    "面板🎉@1#r２": (2, "full-width digits; write 面板🎉@1#r2"),
    "面板🎉@1#r²": (2, "non-ASCII digits; write 面板🎉@1#r2"),
    "面板🎉@1#r" + "9" * 30: (2, "(30 digits) is too large: regions are numbered r1, r2"),
    "面板🎉@1#2": (2, "a region is written #r and its number"),
    "面板🎉@1＃r2": (2, "the full-width '＃'"),
    "面板🎉@1#r1:3": (2, "a region is cited without a line"),
}


@pytest.mark.parametrize("target", sorted(REFUSED))
def test_a_bad_region_id_is_refused_with_what_to_write(
        capsys: pytest.CaptureFixture[str], root: Path, target: str) -> None:
    code, said = REFUSED[target]
    got, out, err = cite(capsys, root, target)
    assert (got, out) == (code, "")
    assert said in err, err
    assert "Traceback" not in err


def test_an_image_line_still_cites_its_region(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, _ = cite(capsys, root, "面板🎉@1:8")  # r2's 颜色: five lines per region
    assert (code, out) == (0, f'[^1]: 面板🎉@1#r2 sha256:{HEX[:12]} "颜色：蓝色"\n')


def test_a_full_width_at_in_a_region_id_is_an_input_method_slip_for_cite_and_check(
        capsys: pytest.CaptureFixture[str], root: Path) -> None:
    code, out, err = cite(capsys, root, "面板🎉＠１#r1")
    assert code == 0 and "read '面板🎉＠１#r1' as 面板🎉@1#r1" in err
    assert out.splitlines()[2] == f'[^3]: 面板🎉@1#r1 sha256:{HEX[:12]} "颜色：红色"'
    (root / "answers").mkdir()
    (root / "answers" / "a.md").write_bytes(
        ("---\r\nfields: [颜色]\r\n---\r\n按钮是红色的[^1]。\r\n\r\n"
         f'[^1]: 面板🎉＠1#r1 sha256:{HEX[:12]} "颜色：红色"\r\n').encode())
    cli.main(["check", "--root", str(root), "--format", "json", "answers/a.md"])
    [malformed] = [d for d in json.loads(capsys.readouterr().out)["drafts"][0]["diagnostics"]
                   if d["name"] == "malformed-citation"]
    assert "U+FF20 FULLWIDTH COMMERCIAL AT" in malformed["message"] and "column 10" in malformed["message"]
    assert malformed["fix"]["new_text"] == "面板🎉@1#r1"
    assert cli.main(["check", "--root", str(root), "--fix", "answers/a.md"]) == 0
    assert "[^1]: 面板🎉@1#r1 sha256:" in (root / "answers" / "a.md").read_text(encoding="utf-8")
