"""The dependency arrow points one way (STYLE.md, SPEC §1): ``server`` imports
``grounding_core``, never back, and the core knows nothing of LSP or event loops.

Two checks: a static one over every module's syntax tree (catches imports inside functions
too), and a runtime one importing every core module in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from support import CASES, EXAMPLE_EVIDENCE, REPO, fixture_fingerprints, sha256

CORE = REPO / "grounding_core"
FORBIDDEN = ("pygls", "lsprotocol", "asyncio", "server", "grounding")
MODULES = sorted(CORE.glob("*.py"))


def imported_roots(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every absolute import in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value.split(".")[0]))
    return out


def test_the_core_has_modules_to_check() -> None:
    assert {p.name for p in MODULES} >= {"text.py", "evidence.py", "store.py", "drafts.py",
                                         "verify.py", "conflicts.py", "workspace.py", "fixes.py"}


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_core_module_imports_no_lsp_asyncio_or_server(path: Path) -> None:
    bad = [(line, name) for line, name in imported_roots(path) if name in FORBIDDEN]
    assert bad == [], f"{path.name} imports {bad}"


def test_relative_imports_stay_inside_the_core() -> None:
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        levels = [n.level for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert all(level <= 1 for level in levels), path.name


DRIVERS = ("postgres_backend",)
"""Adapters whose database driver imports asyncio itself (psycopg ships an async API); the
core never uses it, and they are imported only when an index names them (checked below)."""


def test_importing_the_whole_core_loads_no_lsp_or_event_loop() -> None:
    names = [p.stem for p in MODULES if p.stem != "__init__" and p.stem not in DRIVERS]
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module('grounding_core.' + name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_postgresql_driver_loads_only_for_a_postgresql_index(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from grounding_core.store import Store\n"
        f"Store({str(tmp_path / 'x.sqlite')!r}).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg'"
        " or m == 'grounding_core.postgres_backend'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases is not beside the repository")
def test_the_evidence_guard_fingerprints_every_shared_fixture_byte_exactly() -> None:
    prints = fixture_fingerprints()
    schedule = CASES / "time-current" / "evidence" / "schedule.md"
    assert prints[str(schedule)] == sha256(schedule.read_bytes())
    assert any(p.startswith(str(EXAMPLE_EVIDENCE)) for p in prints)
    assert len([p for p in prints if p.endswith("expect.json")]) == 6
