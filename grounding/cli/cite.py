"""``grounding cite``: paste-ready verified citations (SPEC §9; the logic is grounding_core.cite).

::

    grounding cite evidence/x.md:14            # one line of an evidence file
    grounding cite schedule:14                 # DOC_ID[:LINE], the active version
    grounding cite schedule@2:14               # DOC_ID@VERSION:LINE (must be the active version)
    grounding cite shapes@1#r2                 # the measured attributes of an image region (SPEC §12)
    grounding cite schedule --grep 活动时间     # the lines of one document that contain the text
    grounding cite --grep 到账                  # active lines of every document that contain it
    grounding cite schedule:14 --format json   # the citation and the eight-key JSON claim

Text output is one Markdown definition per line on stdout (``[^1]: ID sha256:HEX12 "LINE"``),
numbered from ``--label``; notes go to stderr. ``--format json`` prints ``{"citations": [...],
"skipped": [...]}``; when nothing can be cited it adds ``"error": {"code", "name", "message",
"hint"}`` (``code`` is ``GR1xx`` or null) with empty lists, and the message also goes to
stderr. Exit status 0 when something was printed, 1 when nothing can be cited (the message
says why), 2 for a usage error (stderr only, every format).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grounding_core.workspace import Workspace

    from ..api import Verifier

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
CODES = {"unknown-source": "GR102", "stale-citation": "GR104", "inactive-source": "GR106", "meta-field": "GR112"}


def add_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register ``cite`` on the ``grounding`` subparsers; ``common`` adds --root/--evidence/--today."""
    p = sub.add_parser("cite", help="print paste-ready verified citations of evidence lines")
    common(p)
    p.add_argument("target", nargs="?", help="PATH:LINE, DOC_ID[@VERSION][:LINE], an image region"
                   " DOC_ID[@VERSION]#rN, or DOC_ID (with --grep)")
    p.add_argument("--grep", metavar="TEXT", help="only lines containing TEXT (verbatim or after NFKC)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--label", type=int, default=1, metavar="N", help="number the footnotes from N (default 1)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N citations for --grep across"
                   " all documents (default 20)")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from grounding_core.cite import CiteError  # loaded by this command only, never by a check

    from ..api import Verifier, citation_model  # pydantic loads only for this command
    from ..models import Skipped

    verifier = _scanned_verifier(ws, Verifier)
    args.target = _undo_ime_slip(verifier, args.target)
    try:
        result = verifier.cite(args.target, grep=args.grep, limit=args.limit)
    except CiteError as exc:
        code = CODES.get(exc.name)
        reason = _index_problem(verifier, args.target) if exc.name == "unknown-source" else ""
        print(f"grounding: error: {code + ' ' if code else ''}{exc.name}: {exc.message}{reason}", file=sys.stderr)
        if exc.hint:
            print(f"    hint: {exc.hint}", file=sys.stderr)
        if args.format == "json":  # a pipeline reads why on stdout too (docs/decisions.md, SPEC §9)
            error = {"code": code, "name": exc.name, "message": exc.message + reason, "hint": exc.hint}
            print(json.dumps({"citations": [], "skipped": [], "error": error}, ensure_ascii=False, indent=1))
        return EXIT_ERRORS
    except ValueError as exc:
        print(f"grounding: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        out = {"citations": [citation_model(ws.config, c).model_dump(mode="json") for c in result.citations],
               "skipped": [Skipped.model_validate(s, from_attributes=True).model_dump() for s in result.skipped]}
        print(json.dumps(out, ensure_ascii=False, indent=1))
    else:
        for i, citation in enumerate(result.citations):
            print(citation.footnote(args.label + i))
        for s in result.skipped:
            print(f"grounding: note: {s.doc_id}:{s.line} left out: {s.message}", file=sys.stderr)
    return EXIT_OK


def _scanned_verifier(ws: Workspace, verifier_class: type[Verifier]) -> Verifier:
    """A verifier over ``ws`` after a scan. When another process holds the index's write lock
    (it is indexing) for more than ``READ_LOCK_WAIT_S``, a note on stderr says that cite waits
    for it, and for how long at most (then ``IndexBusy``: exit 2), instead of waiting silently.
    Unlike ``check``, cite does not answer from the last committed state: it prints
    citations to paste, which must name the versions the other process is committing.
    """
    from grounding_core.store import LOCK_WAIT_S, IndexBusy

    from . import READ_LOCK_WAIT_S

    verifier = verifier_class.from_workspace(ws, scan=False)
    try:
        verifier.reader.scan(lock_wait=READ_LOCK_WAIT_S)
    except IndexBusy:
        print(f"grounding: note: another process is writing the index {ws.store.location} (probably"
              f" indexing); cite waits for it to finish, at most {LOCK_WAIT_S:g} s more", file=sys.stderr, flush=True)
        verifier.reader.scan(lock_wait=LOCK_WAIT_S)
    return verifier


def _undo_ime_slip(verifier: Verifier, target: str | None) -> str | None:
    """``target`` with its input-method slips undone (``shipping＠2：11`` -> ``shipping@2:11``, the
    rule ``check --fix`` applies to citation ids), saying so on stderr; unchanged when it names an
    evidence path or a known doc_id as written, or the undone form names no known doc_id.
    """
    from grounding_core.cite import parse_target
    from grounding_core.drafts import ime_slip
    from grounding_core.image_claims import parse_region_id

    if not target or verifier.evidence_path(target) is not None:
        return target
    slip = ime_slip(target.strip())
    fixed = (parse_target(slip[0]) or parse_region_id(slip[0])[0]) if slip is not None else None
    if slip is None or fixed is None or not verifier.state.versions(fixed.doc_id):
        return target
    as_written = parse_target(target)
    if as_written is not None and verifier.state.versions(as_written.doc_id):
        return target  # a doc_id that really holds a full-width character
    print(f"grounding: note: read {target!r} as {slip[0]} (full-width characters an input method"
          " typed; a citation id's '@', ':' and numbers are ASCII)", file=sys.stderr)
    return slip[0]


def _index_problem(verifier: Verifier, target: str | None) -> str:
    """Why an evidence file named by ``target`` is not in the index (its evidence finding), if known."""
    scan = verifier.reader.last_scan
    located = verifier.evidence_path(target) if target else None
    if scan is None or located is None:
        return ""
    findings = scan.evidence.get(located[0], [])
    return "".join(f"; {f.code} {f.name}: {f.message}" for f in findings[:2])
