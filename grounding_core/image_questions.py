"""Questions about image regions (SPEC §13, §15): the measured vocabulary of the closed
question grammar and the answer it gives.

The closed grammar (``grounding_core.question``) matches a question against the known
subjects, field names **and measured values**, longest first, and refuses what is left. This
module is the image part, kept apart so the grammar needs two small hooks:

- :func:`measured_terms_in` — the measured values occurring in an NFKC question: every colour,
  shape and size name of :mod:`grounding_core.images` (``image_language``), e.g. ``红色``,
  ``小``, ``圆形``. The vocabulary is the fixed, documented set of names the measurement can
  produce, not only the values some image has now: ``紫色 圆形`` is a question the index can
  answer (with ``no_evidence`` when no region is purple), ``材质`` is not (``unsupported_terms``).
- :func:`answer_measured` — the answer once the grammar found measured values and no
  unsupported term. A measured value implies its field (``红色`` asks ``颜色``, ``圆形``
  ``形状``, ``小`` ``大小``; docs/decisions.md); the regions of active images whose
  measurement has every named value are found through the index
  (``IndexSnapshot.regions_matching``, an indexed lookup); exactly one region gives an
  ``answered`` answer whose claims are that region's attributes, one per implied or asked
  field, each citing ``DOC_ID@VERSION#rN`` (SPEC §15 image claims); none gives ``abstain``
  with reason ``no_evidence``; several give ``abstain`` with reason ``ambiguous_subject``
  listing them (each region is its own subject ``SUBJECT#rN``: an answer never mixes them).
  The conflict gate runs over each cited key ``(SUBJECT#rN, FIELD)`` as for any answer.

The answer's context is the whole cited image version (``{units: ["shapes@1"]}``): a region
is visible only through its whole version (docs/decisions.md), so the Markdown it renders
checks clean with ``grounding check``.
"""

from __future__ import annotations

import datetime as dt
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .answer import answer_json
from .budget import AnswerWire, build_answer
from .config import Config
from .conflicts import check_keys, source_id
from .image_claims import SUPPORT_TYPE
from .images import COLORS, FIELDS, SHAPES, SIZES, measured_words
from .index import IndexSnapshot, VocabularyTerm

SUPPORT_SCOPE = "complete_current_subject_field_source_set"
"""SPEC §13 ``support_scope`` (the same value as ``grounding_core.question``)."""

MAX_REGIONS = 20
"""Regions listed at most for an ambiguous question."""


def measured_terms_in(text: str, language: str = "zh") -> list[str]:
    """The measured values (colour, shape and size names in ``language``) occurring in
    ``text`` (already NFKC), longest first, each once. The grammar decides overlaps.
    """
    found = [w for w in measured_words(language) if w in text]
    return sorted(dict.fromkeys(found), key=lambda w: (-len(w), text.find(w)))


@dataclass(frozen=True)
class MeasuredVocabulary:
    """The measured values as a vocabulary source of the closed grammar (``terms_in(text,
    today)``, the ``grounding_core.question.Vocabulary`` protocol): combine it with the
    snapshot's subjects and field names.
    """

    language: str = "zh"

    def terms_in(self, text: str, today: dt.date) -> list[VocabularyTerm]:
        """Each measured value in ``text`` as a ``VocabularyTerm`` of kind ``"measured"``."""
        return [VocabularyTerm(w, "measured", (w,)) for w in measured_terms_in(text, self.language)]


def field_of(value: str, language: str = "zh") -> str | None:
    """The measured field a value names (``红色`` -> ``颜色``, ``circle`` -> ``shape``), or None."""
    names = FIELDS[language]
    groups = ((COLORS, 2), (SHAPES, 3), (SIZES, 4))
    for words, index in groups:
        spelled = words.values() if language == "zh" else words.keys()
        if value in spelled:
            return names[index]
    return None


@dataclass(frozen=True)
class MeasuredAnswer:
    """An answer about image regions (SPEC §13). ``wire`` is the answer wire (§8); ``units``
    the context it was built from (whole image versions); ``facts`` the §13 keys (``reason``,
    ``support_scope``, ``same_key_sources_checked`` and, when they apply,
    ``conflict_evidence``, ``subjects``, ``regions``).
    """

    question: str
    fields: tuple[str, ...]
    subject: str | None
    units: tuple[str, ...]
    wire: AnswerWire
    facts: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    """One sentence per conflicting key (``Conflict.describe``), as ``AnswerDraft.conflicts``."""

    def context_value(self) -> dict[str, Any]:
        return {"units": list(self.units)}

    def json_text(self) -> str:
        """The JSON answer (SPEC §5.2, §15 image claims) plus question, fields, subject, context
        and the §13 facts.
        """
        return answer_json(self.wire, self.question, self.fields, self.subject, self.context_value(), self.facts)

    def markdown(self) -> str:
        """A Markdown draft: one sentence per claim (the attribute) with its verified footnote."""
        out = ["---", f"question: {json.dumps(self.question, ensure_ascii=False)}",
               f"fields: {json.dumps(list(self.fields), ensure_ascii=False)}"]
        if self.subject is not None:
            out.append(f"subject: {json.dumps(self.subject, ensure_ascii=False)}")
        out.append(f"context: {json.dumps(self.context_value(), ensure_ascii=False)}")
        out.append("---")
        notes = []
        for n, claim in enumerate(self.wire.claims, 1):
            out.extend([f"{claim['text']}[^{n}]", ""])
            notes.append(f'[^{n}]: {claim["id"]} sha256:{str(claim["sha256"])[:12]} "{claim["quote"]}"')
        reason = self.facts.get("reason")
        if reason not in (None, "answered"):
            out.extend([f"<!-- reason: {reason} -->", ""])
        for note in self.notes:
            out.extend([f"<!-- {note.replace('-->', '- ->')} -->", ""])
        out.extend(notes)
        return "\n".join(out).rstrip("\n") + "\n"


