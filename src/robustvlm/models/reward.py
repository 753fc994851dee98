"""Reward models: a VLM backbone and a scalar head, their save format and shared-prefix scoring.

    r(image, query, response) = w · h_T,   w ∈ R^d, no bias

where h_T is the backbone's last-layer hidden state (`last_hidden_state`, the input of the LM
head, which is not used) at the last non-padding token of prompt + response; for sequences the
collator builds that is the end-of-turn token closing the response. Any
`AutoModelForImageTextToText` backbone works (the architectures of `models.support` but PaliGemma,
the tiny offline ones), also wrapped by PEFT.

The other reward (`LoglikReward`, `RewardConfig.reward: loglik` or `loglik_sum`) adds no
parameter: the VLM's own language model scores the response,

    r(image, query, response) = (1/n) sum_t log p(a_t | image, query, a_<t)   (nats; `loglik`)

or the sum (`loglik_sum`), over the n tokens of the reply (up to and including its end-of-turn
token, the tokens the collator labels). A pretrained VLM that ranks answers by the picture does
so from step 0 under this reward, where a new head starts at chance.

Save format (`save_reward_model`, read back by `load_reward_model` with identical rewards): the
backbone and its processor in `save_pretrained` format (LoRA merged), `reward_head.safetensors`
(`weight` [1, d]; not for a `LoglikReward`) and `reward_model.json` (`reward`: which reward).

Scoring K responses to one image + query (`candidate_rewards`, the head on `candidate_states`) runs the prompt once and lets its
key/value cache serve the K responses (`models.loglik.run_shared_prefix`), or, as the independent
check, K full sequences.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from safetensors.torch import load_file, save_file
from torch import nn

from robustvlm.data.collate import chat_messages, render_chat, reply_ids
from robustvlm.data.prompt_inputs import appended_token_values
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import answer_outputs, get_backbone, last_token_index, model_inputs
from robustvlm.models.loading import LOAD_ERRORS, load_vlm
from robustvlm.models.loglik import (
    CACHE_ARG,
    cache_of,
    encode_prompt,
    full_sequence_inputs,
    full_sequence_logprobs,
    pad_right,
    run_shared_prefix,
    shared_prefix_logprobs,
)
from robustvlm.models.trainable import save_merged, unwrap_peft, use_adapter

HEAD_ERRORS: tuple[type[Exception], ...] = (*LOAD_ERRORS, RuntimeError)
"""What reading a reward head's safetensors file can raise."""

HEAD_FILE = "reward_head.safetensors"
META_FILE = "reward_model.json"
#: What a reward reads: the linear head (`RewardModel`), or the LM's log-likelihood of the
#: response, length-normalised or summed (`LoglikReward`).
REWARDS = {"head": "last-layer hidden state at the last non-padding token",
           "loglik": "mean log-likelihood of the reply tokens under the language-model head",
           "loglik_sum": "summed log-likelihood of the reply tokens under the language-model head"}


def hidden_size(vlm: nn.Module) -> int:
    """Width d of the text decoder's hidden states."""
    inner: Any = unwrap_peft(vlm)  # a transformers model: config
    return int(inner.config.get_text_config().hidden_size)


def new_head(d: int, *, generator: torch.Generator | None = None) -> nn.Linear:
    """A bias-free [d -> 1] head, weights N(0, (1 / (d + 1))^2): rewards start near zero."""
    head = nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        head.weight.normal_(0.0, 1.0 / (d + 1), generator=generator)
    return head


class RewardModel(nn.Module):
    """A VLM backbone and a linear head: `forward(batch)` -> rewards [B] (float32).

    Args:
        vlm: an image-text-to-text model, possibly a PeftModel.
        head: the [d -> 1] bias-free head (default: `new_head`).
        adapter: with a multi-adapter PeftModel, the LoRA adapter this model computes with.
    """

    def __init__(self, vlm: nn.Module, head: nn.Linear | None = None, *, adapter: str | None = None):
        super().__init__()
        self.vlm = vlm
        self.head = head if head is not None else new_head(hidden_size(vlm))
        self.adapter = adapter

    def hidden(self, inputs: dict[str, Any], **forward_kwargs: Any) -> Any:
        """The backbone's output on model inputs (`last_hidden_state` [B, T, d], the cache)."""
        return get_backbone(self.vlm)(**inputs, **forward_kwargs)

    def score(self, states: torch.Tensor) -> torch.Tensor:
        """Rewards [N] (float32) of hidden states [N, d]."""
        return self.head(states.to(self.head.weight.dtype)).squeeze(-1).float()

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        """Rewards [B] of a collated batch (`VLMCollator` output; labels, env, ids are ignored)."""
        inputs = model_inputs(batch)
        with use_adapter(self.vlm, self.adapter):
            states = self.hidden(inputs, use_cache=False).last_hidden_state
        rows = torch.arange(states.shape[0], device=states.device)
        return self.score(states[rows, last_token_index(inputs["attention_mask"])])


