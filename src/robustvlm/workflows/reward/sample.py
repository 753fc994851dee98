"""`robustvlm rm sample`: K candidate responses per prompt from a policy, for Best-of-N.

The prompts are the (image, query) of preference pairs (split and per-environment cap as for
evaluation); each keeps its chosen response as the reference answer. The policy is a VLM run by
robustvlm (`models.generate.generate_batch` sampling at `temperature` / `top_p`, torch's RNG
seeded from (seed, prompt id), so a resumed run draws what an uninterrupted one would), or any
OpenAI-compatible server (vLLM, SGLang, a hosted API) asked for `n = K` choices through the
judge's client (`evaluation.metrics.judge.ChatClient`: retries, API key from the environment).

Output OUT/candidates.jsonl, one row per prompt as it finishes: {id, env, query, image (a path;
embedded images are written to OUT/images/), reference, candidates: [K strings]}; `--resume`
samples only the prompts not there yet.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from robustvlm.config import JudgeConfig
from robustvlm.data.collate import VLMCollator, chat_messages
from robustvlm.data.images import load_image
from robustvlm.data.preferences import PreferencePair
from robustvlm.evaluation.metrics.judge import ChatClient
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import load_backend
from robustvlm.models.endpoint import openai_messages
from robustvlm.runs import append_jsonl, claim_run_folder, read_jsonl

CANDIDATES_FILE = "candidates.jsonl"


@dataclass(frozen=True)
class Sampling:
    """K candidates per prompt at `temperature` / `top_p`, at most `max_new_tokens` each."""

    k: int = 16
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 64
    seed: int = 0


def prompt_seed(seed: int, prompt_id: str) -> int:
    """The RNG seed of one prompt's draws: fixed by (seed, id), independent of order."""
    return (seed * 1_000_003 + zlib.crc32(prompt_id.encode("utf-8"))) % 2**63


def image_path(pair: PreferencePair, out: Path) -> str:
    """A path to the pair's image (embedded bytes are written once to OUT/images/<id>.png)."""
    if isinstance(pair.image, str):
        return pair.image
    path = out / "images" / f"{zlib.crc32(pair.id.encode('utf-8')):08x}.png"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        load_image(pair.image, source=pair.source, record=pair.id).save(path)
    return str(path)


def _local(policy: ModelRef, prompts: list[PreferencePair], sampling: Sampling) -> Iterator[tuple[PreferencePair, list[str]]]:
    backend = load_backend(policy)
    backend.require("generate")
    collator = VLMCollator(backend.processor, {}, train=False)
    for pair in prompts:
        torch.manual_seed(prompt_seed(sampling.seed, pair.id))
        batch = collator([pair.example("")])
        yield pair, backend.generate(
            batch, max_new_tokens=sampling.max_new_tokens, repetition_penalty=1.0, sample=True,
            temperature=sampling.temperature, top_p=sampling.top_p, num_return_sequences=sampling.k,
        )


def server_messages(pair: PreferencePair) -> list[dict]:
    """The prompt as OpenAI chat messages, the image inlined as a PNG data URL."""
    image = load_image(pair.image, source=pair.source, record=pair.id)
    return openai_messages(chat_messages(pair.query, image=True), [image])


def _served(server: JudgeConfig, prompts: list[PreferencePair], sampling: Sampling) -> Iterator[tuple[PreferencePair, list[str]]]:
    client = ChatClient(server)
    client.check_key()

    def one(pair: PreferencePair) -> tuple[PreferencePair, list[str]]:
        return pair, client.choices(server_messages(pair), n=sampling.k, top_p=sampling.top_p,
                                    seed=prompt_seed(sampling.seed, pair.id))

    with ThreadPoolExecutor(server.max_concurrency) as pool:
        yield from pool.map(one, prompts)


def sample_candidates(
    prompts: list[PreferencePair],
    out_dir: str | Path,
    *,
    sampling: Sampling,
    policy: ModelRef | None = None,
    server: JudgeConfig | None = None,
    data: dict[str, Any],
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Sample K candidates per prompt from `policy` (a model name) or `server` into OUT."""
    if (policy is None) == (server is None):
        raise ValueError("give exactly one of policy or server")
    out = Path(out_dir)
    source = {"policy": policy.name if policy is not None else None} if server is None else {"server": server.model_dump(mode="json")}
    settings = {**source, "data": data, "sampling": vars(sampling)}
    claim_run_folder(out, settings, command="rm sample", resume=resume)
    path = out / CANDIDATES_FILE
    done = {row["id"] for row in read_jsonl(path)}
    todo = [p for p in prompts if p.id not in done]
    if server is not None:
        server = server.model_copy(update={"temperature": sampling.temperature, "max_tokens": sampling.max_new_tokens})
        draws = _served(server, todo, sampling)
    else:
        assert policy is not None  # exactly one of policy and server (checked above)
        draws = _local(policy, todo, sampling)
    with path.open("a", encoding="utf-8") as handle:
        for pair, texts in tqdm(draws, total=len(todo), disable=not progress, desc="sampling", unit="prompt"):
            append_jsonl(handle, [{"id": pair.id, "env": pair.env, "query": pair.query,
                                   "image": image_path(pair, out), "reference": pair.chosen,
                                   "candidates": texts}])
    return path
