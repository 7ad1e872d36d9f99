"""``grounding``: the command line (SPEC §9).

Commands: ``check`` (the CI job), ``index``, ``conflicts``, ``context``, ``answer``, ``cite``,
``schema``, ``mcp``, ``memory`` (``grounding.cli.memory``), ``lsp``.
Exit status: 0 no error-severity finding, 1 some, 2 usage or configuration error.
Columns printed are 1-based code points, ``end_column`` exclusive.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import traceback
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grounding_core.backend import WriteFailed
from grounding_core.config import ConfigError, find_workspace_root
from grounding_core.model import FIRST_LINE, DraftReport, Finding, Severity, Status
from grounding_core.store import LOCK_WAIT_S, IndexBusy, IndexError_, ScanResult
from grounding_core.text import shorten
from grounding_core.workspace import Workspace

from ..report import finding_json, fingerprint_map, report_json
from . import cite, pipelines

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A usage or configuration problem: printed to stderr, exit status 2."""


def run() -> int:
    """The ``grounding`` console script and ``python -m grounding.cli``: :func:`main` on
    ``sys.argv``, in a process that runs this one command, so the garbage collector is set for
    it first (:func:`grounding_core.collector.process_start`), except for ``grounding lsp``,
    whose server keeps its own collector policy (``server/heap.py``).
    """
    global _COLLECTOR_SET
    command = sys.argv[1:2]
    if command != ["lsp"]:
        from grounding_core.collector import process_start

        process_start()
        _COLLECTOR_SET = True
    code = main()
    if command and command[0] in QUICK_EXIT:
        _exit_now(code)
    return code


_COLLECTOR_SET = False
"""Whether :func:`run` set this process's collector (then scans freeze what they keep)."""

QUICK_EXIT = frozenset({"check", "index", "conflicts", "log"})
"""Commands whose process ends right after :func:`main` returns, without the interpreter's
teardown (freeing every module and object one by one: 10-15 ms of a 10k check's process).
They start no thread and leave nothing open: ``main`` has closed every workspace it opened
(the index's connections, its write lock), every file they write is written and closed inside
``main`` (``--fix``), and :func:`_exit_now` flushes stdout and stderr first. The servers
(``lsp``, ``mcp``) and the other commands exit the usual way."""