def answer_measured(
    snapshot: IndexSnapshot,
    config: Config,
    today: dt.date,
    question: str,
    measured: Sequence[str],
    fields: Sequence[str] = (),
    reserve: int = 240,
) -> MeasuredAnswer:
    """Answer a question whose closed-grammar reading found the measured values ``measured``
    (and possibly the measured field names ``fields``) and nothing unsupported (module
    docstring). Raises ``budget.BudgetError`` when even the empty shell exceeds ``reserve``.
    """
    language = config.image_language
    text = unicodedata.normalize("NFKC", question)
    conditions: list[tuple[str, str]] = []
    asked: list[str] = []
    for value in measured:
        name = field_of(value, language)
        if name is None:
            continue
        conditions.append((name, value))
        if name not in asked:
            asked.append(name)
    for name in fields:
        if name in FIELDS[language] and name not in asked:
            asked.append(name)
    matches = snapshot.regions_matching(conditions, today, limit=MAX_REGIONS + 1) if conditions else []
    if not matches:
        wire = build_answer([], asked, False, reserve, config.encoding)
        return MeasuredAnswer(question, tuple(asked), None, (), wire, _facts("no_evidence", 0),
                              (f"no region of an active image measures {' '.join(v for _, v in conditions)}"
                               if conditions else "the question names no measured value",))
    if len(matches) > 1:
        named = [f"{record.doc_id}@{record.version}#r{number}" for record, number, _ in matches[:MAX_REGIONS]]
        wire = build_answer([], asked, False, reserve, config.encoding)
        subjects = [subject for _, _, subject in matches[:MAX_REGIONS]]
        more = " and more" if len(matches) > MAX_REGIONS else ""
        return MeasuredAnswer(
            question, tuple(asked), None, (), wire,
            _facts("ambiguous_subject", 0, subjects=subjects, regions=named),
            (f"several regions measure {' '.join(v for _, v in conditions)}: {', '.join(named)}{more};"
             " ask about one (add its position, size or the image's subject)",))
    record, number, subject = matches[0]
    stored = snapshot.measurement(record.sha256)
    region = stored.in_language(language).region(f"r{number}") if stored is not None else None
    if region is None:  # the index lists a region it cannot describe: say so, never guess
        wire = build_answer([], asked, False, reserve, config.encoding)
        return MeasuredAnswer(question, tuple(asked), None, (), wire, _facts("no_evidence", 0))
    ordered = sorted(asked, key=lambda n: _position(text, n, conditions))
    claims: list[dict[str, Any]] = []
    for name in ordered:
        measured_value = region.value(name)
        if measured_value is None:
            continue
        line = f"{name}：{measured_value}"
        claims.append({"text": line, "quote": line, "id": f"{record.doc_id}@{record.version}#r{number}",
                       "doc_id": record.doc_id, "version": record.version, "region": f"r{number}",
                       "sha256": record.sha256, "field": name, "support_type": SUPPORT_TYPE})
    gate = check_keys(snapshot, [(subject, name) for name in ordered], today)
    conflict = bool(gate.conflicts)
    wire = build_answer([] if conflict else claims, ordered, conflict, reserve, config.encoding)
    facts = _facts("conflicting_evidence" if conflict else
                   "answered" if wire.status.value == "answered" else
                   "output_budget" if wire.skipped else "missing_fields",
                   gate.lines_checked)
    if conflict:
        facts["conflict_evidence"] = [
            {"id": source_id(kl), "doc_id": kl.doc_id, "version": kl.version, "line": kl.line,
             "value": kl.value, "path": config.evidence_display(kl.path)}
            for c in gate.conflicts for kl in snapshot.key_lines((c.subject, c.field), today)]
    return MeasuredAnswer(question, tuple(ordered), subject, (f"{record.doc_id}@{record.version}",), wire, facts,
                          conflicts=tuple(c.describe() for c in gate.conflicts))


def _position(text: str, name: str, conditions: list[tuple[str, str]]) -> int:
    """Where a field is asked in the question: at its value's or its name's first occurrence."""
    places = [text.find(v) for n, v in conditions if n == name and v in text]
    if name in text:
        places.append(text.find(name))
    return min(places) if places else len(text)


def _facts(reason: str, lines: int, **extra: Any) -> dict[str, Any]:
    return {"reason": reason, "support_scope": SUPPORT_SCOPE, "same_key_sources_checked": lines, **extra}


__all__ = ["MAX_REGIONS", "SUPPORT_SCOPE", "MeasuredAnswer", "MeasuredVocabulary", "answer_measured",
           "field_of", "measured_terms_in"]
