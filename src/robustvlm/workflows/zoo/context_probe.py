"""A diagnostic probe of context tuning: does a zoo VLM learn to read a label from its context?

It tunes a built VLM member (vision tower frozen, as context tuning does) on defined-label
episodes only (`data.defined_label_episode`: every query's reply labelled) and logs, per window
of `every` steps, the mean negative log-likelihood (nats) of the first token of each labelled
reply beside chance: the mean log of the number of allowed words, which is the loss of a model
that knows which words are allowed but not which one the context assigns to the query. With
`named`, each picture is replaced by its class name in words ("Item: coat."), so reading the
label is plain copying in text: a loss that stays at chance there says the decoder does not
learn the copying, whatever it sees; one that falls says the pictures are the obstacle. With
`fresh_depth`, the model is instead a fresh LLaVA of that decoder depth (64 wide, the zoo's
tokenizer corpus), for the named control: does a deeper decoder learn the copying in the budget?

Run it as `robustvlm zoo probe-context` (it writes OUT/probe.json: the settings, the curve, CPU
seconds). The tuned weights are not kept.

`probe_recall` (`robustvlm zoo probe-recall`) trains the same kinds of model on the curriculum's
text-only associative recall (`recall`) instead and reports its curve and the step where copying
emerges.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.workflows.zoo.data import (
    ChatSampleCollator,
    defined_label_episode,
    training_pool,
)
from robustvlm.workflows.zoo.members import fresh_vlm, vision_tower
from robustvlm.workflows.zoo.recall import (
    ContextCurve,
    RecallPools,
    labelled_token_scores,
    recall_loss,
)
from robustvlm.workflows.zoo.steps import run_stage


def first_reply_token_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """[n] negative log-likelihood (nats) of the first token of each labelled reply: the labelled
    tokens whose previous token is unlabelled, each predicted by the logits one position
    before. `logits` [B, T, V], `labels` [B, T] (IGNORE_INDEX where unlabelled)."""
    return labelled_token_scores(logits, labels, first_only=True)[0]


def chance_nll(samples: list[Any]) -> float:
    """Mean over the labelled replies of log(allowed words): the first-token loss of a model that
    spreads its probability evenly over the allowed words."""
    logs = [math.log(len(s.meta["mapping"])) for s in samples for _ in range(len(s.label_replies) + 1)]
    return float(np.mean(logs))


def probe_model(init: ModelRef | None, fresh_depth: int | None, width: int = 64) -> tuple[Any, Any]:
    """The model to probe and its processor: member `init`, or a fresh `width`-wide LLaVA of
    `fresh_depth` decoder layers on the zoo's tokenizer corpus (then `init` is unused)."""
    if fresh_depth is None:
        if init is None:
            raise ConfigError("the context probe needs a model to start from (--init) or --fresh-depth")
        return load_vlm(init)
    return fresh_vlm("llava", width, fresh_depth)


def probe(init: ModelRef | None, *, named: bool, queries: int, steps: int, lr: float = 2e-3, batch_size: int = 16,
          fresh_depth: int | None = None, n_images: int | None = None, every: int = 50, seed: int = 0) -> dict:
    """Tune member `init` (a "zoo:NAME" or a folder; or a fresh model, `probe_model`) for `steps`
    steps on defined-label episodes; returns the settings, the curve [{step, first_token_nll,
    chance}] per `every` steps and the training CPU seconds."""
    model, processor = probe_model(init, fresh_depth)
    model.requires_grad_(True)
    vision_tower(model).requires_grad_(False)
    pool, collate = training_pool(n_images, seed), ChatSampleCollator(processor, {})
    hf: Any = model
    window: list[tuple[float, float]] = []
    curve: list[dict] = []

    def loss_of(rng: np.random.Generator) -> torch.Tensor:
        samples = [defined_label_episode(pool, rng, f"s{i}", queries, named=named) for i in range(batch_size)]
        batch = collate(samples)
        for key in ("env", "ids"):
            batch.pop(key)
        out = hf(**batch)
        window.append((float(first_reply_token_nll(out.logits.detach(), batch["labels"]).mean()),
                       chance_nll(samples)))
        if len(window) == every:
            nll, chance = np.mean(window, axis=0)
            curve.append({"step": len(curve) * every + every, "first_token_nll": round(float(nll), 4),
                          "chance": round(float(chance), 4)})
            print(f"step {curve[-1]['step']}: first-token nll {nll:.3f} (chance {chance:.3f})", flush=True)
            window.clear()
        return out.loss

    result = run_stage(model, loss_of, steps=steps, lr=lr, seed=seed, label="context probe")
    return {"init": init.name if init is not None and fresh_depth is None else f"fresh, depth {fresh_depth}", "named": named, "queries": queries, "steps": steps, "lr": lr, "batch_size": batch_size,
            "seed": seed, "curve": curve, "cpu_seconds": result.cpu_seconds}


def probe_recall(init: ModelRef | None, *, steps: int, lr: float = 2e-3, batch_size: int = 32, fresh_depth: int | None = None,
                 width: int = 64, every: int = 50, seed: int = 0, save: Path | None = None) -> dict:
    """Train member `init`'s decoder (or a fresh model, `probe_model`) for `steps` steps on
    associative recall (`recall`; vision tower frozen and unused); returns the settings, the
    curve [{step, loss, accuracy, level (the set-only level)}] per `every` steps, the step where copying
    emerged (None: not within `steps`) and the training CPU seconds; `save`: a folder to save the
    trained model and processor in."""
    model, processor = probe_model(init, fresh_depth, width)
    model.requires_grad_(True)
    vision_tower(model).requires_grad_(False)
    pools, monitor = RecallPools.of_tokenizer(processor.tokenizer), ContextCurve(every)

    def loss_of(rng: np.random.Generator) -> torch.Tensor:
        loss = recall_loss(model, pools, monitor, batch_size, rng)
        if len(monitor.window) == 0:
            row = monitor.curve[-1]
            print(f"step {row['step']}: loss {row['loss']:.3f} accuracy {row['accuracy']:.3f} "
                  f"(set-only level {row['level']:.3f})", flush=True)
        return loss

    result = run_stage(model, loss_of, steps=steps, lr=lr, seed=seed, label="recall probe")
    if save is not None:
        model.save_pretrained(save)
        processor.save_pretrained(save)
    name = init.name if init is not None and fresh_depth is None else f"fresh, depth {fresh_depth}, width {width}"
    return {"init": name, "steps": steps, "lr": lr, "batch_size": batch_size, "seed": seed,
            **monitor.report(), "cpu_seconds": result.cpu_seconds}