def _exit_now(code: int) -> None:
    """Flush stdout and stderr, then end the process with ``code`` (``os._exit``: no atexit
    handlers, no teardown). When a flush fails (a closed pipe) it returns, and the caller
    exits the usual way, which reports that as Python does.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``argv``, default ``sys.argv[1:]``); returns the exit status. Callers
    in another program (tests) keep their process's collector settings (:func:`run` sets the
    CLI's).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"grounding: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, IndexError_, WriteFailed, FileNotFoundError) as exc:
        print(f"grounding: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    finally:
        _close_opened()


_OPENED: list[Workspace] = []
"""Workspaces this command opened; closed when it returns (a shared index's writer lock and
connections go with them, also when ``main`` runs in-process, as in the tests)."""


def _close_opened() -> None:
    while _OPENED:
        try:
            _OPENED.pop().store.close()
        except Exception:  # noqa: BLE001  (closing is best effort; the result is already out)
            pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grounding",
        description="Check that every claim of an answer cites a verbatim, current, visible line of evidence.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--root", type=Path, default=None,
                       help="workspace root (default: the nearest folder at or above the current one"
                       " holding grounding.toml, else the current folder)")
        p.add_argument("--evidence", help="evidence folder, relative to the root (overrides grounding.toml)")
        p.add_argument("--today", type=_date, help="pin today's date (YYYY-MM-DD) for activity checks")

    check = sub.add_parser("check", help="check drafts and print findings (SPEC §9)")
    common(check)
    check.add_argument("paths", nargs="*", type=Path, help="drafts to check (default: the configured globs)")
    check.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    check.add_argument("--fix", action="store_true", help="apply safe fixes (quote, re-anchor) to the drafts")
    check.add_argument("--at", type=int, metavar="N", help="check against the index after its first N events")
    _pipeline_check_options(check)

    index = sub.add_parser("index", help="update the index and print a summary")
    common(index)
    index.add_argument("--format", choices=("text", "json"), default="text")
    index.add_argument("--to", metavar="URL",
                       help="then copy this workspace's SQLite log into the shared index at URL"
                       " (postgresql://...; idempotent)")
    index.add_argument("--from", dest="source", metavar="PATH",
                       help="with --to: the SQLite index file to copy as it is"
                       " (default: the configured one, after a scan)")
    index.set_defaults(run=cmd_index)

    conflicts = sub.add_parser("conflicts", help="list same-field conflicts in the active index")
    common(conflicts)
    conflicts.add_argument("--format", choices=("text", "json"), default="text")
    conflicts.set_defaults(run=cmd_conflicts)

    context = sub.add_parser("context", help="show the compiled context of a draft (SPEC §8)")
    common(context)
    context.add_argument("draft", type=Path)
    context.add_argument("--format", choices=("text", "json"), default="text")
    context.set_defaults(run=cmd_context)

    answer = sub.add_parser("answer", help="draft an answer from visible evidence only")
    common(answer)
    answer.add_argument("--question", required=True)
    answer.add_argument("--fields", nargs="+", help="the fields to answer; without it the closed question"
                        " grammar reads them from the question (SPEC §13)")
    answer.add_argument("--subject")
    answer.add_argument("--limit", type=int, default=1500)
    answer.add_argument("--reserve", type=int, default=240)
    answer.add_argument("--format", choices=("md", "json"), default="md")
    answer.set_defaults(run=cmd_answer)

    log = sub.add_parser("log", help="list the index's events (seq, kind, doc_id, version, path, time) for --at N;"
                         " read-only (run `grounding index` first to bring it up to date)")
    common(log)
    log.add_argument("--doc", metavar="DOC_ID", help="only this document's events")
    log.add_argument("--format", choices=("text", "json"), default="text")
    log.set_defaults(run=cmd_log)

    _pipeline_commands(sub, common)

    from . import memory as memory_cli  # memory hook (SPEC §11): grounding memory ...

    memory_cli.add_parser(sub)

    lsp = sub.add_parser("lsp", help="run the language server on stdio")
    lsp.set_defaults(run=cmd_lsp)
    return parser


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from None


def open_workspace(args: argparse.Namespace, persistent: bool = False) -> Workspace:
    """Open the workspace named by ``--root``/``--evidence``/``--today``; UsageError if unusable.

    ``persistent``: the command exists to write the index (``grounding index``), so an index
    that cannot be opened is a UsageError, not a warning and an in-memory index whose writes
    are lost at exit.
    """
    root: Path = args.root if args.root is not None else find_workspace_root(Path.cwd())
    if not root.is_dir():
        raise UsageError(f"--root {root}: not a folder")
    overrides: dict[str, Any] = {}
    if args.evidence:
        evidence = Path(args.evidence)
        overrides["evidence"] = str(evidence.resolve() if evidence.is_absolute() else evidence)
    if args.today:
        overrides["today"] = args.today.isoformat()
    ws = Workspace.open(root, **overrides)
    _OPENED.append(ws)
    if persistent and ws.fallback:
        raise UsageError(f"{(ws.warning or '').removesuffix('; using an in-memory index for this run')};"
                         " nothing was indexed (an in-memory index would be lost at exit): free disk"
                         " space or repair the file, or set 'index' in grounding.toml, then run it again")
    if persistent and ws.store.backend.read_only is not None:
        raise UsageError(f"cannot update the index {ws.config.index_display}: it is {ws.store.backend.read_only};"
                         " nothing was indexed (`grounding check` still checks against it as last committed)")
    if ws.warning:
        print(f"grounding: warning: {ws.warning}", file=sys.stderr)
    if not ws.config.evidence_root.is_dir():
        if args.root is None and ws.config.source == "defaults" and not args.evidence:
            raise UsageError(f"no grounding.toml (or [tool.grounding] in pyproject.toml) in {root} or any"
                             f" folder above it, and {root} has no evidence folder: {_workspace_hint(root)}")
        if ws.config.evidence_root.exists():
            raise UsageError(f"evidence = {ws.config.evidence_root} is not a folder"
                             " (set 'evidence' in grounding.toml to the evidence folder, or pass --evidence)")
        raise UsageError(f"evidence folder {ws.config.evidence_root} does not exist"
                         " (set 'evidence' in grounding.toml or pass --evidence)")
    return ws


READ_LOCK_WAIT_S = 5.0
"""How long a reading command (``check``, ``conflicts``) waits for another process's write
lock before it answers from the index as last committed (docs/decisions.md, "Index")."""


def _workspace_hint(folder: Path) -> str:
    """How to name the workspace: ``--root`` with the subfolders of ``folder`` that hold a
    ``grounding.toml`` (one level, at most 3 named), or the general advice.
    """
    try:
        found = sorted(p.name for p in folder.iterdir() if (p / "grounding.toml").is_file())[:3]
    except OSError:
        found = []
    if found:
        names = " or ".join(f"--root {name}" for name in found)
        return f"pass {names} (or cd into it), or run from inside a workspace"
    return "pass --root WORKSPACE (the folder holding grounding.toml), or cd into the workspace"


def _scan(ws: Workspace, show_progress: bool) -> ScanResult:
    """Scan the evidence folder (a progress bar on a terminal). On a shared index another
    process writes, the scan appends nothing: a note on stderr says who writes. When another
    process holds the index's write lock (it is indexing) for more than
    :data:`READ_LOCK_WAIT_S`, say so on stderr and use the last committed state.
    """
    try:
        return _scan_now(ws, show_progress)
    except (IndexBusy, WriteFailed) as exc:
        result = ws.committed()
        print(f"grounding: warning: {exc}; checking against the index as last committed"
              f" ({result.snapshot.seq} events): evidence changed since is not seen", file=sys.stderr)
        return result


def _scan_now(ws: Workspace, show_progress: bool, lock_wait: float = READ_LOCK_WAIT_S) -> ScanResult:
    """Scan, waiting up to ``lock_wait`` seconds for another process's lock (then
    :class:`IndexBusy`); on a shared index another process writes, a note on stderr says who.
    """
    result = _scan_with_progress(ws, show_progress, lock_wait)
    if result.writer is not None:
        print(f"grounding: note: {result.writer}; this run read its state and appended nothing",
              file=sys.stderr)
    return result


def _scan_with_progress(ws: Workspace, show_progress: bool, lock_wait: float) -> ScanResult:
    """``Store.scan`` with a rich progress bar when asked; in a process :func:`run` set up, the
    scan's pause hook is the collector's (:func:`grounding_core.collector.scan_pause`).
    """
    pause = None
    if _COLLECTOR_SET:
        from grounding_core.collector import scan_pause

        pause = scan_pause()
    if not show_progress:
        return ws.store.scan(ws.config, lock_wait=lock_wait, pause=pause)
    from rich.progress import Progress

    with Progress(transient=True, console=_stderr_console()) as bar:
        task = bar.add_task("indexing evidence", total=None)

        def progress(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total, description=f"indexing {path[-40:]}")

        return ws.store.scan(ws.config, progress, lock_wait=lock_wait, pause=pause)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


# -- check -----------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    if args.fix and args.at is not None:
        # a fix computed against a past state would write citations of versions that are no
        # longer current (SPEC §9: --fix applies the §10 fixes, which re-anchor to the present)
        raise UsageError(f"--fix cannot be combined with --at {args.at}: the drafts are written for the"
                         " present index, and fixes computed against the state after event"
                         f" {args.at} would cite versions that may no longer be current; run"
                         " `grounding check --fix` without --at")
    ws = open_workspace(args)
    if args.at is not None and ws.fallback:
        raise UsageError(f"--at {args.at}: the index could not be opened, and the in-memory index"
                         " used instead holds only this run's events, so event numbers from"
                         " `grounding log` mean nothing here; repair or rebuild the index first")
    scan = _scan(ws, sys.stderr.isatty() and args.format == "text")
    snapshot = scan.snapshot
    if args.at is not None:
        try:
            snapshot = ws.store.snapshot(at=args.at)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    paths = _draft_paths(ws, args.paths)
    if paths is None:
        paths = ws.discover_drafts()
        if not paths and not _say_drafts_inside_evidence(ws):
            globs = ", ".join(json.dumps(g, ensure_ascii=False) for g in ws.config.drafts)
            print(f"grounding: warning: no draft matches drafts = [{globs}] under {ws.config.root};"
                  " nothing was checked (check the globs in grounding.toml, or name drafts on the"
                  " command line)", file=sys.stderr)
    elif not paths:  # folders given, none holding a draft: nothing to check, never every draft
        print(f"grounding: warning: no drafts under {', '.join(map(str, args.paths))}; nothing to check",
              file=sys.stderr)
    reports = [_check_one(ws, path, snapshot) for path in paths]
    if args.fix:
        reports = _apply_fixes(ws, reports, snapshot)
    display = _evidence_display(ws)
    # text output names only files with findings; JSON and SARIF list every evidence file
    everything = args.format != "text"
    evidence = {display(p): fs for p, fs in sorted(item for item in scan.evidence.items() if item[1] or everything)}
    fingerprints = fingerprint_map(ws.config.root, reports, evidence)
    reports, evidence, accepted = _apply_baseline(args, reports, evidence, fingerprints)
    if args.format == "json":
        print(json.dumps(report_json(reports, evidence, fingerprints), ensure_ascii=False, indent=1))
    elif args.format == "sarif":
        from . import sarif  # only for --format sarif

        print(json.dumps(sarif.report(reports, evidence, ws.config.root, fingerprints), ensure_ascii=False,
                         indent=1))
    else:
        print_text(reports, evidence, accepted)
    errors = sum(r.error_count for r in reports) + sum(
        1 for fs in evidence.values() for f in fs if f.effective_severity is Severity.ERROR)
    return EXIT_ERRORS if errors else EXIT_OK


def _evidence_display(ws: Workspace) -> Any:
    """``config.evidence_display`` for many paths: a prefix when the evidence folder is inside
    the root (the usual case), else the general conversion.
    """
    config = ws.config
    try:
        prefix = config.evidence_root.relative_to(config.root).as_posix()
    except ValueError:
        return config.evidence_display
    head = "" if prefix == "." else prefix + "/"
    return lambda rel: head + rel


def _draft_paths(ws: Workspace, paths: list[Path]) -> list[str] | None:
    if not paths:
        return None
    out: list[str] = []
    for path in paths:
        full = path if path.is_absolute() else Path.cwd() / path
        if not full.exists():
            alt = ws.config.root / path
            if alt.exists():
                full = alt
            else:
                raise UsageError(f"{path}: no such file")
        if full.is_dir():
            prefix = ws.rel(full).rstrip("/") + "/"
            out.extend(p for p in ws.discover_drafts() if prefix == "./" or p.startswith(prefix))
        elif full.resolve().is_relative_to(ws.config.evidence_root):
            raise UsageError(f"{path} is under the evidence folder: evidence files are never drafts")
        elif not full.is_file():
            raise UsageError(f"{path}: not a regular file")
        else:
            out.append(ws.rel(full))
    return out


def _say_drafts_inside_evidence(ws: Workspace) -> bool:
    """No draft was found: when a file under the evidence folder matches the drafts globs (the
    drafts folder was made evidence, e.g. ``evidence = "answers"`` or ``"."``), say on stderr
    that evidence is never a draft (SPEC §2); stops at the first such file. True when it said so.
    """
    config = ws.config
    for dirpath, dirnames, filenames in os.walk(config.evidence_root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".grounding", "node_modules")]
        for name in filenames:
            rel = ws.rel(Path(dirpath) / name)
            if config.draft_matches(rel):
                print(f"grounding: warning: no drafts: {one_line(rel)} matches the drafts globs but is under the"
                      f" evidence folder {config.evidence_display('.').removesuffix('/.')}, and evidence files"
                      " are never drafts; keep drafts outside it (set 'evidence' or 'drafts' in grounding.toml)",
                      file=sys.stderr)
                return True
    return False


def _check_one(ws: Workspace, rel_path: str, state: Any) -> DraftReport:
    """Check one draft; an unexpected exception becomes a finding on that draft (issue 13
    item 10), so one bad draft never hides the others and never prints a traceback on stdout
    (exit status 2 stays for usage errors). The traceback goes to stderr only when
    ``GROUNDING_DEBUG`` is set.
    """
    try:
        return ws.check_file(rel_path, state)
    except Exception as exc:  # a bug, not bad input: report it on the draft and go on
        if os.environ.get("GROUNDING_DEBUG"):
            traceback.print_exc(file=sys.stderr)
        print(f"grounding: internal error while checking {rel_path}: {type(exc).__name__}"
              " (set GROUNDING_DEBUG=1 for the traceback)", file=sys.stderr)
        return internal_error_report(rel_path, exc)


def _edit_before(text: str, edit: Any) -> str:
    """The text an edit replaces (shortened), for the ``--fix`` log line ``old → new``."""
    from grounding_core.text import LineIndex

    index = LineIndex(text)
    span = edit.span
    return shorten(text[index.offset(span.start_line, span.start_col):index.offset(span.end_line, span.end_col)], 100)


def internal_error_report(rel_path: str, exc: BaseException) -> DraftReport:
    """The report of a draft whose check raised: one ``malformed-citation`` error at 1:1.

    GR101 because the draft could not be verified (it fails closed: its status is
    ``abstain``); the message names the exception so the writer can report it.
    """
    detail = shorten(str(exc).splitlines()[0] if str(exc) else "", 120)
    return DraftReport(
        path=rel_path, status=Status.ABSTAIN, required_fields=[], covered_fields=[],
        missing_fields=[], field_completeness=False, coverage=0.0, same_key_sources_checked=0,
        findings=[Finding(
            "malformed-citation", FIRST_LINE,
            f"Grounding could not check this draft: internal error {type(exc).__name__}"
            + (f" ({detail})" if detail else "") + "; nothing in it counts as verified",
            hint="This is a bug in Grounding, not in the draft: please report it with the draft."
            " The other drafts were checked.",
        )],
    )


def _apply_fixes(ws: Workspace, reports: list[DraftReport], state: Any) -> list[DraftReport]:
    """Apply every finding's safe fix (quote replacement, re-anchor, IME slip) and re-check.

    SPEC §10 safe fixes. Spans are in the text :meth:`Workspace.check_file` saw, which has
    no BOM; a draft's BOM is set aside while editing and written back. Line ends are kept as
    they are. Each draft is written atomically (:func:`grounding_core.fixes.write_atomic`);
    a draft that is, or links to, an evidence file is never written (a message on stderr,
    the report stands).
    """
    out: list[DraftReport] = []
    for report in reports:
        out.append(_fix_draft(ws, report, state))
    return out


FIX_PASSES = 4
"""Fix-and-recheck rounds per draft: a fix can uncover another (an id written with an input
method hides its quote's missing list marker until the id parses)."""


def _fix_draft(ws: Workspace, report: DraftReport, state: Any) -> DraftReport:
    """Apply ``report``'s safe fixes, re-check, and repeat while new fixes appear (at most
    :data:`FIX_PASSES` rounds); the report of the last check is returned.
    """
    from grounding_core.fixes import UnsafeWrite, apply_edits, check_draft_write, write_atomic

    for _ in range(FIX_PASSES):
        edits = list(dict.fromkeys(edit for f in report.findings if f.fix is not None for edit in (f.fix, *f.also)))
        if edits:
            try:
                path = check_draft_write(ws.config.root / report.path, ws.config.evidence_root)
                text = path.read_bytes().decode("utf-8")
                bom = "\ufeff" if text.startswith("\ufeff") else ""
                write_atomic(path, (bom + apply_edits(text[len(bom):], edits)).encode("utf-8"))
            except (UnsafeWrite, OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                print(f"grounding: not fixing {report.path}: {reason}", file=sys.stderr)
                return report
            for edit in sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col)):
                print(f"grounding: fixed {one_line(report.path)}:{edit.span.start_line + 1}: {edit.title}: "
                      f"{_edit_before(text[len(bom):], edit)} → {shorten(edit.new_text, 100)}", file=sys.stderr)
            report = _check_one(ws, report.path, state)
        else:
            break
    return report


