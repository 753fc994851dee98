"""What each kind of zoo member is made of: its fresh model, its training stages and their
losses, and its held-out accuracy.

- Dual encoders (CLIP, SigLIP): one stage, `contrastive`: the model's own loss
  (`return_loss=True`: CLIP's symmetric InfoNCE with a learned temperature, SigLIP's pairwise
  sigmoid loss with a learned temperature and bias) on image/caption pairs. A batch holds
  distinct classes (at most 10 pairs), so no caption is a false negative of another image of its
  class.
- VLMs (Idefics3, LLaVA): the vision tower from scratch or copied from a zoo dual encoder
  (LLaVA's CLIP tower, Idefics3's SigLIP-style tower; LLaVA reads the last layer with its CLS
  token, `read_last_layer_with_cls`); stage `align` trains connector and decoder on captions with the tower frozen (the
  decoder starts untrained here, unlike a real LLaVA's, so the connector alone could align to
  nothing); the in-context curriculum's stages `recall` (text-only associative recall,
  `recall`) and `episodes` (defined-label picture episodes, every query's reply labelled) train
  connector and decoder, logging a curve of the labelled loss; stage `tune` trains connector and
  decoder (and the tower when the recipe says) on varied instructions (`data.instruction_sample`).
  Labels cover the final reply only, except in `recall` and `episodes`.

Held-out accuracy: the 10-way Fashion-MNIST question on the first `eval_images` test-split
images; a VLM answers by the largest summed option log-likelihood of "<letter>. <class>"
(`models.loglik.option_logliks`), a dual encoder zero-shot ("a photo of a <class>." nearest to
the image embedding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from transformers import AutoModel, AutoProcessor, PreTrainedModel

from robustvlm.data.real_images import FASHION_CLASSES
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.models.loglik import option_logliks
from robustvlm.models.text_encoder import tower_text_embeddings
from robustvlm.models.tiny import build_tiny_vlm
from robustvlm.models.tiny_clip import MAX_TEXT_LENGTH, TowerSizes, build_tiny_dual_encoder
from robustvlm.models.vision import VisionTowerEmbedder
from robustvlm.models.zoo_recipes import Recipe, resolve_model_ref
from robustvlm.models.zoo_recipes import recipe as recipe_of
from robustvlm.multiple_choice.generative import option_continuations
from robustvlm.workflows.zoo.chat_recall import ChatLayout, ChatRecall
from robustvlm.workflows.zoo.data import (
    CAPTION_TEMPLATES,
    ChatSample,
    ChatSampleCollator,
    ImagePool,
    alignment_sample,
    caption,
    context_tuning_sample,
    defined_label_episode,
    heldout_pool,
    instruction_sample,
    named_instruction_sample,
    ten_way_question,
    tokenizer_corpus,
    user_turn,
)
from robustvlm.workflows.zoo.defined_labels import draw_trials, score_trials
from robustvlm.workflows.zoo.recall import (
    ContextCurve,
    RecallPools,
    labelled_token_scores,
    recall_loss,
)

VOCAB_SIZE = 512  # tiny tokenizers: vocabulary dominates cost at these widths
ZERO_SHOT_TEMPLATE = "a photo of a {c}."


def stages(recipe: Recipe) -> list[tuple[str, int]]:
    """(stage name, steps) in order."""
    if not recipe.is_vlm:
        return [("contrastive", recipe.steps)]
    before = [("recall", recipe.recall_steps), ("chat-recall", recipe.chat_recall_steps),
              ("named", recipe.named_steps), ("project", recipe.project_steps), ("align", recipe.align_steps),
              ("episodes", recipe.episode_steps)]
    return [*((stage, steps) for stage, steps in before if steps), ("tune", recipe.steps)]


def fresh_model(recipe: Recipe) -> tuple[PreTrainedModel, Any]:
    """The member's untrained model (VLM: with its zoo tower copied in) and processor; with
    `init`, the weights and processor of that built zoo member."""
    if recipe.init_member is not None:
        start = recipe_of(recipe.init_member)
        if start.arch != recipe.arch:
            raise ConfigError(f"zoo member {recipe.name}: init {recipe.init} is a {start.arch}, not a {recipe.arch}")
        return load_vlm(ModelRef.zoo(recipe.init_member))
    if not recipe.is_vlm:
        sizes = TowerSizes(recipe.width, recipe.depth, recipe.vision_width, recipe.vision_depth,
                           recipe.image_size, recipe.patch_size, projection_dim=recipe.width)
        corpus = [*CAPTION_TEMPLATES, *FASHION_CLASSES]
        model, processor = build_tiny_dual_encoder(recipe.arch, seed=recipe.seed, corpus=corpus, sizes=sizes)
        if recipe.arch == "siglip":
            init_sigmoid_loss(model, pairs_per_batch(recipe))
        return model, processor
    tower = None
    if recipe.tower_ref is not None:
        tower = AutoModel.from_pretrained(resolve_model_ref(recipe.tower_ref).location)
    vision = tower.config.vision_config if tower is not None else None
    overrides: dict[str, Any] = {
        "vision_hidden_size": vision.hidden_size if vision else recipe.vision_width,
        "vision_intermediate_size": vision.intermediate_size if vision else 2 * recipe.vision_width,
        "vision_num_hidden_layers": vision.num_hidden_layers if vision else recipe.vision_depth,
        "vision_patch_size": vision.patch_size if vision else recipe.patch_size,
    }
    model, processor = build_tiny_vlm(recipe.arch, seed=recipe.seed, corpus=tokenizer_corpus(),
                                      vocab_size=VOCAB_SIZE, hidden_size=recipe.width, num_layers=recipe.depth,
                                      image_size=recipe.image_size, **overrides)
    if recipe.decoder_init == "probe":
        _take_decoder(model, processor, *fresh_vlm(recipe.arch, recipe.width, recipe.depth, recipe.seed))
    if recipe.arch == "llava":
        read_last_layer_with_cls(model, processor)
    if tower is not None:
        missing, unexpected = vision_tower(model).load_state_dict(tower.vision_model.state_dict(), strict=False)
        if missing or any(not k.startswith("head.") for k in unexpected):
            raise ConfigError(f"zoo member {recipe.name}: the vision tower of {recipe.tower} does not fit a "
                              f"{recipe.arch} tower (missing {missing}, unexpected {unexpected})")
    return model, processor


def fresh_vlm(arch: str, width: int, depth: int, seed: int = 0) -> tuple[PreTrainedModel, Any]:
    """A fresh tiny VLM of the zoo's tokenizer with a `width`-wide decoder of `depth` layers, its
    vision side at the tiny defaults (32-pixel pictures): the recall probe's fresh model."""
    return build_tiny_vlm(arch, seed=seed, corpus=tokenizer_corpus(), vocab_size=VOCAB_SIZE, hidden_size=width,
                          num_layers=depth, image_size=32)


