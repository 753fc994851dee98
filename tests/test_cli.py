"""The command line: subcommands, exit codes, and errors without tracebacks."""

import csv
import re
import subprocess
import sys
from functools import partial

import pytest

from robustvlm.cli import build_parser, main
from robustvlm.model_ref import ModelRef


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("data", "train", "embed", "eval", "demo", "study", "sweep", "mc", "robustness", "icl", "diagnose", "rm"):
        assert name in out


def test_bad_config_is_one_line_error(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("data: {benchmark: tasks}\ntrain: {lr: fast}\n")
    assert main(["train", str(cfg), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "train.lr" in err and "Traceback" not in err


def test_data_check_exit_status(tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "image": null, "instruction": "q", "target": "t", "env": "e"}\n')
    assert main(["data", "check", str(good)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "image": null, "instruction": "", "target": "t", "env": "e"}\nnot json\n')
    assert main(["data", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.jsonl:1" in out and "bad.jsonl:2" in out


def test_data_check_of_an_image_folder_given_as_a_relative_path(tmp_path, monkeypatch, capsys):
    from PIL import Image

    (tmp_path / "domains/photo/cat").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "domains/photo/cat/1.png")
    monkeypatch.chdir(tmp_path)
    assert main(["data", "check", "domains", "--format", "folder"]) == 0
    assert "1 good example(s), 0 bad record(s)" in capsys.readouterr().out


def test_data_check_takes_images_from_the_image_root(tmp_path, capsys):
    from PIL import Image

    (tmp_path / "images").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "images/a.png")
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "image": "a.png", "instruction": "q", "target": "t", "env": "e"}\n')
    assert main(["data", "check", str(data)]) == 1
    assert f"{data}:1: [a] image {tmp_path / 'a.png'}: file not found" in capsys.readouterr().out
    assert main(["data", "check", str(data), "--image-root", str(tmp_path / "images")]) == 0
    assert main(["data", "check", str(data), "--image-root", str(tmp_path / "none")]) == 2
    assert f"error: image root {tmp_path / 'none'}: not found" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "workflow"), [
    (["eval", "--model", "m", "--out", "o"], "robustvlm.workflows.finetune.evaluate"),
    (["mc", "build", "--out", "q.jsonl"], "robustvlm.workflows.measure.mc_build"),
])
def test_eval_and_mc_build_pass_the_image_root_to_the_loader(monkeypatch, command, workflow):
    import importlib

    from robustvlm.errors import DataError

    seen = {}

    def record_call(path, **kwargs):
        seen.update(kwargs, path=path)
        raise DataError("stop here")

    monkeypatch.setattr(importlib.import_module(workflow), "load_examples", record_call)
    assert main([*command, "--data", "d.jsonl", "--image-root", "imgs"]) == 2
    assert seen["path"] == "d.jsonl" and seen["image_root"] == "imgs"


def test_robustness_fit_from_cli(tmp_path, capsys):
    path = tmp_path / "results.csv"
    rows = []
    for i, (ref, shift) in enumerate([(0.5, 0.35), (0.6, 0.42), (0.7, 0.5), (0.8, 0.6)]):
        rows += [{"model": f"m{i}", "family": "vlm", "bench": "ref", "accuracy": ref, "n": 500},
                 {"model": f"m{i}", "family": "vlm", "bench": "shift", "accuracy": shift, "n": 500}]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "fit"
    assert main(["robustness", "fit", str(path), "--ref", "ref", "--shift", "shift", "--out", str(out)]) == 0
    assert (out / "fit.json").is_file() and (out / "scatter.png").is_file()
    assert main(["robustness", "fit", str(path), "--ref", "ref", "--shift", "absent", "--out", str(out)]) == 2
    assert "absent" in capsys.readouterr().err


def test_parser_defaults_follow_the_paper():
    args = build_parser().parse_args(["eval", "--model", "m", "--data", "d", "--out", "o"])
    assert args.max_new_tokens == 128 and args.repetition_penalty == 1.0


def test_mc_build_visual_distractors_use_the_vision_model(tmp_path, capsys):
    from robustvlm.data.loaders import load_examples
    from robustvlm.multiple_choice import build_questions
    from robustvlm.multiple_choice import read_questions as read_questions_file
    from robustvlm.workflows.measure.mc_build import load_image_embedder

    data = tmp_path / "synth"
    assert main(["data", "synth", "--benchmark", "domains", "--out", str(data), "--n-per-env", "1"]) == 0
    out = tmp_path / "visual.jsonl"
    base = ["mc", "build", "--data", str(data / "shapes"), "--out", str(out), "--k", "3", "--seed", "4",
            "--link-images"]  # image paths, so the questions compare equal to build_questions'
    read_questions = partial(read_questions_file, allow_outside_root=True)
    assert main([*base, "--distractors", "visual", "--vision-model", "tiny:clip"]) == 0
    expected = build_questions(load_examples(data / "shapes"), k=3, distractors="visual", seed=4,
                               image_embedder=load_image_embedder(ModelRef.parse("tiny:clip")))
    assert read_questions(out) == expected
    assert read_questions(out) != build_questions(load_examples(data / "shapes"), k=3, seed=4)
    capsys.readouterr()
    assert main([*base, "--distractors", "visual"]) == 2
    assert main([*base, "--distractors", "random", "--vision-model", "tiny:clip"]) == 2
    err = capsys.readouterr().err
    assert err.count("--distractors visual needs --vision-model") == 2 and "Traceback" not in err


def test_icl_eval_resume_flag(tmp_path, capsys):
    data = tmp_path / "synth"
    assert main(["data", "synth", "--benchmark", "domains", "--out", str(data), "--n-per-env", "1"]) == 0
    base = ["icl", "eval", "--model", "tiny:idefics3", "--data", str(data / "shapes"), "--out",
            str(tmp_path / "icl"), "--shots", "0,1", "--n-per-env", "1", "--batch-size", "2"]
    assert main(base) == 0
    log = tmp_path / "icl" / "icl_predictions.jsonl"
    first = log.read_text()
    log.write_text("".join(first.splitlines(keepends=True)[:3]))
    assert main([*base, "--resume"]) == 0
    assert log.read_text() == first
    capsys.readouterr()
    assert main([*base, "--resume", "--seed", "1"]) == 2
    assert "differs in ['seed']" in capsys.readouterr().err


def test_mc_build_text_distractors_take_the_configured_encoder(tmp_path, capsys):
    """--text-encoder replaces the default MiniLM: here a small random BERT with its tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from robustvlm.data.loaders import load_examples
    from robustvlm.models.text_encoder import default_encoder_path
    from robustvlm.multiple_choice import build_questions
    from robustvlm.multiple_choice import read_questions as read_questions_file

    encoder = tmp_path / "encoder"
    AutoTokenizer.from_pretrained(str(default_encoder_path())).save_pretrained(encoder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(encoder)
    data = tmp_path / "synth"
    assert main(["data", "synth", "--benchmark", "domains", "--out", str(data), "--n-per-env", "1"]) == 0
    out = tmp_path / "text.jsonl"
    base = ["mc", "build", "--data", str(data / "shapes"), "--out", str(out), "--k", "3", "--seed", "4",
            "--link-images"]  # image paths, so the questions compare equal to build_questions'
    read_questions = partial(read_questions_file, allow_outside_root=True)
    assert main([*base, "--distractors", "text", "--text-encoder", str(encoder)]) == 0
    examples = load_examples(data / "shapes")
    assert read_questions(out) == build_questions(examples, k=3, distractors="text", seed=4, encoder=encoder)
    assert read_questions(out) != build_questions(examples, k=3, distractors="text", seed=4)
    capsys.readouterr()
    assert main([*base, "--distractors", "random", "--text-encoder", str(encoder)]) == 2
    assert "--text-encoder applies only to --distractors text" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "c.yaml", "--out", "runs/erm", "train.steps=500"],
        ["train", "c.yaml", "train.lr=1e-4", "--out", "runs/erm", "train.steps=500"],
        ["rm", "train", "c.yaml", "--resume", "train.steps=500"],
        ["embed", "train", "c.yaml", "--out", "runs/emb", "train.steps=500"],
        ["demo", "tasks", "--quick", "train.steps=500"],
        ["robustness", "task-signal", "c.yaml", "--out", "ts", "train.steps=500"],
    ],
)
def test_overrides_are_accepted_anywhere_on_the_line(argv):
    """The README's first example put an override after --out and was refused (issue 17.1)."""
    from robustvlm.cli import build_parser, parse_command_line

    args = parse_command_line(build_parser(), argv)
    assert args.overrides[-1] == "train.steps=500"
    assert all("=" in item for item in args.overrides)


@pytest.mark.parametrize(
    "argv",
    [["train", "c.yaml", "--out", "d", "--bogus"], ["eval", "--model", "m", "--data", "d", "--out", "o", "x=1"]],
)
def test_leftover_options_and_overrides_without_a_home_are_still_refused(argv, capsys):
    from robustvlm.cli import build_parser, parse_command_line

    with pytest.raises(SystemExit) as exit_:
        parse_command_line(build_parser(), argv)
    assert exit_.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_python_dash_m_robustvlm_is_the_command():
    done = subprocess.run([sys.executable, "-m", "robustvlm", "configs", "list"], capture_output=True, text=True)
    assert done.returncode == 0 and "erm_tasks" in done.stdout


def test_a_reader_that_goes_away_is_no_traceback():
    """`robustvlm configs list | head -1`: the closed pipe ends the command quietly, exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "robustvlm", "configs", "list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # as `head` does before the command has written
    _, err = proc.communicate()
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err


def _record_demo_runs(monkeypatch) -> list[str]:
    """Replace every demo's run function by one that records its name (nothing is trained)."""
    from robustvlm.experiments.invariance import run as invariance
    from robustvlm.experiments.ladder import run as ladder
    from robustvlm.experiments.reward import run as reward
    from robustvlm.experiments.robustness import run as robustness
    from robustvlm.experiments.tasks import run as finetune

    ran: list[str] = []
    for module, function in [(finetune, "run_demo"), (invariance, "run_invariance_demo"), (ladder, "run_ladder_demo"),
                             (reward, "run_reward_demo"), (robustness, "run_robustness_demo")]:
        monkeypatch.setattr(module, function, lambda *args, _name=function, **kwargs: ran.append(_name))
    return ran


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["demo", "reward", "--methods", "erm,irm"], "--methods"),
        (["demo", "tasks", "--seeds", "3,4"], "--seeds"),
        (["demo", "reward", "--modes", "full"], "--modes"),
        (["demo", "--zoo"], "--zoo"),
        (["demo", "invariance", "--zoo"], "--zoo"),
        (["demo", "tasks", "--members", "llava-clip-m"], "--members"),
        (["demo", "ladder", "--zoo", "--inferred-envs"], "--inferred-envs"),
        (["demo", "robustness", "--n-envs", "4"], "--n-envs"),
        (["demo", "--quick", "--budget", "paper"], "--budget"),
        (["demo", "reward", "--n-envs", "3"], "--n-envs"),  # at its default value (issue 45.7)
        (["demo", "--dim-inv", "5"], "--dim-inv"),
        (["demo", "--zoo", "invariance"], "--zoo"),  # before the name, to a demo that does not read it
        (["demo", "--dim-spu", "0"], "--dim-spu"),  # a value that equals False
    ],
)
def test_a_demo_option_given_to_a_demo_that_does_not_read_it_is_refused(argv, option, monkeypatch, capsys):
    """They were ignored silently: `demo reward --methods erm,irm` trained every loss, and
    `demo reward --n-envs 3` (an option at its default value) started the demo."""
    ran = _record_demo_runs(monkeypatch)
    try:
        status = main(argv)
    except SystemExit as exit_:  # refused by argparse: an option the demo's parser does not have
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert f"{option} does not apply to `robustvlm demo" in err and "Traceback" not in err
    assert ran == []


