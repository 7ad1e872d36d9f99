"""``grounding memory add|approve|forget|list`` (SPEC §9, §11, §15 "§11 memory").

Memory entries are written only by these explicit acts (and by the editor command that asks
the writer to confirm). Every subcommand takes ``--root`` and ``--format text|json``; none of
them reads or scans the evidence folder.

Exit status: 0 when the act was written (or the list printed); 2 for a usage error, an act
that cannot be written (unknown entry, already approved, nothing to forget, a bad name; the
message says why and nothing is appended) or an index that cannot be opened. An in-memory
index (``index = ":memory:"``) is refused for the writing subcommands: the entry would be lost
when the command ends.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grounding_core.config import find_workspace_root, load_config
from grounding_core.memory import MemoryEntry, MemoryWriteError, entry_status, parse_memory_id, parse_memory_unit
from grounding_core.store import Store

EXIT_OK, EXIT_USAGE = 0, 2


class MemoryUsageError(Exception):
    """Printed as ``grounding: error: ...``; exit status 2."""


def add_parser(sub: Any) -> None:
    """Register ``grounding memory ...`` on the CLI's subparsers (hook in ``grounding.cli``)."""
    memory = sub.add_parser("memory", help="memory entries: approved facts no evidence file holds (SPEC §11)")
    acts = memory.add_subparsers(dest="memory_command", metavar="ACT")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--root", type=Path, default=None,
                       help="workspace root (default: the nearest folder at or above the current one"
                       " holding grounding.toml, else the current folder)")
        p.add_argument("--format", choices=("text", "json"), default="text")

    add = acts.add_parser("add", help="remember a value: the next version of SCOPE/KEY")
    common(add)
    add.add_argument("--scope", required=True, help="e.g. user-alice (no whitespace, '/', '@', '\"', '[', ']')")
    add.add_argument("--key", required=True, help="e.g. 语言")
    add.add_argument("--value", required=True, help="one line of text, e.g. 中文")
    add.add_argument("--approved-by", help="who approved it; without it the entry is a proposal")
    add.set_defaults(run=_guarded(cmd_add))

    approve = acts.add_parser("approve", help="approve a proposal: memory:SCOPE/KEY@VERSION")
    common(approve)
    approve.add_argument("entry", metavar="memory:SCOPE/KEY@VERSION")
    approve.add_argument("--by", required=True, help="who approves it")
    approve.set_defaults(run=_guarded(cmd_approve))

    forget = acts.add_parser("forget", help="retract a key: every version becomes inactive")
    common(forget)
    forget.add_argument("entry", metavar="memory:SCOPE/KEY")
    forget.add_argument("--reason", default="", help="why (kept in the log)")
    forget.set_defaults(run=_guarded(cmd_forget))

    listing = acts.add_parser("list", help="list memory entries with their state and a citation")
    common(listing)
    listing.add_argument("--scope", help="only this scope")
    listing.add_argument("--active", action="store_true", help="only active entries")
    listing.add_argument("--at", type=int, metavar="N", help="as of the index after its first N events")
    listing.set_defaults(run=_guarded(cmd_list))
    memory.set_defaults(run=lambda args: _usage(memory))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _guarded(act: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run one memory act; problems are one ``grounding: error:`` line and exit status 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            return act(args)
        except (MemoryUsageError, MemoryWriteError) as exc:
            print(f"grounding: error: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return run


def _store(args: argparse.Namespace, writing: bool) -> Store:
    root: Path = args.root if args.root is not None else find_workspace_root(Path.cwd())
    if not root.is_dir():
        raise MemoryUsageError(f"--root {root}: not a folder")
    config = load_config(root)
    if writing and config.index == ":memory:":
        raise MemoryUsageError("the index is ':memory:' (grounding.toml), so a memory entry would be"
                               " lost when this command ends; set index to a file")
    return Store.for_config(config)


def entry_json(entry: MemoryEntry, status: str) -> dict[str, Any]:
    """One entry for ``--format json``: identity, value, state, the paste-ready citation."""
    return {
        "id": entry.id, "scope": entry.scope, "key": entry.key, "version": entry.version,
        "value": entry.value, "quote": entry.quote, "sha256": entry.sha256, "status": status,
        "approved_by": entry.approved_by, "remembered_seq": entry.remembered_seq,
        "approved_seq": entry.approved_seq, "forgotten_seq": entry.forgotten_seq,
        "forget_reason": entry.forget_reason, "citation": entry.citation(),
    }


def _print(args: argparse.Namespace, entry: MemoryEntry, status: str, sentence: str) -> int:
    if args.format == "json":
        print(json.dumps(entry_json(entry, status), ensure_ascii=False, indent=1))
    else:
        print(sentence)
        print(f"    cite: {entry.citation()}")
    return EXIT_OK


def _status(store: Store, entry: MemoryEntry) -> str:
    return entry_status(store.snapshot().memory_versions(entry.scope, entry.key), entry.version)[0]


def cmd_add(args: argparse.Namespace) -> int:
    store = _store(args, writing=True)
    try:
        entry = store.remember(args.scope, args.key, args.value, args.approved_by)
        status = _status(store, entry)
    finally:
        store.close()
    if entry.approved:
        sentence = f"remembered {entry.id} (approved by {entry.approved_by}): {entry.quote}"
    else:
        sentence = (f"proposed {entry.id}: {entry.quote} — not active until approved:"
                    f" grounding memory approve {entry.id} --by NAME")
    return _print(args, entry, status, sentence)


def cmd_approve(args: argparse.Namespace) -> int:
    ref, problem = parse_memory_id(args.entry)
    if ref is None:
        raise MemoryUsageError(f"{problem} (approve takes memory:SCOPE/KEY@VERSION)")
    store = _store(args, writing=True)
    try:
        entry = store.approve(ref.scope, ref.key, ref.version, args.by)
        status = _status(store, entry)
    finally:
        store.close()
    return _print(args, entry, status, f"approved {entry.id} (by {entry.approved_by}): {entry.quote} is {status}")


def cmd_forget(args: argparse.Namespace) -> int:
    unit = parse_memory_unit(args.entry)
    if unit is None or unit.key is None or unit.version is not None:
        raise MemoryUsageError(f"{args.entry!r}: forget takes memory:SCOPE/KEY (every version is retracted)")
    store = _store(args, writing=True)
    try:
        entry = store.forget(unit.scope, unit.key, args.reason)
    finally:
        store.close()
    reason = f" ({entry.forget_reason})" if entry.forget_reason else ""
    return _print(args, entry, "forgotten",
                  f"forgot memory:{entry.scope}/{entry.key}{reason}: every version is inactive until"
                  " a new `grounding memory add`")


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args, writing=False)
    try:
        try:
            snapshot = store.snapshot(args.at)
        except ValueError as exc:
            raise MemoryUsageError(str(exc)) from None
        scopes = [args.scope] if args.scope else snapshot.memory_scopes()
        rows: list[tuple[MemoryEntry, str, str]] = []
        for scope in scopes:
            for key in snapshot.memory_keys(scope):
                versions = snapshot.memory_versions(scope, key)
                for version in sorted(versions, reverse=True):
                    status, why = entry_status(versions, version)
                    if not args.active or status == "active":
                        rows.append((versions[version], status, why))
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps([entry_json(e, state) for e, state, _ in rows], ensure_ascii=False, indent=1))
        return EXIT_OK
    for entry, state, why in rows:
        print(f"{entry.id}  {state:<10}  {entry.quote}  ({why})")
        if state == "active":
            print(f"    cite: {entry.citation()}")
    print(f"{len(rows)} memory entr{'y' if len(rows) == 1 else 'ies'}"
          + (f" as of event {snapshot.seq}" if args.at is not None else ""))
    return EXIT_OK
