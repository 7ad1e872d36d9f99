"""Completion inside a footnote definition: doc ids, versions, lines (SPEC §5.1, §10).

The stages and what each offers are ``grounding_core/complete.py``'s; this handler captures
the open draft and the index view, converts the cursor with the session codec and the
entries' spans back (in the worker that computes them). Trigger characters are ``@``, ``:``,
``#`` (image regions, SPEC §12) and ``/``; in a ``memory:`` id the stages are scope, key,
version (``server/features/memory.py``, SPEC §11). Only drafts (SPEC §2 globs) are served; before
the first index exists, nothing is.

A line entry's label is its number and its ``detail`` the line's text; a client with
``labelDetailsSupport`` (VS Code) also gets the text as ``labelDetails.description``, shown
beside every item of the list (``server/convert.py``).
"""

from __future__ import annotations

from lsprotocol import types

from grounding_core.complete import citation_completions
from server.convert import lsp_completion_list
from server.documents import DocumentSnapshot
from server.features import memory
from server.session import IndexView, Session

__all__ = ["OPTIONS", "TRIGGER_CHARACTERS", "completion"]

TRIGGER_CHARACTERS = ["@", ":", "#", *memory.TRIGGER_CHARACTERS]
OPTIONS = types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False)


async def completion(session: Session, params: types.CompletionParams) -> types.CompletionList | None:
    uri = params.text_document.uri
    document = session.document(uri)
    view = session.current_view()
    if document is None or view is None or session.draft_rel(uri) is None:
        return None
    label_details = bool(session.capability("text_document.completion.completion_item.label_details_support",
                                            False))
    return await session.readers.run(_completion, document, view, params.position, label_details)


def _completion(document: DocumentSnapshot, view: IndexView, position: types.Position,
                label_details: bool) -> types.CompletionList | None:
    line, column = document.codec.core_position(position, document.lines)
    remembered = memory.completions_at(document, view, line, column)  # memory hook (SPEC §11)
    if remembered is not None:
        return remembered
    found = citation_completions(document.lines, line, column, view.snapshot, view.today,
                                 view.config.image_language)
    if found is None:
        return None
    return lsp_completion_list(found, document.lines, document.codec, label_details)
