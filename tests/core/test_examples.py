"""The example workspace (``examples/``) gives the outcomes its README promises.

Two layers:

* a pure check that needs no engine: every citation in the example drafts is byte-exact
  (SPEC §3/§5: the quote is the whole cited line, the hash is a prefix of the sha256 of the
  file's raw bytes, lines count front matter) except the one quote that is deliberately cut
  in half — so the examples cannot silently rot when someone edits an evidence file;
* the real CLI: ``grounding check --root <copy of examples> --format json`` (SPEC §9) and, for
  each draft, the status and diagnostic names of the README table (SPEC §7).

The workspace is copied to a temporary folder first so the index (``.grounding/``) is never
written into the repository. ``examples/grounding.toml`` pins ``today = "2026-11-29"``, so the
expiry results do not depend on the day the tests run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# path -> expected outcome. ``errors`` is the exact set of error-severity names; ``has`` are
# further names (warnings, information) that must be present; ``lacks`` must be absent.
EXPECTED: dict[str, dict[str, Any]] = {
    "answers/open-day.md": {
        "status": "answered",
        "errors": set(),
        "has": set(),
        "lacks": {"context-undeclared", "uncited-claim", "claim-value-mismatch", "missing-field"},
        "missing_fields": [],
        "coverage": 1.0,
        "no_diagnostics": True,
    },
    "answers/open-day-registration.md": {
        "status": "partial",
        "errors": set(),
        "has": {"missing-field", "context-undeclared"},
        "lacks": {"claim-value-mismatch", "field-conflict"},
        "missing_fields": ["报名截止时间"],
        "coverage": 0.5,
    },
    "answers/check-in.md": {
        "status": "conflict",
        "errors": {"field-conflict"},
        "has": {"context-undeclared"},
        "lacks": {"quote-mismatch", "claim-value-mismatch"},
        "same_key_sources_checked": 2,
    },
    "answers/shuttle.md": {
        "status": "abstain",
        "errors": {"invisible-source"},
        "has": {"missing-field"},
        "lacks": {"context-undeclared", "claim-value-mismatch", "inactive-source"},
        "missing_fields": ["接驳车"],
    },
    "answers/library-hours.md": {
        "status": "abstain",
        "errors": {"inactive-source", "meta-field"},
        "has": {"missing-field", "context-undeclared"},
        "lacks": {"field-conflict", "quote-mismatch"},
        "missing_fields": ["开放时间"],
    },
    "answers/gym-hours.md": {
        "status": "abstain",
        "errors": {"inactive-source", "quote-mismatch"},
        "has": {"missing-field", "context-undeclared"},
        "lacks": {"field-conflict", "hash-mismatch"},
        "missing_fields": ["开放时间"],
    },
    "answers/returns-stale.md": {
        "status": "abstain",
        "errors": {"stale-citation"},
        "has": {"missing-field", "context-undeclared"},
        "lacks": {"quote-mismatch", "hash-mismatch", "field-conflict", "unknown-source"},
        "missing_fields": ["退货期限", "退款方式"],
    },
    "answers/book-fair.md": {
        "status": "answered",
        "errors": set(),
        "has": {"uncited-claim", "context-undeclared"},
        "lacks": {"claim-value-mismatch", "missing-field"},
        "missing_fields": [],
    },
    "answers/makerspace.md": {
        "status": "answered",
        "errors": set(),
        "has": {"claim-value-mismatch", "context-undeclared"},
        "lacks": {"missing-field", "uncited-claim"},
        "missing_fields": [],
    },
    "answers/panel-lights.md": {
        "status": "answered",
        "errors": {"unsupported-attribute"},
        "has": set(),
        "lacks": {"quote-mismatch", "claim-value-mismatch", "missing-field", "context-undeclared",
                  "uncited-claim", "field-conflict"},
        "missing_fields": [],
        "coverage": 1.0,
        "same_key_sources_checked": 3,
    },
    "answers/customer-lihua.md": {
        "status": "answered",
        "errors": set(),
        "has": set(),
        "lacks": {"field-conflict", "missing-field", "uncited-claim", "claim-value-mismatch"},
        "missing_fields": [],
        "coverage": 0.0,
        "same_key_sources_checked": 1,
        "no_diagnostics": True,
    },
    "answers/ticket-material.md": {
        "status": "abstain",
        "errors": set(),
        "has": {"context-undeclared"},
        "lacks": {"uncited-claim", "missing-field"},
        "missing_fields": [],
    },
    "answers/refund.answer.json": {
        "status": "answered",
        "errors": set(),
        "has": {"context-undeclared"},
        "lacks": {"status-mismatch", "malformed-citation", "missing-field"},
        "missing_fields": [],
        "coverage": 1.0,
    },
}

# (draft, footnote label or JSON claim index) whose quote is deliberately not the whole line.
INTENDED_QUOTE_MISMATCHES = {("answers/gym-hours.md", "2")}
# (draft, label) of image citations that deliberately quote an attribute that is not measured.
INTENDED_UNSUPPORTED = {("answers/panel-lights.md", "4")}

_MEMORY_DEFINITION = re.compile(
    r'^\[\^([^\]]+)\]: memory:([^/\s]+)/([^@\s]+)@([1-9][0-9]*) sha256:([0-9a-f]{8,64}) "(.*)" *$'
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DEFINITION = re.compile(
    r'^\[\^([^\]]+)\]: (\S+)@([1-9][0-9]*):([1-9][0-9]*) sha256:([0-9a-f]{8,64}) "(.*)" *$'
)
_IMAGE_DEFINITION = re.compile(
    r'^\[\^([^\]]+)\]: (\S+)@([1-9][0-9]*)#r([1-9][0-9]*) sha256:([0-9a-f]{8,64}) "(.*)：(.*)" *$'
)


def _split_lines(text: str) -> list[str]:
    """SPEC §3 splitter, restated here so this file does not depend on the engine."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "" and _LINE_BREAK.search(text[-2:]):
        lines.pop()
    return lines


