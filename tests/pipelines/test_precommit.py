"""The pre-commit hooks (``.pre-commit-hooks.yaml``) run by the real ``pre-commit`` in a temporary
git repository, offline.

``pre-commit try-repo`` clones this checkout (a local path, no network) and runs the
``grounding-check-system`` hook, which uses the ``grounding`` installed in the test
environment. The ``grounding-check`` hook (``language: python``) is the same entry and files;
pre-commit would install it with pip, which needs the network, so here it is validated with
``pre-commit validate-manifest`` and compared field by field instead of run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import FILES, claim, dumps, write
from .test_readme import readme_precommit_config

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / ".pre-commit-hooks.yaml"
GOOD = ("---\nfields: [活动时间]\ncontext: {units: [\"schedule@2\"]}\n---\n活动时间是周四16:30 🎉[^1]。\n\n"
        f'[^1]: schedule@2:7 sha256:{claim("schedule", 2, 7)["sha256"][:12]} "- 活动时间：周四16:30 🎉"\n')
FORGED = GOOD.replace('"- 活动时间：周四16:30 🎉"', '"- 活动时间：周四16:00 🎉"')

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid", "PIP_NO_INDEX": "1"}
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t",
                        "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.invalid"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, {**FILES, "answers/good.md": GOOD, "README.md": "# 说明\n不是答案。\n", ".gitignore": ".grounding/\n"})
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "init", cwd=root)
    return root


def test_the_manifest_is_valid_and_both_hooks_run_the_same_check() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))}
    assert set(hooks) == {"grounding-check", "grounding-check-system"}
    assert hooks["grounding-check"]["language"] == "python" and hooks["grounding-check-system"]["language"] == "system"
    same = ("entry", "types_or", "require_serial")
    assert [hooks["grounding-check"][k] for k in same] == [hooks["grounding-check-system"][k] for k in same]
    out = subprocess.run([sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_try_repo_fails_a_commit_that_changes_a_draft_to_a_forged_quote(repo: Path, tmp_path: Path) -> None:
    write(repo, {"answers/good.md": FORGED})
    git("add", "-A", cwd=repo)
    out = pre_commit("try-repo", str(REPO), "grounding-check-system", cwd=repo, home=tmp_path / "pc")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "answers/good.md:7:7: error GR103 quote-mismatch" in out.stdout
    assert "Failed" in out.stdout


def test_try_repo_passes_good_drafts_and_ignores_evidence_and_other_markdown(repo: Path, tmp_path: Path) -> None:
    write(repo, {"answers/good.md": GOOD + "\n", "README.md": "# 说明\n活动时间是周四16:30。\n",
                 "evidence/refund.md": FILES["evidence/refund.md"] + "- 运费：卖家承担\n",
                 "notes.answer.json": dumps({"status": "answered", "claims": [claim("schedule", 2, 8)],
                                             "missing_fields": []})})
    git("add", "-A", cwd=repo)
    out = pre_commit("try-repo", str(REPO), "grounding-check-system", cwd=repo, home=tmp_path / "pc")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Passed" in out.stdout


def test_a_commit_without_drafts_checks_nothing(repo: Path, tmp_path: Path) -> None:
    write(repo, {"README.md": "# 改了说明\n"})
    git("add", "-A", cwd=repo)
    out = pre_commit("try-repo", str(REPO), "grounding-check-system", "--verbose", cwd=repo, home=tmp_path / "pc")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no drafts among the 1 path(s) given" in out.stdout


def test_a_local_hook_config_blocks_the_commit_itself(repo: Path, tmp_path: Path) -> None:
    """The README's ``repo: local`` configuration, installed as a real git hook."""
    write(repo, {".pre-commit-config.yaml": readme_precommit_config()})
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "hook config", cwd=repo)
    assert pre_commit("install", cwd=repo, home=tmp_path / "pc").returncode == 0
    write(repo, {"answers/good.md": FORGED})
    git("add", "-A", cwd=repo)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc"),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    commit = subprocess.run(["git", "commit", "-m", "forged"], cwd=repo, env=env, capture_output=True, text=True)
    assert commit.returncode != 0
    assert "GR103 quote-mismatch" in commit.stdout + commit.stderr
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, env=env)
    assert log.stdout.splitlines()[0] == "hook config"  # the forged commit was not made
