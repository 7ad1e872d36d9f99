"""``grounding mcp`` (SPEC §14) through the MCP SDK's own stdio client.

The server is the real ``python -m grounding.cli mcp`` subprocess. Structured results are
validated against the output schemas the server publishes. "Answers while indexing" is
made deterministic with the test-only ``GROUNDING_MCP_SCAN_GATE`` FIFO: the background scan
blocks before reading its first file until the test opens the FIFO, so the test knows a scan
is running (and holds the store lock) while it calls the tools. No sleeps.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from grounding import cli
from grounding.mcp_server import SCAN_GATE_ENV

from .conftest import SCHEDULE, answer, claim, dumps, write

TOOLS = {"check_answer", "cite", "search_evidence", "compile_context"}
VALID = answer(claim("schedule", 2, 7), fields=["活动时间"])


@asynccontextmanager
async def server(root: Path, env: dict[str, str] | None = None, indexed: bool = True) -> AsyncIterator[Client]:
    """A client of a fresh server; ``indexed``: first wait for the start-up scan (a search with
    ``wait_for_index``), so results do not depend on how far it got.
    """
    params = StdioServerParameters(command=sys.executable, args=["-m", "grounding.cli", "mcp", "--root", str(root)],
                                   env=env, cwd=str(root))
    async with Client(params) as client:
        if indexed:
            await client.call_tool("search_evidence", {"query": "x", "wait_for_index": True})
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    return result


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def test_check_answer_reports_json_and_markdown_and_every_result_matches_its_output_schema(
        pipeline_root: Path) -> None:
    draft = ("---\r\nfields: [活动时间]\r\ncontext: {units: [\"schedule@2:7-7\"]}\r\n---\r\n"
             "活动时间是周四16:30 🎉[^1]。\r\n\r\n"
             f'[^1]: schedule@2:7 sha256:{claim("schedule", 2, 7)["sha256"][:12]} "- 活动时间：周四16:30 🎉"\r\n')
    shown = [{"doc_id": "schedule", "version": 2, "lines": [7, 7]}]
    forged = answer(claim("schedule", 2, 7, "- 活动时间：周四16:00 🎉"))
    invisible = answer(claim("schedule", 2, 8))
    async with server(pipeline_root) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        results = {
            "check_answer": await call(client, "check_answer", {"answer": dumps(VALID), "context": shown}),
            "cite": await call(client, "cite", {"doc_id": "schedule", "line": 7}),
            "search_evidence": await call(client, "search_evidence", {"query": "到账"}),
            "compile_context": await call(client, "compile_context", {"question": "开放日活动时间"}),
        }
        as_object = structured(await call(client, "check_answer", {"answer": VALID, "context": shown}))
        as_markdown = structured(await call(client, "check_answer", {"answer": draft}))
        bad = structured(await call(client, "check_answer", {"answer": forged}))
        cut = [{"doc_id": "schedule", "version": 2, "text": "- 活动时间：周四16:30 🎉"}]
        hidden = structured(await call(client, "check_answer", {"answer": invisible, "context": cut}))
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None and tool.description
        jsonschema.validate(structured(results[name]), tool.output_schema)
    as_json = structured(results["check_answer"])
    for report in (as_json, as_object, as_markdown):
        assert (report["status"], report["diagnostics"], report["indexing"]) == ("answered", [], False)
    assert as_markdown["path"] == "answer.md" and as_json["path"] == "answer.json"
    # a failing answer is a report, not a tool error
    assert bad["status"] == "abstain"
    assert [(d["name"], d["pointer"]) for d in bad["diagnostics"] if d["severity"] == "error"] == [
        ("quote-mismatch", "/claims/0/quote")]
    assert [d["name"] for d in hidden["diagnostics"] if d["severity"] == "error"] == ["invisible-source"]


async def test_cite_gives_paste_ready_citations_and_refuses_with_is_error_naming_the_finding(
        pipeline_root: Path) -> None:
    async with server(pipeline_root) as client:
        one = structured(await call(client, "cite", {"doc_id": "schedule", "line": 8}))
        by_path = structured(await call(client, "cite", {"path": "evidence/refund.md", "line": 3}))
        searched = structured(await call(client, "cite", {"search": "到账"}))
        in_doc = structured(await call(client, "cite", {"doc_id": "schedule", "search": "时间"}))
        front = await call(client, "cite", {"doc_id": "schedule", "line": 2})
        meta = await call(client, "cite", {"doc_id": "schedule", "line": 10})
        blank = await call(client, "cite", {"doc_id": "schedule", "line": 9})
        stale = await call(client, "cite", {"doc_id": "schedule", "version": 1, "line": 5})
        nothing = await call(client, "cite", {})
    (c,) = one["citations"]
    assert c["footnote"] == f'[^1]: schedule@2:8 sha256:{c["sha256"][:12]} "- 地点：三楼报告厅𠮷"'
    assert c["claim"]["id"] == "schedule@2:8" and c["path"] == "evidence/schedule.md"
    assert by_path["citations"][0]["id"] == searched["citations"][0]["id"] == "refund@1:3"
    assert [c["id"] for c in in_doc["citations"]] == ["schedule@2:7"]
    assert [(s["line"], s["name"]) for s in in_doc["skipped"]] == [(10, "meta-field")]
    for result, text in ((front, "meta-field: schedule@2:2 is a front-matter line"),
                         (meta, "meta-field: schedule@2:10 is the meta field '版本说明'"),
                         (blank, "blank-line: schedule@2:9 is blank"),
                         (stale, "stale-citation: schedule@1 is not current"),
                         (nothing, "invalid-argument:")):
        assert result.is_error and result.content[0].text.startswith(text), result.content[0].text


async def test_search_covers_active_lines_only_and_compiled_units_go_back_into_check_answer(
        pipeline_root: Path) -> None:
    async with server(pipeline_root) as client:
        hits = structured(await call(client, "search_evidence", {"query": "活动时间"}))["hits"]
        meta = structured(await call(client, "search_evidence", {"query": "版本说明"}))["hits"]
        compiled = structured(await call(client, "compile_context", {"question": "退款到账时间", "limit": 400,
                                                                       "reserve": 100}))
        visible = structured(await call(client, "check_answer", {
            "answer": answer(claim("refund", 1, 3)), "context": compiled["context"]}))
        hidden = structured(await call(client, "check_answer", {
            "answer": answer(claim("schedule", 2, 7)), "context": compiled["context"]}))
        too_small = await call(client, "compile_context", {"question": "q", "limit": 100, "reserve": 100})
    # schedule@1 is superseded and old@1 is revoked: only the active schedule@2 line is found
    assert [(h["doc_id"], h["line"], h["citable"]) for h in hits] == [("schedule", 7, True)]
    assert hits[0]["footnote"].startswith("[^1]: schedule@2:7 sha256:")
    assert [(h["line"], h["citable"], h["reason"].split(":")[0]) for h in meta] == [(10, False, "meta-field")]
    assert compiled["kept"] and compiled["input_tokens"] <= 400 - 100
    assert compiled["kept"][0]["doc_id"] == "refund" and "退款到账时间" in compiled["kept"][0]["text"]
    assert visible["diagnostics"] == []
    assert [d["name"] for d in hidden["diagnostics"] if d["severity"] == "error"] == ["invisible-source"]
    assert too_small.is_error and "invalid-argument" in too_small.content[0].text


async def test_search_evidence_matches_after_nfkc_and_shows_lines_as_written(pipeline_root: Path) -> None:
    write(pipeline_root, {"evidence/hotline.md": "---\r\ndoc_id: hotline\r\n---\r\n- 客服：２４小时在线 🎉\r\n"
                                                 "- 版本说明：９９\r\n"})
    async with server(pipeline_root) as client:
        folded = structured(await call(client, "search_evidence", {"query": "审核通过后３个工作日"}))["hits"]
        wide = structured(await call(client, "search_evidence", {"query": "24小时"}))["hits"]
        meta = structured(await call(client, "search_evidence", {"query": "99"}))["hits"]
    assert [(h["doc_id"], h["line"]) for h in folded] == [("refund", 3)]
    assert [(h["doc_id"], h["line"], h["text"]) for h in wide] == [("hotline", 4, "- 客服：２４小时在线 🎉")]
    # a hit that cannot be cited still shows its line as written, not its NFKC form
    assert [(h["line"], h["citable"], h["text"]) for h in meta] == [(5, False, "- 版本说明：９９")]


async def test_bad_arguments_are_is_error_results_and_the_server_keeps_serving(pipeline_root: Path) -> None:
    async with server(pipeline_root) as client:
        bad_date = await call(client, "check_answer", {"answer": "{}", "today": "tomorrow"})
        bad_unit = await call(client, "check_answer", {"answer": "{}", "context": [{"doc_id": "x"}]})
        bad_line = await call(client, "cite", {"doc_id": "schedule", "line": 0})
        unknown = await call(client, "cite", {"doc_id": "nosuch", "line": 1})
        still = structured(await call(client, "cite", {"doc_id": "schedule", "line": 7}))
    assert bad_date.is_error and "today must be YYYY-MM-DD" in bad_date.content[0].text
    assert bad_unit.is_error and bad_line.is_error
    assert unknown.is_error and unknown.content[0].text.startswith("unknown-source: no evidence document")
    assert still["citations"][0]["id"] == "schedule@2:7"


async def test_an_unusable_workspace_is_an_is_error_result_not_a_dead_server(tmp_path: Path) -> None:
    write(tmp_path, {"grounding.toml": 'evidence = "missing"\n'})
    async with server(tmp_path, indexed=False) as client:
        result = await call(client, "search_evidence", {"query": "x"})
    assert result.is_error and result.content[0].text.startswith("invalid-workspace:")
    assert "does not exist" in result.content[0].text


async def test_evidence_changes_are_seen_by_the_next_call(pipeline_root: Path) -> None:
    async with server(pipeline_root) as client:
        assert structured(await call(client, "check_answer", {"answer": VALID}))["status"] == "answered"
        write(pipeline_root, {"evidence/schedule.md": SCHEDULE.replace("version: 2", "version: 3")})
        os.utime(pipeline_root / "evidence" / "schedule.md", ns=(1, 1))  # a stat change the rescan notices
        report = structured(await call(client, "check_answer", {"answer": VALID}))
    assert "stale-citation" in [d["name"] for d in report["diagnostics"]]


# -- answering while the index is being built -------------------------------------------------------


def corpus(n: int) -> dict[str, str]:
    return {f"evidence/bulk/{i:05d}.md": f"---\ndoc_id: bulk-{i}\nsubject: 批量{i}\n---\n- 编号：第{i}号文件 🎉\n"
            for i in range(n)}


async def release(gate: Path) -> None:
    await anyio.to_thread.run_sync(lambda: gate.open("wb").close())


async def test_a_cold_large_corpus_answers_at_once_and_says_still_indexing(pipeline_root: Path, tmp_path: Path) -> None:
    write(pipeline_root, corpus(1500))
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    async with server(pipeline_root, env={SCAN_GATE_ENV: str(gate)}, indexed=False) as client:
        try:
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            early = structured(await call(client, "search_evidence", {"query": "第42号"}))
            cite_early = await call(client, "cite", {"doc_id": "bulk-42", "line": 5})
        finally:
            await release(gate)
        late = structured(await call(client, "search_evidence", {"query": "第42号", "wait_for_index": True}))
    assert (early["hits"], early["indexing"]) == ([], True)
    assert early["notes"] and early["notes"][0].startswith("still indexing")
    assert cite_early.is_error and "unknown-source" in cite_early.content[0].text
    assert "still indexing" in cite_early.content[0].text
    assert late["indexing"] is False and late["notes"] == []
    assert [h["doc_id"] for h in late["hits"]] == ["bulk-42"]


async def test_while_a_scan_runs_answers_come_from_the_committed_index(pipeline_root: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    write(pipeline_root, corpus(300))
    assert cli.main(["index", "--root", str(pipeline_root), "--format", "json"]) == 0  # commit version 2
    capsys.readouterr()
    write(pipeline_root, {"evidence/schedule.md": SCHEDULE.replace("version: 2", "version: 3")
                          .replace("周四16:30", "周五10:00"), "evidence/fresh.md": "- 票价：免费\n"})
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    async with server(pipeline_root, env={SCAN_GATE_ENV: str(gate)}, indexed=False) as client:
        try:
            report = structured(await call(client, "check_answer", {"answer": VALID}))
            hits = structured(await call(client, "search_evidence", {"query": "周四16:30"}))
            fresh = await call(client, "cite", {"doc_id": "fresh", "line": 1})
        finally:
            await release(gate)
        after = structured(await call(client, "check_answer", {"answer": VALID, "wait_for_index": True}))
        fresh_after = structured(await call(client, "cite", {"doc_id": "fresh", "line": 1}))
    # during the scan: the committed index (schedule@2 current), flagged as still indexing
    assert (report["status"], report["indexing"]) == ("answered", True)
    assert report["notes"][0].startswith("still indexing")
    assert [(h["doc_id"], h["version"], h["line"]) for h in hits["hits"]] == [("schedule", 2, 7)]
    assert fresh.is_error and "still indexing" in fresh.content[0].text
    # after it: version 3 is current, so the same answer is stale; the new document is citable
    assert after["indexing"] is False and "stale-citation" in [d["name"] for d in after["diagnostics"]]
    assert fresh_after["citations"][0]["footnote"].startswith("[^1]: fresh@1:1 sha256:")


async def test_cite_takes_an_image_region_by_doc_id_and_region_number(tmp_path: Path) -> None:
    from .test_image_api import panel  # a red circle (r1) and a blue square (r2) on white

    png = panel()
    write(tmp_path, {"grounding.toml": 'today = "2026-05-01"\n', "evidence/面板.png.yaml": "doc_id: 面板🎉\r\n",
                     "evidence/schedule.md": "---\r\ndoc_id: schedule\r\n---\r\n- 活动时间：周四16:30 𠮷\r\n"})
    (tmp_path / "evidence" / "面板.png").write_bytes(png)
    async with server(tmp_path) as client:
        region = structured(await call(client, "cite", {"doc_id": "面板🎉", "region": 2, "search": "颜色"}))
        versioned = structured(await call(client, "cite", {"doc_id": "面板🎉", "version": 1, "region": 1}))
        missing = await call(client, "cite", {"doc_id": "面板🎉", "region": 3})
        text_doc = await call(client, "cite", {"doc_id": "schedule", "region": 1})
        with_line = await call(client, "cite", {"doc_id": "面板🎉", "region": 1, "line": 2})
        huge = await call(client, "cite", {"doc_id": "schedule", "line": 2**63})
    (colour,) = region["citations"]
    assert colour["claim"]["id"] == "面板🎉@1#r2" and colour["claim"]["quote"] == "颜色：蓝色"
    assert colour["footnote"].endswith('"颜色：蓝色"')
    assert {c["claim"]["region"] for c in versioned["citations"]} == {"r1"} and len(versioned["citations"]) == 5
    for result, text in ((missing, "there is no r3"), (text_doc, "is a text document, not an image"),
                         (with_line, "invalid-argument: region goes with doc_id"),
                         (huge, "less than or equal to 2147483647")):
        assert result.is_error and text in result.content[0].text, result.content[0].text