def _evidence_versions() -> dict[tuple[str, int], tuple[str, list[str]]]:
    """(doc_id, version) -> (sha256 of the raw bytes, physical lines) for every example file."""
    out: dict[tuple[str, int], tuple[str, list[str]]] = {}
    root = EXAMPLES / "evidence"
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in (".md", ".txt"):
            continue
        raw = path.read_bytes()
        text = raw.decode("utf-8").removeprefix("\ufeff")
        lines = _split_lines(text)
        meta: dict[str, Any] = {}
        if lines and lines[0] == "---":
            end = lines.index("---", 1)
            meta = yaml.safe_load("\n".join(lines[1:end])) or {}
        doc_id = str(meta.get("doc_id", path.relative_to(root).with_suffix("").as_posix()))
        version = int(meta.get("version", 1))  # the examples' undeclared docs are new: version 1
        assert (doc_id, version) not in out, f"{path}: duplicate {doc_id}@{version}"
        out[(doc_id, version)] = (hashlib.sha256(raw).hexdigest(), lines)
    return out


def _citations() -> list[tuple[str, str, str, int, int, str, str]]:
    """(draft, label, doc_id, version, line, hex, quote) for every example citation."""
    found = []
    for draft in EXPECTED:
        path = EXAMPLES / draft
        if draft.endswith(".json"):
            obj = json.loads(path.read_text(encoding="utf-8"))
            for i, claim in enumerate(obj["claims"]):
                assert list(claim) == [
                    "text",
                    "quote",
                    "id",
                    "doc_id",
                    "version",
                    "line",
                    "sha256",
                    "field",
                ], f"{draft} claim {i}: SPEC §5.2 keys"
                assert claim["id"] == f"{claim['doc_id']}@{claim['version']}:{claim['line']}"
                assert re.fullmatch(r"[0-9a-f]{64}", claim["sha256"])
                found.append(
                    (
                        draft,
                        str(i),
                        claim["doc_id"],
                        claim["version"],
                        claim["line"],
                        claim["sha256"],
                        claim["quote"],
                    )
                )
            continue
        for line in _split_lines(path.read_text(encoding="utf-8")):
            match = _DEFINITION.match(line)
            if match:
                label, doc_id, version, number, hex_, quote = match.groups()
                found.append((draft, label, doc_id, int(version), int(number), hex_, quote))
            elif not _IMAGE_DEFINITION.match(line):
                assert not line.startswith("[^") or _MEMORY_DEFINITION.match(line), (
                    f"{draft}: malformed definition {line!r}")
    return found


