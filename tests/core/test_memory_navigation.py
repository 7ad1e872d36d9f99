"""The protocol-free editor pieces for memory citations (SPEC §10, §11): targets, hover, the
read-only view and completion, on CJK and emoji names in CRLF and JSON drafts. Columns are
code points; the server converts them (tests/e2e/test_memory.py covers the wire).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support import sha256

from grounding_core.drafts import parse_draft
from grounding_core.memory_navigation import (
    memory_completions,
    memory_hover,
    memory_target_at,
    memory_view,
    parse_view_doc_id,
    view_doc_id,
)
from grounding_core.store import Store

SCOPE = "客户-李华🎉"


@pytest.fixture
def store() -> Iterator[Store]:
    store = Store(":memory:")
    store.remember(SCOPE, "语言", "英文", approved_by="王芳")
    store.remember(SCOPE, "语言", "中文", approved_by="王芳")
    store.remember(SCOPE, "语言", "日文")
    store.remember(SCOPE, "称呼", "李先生")
    yield store
    store.close()


def cite(version: int, value: str) -> str:
    q = f"语言：{value}"
    return f'memory:{SCOPE}/语言@{version} sha256:{sha256(q)[:12]} "{q}"'


MD = "\r\n".join(["---", "question: 语言？", "---", "用中文[^1]。", "", f"[^1]: {cite(2, '中文')}", ""])


def test_targets_are_the_reference_the_definition_id_and_the_json_claim(store: Store) -> None:
    draft = parse_draft(MD)
    on_ref = memory_target_at(draft, 3, 4)
    assert on_ref is not None and on_ref.ref.id == f"memory:{SCOPE}/语言@2"
    assert (on_ref.span.start_col, on_ref.span.end_col) == (3, 7)
    on_def = memory_target_at(draft, 5, 30)
    assert on_def is not None and (on_def.span.start_col, on_def.span.end_col) == (6, 6 + len(on_ref.ref.id))
    assert memory_target_at(draft, 1, 2) is None
    claim = {"text": "语言：中文", "quote": "语言：中文", "id": f"memory:{SCOPE}/语言@2", "scope": SCOPE,
             "key": "语言", "version": 2, "sha256": sha256("语言：中文")}
    answer = json.dumps({"status": "answered", "claims": [claim], "missing_fields": []}, ensure_ascii=False, indent=2)
    target = memory_target_at(parse_draft(answer, "json"), 4, 8)
    assert target is not None and target.ref.version == 2


def test_hover_says_state_current_version_and_unknown_parts(store: Store) -> None:
    snapshot = store.snapshot()
    draft = parse_draft(MD.replace(cite(2, "中文"), cite(1, "英文")))
    text = memory_hover(memory_target_at(draft, 5, 8), snapshot)  # type: ignore[arg-type]
    assert "**superseded** — version 2 supersedes it" in text and "`语言：中文`" in text
    proposal = parse_draft(MD.replace(cite(2, "中文"), cite(3, "日文")))
    assert "**proposal**" in memory_hover(memory_target_at(proposal, 5, 8), snapshot)  # type: ignore[arg-type]
    unknown = parse_draft(MD.replace(f"memory:{SCOPE}/", "memory:无名/"))
    assert "**Unknown scope:**" in memory_hover(memory_target_at(unknown, 5, 8), snapshot)  # type: ignore[arg-type]
    future = parse_draft(MD.replace("语言@2", "语言@7"))
    assert "**Unknown version:**" in memory_hover(memory_target_at(future, 5, 8), snapshot)  # type: ignore[arg-type]


def test_the_read_only_view_lists_versions_and_history(store: Store) -> None:
    view = memory_view(store.snapshot(), SCOPE, "语言")
    assert view is not None
    lines = view.text.split("\n")
    assert lines[view.version_lines[2] - 1] == "- @2 语言：中文 — active: approved by 王芳"
    assert lines[view.version_lines[3] - 1].startswith("- @3 语言：日文 — proposal")
    assert [ln.split(": ", 1)[1] for ln in lines if ln.startswith("- event ")] == [
        "remember @1 语言：英文 (approved by 王芳)", "remember @2 语言：中文 (approved by 王芳)",
        "remember @3 语言：日文 (a proposal)"]
    assert memory_view(store.snapshot(), SCOPE, "无") is None
    assert parse_view_doc_id(view_doc_id(SCOPE, "语言")) == (SCOPE, "语言")
    assert parse_view_doc_id("schedule") is None


def test_completion_stages_replace_from_the_id(store: Store) -> None:
    snapshot = store.snapshot()
    line = "[^1]: memory:客"
    scopes = memory_completions(line, len(line), snapshot)
    assert [(c.label, c.start, c.end, c.new_text, c.filter) for c in scopes or []] == [
        (SCOPE, 6, len(line), f"memory:{SCOPE}/", f"memory:{SCOPE}/")]
    no_space = "[^1]:memory:"
    padded = memory_completions(no_space, len(no_space), snapshot) or []
    assert [c.new_text for c in padded] == [f" memory:{SCOPE}/"]
    line = f"[^1]: memory:{SCOPE}/语"
    assert [c.label for c in memory_completions(line, len(line), snapshot) or []] == ["语言"]
    line = f"[^1]: memory:{SCOPE}/语言@ sha256:zz"
    at = line.index(" sha256")
    versions = memory_completions(line, at, snapshot) or []
    assert [(c.label, c.preselect) for c in versions] == [("3", False), ("2", True), ("1", False)]
    assert (versions[1].start, versions[1].end, versions[1].new_text) == (6, len(line), cite(2, "中文"))
    assert memory_completions("[^1]: schedule@", 15, snapshot) is None
    assert memory_completions(f"[^1]: memory:{SCOPE}/语言@2 sha256:", 40, snapshot) is None
