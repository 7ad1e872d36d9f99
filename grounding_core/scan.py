"""Finding and reading evidence files for a scan (SPEC §2, §3, §4); no database access.

- :func:`walk_evidence` lists every evidence file (a full walk); :func:`resolve_paths` looks
  at only the paths a file watcher named. Both apply the same rules: ``.git`` and
  ``.grounding`` are never walked, symlinked folders are not followed, a symlink to a file
  inside the root is indexed under its target, one outside is refused and never read, and a
  file reached twice (hard links) is indexed once, under the path that sorts first. A path
  too long for the system (``PATH_MAX``) or a folder that cannot be listed is reported, never
  skipped silently.
- :class:`StatKey` is what decides whether a file is re-read: size, mtime, ctime and inode
  (ctime catches ``cp -p``, ``rsync -a`` and ``tar x``, which restore mtime).
- :func:`read_stable` reads a file only when it did not change during the read (the stat key
  of the open file before and after agree and the size matches the bytes read), retrying a
  few times; a file that keeps changing is reported *unstable* and not indexed from that read.
- A file changed within the last :data:`SETTLE_NS` is not read until it has been quiet that
  long: a writer that pauses between chunks leaves a consistent but half-written file, and a
  same-size rewrite inside one timestamp tick (git's "racy" entries) would leave the stat key
  unchanged; after the window every later write gets a later timestamp. The scan waits for
  such files up to a budget, then reports them unstable (docs/decisions.md, "Index").
- :func:`listing_digest` sums up a full walk (every path, stat key and refusal) in one hash, so
  a scan can tell that nothing changed since the last scan that changed nothing without
  loading every stored stat key.
- :func:`choose` applies the duplicate-doc-id rule of SPEC §3 to one doc_id's files.
"""

from __future__ import annotations

import errno
import hashlib
import json
import marshal
import operator
import os
import re
import stat as stat_mod
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from .config import Config
from .images import is_image_path
from .model import Finding, Location, Severity, Span
from .text import is_printable_path, printable_path

SETTLE_NS = 100_000_000
"""A file is read once its mtime and ctime are at least this old (ns): longer than a file
system timestamp tick (1-10 ms on Linux) and than the pauses of writers that save in chunks."""

COARSE_SETTLE_NS = 2_000_000_000
"""On file systems with whole-second timestamps (FAT, HFS+, some network mounts) a fresh file
is not waited for: it is read now and its row stored with an impossible size, so the next
scan reads it again."""

SETTLE_BUDGET_S = 1.0
"""How long one scan waits, in total, for fresh files to settle (then they are unstable)."""

READ_ATTEMPTS = 4
"""Reads of a file that changes while it is read, before it is reported unstable."""

READ_BACKOFF_S = 0.05
"""Pause before each retry of an unstable read (doubling)."""

SKIP_DIRS = (".git", ".grounding")

MAX_EVIDENCE_BYTES = 64 * 1024 * 1024
"""Largest evidence file read (64 MiB; docs/decisions.md, "Index"): a larger one is
``unreadable-evidence`` naming its size, decided from its stat before any byte is read."""


class TooLarge(OSError):
    """An evidence file over :data:`MAX_EVIDENCE_BYTES`; ``strerror`` names its size."""

    def __init__(self, size: int) -> None:
        limit = _size(MAX_EVIDENCE_BYTES)
        shown, exact = _size(size), ""
        if shown == limit:  # just over: "64.0 MB, over the 64.0 MB limit" would read as no excess
            shown, exact = f"{size:,} bytes", f" ({MAX_EVIDENCE_BYTES:,} bytes)"
        super().__init__(errno.EFBIG, f"it is {shown}, over the {limit} limit{exact} for"
                         " evidence files, so it was not read (split it into smaller documents)")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class StatKey(NamedTuple):
    """What decides that a file must be re-read (SPEC §4): size, mtime, ctime, inode.

    A named tuple: a warm walk makes one per file.
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatKey:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def settles_at(self) -> int:
        """The time (ns) from which the file counts as settled if it does not change.

        Based on ctime, which the kernel sets on every change and no tool can restore
        (mtime may be set to anything, even the future).
        """
        return self.ctime_ns + (COARSE_SETTLE_NS if self.coarse else SETTLE_NS)

    def fresh(self, now_ns: int) -> bool:
        """Changed too recently to be read (see the module docstring). A ctime more than a
        second ahead of the clock (the clock was set back) counts as settled.
        """
        return now_ns < self.settles_at() and self.ctime_ns <= now_ns + 1_000_000_000

    @property
    def coarse(self) -> bool:
        """Whole-second timestamps: the file system's clock is coarse."""
        return self.ctime_ns % 1_000_000_000 == 0