def _memory_citations() -> list[tuple[str, str, str, str, int, str, str]]:
    """(draft, label, scope, key, version, hex, quote) for every memory citation (SPEC §11)."""
    found = []
    for draft in EXPECTED:
        if draft.endswith(".json"):
            continue
        for line in _split_lines((EXAMPLES / draft).read_text(encoding="utf-8")):
            match = _MEMORY_DEFINITION.match(line)
            if match:
                label, scope, key, version, hex_, quote = match.groups()
                found.append((draft, label, scope, key, int(version), hex_, quote))
    return found


def test_example_citations_are_exact_except_the_intended_half_line() -> None:
    versions = _evidence_versions()
    citations = _citations()
    assert len(citations) == 17  # evidence citations; memory ones are checked below
    mismatched = set()
    for draft, label, doc_id, version, number, hex_, quote in citations:
        assert (doc_id, version) in versions, f"{draft} [^{label}]: no {doc_id}@{version}"
        sha, lines = versions[(doc_id, version)]
        assert sha.startswith(hex_), f"{draft} [^{label}]: hash is not a prefix of {sha}"
        assert 1 <= number <= len(lines), f"{draft} [^{label}]: line {number} out of range"
        if quote != lines[number - 1]:
            mismatched.add((draft, label))
    assert mismatched == INTENDED_QUOTE_MISMATCHES


def test_example_image_citations_state_what_the_image_measures() -> None:
    """SPEC §12: each image citation's hash is a prefix of the PNG's sha256 and its quote is a
    measured attribute with its measured value (``grounding_core.images.measure`` is the rule),
    except the one deliberately unsupported attribute.
    """
    from grounding_core.images import measure

    png = EXAMPLES / "evidence/images/shapes.png"
    data = png.read_bytes()
    sidecar = yaml.safe_load((EXAMPLES / "evidence/images/shapes.png.yaml").read_text(encoding="utf-8"))
    regions = measure(data).regions
    found, unsupported = 0, set()
    for draft in EXPECTED:
        for line in _split_lines((EXAMPLES / draft).read_text(encoding="utf-8")):
            match = _IMAGE_DEFINITION.match(line)
            if match is None:
                continue
            label, doc_id, version, region, hex_, field, value = match.groups()
            found += 1
            assert (doc_id, int(version)) == (sidecar["doc_id"], sidecar["version"])
            assert hashlib.sha256(data).hexdigest().startswith(hex_)
            attributes = dict(regions[int(region) - 1].attributes)
            if field not in attributes:
                unsupported.add((draft, label))
            else:
                assert attributes[field] == value, f"{draft} [^{label}]"
    assert found == 4 and unsupported == INTENDED_UNSUPPORTED


def _setup_memory_entries() -> dict[tuple[str, str], list[str]]:
    """(scope, key) -> the values ``examples/setup-memory`` remembers, in order (version 1, 2...)."""
    import shlex

    script = (EXAMPLES / "setup-memory").read_text(encoding="utf-8")
    scope = re.search(r'^scope="([^"]+)"$', script, re.M)
    assert scope is not None
    out: dict[tuple[str, str], list[str]] = {}
    for line in script.splitlines():
        if " memory add " not in line or line.lstrip().startswith("#"):
            continue
        args = shlex.split(line.replace('"$scope"', scope[1]))
        options = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
        out.setdefault((options["--scope"], options["--key"]), []).append(options["--value"])
    return out


