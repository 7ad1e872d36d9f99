"""A field separator between two digits is a time or a ratio, not the end of a field name
(docs/decisions.md "Field lines"; tryout5 #1): CJK timetables with ``:`` configured beside
``：``, full-width digits, emoji and CRLF files, through the parser and the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import sha256, write_files

from grounding import cli
from grounding_core.evidence import parse_field_line

SEPARATORS = ["：", ":"]


@pytest.mark.parametrize(("line", "field", "value"), [
    ("- 08:30 签到：主楼", "08:30 签到", "主楼"),
    ("1. 16：30 开始：礼堂 🎉", "16：30 开始", "礼堂 🎉"),
    ("１６：３０ 散场：正门", "１６：３０ 散场", "正门"),
    ("- 活动时间：周四16:30", "活动时间", "周四16:30"),
    ("- 比例:3:1", "比例", "3:1"),
    ("Check-in: 08:30", "Check-in", "08:30"),
    ("- 时间：9:30–16:00\r", "时间", "9:30–16:00"),
])
def test_the_first_separator_not_between_digits_ends_the_field(line: str, field: str, value: str) -> None:
    parsed = parse_field_line(line, SEPARATORS)
    assert parsed is not None
    assert (parsed.field, parsed.value) == (field, value)


@pytest.mark.parametrize("line", ["开始时间 9:30", "- 3:1 比例", "- 12：00"])
def test_a_line_whose_only_separators_sit_between_digits_is_no_field_line(line: str) -> None:
    assert parse_field_line(line, SEPARATORS) is None


def test_two_timetables_do_not_conflict_on_their_times(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sched = "- 主题：日程\r\n- 08:30 签到：主楼 🙂\r\n"
    write_files(tmp_path, {
        "grounding.toml": 'today = "2026-12-02"\nfield_separators = ["：", ":"]\n',
        "evidence/sched.md": sched,
        "evidence/sched2.md": "- 主题：日程\n- 08:00 早餐：食堂\n",
        "answers/a.md": ("---\nfields: [08:30 签到]\n---\n签到在主楼 🙂[^1]。\n\n"
                         f'[^1]: sched@1:2 sha256:{sha256(sched)[:12]} "- 08:30 签到：主楼 🙂"\n'),
    })
    code = cli.main(["check", "--root", str(tmp_path), "--format", "json", "answers/a.md"])
    report = json.loads(capsys.readouterr().out)
    (draft,) = report["drafts"]
    names = [f["name"] for f in draft["diagnostics"]]
    assert "field-conflict" not in names, draft["diagnostics"]
    assert draft["status"] == "answered", draft["diagnostics"]
    assert code == 0
    assert cli.main(["conflicts", "--root", str(tmp_path)]) == 0
    assert "'08'" not in capsys.readouterr().out
