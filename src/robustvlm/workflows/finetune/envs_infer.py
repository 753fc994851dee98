"""`robustvlm envs infer`: environments for invariance training, inferred from a reference model.

The reference model (usually an ERM fine-tune, `RUN/final`) scores every in-domain training record
of the data as `train` does: per answer token its cross-entropy and its scale gradient
d CE(w z)/dw at w = 1 (`objectives.scale_grad`), averaged over the record's answer tokens, and
the mean of its answer positions' final hidden states. A split of `analysis.env_inference`
(EIIL from the scale gradients, a loss split, or k-means of the hidden states) assigns each
record to `inferred-0`, `inferred-1`, ...

Writes into OUT: `config.resolved.yaml`; `inferred.jsonl` (per record: id, its own environment,
the inferred one, loss in nats, scale gradient); `env_map.yaml`, an env map (`data check
--env-map`, `data.env_map`) that puts each inferred record in its inferred environment by id and
leaves every other record in its own environment; `summary.json` (sizes and the purity of the
inferred environments against the records' own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from tqdm.auto import tqdm

from robustvlm.analysis.env_inference import cluster_split, eiil_split, loss_split, purity
from robustvlm.data.collate import VLMCollator
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import answer_outputs
from robustvlm.models.loading import load_vlm
from robustvlm.objectives.scale_grad import risk_and_scale_grads
from robustvlm.runs import claim_run_folder, write_jsonl

METHODS = ("eiil", "loss-split", "cluster")


@torch.no_grad()
def record_statistics(model: torch.nn.Module, processor: Any, examples: list[Example], *, batch_size: int = 8,
                      progress: bool = True) -> dict[str, np.ndarray]:
    """{"loss": [N] mean answer-token cross-entropy (nats), "scale_grad": [N] its mean scale
    gradient at w = 1, "hidden": [N, d] mean final hidden state at the answer positions}."""
    collator = VLMCollator(processor, {}, train=True)
    losses: list[np.ndarray] = []
    grads: list[np.ndarray] = []
    hidden: list[np.ndarray] = []
    for start in tqdm(range(0, len(examples), batch_size), disable=not progress, desc="envs infer", unit="batch"):
        chunk = examples[start:start + batch_size]
        out = answer_outputs(model, collator(chunk))
        risk, scale = risk_and_scale_grads(out, out.logits.new_empty(len(out.targets), 0))
        counts = torch.bincount(out.example, minlength=len(chunk)).clamp(min=1).double()
        for values, sink in ((risk.double(), losses), (scale[:, 0].double(), grads)):
            sink.append((torch.zeros(len(chunk), dtype=torch.float64).index_add_(0, out.example, values) / counts)
                        .numpy())
        summed = torch.zeros(len(chunk), out.hidden.shape[1], dtype=torch.float64)
        hidden.append((summed.index_add_(0, out.example, out.hidden.double()) / counts[:, None]).numpy())
    return {"loss": np.concatenate(losses), "scale_grad": np.concatenate(grads), "hidden": np.concatenate(hidden)}


def assign(stats: dict[str, np.ndarray], method: str, *, k: int, seed: int) -> np.ndarray:
    """[N] inferred environment of each record by `method` (one of METHODS)."""
    if method == "eiil":
        if k != 2:
            raise ConfigError("--k: EIIL infers two environments")
        return eiil_split(stats["scale_grad"], seed=seed)
    if method == "loss-split":
        if k != 2:
            raise ConfigError("--k: a loss split makes two environments")
        return loss_split(stats["loss"])
    if method == "cluster":
        return cluster_split(stats["hidden"], k=k, seed=seed)
    raise ConfigError(f"--method must be one of {list(METHODS)}, got {method!r}")


def infer_environments(
    model_ref: ModelRef,
    data: str | Path,
    out_dir: str | Path,
    *,
    method: str = "eiil",
    k: int = 2,
    batch_size: int = 8,
    seed: int = 0,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    resume: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Infer the environments of the in-domain training records of `data` (module doc); returns
    the summary."""
    if method not in METHODS:
        raise ConfigError(f"--method must be one of {list(METHODS)}, got {method!r}")
    if k < 2:
        raise ConfigError(f"--k must be at least 2, got {k}")
    examples = load_examples(data, image_root=image_root, allow_outside_root=allow_outside_root, verbose=False)
    train = [ex for ex in examples if ex.split == "train" and not ex.ood]
    if len(train) < 2 * k:
        raise DataError(f"need at least {2 * k} in-domain training records to infer {k} environments, "
                        f"found {len(train)}", str(data))
    settings = {"model": model_ref.name, "data": str(data), "method": method, "k": k, "seed": seed}
    out = claim_run_folder(out_dir, settings, command="envs infer", resume=resume, may_differ=("batch_size",))
    corpus = sorted({ex.instruction for ex in examples} | {ex.target for ex in examples})
    model, processor = load_vlm(model_ref, corpus=corpus)
    model.eval()
    stats = record_statistics(model, processor, train, batch_size=batch_size, progress=progress)
    inferred = assign(stats, method, k=k, seed=seed)
    sizes = np.bincount(inferred, minlength=k)
    if (sizes == 0).any():
        cause = (" (EIIL does so when every record's scale gradient has one sign, as with an untrained "
                 "reference: give it an ERM fine-tune)" if method == "eiil" else "")
        raise DataError(f"--method {method} put every record in {int((sizes > 0).sum())} of {k} environments"
                        f"{cause}", str(data))
    names = [f"inferred-{i}" for i in range(k)]
    write_jsonl(out / "inferred.jsonl", [
        {"id": ex.id, "env": ex.env, "inferred": names[int(e)], "loss": float(loss), "scale_grad": float(g)}
        for ex, e, loss, g in zip(train, inferred, stats["loss"], stats["scale_grad"])
    ])
    environments: dict[str, Any] = {name: {"ids": [ex.id for ex, e in zip(train, inferred) if e == i]}
                                    for i, name in enumerate(names)}
    for env in sorted({ex.env for ex in examples}):
        environments[env] = {"sources": [env]}
    (out / "env_map.yaml").write_text(yaml.safe_dump({"environments": environments}, sort_keys=False),
                                      encoding="utf-8")
    own = np.array([ex.env for ex in train])
    summary = {"method": method, "records": len(train),
               "sizes": {name: int((inferred == i).sum()) for i, name in enumerate(names)},
               "purity_vs_given": purity(inferred, own)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
