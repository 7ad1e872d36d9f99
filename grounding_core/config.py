"""Workspace configuration: ``grounding.toml`` or ``[tool.grounding]`` in ``pyproject.toml``.

SPEC §2. Every key is optional. Paths are relative to the workspace root. Loading raises
:class:`ConfigError` with a message naming the key; callers turn it into exit status 2 (CLI)
or one ``window/showMessage`` and the defaults (server).

Containment (SPEC §2): ``evidence`` and ``index`` given in a file must resolve inside the
workspace root (a shared evidence folder elsewhere is given explicitly: ``--evidence``, the
editor setting, :meth:`Config.with_overrides`); wherever it comes from, the index is never
where the evidence walk reads and never replaces a file that is not a Grounding index.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import tomllib
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pathspec

from .backend import has_password, is_url, redact

INDEX_ENV = "GROUNDING_INDEX"
"""Environment variable overriding ``index`` (a CLI flag or an editor setting still wins)."""

LOCAL_INDEX = ".grounding/index.sqlite"
"""The default ``index``: an SQLite file in the workspace (also where the language server
falls back to when a shared index cannot be reached)."""


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file and key."""


DEFAULT_EVIDENCE_GLOBS = ("**/*.md", "**/*.txt", "**/*.png")
DEFAULT_DRAFT_GLOBS = ("answers/**/*.md", "**/*.answer.md", "**/*.answer.json")
ENCODINGS = ("o200k_base", "cl100k_base")
IMAGE_LANGUAGES = ("zh", "en")
"""``image_language`` values (SPEC §15; ``grounding_core.images.LANGUAGES``)."""


