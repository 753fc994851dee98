"""Multiple-choice scoring: shared-prefix log-likelihood, answer extraction, dual encoders."""

import io

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from robustvlm.models import build_tiny_vlm, loglik
from robustvlm.models.backends import DualEncoderBackend
from robustvlm.models.tiny_clip import build_tiny_dual_encoder
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.generative import (
    continuation,
    encode_prefix,
    extract_choice,
    generate_answers,
    option_token_ids,
    score_options,
)
from robustvlm.multiple_choice.similarity import SimilarityScorer, ensemble_embedding

torch.set_num_threads(1)

OPTIONS = ["dog", "red circle", "a small blue square", "cat", "star"]


def _png(colour: tuple[int, int, int], size: int = 64) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, format="PNG")
    return buf.getvalue()


def _question(colour=(10, 200, 30), options=OPTIONS, qid="q1") -> MCQuestion:
    return MCQuestion(
        id=qid, image=_png(colour), question="", options=list(options), answer=1, source="test",
        dataset_class="x", prompt="What type of object is in this photo?",
    )


@pytest.fixture(scope="module", params=["idefics3", "llava"])
def tiny_vlm(request):
    model, processor = build_tiny_vlm(request.param, seed=1)
    return model.eval(), processor


def _one_by_one(model, processor, question):
    """Independent reference: each option alone, full sequence, plain loop over its tokens."""
    prefix = encode_prefix(processor, question)
    sums, means = [], []
    for ids in option_token_ids(processor, question.options):
        full = torch.cat([prefix["input_ids"], torch.tensor([ids])], dim=1)
        inputs = {**prefix, "input_ids": full, "attention_mask": torch.ones_like(full)}
        with torch.no_grad():
            logits = model(**inputs).logits[0]
        n = prefix["input_ids"].shape[1]
        total = sum(float(torch.log_softmax(logits[n - 1 + t], -1)[tok]) for t, tok in enumerate(ids))
        sums.append(total)
        means.append(total / len(ids))
    return sums, means


def test_shared_prefix_equals_separate_sequences(tiny_vlm):
    model, processor = tiny_vlm
    question = _question()
    shared = score_options(model, processor, question)
    batched = score_options(model, processor, question, shared_prefix=False)
    sums, means = _one_by_one(model, processor, question)
    assert len(set(shared.n_tokens)) > 1  # options of different lengths: padding is exercised
    for got in (shared, batched):
        assert max(abs(a - b) for a, b in zip(got.sum, sums)) <= 1e-4
        assert max(abs(a - b) for a, b in zip(got.mean, means)) <= 1e-4
    assert shared.prediction(normalize=False) == max(range(5), key=sums.__getitem__)
    assert shared.prediction(normalize=True) == max(range(5), key=means.__getitem__)


def test_repeated_cache_fallback_gives_the_same_scores(tiny_vlm, monkeypatch):
    """Caches other than plain dynamic layers are repeated K times instead of shared as views."""
    model, processor = tiny_vlm
    question = _question()
    shared = score_options(model, processor, question)
    monkeypatch.setattr(loglik, "_PLAIN_LAYERS", ())
    repeated = score_options(model, processor, question)
    assert repeated.sum == pytest.approx(shared.sum, abs=1e-5)
    assert repeated.sum == pytest.approx(_one_by_one(model, processor, question)[0], abs=1e-4)


def test_single_token_options_need_no_second_pass(tiny_vlm, monkeypatch):
    """Options cut to their first token are scored from the prefix's last position alone;
    checked against that position's log-softmax computed by hand."""
    model, processor = tiny_vlm
    question = _question()
    first_tokens = [ids[0] for ids in option_token_ids(processor, question.options)]
    monkeypatch.setattr(loglik, "continuation_ids", lambda *_: [[t] for t in first_tokens])
    prefix = encode_prefix(processor, question)
    with torch.no_grad():
        expected = torch.log_softmax(model(**prefix).logits[0, -1], -1)[first_tokens].tolist()
    for got in (score_options(model, processor, question),
                score_options(model, processor, question, shared_prefix=False)):
        assert got.n_tokens == [1] * len(first_tokens)
        assert got.sum == pytest.approx(expected, abs=1e-4)


def test_continuation_is_letter_and_text():
    assert continuation(1, "red circle") == "B. red circle"


