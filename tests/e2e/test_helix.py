"""``editors/helix/languages.toml``: valid for Helix, and its server entry starts the server.

Helix is not installable here (no Debian or PyPI package), so this checks what can be checked
without it, and the README says the file is untested in a real Helix:

* the file is TOML (``tomllib``) and uses only the keys Helix 25.07.1 accepts: its
  ``LanguageConfiguration`` is ``deny_unknown_fields`` (a typo or a pre-23.10 key such as
  ``language-server`` makes Helix reject the whole file); the key lists below are copied from
  helix-core/src/syntax/config.rs at tag 25.07.1;
* every server a language names is defined in the file or built into Helix;
* the ``*.answer.json`` glob matches answer files and nothing else, the way Helix applies it
  (a relative glob gets ``*/`` prepended and is matched against the absolute path);
* ``command`` + ``args`` of ``[language-server.grounding]`` start the real server, which,
  given the position encodings Helix offers (UTF-8, UTF-32, UTF-16, in that order) and the
  entry's ``config`` as initializationOptions, chooses UTF-8 and checks an opened answer.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.support import lsp as harness

REPO_ROOT = Path(__file__).resolve().parents[2]
LANGUAGES_TOML = REPO_ROOT / "editors" / "helix" / "languages.toml"
WAIT_SECONDS = 30.0

# helix-core/src/syntax/config.rs (25.07.1): LanguageConfiguration's serde keys (kebab-case).
HELIX_LANGUAGE_KEYS = {
    "name", "language-id", "scope", "file-types", "shebangs", "roots", "comment-tokens",
    "comment-token", "block-comment-tokens", "text-width", "soft-wrap", "auto-format",
    "formatter", "path-completion", "diagnostic-severity", "grammar", "injection-regex",
    "language-servers", "indent", "debugger", "auto-pairs", "rulers", "workspace-lsp-roots",
    "persistent-diagnostic-sources",
}
# LanguageServerConfiguration's keys.
HELIX_SERVER_KEYS = {"command", "args", "environment", "config", "timeout", "required-root-patterns"}
# Built-in languages this file extends (merged by name) and built-in servers it names.
HELIX_BUILTIN_LANGUAGES = {"markdown"}
HELIX_BUILTIN_SERVERS = {"marksman"}
# Helix 25.07.1 helix-lsp/src/client.rs: general.positionEncodings, in this order.
HELIX_POSITION_ENCODINGS = ["utf-8", "utf-32", "utf-16"]


@pytest.fixture(scope="module")
def helix() -> dict[str, Any]:
    with LANGUAGES_TOML.open("rb") as file:
        return tomllib.load(file)


def _language(helix: dict[str, Any], name: str) -> dict[str, Any]:
    found = [lang for lang in helix["language"] if lang["name"] == name]
    assert len(found) == 1, f"expected one [[language]] named {name!r}"
    return found[0]


def test_only_keys_helix_accepts(helix: dict[str, Any]) -> None:
    assert set(helix) <= {"language", "language-server"}
    for language in helix["language"]:
        assert set(language) <= HELIX_LANGUAGE_KEYS, set(language) - HELIX_LANGUAGE_KEYS
        if language["name"] not in HELIX_BUILTIN_LANGUAGES:  # a new language needs these
            assert {"name", "scope", "file-types"} <= set(language)
    for name, server in helix["language-server"].items():
        assert set(server) <= HELIX_SERVER_KEYS, (name, set(server) - HELIX_SERVER_KEYS)
        assert isinstance(server["command"], str) and all(isinstance(a, str) for a in server["args"])


def test_markdown_and_answers_use_the_grounding_server_rooted_at_grounding_toml(
        helix: dict[str, Any]) -> None:
    defined = set(helix["language-server"]) | HELIX_BUILTIN_SERVERS
    for language in helix["language"]:
        assert set(language["language-servers"]) <= defined
        assert "grounding" in language["language-servers"]
        assert "grounding.toml" in language["roots"]
    assert helix["language-server"]["grounding"]["required-root-patterns"] == ["grounding.toml"]
    # Replacing the built-in list must keep Helix's own Markdown server.
    assert "marksman" in _language(helix, "markdown")["language-servers"]


def test_answer_glob_matches_answer_files_only(helix: dict[str, Any]) -> None:
    answer = _language(helix, "grounding-answer")
    globs = [f"*/{ft['glob']}" for ft in answer["file-types"] if isinstance(ft, dict)]
    assert globs and answer["grammar"] == "json" and answer["language-id"] == "json"

    def matches(path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, glob) for glob in globs)

    assert matches("/home/w/notes/answers/refund.answer.json")
    assert matches("/home/w/notes/退款.answer.json")
    assert not matches("/home/w/notes/answers/refund.json")
    assert not matches("/home/w/notes/answers/refund.answer.md")


def _server_command(entry: dict[str, Any]) -> list[str]:
    """The entry's command as Helix would run it: looked up on PATH (this environment first)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which(entry["command"], path=path)
    assert found, f"{entry['command']!r} is not on PATH: install the package (pip install -e .)"
    return [found, *entry["args"]]


async def test_the_server_entry_starts_grounding_lsp_with_utf8(helix: dict[str, Any], tmp_path: Path) -> None:
    entry = helix["language-server"]["grounding"]
    root = tmp_path / "examples"
    shutil.copytree(REPO_ROOT / "examples", root, ignore=shutil.ignore_patterns(".grounding"))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
           **entry.get("environment", {})}
    client = await harness.start(
        root, command=_server_command(entry), env=env,
        editor_capabilities=types.ClientCapabilities(general=types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind(e) for e in HELIX_POSITION_ENCODINGS])),
        initialization_options=entry.get("config"), client_info=types.ClientInfo(name="helix", version="25.07.1"))
    try:
        result = client.initialize_result
        assert result is not None
        assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        assert result.server_info is not None and result.server_info.name == "grounding"
        answer = root / "answers" / "refund.answer.json"
        uri = answer.as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id=_language(helix, "grounding-answer")["language-id"], version=0,
            text=answer.read_text(encoding="utf-8"))))
        published = await client.recorder.wait_publish(uri, timeout=WAIT_SECONDS)
        assert all(d.source == "grounding" for d in published.diagnostics)
    finally:
        await harness.stop(client)