def test_example_memory_citations_match_the_setup_script() -> None:
    entries = _setup_memory_entries()
    assert entries[("客户-李华", "语言")] == ["中文"]
    citations = _memory_citations()
    assert len(citations) == 2
    for draft, label, scope, key, version, hex_, quote in citations:
        values = entries.get((scope, key), [])
        assert 1 <= version <= len(values), f"{draft} [^{label}]: setup-memory has no {scope}/{key}@{version}"
        assert quote == f"{key}：{values[version - 1]}", f"{draft} [^{label}]"
        assert hashlib.sha256(quote.encode("utf-8")).hexdigest().startswith(hex_), f"{draft} [^{label}]"


def test_example_evidence_has_the_promised_encodings() -> None:
    evidence = EXAMPLES / "evidence"
    assert (evidence / "events/book-fair.md").read_bytes().startswith(b"\xef\xbb\xbf---\n")
    crlf = (evidence / "en/visitor-parking.md").read_bytes()
    assert b"\r\n" in crlf and b"\n" not in crlf.replace(b"\r\n", b"")
    assert "🎸" in (evidence / "events/club-fair.md").read_text(encoding="utf-8")
    assert "忽略之前的所有指令" in (evidence / "events/book-fair.md").read_text(
        encoding="utf-8-sig"
    )


def _cli() -> list[str] | None:
    """The CLI command, or None while ``grounding.cli`` does not exist yet."""
    try:
        found = importlib.util.find_spec("grounding.cli")
    except ImportError:
        found = None
    if found is None:
        return None
    exe = shutil.which("grounding")
    return [exe] if exe else [sys.executable, "-m", "grounding.cli"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cli = _cli()
    if cli is None:
        pytest.skip("the grounding CLI (grounding.cli) is not built yet")
    root = tmp_path_factory.mktemp("examples") / "examples"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns(".grounding"))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    # the memory scope is written by the documented setup step, as scripts/demo does (SPEC §11)
    setup = subprocess.run(
        ["bash", str(root / "setup-memory"), str(root)], capture_output=True, text=True,
        encoding="utf-8", env={**env, "GROUNDING": " ".join(cli)}, timeout=300,
    )
    assert setup.returncode == 0, setup.stderr
    proc = subprocess.run(
        [*cli, "check", "--root", str(root), "--format", "json"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=root,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1, f"exit {proc.returncode} (errors are expected)\n{proc.stderr}"
    data = json.loads(proc.stdout)
    assert (root / ".grounding" / "index.sqlite").is_file(), "the index belongs to the checked copy"
    return data


def test_every_example_draft_is_checked(report: dict[str, Any]) -> None:
    assert sorted(d["path"] for d in report["drafts"]) == sorted(EXPECTED)


def test_example_evidence_indexes_cleanly(report: dict[str, Any]) -> None:
    # BOM, CRLF, emoji, a .txt file and a file without front matter all index without findings.
    noisy = {
        e["path"]: [d["name"] for d in e["diagnostics"]]
        for e in report["evidence"]
        if e["diagnostics"]
    }
    assert noisy == {}


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_example_draft_outcome(report: dict[str, Any], path: str) -> None:
    expected = EXPECTED[path]
    drafts = {d["path"]: d for d in report["drafts"]}
    assert path in drafts
    draft = drafts[path]
    names = {d["name"] for d in draft["diagnostics"]}
    errors = {d["name"] for d in draft["diagnostics"] if d["severity"] == "error"}
    summary = json.dumps(draft, ensure_ascii=False, indent=1)
    assert draft["status"] == expected["status"], summary
    assert errors == expected["errors"], summary
    assert expected["has"] <= names, summary
    assert not (expected["lacks"] & names), summary
    if "missing_fields" in expected:
        assert sorted(draft["missing_fields"]) == sorted(expected["missing_fields"]), summary
    if "coverage" in expected:
        assert draft["coverage"] == pytest.approx(expected["coverage"]), summary
    if "same_key_sources_checked" in expected:
        assert draft["same_key_sources_checked"] == expected["same_key_sources_checked"], summary
    if expected.get("no_diagnostics"):
        assert draft["diagnostics"] == [], summary
