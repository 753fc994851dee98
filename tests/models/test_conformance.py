"""The architecture conformance matrix: every tiny architecture x every capability of
`models.support.WORKFLOW_CAPABILITIES`, through the real workflows (and the CLI for `mc eval`).

A cell that `support.NOT_SUPPORTED` declares must stop before any work with a ConfigError naming
the architecture; every other cell must run. The docs' support table (docs/reference/architectures.md)
is generated from the same declaration (`test_support_table_is_generated`), so it claims only what
these tests run.
Batch-size and padding invariance: tests/models/test_batch_invariance.py.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

from robustvlm.cli import main
from robustvlm.config import EmbedRunConfig, RewardConfig, RewardEvalConfig, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.data.preferences import load_pairs
from robustvlm.data.synth import synthesize
from robustvlm.errors import ConfigError
from robustvlm.evaluation.icl_settings import InContextSettings
from robustvlm.model_ref import ModelRef
from robustvlm.models import support
from robustvlm.models.backends import load_backend
from robustvlm.models.loglik import option_logliks
from robustvlm.models.reward import RewardModel, save_reward_model
from robustvlm.models.tiny import build_tiny_vlm
from robustvlm.models.tiny_families import VLM_FAMILIES
from robustvlm.models.trainable import configure_trainable, find_parts
from robustvlm.multiple_choice.build import MCQuestion, read_questions, write_questions
from robustvlm.multiple_choice.generative import option_continuations, question_prompt
from robustvlm.report.figure_blocks import read_figure
from robustvlm.report.support_table import NAME, support_table
from robustvlm.workflows.embed.train import embed_train
from robustvlm.workflows.finetune.evaluate import evaluate
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.measure.diagnose import run_diagnosis
from robustvlm.workflows.measure.icl_eval import run_icl
from robustvlm.workflows.reward.evaluate import evaluate_reward_model
from robustvlm.workflows.reward.train import train_reward_model

KINDS = list(VLM_FAMILIES)
ARCHITECTURES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "architectures.md"
TINY = {"hidden_size": 32, "vocab_size": 320}
TRAIN = {"steps": 2, "lr": 3e-3, "batch_size": 4, "save_every": 1, "keep_checkpoints": 3, "cpu_threads": 1}
CLASSES = ["dog", "cat", "bird", "fish"]


def outcome(kind: str, capability: str, out: Path):
    """The context a capability's run goes in: nothing for a supported cell; for a declared
    gap, the ConfigError naming the architecture, raised before `out` is created."""
    if support.supports(kind, capability):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def refused():
        with pytest.raises(ConfigError, match=rf"\({support.ARCHITECTURES[kind]}\) cannot run"):
            yield
        assert not out.exists(), "a refused capability must stop before any work"

    return refused()


def test_declaration_covers_every_architecture():
    assert set(support.ARCHITECTURES) == set(VLM_FAMILIES)
    assert set(support.NOT_SUPPORTED) <= set(VLM_FAMILIES)
    assert all(set(gaps) <= set(support.WORKFLOW_CAPABILITIES) for gaps in support.NOT_SUPPORTED.values())
    with pytest.raises(ConfigError, match="unknown capability 'fly'"):
        support.supports("llava", "fly")


def test_architecture_of_a_saved_model_is_read_from_its_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "paligemma"}))
    assert support.model_type_of(ModelRef.folder(tmp_path)) == "paligemma"
    assert support.model_type_of(ModelRef.parse("Qwen/Qwen2-VL-2B-Instruct")) is None  # a hub name: checked when loaded
    with pytest.raises(ConfigError, match=r"\(PaliGemma\) cannot run robustvlm icl eval"):
        support.require_capability(ModelRef.folder(tmp_path), "icl")
    support.require_capability(ModelRef.folder(tmp_path), "mc-loglik")


def test_support_table_is_generated():
    """The docs' table is `support_table()` (regenerate: python -m robustvlm.report.support_table
    docs/reference/architectures.md)."""
    assert read_figure(ARCHITECTURES_PAGE.read_text(encoding="utf-8"), NAME) == support_table()


def test_unknown_architecture_is_one_clear_error(tmp_path, bench, capsys):
    raw = {"model": {"name": "tiny:qwen9_vl"}, "data": {"benchmark": "spurious", "n_per_env": 4}}
    with pytest.raises(ConfigError, match="unknown tiny architecture 'qwen9_vl'.*known: .*'qwen2_vl'"):
        train(validate_config(raw), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="unknown tiny architecture 'qwen9_vl'"):
        evaluate(ModelRef.parse("tiny:qwen9_vl"), [], tmp_path / "eval", progress=False)
    assert not (tmp_path / "eval").exists()
    # several models: refused before the first one is scored
    code = main(["mc", "eval", "--model", "tiny:clip", "--model", "tiny:qwen9_vl", "--benchmark", str(bench),
                 "--out", str(tmp_path / "mc")])
    assert code == 2 and "unknown tiny model 'tiny:qwen9_vl'" in capsys.readouterr().err
    assert not (tmp_path / "mc").exists()


# ---- parts: vision tower, projector and language model found ----------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_parts_are_found_and_frozen_as_asked(kind, tiny_vlms):
    model, _ = tiny_vlms(kind)
    parts = find_parts(model)
    ids = lambda module: {id(p) for p in module.parameters()}  # noqa: E731
    vision, projector, decoder = ids(parts.vision), ids(parts.projector), ids(parts.decoder)
    # the parts cover the whole model (the projector may sit inside the vision module: Qwen-VL),
    # but for parameters of the wrapper itself (LLaVA-OneVision's image_newline)
    left = {n for n, p in model.named_parameters() if id(p) not in vision | projector | decoder | ids(parts.lm_head)}
    assert all(n.removeprefix("model.").count(".") == 0 for n in left), left
    assert not vision & decoder and not projector & decoder
    assert model.get_input_embeddings().weight is parts.decoder.get_input_embeddings().weight
    assert "Vision" in type(parts.vision).__name__ and "Vision" not in type(parts.decoder).__name__
    # the paper setting freezes exactly the vision tower without its projector
    paper = configure_trainable(copy.deepcopy(model), mode="paper")
    frozen = {name for name, p in paper.named_parameters() if not p.requires_grad}
    assert frozen == _tower(model, parts) and frozen
    assert bool(parts.extra_projectors) == (kind == "qwen3_vl")  # DeepStack mergers train with the projector


def _tower(model: torch.nn.Module, parts) -> set[str]:
    """Parameter names of the vision tower without its projectors."""
    projectors = set().union(*(_names(model, m) for m in (parts.projector, *parts.extra_projectors)))
    return _names(model, parts.vision) - projectors


# ---- train (ERM / Dynamic BIRM x LoRA / frozen vision), resume, eval -------------------------


def _train_raw(kind: str, trainable: str, method: str, steps: int = 2) -> dict:
    return {"model": {"name": f"tiny:{kind}", "trainable": trainable, "tiny": TINY},
            "data": {"benchmark": "spurious", "n_per_env": 8}, "method": method,
            "method_args": {"k_skip": 1} if method == "dynamic_birm" else {},
            "train": {**TRAIN, "steps": steps},
            "eval": {"batch_size": 4, "max_new_tokens": 4, "max_per_env": 2}}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trainable,method", [("lora", "erm"), ("lora", "dynamic_birm"),
                                              ("paper", "erm"), ("paper", "dynamic_birm")])
def test_train_one_step(kind, trainable, method, tmp_path):
    """Training moves the language model and never the frozen vision tower; LoRA moves nothing
    but the language model."""
    run = tmp_path / "run"
    with outcome(kind, "train", run):
        result = train(validate_config(_train_raw(kind, trainable, method, steps=1)), run, progress=False)
        rows = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1] and torch.isfinite(torch.tensor(rows[0]["loss"]))
        before, after = (_parameters(folder) for folder in (run / "base", result.final_dir))
        assert before.keys() == after.keys()
        changed = {k for k in before if not torch.equal(before[k], after[k])}
        base = AutoModelForImageTextToText.from_pretrained(run / "base")
        parts = find_parts(base)
        tower = _tower(base, parts)
        assert tower <= set(before)
        assert changed and not changed & tower, f"{kind}: vision tower weights moved: {sorted(changed & tower)[:3]}"
        if trainable == "lora":  # adapters on the language model only (merged into final/)
            outside = changed - _names(base, parts.decoder)
            assert not outside, f"{kind}: LoRA moved weights outside the language model: {sorted(outside)[:3]}"


def _parameters(folder: Path) -> dict[str, torch.Tensor]:
    return dict(AutoModelForImageTextToText.from_pretrained(folder).named_parameters())


def _names(model: torch.nn.Module, module: torch.nn.Module) -> set[str]:
    """Full names of the parameters of `module`, a submodule of `model`."""
    path = next(name for name, m in model.named_modules() if m is module)
    return {f"{path}.{n}" for n, _ in module.named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_resume_continues_exactly_and_eval_generates(kind, tmp_path):
    raw = _train_raw(kind, "lora", "dynamic_birm", steps=2)
    full = tmp_path / "full"
    with outcome(kind, "train", full):
        result = train(validate_config(raw), full, progress=False)
        cut = tmp_path / "cut"
        shutil.copytree(full, cut)
        shutil.rmtree(cut / "final")
        shutil.rmtree(cut / "checkpoints" / "step-000002")
        train(validate_config(raw), cut, resume=True, progress=False)
        a, b = (load_file(str(r / "final" / "model.safetensors")) for r in (full, cut))
        assert all(torch.equal(a[k], b[k]) for k in a), f"{kind}: weights differ after resume"
        logs = [[{k: v for k, v in json.loads(x).items() if k != "seconds"}
                 for x in (r / "train_log.jsonl").read_text().splitlines()] for r in (full, cut)]
        assert logs[0] == logs[1]

    out = tmp_path / "eval"
    with outcome(kind, "eval", out):
        cfg = validate_config(raw)
        examples = load_from_config(cfg.data, full, verbose=False)
        metrics = evaluate(ModelRef.folder(result.final_dir), examples, out, cfg=cfg.eval, progress=False)
        rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
        assert metrics.n == len(rows) == 8 and all(isinstance(r["prediction"], str) for r in rows)


# ---- mc eval: log-likelihood (shared prefix = full sequences) and generation ------------------


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    questions = []
    for i in range(3):
        buf = io.BytesIO()
        Image.new("RGB", (64 + 16 * i, 64), (60 * i, 90, 200)).save(buf, format="PNG")
        questions.append(MCQuestion(id=f"q{i}", image=buf.getvalue(), question="", answer=i % 4, source="test",
                                    options=CLASSES[i:] + CLASSES[:i], dataset_class="x",
                                    prompt="What type of object is in this photo?"))
    path = tmp_path_factory.mktemp("mc") / "bench.jsonl"
    write_questions(questions, path, embed_images=True)
    return path


@pytest.mark.parametrize("kind", KINDS)
def test_mc_eval_loglik_matches_full_sequences(kind, bench, tmp_path, tiny_backends):
    out = tmp_path / "mc"
    with outcome(kind, "mc-loglik", out):
        assert main(["mc", "eval", "--model", f"tiny:{kind}", "--benchmark", str(bench), "--out", str(out)]) == 0
        rows = [json.loads(x) for x in (out / f"tiny_{kind}" / "bench.jsonl").read_text().splitlines()]
        backend = tiny_backends(kind)
        for row, question in zip(rows, read_questions(bench), strict=True):
            messages, images = question_prompt(question)
            full = option_logliks(backend.model, backend.processor, messages, option_continuations(question.options),
                                  images=images, shared_prefix=False)
            assert row["scores"] == pytest.approx(full.mean, abs=1e-4), f"{kind}: shared prefix != full sequences"


@pytest.mark.parametrize("kind", KINDS)
def test_mc_eval_generate(kind, bench, tmp_path):
    out = tmp_path / "mc"
    with outcome(kind, "mc-generate", out):
        assert main(["mc", "eval", "--model", f"tiny:{kind}", "--benchmark", str(bench), "--out", str(out),
                     "--method", "generate", "--batch-size", "3"]) == 0
        rows = [json.loads(x) for x in (out / f"tiny_{kind}" / "bench.jsonl").read_text().splitlines()]
        assert len(rows) == 3 and all(isinstance(r["response"], str) for r in rows)


# ---- rm train / rm eval, embed train, icl eval, diagnose ------------------------------------


@pytest.fixture(scope="module")
def prefs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prefs")
    synthesize("preferences", root, seed=1, n_per_env=3)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_rm_train_and_eval(kind, prefs, tmp_path):
    raw = {"model": {"name": f"tiny:{kind}", "trainable": "lora", "tiny": TINY},
           "data": {"benchmark": "preferences", "n_per_env": 4, "envs": ["clause", "short"]},
           "loss": "shortcut_aware", "train": TRAIN}
    run = tmp_path / "rm"
    with outcome(kind, "rm", run):
        result = train_reward_model(validate_config(raw, "t", RewardConfig), run, progress=False)
        assert (result.final_dir / "reward_head.safetensors").is_file()
    out = tmp_path / "rm-eval"
    folder = result.final_dir if support.supports(kind, "rm") else _reward_folder(kind, tmp_path / "head")
    with outcome(kind, "rm", out):
        pairs = load_pairs(prefs, verbose=False).pairs
        metrics = evaluate_reward_model(ModelRef.folder(folder), pairs, out, cfg=RewardEvalConfig(max_per_env=1, n_boot=100),
                                        data={"path": str(prefs)}, progress=False)
        assert metrics.views == ["multimodal", "drop"] and len(metrics.per_env) == 4


def _reward_folder(kind: str, folder: Path) -> Path:
    """An untrained reward model of `kind` (to check that `rm eval` refuses it)."""
    vlm, processor = build_tiny_vlm(kind, **TINY)
    save_reward_model(RewardModel(vlm), processor, folder, meta={"loss": "standard"})
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_embed_train_one_step(kind, tmp_path):
    raw = {"model": {"name": f"tiny:{kind}", "tiny": TINY}, "data": {"benchmark": "tasks", "n_per_env": 2},
           "embed": {"chunk_size": 2, "caption_envs": ["general/caption"]}, "train": {**TRAIN, "steps": 1}}
    run = tmp_path / "embed"
    with outcome(kind, "embed", run):
        result = embed_train(validate_config(raw, "t", EmbedRunConfig), run, progress=False)
        assert result.steps == 1 and (result.final_dir / "embedding.json").is_file()
        backend = load_backend(ModelRef.folder(result.final_dir))  # the saved model loads back and embeds
        queries = backend.embed_queries([Image.new("RGB", (64, 64), "red")] * 2, ["Which shape?", "Which colour?"])
        assert queries.shape[0] == 2 and np.allclose(np.linalg.norm(queries, axis=1), 1, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_icl_eval(kind, domains_suite, tmp_path):
    out = tmp_path / "icl"
    with outcome(kind, "icl", out):
        result = run_icl(ModelRef.tiny(kind), domains_suite / "shapes", out,
                         InContextSettings(shots=(0, 1), policies=("same-domain",), n_per_env=1, seed=0), progress=False)
        assert {r["shots"] for r in result.to_dict()["rows"]} == {0, 1}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_diagnose(kind, domains_suite, tmp_path):
    out = tmp_path / "diagnose"
    descriptions = {c: f"a drawing of a {c}" for c in
                    ("circle", "cross", "heart", "hexagon", "pentagon", "square", "star", "triangle")}
    with outcome(kind, "diagnose", out):
        result = run_diagnosis(ModelRef.tiny(kind), domains_suite / "shapes", out,
                               InContextSettings(shots=(0, 1), policies=("same-domain",), n_per_env=1),
                               descriptions=descriptions)
        assert len(result.rows) == 4 and all(0 <= r["probe_acc"] <= 1 for r in result.rows)
