"""``grounding context`` and ``grounding answer`` on an index that cannot be written (a full
disk; here a file size limit, ``ulimit -f``) read it as last committed, like ``grounding
check``: a warning on stderr names the cause, the output is the usual one and the exit code
is the command's own (0 for an answer), never 2, which is for usage errors (README
"Commands"; docs/decisions.md, "Index"). The draft and question are CJK with emoji.
"""

from __future__ import annotations

import json
from pathlib import Path

from .test_hardening_unwritable_index import crowded, events, limited

QUERY_DRAFT = ("---\nquestion: 活动什么时候开始？🎉\ncontext: {query: 活动时间, limit: 1500, reserve: 240}\n---\n"
               "活动时间是周四16:30。\r\n")


def test_context_on_a_full_disk_reads_the_committed_state(tmp_path: Path) -> None:
    ws = crowded(tmp_path)
    (ws / "answers/q.md").write_text(QUERY_DRAFT, encoding="utf-8", newline="")
    before = events(ws)
    proc = limited(ws, "context", "answers/q.md", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "cannot write the index" in proc.stderr and "checking against the index as last committed" in proc.stderr
    summary = json.loads(proc.stdout)
    assert [u["unit"] for u in summary["kept"]] == ["schedule@1:5-8"]
    assert events(ws) == before


def test_answer_on_a_full_disk_answers_from_the_committed_state(tmp_path: Path) -> None:
    ws = crowded(tmp_path)
    before = events(ws)
    proc = limited(ws, "answer", "--question", "活动时间是什么时候？", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "cannot write the index" in proc.stderr and "as last committed (1 events)" in proc.stderr
    wire = json.loads(proc.stdout)
    assert wire["status"] == "answered"
    assert [c["id"] for c in wire["claims"]] == ["schedule@1:6"]
    assert events(ws) == before