def one_line(path: str) -> str:
    r"""``path`` for a line of the text report: control characters and line separators (a file
    name holding a newline, a tab or ESC) shown as ``\n``, ``\t``, ``\x1b``, ``\u2028``, so each
    finding stays one ``path:line:col:`` line; every other character (CJK, emoji, U+3000) as is.
    """
    if path.isprintable():
        return path
    return "".join(c.encode("unicode_escape").decode("ascii")
                   if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in path)


def print_text(reports: list[DraftReport], evidence: dict[str, list[Finding]],
               accepted: dict[str, int] | None = None) -> None:
    """Compiler-style lines: ``path:line:col: severity CODE name: message`` + a hint line;
    ``accepted``: findings per draft path that ``--baseline`` left out (said in its summary).
    """
    counts = {s: 0 for s in Severity}
    on_evidence = {s: 0 for s in Severity}
    for path, findings in list(evidence.items()) + [(r.path, r.findings) for r in reports]:
        for f in findings:
            (on_evidence if path in evidence else counts)[f.effective_severity] += 1
            print(f"{one_line(path)}:{f.span.start_line + 1}:{f.span.start_col + 1}: "
                  f"{f.effective_severity.value} {f.code} {f.name}: {f.message}")
            if f.hint:
                print(f"    hint: {f.hint}")
    for r in reports:
        print(summary_line(r, (accepted or {}).get(r.path, 0)))
    known = sum((accepted or {}).values())
    print(f"{len(reports)} draft(s): {counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s),"
          f" {counts[Severity.INFORMATION]} information" + (f", {known} accepted by the baseline" if known else "")
          + _evidence_summary(evidence, on_evidence))