@dataclass(frozen=True)
class Config:
    """Resolved configuration of one workspace (SPEC §2).

    ``root`` and ``evidence_root`` are absolute resolved paths. ``index`` is a path relative
    to the root, ``":memory:"``, or a ``postgresql://`` URL naming a team's shared index
    (``GROUNDING_INDEX`` in the environment overrides the file's value; see
    ``grounding_core/backend.py``). ``today`` pins the date used for activity (SPEC §3);
    None means the local date at check time. ``subject_fields`` names the field lines whose
    value is the document subject when front matter gives none (SPEC §3 says ``主题``; an
    English corpus may add ``Subject``).
    """

    root: Path
    evidence: str = "evidence"
    evidence_globs: tuple[str, ...] = DEFAULT_EVIDENCE_GLOBS
    drafts: tuple[str, ...] = DEFAULT_DRAFT_GLOBS
    index: str = LOCAL_INDEX
    field_separators: tuple[str, ...] = ("：",)
    meta_fields: tuple[str, ...] = ("版本说明", "来源", "性质")
    subject_fields: tuple[str, ...] = ("主题",)
    encoding: str = "o200k_base"
    strict: bool = False
    today: dt.date | None = None
    image_language: str = "zh"
    """Names of measured image attributes and values (SPEC §15): ``"zh"`` or ``"en"``."""
    query_stopwords: tuple[str, ...] | None = None
    """Question words the closed question grammar removes (SPEC §13, §15); None means the
    documented default, ``grounding_core.question.DEFAULT_QUERY_STOPWORDS``."""
    source: str = "defaults"
    _specs: dict[str, pathspec.GitIgnoreSpec] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def evidence_root(self) -> Path:
        """The resolved evidence root (cached: diagnostics ask once per related location)."""
        return (self.root / self.evidence).resolve()

    @property
    def index_path(self) -> str:
        """``":memory:"``, the absolute index path, or the shared index's URL."""
        if self.index == ":memory:" or is_url(self.index):
            return self.index
        return str((self.root / self.index).resolve())

    @property
    def index_shared(self) -> bool:
        """True when the index is a shared (PostgreSQL) database."""
        return is_url(self.index)

    @property
    def index_display(self) -> str:
        """The index location for messages: a URL without its password."""
        return redact(self.index)

    def evidence_display(self, rel_path: str) -> str:
        """An evidence path (relative to the evidence root) as a ``/``-path relative to the root."""
        shown = self._displayed.get(rel_path)
        if shown is None:
            full = self.evidence_root / rel_path
            try:
                shown = full.relative_to(self.root).as_posix()
            except ValueError:
                shown = os.path.relpath(full, self.root).replace(os.sep, "/")
            self._displayed[rel_path] = shown
        return shown

    @cached_property
    def _displayed(self) -> dict[str, str]:
        """Memo of :meth:`evidence_display` (a conflict can relate thousands of lines)."""
        return {}

    def today_or(self, default: dt.date | None = None) -> dt.date:
        """The pinned date, else ``default``, else the local date."""
        return self.today or default or dt.date.today()

    def evidence_matches(self, rel_path: str) -> bool:
        """True if a ``/``-separated path relative to the evidence root is evidence."""
        matched = self._evidence_matched.get(rel_path)
        if matched is None:
            matched = bool(self._spec("evidence", self.evidence_globs).match_file(rel_path))
            if len(self._evidence_matched) > 100_000:  # bounded: temp names come and go
                self._evidence_matched.clear()
            self._evidence_matched[rel_path] = matched
        return matched

    def evidence_path_for(self, rel_path: str) -> str | None:
        """The evidence path a change of ``rel_path`` (relative to the evidence root) affects:
        itself when it is evidence; for an image's sidecar ``NAME.png.yaml`` (SPEC §12: watched
        like evidence) the image ``NAME.png`` when that is evidence; else None.
        """
        if self.evidence_matches(rel_path):
            return rel_path
        if rel_path.lower().endswith(".png.yaml") and self.evidence_matches(rel_path[:-5]):
            return rel_path[:-5]
        return None

    @cached_property
    def _evidence_matched(self) -> dict[str, bool]:
        """Memo of :meth:`evidence_matches` (every rescan asks again for every file)."""
        return {}

    def draft_matches(self, rel_path: str) -> bool:
        """True if a ``/``-separated path relative to the workspace root is a draft."""
        return self._spec("drafts", self.drafts).match_file(rel_path)

    def _spec(self, key: str, patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
        spec = self._specs.get(key)
        if spec is None:
            import pathspec  # on first use: a check whose globs take scan.py's fast path never loads it

            spec = pathspec.GitIgnoreSpec.from_lines(patterns)
            self._specs[key] = spec
        return spec

    def with_overrides(self, **changes: Any) -> Config:
        """A copy with some keys replaced (CLI flags, LSP settings); validated like a file.

        Explicit overrides may point outside the workspace root (a shared evidence folder);
        the index rules of :func:`check_index` still hold. Raises :class:`ConfigError`.
        """
        checked = _validate(changes, "override")
        config = replace(self, _specs={}, **checked)
        if "index" in checked or "evidence" in checked:
            check_index(config, "override" if "index" in checked else self.source)
        return config


def load_config(root: Path) -> Config:
    """Read ``grounding.toml`` (preferred) or ``pyproject.toml``'s ``[tool.grounding]``.

    Returns the defaults when neither exists. Raises :class:`ConfigError` for TOML syntax
    errors, unknown keys, wrong types, ``!`` negation in globs or an unknown encoding.
    """
    root = root.resolve()
    if not root.is_dir():
        raise ConfigError(f"workspace root {root} is not a folder")
    toml_path = root / "grounding.toml"
    table: dict[str, Any] = {}
    source = "defaults"
    try:
        if toml_path.is_file():
            table = tomllib.loads(toml_path.read_text(encoding="utf-8"))
            source = "grounding.toml"
        elif (root / "pyproject.toml").is_file():
            data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
            table = data.get("tool", {}).get("grounding", {})
            source = "pyproject.toml [tool.grounding]" if table else "defaults"
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{toml_path.name}: {exc}") from exc
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: expected a table")
    checked = _validate(table, source)
    for key in ("evidence", "index"):
        if key in checked and checked[key] != ":memory:" and not (key == "index" and is_url(checked[key])):
            target = (root / checked[key]).resolve()
            if not target.is_relative_to(root):
                raise ConfigError(
                    f"{source}: {key} = {checked[key]!r} resolves to {target}, outside the workspace"
                    f" root {root}; a file in the workspace may not point Grounding elsewhere"
                    + (" (give a shared evidence folder with --evidence or the editor setting)"
                       if key == "evidence" else ""))
    index_source = source
    env = os.environ.get(INDEX_ENV)
    if env:
        index_source = f"{INDEX_ENV} in the environment"
        checked.update(_validate({"index": env}, index_source))
    config = Config(root=root, source=source, **checked)
    check_index(config, index_source)
    return config


INDEX_SUFFIXES = (".sqlite", ".sqlite3", ".db")
"""Names under which an empty file may become the index (SQLite creates the file, then writes
its header: a crash in between leaves an empty file that must not block the next run)."""

_NEVER_WALKED = (".git", ".grounding")


def check_index(config: Config, source: str) -> None:
    """SPEC §2: the index is never where the evidence walk reads, and never replaces a file
    that is not a Grounding index. Raises :class:`ConfigError` naming the key ``index``.
    Unless it is an explicit override (a CLI flag, an editor setting, or ``GROUNDING_INDEX``
    in the environment: set by whoever runs Grounding, never by a file of the workspace), the
    index (default included) must also resolve inside the workspace root, symlinks followed
    (a ``.grounding`` symlink, a dangling ``.grounding/index.sqlite`` symlink).

    "Where the walk reads": under the evidence root, except inside ``.grounding`` or ``.git``
    (never walked), so ``evidence = "."`` keeps the default ``.grounding/index.sqlite``.
    A Grounding index is an SQLite database with an ``events`` table, or one with no
    tables yet, or an empty file named ``*.sqlite``/``*.sqlite3``/``*.db``.
    """
    if config.index == ":memory:" or config.index_shared:
        return
    path = Path(config.index_path)
    shown = f"{source}: index = {config.index!r}"
    explicit = source == "override" or source.startswith(INDEX_ENV)
    if not explicit and not path.is_relative_to(config.root):
        raise ConfigError(
            f"{shown} resolves to {path}, outside the workspace root {config.root} (a symlink such as"
            " .grounding or the index file itself points there); the index must live inside the"
            " workspace: remove the symlink, or name another index explicitly")
    if path.is_relative_to(config.evidence_root):
        inside = path.relative_to(config.evidence_root).parts[:-1]
        if not any(part in _NEVER_WALKED for part in inside):
            raise ConfigError(f"{shown} is inside the evidence folder {config.evidence_root}; the index"
                              " must live outside it (the default is .grounding/index.sqlite)")
    problem = _not_an_index(path)
    if problem is not None:
        raise ConfigError(f"{shown}: {path} {problem}; Grounding never replaces it. Choose a new"
                          " file name (the default is .grounding/index.sqlite)")


def _not_an_index(path: Path) -> str | None:
    """Why the existing file at ``path`` is not a Grounding index, or None (also when absent)."""
    try:
        if not path.exists():
            return None
        if not path.is_file():
            return "is not a regular file"
        with path.open("rb") as handle:
            header = handle.read(16)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not header:
        return None if path.name.endswith(INDEX_SUFFIXES) else "is an empty file that is not an index"
    if header != b"SQLite format 3\x00":
        return "is not an SQLite database"
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None  # the store opens it, or reports why it cannot
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return None  # locked or mid-write: as above
    finally:
        db.close()
    if tables and "events" not in tables:
        return "is an SQLite database of another program"
    return None


_STR_LIST_KEYS = ("evidence_globs", "drafts", "field_separators", "meta_fields", "subject_fields",
                  "query_stopwords")


def _validate(table: dict[str, Any], source: str) -> dict[str, Any]:
    known = {f.name for f in fields(Config)} - {"root", "source", "_specs"}
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{source}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        if key in ("evidence", "index", "encoding"):
            if not isinstance(value, str) or not value or "\0" in value:
                raise ConfigError(f"{source}: {key} must be a non-empty string without NUL")
            if key == "encoding" and value not in ENCODINGS:
                raise ConfigError(f"{source}: encoding must be one of {', '.join(ENCODINGS)}")
            if key == "index" and has_password(value) and not source.startswith(INDEX_ENV):
                raise ConfigError(
                    f"{source}: index {redact(value)!r} holds a password; passwords never go in"
                    " configuration files: use ~/.pgpass, PGPASSWORD or a service file (PGSERVICE)")
            out[key] = value
        elif key in _STR_LIST_KEYS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"{source}: {key} must be a list of non-empty strings")
            if not value and key in ("field_separators", "evidence_globs"):
                # an empty list would silently switch off every field check, or revoke every
                # evidence file in the log (docs/decisions.md "Configuration")
                what = "separator, e.g. [\"：\"]" if key == "field_separators" else "glob, e.g. [\"**/*.md\"]"
                raise ConfigError(f"{source}: {key} must name at least one {what}")
            if key in ("evidence_globs", "drafts"):
                for pattern in value:
                    if pattern.startswith("!"):
                        raise ConfigError(
                            f"{source}: {key} pattern {pattern!r}: '!' negation is not supported"
                        )
            out[key] = tuple(value)
        elif key == "image_language":
            if value not in IMAGE_LANGUAGES:
                raise ConfigError(f"{source}: image_language must be one of {', '.join(IMAGE_LANGUAGES)},"
                                  f" got {value!r}")
            out[key] = value
        elif key == "strict":
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: strict must be true or false")
            out[key] = value
        elif key == "today":
            if value is None:
                out[key] = None
            elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                out[key] = value
            elif isinstance(value, str):
                try:
                    out[key] = dt.date.fromisoformat(value)
                except ValueError as exc:
                    raise ConfigError(f"{source}: today must be YYYY-MM-DD, got {value!r}") from exc
            else:
                raise ConfigError(f"{source}: today must be a date YYYY-MM-DD")
    return out


def find_workspace_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding ``grounding.toml`` or a ``pyproject.toml``
    with a ``[tool.grounding]`` table, as git finds ``.git`` (SPEC §9); ``start`` itself
    (resolved) when there is none. A ``pyproject.toml`` that does not parse is skipped here;
    :func:`load_config` reports it if that folder is used.
    """
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "grounding.toml").is_file():
            return folder
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
                continue
            if isinstance(data.get("tool"), dict) and "grounding" in data["tool"]:
                return folder
    return start