def _take_decoder(model: torch.nn.Module, processor: Any, donor: torch.nn.Module, donor_processor: Any) -> None:
    """Copy `donor`'s decoder (language model and output head) into `model`; their tokenizers
    must be the same (ConfigError otherwise). The weights a fresh decoder is drawn with depend on
    what the constructor draws before it (the vision tower's size), so this gives a member the
    decoder the recall probe starts from, whatever its tower."""
    if processor.tokenizer.get_vocab() != donor_processor.tokenizer.get_vocab():
        raise ConfigError("decoder_init probe: the probe's tokenizer differs from the member's")
    hf, source = cast(Any, model), cast(Any, donor)
    hf.model.language_model.load_state_dict(source.model.language_model.state_dict())
    hf.lm_head.load_state_dict(source.lm_head.state_dict())


def read_last_layer_with_cls(model: torch.nn.Module, processor: Any) -> None:
    """LLaVA reads the tower's last layer with its CLS token (`vision_feature_layer` -1,
    strategy "full"), not LLaVA's penultimate layer without it: in a 2-3 layer tower the
    penultimate layer has had one or two layers, and the CLS token is what the contrastive
    loss trained. Measured (LLaVA on one CLIP tower reading 0.834 zero-shot, 1,000 tuning
    steps, 300 test images): penultimate 0.763, last layer 0.797, last layer with CLS 0.830."""
    config: Any = model.config
    config.vision_feature_layer = -1
    config.vision_feature_select_strategy = "full"
    processor.vision_feature_select_strategy = "full"  # one more image token per picture