class Candidate(NamedTuple):
    """An evidence file to look at: its absolute path and the stat of what will be read."""

    path: str
    key: StatKey


@dataclass
class Listing:
    """What a walk (or a watcher's paths) found, relative to the evidence root.

    ``candidates``: files to index; ``refused``: paths reported and never read (outside the
    root, unlistable, too long); ``removed``: rows to drop when absent from ``candidates``
    (a full walk: every row; paths: the given paths and folders under them); ``full``: a
    full walk.
    """

    candidates: dict[str, Candidate] = field(default_factory=dict)
    refused: dict[str, Finding] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    gone_prefixes: set[str] = field(default_factory=set)
    full: bool = True
    unmatched: int = 0
    """Files a full walk saw that no evidence glob matches (not read)."""


def file_finding(name: str, message: str, hint: str = "", line: int = 1) -> Finding:
    """A finding on an evidence file (at the start of ``line``, 1-based)."""
    return Finding(name, Span(line - 1, 0, line - 1, 0), message, hint=hint)


def _broken_link(full: str) -> Finding:
    """GR201 for a symlink whose target does not exist or that loops: names the target the
    link holds (its text only; nothing at it is read) and how to repair the link.
    """
    try:
        target = printable_path(os.readlink(full))
    except OSError:
        target = "?"
    return file_finding(
        "unreadable-evidence", f"symlink is broken or loops (it points to {target}); not read",
        "Point the link at a file inside the evidence folder (ln -sf TARGET LINK), or delete the link.")


def _too_long(rel: str) -> Finding:
    return file_finding(
        "unreadable-evidence",
        "the path is longer than the system allows (PATH_MAX); the file was not read",
        "Move the file to a shorter path inside the evidence folder.")


def _undecodable_name(shown: str) -> Finding:
    return file_finding(
        "unreadable-evidence",
        f"the file name is not valid UTF-8 ({shown}, undecodable bytes shown as \\xNN); the file was not read",
        "Rename the file (an archive tool probably wrote its name in GBK or Latin-1); nothing else"
        " is affected.")


def walk_evidence(config: Config, pause: Callable[[], object] | None = None) -> Listing:
    """List evidence files (SPEC §2): a full walk of the evidence root (see module docstring).
    ``pause`` is called after each folder (and every :data:`PAUSE_EVERY` entries of a large
    one): the language server's yield point for foreground work (``server.session.Foreground``).
    """
    listing = Listing(full=True)
    root = config.evidence_root
    _walk(config, root, "", listing, pause)
    return listing


PAUSE_EVERY = 512
"""Directory entries between two calls of a walk's ``pause`` hook."""


