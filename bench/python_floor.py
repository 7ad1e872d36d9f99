"""The floor of any ``grounding check`` written in Python.

What such a process pays before it does anything of its own. Run as a child process by
``bench/run.py`` (the ``cli`` phase), with the same interpreter and environment as the measured ``grounding check``:

    python3 bench/python_floor.py EVIDENCE_DIR DRAFT

It starts the interpreter (with ``site``, as the console script does), imports what a check
cannot do without (markdown-it-py with the footnote and front-matter plugins for the draft,
PyYAML for front matter, ``sqlite3`` for the index), makes the bare SPEC §4 walk
(``os.scandir`` and one ``lstat`` per entry under the evidence folder, no filtering, no
sort, nothing stored) and parses the draft with markdown-it-py. It reads no index row (the
first check's own floor is the ``first check floor`` row), so it is an under-estimate.
Not a test: figures depend on the machine.
"""

from __future__ import annotations

import os
import sqlite3  # noqa: F401  (the index's driver: part of the floor)
import sys

import yaml  # noqa: F401  (front matter: part of the floor)
from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin


def walk(folder: str) -> int:
    """``lstat`` every entry below ``folder`` (folders followed, links not); the count."""
    count = 0
    stack = [folder]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                entry.stat(follow_symlinks=False)
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return count


def main() -> None:
    evidence, draft = sys.argv[1], sys.argv[2]
    walk(evidence)
    with open(draft, encoding="utf-8") as handle:
        text = handle.read()
    md = MarkdownIt("commonmark").use(front_matter_plugin).use(footnote_plugin, inline=False)
    md.parse(text)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
