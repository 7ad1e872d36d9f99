"""Issue 13 item 17: a hostile context query, context log or JSON answer never takes the
server down and never leaves the draft without diagnostics (pytest-lsp, the real server).

One test per kind of hostility: NUL characters, huge numbers, deep nesting, huge strings.
Each opens every carrier of its kind (a ``query`` context, a ``log`` context, a JSON answer)
next to an ordinary draft, waits for each draft's diagnostics (bounded waits, no sleeps),
then checks that the server still answers and exits cleanly.

A NUL in a ``query`` once reached SQLite's FTS5 query parser ("unterminated string"), and a
query of 200,000 terms became one FTS5 expression too deep for SQLite; ``store.search`` now
quotes every term, drops NULs and caps the number of terms.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lsprotocol import types

from tests.support import lsp as harness
from tests.support.lsp import open_document

from .helpers import SCHEDULE, sha256, write_files

WAIT = 60.0
HASH = sha256(SCHEDULE)
GOOD = ('---\nquestion: 几点？\nfields: [活动时间]\ncontext: {units: ["schedule@1"]}\n---\n'
        f'活动时间是周四16:30[^1]。🎉\r\n\r\n[^1]: schedule@1:6 sha256:{HASH[:12]} "- 活动时间：周四16:30"\r\n')
CLAIM = {"text": "活动时间：周四16:30", "quote": "- 活动时间：周四16:30", "id": "schedule@1:6",
         "doc_id": "schedule", "version": 1, "line": 6, "sha256": HASH, "field": "活动时间"}


def markdown(context: str) -> str:
    return f"---\nquestion: 几点？\nfields: [活动时间]\ncontext: {context}\n---\n活动时间是周四16:30。\n"


def answer(**changes: object) -> str:
    body: dict[str, object] = {"status": "answered", "claims": [CLAIM], "missing_fields": [],
                               "fields": ["活动时间"], "context": {"units": ["schedule@1"]}}
    body.update(changes)
    return json.dumps(body, ensure_ascii=False)


async def every_draft_is_diagnosed(tmp_path: Path, drafts: dict[str, str], files: dict[str, str],
                                   wait: float = WAIT) -> None:
    """Open ``drafts`` (and a good one) in one session; each gets diagnostics; the server lives."""
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": 'today = "2026-05-01"\n',
                           "answers/good.md": GOOD, **files, **drafts})
    client = await harness.start(tmp_path, "minimal")
    try:
        uris = {rel: (tmp_path / rel).as_uri() for rel in [*drafts, "answers/good.md"]}
        for rel, uri in uris.items():
            text = GOOD if rel == "answers/good.md" else drafts[rel]
            open_document(client, uri, text)
        for rel, uri in uris.items():
            await client.recorder.wait_until(lambda uri=uri: bool(client.recorder.of(uri)), f"diagnostics of {rel}",
                                             wait)
            published = client.recorder.of(uri)[-1].diagnostics
            if rel == "answers/good.md":
                assert not [d for d in published if d.severity == types.DiagnosticSeverity.Error]
            else:
                assert published, f"{rel} was published with no diagnostics"
                assert "Grounding could not check" not in " ".join(d.message for d in published)
        hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uris["answers/good.md"]), types.Position(7, 10))), WAIT)
        assert hover is not None  # still serving
    finally:
        assert await harness.stop(client) == 0


async def test_nul_in_a_query_context(tmp_path: Path) -> None:
    await every_draft_is_diagnosed(tmp_path, {
        "answers/q-nul.md": markdown('{query: "活动\\0时间"}'),
        "answers/q-nul-only.md": markdown('{query: "\\0"}'),
        "answers/q-nul.answer.json": answer(context={"query": "活动\0时间 🎉"}),
    }, {}, wait=15.0)


async def test_nul_in_a_context_log_and_in_an_answer(tmp_path: Path) -> None:
    await every_draft_is_diagnosed(tmp_path, {
        "answers/log-nul.md": markdown("{log: runs/nul.json}"),
        "answers/log-nul-bytes.md": markdown("{log: runs/nul-bytes.json}"),
        "answers/a-nul.answer.json": answer(question="\0", claims=[
            dict(CLAIM, text="活动\0", quote="\0", id="schedule\0@1:6", doc_id="schedule\0")]),
        "answers/a-nul-units.answer.json": answer(context={"units": ["schedule\0@1"]}),
    }, {
        "runs/nul.json": json.dumps({"units": [{"doc_id": "schedule\0", "version": 1,
                                                 "text": "- 活动时间：周四16:30\0"}]}),
        "runs/nul-bytes.json": '{"units": []}\0\0',
    })


async def test_huge_numbers(tmp_path: Path) -> None:
    digits = "9" * 5000
    await every_draft_is_diagnosed(tmp_path, {
        "answers/q-limit.md": markdown(f"{{query: 活动时间, limit: {digits}, reserve: 240}}"),
        "answers/q-2-63.md": markdown("{query: 活动时间, limit: 9223372036854775808, reserve: 9223372036854775807}"),
        "answers/q-2-62.md": markdown("{query: 活动时间, limit: 4611686018427387904, reserve: 240}"),
        "answers/log-huge.md": markdown("{log: runs/huge.json}"),
        "answers/a-huge.answer.json": answer(context={"query": "活动时间", "limit": 2**63, "reserve": 2**63})
        .replace('"version": 1', f'"version": {digits}'),
        "answers/a-line.answer.json": answer(claims=[dict(CLAIM, line=2**64, id=f"schedule@1:{2**64}")]),
    }, {
        "runs/huge.json": '{"units": [{"doc_id": "schedule", "version": ' + digits + ', "lines": [1, '
                          + digits + "]}]}",
    })


async def test_deep_nesting(tmp_path: Path) -> None:
    deep_json = "[" * 100_000 + "]" * 100_000
    await every_draft_is_diagnosed(tmp_path, {
        "answers/q-deep.md": markdown("{query: " + "[" * 60 + "]" * 60 + "}"),
        "answers/q-deeper.md": markdown("{query: " + "[" * 100_000 + "]" * 100_000 + "}"),
        "answers/log-deep.md": markdown("{log: runs/deep.json}"),
        "answers/a-deep.answer.json": '{"status": "answered", "claims": ' + deep_json + ', "missing_fields": []}',
        "answers/a-deep-context.answer.json": answer(context={"query": "x", "units": [[[["x"]]]]}),
    }, {"runs/deep.json": '{"units": ' + deep_json + "}"})


async def test_huge_strings(tmp_path: Path) -> None:
    await every_draft_is_diagnosed(tmp_path, {
        "answers/q-one-term.md": markdown('{query: "' + "活动时间" * 200_000 + '"}'),
        "answers/log-big.md": markdown("{log: runs/big.json}"),
        "answers/a-big.answer.json": answer(question="问" * 1_000_000, context={"query": "活动时间" * 100_000}),
        "answers/a-big-quote.answer.json": answer(claims=[dict(CLAIM, quote=CLAIM["quote"] + "𠮷" * 2_000_000)]),
    }, {"runs/big.json": json.dumps({"units": [{"doc_id": "s" * 1_000_000, "version": 1,
                                                 "text": "活" * 5_000_000}]}, ensure_ascii=False)})


async def test_huge_query_of_many_terms(tmp_path: Path) -> None:
    """200,000 terms once became one FTS5 expression ("Expression tree is too large")."""
    await every_draft_is_diagnosed(tmp_path, {
        "answers/q-big.md": markdown('{query: "' + "活动时间 🎉 " * 200_000 + '"}'),
        "answers/q-big.answer.json": answer(context={"query": "活动 时间 " * 100_000}),
    }, {}, wait=15.0)


async def test_the_quick_fix_of_an_ime_slip_uses_the_core_edit(tmp_path: Path) -> None:
    """Issue 12: the editor offers the same Edit ``grounding check --fix`` applies."""
    slipped = GOOD.replace("schedule@1:6", "schedule＠1：６")
    write_files(tmp_path, {"evidence/schedule.md": SCHEDULE, "grounding.toml": 'today = "2026-05-01"\n',
                           "answers/a.md": slipped})
    uri = (tmp_path / "answers/a.md").as_uri()
    client = await harness.start(tmp_path, "minimal")
    try:
        open_document(client, uri, slipped)
        await client.recorder.wait_until(lambda: bool(client.recorder.of(uri)), "diagnostics of the draft", WAIT)
        [slip] = [d for d in client.recorder.of(uri)[-1].diagnostics if "FULLWIDTH" in d.message]
        actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(uri), slip.range, types.CodeActionContext([slip]))), WAIT)
        edits = [e for a in actions or [] if isinstance(a, types.CodeAction) and a.edit and a.edit.changes
                 for e in a.edit.changes.get(uri, [])]
        assert edits and {e.new_text for e in edits} == {"schedule@1:6"}  # the quick fix and fix-all
    finally:
        assert await harness.stop(client) == 0
