"""The closed question grammar and the answers built on it (SPEC §13, §15 "§13 questions").

``grounding answer --question Q`` without ``--fields`` must decide what Q asks and refuse what
it cannot answer rather than guess. :func:`parse_question`:

1. Q is normalised with Unicode NFKC (nothing else: case and spaces stay as written).
2. The known vocabulary occurring in Q — subjects and field names of active, non-meta field
   lines, and measured image values (SPEC §12) once a source provides them — is matched
   verbatim, longest first (then leftmost); matches never overlap.
3. In what is left, the question words of ``query_stopwords`` (``grounding.toml``; default
   :data:`DEFAULT_QUERY_STOPWORDS`) are removed, longest first. A stopword made of ASCII
   letters and digits counts as a whole word in any ASCII case (``is`` is removed from ``Is
   it`` but not from ``this``); others (Chinese) match anywhere, verbatim.
4. Whitespace, punctuation (Unicode categories P*) and invisible format characters (Cf, Cc)
   are removed.
5. What remains must be empty; otherwise the maximal runs of what remains, in question order,
   are the ``unsupported_terms`` (``"重量 用途"`` -> ``["重量", "用途"]``) and the answer is
   ``abstain`` with reason ``unsupported_terms``. Symbols such as ``$`` or an emoji are not
   punctuation: they remain, and are listed.

:func:`answer_question` then answers (SPEC §13, §15): two subjects named -> ``abstain``,
reason ``ambiguous_subject`` with both listed (never mixed); no field named -> ``abstain``,
``no_field``; a named field that the named subject has no line for -> ``missing_fields`` (never
borrowed from another subject); without a named subject, the subjects having the fields decide:
one is used, several are ``ambiguous_subject``. The generator (``grounding_core.answer``) builds
claims from the compiled context only; a conflict is ``conflict`` with reason
``conflicting_evidence``, no claims, and every source under ``conflict_evidence``.

The vocabulary source is pluggable (:class:`Vocabulary`): the default reads
:meth:`grounding_core.index.IndexSnapshot.vocabulary_in`; image evidence can add measured values
by passing a :class:`CombinedVocabulary`.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from .answer import AnswerDraft, generate_answer
from .budget import build_answer
from .context import compile_context
from .drafts import ContextSpec
from .image_questions import MeasuredAnswer, MeasuredVocabulary, answer_measured
from .index import IndexSnapshot, VocabularyTerm
from .model import Status

if TYPE_CHECKING:
    from .config import Config

DEFAULT_QUERY_STOPWORDS: tuple[str, ...] = (
    # Chinese question and function words
    "什么时候", "什么", "几点", "几号", "哪天", "哪一天", "在哪里", "在哪儿", "在哪", "哪里", "哪儿",
    "多少", "多久", "多长", "怎么样", "怎么", "怎样", "如何", "哪个", "哪些", "是否", "有没有",
    "请问", "告诉我", "一下", "是", "的", "吗", "呢", "吧", "呀", "啊", "了", "有", "和", "与", "及",
    "在", "我", "我们", "你", "请",
    # English question and function words (whole words)
    "when", "what", "where", "which", "who", "whom", "whose", "why", "how", "much", "many",
    "is", "are", "was", "were", "be", "the", "a", "an", "of", "for", "to", "at", "in", "on",
    "does", "do", "did", "can", "could", "will", "please", "tell", "me", "about", "and", "or",
    "it", "its", "there", "i", "we", "you",
)
"""The documented default of ``query_stopwords`` (SPEC §15): question words only, never words
that name a subject or a field. Replace it in ``grounding.toml``; ``[]`` removes none."""

SUPPORT_SCOPE = "complete_current_subject_field_source_set"
"""What an answer's support was checked against (SPEC §13): every active line of each checked
subject and field, never only the context or the budget."""

REASONS = ("answered", "missing_fields", "no_evidence", "conflicting_evidence", "unsupported_terms",
           "no_field", "ambiguous_subject", "output_budget")
"""The ``reason`` values of SPEC §13."""

_WORD = re.compile(r"[A-Za-z0-9]")


class Vocabulary(Protocol):
    """A source of known terms: every one occurring in an NFKC text (SPEC §13)."""

    def terms_in(self, text: str, today: dt.date) -> Iterable[VocabularyTerm]:
        ...


@dataclass(frozen=True)
class SnapshotVocabulary:
    """Subjects and field names of an index snapshot (:meth:`IndexSnapshot.vocabulary_in`)."""

    snapshot: IndexSnapshot

    def terms_in(self, text: str, today: dt.date) -> Iterable[VocabularyTerm]:
        return self.snapshot.vocabulary_in(text, today)


@dataclass(frozen=True)
class CombinedVocabulary:
    """Several sources as one (e.g. the snapshot plus measured image values)."""

    sources: tuple[Vocabulary, ...]

    def terms_in(self, text: str, today: dt.date) -> Iterable[VocabularyTerm]:
        for source in self.sources:
            yield from source.terms_in(text, today)


@dataclass(frozen=True, slots=True)
class QuestionMatch:
    """One matched term: ``start``/``end`` are code-point offsets into the NFKC question."""

    term: VocabularyTerm
    start: int
    end: int


@dataclass(frozen=True)
class ParsedQuestion:
    """What the grammar read in a question (SPEC §13). Names are as the index spells them,
    distinct, in order of first occurrence; ``unsupported`` are the leftover runs.
    """

    question: str
    normalized: str
    matches: tuple[QuestionMatch, ...]
    subjects: tuple[str, ...]
    fields: tuple[str, ...]
    measured: tuple[str, ...]
    unsupported: tuple[str, ...]

    @property
    def supported(self) -> bool:
        return not self.unsupported


def parse_question(question: str, vocabulary: Vocabulary, today: dt.date,
                   stopwords: Sequence[str] | None = None) -> ParsedQuestion:
    """Read ``question`` with the closed grammar (module docstring). Pure given its inputs.

    ``stopwords`` None means :data:`DEFAULT_QUERY_STOPWORDS`. Linear in the question's length
    apart from the vocabulary lookup, which the source keeps near-linear.
    """
    text = unicodedata.normalize("NFKC", question)
    covered = [False] * len(text)
    occurrences: list[tuple[int, int, VocabularyTerm]] = []
    for term in vocabulary.terms_in(text, today):
        if not term.text:
            continue
        at = text.find(term.text)
        while at >= 0:
            occurrences.append((at, at + len(term.text), term))
            at = text.find(term.text, at + 1)
    occurrences.sort(key=lambda o: (o[0] - o[1], o[0], o[2].kind))
    matches: list[QuestionMatch] = []
    taken: list[tuple[int, int]] = []
    for start, end, term in occurrences:
        if (start, end) in taken:  # the same text under another kind (a subject that is a field)
            matches.append(QuestionMatch(term, start, end))
            continue
        if any(covered[start:end]):
            continue
        covered[start:end] = [True] * (end - start)
        taken.append((start, end))
        matches.append(QuestionMatch(term, start, end))
    _remove_stopwords(text, covered, DEFAULT_QUERY_STOPWORDS if stopwords is None else stopwords)
    for i, ch in enumerate(text):
        if not covered[i] and (ch.isspace() or unicodedata.category(ch)[0] == "P"
                               or unicodedata.category(ch) in ("Cf", "Cc")):
            covered[i] = True
    runs = [m.group(0) for m in re.finditer(r"[^\x00]+", "".join(
        "\x00" if covered[i] else ch for i, ch in enumerate(text)))]
    matches.sort(key=lambda m: m.start)

    def names(kind: str) -> tuple[str, ...]:
        out: list[str] = []
        for m in matches:
            if m.term.kind == kind:
                out.extend(n for n in m.term.names if n not in out)
        return tuple(out)

    return ParsedQuestion(question, text, tuple(matches), names("subject"), names("field"),
                          names("measured"), tuple(runs))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _remove_stopwords(text: str, covered: list[bool], stopwords: Sequence[str]) -> None:
    words = sorted({unicodedata.normalize("NFKC", w) for w in stopwords if w.strip()},
                   key=lambda w: (-len(w), w))
    folded = text.translate(_ASCII_LOWER)  # same length: only A-Z change
    for word in words:
        haystack = text
        if word.isascii() and word.isalnum():
            word, haystack = word.translate(_ASCII_LOWER), folded
        at = haystack.find(word)
        while at >= 0:
            end = at + len(word)
            whole = (not _WORD.match(word[0]) or at == 0 or not _WORD.match(text[at - 1])) and (
                not _WORD.match(word[-1]) or end == len(text) or not _WORD.match(text[end]))
            if whole and not any(covered[at:end]):
                covered[at:end] = [True] * len(word)
            at = haystack.find(word, at + 1)


# -- answers -----------------------------------------------------------------------------------


def default_vocabulary(snapshot: IndexSnapshot, config: Config) -> Vocabulary:
    """The grammar's vocabulary for ``grounding answer``: the snapshot's subjects and field names
    plus the measured image values (colours, shapes, sizes) in ``config.image_language``
    (``image_questions.MeasuredVocabulary``; SPEC §12, §13).
    """
    return CombinedVocabulary((SnapshotVocabulary(snapshot), MeasuredVocabulary(config.image_language)))


def answer_question(
    snapshot: IndexSnapshot,
    config: Config,
    today: dt.date,
    question: str,
    fields: Sequence[str] | None = None,
    subject: str | None = None,
    limit: int = 1500,
    reserve: int = 240,
    vocabulary: Vocabulary | None = None,
) -> AnswerDraft | MeasuredAnswer:
    """``grounding answer`` (SPEC §13): the grammar when ``fields`` is empty, then the generator.

    The default vocabulary is the snapshot's subjects and field names plus the measured image
    values of ``config.image_language`` (:func:`default_vocabulary`); a question whose reading
    has measured values (and nothing unsupported) is answered from image regions by
    ``image_questions.answer_measured`` (a ``MeasuredAnswer``, with the same ``wire``,
    ``facts``, ``conflicts``, ``notes``, ``json_text()`` and ``markdown()``; SPEC §12, §13).

    The returned draft's :attr:`AnswerDraft.facts` carry ``reason``, ``support_scope``,
    ``same_key_sources_checked`` and, when they apply, ``conflict_evidence`` (every source),
    ``unsupported_terms`` and ``subjects`` (the ambiguous ones). Raises
    ``budget.BudgetError`` when even the empty answer shell does not fit ``reserve``.
    """
    asked = list(dict.fromkeys(fields or ()))
    if not asked:
        parsed = parse_question(question, vocabulary or default_vocabulary(snapshot, config), today,
                                config.query_stopwords)
        named = list(parsed.subjects)
        if subject is not None and subject not in named:
            named.insert(0, subject)
        asked = list(parsed.fields)
        if parsed.unsupported:
            return _refused(snapshot, config, today, question, asked, subject, limit, reserve,
                            "unsupported_terms", unsupported_terms=list(parsed.unsupported))
        if parsed.measured:  # image hook (SPEC §12, §13): measured values name image regions
            return answer_measured(snapshot, config, today, question, parsed.measured, parsed.fields, reserve)
        if len(named) >= 2:
            return _refused(snapshot, config, today, question, asked, None, limit, reserve,
                            "ambiguous_subject", subjects=named)
        if not asked:
            return _refused(snapshot, config, today, question, [], named[0] if named else None,
                            limit, reserve, "no_field")
        subject = named[0] if named else None
    if subject is None:
        having: list[str | None] = []
        for name in asked:
            having.extend(s for s in snapshot.subjects_with_field(name, today) if s not in having)
        if len(having) >= 2:
            return _refused(snapshot, config, today, question, asked, None, limit, reserve,
                            "ambiguous_subject", subjects=having)
        subject = having[0] if having else None
    draft = generate_answer(snapshot, config, today, question, asked, subject, limit, reserve)
    gate = draft.gate
    status = draft.wire.status
    if status is Status.CONFLICT:
        reason = "conflicting_evidence"
    elif status is Status.ANSWERED:
        reason = "answered"
    elif draft.wire.skipped:
        reason = "output_budget"
    elif not any(snapshot.has_field(name, today) for name in asked):
        reason = "no_evidence"
    else:
        reason = "missing_fields"
    facts: dict[str, Any] = {
        "reason": reason, "support_scope": SUPPORT_SCOPE,
        "same_key_sources_checked": gate.lines_checked if gate is not None else 0,
    }
    if gate is not None and gate.conflicts:  # every source of each conflicting key, never one side
        facts["conflict_evidence"] = [
            {"id": f"{kl.doc_id}@{kl.version}:{kl.line}", "doc_id": kl.doc_id, "version": kl.version,
             "line": kl.line, "value": kl.value, "path": config.evidence_display(kl.path)}
            for conflict in gate.conflicts for kl in snapshot.key_lines((conflict.subject, conflict.field), today)]
    return replace(draft, facts=facts)


def _refused(snapshot: IndexSnapshot, config: Config, today: dt.date, question: str,
             fields: list[str], subject: str | None, limit: int, reserve: int, reason: str,
             **extra: Any) -> AnswerDraft:
    """An ``abstain`` answer with no claims: every asked field missing, ``reason`` said."""
    spec = ContextSpec("query", query=" ".join([question, *fields]), limit=limit, reserve=reserve)
    compiled = compile_context(snapshot, config, spec, question, today)
    wire = build_answer([], fields, False, reserve, config.encoding)
    facts: dict[str, Any] = {"reason": reason, "support_scope": SUPPORT_SCOPE,
                             "same_key_sources_checked": 0, **extra}
    notes = _notes(reason, extra)
    if reason == "unsupported_terms":
        close = _close_field_names(snapshot, extra["unsupported_terms"], today)
        if close:
            notes += ("known field names close to them: " + ", ".join(f"'{n}'" for n in close)
                      + " (the grammar matches names verbatim: ask with the whole name, or pass --fields)",)
    return AnswerDraft(question, tuple(fields), subject, compiled, wire, (), notes, facts=facts)


MAX_CLOSE_FIELDS = 5
"""At most this many "known field names close to them" in an ``unsupported_terms`` note."""


def _close_field_names(snapshot: IndexSnapshot, terms: Sequence[str], today: dt.date) -> list[str]:
    """Active field names close to the leftover ``terms`` of a refused question, for its note:
    ``到账`` -> ``到账时间``, ``phone support`` -> ``Phone support`` (the grammar matches
    verbatim, SPEC §13, so the writer sees which name to use). Each term is looked up as
    written and, when it is ASCII, with its first letter upper- or lower-cased; the whole
    leftover joined by spaces is looked up too (``phone`` ``support``). Bounded:
    :meth:`IndexSnapshot.similar_field_names` never reads every field name.
    """
    lookups = list(dict.fromkeys([" ".join(terms), *terms])) if len(terms) > 1 else list(terms)
    out: list[str] = []
    for term in lookups[:8]:
        variants = [term]
        if term.isascii() and term[:1].isalpha():
            variants += [term[:1].swapcase() + term[1:]]
        for variant in variants:
            exact = [variant] if variant != term and snapshot.has_field(variant, today) else []
            for name in [*exact, *snapshot.similar_field_names(variant, today, n=2)]:
                if name not in out:
                    out.append(name)
    return out[:MAX_CLOSE_FIELDS]


def _notes(reason: str, extra: dict[str, Any]) -> tuple[str, ...]:
    if reason == "unsupported_terms":
        terms = ", ".join(f"'{t}'" for t in extra["unsupported_terms"])
        return (f"not answered: the question has terms that name no known subject, field or measured"
                f" value: {terms} (SPEC §13; add question words to query_stopwords if they are only"
                " that)",)
    if reason == "ambiguous_subject":
        names = ", ".join(s if s is not None else "(no subject)" for s in extra["subjects"])
        return (f"not answered: the question concerns several subjects ({names}); ask about one",)
    if reason == "no_field":
        return ("not answered: the question names no known field",)
    return ()


__all__ = ["DEFAULT_QUERY_STOPWORDS", "SUPPORT_SCOPE", "CombinedVocabulary", "ParsedQuestion",
           "SnapshotVocabulary", "Vocabulary", "answer_question", "default_vocabulary", "parse_question"]