def pairs_per_batch(recipe: Recipe) -> int:
    """Image/caption pairs in a contrastive batch: distinct classes, at most one per class."""
    return min(recipe.batch_size, len(FASHION_CLASSES))


def init_sigmoid_loss(model: torch.nn.Module, n_pairs: int) -> None:
    """SigLIP's temperature and bias as its paper starts them, t = 10 (`logit_scale` = log 10),
    with the bias at the prior log-odds of a pair being positive, -log(n_pairs - 1) (the paper's
    -10 suits its 32k batches; for ours it is -2.2). transformers starts both at 0 (t = 1), which
    keeps every logit within 1 of the bias while AdamW moves the log-temperature by about `lr`
    per step: measured, the loss then stalled at 3.26 and zero-shot accuracy at 0.217 (0.812
    with this start, at 1,500 steps of patch 8 against 1,000 of patch 4)."""
    hf: Any = model
    with torch.no_grad():
        hf.logit_scale.fill_(math.log(10.0))
        hf.logit_bias.fill_(-math.log(max(n_pairs - 1, 1)))


def vision_tower(model: torch.nn.Module) -> torch.nn.Module:
    """The VLM's vision tower module (LLaVA: `model.vision_tower`, Idefics3: `model.vision_model`)."""
    inner: Any = model.model  # a transformers VLM's base model
    return inner.vision_tower if hasattr(inner, "vision_tower") else inner.vision_model


def load_stage(recipe: Recipe, folder: Path) -> tuple[PreTrainedModel, Any]:
    """A model and processor saved by a finished stage."""
    if recipe.is_vlm:
        return load_vlm(ModelRef.folder(folder))
    return AutoModel.from_pretrained(folder), AutoProcessor.from_pretrained(folder)


#: The stages that train a VLM's decoder (and connector) with its tower frozen whatever the recipe.
FROZEN_TOWER_STAGES = ("align", "recall", "chat-recall", "named", "episodes")


def set_trainable(recipe: Recipe, stage: str, model: torch.nn.Module) -> None:
    """Which parameters a stage trains: all but a VLM's tower in `align` (our decoders start
    untrained, so the connector alone cannot align to them) and the curricula's text and episode
    stages, and in `tune` unless `tune_tower`; only the connector in `project` (LLaVA's first
    stage, on a decoder pretrained first)."""
    model.requires_grad_(True)
    if recipe.is_vlm and stage == "project":
        model.requires_grad_(False)
        connector(model).requires_grad_(True)
    elif recipe.is_vlm and (stage in FROZEN_TOWER_STAGES or not recipe.tune_tower):
        vision_tower(model).requires_grad_(False)


def connector(model: torch.nn.Module) -> torch.nn.Module:
    """The VLM's connector (LLaVA: `model.multi_modal_projector`, Idefics3: `model.connector`)."""
    inner: Any = model.model  # a transformers VLM's base model
    return inner.multi_modal_projector if hasattr(inner, "multi_modal_projector") else inner.connector


def param_groups(recipe: Recipe, stage: str, model: torch.nn.Module) -> list[dict] | None:
    """The optimiser's parameter groups where a stage trains parts at different rates: in `tune`
    with `lm_lr`, the decoder (the language model and its output head) at `lm_lr` and the other
    trainable parameters at the recipe's rate; None (one group at `lr`) otherwise."""
    if stage != "tune" or recipe.lm_lr is None:
        return None
    hf: Any = model
    decoder = {id(p) for p in (*hf.model.language_model.parameters(), *hf.lm_head.parameters())}
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in trainable if id(p) in decoder], "lr": recipe.lm_lr},
            {"params": [p for p in trainable if id(p) not in decoder]}]


#: Labelled queries per defined-label picture episode in the curriculum's `episodes` stage.
EPISODE_QUERIES = 4
#: Steps per window of a curriculum stage's logged curve.
CURVE_EVERY = 50


