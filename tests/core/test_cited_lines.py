"""A claim reads its cited line, not its whole version (SPEC §3 lines, §7.1; issue 10's first check).

``grounding_core.text.line_is`` confirms that line N of a version's UTF-8 bytes is the quote
without decoding or splitting the text; ``SqlSnapshot.line_text`` uses it and caches the line.
These tests hold it to :func:`~grounding_core.text.split_lines` on CJK, astral-plane emoji,
CRLF, CR-only and U+2028 text, and show that a first check in a fresh process parses no
document for valid claims while every finding (wrong-line fixes, quote fixes, hash mismatches,
conflicts) stays what a check over parsed documents gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import MakeWorkspace, check, sha256

from grounding_core.model import DraftReport
from grounding_core.text import line_is, split_lines
from grounding_core.workspace import Workspace

PIECES = ["\r\n", "\r", "\n", "a", "ab", "活动", "：", "𠮷", "🎉", "\u2028", "\u0085", " ", "-"]


@given(st.lists(st.sampled_from(PIECES), max_size=30))
@settings(max_examples=400, deadline=None)
def test_line_is_agrees_with_split_lines(pieces: list[str]) -> None:
    text = "".join(pieces)
    lines = split_lines(text)
    data = text.encode("utf-8")
    wanted = {line for line in lines if line} | {"a", "ab", "活动", "🎉"}
    for number in range(0, len(lines) + 2):
        for want in wanted:
            expected = 0 < number <= len(lines) and lines[number - 1] == want
            assert line_is(data, number, want.encode("utf-8")) is expected, (text, number, want)


def test_line_is_on_cjk_emoji_and_crlf() -> None:
    text = "- 地点：三楼报告厅 🎉\r\n- 地点：三楼\r\n\r\n- 地点：三楼\r- 𠮷：第一段\u2028第二段\n末行"
    data = text.encode("utf-8")
    assert line_is(data, 1, "- 地点：三楼报告厅 🎉".encode())
    # a prefix of line 1 is not line 1; the same text twice is found at each of its lines
    assert not line_is(data, 1, "- 地点：三楼".encode())
    assert line_is(data, 2, "- 地点：三楼".encode()) and line_is(data, 4, "- 地点：三楼".encode())
    assert not line_is(data, 3, "- 地点：三楼".encode())
    assert line_is(data, 5, "- 𠮷：第一段\u2028第二段".encode())  # U+2028 stays inside its line
    assert line_is(data, 6, "末行".encode())  # the last line has no terminator
    assert not line_is(data, 7, "末行".encode())
    assert not line_is(data, 3, b"")  # an empty quote is left to the parsed lines
    with pytest.raises(ValueError):
        line_is(data, 1, "- 地点\r\n".encode())


def test_line_is_gives_up_after_its_limit_of_occurrences() -> None:
    data = ("x\n" * 50 + "y\n").encode()
    assert line_is(data, 50, b"x")
    assert not line_is(data, 50, b"x", limit=10)  # undecided: the caller reads the lines
    assert line_is(data, 51, b"y", limit=1)


SCHEDULE = ("---\r\ndoc_id: schedule\r\nversion: 2\r\n---\r\n主题：开放日🎉\r\n"
            "- 地点：三楼报告厅 🎉\r\n- 地点：三楼\r\n- 备注：同上 𠮷\r\n- 活动时间：周四16:30\r\n- 备注：同上 𠮷\r\n")
OLD = "主题：开放日🎉\r- 费用：免费\r- 说明：第一段\u2028第二段\r"
OTHER = "主题：开放日🎉\n- 地点：二楼\n"


def cite(doc: str, line: int, content: str, quote: str, label: str, digest: str | None = None) -> str:
    version = 2 if doc == "schedule" else 1
    return f'[^{label}]: {doc}@{version}:{line} sha256:{digest or sha256(content)[:12]} "{quote}"\r\n'


DRAFT = (
    "---\r\nfields: [地点, 备注, 费用]\r\ncontext: {units: [\"schedule@2\", \"old@1\", \"other@1\"]}\r\n---\r\n"
    "地点是三楼报告厅 🎉[^1]。备注：同上 𠮷[^2]。费用：免费[^3]。地点是三楼[^4]。备注：同上 𠮷[^5]。"
    "说明：第一段\u2028第二段[^6]。费用：免费[^7]。\r\n\r\n"
    + cite("schedule", 6, SCHEDULE, "- 地点：三楼报告厅 🎉", "1")
    + cite("schedule", 10, SCHEDULE, "- 备注：同上 𠮷", "2")  # the second of two equal lines
    + cite("old", 2, OLD, "- 费用：免费", "3")  # CR-only line ends
    + cite("schedule", 6, SCHEDULE, "- 地点：三楼", "4")  # wrong line: the quote is line 7
    + cite("schedule", 8, SCHEDULE, "- 备注：同上", "5")  # a part of the line: the quote fix
    + cite("old", 3, OLD, "- 说明：第一段\u2028第二段", "6")
    + cite("old", 2, OLD, "- 费用：免费", "7", digest="0123456789ab")  # hash mismatch
)


def fresh(root: Path) -> Workspace:
    """The workspace opened again, as a new process would: empty caches, nothing to import."""
    ws = Workspace.open(root)
    assert ws.scan().changed == []
    return ws


def shown(report: DraftReport) -> list[tuple[object, ...]]:
    return [(f.name, f.span, f.message, f.hint, f.citation, tuple(f.related), f.fix) for f in report.findings]


def test_first_check_reads_cited_lines_only_and_finds_the_same(make_workspace: MakeWorkspace) -> None:
    built = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/old.md": OLD,
                            "evidence/other.md": OTHER, "answers/a.md": DRAFT})
    root = built.config.root
    built.store.close()

    lines_only = fresh(root)
    try:
        report = check(lines_only, "answers/a.md")
        # schedule: two quotes are not their cited lines (the wrong-line and quote fixes look
        # through the version); old: the hash mismatch's re-anchor looks for the line in it. The
        # other.md version no claim cites wrongly is never parsed; valid claims read one line each
        assert len(lines_only.store.documents) == 2
        again = check(lines_only, "answers/a.md")  # from the line cache
        assert shown(again) == shown(report)
    finally:
        lines_only.store.close()

    parsed = fresh(root)
    try:
        snapshot = parsed.store.snapshot()
        for doc_id in ("schedule", "old", "other"):
            record = snapshot.newest(doc_id)
            assert record is not None
            snapshot.document(record)  # every version parsed and cached before the check
        expected = check(parsed, "answers/a.md")
    finally:
        parsed.store.close()

    assert shown(report) == shown(expected)
    by_citation = {f.citation: f for f in report.findings if f.name in ("quote-mismatch", "hash-mismatch")}
    assert by_citation["schedule@2:6"].fix is not None and "Cite line 7" in by_citation["schedule@2:6"].fix.title
    assert by_citation["schedule@2:8"].fix is not None and "Replace the quote" in by_citation["schedule@2:8"].fix.title
    assert [f.name for f in report.findings if f.citation == "old@1:2"] == ["hash-mismatch"]
    conflicts = [f for f in report.findings if f.name == "field-conflict"]
    assert conflicts and all(f.related for f in conflicts)  # 地点: 三楼报告厅 🎉 vs 三楼 vs 二楼
    valid = {c["id"] for c in report.wire_claims}
    assert {"schedule@2:6", "schedule@2:10", "old@1:2", "old@1:3"} <= valid


def test_valid_claims_parse_no_document(make_workspace: MakeWorkspace) -> None:
    valid = (
        "---\r\nfields: [地点, 备注]\r\ncontext: {units: [\"schedule@2\", \"old@1\"]}\r\n---\r\n"
        "地点是三楼报告厅 🎉[^1]。备注：同上 𠮷[^2]。费用：免费[^3]。说明：第一段\u2028第二段[^6]。\r\n\r\n"
        + cite("schedule", 6, SCHEDULE, "- 地点：三楼报告厅 🎉", "1")
        + cite("schedule", 10, SCHEDULE, "- 备注：同上 𠮷", "2")
        + cite("old", 2, OLD, "- 费用：免费", "3")
        + cite("old", 3, OLD, "- 说明：第一段\u2028第二段", "6")
    )
    built = make_workspace({"evidence/schedule.md": SCHEDULE, "evidence/old.md": OLD,
                            "evidence/other.md": OTHER, "answers/a.md": valid})
    root = built.config.root
    expected = check(built, "answers/a.md")  # the scan's parsed documents are cached here
    built.store.close()
    ws = fresh(root)
    try:
        report = check(ws, "answers/a.md")
        assert len(ws.store.documents) == 0  # four cited lines read, no version parsed
        assert shown(report) == shown(expected)
        assert [c["id"] for c in report.wire_claims] == ["schedule@2:6", "schedule@2:10", "old@1:2", "old@1:3"]
        assert [f.name for f in report.findings if f.name == "field-conflict"] == ["field-conflict", "field-conflict"]
    finally:
        ws.store.close()
