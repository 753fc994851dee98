"""`robustvlm rm eval`: accuracy per environment with the text-only test, and resume."""

from __future__ import annotations

import json
import shutil

import pytest

from robustvlm.cli import main
from robustvlm.config import RewardEvalConfig
from robustvlm.data.preferences import load_pairs
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.reward import scoring
from robustvlm.workflows.reward.evaluate import eval_pairs, evaluate_reward_model


@pytest.fixture(scope="module")
def prefs(tmp_path_factory):
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("prefs")
    synthesize("preferences", root, seed=1, n_per_env=6)
    return root


def test_eval_scores_every_view_and_resumes(reward_folder, prefs, tmp_path, monkeypatch):
    pairs = load_pairs(prefs, verbose=False).pairs
    cfg = RewardEvalConfig(max_per_env=3, n_boot=100)
    out = tmp_path / "eval"
    metrics = evaluate_reward_model(ModelRef.folder(reward_folder), pairs, out, cfg=cfg, data={"path": str(prefs)}, progress=False)
    assert metrics.views == ["multimodal", "drop"] and set(metrics.per_env) == {"clause", "long", "plain", "short"}
    rows = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {"id", "env", "multimodal", "drop", "swapped"} == set(rows[0])
    acc = metrics.per_env["long"]["multimodal"]
    by_hand = [r["multimodal"][0] > r["multimodal"][1] for r in rows if r["env"] == "long"]
    assert acc.accuracy == pytest.approx(sum(by_hand) / 3) and acc.n == 3
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["overall"]["drop"]["n"] == 12

    lines = (out / "pairs.jsonl").read_text().splitlines()
    (out / "pairs.jsonl").write_text("\n".join(lines[:7]) + '\n{"id": "tor')
    scored = []
    real = scoring.candidate_rewards
    monkeypatch.setattr(scoring, "candidate_rewards", lambda *a, **k: scored.append(1) or real(*a, **k))
    again = evaluate_reward_model(ModelRef.folder(reward_folder), pairs, out, cfg=cfg, data={"path": str(prefs)},
                                  resume=True, progress=False)
    assert len(scored) == 5 * 3  # five pairs left, two views each and the swap check
    assert again.to_dict() == metrics.to_dict()
    with pytest.raises(ConfigError, match="--resume"):
        evaluate_reward_model(ModelRef.folder(reward_folder), pairs, out, cfg=cfg, data={"path": str(prefs)}, progress=False)


def test_eval_split_and_cli(reward_folder, prefs, tmp_path, capsys):
    pairs = load_pairs(prefs, verbose=False).pairs
    with pytest.raises(ConfigError, match="no pairs in split 'val'"):
        eval_pairs(pairs, RewardEvalConfig(split="val"))
    assert main(["rm", "eval", "--model", str(reward_folder), "--data", str(prefs), "--out", str(tmp_path / "e"),
                 "--max-per-env", "1", "--no-text-only-test"]) == 0
    out = capsys.readouterr().out
    assert "accuracy % (multimodal)" in out and "drop" not in out and "| all |" in out


def test_skip_bad_counts_what_it_left_out_and_training_pairs_need_a_flag(reward_folder, prefs, tmp_path, capsys):
    """A data file with two bad records: without --skip-bad one clear error; with it, the rest is
    scored and the two are listed and counted. --split train needs --score-training-pairs."""
    import shutil

    data = tmp_path / "prefs"
    shutil.copytree(prefs, data)
    lines = (data / "data.jsonl").read_text().splitlines()
    broken = [json.loads(line) for line in lines[2:4]]  # the first record names the layout: kept whole
    del broken[0]["chosen"]
    broken[1]["image"] = "images/missing.png"
    (data / "data.jsonl").write_text("\n".join(lines[:2] + [json.dumps(r) for r in broken] + lines[4:]) + "\n")
    base = ["rm", "eval", "--model", str(reward_folder), "--data", str(data), "--max-per-env", "1",
            "--no-text-only-test"]
    assert main([*base, "--out", str(tmp_path / "strict")]) == 2
    assert capsys.readouterr().err.count("error:") == 1
    assert main([*base, "--out", str(tmp_path / "lenient"), "--skip-bad"]) == 0
    assert "skipped 2 bad record(s)" in capsys.readouterr().out
    metrics = json.loads((tmp_path / "lenient" / "metrics.json").read_text())
    assert metrics["skipped_records"] == 2 and "training_pairs" not in metrics
    assert len((tmp_path / "lenient" / "skipped.jsonl").read_text().splitlines()) == 2

    assert main([*base, "--out", str(tmp_path / "train"), "--split", "train"]) == 2
    assert "--score-training-pairs" in capsys.readouterr().err
    assert not (tmp_path / "train").exists()
    assert main([*base, "--out", str(tmp_path / "train"), "--split", "train", "--score-training-pairs",
                 "--skip-bad"]) == 0
    assert "training split" in capsys.readouterr().out
    assert json.loads((tmp_path / "train" / "metrics.json").read_text())["training_pairs"] is True


def test_eval_scores_the_pairs_the_training_run_held_out(tmp_path):
    """`data.split_per_env` carves held-out pairs the data file does not mark: the run records its
    split, and `rm eval --model RUN/final` scores exactly the pairs it held out."""
    from robustvlm.config import RewardConfig, validate_config
    from robustvlm.workflows.reward.train import train_reward_model

    cfg = validate_config({
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
        "data": {"benchmark": "preferences", "n_per_env": 6, "split_per_env": {"test": 2}},
        "train": {"steps": 1, "batch_size": 4, "save_every": 1, "cpu_threads": 1},
    }, "test", RewardConfig)
    run = tmp_path / "run"
    result = train_reward_model(cfg, run, progress=False)
    split = json.loads((run / "pair_split.json").read_text())
    assert len(split["test"]) == 2 * 4 and not set(split["test"]) & set(split["train"])
    assert main(["rm", "eval", "--model", str(result.final_dir), "--data", str(run / "data"),
                 "--out", str(tmp_path / "eval"), "--no-text-only-test"]) == 0
    scored = [json.loads(line)["id"] for line in (tmp_path / "eval" / "pairs.jsonl").read_text().splitlines()]
    assert sorted(scored) == sorted(split["test"])


def test_no_pairs_in_the_split_names_the_data_file_before_any_work(reward_folder, prefs, tmp_path, capsys):
    """Issue 45.20: a data file without pairs in the evaluated split is named in the one error line,
    and no output folder is claimed."""
    only_train = tmp_path / "only_train"
    shutil.copytree(prefs, only_train)
    for records in only_train.rglob("*.jsonl"):
        rows = [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines() if line.strip()]
        records.write_text("".join(json.dumps({**r, "split": "train"}) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "e"
    assert main(["rm", "eval", "--model", str(reward_folder), "--data", str(only_train), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and str(only_train) in err and "no pairs in split 'test'" in err
    assert len(err.splitlines()) == 1 and not out.exists()