@dataclass(frozen=True)
class StageObjective:
    """A stage's `loss_of(rng)` (one batch's loss) and, for the curriculum's stages, the curve it
    logs (`recall.ContextCurve`)."""

    loss_of: Callable[[np.random.Generator], torch.Tensor]
    curve: ContextCurve | None = None


def stage_loss(recipe: Recipe, stage: str, model: torch.nn.Module, processor: Any, pool: ImagePool) -> StageObjective:
    """The objective of `stage`: contrastive (dual encoders), `recall` (text-only associative
    recall), `chat-recall` (recall in the chat layout, `chat_recall`), `named` (named defined-label
    episodes in text mixed with the instruction questions in text), `episodes` (defined-label
    picture episodes, every query's reply labelled), `align` (captions), `project` (the
    instruction mix) or `tune` (the instruction mix, with defined-label sequences at the recipe's
    share, and picture episodes at `episode_share` of each batch)."""
    if not recipe.is_vlm:
        return StageObjective(_contrastive_loss(recipe, model, processor, pool))
    if stage == "recall":
        pools, curve = RecallPools.of_tokenizer(processor.tokenizer), ContextCurve(
            CURVE_EVERY if recipe.recall_steps >= CURVE_EVERY else 1)
        return StageObjective(partial(recall_loss, model, pools, curve, 2 * recipe.batch_size), curve)
    if stage == "chat-recall":
        curve = ContextCurve(CURVE_EVERY if recipe.chat_recall_steps >= CURVE_EVERY else 1)
        chat = ChatRecall(model, ChatLayout.of_processor(processor), curve, recipe.batch_size,
                          recipe.chat_recall_steps)
        return StageObjective(chat, curve)
    if stage == "episodes":
        return _episode_objective(recipe, model, processor, pool, recipe.episode_steps, recipe.batch_size)
    make: Callable[[ImagePool, np.random.Generator, str], ChatSample] = (
        alignment_sample if stage == "align" else instruction_sample)
    if stage == "tune" and recipe.defined_label_share > 0:
        make = partial(context_tuning_sample, share=recipe.defined_label_share)
    if stage == "named":
        return _episode_objective(recipe, model, processor, pool, recipe.named_steps,
                                  round(recipe.episode_share * recipe.batch_size), named_instruction_sample)
    if stage == "tune" and recipe.episode_share > 0:
        return _episode_objective(recipe, model, processor, pool, recipe.steps,
                                  round(recipe.episode_share * recipe.batch_size), make)
    collate, hf = ChatSampleCollator(processor, {}), cast(Any, model)

    def language_modelling(rng: np.random.Generator) -> torch.Tensor:
        return hf(**_model_inputs(collate([make(pool, rng, f"s{i}") for i in range(recipe.batch_size)]))).loss
    return StageObjective(language_modelling)


def _model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """A collated batch without the fields the model does not take (`env`, `ids`)."""
    return {k: v for k, v in batch.items() if k not in ("env", "ids")}


def _contrastive_loss(recipe: Recipe, model: torch.nn.Module, processor: Any,
                      pool: ImagePool) -> Callable[[np.random.Generator], torch.Tensor]:
    hf: Any = model  # a transformers model: forward takes the processor's keyword tensors

    def contrastive(rng: np.random.Generator) -> torch.Tensor:
        labels = rng.permutation(len(FASHION_CLASSES))[: pairs_per_batch(recipe)]
        images = [pool.picture(pool.draw(rng, int(c))) for c in labels]
        texts = [caption(int(c), rng) for c in labels]
        padding: dict[str, Any] = ({"padding": "max_length", "max_length": MAX_TEXT_LENGTH} if recipe.arch == "siglip"
                                   else {"padding": True})
        batch = processor(text=texts, images=images, return_tensors="pt", truncation=True, **padding)
        if recipe.arch == "siglip":
            batch.pop("attention_mask", None)  # SigLIP's text tower reads the padded sequence
        return hf(**batch, return_loss=True).loss
    return contrastive


