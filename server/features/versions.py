"""Old evidence versions as documents an editor can open (SPEC §10 definition; issue 12).

Go to definition on a citation of a version that is not on disk (a superseded version, or
the file changed since it was indexed) answers one of two kinds of document, chosen by the
client's ``initializationOptions`` key ``versionDocuments``:

``"file"`` (the default: every editor can open a file)
    a read-only copy of the indexed text, written by the server to
    ``.grounding/versions/DOC_ID@VERSION.md`` under the workspace root (``.txt`` for a plain
    text version), mode ``0o444``. ``.grounding`` is never walked for evidence or drafts
    (``grounding_core.config``), so the copy is never indexed, even with ``evidence = "."``;
    it is never in the evidence folder otherwise. The copy is written atomically (temporary
    file + rename) and only when missing or different, so an editor holding it open sees
    the same bytes.
``"virtual"``
    the URI ``grounding-evidence:/DOC_ID@VERSION``, whose text the client asks for with
    ``grounding/versionText`` (VS Code's content provider, ``editors/nvim/grounding.lua``).

File names keep the doc_id readable: ``events/open-day`` becomes ``events/open-day@2.md``
(each ``/`` a folder); only ``\\``, ``%``, control characters and the characters Windows
refuses are percent-encoded (UTF-8); :func:`version_of_file` reads the name back, so references and
reference lenses work in the copy as in the virtual document.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pygls.uris import from_fs_path, to_fs_path

from grounding_core.evidence import EvidenceDocument
from grounding_core.fixes import write_atomic
from grounding_core.images import ImageDocument
from grounding_core.index import VersionRecord
from server.protocol import version_uri
from server.session import IndexView, Session

__all__ = ["FILE", "VERSIONS_DIR", "VIRTUAL", "file_name", "mode", "parse_version_file", "version_document",
           "version_of_file", "write_copy", "write_version_file"]

logger = logging.getLogger(__name__)

FILE = "file"
VIRTUAL = "virtual"
VERSIONS_DIR = Path(".grounding") / "versions"
"""Where version copies live, relative to the workspace root."""
READ_ONLY = 0o444
_ENCODED = set('/\\%:*?"<>|')


def mode(session: Session) -> str:
    """The client's ``versionDocuments`` choice (``"file"`` unless it says ``"virtual"``)."""
    options: Any = session.initialization_options
    if isinstance(options, dict) and isinstance(options.get("grounding"), dict):
        options = options["grounding"]
    value = options.get("versionDocuments") if isinstance(options, dict) else None
    if value not in (None, FILE, VIRTUAL):
        logger.warning("versionDocuments %r is neither 'file' nor 'virtual'; using 'file'", value)
    return VIRTUAL if value == VIRTUAL else FILE


def file_name(doc_id: str, version: int, path: str) -> str:
    """``DOC_ID@VERSION.md`` (``.txt`` when ``path``, the version's evidence path, is one),
    relative to :data:`VERSIONS_DIR`: each ``/`` of the doc_id is a folder, unless a part is
    empty, ``.`` or ``..`` (then every ``/`` is encoded and the name stays in one folder).
    """
    parts = doc_id.split("/")
    if any(part in ("", ".", "..") for part in parts):
        parts = [doc_id]
    encoded = "/".join(_encode(part) for part in parts)
    suffix = ".txt" if path.endswith((".txt", ".png")) else ".md"  # an image: its attribute lines
    return f"{encoded}@{version}{suffix}"


def _encode(part: str) -> str:
    return "".join("".join(f"%{b:02X}" for b in c.encode("utf-8")) if c in _ENCODED or not c.isprintable()
                   else c for c in part)


def version_text_of(doc: EvidenceDocument) -> str:
    """The text an old version shows: the indexed text, or for an image version (SPEC §12)
    its regions' measured attributes, one ``FIELD：VALUE`` line each (no pixels are kept).
    """
    if isinstance(doc, ImageDocument):
        return "".join(f"{line}\n" for line in doc.lines)
    return doc.text


def write_version_file(root: Path, view: IndexView, record: VersionRecord) -> Path:
    """Write (when missing or different) the read-only copy of ``record`` under ``root`` and
    return its path. Worker thread; raises ``OSError`` when the folder cannot be written.
    """
    return write_copy(root, file_name(record.doc_id, record.version, record.path),
                      version_text_of(view.snapshot.document(record)))


def write_copy(root: Path, name: str, text: str) -> Path:
    """Write ``text`` (UTF-8) as the read-only copy ``name`` (a :func:`file_name`) under
    ``root``'s :data:`VERSIONS_DIR`, when missing or different (atomically, mode ``0o444``);
    also the view of a memory key (``server/features/memory.py``). Raises ``OSError``.
    """
    folder = root / VERSIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    try:
        if target.read_bytes() == data:
            return target
    except OSError:
        pass
    write_atomic(target, data)
    os.chmod(target, READ_ONLY)
    return target


def version_document(session_mode: str, root: Path | None, view: IndexView, record: VersionRecord) -> str:
    """The URI a client opens for an indexed version that is not on disk (module docstring).
    A copy that cannot be written falls back to the virtual URI (logged). Worker thread.
    """
    if session_mode == FILE and root is not None:
        try:
            return from_fs_path(str(write_version_file(root, view, record))) or ""
        except OSError as exc:
            logger.warning("cannot write the read-only copy of %s@%s: %s", record.doc_id, record.version, exc)
    return version_uri(record.doc_id, record.version)


def version_of_file(session: Session, uri: str) -> tuple[str, int] | None:
    """``(doc_id, version)`` when ``uri`` is a version copy of this workspace, else None."""
    config = session.config
    return parse_version_file(config.root, uri) if config is not None else None


def parse_version_file(root: Path, uri: str) -> tuple[str, int] | None:
    """``(doc_id, version)`` of a ``file:`` URI under ``root/.grounding/versions`` named as
    :func:`file_name` names it, else None (the inverse of :func:`file_name`).
    """
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if not path:
        return None
    file = Path(path)
    try:
        rel = file.relative_to(root / VERSIONS_DIR)
    except ValueError:
        return None
    if file.suffix not in (".md", ".txt"):
        return None
    name, sep, number = rel.with_suffix("").as_posix().rpartition("@")
    if not sep or not number.isdigit() or not name:
        return None
    return unquote(name), int(number)