def _evidence_summary(evidence: dict[str, list[Finding]], counts: dict[Severity, int]) -> str:
    """``; N evidence file(s): E error(s), W warning(s)`` for the evidence findings printed
    above the draft summary (counted apart from the drafts'), or "" when there are none.
    """
    files = sum(1 for findings in evidence.values() if findings)
    if not files:
        return ""
    return (f"; {files} evidence file(s): {counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]}"
            f" warning(s), {counts[Severity.INFORMATION]} information")


def summary_line(r: DraftReport, accepted: int = 0) -> str:
    """One line per draft: status and finding counts first (and how many findings the baseline
    accepted), then fields and coverage (§7.5).

    Coverage is only shown when the draft requires fields; with no active line carrying a
    required field it is 1.00 by definition, and the line says so instead of looking like success.
    """
    counts = {s: 0 for s in Severity}
    for f in r.findings:
        counts[f.effective_severity] += 1
    found = ", ".join(f"{n} {label}" for n, label in (
        (counts[Severity.ERROR], "error(s)"), (counts[Severity.WARNING], "warning(s)"),
        (accepted, "accepted by the baseline")) if n) or "no problems"
    line = f"{one_line(r.path)}: {r.status.value} ({found})"
    if not r.required_fields:
        return line + "; no required fields"
    line += (f"; required {_list(r.required_fields)}, covered {_list(r.covered_fields)},"
             f" missing {_list(r.missing_fields)}")
    if r.coverage == 1.0 and r.missing_fields:
        return line + "; coverage 1.00 only because no active line carries a missing field"
    return line + f"; coverage {r.coverage:.2f}"


