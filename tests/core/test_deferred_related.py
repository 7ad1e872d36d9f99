"""A conflict's related sources are made when first read (SPEC §7.4; ``DeferredLocations``).

A GR108 finding lists up to 5 sources per value (the draft's cited ones first, then by
(doc_id, version, line)); with thousands of values that is thousands of locations, which text
output never prints. These tests show that a check and its text output make none of them, that
JSON, SARIF and the editor's rendering still get every one (the same list as before, in the
same order), and that a finding holding them equals one holding their tuple. Evidence is CJK
with astral-plane emoji and CRLF line ends.
"""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from support import TODAY, MakeWorkspace, check, sha256

from grounding import cli
from grounding.cli import print_text
from grounding.cli.sarif import artifact_uri
from grounding.report import report_json
from grounding_core.conflicts import source_id
from grounding_core.model import DeferredLocations, Finding, Location, Span
from grounding_core.workspace import Workspace

VALUES = [f"周{n}16:30 🎉" for n in "一二三四五六日"] + ["𠮷野家", "三楼 报告厅"]


def evidence(n: int, value: str) -> str:
    return f"---\r\ndoc_id: t/{n:02d}\r\n---\r\n主题：开放日\r\n- 集合时间：{value}\r\n"


def files() -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {}
    for n in range(40):  # 9 values, 4-5 sources each: more than 5 for none, so all are listed
        out[f"evidence/t/{n:02d}.md"] = evidence(n, VALUES[n % len(VALUES)])
    for n in range(40, 52):  # 12 more sources of the first value: only 5 of its 17 are listed
        out[f"evidence/t/{n:02d}.md"] = evidence(n, VALUES[0])
    cited = evidence(7, VALUES[7])
    out["answers/t.md"] = (
        "---\r\nsubject: 开放日\r\nfields: [集合时间]\r\n---\r\n"
        f"集合时间是{VALUES[7]}[^1]。\r\n\r\n"
        f'[^1]: t/07@1:5 sha256:{sha256(cited)[:12]} "- 集合时间：{VALUES[7]}"\r\n')
    return out


@pytest.fixture
def times(make_workspace: MakeWorkspace) -> Workspace:
    return make_workspace(files())


def conflicts(ws: Workspace) -> list[Finding]:
    return [f for f in check(ws, "answers/t.md").findings if f.name == "field-conflict"]


def expected_related(ws: Workspace) -> list[tuple[str, int, str]]:
    """SPEC §7.4 read from the snapshot directly: per value, up to 5 sources, the cited first."""
    summary = ws.store.snapshot().key_summary(("开放日", "集合时间"), TODAY, [("t/07", 1, 5)])
    return [(f"evidence/t/{kl.doc_id[2:]}.md", kl.line, f"{kl.field}：{kl.value}")
            for group in summary.values for kl in group.sources]


def test_a_check_and_its_text_output_make_no_related_location(times: Workspace) -> None:
    found = conflicts(times)
    assert len(found) == 2  # the fields item and the definition citing the key
    assert all(isinstance(f.related, DeferredLocations) and not f.related.made for f in found)
    assert len(found[0].related) == 4 * 5 + 5 * 4  # len is known before anything is made
    report = check(times, "answers/t.md")
    out = io.StringIO()
    with redirect_stdout(out):
        print_text([report], {})
    assert "field-conflict" in out.getvalue()
    assert not any(f.related.made for f in report.findings if isinstance(f.related, DeferredLocations))


def test_json_output_carries_every_related_source(times: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    want = expected_related(times)
    assert len(want) == 40
    mine = [w for w in want if w[2] == f"集合时间：{VALUES[7]}"]
    assert mine[0] == ("evidence/t/07.md", 5, f"集合时间：{VALUES[7]}") and len(mine) == 4  # the cited source first
    code = cli.main(["check", "--root", str(times.config.root), "--format", "json", "answers/t.md"])
    assert code == 1
    out = json.loads(capsys.readouterr().out)
    diagnostics = [d for d in out["drafts"][0]["diagnostics"] if d["name"] == "field-conflict"]
    assert len(diagnostics) == 2
    for d in diagnostics:
        assert [(r["path"], r["line"], r["message"]) for r in d["related"]] == want
    # the same JSON as from the report with each finding's related locations as a tuple
    report = check(times, "answers/t.md")
    plain = [dataclasses.replace(f, related=tuple(f.related)) for f in report.findings]
    assert report_json([report], {}) == report_json([dataclasses.replace(report, findings=plain)], {})


def test_sarif_output_lists_the_same_related_locations(times: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    want = expected_related(times)
    cli.main(["check", "--root", str(times.config.root), "--format", "sarif", "answers/t.md"])
    sarif = json.loads(capsys.readouterr().out)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "GR108"]
    assert len(results) == 2
    for r in results:
        got = [(x["physicalLocation"]["artifactLocation"]["uri"], x["physicalLocation"]["region"]["startLine"],
                x["message"]["text"]) for x in r["relatedLocations"]]
        assert got == [(artifact_uri(path), line, text) for path, line, text in want]


def test_deferred_locations_behave_as_their_tuple() -> None:
    made: list[int] = []
    items = (Location("evidence/a.md", 5, "集合时间：周四 🎉"), Location("evidence/b.md", 2, "𠮷：1"))

    def make() -> tuple[Location, ...]:
        made.append(1)
        return items

    deferred = DeferredLocations(2, make)
    assert len(deferred) == 2 and bool(deferred) and not deferred.made and not made
    assert deferred == items and items == deferred and hash(deferred) == hash(items)
    assert deferred[1] == items[1] and deferred[:1] == items[:1] and list(deferred) == list(items)
    assert items[0] in deferred and made == [1]  # made once, on first read
    span = Span(3, 0, 3, 10)
    assert Finding("field-conflict", span, "m", related=deferred) == Finding("field-conflict", span, "m", related=items)
    assert DeferredLocations(0, tuple) == () and not DeferredLocations(0, tuple)
    wrong = DeferredLocations(3, make)
    with pytest.raises(ValueError):
        wrong.items()


def test_the_source_ids_of_deferred_locations_follow_the_summary(times: Workspace) -> None:
    finding = conflicts(times)[0]
    assert finding.conflict is not None
    listed = [kl for group in finding.conflict.summary.values for kl in group.sources]
    assert [(r.line, r.message) for r in finding.related] == [(kl.line, f"{kl.field}：{kl.value}") for kl in listed]
    assert [source_id(kl) for kl in listed[:5]] == [f"t/{n:02d}@1:5" for n in (0, 9, 18, 27, 36)]
    assert [source_id(kl) for kl in listed if kl.value == VALUES[7]][0] == "t/07@1:5"  # cited first


def test_the_console_script_sets_the_collector_and_main_does_not() -> None:
    probe = ("import gc, sys\n"
             "from grounding import cli\n"
             "before = gc.get_threshold()[0]\n"
             "cli.main(['schema', 'answer'])\n"
             "inprocess = (gc.get_threshold()[0], gc.get_freeze_count())\n"
             "sys.argv = ['grounding', 'schema', 'answer']\n"
             "cli.run()\n"
             "print(before, *inprocess, gc.get_threshold()[0], gc.get_freeze_count() > 0, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    before, inprocess_threshold, inprocess_frozen, threshold, frozen = done.stderr.split()
    assert before == inprocess_threshold == "700" and inprocess_frozen == "0"  # main(argv) changes nothing
    assert threshold == "100000" and frozen == "True"
