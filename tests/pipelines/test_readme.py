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


def test_the_getting_a_citation_commands_run_as_pasted_from_the_repository_root(tmp_path: Path) -> None:
    """The README's citation commands, pasted into a shell at the repository root, all succeed
    (its ``cd examples`` included) and print verified citations.
    """
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".grounding"))
    block = fence_with("sh", "grounding cite schedule:14")
    assert block.splitlines()[0].startswith("cd examples")
    bindir = Path(sys.executable).parent
    out = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "[^1]: schedule@2:14 sha256:3baa5fea5284" in out.stdout
    assert '"- 退货期限：签收后15天内"' in out.stdout


def test_a_command_outside_any_workspace_says_no_grounding_toml_was_found_and_names_root(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".grounding"))
    out = subprocess.run([sys.executable, "-m", "grounding.cli", "cite", "evidence/events/open-day-schedule.md:14"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "no grounding.toml" in out.stderr and "--root examples" in out.stderr


def test_the_evidence_front_matter_example_reads_as_the_readme_says() -> None:
    from grounding_core.evidence import parse_evidence_text

    text = fence_with("markdown", "effective_from:")
    doc = parse_evidence_text("returns/policy-v2.md", text, "0" * 64)
    assert (doc.doc_id, doc.front.version, doc.front.status, doc.subject) == ("returns-policy", 2, "active", "退货政策")
    assert str(doc.front.effective_from) == "2026-01-01" and str(doc.front.effective_until) == "2026-12-31"
    without = parse_evidence_text("returns/policy-v2.md", "- 主题：退货政策\n- 退货期限：签收后15天内\n", "0" * 64)
    assert (without.doc_id, without.subject) == ("returns/policy-v2", "退货政策")
    assert [fl.field for fl in without.field_lines.values()] == ["主题", "退货期限"]


def test_the_readme_stands_alone_without_the_spec_beside_it() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in text and "## Evidence documents" in text
    assert "If you have the\nproduct specification" in text