def _list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


# -- pipelines: check --baseline/--drafts-only, cite, schema, mcp (SPEC §9, §14) ----------------


def _pipeline_check_options(check: argparse.ArgumentParser) -> None:
    check.add_argument("--baseline", type=Path, metavar="FILE",
                       help="report only findings not in FILE (an earlier --format sarif or json report)")
    check.add_argument("--drafts-only", action="store_true",
                       help="check only the given paths that are drafts by the configured globs (pre-commit)")
    check.set_defaults(run=cmd_check_paths)


def cmd_check_paths(args: argparse.Namespace) -> int:
    """``check``, with ``--drafts-only`` narrowing the paths first (none left: nothing to check)."""
    if args.drafts_only and args.paths:
        if not pipelines.workspace_root(args).is_dir():
            raise UsageError(f"--root {args.root}: not a folder")
        kept = pipelines.drafts_only(args)
        if kept is None:
            print(f"grounding: no drafts among the {len(args.paths)} path(s) given; nothing to check",
                  file=sys.stderr)
            return EXIT_OK
        args.paths = kept
    return cmd_check(args)


def _apply_baseline(args: argparse.Namespace, reports: list[DraftReport], evidence: dict[str, list[Finding]],
                    fingerprints: dict[int, str]
                    ) -> tuple[list[DraftReport], dict[str, list[Finding]], dict[str, int]]:
    """``--baseline``: the reports and evidence without the known findings, and how many each
    draft had (path -> count).
    """
    if getattr(args, "baseline", None) is None:
        return reports, evidence, {}
    from . import baseline  # only for --baseline

    try:
        known = baseline.load(args.baseline)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    before = {r.path: len(r.findings) for r in reports}
    reports, evidence, hidden = baseline.apply(known, reports, evidence, fingerprints)
    print(f"grounding: baseline {args.baseline}: {hidden} known finding(s) not reported", file=sys.stderr)
    return reports, evidence, {r.path: before[r.path] - len(r.findings) for r in reports}


