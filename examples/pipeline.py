"""A retrieval pipeline whose answers Grounding verifies (SPEC §14), with a replayed model.

Run it from the repository root (no network; the model's answers are recorded in
``examples/pipeline_responses.json`` and replayed by LangChain's ``FakeListChatModel``)::

    pip install -e '.[langchain]'
    python examples/pipeline.py

What it does:

1. retrieves hits for the question from the example workspace's index: the best-ranked
   units that fit a 1,500-token budget (``Verifier.compile``, SPEC §8);
2. asks the model, through a LangChain chain ``prompt | model | GroundingOutputParser``;
3. the parser verifies the answer against the index **and the hits** (a line the model was
   not shown is ``invisible-source``); the first recorded answer misquotes a line, so it is
   rejected and its findings are fed back to the model;
4. the second answer verifies; the script prints it as a Markdown answer with citations.

Exit status 0 when an answer verified, 1 when none did.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate

from grounding import Verifier
from grounding.api import units_of
from grounding.langchain import GroundingOutputParser, GroundingParserError
from grounding_core.budget import render_prompt

HERE = Path(__file__).resolve().parent
QUESTION = "秋季开放日是哪天、在哪里举行？"
FIELDS = ["活动时间", "地点"]
ATTEMPTS = 3


def main() -> int:
    responses = json.loads((HERE / "pipeline_responses.json").read_text(encoding="utf-8"))["responses"]
    model = FakeListChatModel(responses=responses)
    with Verifier(HERE) as verifier:
        # 1. retrieval: whole units of active documents, ranked by full-text relevance
        compiled = verifier.compile(QUESTION, query="开放日 活动时间 地点", limit=1500, reserve=300)
        hits = units_of(compiled)  # SPEC §6 units: what the model is shown
        print(f"retrieved {len(hits)} unit(s): {', '.join(u.id for u in compiled.kept)}")
        hashes = "\n".join(f"{doc}@{version} sha256:{verifier.state.record(doc, version).sha256}"
                           for doc, version in dict.fromkeys((u.doc_id, u.version) for u in compiled.kept))

        # 2. the chain: prompt | model | parser (the parser verifies against the hits)
        parser = GroundingOutputParser(verifier=verifier, context=hits, fields=FIELDS)
        prompt = ChatPromptTemplate.from_messages([
            ("system", "{instructions}"),
            ("human", "{context}\n\nDocument hashes:\n{hashes}\n\nRequired fields: {fields}{feedback}"),
        ])
        chain = prompt | model | parser
        inputs = {"instructions": parser.get_format_instructions(), "hashes": hashes,
                  "context": render_prompt(QUESTION, compiled.kept), "fields": "、".join(FIELDS), "feedback": ""}

        # 3. verify; feed the findings back to the model until an answer verifies
        for attempt in range(1, ATTEMPTS + 1):
            try:
                result = chain.invoke(inputs)
            except GroundingParserError as exc:
                print(f"attempt {attempt}: rejected")
                assert exc.report is not None
                for d in exc.report.errors:
                    print(f"  {d.pointer} {d.code} {d.name}: {d.message}")
                inputs["feedback"] = f"\n\nYour previous answer was rejected:\n{exc.observation}\nAnswer again."
                continue
            # 4. a verified answer
            print(f"attempt {attempt}: {result.report.status}, coverage {result.report.coverage:.2f},"
                  f" {len(result.answer.claims)} verified claim(s)")
            print()
            print(f"{QUESTION}\n")
            for i, claim in enumerate(result.answer.claims, 1):
                print(f"- {claim.text}[^{i}]")
            print()
            for i, claim in enumerate(result.answer.claims, 1):
                print(f'[^{i}]: {claim.id} sha256:{claim.sha256[:12]} "{claim.quote}"')
            return 0
    print(f"no answer verified in {ATTEMPTS} attempts", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
