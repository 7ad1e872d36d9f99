"""The offline answer generator (SPEC §8): an answer built only from visible lines.

No language model: the generator compiles a ``query`` context for the question and its
fields, takes every visible, active, non-meta line whose field is required (in stable source
order: doc_id, then line), runs the conflict gate over the whole active index, and lets
``budget.build_answer`` fit claims under the output reserve. A conflict is reported in the
status and never resolved. The Markdown rendering is a draft that ``grounding check`` accepts
with the same context.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .budget import AnswerWire, build_answer
from .config import Config
from .conflicts import GateResult, check_keys
from .context import CompiledContext, compile_context
from .drafts import ContextSpec
from .evidence import split_marker
from .index import IndexSnapshot

_MARKDOWN_START = re.compile(r"^(?:[#>+*=`|~-]|\d+[.)])")


@dataclass(frozen=True)
class AnswerDraft:
    """A generated answer: the wire, the context it was built from, and its front matter."""

    question: str
    fields: tuple[str, ...]
    subject: str | None
    context: CompiledContext
    wire: AnswerWire
    conflicts: tuple[str, ...]
    notes: tuple[str, ...] = ()
    gate: GateResult | None = None
    """The conflict gate's result (lines read, conflicts with every source); SPEC §13 hook."""
    facts: dict[str, Any] = field(default_factory=dict)
    """SPEC §13 answer facts (``reason``, ``support_scope``, ``same_key_sources_checked``,
    ``conflict_evidence``...), set by ``grounding_core.question.answer_question`` and added to
    :meth:`json_text` after the answer's own keys."""

    def context_value(self) -> dict[str, Any]:
        p = self.context.pack
        return {"query": self.context.query, "limit": p.limit, "reserve": p.reserve}

    def json_text(self) -> str:
        """The JSON answer (SPEC §5.2): the wire plus question, fields, subject and context."""
        return answer_json(self.wire, self.question, self.fields, self.subject, self.context_value(), self.facts)

    def markdown(self) -> str:
        """A Markdown draft with one cited line per claim and verified footnotes (SPEC §5.1)."""
        front = {"question": self.question, "fields": list(self.fields)}
        if self.subject is not None:
            front["subject"] = self.subject
        out = ["---"]
        for key, value in front.items():
            out.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        out.append(f"context: {json.dumps(self.context_value(), ensure_ascii=False)}")
        out.append("---")
        notes: list[str] = []
        for n, claim in enumerate(self.wire.claims, 1):
            text = str(claim["text"])
            if _MARKDOWN_START.match(text):
                text = "\\" + text
            out.append(f"{text}[^{n}]")
            out.append("")
            notes.append(f'[^{n}]: {claim["id"]} sha256:{str(claim["sha256"])[:12]} "{claim["quote"]}"')
        if self.wire.missing_fields:
            out.append(f"<!-- status: {self.wire.status.value}; not answered: "
                       f"{', '.join(self.wire.missing_fields)} -->")
            out.append("")
        if self.facts.get("reason") not in (None, "answered"):
            out.append(f"<!-- reason: {_comment(str(self.facts['reason']))} -->")
            out.append("")
        for conflict in self.conflicts:
            out.append(f"<!-- conflict, not resolved (no side is cited): {_comment(conflict)} -->")
            out.append("")
        for note in self.notes:
            out.append(f"<!-- {_comment(note)} -->")
            out.append("")
        out.extend(notes)
        return "\n".join(out).rstrip("\n") + "\n"


def answer_json(wire: AnswerWire, question: str, fields: Sequence[str], subject: str | None,
                context: dict[str, Any], facts: Mapping[str, Any]) -> str:
    """A JSON answer file's text (SPEC §5.2, §13): the wire's object, then ``question``,
    ``fields``, ``subject`` (when not None), ``context`` and the §13 ``facts``, in that order;
    indented by 1, non-ASCII kept, one final newline.
    """
    obj: dict[str, Any] = json.loads(wire.text)
    obj["question"] = question
    obj["fields"] = list(fields)
    if subject is not None:
        obj["subject"] = subject
    obj["context"] = context
    obj.update(facts)
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def _comment(text: str) -> str:
    """Text safe inside an HTML comment."""
    return text.replace("-->", "- ->")


def generate_answer(
    state: IndexSnapshot,
    config: Config,
    today: dt.date,
    question: str,
    fields: list[str],
    subject: str | None = None,
    limit: int = 1500,
    reserve: int = 240,
) -> AnswerDraft:
    """Build an answer for ``question`` covering ``fields`` from visible lines only, all read
    from the snapshot ``state`` (its context compiled against it, its conflict gate over it).

    Raises ``budget.BudgetError`` when even the empty abstain/conflict shell does not fit in
    ``reserve`` tokens.
    """
    query = " ".join([question, *fields])
    spec = ContextSpec("query", query=query, limit=limit, reserve=reserve)
    compiled = compile_context(state, config, spec, question, today)
    claims: list[dict[str, Any]] = []
    cited_subjects: dict[str, set[str | None]] = {}
    for unit in sorted(compiled.kept, key=lambda u: (u.doc_id, u.start_line)):
        record = state.record(unit.doc_id, unit.version)
        if record is None:
            continue
        doc = state.document(record)
        if subject is not None and doc.subject != subject:
            continue
        for number in range(unit.start_line, unit.end_line + 1):
            fl = doc.field_lines.get(number)
            if fl is None or fl.field not in fields or state.is_meta_field(fl.field):
                continue
            line_text = doc.lines[number - 1]
            claims.append({
                "text": split_marker(line_text), "quote": line_text,
                "id": f"{unit.doc_id}@{unit.version}:{number}", "doc_id": unit.doc_id,
                "version": unit.version, "line": number, "sha256": record.sha256, "field": fl.field,
            })
            cited_subjects.setdefault(fl.field, set()).add(doc.subject)
    keys: list[tuple[str | None, str]] = []
    for name in fields:
        if subject is not None:
            subjects: list[str | None] = [subject]
        elif name in cited_subjects:
            subjects = sorted(cited_subjects[name], key=lambda s: (s is not None, s or ""))
        else:
            subjects = state.subjects_with_field(name, today)
        keys.extend((s, name) for s in subjects)
    gate = check_keys(state, keys, today)
    notes: list[str] = []
    # Never pick a side: a conflicting field gets no claim, and its sources are named.
    conflicting = {c.field for c in gate.conflicts}
    # Never mix subjects: without --subject, a field found under several subjects gets no
    # claim either; the writer chooses the subject.
    ambiguous = {name for name, subjects in cited_subjects.items()
                 if subject is None and len(subjects) > 1}
    for name in sorted(ambiguous - conflicting):
        listed = ", ".join(sorted(s or "(no subject)" for s in cited_subjects[name]))
        notes.append(f"'{name}' has visible values for several subjects ({listed}); pass --subject"
                     " to choose one")
    # SPEC §15: a conflict answer has no claims at all (not even for the fields that agree).
    kept_claims = [] if conflicting else [c for c in claims if c["field"] not in ambiguous]
    wire = build_answer(kept_claims, fields, bool(gate.conflicts), reserve, config.encoding)
    if wire.skipped:
        left_out = ", ".join(f'{c["id"]} ({c["field"]})' for c in wire.skipped)
        notes.append(f"left out for the output reserve of {reserve} tokens: {left_out}"
                     " (raise --reserve to include them)")
    return AnswerDraft(question, tuple(fields), subject, compiled, wire,
                       tuple(c.describe() for c in gate.conflicts), tuple(notes), gate=gate)