def _pipeline_commands(sub: Any, common: Any) -> None:
    cite.add_parser(sub, common)
    sub.choices["cite"].set_defaults(run=cmd_cite)
    pipelines.add_schema_parser(sub)
    mcp = sub.add_parser("mcp", help="serve the MCP tools (check_answer, cite, search_evidence, compile_context)"
                         " on stdio")
    common(mcp)
    mcp.set_defaults(run=pipelines.cmd_mcp)


def cmd_cite(args: argparse.Namespace) -> int:
    if args.target is None and args.grep is None:
        raise UsageError("give PATH:LINE, DOC_ID[@VERSION][:LINE], DOC_ID --grep TEXT or --grep TEXT")
    return cite.run(args, open_workspace(args))


# -- index / conflicts -------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    if args.to:
        return cmd_index_to(args)
    ws = open_workspace(args, persistent=True)
    scan = _scan_now(ws, sys.stderr.isatty() and args.format == "text", LOCK_WAIT_S)  # IndexBusy, WriteFailed: exit 2
    ws.store.build_fts()  # `grounding index` leaves a complete index: full-text rows included
    snapshot = scan.snapshot
    today = ws.today()
    stats = ws.store.stats(snapshot, today)  # kept for the next run with nothing changed
    conflicts = ws.store.conflicting_keys(snapshot, today)
    problems = {ws.config.evidence_display(p): fs for p, fs in sorted(scan.evidence.items()) if fs}
    summary = {
        "documents": stats.documents, "versions": stats.versions,
        "active_documents": stats.active_documents, "active_lines": stats.active_lines,
        "active_field_lines": stats.active_field_lines, "conflicts": len(conflicts),
        "events": ws.store.event_count(), "files_read": len(scan.changed),
        "events_appended": len(scan.events), "index": ws.config.index_display,
        "evidence_problems": {p: [finding_json(f) for f in fs] for p, fs in problems.items()},
    }
    if args.format == "json":
        print(json.dumps(summary, ensure_ascii=False, indent=1))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"Grounding index ({ws.config.index_display})")
        table.add_column("what")
        table.add_column("count", justify="right")
        for key in ("documents", "versions", "active_documents", "active_lines", "active_field_lines",
                    "conflicts", "events", "files_read", "events_appended"):
            table.add_row(key.replace("_", " "), str(summary[key]))
        Console().print(table)
        for path, fs in problems.items():
            for f in fs:
                print(f"{one_line(path)}:{f.span.start_line + 1}:{f.span.start_col + 1}: "
                      f"{f.effective_severity.value} {f.code} {f.name}: {f.message}")
    return EXIT_OK