class LoglikReward(RewardModel):
    """The VLM's log-likelihood of the response as its reward (see the module doc): `forward(batch)`
    -> rewards [B] (float32, nats), no head.

    Args:
        vlm: an image-text-to-text model with its LM head, possibly a PeftModel.
        normalize: the mean over the reply's tokens (True, `loglik`) or their sum (`loglik_sum`).
        adapter: as for `RewardModel`.
    """

    def __init__(self, vlm: nn.Module, *, normalize: bool = True, adapter: str | None = None):
        nn.Module.__init__(self)  # no head: RewardModel.__init__ would make one
        self.vlm = vlm
        self.adapter = adapter
        self.normalize = normalize

    @property
    def kind(self) -> str:
        """Its `REWARDS` key."""
        return "loglik" if self.normalize else "loglik_sum"

    def reduce(self, logprobs: torch.Tensor, example: torch.Tensor, n: int) -> torch.Tensor:
        """Rewards [n] from the scored tokens' log-probabilities [N] and their rows [N]."""
        total = torch.zeros(n, device=logprobs.device).index_add(0, example, logprobs)
        if not self.normalize:
            return total
        return total / torch.zeros(n, device=logprobs.device).index_add(0, example, torch.ones_like(logprobs))

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        """Rewards [B] of a collated batch with `labels` (`VLMCollator(train=True)`)."""
        with use_adapter(self.vlm, self.adapter):
            out = answer_outputs(self.vlm, batch)
        logprobs = torch.log_softmax(out.logits, dim=-1).gather(-1, out.targets[:, None])[:, 0]
        return self.reduce(logprobs, out.example, batch["labels"].shape[0])

    def score(self, states: torch.Tensor) -> torch.Tensor:
        raise ConfigError("a log-likelihood reward scores token sequences, not hidden states")