def _walk(config: Config, top: Path, top_rel: str, listing: Listing,
          pause: Callable[[], object] | None = None) -> None:
    root = config.evidence_root
    root_len = len(str(root))
    inodes: dict[tuple[int, int], str] = {}

    def failed(err: OSError) -> None:
        where = str(err.filename or top)
        rel = printable_path(where[root_len:].lstrip(os.sep).replace(os.sep, "/"))
        if err.errno == errno.ENAMETOOLONG:
            listing.refused[rel] = _too_long(rel)
        elif err.errno != errno.ENOENT:
            listing.refused[rel] = file_finding(
                "unreadable-evidence", f"cannot list this folder: {err.strerror}; its files were not read")

    matches = evidence_matcher(config)
    ends = _suffixes(config)  # the usual globs: the name's suffix decides, no call per entry
    candidates = listing.candidates
    new_tuple = tuple.__new__  # the named tuples' own __new__ is a Python call: 60,000 in a 30k walk
    is_regular = stat_mod.S_ISREG
    stack = [(str(top), top_rel + "/" if top_rel else "")]
    while stack:  # os.scandir, depth first; entries in the order the folder lists them
        folder, prefix = stack.pop()
        subfolders = []
        try:
            with os.scandir(folder) as it:
                for n, entry in enumerate(it):
                    if pause is not None and n % PAUSE_EVERY == PAUSE_EVERY - 1:
                        pause()
                    name = entry.name
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    if is_dir:
                        if name not in SKIP_DIRS:
                            subfolders.append((name, entry.path))
                        continue
                    rel = prefix + name
                    if not (name.endswith(ends) if ends is not None else matches(rel)):
                        if entry.is_symlink():  # d_type: no system call
                            _symlinked_folder(config, entry.path, rel, listing)
                        listing.unmatched += 1
                        continue
                    # the usual text file: one lstat, no other call (an image's key also holds its
                    # sidecar's stat, names that are not UTF-8 are refused, and a file with more
                    # than one link may be reached twice: all go to _consider)
                    if (rel.isascii() or is_printable_path(rel)) and name[-4:].lower() != ".png":  # is_image_path
                        try:
                            st = entry.stat(follow_symlinks=False)  # cached by the entry for _consider
                        except OSError:
                            st = None
                        if st is not None and st.st_nlink == 1 and is_regular(st.st_mode):
                            candidates[rel] = new_tuple(Candidate, (entry.path, new_tuple(StatKey, (
                                st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))))
                            continue
                    _consider(config, root, entry.path, rel, listing, inodes, entry)
        except OSError as exc:  # listing the folder failed: none of its files is a candidate
            if exc.filename is None:
                exc.filename = folder
            failed(exc)
            for rel in [r for r in candidates if r.startswith(prefix) and "/" not in r[len(prefix):]]:
                del candidates[rel]
        # no order among a folder's files is needed (the reads are sorted, and a file reached
        # twice keeps the path that sorts first, whatever the order: _consider); the folders
        # are walked in name order so the pause points and refusals come in a stable order
        subfolders.sort(reverse=True)
        stack.extend((path, prefix + name + "/") for name, path in subfolders)
        if pause is not None:
            pause()


LISTING_FORM = 1
"""The definition of :func:`listing_digest`'s input: raise it when that changes, so no digest
stored before matches."""


def listing_digest(listing: Listing) -> str:
    """SHA-256 (hex, 64 characters) of what a full walk found: every candidate's path
    (relative to the evidence root) and stat key (size, mtime_ns, ctime_ns, inode; an image's
    holds its sidecar's, :func:`image_key`), in walk order, and every refused path with its
    finding. Two walks with the same digest listed the same paths with the same stat keys and
    refusals (a collision of SHA-256 aside, the hash the index already identifies contents
    by), so a scan that changed nothing for one changes nothing for the other: SPEC §4's stat
    key decides, per file, exactly as when the keys are compared one by one
    (``store._Scan``, "Unchanged full walks"). Costs about 0.35 µs a file, the cost of the
    serialisation (``marshal`` format 2, which has no back-references) and the hash, and
    keeps no per-file object.
    """
    keys = list(chain.from_iterable(map(_KEY_OF, listing.candidates.values())))
    refused = [(rel, json.dumps(finding_dict(f), ensure_ascii=False, sort_keys=True))
               for rel, f in listing.refused.items()]
    return hashlib.sha256(marshal.dumps((LISTING_FORM, list(listing.candidates), keys, refused), 2)).hexdigest()


_KEY_OF = operator.itemgetter(1)  # Candidate.key


_SIMPLE_GLOB = re.compile(r"(?:\*\*/)?\*(\.[A-Za-z0-9_-]+)")


def evidence_matcher(config: Config) -> Callable[[str], bool]:
    """``config.evidence_matches`` (SPEC §2 globs), with a fast path for the usual globs:
    when every glob is ``**/*.EXT`` or ``*.EXT`` (gitignore semantics: any depth), a path
    matches exactly when its name ends with one of the extensions (compared with the
    configured matcher in tests/core/test_scan_rules.py).
    """
    ends = _suffixes(config)
    if ends is None:
        return config.evidence_matches
    return lambda rel: rel.endswith(ends)


