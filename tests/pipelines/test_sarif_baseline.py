"""Code scanning: content-based SARIF ``partialFingerprints`` and ``grounding check --baseline``.

A fingerprint must not change when lines are added above a finding (or the file's line ends
change), must differ between different findings, and must let ``--baseline`` (a previous
SARIF or JSON report) hide exactly the findings that were already there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from grounding import cli
from grounding.report import FINGERPRINT_KEY

from .conftest import claim, write

REPO = Path(__file__).resolve().parents[2]
HEX = claim("schedule", 2, 7)["sha256"][:12]
HEAD = "---\nfields: [活动时间]\ncontext: {units: [\"schedule@2\"]}\n---\n"
BODY = ("活动时间是周四16:00 🎉[^1]。\n\n"
        f'[^1]: schedule@2:7 sha256:{HEX} "- 活动时间：周四16:00 🎉"\n')  # a forged quote (16:00)


def check(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["check", "--root", str(root), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def sarif(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> list[dict[str, Any]]:
    _, out, _ = check(capsys, root, "--format", "sarif", *argv)
    return json.loads(out)["runs"][0]["results"]


def by_rule(results: list[dict[str, Any]], rule: str) -> list[tuple[int, str]]:
    return [(r["locations"][0]["physicalLocation"]["region"]["startLine"], r["partialFingerprints"][FINGERPRINT_KEY])
            for r in results if r["ruleId"] == rule]


def test_fingerprints_survive_lines_added_above_and_a_change_of_line_ends(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    write(pipeline_root, {"answers/a.md": HEAD + BODY})
    before = by_rule(sarif(capsys, pipeline_root), "GR103")
    write(pipeline_root, {"answers/a.md": HEAD + "# 开放日\n\n说明一段。\n\n" + BODY})
    shifted = by_rule(sarif(capsys, pipeline_root), "GR103")
    write(pipeline_root, {"answers/a.md": (HEAD + "# 开放日\n\n说明一段。\n\n" + BODY).replace("\n", "\r\n")})
    crlf = by_rule(sarif(capsys, pipeline_root), "GR103")
    assert [line for line, _ in before] == [7] and [line for line, _ in shifted] == [11]
    assert [fp for _, fp in before] == [fp for _, fp in shifted] == [fp for _, fp in crlf]


def test_different_findings_get_different_fingerprints_and_identical_ones_are_counted(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    twice = HEAD + "活动时间是周四16:00 🎉[^1]。又是周四16:00 🎉[^2]。\n\n" + \
        f'[^1]: schedule@2:7 sha256:{HEX} "- 活动时间：周四16:00 🎉"\n' + \
        f'[^2]: schedule@2:7 sha256:{HEX} "- 活动时间：周四16:00 🎉"\n'
    write(pipeline_root, {"answers/a.md": twice, "answers/b.md": HEAD + BODY})
    results = sarif(capsys, pipeline_root)
    fps = [r["partialFingerprints"][FINGERPRINT_KEY] for r in results]
    assert len(fps) == len(set(fps))
    a = [fp for r, fp in zip(results, fps, strict=True) if r["ruleId"] == "GR103"
         and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "answers/a.md"]
    assert [fp.split(":")[1] for fp in a] == ["0", "1"] and a[0].split(":")[0] == a[1].split(":")[0]


def test_the_sarif_log_with_fingerprints_validates_against_the_schema(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    write(pipeline_root, {"answers/a.md": HEAD + BODY})
    _, out, _ = check(capsys, pipeline_root, "--format", "sarif")
    schema = json.loads((REPO / "tests" / "fixtures" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(json.loads(out))


@pytest.mark.parametrize("fmt", ["sarif", "json"])
def test_a_baseline_hides_known_findings_even_after_lines_shift_and_reports_new_ones(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path, fmt: str) -> None:
    write(pipeline_root, {"answers/old.md": HEAD + BODY})
    code, out, _ = check(capsys, pipeline_root, "--format", fmt)
    assert code == 1
    baseline = pipeline_root / f"baseline.{fmt}"
    baseline.write_text(out, encoding="utf-8")

    write(pipeline_root, {"answers/old.md": HEAD + "补充一句话。\n\n" + BODY})  # same finding, two lines lower
    code, out, err = check(capsys, pipeline_root, "--baseline", str(baseline))
    assert code == 0, out
    assert "GR103" not in out and "known finding(s) not reported" in err

    stale = HEAD.replace("schedule@2", "schedule@1") + "活动时间是周三16:30[^1]。\n\n" + \
        f'[^1]: schedule@1:5 sha256:{claim("schedule", 1, 5)["sha256"][:12]} "- 活动时间：周三16:30"\n'
    write(pipeline_root, {"answers/new.md": stale})
    code, out, _ = check(capsys, pipeline_root, "--baseline", str(baseline), "--format", "json")
    report = json.loads(out)
    assert code == 1
    by_path = {d["path"]: [x["name"] for x in d["diagnostics"]] for d in report["drafts"]}
    assert by_path["answers/old.md"] == []
    assert "stale-citation" in by_path["answers/new.md"]
    assert all(x["fingerprint"] for d in report["drafts"] for x in d["diagnostics"])


def test_a_fixed_finding_leaves_the_baseline_and_a_reintroduced_one_is_still_known(
        capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    write(pipeline_root, {"answers/a.md": HEAD + BODY})
    _, out, _ = check(capsys, pipeline_root, "--format", "sarif")
    (pipeline_root / "base.sarif").write_text(out, encoding="utf-8")
    fixed = BODY.replace("16:00", "16:30")
    write(pipeline_root, {"answers/a.md": HEAD + fixed})
    code, _, err = check(capsys, pipeline_root, "--baseline", str(pipeline_root / "base.sarif"))
    assert code == 0 and "0 known finding(s) not reported" in err


@pytest.mark.parametrize(("content", "why"), [
    ("not json", "not a JSON or SARIF report"),
    ('{"something": 1}', "expected a report"),
    ('{"drafts": [{"path": "a.md", "diagnostics": [{"code": "GR103"}]}]}', "no Grounding fingerprints"),
])
def test_a_bad_baseline_is_a_usage_error(capsys: pytest.CaptureFixture[str], pipeline_root: Path,
                                         content: str, why: str) -> None:
    (pipeline_root / "base.json").write_text(content, encoding="utf-8")
    code, _, err = check(capsys, pipeline_root, "--baseline", str(pipeline_root / "base.json"))
    assert code == 2 and why in err


def test_a_missing_baseline_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], pipeline_root: Path) -> None:
    code, _, err = check(capsys, pipeline_root, "--baseline", str(pipeline_root / "nope.sarif"))
    assert code == 2 and "nope.sarif" in err
