"""`robustvlm embed eval`: embedding models in results.csv beside other models, on the probit
plot, and image-text retrieval checked against embeddings computed directly."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models import build_tiny_vlm
from robustvlm.models.embedding import Embedder, EmbeddingSpec
from robustvlm.multiple_choice import build_questions, write_questions
from robustvlm.workflows.embed.evaluate import embed_eval
from robustvlm.workflows.mc_eval import model_slug
from robustvlm.workflows.measure.robustness_fit import fit_from_results


@pytest.fixture(scope="module")
def embedding_models(tmp_path_factory):
    """Two untrained tiny embedding models as `embed train` writes them (VQA and caption)."""
    root = tmp_path_factory.mktemp("models")
    folders = []
    for i, (family, style) in enumerate([("vlm2vec-vqa", "question"), ("vlm2vec-caption", "image")]):
        model, processor = build_tiny_vlm("idefics3", seed=i, hidden_size=32, vocab_size=300)
        folder = root / family
        model.save_pretrained(folder)
        processor.save_pretrained(folder)
        EmbeddingSpec(family=family, query_style=style).save(folder)
        folders.append(folder)
    return folders


@pytest.fixture(scope="module")
def benches(domains_suite, tmp_path_factory):
    from robustvlm.data.loaders import load_examples

    out = tmp_path_factory.mktemp("benches")
    examples = load_examples(domains_suite / "digits", fmt="folder", verbose=False)
    paths = []
    for domain in ("clean", "rotated"):
        paths.append(out / f"{domain}.jsonl")
        write_questions(build_questions([ex for ex in examples if ex.env == domain], k=3, seed=0,
                                        prompt="What digit is shown?"), paths[-1], embed_images=True)
    return paths


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_embedding_models_land_in_results_csv_and_on_the_probit_plot(embedding_models, benches, tmp_path):
    out = tmp_path / "eval"
    result = embed_eval([ModelRef.folder(m) for m in embedding_models], out, benches=benches, batch_size=8)
    rows = _rows(result.results_csv)
    assert {(r["family"], r["method"], r["bench"]) for r in rows} == {
        (f, "similarity", b) for f in ("vlm2vec-vqa", "vlm2vec-caption") for b in ("clean", "rotated")}
    assert all(int(r["n"]) == 30 for r in rows)
    fit = fit_from_results(result.results_csv, ref="clean", shift="rotated", out_dir=tmp_path / "fit", n_boot=50)
    assert {m.point.family for m in fit.models} == {"vlm2vec-vqa", "vlm2vec-caption"}
    assert (tmp_path / "fit" / "scatter.png").stat().st_size > 0
    predictions = (out / model_slug(str(embedding_models[0])) / "clean.jsonl").read_text()
    assert len(predictions.splitlines()) == 30 and len(json.loads(predictions.splitlines()[0])["scores"]) == 3


def test_retrieval_recall_equals_a_direct_computation(embedding_models, domains_suite, tmp_path, capsys):
    data = domains_suite / "digits"
    out = tmp_path / "eval"
    assert main(["embed", "eval", "--model", str(embedding_models[0]), "--retrieval", str(data),
                 "--retrieval-split", "train", "--out", str(out)]) == 0
    rows = _rows(out / "retrieval" / "retrieval.csv")
    assert [(r["direction"], r["k"]) for r in rows] == [
        ("image_to_text", "1"), ("image_to_text", "5"), ("text_to_image", "1"), ("text_to_image", "5")]

    from robustvlm.data.images import load_image
    from robustvlm.data.loaders import load_examples
    from robustvlm.models.loading import load_vlm

    examples = load_examples(data, verbose=False)
    model, processor = load_vlm(ModelRef.folder(embedding_models[0]))
    embedder = Embedder(model, processor, EmbeddingSpec.read(embedding_models[0]), batch_size=4)
    texts = sorted({ex.target for ex in examples})
    queries = embedder.queries([load_image(ex.image) for ex in examples], [ex.instruction for ex in examples])
    scores = queries @ embedder.texts(texts).T
    own = np.array([texts.index(ex.target) for ex in examples])
    top1 = np.argmax(scores, axis=1)
    assert float(rows[0]["recall"]) == pytest.approx(np.mean(top1 == own))
    best_image_of = np.argmax(scores, axis=0)  # text -> its best image; a hit when that image carries it
    assert float(rows[2]["recall"]) == pytest.approx(np.mean(own[best_image_of] == np.arange(len(texts))))
    assert int(rows[2]["n"]) == len(texts) == 10

    assert main(["embed", "eval", "--model", str(embedding_models[0]), "--retrieval", str(data),
                 "--retrieval-split", "train", "--out", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err


def test_models_that_do_not_embed_texts_are_refused(tmp_path, benches):
    with pytest.raises(ConfigError, match="does not embed images and texts"):
        embed_eval([ModelRef.tiny("idefics3")], tmp_path / "x", benches=benches)
    with pytest.raises(ConfigError, match="--benchmark and/or --retrieval"):
        embed_eval([ModelRef.tiny("clip")], tmp_path / "x")
