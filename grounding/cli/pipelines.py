"""``grounding schema`` and ``grounding mcp`` (SPEC §14), and ``check --drafts-only``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grounding_core.config import find_workspace_root, load_config

SCHEMA_NAMES = ("answer", "context", "report")
"""The names ``grounding schema`` takes (``grounding.models.SCHEMAS``, imported only when the
command runs: pydantic is not loaded by the other commands)."""

EXIT_OK, EXIT_USAGE = 0, 2


def workspace_root(args: argparse.Namespace) -> Path:
    """``--root``, else the nearest folder at or above the working directory with grounding.toml."""
    root: Path | None = args.root
    return root if root is not None else find_workspace_root(Path.cwd())


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the answer wire (§5.2), the report (§9) or a context log (§6)."""
    from ..models import SCHEMAS, json_schema

    assert set(SCHEMAS) == set(SCHEMA_NAMES), "SCHEMA_NAMES must list grounding.models.SCHEMAS"
    print(json.dumps(json_schema(args.name), ensure_ascii=False, indent=1))
    return EXIT_OK


def add_schema_parser(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the answer wire, the report or a context log")
    p.add_argument("name", choices=sorted(SCHEMA_NAMES))
    p.set_defaults(run=cmd_schema)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdio; the index opens and scans in the background."""
    try:
        from ..mcp_server import serve
    except ImportError as exc:
        print(f"grounding: error: `grounding mcp` needs the MCP SDK ({exc.name}): pip install 'grounding[mcp]'",
              file=sys.stderr)
        return EXIT_USAGE
    root = workspace_root(args)
    if not root.is_dir():
        print(f"grounding: error: --root {root}: not a folder", file=sys.stderr)
        return EXIT_USAGE
    overrides = {"evidence": args.evidence} if args.evidence else {}
    serve(root.resolve(), overrides, args.today)
    return EXIT_OK


def drafts_only(args: argparse.Namespace) -> list[Path] | None:
    """``check --drafts-only``: the given paths that are drafts by the configured globs.

    For pre-commit, which passes every changed file: evidence files, other Markdown and JSON
    are left out silently. Returns None when nothing is left (check nothing, exit 0).
    """
    root = workspace_root(args).resolve()
    config = load_config(root)
    if args.evidence:
        config = config.with_overrides(evidence=args.evidence)
    kept: list[Path] = []
    for path in args.paths:
        full = (path if path.is_absolute() else Path.cwd() / path).resolve()
        if not full.is_file() or not full.is_relative_to(root) or full.is_relative_to(config.evidence_root):
            continue
        rel = full.relative_to(root).as_posix()
        if config.draft_matches(rel) and not any(part in (".git", ".grounding") for part in rel.split("/")):
            kept.append(full)
    return kept or None
