"""End to end in a real editor: headless Neovim's built-in LSP client against the server.

``tests/e2e/nvim/init.lua`` starts ``python -m server`` for Markdown buffers (``vim.lsp.start``
on Neovim 0.8+, ``vim.lsp.start_client`` + ``buf_attach_client`` on 0.7, Debian bookworm's
package), waits with ``vim.wait`` on a condition until the server has published diagnostics
for the buffer, asks for hover with ``vim.lsp.buf_request_sync`` when the server advertises
``hoverProvider``, writes the result as JSON and quits. This module runs
``nvim --headless --clean -u init.lua FILE`` on a copy of ``examples/`` and checks what the
editor ended up with.

Columns from ``vim.diagnostic.get`` are byte offsets into the buffer line (Neovim converts
the negotiated encoding itself), so expected values are UTF-8 lengths computed here from the
draft's text. Skipped when ``nvim`` is not installed (``.ci/run`` installs it with apt).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
INIT_LUA = Path(__file__).resolve().parent / "nvim" / "init.lua"
NVIM = shutil.which("nvim")
NVIM_TIMEOUT_SECONDS = 120
"""Upper bound for one editor run (start, index, check, hover, shutdown); ~3 s normally."""

ERROR, WARNING, INFO = 1, 2, 3  # vim.diagnostic.severity


def _nvim_version() -> tuple[int, ...]:
    if NVIM is None:
        return ()
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True,
                           timeout=30).stdout.splitlines()[0]
    match = re.search(r"v(\d+)\.(\d+)\.(\d+)", first)
    return tuple(int(part) for part in match.groups()) if match else ()


NVIM_VERSION = _nvim_version()

pytestmark = pytest.mark.skipif(
    NVIM_VERSION < (0, 7, 0),
    reason=f"needs Neovim >= 0.7 (found {NVIM_VERSION or 'none'}); .ci/run installs it with apt",
)


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A private copy of ``examples/`` (never the repository's own), without its index."""
    root = tmp_path / "examples"
    shutil.copytree(REPO_ROOT / "examples", root, ignore=shutil.ignore_patterns(".grounding"))
    return root


def run_nvim(root: Path, draft: str, hover: tuple[int, int] | None = None) -> dict[str, Any]:
    """Open ``root/draft`` in headless Neovim with the Grounding client; return its JSON.

    ``hover`` is a 0-based (line, character) position; characters must lie after an ASCII
    prefix so they mean the same in every position encoding.
    """
    assert NVIM is not None
    result = root.parent / f"nvim-{Path(draft).stem}.json"
    state = root.parent / "nvim-home"
    env = {
        **os.environ,
        "GROUNDING_PYTHON": sys.executable,
        "GROUNDING_REPO": str(REPO_ROOT),
        "GROUNDING_ROOT": str(root),
        "GROUNDING_RESULT": str(result),
        "GROUNDING_HOVER": f"{hover[0]}:{hover[1]}" if hover else "",
        "GROUNDING_WAIT_MS": "30000",
        # Keep Neovim's logs, shada and swap files out of the user's home.
        "XDG_CACHE_HOME": str(state / "cache"),
        "XDG_STATE_HOME": str(state / "state"),
        "XDG_DATA_HOME": str(state / "data"),
        "XDG_CONFIG_HOME": str(state / "config"),
    }
    completed = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-u", str(INIT_LUA), draft],
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


def test_stale_draft_shows_stale_citations_and_hover_in_neovim(examples: Path) -> None:
    draft = "answers/returns-stale.md"
    lines = (examples / draft).read_text(encoding="utf-8").split("\n")
    assert lines[7].startswith("[^1]: returns-policy@1:10 ")
    assert lines[8].startswith("[^2]: returns-policy@1:12 ")
    out = run_nvim(examples, draft, hover=(7, len("[^1]: returns")))

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


def test_clean_draft_has_no_diagnostics_and_hover_shows_the_cited_line(examples: Path) -> None:
    draft = "answers/open-day.md"
    lines = (examples / draft).read_text(encoding="utf-8").split("\n")
    assert lines[8].startswith("[^1]: schedule@2:14 ")
    out = run_nvim(examples, draft, hover=(8, len("[^1]: sche")))
    assert out["diagnostics"] == [] and out["lsp_diagnostics"] == []

    if not out["hover_provider"]:
        pytest.skip("the server does not advertise hoverProvider; diagnostics were checked")
    text = hover_text(out)
    assert "- 活动时间：2026年12月5日（周六）9:30–16:00" in text
    assert "schedule@2:14" in text