def cmd_index_to(args: argparse.Namespace) -> int:
    """``grounding index --to URL``: copy a local SQLite log into a shared index (SPEC §4).

    The source is ``--from PATH`` when given (copied as it is), else this workspace's
    configured SQLite index, brought up to date by a scan first. Events keep their sequence
    numbers, so ``replay(n)`` / ``--at N`` answer the same on both; a second run appends
    nothing. Exit 2 when the target cannot be reached, another process writes it, or it
    holds another log.
    """
    from grounding_core.backend import is_url
    from grounding_core.index import ParseSettings
    from grounding_core.store import Store

    target_url = str(args.to)
    if not is_url(target_url):
        raise UsageError(f"--to {target_url!r}: expected a postgresql:// URL")
    if args.source:
        ws = None
        source_path = str(Path(args.source).resolve())
        if not Path(source_path).is_file():
            raise UsageError(f"--from {args.source}: no such index file")
        from grounding_core.config import load_config

        config = load_config(args.root)
    else:
        ws = open_workspace(args)
        config = ws.config
        if config.index_shared:
            raise UsageError(f"--to copies a local SQLite index, but this workspace's index is already"
                             f" {config.index_display}; name the SQLite file with --from")
        _scan_now(ws, sys.stderr.isatty() and args.format == "text", LOCK_WAIT_S)  # IndexBusy: exit 2
        source_path = config.index_path
    settings = ParseSettings(config.field_separators, config.meta_fields, config.subject_fields)
    source = ws.store if ws is not None else Store(source_path, settings)
    try:
        target = Store(target_url, settings)
        try:
            done = target.import_log(source)
            target.build_fts()
            count = target.event_count()
        finally:
            target.close()
    finally:
        if ws is None:
            source.close()
    summary = {"from": source.location, "to": target.location, "events_appended": done.appended,
               "events_already_there": done.already, "events": count, "files": done.files}
    if args.format == "json":
        print(json.dumps(summary, ensure_ascii=False, indent=1))
    else:
        print(f"grounding: copied {done.appended} event(s) from {source.location} to {target.location}"
              f" ({done.already} already there; the shared log holds {count}; {done.files} file rows)")
    return EXIT_OK


MOVED = "no longer indexed from "
"""How a revoke's reason names the file a version moved away from (``Store.scan``)."""


