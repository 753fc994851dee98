"""The model zoo: recipe keys, `zoo:NAME` names, `zoo build --quick`, deterministic and resumable
builds, model cards, stock-transformers loading, and the held-out accuracy against an
independent computation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from robustvlm.cli import main
from robustvlm.data.real_images import FASHION_CLASSES, load_fashion_mnist
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import infer_family, load_backend
from robustvlm.models.loglik import option_logliks
from robustvlm.models.zoo_recipes import (
    QUICK,
    RECIPES,
    Recipe,
    member_dir,
    recipe,
    resolve_model_ref,
)
from robustvlm.workflows.zoo import build as zoo_build
from robustvlm.workflows.zoo.build import build_members
from robustvlm.workflows.zoo.data import (
    ChatSampleCollator,
    heldout_pool,
    instruction_sample,
    training_pool,
    user_turn,
)
from robustvlm.workflows.zoo.members import fresh_model, heldout_accuracy, load_stage

QUICK_NAMES = [r.name for r in QUICK]


# ---- recipes and names (fast) ---------------------------------------------------------------


def test_a_recipe_key_is_the_hash_of_its_content():
    pinned = Recipe(name="pinned", arch="clip")
    # sha256 of the canonical JSON: the same in every process and on every machine (a change of
    # this value renames every member's folder, i.e. rebuilds the zoo)
    assert pinned.key() == "50de90f0e19f"
    assert Recipe(**pinned.model_dump()).key() == pinned.key()
    for change in ({"steps": 101}, {"lr": 2e-3}, {"width": 32}, {"seed": 1}, {"n_images": 100}):
        assert pinned.model_copy(update=change).key() != pinned.key()


def test_a_vlm_key_follows_its_zoo_tower(monkeypatch):
    vlm = recipe("quick-llava")
    before = vlm.key()
    monkeypatch.setitem(RECIPES, "quick-clip", recipe("quick-clip").model_copy(update={"steps": 31}))
    assert vlm.key() != before


def test_zoo_names_resolve_to_member_folders_or_say_how_to_build(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    assert resolve_model_ref(ModelRef.tiny("idefics3")).name == "tiny:idefics3"
    with pytest.raises(ConfigError, match="zoo build --members quick-clip"):
        resolve_model_ref(ModelRef.zoo("quick-clip"))
    with pytest.raises(ConfigError, match="unknown zoo member 'nope'"):
        load_backend(ModelRef.parse("zoo:nope"))
    assert member_dir(recipe("quick-clip")).parent == tmp_path / "zoo"


def test_training_images_come_from_the_training_split_only():
    train, _ = load_fashion_mnist("train")
    pool = training_pool(200, seed=0)
    assert len(pool) == 200 and np.bincount(pool.labels).tolist() == [20] * 10
    seen = {row.tobytes() for row in train}
    assert all(img.tobytes() in seen for img in pool.images)
    assert heldout_pool(5).images.tobytes() == load_fashion_mnist("test")[0][:5].tobytes()


def test_a_fresh_siglip_member_starts_at_the_papers_temperature_and_the_batch_prior_bias():
    # transformers starts both at 0 (temperature 1), which stalled SigLIP members at 0.22 accuracy
    model, _ = fresh_model(recipe("quick-siglip").model_copy(update={"batch_size": 8}))
    assert model.logit_scale.exp().item() == pytest.approx(10.0)
    # 8 distinct classes per batch: a pair is positive with prior odds 1/7
    assert model.logit_bias.item() == pytest.approx(np.log(1 / 7))
    clip, _ = fresh_model(recipe("quick-clip"))
    assert clip.logit_scale.item() == pytest.approx(2.6592)  # CLIP's own start (log 1/0.07), untouched


def test_instruction_samples_label_only_the_final_reply(tiny_vlms):
    model, processor = tiny_vlms("idefics3")
    pool = training_pool(100, seed=0)
    rng = np.random.default_rng(0)
    samples = [instruction_sample(pool, rng, f"s{i}") for i in range(24)]
    for s in samples:
        assert sum(part["type"] == "image" for m in s.messages for part in m["content"]) == len(s.images)
    assert {len(s.images) for s in samples} > {1}  # comparisons and interleaved demonstrations occur
    batch = ChatSampleCollator(processor, {})(samples)
    for row, s in zip(batch["labels"], samples):
        text = processor.tokenizer.decode(row[row != -100])
        assert text == s.target + "<|im_end|>"


# ---- building (slow: the quick set once, about 75 CPU-s, 60 of them quick-llava-lmfirst) ---------


@pytest.fixture(scope="module")
def quick_zoo(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("zoo_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROBUSTVLM_CACHE", str(cache))
        assert main(["zoo", "build", "--quick"]) == 0
    return cache


@pytest.fixture
def in_quick_zoo(quick_zoo, monkeypatch) -> Path:
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(quick_zoo))
    return quick_zoo


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def assert_bit_equal(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_zoo_build_quick_builds_every_member_with_a_card(in_quick_zoo, capsys):
    for name in QUICK_NAMES:
        folder = Path(resolve_model_ref(ModelRef.zoo(name)).name)
        info = json.loads((folder / "zoo_member.json").read_text())
        card = (folder / "README.md").read_text()
        assert info["recipe"] == recipe(name).model_dump()
        assert 0.0 <= info["heldout_accuracy"] <= 1.0 and info["cpu_seconds"] > 0
        for field in ("Fashion-MNIST's training split", f"{info['heldout_accuracy']:.3f}", "CPU seconds",
                      f"| steps | {recipe(name).steps} |"):
            assert field in card
    assert main(["zoo", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(f"zoo:{n}\t" in listing and "\tyes\t" in listing for n in QUICK_NAMES)


@pytest.mark.slow
def test_an_unchanged_recipe_is_never_rebuilt_and_a_changed_one_is(in_quick_zoo):
    folder = member_dir(recipe("quick-clip"))
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    [again] = build_members([recipe("quick-clip")])
    assert again.reused and (folder / "model.safetensors").stat().st_mtime_ns == stamp
    changed = recipe("quick-clip").model_copy(update={"steps": 5})
    [rebuilt] = build_members([changed])
    assert not rebuilt.reused and rebuilt.folder != folder and rebuilt.info["stages"][0]["steps"] == 5


@pytest.mark.slow
def test_a_member_built_twice_is_bit_identical(in_quick_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    [second] = build_members([recipe("quick-idefics3")])
    first = in_quick_zoo / "zoo" / second.folder.name
    assert_bit_equal(first, second.folder)
    assert second.info["heldout_accuracy"] == json.loads((first / "zoo_member.json").read_text())["heldout_accuracy"]
    assert json.loads((second.folder / "zoo_member.json").read_text())["machine"]["torch"]["threads"] >= 1


@pytest.mark.slow
def test_members_built_in_two_processes_equal_those_built_in_one(in_quick_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))  # the worker processes inherit it
    # quick-llava needs its tower, quick-clip, which the other process builds first: the llava
    # process waits on quick-clip's lock, then finds it built
    names = ["quick-llava", "quick-clip"]
    built = build_members([recipe(n) for n in names], jobs=2)
    assert [b.name for b in built] == names
    for name in names:
        assert_bit_equal(in_quick_zoo / "zoo" / member_dir(recipe(name)).name, member_dir(recipe(name)))


@pytest.mark.slow
def test_a_killed_build_resumes_after_its_finished_stages(in_quick_zoo, monkeypatch):
    # align + tune, the tower from scratch (the quick members' towers come from the zoo)
    variant = recipe("quick-llava").model_copy(update={"tower": "scratch", "tune_tower": True})
    real_run_stage = zoo_build.run_stage
    calls = []

    def killed_in_second_stage(*args, **kwargs):
        calls.append(kwargs["label"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run_stage(*args, **kwargs)

    monkeypatch.setattr(zoo_build, "run_stage", killed_in_second_stage)
    with pytest.raises(KeyboardInterrupt):
        build_members([variant])
    assert not member_dir(variant).exists()
    [resumed] = build_members([variant])
    assert calls == ["quick-llava/align", "quick-llava/tune", "quick-llava/tune"]  # align not rerun
    monkeypatch.setattr(zoo_build, "run_stage", real_run_stage)
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(in_quick_zoo / "uninterrupted"))
    [straight] = build_members([variant])
    assert_bit_equal(resumed.folder, straight.folder)


@pytest.mark.slow
def test_members_load_with_stock_transformers_in_a_fresh_process(in_quick_zoo):
    vlm, dual = (resolve_model_ref(ModelRef.zoo(n)).name for n in ("quick-idefics3", "quick-clip"))
    code = (
        "import sys\nfrom transformers import AutoModel, AutoModelForImageTextToText, AutoProcessor\n"
        f"m = AutoModelForImageTextToText.from_pretrained({vlm!r}); AutoProcessor.from_pretrained({vlm!r})\n"
        f"d = AutoModel.from_pretrained({dual!r}); AutoProcessor.from_pretrained({dual!r})\n"
        "assert 'robustvlm' not in sys.modules\nprint(type(m).__name__, type(d).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Idefics3ForConditionalGeneration", "CLIPModel"]


@pytest.mark.slow
def test_zoo_names_load_as_backends_of_their_family(in_quick_zoo):
    assert infer_family(ModelRef.parse("zoo:quick-clip")) == "clip"
    assert infer_family(ModelRef.parse("zoo:quick-siglip")) == "siglip"
    assert infer_family(ModelRef.parse("zoo:quick-llava")) == "vlm"
    assert load_backend(ModelRef.parse("zoo:quick-idefics3")).family == "vlm"


@pytest.mark.slow
def test_heldout_accuracy_matches_an_independent_computation(in_quick_zoo):
    r = recipe("quick-idefics3").model_copy(update={"eval_images": 12})
    model, processor = load_stage(r, Path(resolve_model_ref(ModelRef.zoo("quick-idefics3")).name))
    pool = heldout_pool(12)
    question = "What type of object is in this photo?\n" + "\n".join(
        f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(FASHION_CLASSES)) + "\nAnswer with the option's letter."
    options = [f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(FASHION_CLASSES)]
    correct = [
        np.argmax(option_logliks(model.eval(), processor, [user_turn(question)], options,
                                 images=[pool.picture(i)], shared_prefix=False).sum) == pool.labels[i]
        for i in range(12)
    ]
    assert heldout_accuracy(r, model, processor) == pytest.approx(np.mean(correct))

    dual_r = recipe("quick-clip").model_copy(update={"eval_images": 12})
    dual, dual_processor = load_stage(dual_r, Path(resolve_model_ref(ModelRef.zoo("quick-clip")).name))
    with torch.no_grad():
        texts = dual_processor(text=[f"a photo of a {c}." for c in FASHION_CLASSES], return_tensors="pt",
                               padding=True)
        t = dual.get_text_features(**texts)
        t = (t if torch.is_tensor(t) else t.pooler_output)
        pixels = dual_processor(images=[pool.picture(i) for i in range(12)], return_tensors="pt")
        v = dual.get_image_features(**pixels)
        v = (v if torch.is_tensor(v) else v.pooler_output)
    expected = ((v / v.norm(dim=-1, keepdim=True)) @ (t / t.norm(dim=-1, keepdim=True)).T).argmax(1).numpy()
    assert heldout_accuracy(dual_r, dual, dual_processor) == pytest.approx(np.mean(expected == pool.labels))


@pytest.mark.slow
def test_a_member_whose_weights_do_not_match_its_card_is_rebuilt(tmp_path, monkeypatch, capsys):
    """Issue 45.8: garbage model.safetensors was listed as built ("already built accuracy 0.220").
    The card records the weights' sha256; a mismatch is listed as damaged and rebuilt, bit for bit."""
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    assert main(["zoo", "build", "--members", "quick-clip"]) == 0
    weights = member_dir(recipe("quick-clip")) / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(b"\xff" * 64)
    capsys.readouterr()
    assert main(["zoo", "list"]) == 0
    out, err = capsys.readouterr()
    assert "\tdamaged\t" in next(line for line in out.splitlines() if line.startswith("zoo:quick-clip\t"))
    assert str(weights) in err
    assert main(["zoo", "build", "--members", "quick-clip"]) == 0
    out = capsys.readouterr().out
    assert "rebuilding" in out and "already built" not in out
    assert weights.read_bytes() == good
