"""The README's pipeline examples run as written (read with markdown-it-py, the fences verbatim).

The Python example runs against a copy of ``examples/`` (the index is never written into the
repository); the MCP client configuration must be JSON that launches ``grounding mcp``; the
pre-commit configuration is the one ``test_precommit.py`` installs as a git hook; the CI job
must be YAML that uploads SARIF with ``github/codeql-action/upload-sarif``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[2]


def fences(language: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parse((REPO / "README.md").read_text(encoding="utf-8"))
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == language]


def fence_with(language: str, needle: str) -> str:
    (found,) = [f for f in fences(language) if needle in f]
    return found


def test_the_python_example_prints_what_its_comments_say(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".grounding"))
    code = fence_with("python", "grounding.verify(")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["answered True", "/claims/0/text GR103 quote-mismatch",
                                       "/claims/0/quote GR103 quote-mismatch"]


def test_the_mcp_client_configuration_launches_grounding_mcp() -> None:
    config = json.loads(fence_with("json", "mcpServers"))
    server = config["mcpServers"]["grounding"]
    assert server["command"] == "grounding" and server["args"][:2] == ["mcp", "--root"]


def test_the_ci_job_uploads_sarif_produced_with_a_baseline() -> None:
    job = yaml.safe_load(fence_with("yaml", "upload-sarif"))
    steps = job["jobs"]["check-answers"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "grounding check --format sarif --baseline" in runs
    upload = next(s for s in steps if "upload-sarif" in s.get("uses", ""))
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@") and upload["if"] == "always()"
    assert upload["with"]["sarif_file"] in runs
    assert job["jobs"]["check-answers"]["permissions"]["security-events"] == "write"


def readme_precommit_config() -> str:
    """The README's ``repo: local`` pre-commit configuration (used by test_precommit.py)."""
    return fence_with("yaml", "repo: local")
