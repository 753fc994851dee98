"""BERTScore vs the bert-score package on the same local encoder, and vs brute force on a tiny one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.metrics.bertscore import BERTScorer
from robustvlm.models.text_encoder import default_encoder_path

bert_score = pytest.importorskip("bert_score")

CANDS = [
    "the cat sat on the mat",
    "hello",
    "Revenue grew by 12 percent in 2023.",
    "A red bus is parked next to a tree.",
    "the cat sat on the mat",  # repeated sentence, different reference
    "x y",
]
REFS = [
    "a cat was sitting on the mat",
    "hello there",
    "In 2023 the revenue increased 12%.",
    "There is a red bus beside a tree.",
    "the dog slept on the sofa",
    "x",
]


@pytest.fixture(scope="module")
def minilm() -> str:
    return str(default_encoder_path())


def _reference(minilm: str, **kwargs) -> dict[str, list[float]]:
    scorer = bert_score.BERTScorer(model_type=minilm, device="cpu", nthreads=0, **kwargs)
    p, r, f = scorer.score(CANDS, REFS, batch_size=4)
    return {"precision": p.tolist(), "recall": r.tolist(), "f1": f.tolist()}


def _assert_close(got: dict, want: dict, tol: float = 1e-5) -> None:
    for key in ("precision", "recall", "f1"):
        assert got[key] == pytest.approx(want[key], abs=tol), key


@pytest.mark.parametrize("layer", [None, 3])
def test_matches_bert_score_package(minilm, layer):
    ours = BERTScorer(layer=layer, batch_size=4).score(CANDS, REFS)
    _assert_close(ours, _reference(minilm, num_layers=6 if layer is None else layer))


def test_matches_bert_score_package_with_idf(minilm):
    ours = BERTScorer(idf=True, batch_size=3).score(CANDS, REFS)
    ref = _reference(minilm, num_layers=6, idf=True, idf_sents=REFS)
    _assert_close(ours, ref)
    plain = BERTScorer().score(CANDS, REFS)
    assert ours["f1"] != pytest.approx(plain["f1"], abs=1e-3)


def test_baseline_rescaling_matches_bert_score_package(minilm, tmp_path):
    baseline = (0.31, 0.29, 0.30)
    table = tmp_path / "baseline.tsv"
    rows = ["LAYER,P,R,F"] + [f"{k},{baseline[0]},{baseline[1]},{baseline[2]}" for k in range(7)]
    table.write_text("\n".join(rows) + "\n")
    ref = _reference(minilm, num_layers=6, lang="en", rescale_with_baseline=True, baseline_path=str(table))
    _assert_close(BERTScorer(baseline=baseline).score(CANDS, REFS), ref)


def test_empty_strings_score_zero_and_identity_scores_one():
    scores = BERTScorer().score(["", "same words here", "text"], ["text", "same words here", "  "])
    assert scores["f1"][0] == scores["f1"][2] == 0.0
    assert scores["precision"][1] == pytest.approx(1.0, abs=1e-5)
    assert scores["f1"][1] == pytest.approx(1.0, abs=1e-5)


# --- brute force on a tiny random encoder -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory, minilm) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=8, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=16, max_position_embeddings=64,
    )
    folder = tmp_path_factory.mktemp("tiny_bert")
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _brute_force(folder: Path, cands, refs, layer: int, idf: bool) -> list[tuple[float, float, float]]:
    """Each sentence encoded alone; greedy matching with Python loops over tokens."""
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    special = {tok.cls_token_id, tok.sep_token_id}

    def encode(text):
        ids = tok(text)["input_ids"]
        with torch.no_grad():
            h = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0]
        return ids, [v / v.norm() for v in h]

    docs = [set(tok(r)["input_ids"]) for r in refs]

    def weight(t):
        if t in special:
            return 0.0
        if not idf:
            return 1.0
        return math.log((len(refs) + 1) / (sum(t in d for d in docs) + 1))

    out = []
    for c, r in zip(cands, refs):
        (ci, cv), (ri, rv) = encode(c), encode(r)
        best_c = [max(float(a @ b) for b in rv) for a in cv]
        best_r = [max(float(a @ b) for a in cv) for b in rv]
        p = sum(weight(t) * s for t, s in zip(ci, best_c)) / sum(weight(t) for t in ci)
        rec = sum(weight(t) * s for t, s in zip(ri, best_r)) / sum(weight(t) for t in ri)
        out.append((p, rec, 2 * p * rec / (p + rec)))
    return out


@pytest.mark.parametrize(("layer", "idf"), [(2, False), (1, True), (0, False)])
def test_matches_brute_force_on_tiny_random_encoder(tiny_encoder, layer, idf):
    cands, refs = CANDS[:4], REFS[:4]
    got = BERTScorer(tiny_encoder, layer=layer, idf=idf, batch_size=2).score(cands, refs)
    want = _brute_force(tiny_encoder, cands, refs, layer, idf)
    for k, key in enumerate(("precision", "recall", "f1")):
        assert got[key] == pytest.approx([w[k] for w in want], abs=1e-5), key


def test_swapping_candidate_and_reference_swaps_precision_and_recall(tiny_encoder):
    scorer = BERTScorer(tiny_encoder)
    forward, backward = scorer.score(CANDS, REFS), scorer.score(REFS, CANDS)
    assert forward["precision"] == pytest.approx(backward["recall"], abs=1e-6)
    assert forward["f1"] == pytest.approx(backward["f1"], abs=1e-6)


def test_bad_configuration_and_input(tiny_encoder, tmp_path):
    with pytest.raises(ConfigError, match="layer must be in 0..2"):
        BERTScorer(tiny_encoder, layer=3)
    with pytest.raises(ConfigError, match="cannot be loaded"):
        BERTScorer(tmp_path / "missing")
    with pytest.raises(DataError, match="2 candidates and 1 references"):
        BERTScorer(tiny_encoder).score(["a", "b"], ["a"])


def test_batches_do_not_depend_on_the_hash_seed():
    """Length ties are broken by the text: the same batches (and so the same float rounding)
    whatever order Python's hash seed gives the set of sentences."""
    import os
    import subprocess
    import sys

    code = (
        "from robustvlm.evaluation.metrics.bertscore import _length_sorted_batches as b\n"
        "s = {f'w{i}' for i in range(40)}\n"
        "print(list(b(s, {x: [0] * (len(x) % 3) for x in s}, 7)))"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