def _suffixes(config: Config) -> tuple[str, ...] | None:
    """The suffixes that decide a match when every evidence glob is ``**/*.EXT`` or ``*.EXT``
    (:func:`evidence_matcher`), else None.
    """
    suffixes = []
    for glob in config.evidence_globs:
        match = _SIMPLE_GLOB.fullmatch(glob)
        if match is None:
            return None
        suffixes.append(match[1])
    return tuple(suffixes)


def _consider(config: Config, root: Path, full: str, rel: str, listing: Listing,
              inodes: dict[tuple[int, int], str], entry: os.DirEntry[str] | None = None) -> None:
    """Add one path (a file or a symlink; ``full`` is its absolute path) to ``listing``.

    A name that is not valid UTF-8 is refused under its :func:`printable_path` (never read).
    """
    if not is_printable_path(rel):
        listing.refused[printable_path(rel)] = _undecodable_name(printable_path(rel))
        return
    try:
        lst = entry.stat(follow_symlinks=False) if entry is not None else os.lstat(full)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            listing.refused[rel] = _too_long(rel)
        return
    target, link_rel = full, rel
    if not stat_mod.S_ISLNK(lst.st_mode):
        st = lst
    else:
        try:
            resolved = Path(os.path.realpath(full, strict=True))
        except OSError:
            listing.refused[rel] = _broken_link(full)
            return
        if not resolved.is_relative_to(root):
            listing.refused[rel] = file_finding(
                "unreadable-evidence",
                f"symlink points outside the evidence root ({resolved}); refused, never read",
                "Copy the document into the evidence folder instead of linking to it.")
            return
        rel_target = resolved.relative_to(root).as_posix()
        if not is_printable_path(rel_target):
            listing.refused[rel] = _undecodable_name(printable_path(rel_target))
            return
        if any(part in SKIP_DIRS for part in rel_target.split("/")):
            return
        rel = rel_target
        target = str(resolved)
        try:
            st = os.stat(target)
        except OSError:
            return
    if not stat_mod.S_ISREG(st.st_mode):
        if stat_mod.S_ISDIR(st.st_mode) and target != full:  # a symlinked folder named like evidence
            _symlinked_folder(config, full, link_rel, listing)
        elif not stat_mod.S_ISDIR(st.st_mode):  # a FIFO, socket or device named like evidence
            listing.refused[rel] = file_finding(
                "unreadable-evidence", f"{_kind(st.st_mode)}, not a regular file; never read",
                "Replace it with a regular file, or move it out of the evidence folder.")
        return
    key = (st.st_dev, st.st_ino)
    if key in inodes and inodes[key] != rel:
        if rel < inodes[key]:
            del listing.candidates[inodes[key]]
        else:
            return
    inodes[key] = rel
    listing.candidates[rel] = Candidate(target, image_key(target, StatKey.of(st)) if is_image_path(rel)
                                        else StatKey.of(st))


