"""``grounding memory add|approve|forget|list`` and memory in ``grounding context`` (SPEC §9, §11).

In-process through :func:`grounding.cli.main`, plus one run of the real console entry point
from another folder with ``--root``. Scopes, keys and values are Chinese with emoji.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO, event_kinds, sha256, write_files

from grounding import cli
from grounding_core.budget import count_tokens, input_tokens, render_prompt
from grounding_core.memory import MemoryContextUnit, MemoryEntry

SCOPE = "客户-李华🎉"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_files(tmp_path, {"evidence/notice.md": "- 地点：三楼报告厅\n"})
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def memory(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, Any, str]:
    code, out, err = run(capsys, "memory", *argv, "--root", root, "--format", "json")
    return code, json.loads(out) if out.strip() else None, err




def test_add_approve_forget_and_list_in_json(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, entry, _ = memory(capsys, root, "add", "--scope", SCOPE, "--key", "语言", "--value", "中文",
                            "--approved-by", "王芳")
    assert code == 0
    assert entry["id"] == f"memory:{SCOPE}/语言@1" and entry["status"] == "active"
    assert entry["sha256"] == sha256("语言：中文") and entry["quote"] == "语言：中文"
    assert entry["citation"] == f'memory:{SCOPE}/语言@1 sha256:{sha256("语言：中文")[:12]} "语言：中文"'
    code, proposal, _ = memory(capsys, root, "add", "--scope", SCOPE, "--key", "语言", "--value", " 英文 ")
    assert (code, proposal["version"], proposal["value"], proposal["status"]) == (0, 2, "英文", "proposal")
    code, listed, _ = memory(capsys, root, "list")
    assert [(e["id"], e["status"]) for e in listed] == [
        (f"memory:{SCOPE}/语言@2", "proposal"), (f"memory:{SCOPE}/语言@1", "active")]
    code, approved, _ = memory(capsys, root, "approve", f"memory:{SCOPE}/语言@2", "--by", "张老师")
    assert (code, approved["status"], approved["approved_by"]) == (0, "active", "张老师")
    code, gone, _ = memory(capsys, root, "forget", f"memory:{SCOPE}/语言", "--reason", "客户撤回")
    assert (code, gone["status"], gone["forget_reason"]) == (0, "forgotten", "客户撤回")
    code, listed, _ = memory(capsys, root, "list", "--active")
    assert listed == []
    code, then, _ = memory(capsys, root, "list", "--at", "2")   # before the approval of @2
    assert [(e["version"], e["status"]) for e in then] == [(2, "proposal"), (1, "active")]
    assert event_kinds(root) == ["remember", "remember", "approve", "forget"]


def test_text_output_names_the_entry_and_a_paste_ready_citation(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "memory", "add", "--root", root, "--scope", SCOPE, "--key", "截止日期",
                       "--value", "延长至12月20日")
    assert code == 0
    assert out.splitlines() == [
        f"proposed memory:{SCOPE}/截止日期@1: 截止日期：延长至12月20日 — not active until approved:"
        f" grounding memory approve memory:{SCOPE}/截止日期@1 --by NAME",
        f'    cite: memory:{SCOPE}/截止日期@1 sha256:{sha256("截止日期：延长至12月20日")[:12]}'
        ' "截止日期：延长至12月20日"']
    code, out, _ = run(capsys, "memory", "list", "--root", root, "--scope", SCOPE)
    assert code == 0 and "proposal" in out and out.splitlines()[-1] == "1 memory entry"


@pytest.mark.parametrize("argv, message", [
    (["add", "--scope", "客户 李华", "--key", "语言", "--value", "中文"], "holds ' '"),
    (["add", "--scope", SCOPE, "--key", "语言", "--value", ""], "value is empty"),
    (["approve", f"memory:{SCOPE}/语言@9", "--by", "王芳"], "does not exist"),
    (["approve", f"memory:{SCOPE}/语言", "--by", "王芳"], "ends with @VERSION"),
    (["forget", f"memory:{SCOPE}/未知"], "nothing to forget"),
    (["forget", f"memory:{SCOPE}/语言@1"], "forget takes memory:SCOPE/KEY"),
    (["list", "--at", "99"], "the event log holds"),
])
def test_acts_that_cannot_be_written_exit_2_and_append_nothing(
        root: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert run(capsys, "memory", "add", "--root", root, "--scope", SCOPE, "--key", "语言", "--value", "中文",
               "--approved-by", "王芳")[0] == 0
    code, out, err = run(capsys, "memory", *argv, "--root", root)
    assert code == 2 and out == ""
    assert err.startswith("grounding: error: ") and message in err
    assert event_kinds(root) == ["remember"]


@pytest.mark.sqlite_only
def test_an_in_memory_index_is_refused_for_writes(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(root, {"grounding.toml": 'index = ":memory:"\n'})
    code, _, err = run(capsys, "memory", "add", "--root", root, "--scope", SCOPE, "--key", "语言", "--value", "中文")
    assert code == 2 and "':memory:'" in err


def test_memory_without_an_act_prints_its_usage_and_exits_2(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "memory")
    assert code == 2 and "add" in err and "forget" in err


def test_the_console_script_takes_root_from_another_folder(
        root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "grounding.cli", "memory", "add", "--root", str(root),
                           "--scope", SCOPE, "--key", "语言", "--value", "中文", "--approved-by", "王芳"],
                          capture_output=True, text=True, encoding="utf-8", cwd=elsewhere, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert event_kinds(root) == ["remember"] and not (elsewhere / ".grounding").exists()


def test_grounding_context_shows_memory_units_with_their_token_counts(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "memory", "add", "--root", root, "--scope", SCOPE, "--key", "语言", "--value", "中文",
        "--approved-by", "王芳")
    write_files(root, {"answers/a.md": (
        "---\r\nquestion: 用什么语言？\r\nfields: [语言]\r\n"
        f'context: {{units: ["memory:{SCOPE}", "memory:客户-无名", "notice@1"]}}\r\n---\r\n用中文。\r\n')})
    code, out, _ = run(capsys, "context", "--root", root, "answers/a.md", "--format", "json")
    assert code == 0
    summary = json.loads(out)
    entry = MemoryEntry(SCOPE, "语言", 1, "中文", 1)
    unit = MemoryContextUnit.of(entry)
    base = input_tokens(render_prompt("用什么语言？", []))
    assert summary["kept"][0] == {"unit": f"memory:{SCOPE}/语言@1",
                                  "tokens": input_tokens(render_prompt("用什么语言？", [unit])) - base}
    assert summary["kept"][0]["tokens"] >= count_tokens("语言：中文")
    assert summary["unresolved"] == ["memory:客户-无名"]
    code, out, _ = run(capsys, "context", "--root", root, "answers/a.md")
    assert f"kept     memory:{SCOPE}/语言@1" in out
    assert "memory:客户-无名" in out and "names no memory entry" in out
    write_files(root, {"answers/q.md": (
        f"---\nquestion: 用什么语言？\nfields: [语言]\ncontext: {{query: 地点, memory: [{SCOPE}]}}\n---\n用中文。\n")})
    code, out, _ = run(capsys, "context", "--root", root, "answers/q.md", "--format", "json")
    kept = [u["unit"] for u in json.loads(out)["kept"]]
    assert kept[0] == f"memory:{SCOPE}/语言@1" and "notice@1:1-1" in kept


def test_grounding_log_shows_memory_events_with_their_entry(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "memory", "add", "--root", root, "--scope", SCOPE, "--key", "语言", "--value", "中文")
    run(capsys, "memory", "approve", "--root", root, f"memory:{SCOPE}/语言@1", "--by", "王芳")
    code, out, _ = run(capsys, "log", "--root", root, "--format", "json")
    assert code == 0
    memory_events = [e for e in json.loads(out) if "memory" in e]
    assert [(e["kind"], e["memory"]) for e in memory_events] == [
        ("remember", {"scope": SCOPE, "key": "语言", "value": "中文", "approved_by": None}),
        ("approve", {"scope": SCOPE, "key": "语言", "by": "王芳"})]
    code, out, _ = run(capsys, "log", "--root", root)
    assert f"remember  memory:{SCOPE}/语言  remember @1 语言：中文 (a proposal)" in out
    assert f"approve  memory:{SCOPE}/语言  approve @1 by 王芳" in out


def test_memory_finds_the_workspace_upward_like_the_other_commands(
        root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(root, {"grounding.toml": "", "answers/deep/x.md": "x\n"})
    monkeypatch.chdir(root / "answers" / "deep")
    code, out, _ = run(capsys, "memory", "add", "--scope", SCOPE, "--key", "语言", "--value", "中文",
                       "--approved-by", "王芳")
    assert code == 0 and event_kinds(root) == ["remember"]
    assert not (root / "answers" / "deep" / ".grounding").exists()
