"""The editor's rendering of GR108 (field-conflict) findings, in-process (SPEC §7.4, §15;
docs/decisions.md "GR108 in the editor"): ``server.render.conflicts`` on the findings of a real
check of a real index, then ``server.convert.lsp_diagnostics`` as the server publishes them.

The key (开放日, 活动时间) has 25 distinct values: ``周四16:30`` (written ``周四１６：３０`` in a
CRLF file too: full-width digits and colon agree after NFKC) and 24 values with an astral CJK
character and an emoji (``𠮷野家🎉第N场``); one of them has a second source. The CLI's message
names all 25; the editor's names 20.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from grounding_core.check import check_text
from grounding_core.evidence_findings import ConflictCache, file_findings
from grounding_core.model import Finding
from grounding_core.workspace import Workspace
from server.convert import MAX_RELATED, SAME_CONFLICT, lsp_diagnostics
from server.positions import PositionCodec
from server.render.conflicts import (
    MAX_VALUES_NAMED,
    NO_SIDE,
    conflict_message,
    editor_conflicts,
    evidence_conflicts,
    ordered_values,
)
from tests.support.workspace import build_workspace, sha256

TODAY = dt.date(2026, 6, 1)
KEY = "---\ndoc_id: {doc}\nsubject: 开放日\n---\n- 活动时间：{value}\n"


def value(n: int) -> str:
    return "周四16:30" if n == 0 else f"𠮷野家🎉第{n}场"


def evidence(values: int) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"evidence/v{n:02d}.md": KEY.format(doc=f"v{n:02d}", value=value(n))
                                     for n in range(values)}
    files["evidence/zfull.md"] = KEY.format(doc="zfull", value="周四１６：３０").replace("\n", "\r\n")
    files[f"evidence/w{values - 1:02d}.md"] = KEY.format(doc=f"w{values - 1:02d}", value=value(values - 1))
    return files


FILES = evidence(25)


def cite(label: int, doc: str, text: str) -> str:
    return f'[^{label}]: {doc}@1:5 sha256:{sha256(FILES[f"evidence/{doc}.md"])[:12]} "- 活动时间：{text}"'


DRAFT = "\n".join([
    "活动时间是𠮷野家🎉第3场[^1]。",
    "活动时间是𠮷野家🎉第7场[^2]。",
    "活动时间是周四16:30[^3]。",
    "",
    cite(1, "v03", value(3)),
    cite(2, "v07", value(7)),
    cite(3, "zfull", "周四１６：３０"),
]) + "\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    root = build_workspace(tmp_path, {"grounding.toml": 'today = "2026-06-01"\n', **FILES})
    ws = Workspace.open(root)
    ws.scan()
    yield ws
    ws.store.close()


def conflicts_of(ws: Workspace, text: str) -> list[Finding]:
    report = check_text(text, "answers/a.md", ws.store.snapshot(), ws.config, TODAY, ws.read_text).report
    return [f for f in report.findings if f.name == "field-conflict"]


def test_a_key_with_25_values_names_20_the_cited_ones_first(workspace: Workspace) -> None:
    findings = conflicts_of(workspace, DRAFT)
    assert len(findings) == 3
    core = findings[0].message  # the CLI's (SPEC §7.4): every value
    assert all(f"'{value(n)}'" in core for n in range(1, 25)) and "'周四16:30' (2 sources)" in core
    shown = [r.finding for r in editor_conflicts(findings)]
    message = shown[0].message
    assert {r.message for r in shown} == {message}  # one message per key
    assert findings[2].conflict is not None and conflict_message(findings[2], findings[2].conflict) == message
    assert message.startswith("active sources disagree on '活动时间' for subject '开放日': "
                              f"'{value(3)}' (1 source) vs '{value(7)}' (1 source) vs '周四16:30' (2 sources)"
                              f" vs '{value(1)}' (1 source) vs '{value(2)}' (1 source) vs '{value(4)}'")
    named = [n for n in range(25) if f"'{value(n)}'" in message]
    assert len(named) == MAX_VALUES_NAMED
    assert named == [0, 1, 2, 3, *range(4, 20)]  # 20..24 left out (in core order, first source)
    assert message.endswith(" and 5 more values (6 sources); `grounding conflicts` lists every source" + NO_SIDE)


def test_the_first_diagnostic_lists_the_sources_and_later_ones_point_at_it(workspace: Workspace) -> None:
    findings = conflicts_of(workspace, DRAFT)
    shown = editor_conflicts(findings)
    first, second, third = shown
    assert first.first is None
    assert [(loc.path, loc.line) for loc in first.finding.related[:4]] == [
        ("evidence/v03.md", 5), ("evidence/v07.md", 5), ("evidence/zfull.md", 5), ("evidence/v01.md", 5)]
    # one source per named value: 周四16:30's is the cited zfull (not v00 beside it); 20..24 are not named
    assert {loc.path for loc in first.finding.related} == {
        *(f"evidence/v{n:02d}.md" for n in range(1, 20)), "evidence/zfull.md"}
    assert first.finding.related[2].message == "活动时间：周四１６：３０"
    assert second.first == third.first == findings[0].span
    assert [(loc.path, loc.line) for loc in second.finding.related] == [("evidence/v07.md", 5)]
    assert [(loc.path, loc.line) for loc in third.finding.related] == [("evidence/zfull.md", 5)]

    lines = DRAFT.split("\n")[:-1]
    for encoding in ("utf-16", "utf-8"):
        codec = PositionCodec(encoding)
        diagnostics = lsp_diagnostics(findings, lines, codec, lambda rel: f"file:///ws/{rel}",
                                      lambda rel: (), locations={}, related_lists={}, uri="file:///ws/answers/a.md")
        head = diagnostics[0]
        assert len(head.related_information or ()) == 20
        for later, own in ((diagnostics[1], "v07.md"), (diagnostics[2], "zfull.md")):
            mine, pointer = later.related_information or ()
            assert mine.location.uri == f"file:///ws/evidence/{own}"
            assert pointer.location == types.Location(uri="file:///ws/answers/a.md", range=head.range)
            assert pointer.message == SAME_CONFLICT.format(line=5)


def test_the_cli_message_and_every_source_stay_for_the_core(workspace: Workspace) -> None:
    findings = conflicts_of(workspace, DRAFT)
    # the core's related list: 5 per value, cited first (SPEC §7.4, §15), all 25 values
    assert len(findings[1].related) == 27
    assert findings[1].conflict is not None and len(findings[1].conflict.summary.values) == 25
    assert [g.count for g in ordered_values(findings[0].conflict.summary, findings[0].conflict.cited)][:3] == [
        1, 1, 2]


def test_twenty_values_keep_the_core_message_and_the_cap(tmp_path: Path) -> None:
    root = build_workspace(tmp_path, {"grounding.toml": 'today = "2026-06-01"\n', **evidence(20)})
    ws = Workspace.open(root)
    try:
        ws.scan()
        findings = conflicts_of(ws, DRAFT)
    finally:
        ws.store.close()
    shown = [r.finding for r in editor_conflicts(findings)]
    assert [f.message for f in shown] == [f.message for f in findings]  # exactly the core's text
    assert "more values" not in shown[0].message
    assert len(shown[0].related) == 20 <= MAX_RELATED  # one per value: 周四16:30's is the cited zfull, not v00


def test_the_fields_item_comes_first_and_a_crlf_draft_converts(workspace: Workspace) -> None:
    text = ("---\r\nquestion: 活动什么时候？\r\nfields: [活动时间]\r\n---\r\n"
            + DRAFT.replace("\n", "\r\n"))
    findings = conflicts_of(workspace, text)
    assert len(findings) == 4 and findings[0].citation is None  # the fields item, then the definitions
    shown = editor_conflicts(findings)
    assert shown[0].first is None and len(shown[0].finding.related) == 20
    assert all(r.first == findings[0].span for r in shown[1:])
    assert [[loc.path for loc in r.finding.related] for r in shown[1:]] == [
        ["evidence/v03.md"], ["evidence/v07.md"], ["evidence/zfull.md"]]
    lines = text.split("\r\n")[:-1]
    diagnostics = lsp_diagnostics(findings, lines, PositionCodec("utf-16"), lambda rel: f"file:///ws/{rel}",
                                  lambda rel: (), uri="file:///ws/answers/a.md")
    assert diagnostics[0].range.start.line == 2
    assert all((d.related_information or [])[-1].message == SAME_CONFLICT.format(line=3) for d in diagnostics[1:])


def test_without_the_draft_uri_findings_convert_as_the_core_gives_them(workspace: Workspace) -> None:
    findings = conflicts_of(workspace, DRAFT)
    diagnostics = lsp_diagnostics(findings, DRAFT.split("\n"), PositionCodec(), lambda rel: f"file:///ws/{rel}",
                                  lambda rel: ())
    assert [d.message.split("\n")[0] for d in diagnostics] == [f.message for f in findings]
    assert [len(d.related_information or ()) for d in diagnostics] == [27, 27, 27]


def test_an_evidence_file_lists_a_keys_sources_on_its_first_line_and_later_lines_point_there(tmp_path: Path) -> None:
    lines = ["- 活动时间：𠮷野家🎉第1场", "- 备注：无", "- 活动时间：周四１６：３０", "- 活动时间：𠮷野家🎉第2场"]
    files = {**FILES, "evidence/many.md": "---\r\ndoc_id: many\r\nsubject: 开放日\r\n---\r\n"
             + "".join(f"{line}\r\n" for line in lines)}
    root = build_workspace(tmp_path, {"grounding.toml": 'today = "2026-06-01"\n', **files})
    ws = Workspace.open(root)
    try:
        ws.scan()
        snapshot = ws.store.snapshot()
        cache = ConflictCache(snapshot, TODAY, ws.config.evidence_display)
        findings = file_findings("many.md", (), cache)
        assert [f.span.start_line for f in findings] == [4, 6, 7]
        shown = evidence_conflicts(findings)
        assert shown[0].finding is findings[0] and shown[0].first is None  # keeps its related sources
        assert [s.finding.related for s in shown[1:]] == [(), ()]
        assert [s.first for s in shown[1:]] == [findings[0].span, findings[0].span]
        assert [s.finding.message for s in shown] == [f.message for f in findings]  # messages unchanged
        record = snapshot.record_for_path("many.md")
        assert record is not None
        uri = "file:///ws/evidence/many.md"
        diagnostics = lsp_diagnostics(findings, snapshot.document(record).lines, PositionCodec(),
                                      lambda rel: f"file:///ws/{rel}", lambda rel: (), uri=uri, evidence=True)
        assert len(diagnostics[0].related_information or ()) == len(findings[0].related) == 5
        for later in diagnostics[1:]:
            (pointer,) = later.related_information or ()
            assert pointer.location.uri == uri and pointer.location.range.start.line == 4
            assert pointer.message == SAME_CONFLICT.format(line=5)
        plain = lsp_diagnostics(findings, snapshot.document(record).lines, PositionCodec(),
                                lambda rel: f"file:///ws/{rel}", lambda rel: ())
        assert [len(d.related_information or ()) for d in plain] == [5, 5, 5]  # without: each its own
    finally:
        ws.store.close()
