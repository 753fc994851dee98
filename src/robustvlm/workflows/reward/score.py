"""`robustvlm rm score`: rewards (and gold scores) of sampled Best-of-N candidates.

Reads `rm sample`'s candidates.jsonl; per prompt, a reward model scores its K candidates with the
prompt run once (`models.reward.candidate_rewards`, shared prefix), and each candidate gets a
gold score:

- `chrf` / `exact`: agreement with the prompt's reference answer (chrF or exact match, 0-1;
  the built-in benchmark's references are true statements about the image);
- `judge`: the share of the five CEE judge prompts that accept the candidate
  (`evaluation.metrics.judge`, any OpenAI-compatible endpoint, replies cached); a candidate with
  no readable verdict gets no gold score and its prompt is left out of the Best-of-N curve.

Output OUT/scores.jsonl, one row per prompt as it finishes: {id, env, rewards: [K], gold: [K]};
`--resume` scores only the prompts not there yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from robustvlm.config import JudgeConfig
from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.chrf import chrf_scores
from robustvlm.evaluation.metrics.exact import exact_match
from robustvlm.evaluation.metrics.judge import CEEJudge
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import load_backend
from robustvlm.runs import append_jsonl, claim_run_folder, read_input_jsonl, read_jsonl

SCORES_FILE = "scores.jsonl"
GOLD = ("chrf", "exact", "judge")


class GoldScorer:
    """Gold scores of K candidates against a prompt's reference (see the module doc)."""

    def __init__(self, gold: str, judge: JudgeConfig | None, cache_dir: Path):
        if gold not in GOLD:
            raise ConfigError(f"gold must be one of {GOLD}, not {gold!r}")
        if gold == "judge" and judge is None:
            raise ConfigError("gold judge needs a judge endpoint (--judge JUDGE.yaml)")
        self.gold = gold
        self.judge = CEEJudge(judge, cache_dir) if gold == "judge" and judge is not None else None

    def __call__(self, query: str, reference: str, candidates: Sequence[str]) -> list[float | None]:
        references = [reference] * len(candidates)
        if self.gold == "chrf":
            return list(chrf_scores(candidates, references))
        if self.gold == "exact":
            return list(exact_match(candidates, references))
        assert self.judge is not None  # gold == "judge": __init__ built it
        result = self.judge.score([query] * len(candidates), references, candidates)
        return [_acceptance(sample["votes"]) for sample in result.samples]


def _acceptance(votes: dict) -> float | None:
    """Share of readable judge verdicts that accept (None when none is readable)."""
    readable = [v for v in votes.values() if v is not None]
    return sum(readable) / len(readable) if readable else None


def score_candidates(
    candidates_file: str | Path,
    out_dir: str | Path,
    *,
    model: ModelRef,
    gold: str = "chrf",
    judge: JudgeConfig | None = None,
    shared_prefix: bool = True,
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Score every prompt's candidates with reward model `model` into OUT/scores.jsonl."""
    out = Path(out_dir)
    rows = [row for _, row in read_input_jsonl(candidates_file, "candidates file")]
    if not rows:
        raise ConfigError(f"{candidates_file}: no candidates (run rm sample first)")
    settings = {"candidates": str(candidates_file), "model": model.name, "gold": gold,
                "judge": judge.model_dump(mode="json") if judge else None, "shared_prefix": shared_prefix}
    claim_run_folder(out, settings, command="rm score", resume=resume, may_differ=("judge.max_concurrency", "judge.timeout_s"))
    gold_of = GoldScorer(gold, judge, out)
    backend = load_backend(model, family="reward")
    path = out / SCORES_FILE
    done = {row["id"] for row in read_jsonl(path)}
    todo = [row for row in rows if row["id"] not in done]
    with path.open("a", encoding="utf-8") as handle:
        for row in tqdm(todo, disable=not progress, desc="scoring candidates", unit="prompt"):
            image = load_image(row["image"], source=str(candidates_file), record=row["id"])
            rewards = backend.rewards(row["query"], row["candidates"], image=image,
                                      shared_prefix=shared_prefix, record=row["id"])
            append_jsonl(handle, [{"id": row["id"], "env": row["env"], "rewards": rewards,
                                   "gold": gold_of(row["query"], row["reference"], row["candidates"])}])
    return path