def _episode_objective(recipe: Recipe, model: torch.nn.Module, processor: Any, pool: ImagePool, steps: int,
                       n_episodes: int,
                       other: Callable[[ImagePool, np.random.Generator, str], ChatSample] | None = None,
                       ) -> StageObjective:
    """Batches of `recipe.batch_size` samples: `n_episodes` defined-label episodes
    (`EPISODE_QUERIES` labelled queries each; in text, each class named in words, when `other` is
    `named_instruction_sample`), then `other` samples for the rest of the batch, each part its own
    forward pass and the loss their mean weighted by sample count. The curve logs the first token
    of each labelled reply of the episodes against log(allowed words), per `CURVE_EVERY` of the
    `steps` steps."""
    if n_episodes < 1:
        raise ConfigError(f"zoo member {recipe.name}: episode_share {recipe.episode_share} of a batch of "
                          f"{recipe.batch_size} is no episode")
    collate, hf = ChatSampleCollator(processor, {}), cast(Any, model)
    curve = ContextCurve(CURVE_EVERY if steps >= CURVE_EVERY else 1)
    named = other is named_instruction_sample

    def episodes(rng: np.random.Generator) -> torch.Tensor:
        samples = [defined_label_episode(pool, rng, f"s{i}", EPISODE_QUERIES, named=named) for i in range(n_episodes)]
        batch = collate(samples)
        out = hf(**_model_inputs(batch))
        nll, correct = labelled_token_scores(out.logits.detach(), batch["labels"], first_only=True)
        levels = torch.tensor([math.log(len(s.meta["mapping"])) for s in samples
                               for _ in range(len(s.label_replies) + 1)])
        curve.add(nll, correct, levels)
        if other is None or n_episodes == recipe.batch_size:
            return out.loss
        rest = [other(pool, rng, f"s{i}") for i in range(n_episodes, recipe.batch_size)]
        rest_loss = hf(**_model_inputs(collate(rest))).loss
        return (n_episodes * out.loss + len(rest) * rest_loss) / recipe.batch_size
    return StageObjective(episodes, curve)


@torch.no_grad()
def heldout_accuracy(recipe: Recipe, model: torch.nn.Module, processor: Any) -> float:
    """Accuracy on the 10-way question over the first `eval_images` test-split images."""
    pool = heldout_pool(recipe.eval_images)
    model.eval()
    pictures = [pool.picture(i) for i in range(len(pool))]
    if not recipe.is_vlm:
        texts = [ZERO_SHOT_TEMPLATE.format(c=c) for c in FASHION_CLASSES]
        text = tower_text_embeddings(model, processor, texts).numpy()
        images = VisionTowerEmbedder(model, processor)(pictures)
        predictions = (images @ text.T).argmax(1)
    else:
        messages = [user_turn(ten_way_question())]
        continuations = option_continuations(FASHION_CLASSES)
        predictions = np.array([
            int(np.argmax(option_logliks(model, processor, messages, continuations, images=[p]).sum))
            for p in pictures
        ])
    return float((predictions == pool.labels).mean())


#: The card's defined-label check: trials per way count, and the way counts (chance 1 / ways).
CONTEXT_TRIALS = 200
CONTEXT_WAYS = (2, 4)


def defined_label_accuracy(recipe: Recipe, model: torch.nn.Module, processor: Any) -> dict[str, float]:
    """Defined-label accuracy (`workflows.zoo.defined_labels`) on the first `eval_images` test-split
    pictures, one demonstration per class: {"<ways>-way": accuracy} per `CONTEXT_WAYS`, and
    {"<ways>-way 0-shot": accuracy} with no demonstration (chance, as a check)."""
    pool = heldout_pool(recipe.eval_images)
    by_class = [np.flatnonzero(pool.labels == c) for c in range(len(FASHION_CLASSES))]

    def picture(c: int, i: int) -> Any:
        return pool.picture(int(by_class[c][i]))

    scores: dict[str, float] = {}
    for ways in CONTEXT_WAYS:
        trials = draw_trials([len(b) for b in by_class], CONTEXT_TRIALS, n_ways=ways, seed=recipe.seed)
        for with_demos, label in ((True, f"{ways}-way"), (False, f"{ways}-way 0-shot")):
            records = score_trials(model, processor, trials, picture, picture, with_demos=with_demos)
            scores[label] = float(np.mean([r["correct"] for r in records]))
    return scores