def save_reward_model(
    model: RewardModel,
    processor: Any,
    path: str | Path,
    *,
    state: dict[str, torch.Tensor] | None = None,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Write `model` in the reward format (see the module doc) and return the folder.

    Args:
        state: `model`'s full state dict where the weights are sharded (gathered by the training
            loop); a LoRA model is merged from its own weights instead.
        meta: extra facts for reward_model.json (e.g. the loss it was trained with).
    """
    path = Path(path)
    kind = model.kind if isinstance(model, LoglikReward) else "head"
    vlm_state = None
    if state is not None:
        vlm_state = {k[len("vlm."):]: v for k, v in state.items() if k.startswith("vlm.")}
    adapters = [model.adapter] if model.adapter is not None else None
    vlm = save_merged(model.vlm, processor, path, state_dict=vlm_state, adapter_names=adapters)
    if kind == "head":
        head = model.head.weight if state is None else state["head.weight"]
        save_file({"weight": head.detach().float().cpu().contiguous()}, str(path / HEAD_FILE))
    info = {"format": "robustvlm reward model", "hidden_size": hidden_size(vlm),
            "reward": kind, "reads": REWARDS[kind], **(meta or {})}
    (path / META_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return path


def reward_kind(path: str | Path) -> str | None:
    """The `REWARDS` key of a folder written by `save_reward_model` (older folders, with a head
    and no `reward` in reward_model.json: "head"), or None for any other folder."""
    path = Path(path)
    meta = path / META_FILE
    try:
        kind = json.loads(meta.read_text(encoding="utf-8")).get("reward", "head") if meta.is_file() else None
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ConfigError(f"{meta}: not a reward model description: {exc}") from None
    if kind is None or kind == "head":
        return "head" if (path / HEAD_FILE).is_file() else None
    if kind not in REWARDS:
        raise ConfigError(f"{meta}: unknown reward {kind!r} (known: {', '.join(REWARDS)})")
    return str(kind)


def is_reward_model(path: str | Path) -> bool:
    """True for a folder written by `save_reward_model`."""
    return reward_kind(path) is not None


def load_reward_model(
    path: str | Path, *, dtype: torch.dtype | None = None, trust_remote_code: bool = False
) -> tuple[RewardModel, Any]:
    """(RewardModel in eval mode, processor) from a folder written by `save_reward_model`."""
    path = Path(path)
    kind = reward_kind(path)
    if kind is None:
        raise ConfigError(f"{path}: not a reward model folder (no {HEAD_FILE})")
    vlm, processor = load_vlm(ModelRef.folder(path), dtype=dtype, trust_remote_code=trust_remote_code)
    if kind != "head":
        return LoglikReward(vlm, normalize=kind == "loglik").eval(), processor
    try:
        weight = load_file(str(path / HEAD_FILE))["weight"]
    except HEAD_ERRORS as exc:  # "weight" missing, garbage, wrong dtype
        raise ConfigError(f"{path / HEAD_FILE}: cannot read the reward head: {exc}") from None
    if weight.shape != (1, hidden_size(vlm)):
        raise ConfigError(f"{path / HEAD_FILE}: head of shape {tuple(weight.shape)} does not fit "
                          f"a backbone of width {hidden_size(vlm)}")
    head = nn.Linear(weight.shape[1], 1, bias=False, dtype=weight.dtype if dtype is None else dtype)
    with torch.no_grad():
        head.weight.copy_(weight)
    return RewardModel(vlm, head).eval(), processor


def candidate_tokens(
    model: RewardModel, processor: Any, query: str, responses: Sequence[str], *,
    image: Image.Image | None = None, record: str = "the prompt",
) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """(prompt inputs with a batch axis of 1, reply ids [K, L] right-padded, their mask [K, L]) on
    the model's device: each response as the sequence training builds, the prompt as the
    processor encodes it, then the reply tokens up to its end-of-turn token
    (`data.collate.reply_ids`). `image` None: a text-only prompt."""
    if not responses:
        raise DataError(f"no responses to score for {record}")
    prompt = render_chat(processor, query, image=image is not None)
    rows = [reply_ids(processor, prompt, render_chat(processor, query, image=image is not None, answer=r),
                      record) for r in responses]
    device = next(model.parameters()).device
    messages = chat_messages(query, image=image is not None)
    prefix = {k: v.to(device) for k, v in encode_prompt(processor, messages, [image] if image else []).items()}
    ids, mask = (t.to(device) for t in pad_right(rows))
    return prefix, ids, mask


@torch.no_grad()
def candidate_states(
    model: RewardModel,
    processor: Any,
    query: str,
    responses: Sequence[str],
    *,
    image: Image.Image | None = None,
    shared_prefix: bool = True,
    record: str = "the prompt",
) -> torch.Tensor:
    """Hidden states [K, d] the head reads for K responses to `query` about `image` (None: a
    text-only prompt): the last-layer state at each response's end-of-turn token.

    Each response is scored as the sequence training builds: the prompt as the processor encodes
    it, then the reply tokens up to its end-of-turn token (`data.collate.reply_ids`).

    Args:
        shared_prefix: run the prompt once (batch 1) and let its cache serve the K responses as
            one right-padded batch (default); or run K full sequences, the prompt repeated K
            times (the independent check). Equal up to float rounding.
        record: names the prompt in errors.
    """
    prefix, ids, mask = candidate_tokens(model, processor, query, responses, image=image, record=record)
    device = ids.device
    last = mask.sum(dim=1) - 1  # [K] index of each row's last real token within the row
    with use_adapter(model.vlm, model.adapter):
        if shared_prefix:
            cache = cache_of(run_shared_prefix(get_backbone(model.vlm), prefix, len(ids)))
            states = model.hidden({"input_ids": ids}, use_cache=True, **{CACHE_ARG: cache}).last_hidden_state
        else:
            states = model.hidden(full_sequence_inputs(prefix, ids, mask, appended_token_values(processor)),
                                  use_cache=False).last_hidden_state
            last = last + prefix["input_ids"].shape[1]
    return states[torch.arange(len(ids), device=device), last]


@torch.no_grad()
def candidate_rewards(
    model: RewardModel,
    processor: Any,
    query: str,
    responses: Sequence[str],
    **options: Any,
) -> list[float]:
    """Rewards of K responses to `query`: the head on `candidate_states` (same `options`: image,
    shared_prefix, record); for a `LoglikReward`, the reply tokens' log-likelihood (the prompt run
    once and its cache shared, or K full sequences: `models.loglik`)."""
    if not isinstance(model, LoglikReward):
        return model.score(candidate_states(model, processor, query, responses, **options)).tolist()
    shared = options.pop("shared_prefix", True)
    prefix, ids, mask = candidate_tokens(model, processor, query, responses, **options)
    with use_adapter(model.vlm, model.adapter):
        if shared:
            logprobs = shared_prefix_logprobs(model.vlm, prefix, ids, mask)
        else:
            logprobs = full_sequence_logprobs(model.vlm, prefix, ids, mask, appended_token_values(processor))
    rows = torch.arange(len(ids), device=ids.device)[:, None].expand_as(ids)
    return model.reduce(logprobs[mask], rows[mask], len(ids)).tolist()