def _symlinked_folder(config: Config, full: str, rel: str, listing: Listing) -> None:
    """Report ``full`` (a symlink at ``rel``, relative to the evidence root) when it points to
    a folder: SPEC §2 never follows one, and a writer who linked a folder in expects its files
    to be evidence, so the link is named instead of skipped silently (docs/decisions.md,
    "Evidence"). Only metadata of the target is looked at (``realpath``, ``stat``), never a
    file in it. A link inside the evidence root is information (its files are indexed under
    their own paths); one elsewhere in the workspace or outside it is ``unreadable-evidence``.
    A broken link, or a link to a file, is not this function's business.
    """
    try:
        resolved = Path(os.path.realpath(full, strict=True))
        if not resolved.is_dir():
            return
    except OSError:
        return
    root = config.evidence_root
    if resolved.is_relative_to(root):
        inside = resolved.relative_to(root).as_posix()
        shown = config.evidence_display("" if inside == "." else inside)
        listing.refused[rel] = Finding(
            "unreadable-evidence", Span(0, 0, 0, 0),
            f"symlinked folder, not followed (SPEC §2): it points to {printable_path(shown)}/ inside the"
            " evidence folder, whose files are indexed once, under their own paths",
            hint="Nothing is missing from the index; remove the link if it was meant to add documents.",
            severity=Severity.INFORMATION)
    elif resolved.is_relative_to(config.root):
        shown = printable_path(resolved.relative_to(config.root).as_posix())
        listing.refused[rel] = file_finding(
            "unreadable-evidence",
            f"symlinked folder, not followed (SPEC §2): it points to {shown}/, outside the evidence"
            " folder, so its files were not read",
            "Move the documents into the evidence folder (a link is never followed), or give that"
            " folder as the evidence folder with --evidence.")
    else:
        listing.refused[rel] = file_finding(
            "unreadable-evidence",
            f"symlinked folder, not followed (SPEC §2): it points to {printable_path(str(resolved))},"
            " outside the workspace; refused, nothing in it was read",
            "Copy the documents into the evidence folder instead of linking to them, or give that"
            " folder with --evidence.")


SIDECAR_SIZE_SHIFT = 40
"""An image's stat key holds its sidecar's size above this bit (PNGs stay below a terabyte)."""


def image_key(png: str, key: StatKey) -> StatKey:
    """The stat key of an image with its sidecar ``png + ".yaml"`` (SPEC §12: the sidecar is
    watched like evidence): the size holds the sidecar's size plus one above
    :data:`SIDECAR_SIZE_SHIFT` (0 without a sidecar), mtime and ctime are the later of the
    two files', the inode is the image's. Any change of the sidecar (written, replaced,
    deleted) changes its ctime or size, so the image is read again with it.
    """
    try:
        side = os.stat(png + ".yaml")
    except OSError:
        return key
    return StatKey(key.size + ((side.st_size + 1) << SIDECAR_SIZE_SHIFT), max(key.mtime_ns, side.st_mtime_ns),
                   max(key.ctime_ns, side.st_ctime_ns), key.inode)


def resolve_paths(config: Config, paths: Iterable[str]) -> Listing:
    """Look only at ``paths`` (relative to the evidence root, ``/``-separated, as a file
    watcher names them): files, folders (walked) and paths that no longer exist (their rows,
    and rows under them when they were folders, are dropped). Paths outside the root, under
    ``.git``/``.grounding`` or below a symlinked folder are ignored, as a walk would. An
    image's sidecar ``NAME.png.yaml`` stands for its image ``NAME.png`` (SPEC §12).
    """
    listing = Listing(full=False)
    root = config.evidence_root
    inodes: dict[tuple[int, int], str] = {}
    for raw in sorted(set(paths)):
        rel = raw.replace(os.sep, "/").strip("/")
        while rel.startswith("./"):
            rel = rel[2:]
        rel = config.evidence_path_for(rel) or rel  # an image's sidecar names its image (SPEC §12)
        parts = rel.split("/") if rel else []
        if not parts or any(p in ("", ".", "..") for p in parts) or any(p in SKIP_DIRS for p in parts):
            continue
        full = root.joinpath(*parts)
        if not is_printable_path(rel):  # rows are stored under the printable form
            shown = printable_path(rel)
            listing.gone.add(shown)
            listing.gone_prefixes.add(shown + "/")
            if os.path.isdir(full) and not os.path.islink(full):
                _walk(config, full, rel, listing)
            elif config.evidence_matches(rel) and os.path.lexists(full):
                listing.refused[shown] = _undecodable_name(shown)
            continue
        if _under_symlinked_folder(root, parts):
            listing.gone.add(rel)
            listing.gone_prefixes.add(rel + "/")
            continue
        try:
            lst = os.lstat(full)
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                listing.refused[rel] = _too_long(rel)
                continue
            listing.gone.add(rel)
            listing.gone_prefixes.add(rel + "/")
            continue
        if stat_mod.S_ISDIR(lst.st_mode):
            listing.gone_prefixes.add(rel + "/")
            _walk(config, full, rel, listing)
        elif config.evidence_matches(rel):
            listing.gone.add(rel)  # dropped unless it is (still) a candidate
            _consider(config, root, str(full), rel, listing, inodes)
        elif stat_mod.S_ISLNK(lst.st_mode):  # a symlinked folder is named, as a walk names it
            listing.gone.add(rel)
            _symlinked_folder(config, str(full), rel, listing)
    return listing


