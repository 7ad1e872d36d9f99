"""Which offsets of an HTML fragment are prose (issue 13 item 5): the tokenizer behind
:func:`grounding_core.drafts._mask_html`.

A module of its own so that ``html.parser`` (and its regexes) is imported only by the checks
of drafts that hold an HTML block, not by every ``grounding check`` process.
"""

from __future__ import annotations

from html.parser import HTMLParser

NOT_PROSE_ELEMENTS = frozenset({"script", "style", "pre", "code", "textarea", "template",
                                 "del", "s", "strike", "kbd", "samp"})
"""Elements whose content is not prose: code, and deleted text (it is shown struck out)."""


class ProseMask(HTMLParser):
    """Records which offsets of an HTML fragment are text a reader sees (stdlib tokenizer).

    Tags, comments, declarations, processing instructions and CDATA are not prose; nor is
    the content of :data:`NOT_PROSE_ELEMENTS`. Every event is recorded with its start
    offset; an event ends where the next one starts.
    """

    def __init__(self, line_starts: list[int]) -> None:
        super().__init__(convert_charrefs=False)
        self._line_starts = line_starts
        self.events: list[tuple[int, bool]] = []  # (start offset, prose?)
        self._hidden = 0

    def _at(self) -> int:
        line, col = self.getpos()
        return self._line_starts[line - 1] + col

    def _event(self, prose: bool) -> None:
        self.events.append((self._at(), prose and self._hidden == 0))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._event(False)
        if tag in NOT_PROSE_ELEMENTS:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        self._event(False)
        if tag in NOT_PROSE_ELEMENTS and self._hidden:
            self._hidden -= 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._event(False)

    def handle_data(self, data: str) -> None:
        self._event(True)

    def handle_entityref(self, name: str) -> None:
        self._event(True)

    def handle_charref(self, name: str) -> None:
        self._event(True)

    def handle_comment(self, data: str) -> None:
        self._event(False)

    def handle_decl(self, decl: str) -> None:
        self._event(False)

    def handle_pi(self, data: str) -> None:
        self._event(False)

    def unknown_decl(self, data: str) -> None:
        self._event(False)
