"""Scores that do not depend on batch size or padding, on every tiny architecture.

The same examples scored one at a time and together in one batch of mixed lengths (different
image sizes, instructions and replies; left and right padding where the path allows both) must
give identical greedy text, and log-likelihoods, rewards and embeddings equal within TOL.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.models.chat import ChatPrompt, encode_chats
from robustvlm.models.embedding import Embedder, EmbeddingSpec, embed_batch
from robustvlm.models.reward import RewardModel, candidate_rewards, new_head
from robustvlm.models.tiny_families import VLM_FAMILIES

KINDS = list(VLM_FAMILIES)
TOL = 1e-4  # float32 at toy width: batched and single rows differ by reduction order only

QUESTIONS = ["Which shape is shown?", "What colour is the background of this small picture?",
             "Describe the image in one sentence, then name the colour of the shape."]
REPLIES = ["red", "a small blue circle on a white background", "two"]


def _images() -> list[Image.Image]:
    return [Image.new("RGB", size, colour) for size, colour in
            [((64, 64), (200, 30, 30)), ((96, 64), (30, 200, 30)), ((64, 80), (30, 30, 200))]]


def _prompt(question: str, image: Image.Image) -> ChatPrompt:
    return ChatPrompt([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}],
                      [image], record=question)


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_generation_is_the_same_alone_and_batched(kind, tiny_backends):
    backend = tiny_backends(kind)
    prompts = [_prompt(q, img) for q, img in zip(QUESTIONS, _images())]
    options = {"max_new_tokens": 6, "repetition_penalty": 1.0}
    alone = [backend.generate_chats([p], **options)[0] for p in prompts]
    assert backend.generate_chats(prompts, **options) == alone
    # a random model may reply with the same token whatever it sees: the next-token scores of
    # the left-padded batch must equal those of each prompt alone
    with torch.no_grad():
        batched = backend.model(**encode_chats(backend.processor, prompts)).logits[:, -1]
        for i, prompt in enumerate(prompts):
            single = backend.model(**encode_chats(backend.processor, [prompt])).logits[0, -1]
            torch.testing.assert_close(batched[i], single, atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shared_prefix", [True, False], ids=["shared", "full"])
def test_option_logliks_are_the_same_alone_and_batched(kind, shared_prefix, tiny_backends):
    backend = tiny_backends(kind)
    prompt = _prompt(QUESTIONS[1], _images()[1])
    options = ["A. red", "B. a dark green square", "C. blue and white stripes on a grey circle"]
    together = backend.option_logliks(prompt.messages, options, images=list(prompt.images), shared_prefix=shared_prefix)
    alone = [backend.option_logliks(prompt.messages, [o], images=list(prompt.images), shared_prefix=shared_prefix)
             for o in options]
    assert together.sum == pytest.approx([a.sum[0] for a in alone], abs=TOL)
    assert together.n_tokens == [a.n_tokens[0] for a in alone]


@pytest.fixture(scope="module")
def reward_models():
    """`reward_models(backend)`: a RewardModel on the backend's VLM with a seeded head."""
    built = {}

    def get(backend) -> RewardModel:
        if backend.name not in built:
            head = new_head(backend.model.config.get_text_config().hidden_size, generator=torch.Generator().manual_seed(0))
            head.weight.data *= 100  # rewards of order 1, so TOL is a real bound
            built[backend.name] = RewardModel(backend.model, head).eval()
        return built[backend.name]

    return get


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shared_prefix", [True, False], ids=["shared", "full"])
def test_candidate_rewards_are_the_same_alone_and_batched(kind, shared_prefix, tiny_backends, reward_models):
    backend = tiny_backends(kind)
    model = reward_models(backend)
    image = _images()[2]
    with torch.no_grad():
        together = candidate_rewards(model, backend.processor, QUESTIONS[0], REPLIES, image=image,
                                     shared_prefix=shared_prefix)
        alone = [candidate_rewards(model, backend.processor, QUESTIONS[0], [r], image=image,
                                   shared_prefix=shared_prefix)[0] for r in REPLIES]
    assert together == pytest.approx(alone, abs=TOL)


def _examples() -> list[Example]:
    return [Example(id=str(i), image=img, instruction=q, target=r, env="")
            for i, (img, q, r) in enumerate(zip(_images(), QUESTIONS, REPLIES))]


@pytest.mark.parametrize("kind", KINDS)
def test_collated_rewards_are_the_same_alone_batched_and_either_padding(kind, tiny_backends, reward_models):
    """The training and rm-eval path: prompt + reply batches, right- and left-padded."""
    backend = tiny_backends(kind)
    model = reward_models(backend)
    examples = _examples()
    results = {}
    with torch.no_grad():
        for side in ("right", "left"):
            collate = VLMCollator(backend.processor, {}, padding_side=side, image_loader=lambda ref, **_: ref)
            results[side] = model(collate(examples)).tolist()
        alone = [model(collate([ex])).item() for ex in examples]
    assert results["right"] == pytest.approx(alone, abs=TOL)
    assert results["left"] == pytest.approx(alone, abs=TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_embeddings_are_the_same_alone_batched_and_either_padding(kind, tiny_backends):
    backend = tiny_backends(kind)
    images = _images()
    spec = EmbeddingSpec.for_family("vlm2vec-mixed")
    one, three = (Embedder(backend.model, backend.processor, spec, batch_size=b) for b in (1, 3))
    np.testing.assert_allclose(three.queries(images, QUESTIONS), one.queries(images, QUESTIONS), atol=TOL)
    if kind != "paligemma":  # text-only prompts: not for PaliGemma (models.support)
        np.testing.assert_allclose(three.texts(REPLIES), one.texts(REPLIES), atol=TOL)
    left = VLMCollator(backend.processor, {}, train=False, padding_side="left", image_loader=lambda ref, **_: ref)
    examples = [Example(id=str(i), image=img, instruction=spec.query_text(q), target="", env="")
                for i, (img, q) in enumerate(zip(images, QUESTIONS))]
    with torch.no_grad():
        left_padded = embed_batch(backend.model, left(examples)).numpy()
    np.testing.assert_allclose(left_padded, one.queries(images, QUESTIONS), atol=TOL)