def cmd_log(args: argparse.Namespace) -> int:
    """``grounding log``: every event (SPEC §4, §9), so ``check --at N`` can be chosen.

    Read-only: it never scans, so it never appends (run ``grounding index`` or ``check`` to
    bring the log up to date). Paths are printed as stored: relative to the evidence folder
    each file was read from (an earlier ``--evidence`` may have named another one).
    """
    ws = open_workspace(args)
    entries = ws.store.log_entries(args.doc)
    # a revoke names the file of the version it revokes, in the same form as its import: the
    # path as stored (relative to the evidence folder it was read from), never re-rooted
    def display(path: str) -> str:
        return path
    imported: dict[tuple[str, int], str] = {}
    rows: list[tuple[Any, str, str]] = []  # entry, path and reason as shown
    for e in entries:
        if e.kind == "import" and not e.data:
            imported[(e.doc_id, e.version)] = e.path
        raw = e.path or ("" if e.data else imported.get((e.doc_id, e.version), ""))
        reason = e.reason
        if reason.startswith(MOVED) and reason[len(MOVED):]:
            reason = MOVED + display(reason[len(MOVED):])
        rows.append((e, display(raw) if raw else "", reason))
    if args.format == "json":
        print(json.dumps([{"seq": e.seq, "kind": e.kind, "doc_id": e.doc_id, "version": e.version,
                           "sha256": e.sha256, "path": path, "reason": reason, "recorded_at": e.recorded_at,
                           **({"memory": json.loads(e.data)} if e.data else {})} for e, path, reason in rows],
                         ensure_ascii=False, indent=1))
        return EXIT_OK
    for e, path, reason in rows:
        if e.data:  # memory hook (SPEC §11): memory:SCOPE/KEY and what the event did
            from grounding_core.memory import MemoryEvent

            event = MemoryEvent.from_row(e.seq, e.kind, e.version, e.data, e.recorded_at)
            print(f"{e.seq:>6}  {e.recorded_at}  {e.kind:<6}  memory:{event.scope}/{event.key}"
                  f"  {event.describe()}")
            continue
        where = f" {path}" if path else ""
        detail = f" sha256:{e.sha256[:12]}{where}" if e.kind == "import" else f"{where} ({reason})"
        print(f"{e.seq:>6}  {e.recorded_at}  {e.kind:<6}  {e.doc_id}@{e.version}{detail}")
    if not entries:
        print("the event log is empty" + (f" for {args.doc!r}" if args.doc else ""))
    else:
        print(f"{len(entries)} event(s); `grounding check --at N` checks against the state after event N")
    return EXIT_OK


def cmd_conflicts(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    snapshot = _scan(ws, False).snapshot
    from grounding_core.conflicts import all_conflicts

    today = ws.today()
    keys = ws.store.conflicting_keys(snapshot, today)  # kept for the next run with nothing changed
    conflicts = all_conflicts(snapshot, today, keys=keys)
    display = _evidence_display(ws)
    if args.format == "json":
        print(json.dumps([conflict_json(ws, c, display) for c in conflicts], ensure_ascii=False, indent=1))
    else:
        out = []
        for c in conflicts:
            out.append(c.describe())
            out.extend(f"    {display(kl.path)}:{kl.line}: {kl.field}：{kl.value}" for kl in c.lines)
        out.append(f"{len(conflicts)} conflict(s)")
        print("\n".join(out))
    return EXIT_ERRORS if conflicts else EXIT_OK


def conflict_json(ws: Workspace, c: Any, display: Any = None) -> dict[str, Any]:
    """One conflict as ``grounding conflicts --format json`` prints it; ``display`` maps an
    evidence path to one relative to the root (default ``config.evidence_display``).
    """
    shown = display or ws.config.evidence_display
    return {
        "subject": c.subject, "field": c.field, "values": [
            {"value": kl.value, "doc_id": kl.doc_id, "version": kl.version, "line": kl.line,
             "path": shown(kl.path)} for kl in c.lines],
    }


# -- context / answer --------------------------------------------------------------------------


def cmd_context(args: argparse.Namespace) -> int:
    from . import budget

    return budget.cmd_context(args, open_workspace(args), _read_scan)


def cmd_answer(args: argparse.Namespace) -> int:
    from . import budget

    return budget.cmd_answer(args, open_workspace(args), _read_scan)


def _read_scan(ws: Workspace) -> ScanResult:
    """A reading command's scan (:func:`_scan`, no progress bar): a full disk or another
    process's write lock gives the index as last committed, said on stderr, never exit 2.
    """
    return _scan(ws, False)


def cmd_lsp(args: argparse.Namespace) -> int:
    from server.app import serve_stdio

    return serve_stdio()  # the LSP exit code: 0 after shutdown + exit, 1 otherwise