def test_the_options_a_demo_reads_reach_it(monkeypatch):
    ran = _record_demo_runs(monkeypatch)
    assert main(["demo", "invariance", "--n-envs", "4", "--methods", "erm,irm", "--budget", "quick"]) == 0
    assert main(["demo", "tasks", "--zoo", "--methods", "erm"]) == 0
    assert main(["demo", "ladder", "--inferred-envs", "--methods", "erm", "--seeds", "3"]) == 0
    assert ran == ["run_invariance_demo", "run_demo", "run_ladder_demo"]


def test_an_option_before_the_demos_name_is_deprecated_but_still_read(monkeypatch, capsys):
    ran = _record_demo_runs(monkeypatch)
    seen: list[bool] = []
    from robustvlm.experiments.reward import run as reward

    monkeypatch.setattr(reward, "run_reward_demo", lambda out, *, quick: seen.append(quick))
    assert main(["demo", "--quick", "reward"]) == 0
    assert seen == [True] and ran == []
    assert "deprecated" in capsys.readouterr().err


def test_each_demo_help_shows_only_its_own_options(capsys):
    from robustvlm.cli import build_parser
    from robustvlm.experiments import EXPERIMENTS, flag
    from robustvlm.experiments.base import option_fields

    for name, experiment in EXPERIMENTS.items():
        with pytest.raises(SystemExit):
            build_parser().parse_args(["demo", name, "--help"])
        shown = set(re.findall(r"^\s+(--[a-z-]+)", capsys.readouterr().out, flags=re.MULTILINE))
        own = {flag(f.name) for f in option_fields(experiment.plan)}
        data_root = {"--data-root"} if experiment.reads_fashion_mnist else set()
        assert shown - {"--help", "--out", "--kernels", "--quick", "--zoo", *data_root} <= own, name  # --kernels: every demo
        assert own - {"--overrides"} <= shown, name
