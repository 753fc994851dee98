"""The five rule-based judge prompts of the CEE score and the parser for their verdicts.

Following the idea of TinyLVLM-eHub's ChatGPT Ensemble Evaluation: several judges see the
same question, reference answer and model answer, each under a different rule set and
phrasing, and each returns a binary verdict; the majority decides. All five ask for the
same machine-readable last line, ``VERDICT: 1`` (correct) or ``VERDICT: 0`` (incorrect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VERDICT_INSTRUCTION = (
    "Reply with exactly one line and nothing else: `VERDICT: 1` if the model answer is "
    "correct, `VERDICT: 0` if it is not."
)

CASE_TEMPLATE = (
    "[Question]\n{question}\n\n[Reference answer]\n{reference}\n\n[Model answer]\n{prediction}"
)


@dataclass(frozen=True)
class JudgePrompt:
    """One judge: an id, its rules (system message) and the shared case layout (user message)."""

    id: str
    rules: str

    def messages(self, question: str, reference: str, prediction: str) -> list[dict[str, str]]:
        """OpenAI-style chat messages for one case."""
        case = CASE_TEMPLATE.format(question=question, reference=reference, prediction=prediction)
        return [
            {"role": "system", "content": f"{self.rules}\n\n{VERDICT_INSTRUCTION}"},
            {"role": "user", "content": case},
        ]


PROMPTS: tuple[JudgePrompt, ...] = (
    JudgePrompt(
        "cee-meaning",
        "You check answers produced by a vision-language model. Decide whether the model "
        "answer means the same as the reference answer for this question. Synonyms, "
        "paraphrases, different word order, letter case and formatting do not matter; only "
        "the meaning does.",
    ),
    JudgePrompt(
        "cee-contains",
        "You grade a model's answer against a known reference. Rules: (1) the answer is "
        "correct if it states the reference answer, even with extra explanation around it; "
        "(2) it is incorrect if it gives several conflicting answers, contradicts the "
        "reference, or leaves the reference out.",
    ),
    JudgePrompt(
        "cee-facts",
        "Compare the key facts of the model answer with those of the reference answer: "
        "names, numbers, quantities, dates, colours, positions and the text read from the "
        "image. Numbers must agree in value (12% and 12 percent agree). The answer is correct "
        "when every key fact the question asks for agrees with the reference.",
    ),
    JudgePrompt(
        "cee-examiner",
        "Act as a careful examiner marking one exam item. The reference answer is the "
        "marking key. Be lenient about wording, spelling slips and formatting, and strict "
        "about content: award the mark only if the student's answer would be accepted as "
        "right by someone holding the key.",
    ),
    JudgePrompt(
        "cee-instruction",
        "Judge whether the model did what the question asked. The model answer is correct "
        "only if it responds to this question (not to another one) and its content agrees "
        "with the reference answer. Refusals, empty answers, unrelated text and answers "
        "that merely repeat the question are incorrect.",
    ),
)

_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*([01])(?![0-9])", re.IGNORECASE)


def parse_verdict(reply: str) -> int | None:
    """1 or 0 from the last ``VERDICT: x`` in a judge's reply, or a reply that is just 0/1.

    Returns:
        1 (correct), 0 (incorrect), or None when no verdict can be read.
    """
    found = _VERDICT.findall(reply)
    if found:
        return int(found[-1])
    bare = reply.strip().strip("`*.").strip()
    return int(bare) if bare in ("0", "1") else None