def _under_symlinked_folder(root: Path, parts: Sequence[str]) -> bool:
    here = root
    for part in parts[:-1]:
        here = here / part
        try:
            if stat_mod.S_ISLNK(os.lstat(here).st_mode):
                return True
        except OSError:
            return False
    return False


# -- reading ---------------------------------------------------------------------------------


class Unstable(Exception):
    """The file kept changing while it was read (SPEC §4); nothing was indexed from it."""


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, a device, a socket, a folder): never read, so
    a named pipe put where a file (or an image's sidecar) was expected cannot block a scan.
    """

    def __init__(self, kind: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file, so it was not read")


def _kind(mode: int) -> str:
    if stat_mod.S_ISDIR(mode):
        return "a folder"
    if stat_mod.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat_mod.S_ISSOCK(mode):
        return "a socket"
    if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode):
        return "a device"
    return "not a file"


def read_stable(path: str | Path, attempts: int = READ_ATTEMPTS) -> tuple[bytes, StatKey]:
    """The file's bytes and the stat key they belong to, read while it did not change.

    Raises :class:`Unstable` after ``attempts`` reads that each saw a change, :class:`TooLarge`
    (an ``OSError``) for a file over :data:`MAX_EVIDENCE_BYTES` (never read: at most that
    many bytes are ever in memory), :class:`NotRegular` (an ``OSError``) for a FIFO, device,
    socket or folder (opened without blocking, never read), and ``OSError``
    (``FileNotFoundError`` when it vanished) from the file system.
    """
    pause = READ_BACKOFF_S
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    for attempt in range(attempts):
        with os.fdopen(os.open(path, flags), "rb") as handle:
            opened = os.fstat(handle.fileno())
            if not stat_mod.S_ISREG(opened.st_mode):
                raise NotRegular(_kind(opened.st_mode))
            before = StatKey.of(opened)
            if before.size > MAX_EVIDENCE_BYTES:
                raise TooLarge(before.size)
            data = handle.read(MAX_EVIDENCE_BYTES + 1)
            if len(data) > MAX_EVIDENCE_BYTES:  # grew while read
                raise TooLarge(len(data))
            after = StatKey.of(os.fstat(handle.fileno()))
        if before == after and after.size == len(data):
            try:
                now = StatKey.of(os.stat(path))
            except FileNotFoundError:
                now = after  # renamed away after the read: the bytes were stable
            if now.inode != after.inode or now == after:
                return data, after
        if attempt + 1 < attempts:
            time.sleep(pause)
            pause *= 2
    raise Unstable(str(path))


class Outside(OSError):
    """The path resolves (through a symlink) outside the folder it must stay in: never read."""

    def __init__(self, resolved: str) -> None:
        super().__init__(errno.EACCES, f"it is a symlink to {resolved}, outside the evidence folder,"
                         " so it was not read")


def read_inside(root: Path, path: Path, attempts: int = READ_ATTEMPTS) -> tuple[bytes, StatKey]:
    """:func:`read_stable` of ``path`` after checking that its real path (symlinks resolved)
    is inside ``root`` (an absolute, resolved folder; SPEC §2: nothing outside the workspace
    is read). For files a walk did not vet: an image's sidecar, a PNG read again for a hover.

    Raises :class:`Outside` (an ``OSError``) for a path resolving outside ``root``, and
    whatever :func:`read_stable` raises (``FileNotFoundError`` for a missing file or a
    dangling symlink, :class:`NotRegular`, :class:`TooLarge`, :class:`Unstable`).
    """
    resolved = os.path.realpath(path)
    if not Path(resolved).is_relative_to(root):
        raise Outside(resolved)
    return read_stable(resolved, attempts)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def now_ns() -> int:
    return time.time_ns()


# -- duplicate doc ids (SPEC §3) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileRow:
    """What the store keeps of one evidence path (relative to the evidence root).

    ``size`` -1 marks a row that must be re-read at the next scan (refused, unstable, or fresh
    on a coarse clock); ``sha256`` "" marks a path that was never read (refused).
    ``findings`` are the file's evidence findings as stored (JSON-ready dicts).
    """

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    sha256: str
    doc_id: str | None
    declared_version: int | None
    problem: dict[str, Any] | None
    findings: tuple[dict[str, Any], ...] = ()

    def matches(self, key: StatKey) -> bool:
        return self.size >= 0 and StatKey(self.size, self.mtime_ns, self.ctime_ns, self.inode) == key

    def same_file(self, other: FileRow | None) -> bool:
        """Equal as far as indexing goes (everything but the findings)."""
        return other is not None and (self.path, self.size, self.mtime_ns, self.ctime_ns, self.inode,
                                      self.sha256, self.doc_id, self.declared_version,
                                      self.problem) == (
            other.path, other.size, other.mtime_ns, other.ctime_ns, other.inode, other.sha256,
            other.doc_id, other.declared_version, other.problem)

    @property
    def indexable(self) -> bool:
        return self.doc_id is not None and self.problem is None

    @property
    def read(self) -> bool:
        """False for a refused path (never read)."""
        return self.sha256 != ""


def finding_dict(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "message": f.message, "line": f.span.start_line + 1}
    if f.hint:
        out["hint"] = f.hint
    if f.related:
        out["related"] = [[r.path, r.line, r.message] for r in f.related]
    if f.severity is not None:  # a finding below its rule's severity (a symlinked folder note)
        out["severity"] = f.severity.value
    return out


def finding_of(d: dict[str, Any]) -> Finding:
    line = max(int(str(d.get("line", 1))) - 1, 0)
    span = Span(line, 0, line, 3) if d["name"] in ("duplicate-doc-id", "version-reuse") else Span(line, 0, line, 0)
    related = tuple(Location(str(r[0]), int(r[1]), str(r[2] or "")) for r in d.get("related", ()))
    severity = Severity(d["severity"]) if d.get("severity") in Severity._value2member_map_ else None
    return Finding(str(d["name"]), span, str(d["message"]), hint=str(d.get("hint", "")), related=related,
                   severity=severity)


def choose(doc_id: str, group: list[FileRow], display: Any) -> tuple[dict[int | None, str], dict[str, list[Finding]]]:
    """SPEC §3 duplicate rule for one doc_id's indexable files.

    Returns ``{declared version or None: chosen path}`` and ``{path: duplicate-doc-id
    findings}``. ``display`` maps a path relative to the evidence root to one relative to the
    workspace root (for messages).
    """
    group = sorted(group, key=lambda r: r.path)
    chosen: dict[int | None, str] = {}
    findings: dict[str, list[Finding]] = {}
    if len(group) == 1:
        chosen[group[0].declared_version] = group[0].path
        return chosen, findings
    if any(r.declared_version is None for r in group):
        dup_sets = [group]
    else:
        by_version: dict[int | None, list[FileRow]] = {}
        for r in group:
            by_version.setdefault(r.declared_version, []).append(r)
        dup_sets = []
        for version, same in by_version.items():
            if len(same) == 1:
                chosen[version] = same[0].path
            else:
                dup_sets.append(same)
    for same in dup_sets:
        first = same[0]
        chosen[first.declared_version] = first.path
        for r in same:
            others = [o for o in same if o is not r]
            kept = "this file is indexed" if r is first else f"only {display(first.path)} is indexed"
            findings.setdefault(r.path, []).append(Finding(
                "duplicate-doc-id", Span(0, 0, 0, 3),
                f"doc_id {doc_id!r} is also claimed by " + ", ".join(display(o.path) for o in others)
                + f" without distinct declared versions; {kept}",
                hint="Give each file its own doc_id, or declare distinct 'version' values.",
                related=tuple(Location(display(o.path), 1) for o in others),
            ))
    return chosen, findings