def test_generate_answers_one_reply_per_question(tiny_backends):
    replies = generate_answers(tiny_backends("idefics3"), [_question(), _question((200, 0, 0), qid="q2")], max_new_tokens=3)
    assert len(replies) == 2 and all(isinstance(r, str) for r in replies)


EXTRACTION_CASES = [
    ("B", 1), ("b", 1), ("(B)", 1), ("B.", 1), ("B)", 1), (" C ", 2),
    ("B. red circle", 1), ("(D) cat", 3), ("Answer: E", 4), ("The answer is (A).", 0),
    ("answer is c", 2), ("F", None), ("Answer: F", None),  # only 5 options: A..E
    ("dog", 0), ("Cat.", 3), ("It is a small blue square.", 2), ("a dog or a cat", None),
    ("I think it shows a star", 4), ("A photo", None), ("nothing useful", None), ("", None),
    ("catalog", None),  # whole words only
]


@pytest.mark.parametrize(("reply", "expected"), EXTRACTION_CASES)
def test_extract_choice(reply, expected):
    assert extract_choice(reply, OPTIONS) == expected


def test_extract_choice_prefers_the_longer_nested_option():
    options = ["lion", "sea lion", "tiger"]
    assert extract_choice("That is a sea lion", options) == 1
    assert extract_choice("a lion", options) == 0


def test_ensemble_embedding_equals_hand_loop(tiny_backends):
    clip = tiny_backends("clip")
    model, processor = clip.model, clip.processor
    templates = ("A photo of a {class}.", "a {class}", "{class}")
    got = torch.from_numpy(ensemble_embedding(clip.embed_texts, "dog", templates))
    acc = torch.zeros_like(got)
    for t in templates:  # one text at a time: no padding involved
        enc = processor.tokenizer([t.replace("{class}", "dog")], return_tensors="pt")
        with torch.no_grad():
            emb = model.text_projection(model.text_model(**enc).pooler_output)[0]
        acc += emb / emb.norm()
    torch.testing.assert_close(got, acc / acc.norm(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_dual_encoder_scores_are_cosines(kind):
    model, processor = build_tiny_dual_encoder(kind, seed=2)
    scorer = SimilarityScorer(DualEncoderBackend("tiny", kind, model, processor), templates=("a {class}", "{class}"))
    questions = [_question(), _question((0, 0, 250), qid="q2")]
    scores = scorer.score(questions)
    for q, row in zip(questions, scores):
        pixels = processor(images=[Image.open(io.BytesIO(q.image)).convert("RGB")], return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            image = F.normalize(model.get_image_features(pixel_values=pixels).pooler_output[0], dim=-1)
        expected = [float(torch.from_numpy(scorer.class_embedding(o)) @ image) for o in q.options]
        assert row == pytest.approx(expected, abs=1e-5)
        assert all(-1 - 1e-6 <= s <= 1 + 1e-6 for s in row)
    assert len(set(scores[0])) > 1


def test_embedding_model_scores_image_and_question_against_class_names():
    """An embedding backend scores by similarity: query = image + the benchmark's question
    (inside the VQA instruction), options = the class-name template embeddings."""
    from robustvlm.models.backends import EmbeddingBackend
    from robustvlm.models.embedding import Embedder, EmbeddingSpec, query_example

    model, processor = build_tiny_vlm("idefics3", hidden_size=32, vocab_size=300)
    spec = EmbeddingSpec(family="vlm2vec-vqa", class_templates=("{class}", "a {class}"))
    backend = EmbeddingBackend("tiny", "vlm2vec-vqa", model, processor, spec)
    scorer = SimilarityScorer(backend)
    assert scorer.templates == ("{class}", "a {class}")
    q = _question()
    row = scorer.score([q])[0]
    embedder = Embedder(model, processor, spec, batch_size=1)
    image = Image.open(io.BytesIO(q.image)).convert("RGB")
    query = embedder.queries([image], [q.prompt])[0]
    assert embedder.collate([query_example("x", image, spec.query_text(q.prompt))])["input_ids"].shape[1] > 16
    for option, score in zip(q.options, row):
        texts = embedder.texts([option, f"a {option}"])
        mean = texts.mean(axis=0)
        assert score == pytest.approx(float(query @ (mean / (mean ** 2).sum() ** 0.5)), abs=1e-5)
    caption = EmbeddingBackend("tiny", "vlm2vec-caption", model, processor, EmbeddingSpec(family="c", query_style="image"))
    assert SimilarityScorer(caption).score([q])[0] != pytest.approx(row, abs=1e-4)
