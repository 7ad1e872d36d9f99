"""Fixtures of the pipeline suite: one CJK/emoji/CRLF workspace and helpers to build answers.

``pipeline_root`` writes the workspace below into ``tmp_path`` (bytes exactly as given, so the
CRLF file keeps its line ends). Documents (lines are 1-based, front matter included):

- ``evidence/schedule.md`` (CRLF): ``schedule@2``, subject 开放日: 7 ``- 活动时间：周四16:30 🎉``,
  8 ``- 地点：三楼报告厅𠮷``, 9 blank, 10 ``- 版本说明：第2版改了时间`` (a meta field);
- ``evidence/archive/schedule-v1.md``: ``schedule@1`` (superseded): 5 ``- 活动时间：周三16:30``;
- ``evidence/refund.md``: ``refund@1`` (no front matter, doc_id from the path): 1 ``# 退款说明``,
  2 ``- 退款方式：原路退回``, 3 ``- 退款到账时间：审核通过后3个工作日内``;
- ``evidence/gym.md`` / ``evidence/gym-notice.md``: subject 体育馆, ``开放时间`` 8:00-22:00 vs
  9:00-21:00 (a same-field conflict);
- ``evidence/old.md``: revoked (``status: revoked``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grounding import Verifier

TODAY = "2026-05-01"
SCHEDULE = ("---\r\ndoc_id: schedule\r\nversion: 2\r\ntitle: 秋季开放日通知\r\nsubject: 开放日\r\n---\r\n"
            "- 活动时间：周四16:30 🎉\r\n- 地点：三楼报告厅𠮷\r\n\r\n- 版本说明：第2版改了时间\r\n")
SCHEDULE_V1 = "---\ndoc_id: schedule\nversion: 1\nsubject: 开放日\n---\n- 活动时间：周三16:30\n"
REFUND = "# 退款说明\n- 退款方式：原路退回\n- 退款到账时间：审核通过后3个工作日内\n"
GYM = "---\nsubject: 体育馆\n---\n- 开放时间：8:00-22:00\n"
GYM_NOTICE = "---\nsubject: 体育馆\n---\n- 开放时间：9:00-21:00\n"
OLD = "---\ndoc_id: old\nstatus: revoked\n---\n- 活动时间：周一9:00\n"
FILES: dict[str, str] = {
    "grounding.toml": f'today = "{TODAY}"\n',
    "evidence/schedule.md": SCHEDULE,
    "evidence/archive/schedule-v1.md": SCHEDULE_V1,
    "evidence/refund.md": REFUND,
    "evidence/gym.md": GYM,
    "evidence/gym-notice.md": GYM_NOTICE,
    "evidence/old.md": OLD,
}
CONTENT = {"schedule": {2: SCHEDULE, 1: SCHEDULE_V1}, "refund": {1: REFUND}, "gym": {1: GYM},
           "gym-notice": {1: GYM_NOTICE}, "old": {1: OLD}}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))


def sha(doc_id: str, version: int = 1) -> str:
    return hashlib.sha256(CONTENT[doc_id][version].encode("utf-8")).hexdigest()


def line_of(doc_id: str, version: int, line: int) -> str:
    return CONTENT[doc_id][version].replace("\r\n", "\n").split("\n")[line - 1]


def claim(doc_id: str, version: int, line: int, quote: str | None = None) -> dict[str, Any]:
    """A §5.2 claim of that line (its real quote unless ``quote`` forges one; text/field derived)."""
    quote = quote if quote is not None else line_of(doc_id, version, line)
    text = quote[2:] if quote.startswith("- ") else quote
    return {"text": text, "quote": quote, "id": f"{doc_id}@{version}:{line}", "doc_id": doc_id,
            "version": version, "line": line, "sha256": sha(doc_id, version), "field": text.split("：")[0]}


def answer(*claims: dict[str, Any], fields: list[str] | None = None, status: str = "answered",
           missing: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"status": status, "claims": list(claims), "missing_fields": missing or []}
    if fields is not None:
        out["fields"] = fields
    return out


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1)


@pytest.fixture
def pipeline_root(tmp_path: Path) -> Path:
    write(tmp_path, FILES)
    return tmp_path


@pytest.fixture
def verifier(pipeline_root: Path) -> Iterator[Verifier]:
    with Verifier(pipeline_root) as v:
        yield v
