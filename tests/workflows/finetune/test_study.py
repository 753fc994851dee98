"""The study runner: methods x seeds end to end on a tiny model, resume, planning and its errors
(the pure aggregation: tests/analysis/test_study.py)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from report_checks import without_data_read

import robustvlm.workflows.finetune.study as study
from robustvlm.analysis.study import StudyResults
from robustvlm.errors import ConfigError

torch.set_num_threads(1)

CONFIG = {
    "base": {
        "model": {
            "name": "tiny:idefics3",
            "trainable": "full",
            "tiny": {"hidden_size": 32, "vocab_size": 300},
        },
        "data": {"benchmark": "spurious", "n_per_env": 24},
        "train": {"steps": 6, "lr": 3e-3, "batch_size": 4, "save_every": 3, "cpu_threads": 1},
        "eval": {"batch_size": 16, "max_new_tokens": 4, "max_per_env": 4},
    },
    "methods": {"erm": {"method": "erm"}, "dynamic_birm": {"method": "dynamic_birm", "k_skip": 2}},
    "seeds": [0, 1],
    "metrics": ["chrf", "exact"],
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    return out, study.run_study(CONFIG, out, progress=False).to_dict()


def test_outputs_and_results_structure(finished):
    out, results = finished
    for name in (
        "results.json",
        "report.md",
        "report.html",
        "heatmap_chrf.png",
        "bars_exact.png",
        "trajectories.png",
    ):
        assert (out / name).is_file(), name
    written = without_data_read(json.loads((out / "results.json").read_text()))  # its machine record aside
    assert written == json.loads(json.dumps(results))
    assert results["baseline"] == "erm" and results["seeds"] == [0, 1]
    assert json.loads(json.dumps(StudyResults.from_dict(written).to_dict())) == written  # read back
    for label in ("erm", "dynamic_birm"):
        info = results["methods"][label]
        assert set(info["runs"]) == {"0", "1"}
        for seed in (0, 1):
            run_dir = out / "runs" / label / f"seed-{seed}"
            assert (run_dir / "train" / "config.resolved.yaml").is_file() and (run_dir / "train" / "final").is_dir()
            assert (run_dir / "eval" / "config.resolved.yaml").is_file()
        ood = info["summary"]["ood"]["chrf"]
        seed_scores = [info["runs"][s]["metrics"]["ood"]["chrf"] for s in ("0", "1")]
        assert ood["mean"] == pytest.approx(np.mean(seed_scores))
        assert ood["std"] == pytest.approx(np.std(seed_scores, ddof=1))
        assert ood["seeds"] == 2 and ood["n"] == 2 * 2 * 4  # seeds x OOD envs x max_per_env
    dyn_args = results["methods"]["dynamic_birm"]["method_args"]
    assert dyn_args == {"seed": 0, "k_skip": 2}
    assert set(results["significance"]["dynamic_birm"]) == {"id", "ood"}
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "heatmap_chrf.png" not in html
    assert "](heatmap_chrf.png)" in (out / "report.md").read_text()


def test_paired_figures_come_from_the_runs_per_question_correctness(finished):
    """results.json's per-environment paired comparison, recomputed from predictions.jsonl."""
    from scipy import stats

    out, results = finished
    rows = {(label, seed): {r["id"]: r for r in map(json.loads, (out / "runs" / label / f"seed-{seed}" / "eval" /
                                                               "predictions.jsonl").open())}
            for label in ("erm", "dynamic_birm") for seed in (0, 1)}
    paired = results["paired"]["dynamic_birm"]["exact"]
    envs = sorted({r["env"] for r in rows["erm", 0].values()})
    assert list(paired) == [*envs, "all"] and list(results["paired"]) == ["dynamic_birm"]
    for env in envs:
        ids = sorted(i for i, r in rows["erm", 0].items() if r["env"] == env)
        a, b = ([np.mean([rows[label, s][i]["scores"]["exact"] for s in (0, 1)]) for i in ids]
                for label in ("dynamic_birm", "erm"))
        assert paired[env]["n"] == len(ids) and paired[env]["difference"] == pytest.approx(np.mean(a) - np.mean(b))
        for s in (0, 1):
            x = np.array([rows["dynamic_birm", s][i]["scores"]["exact"] for i in ids]) == 1
            y = np.array([rows["erm", s][i]["scores"]["exact"] for i in ids]) == 1
            only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
            p = stats.binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0
            assert paired[env]["mcnemar_per_seed"][str(s)] == {"only_method": only_a, "only_baseline": only_b,
                                                               "p": pytest.approx(p)}
    assert "## Paired comparison with erm, per environment" in (out / "report.md").read_text()


def test_second_run_reuses_everything(finished, monkeypatch):
    out, results = finished

    def fail(*args, **kwargs):
        raise AssertionError("a finished run was recomputed")

    monkeypatch.setattr(study, "train", fail)
    monkeypatch.setattr(study, "evaluate", fail)
    again = study.run_study(CONFIG, out, progress=False).to_dict()
    assert again["methods"]["erm"]["summary"] == results["methods"]["erm"]["summary"]


def test_interrupted_run_resumes_only_what_is_missing(finished, monkeypatch):
    out, results = finished
    run_dir = out / "runs" / "dynamic_birm" / "seed-1"
    pred_path = run_dir / "eval" / "predictions.jsonl"
    lines = pred_path.read_text().splitlines()
    pred_path.write_text("\n".join(lines[:-3]) + "\n")  # killed mid-evaluation
    (run_dir / "eval" / "metrics.json").unlink()
    calls = []
    real_train = study.train
    monkeypatch.setattr(
        study, "train", lambda cfg, d, **k: calls.append(d) or real_train(cfg, d, **k)
    )
    again = study.run_study(CONFIG, out, progress=False).to_dict()
    assert calls == [run_dir / "train"]
    assert len(pred_path.read_text().splitlines()) == len(lines)
    assert again["methods"]["dynamic_birm"]["runs"]["1"]["metrics"]["n"] == len(lines)


def test_changed_config_in_same_out_dir_is_an_error(finished, monkeypatch):
    out, _ = finished
    monkeypatch.setattr(
        study, "train", lambda *a, **k: pytest.fail("trained despite a hash mismatch")
    )
    changed = copy.deepcopy(CONFIG)
    changed["base"]["train"]["lr"] = 1e-3
    with pytest.raises(ConfigError, match="new --out"):
        study.run_study(changed, out, progress=False)


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda c: c.update(metrics=["bleu"]), "metrics"),
        (lambda c: c.update(seeds=[0, 0]), "seeds"),
        (lambda c: c["methods"].update(bad={"lambda": 1}), "methods.bad"),
        (lambda c: c["methods"].update(bad={"method": "nope"}), "methods.bad.method"),
        (lambda c: c["base"]["train"].update(lr="fast"), "train.lr"),
        (lambda c: c.update(extra=1), "unknown key"),
    ],
)
def test_bad_study_config_names_the_key(edit, key):
    cfg = copy.deepcopy(CONFIG)
    edit(cfg)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        study.study_runs(cfg)


def test_runs_compute_the_tabulated_metrics_and_cee_needs_a_judge():
    cfg = copy.deepcopy(CONFIG)
    del cfg["metrics"]  # default: the paper's chrF, BERTScore, CEE
    plan = study.study_runs(cfg)
    runs, metrics = plan.runs, plan.metrics
    assert metrics == ["chrf", "bertscore", "cee"]
    assert runs["erm"][0].eval.metrics == ["chrf", "exact", "bertscore"]
    assert study.absent_metrics(metrics, runs["erm"][0].eval.metrics) == {
        "cee": "no judge configured (set eval.judge to an OpenAI-compatible endpoint)"
    }
    cfg["base"]["eval"]["judge"] = {"base_url": "http://127.0.0.1:1/v1", "model": "judge"}
    runs = study.study_runs(cfg).runs
    assert runs["erm"][1].eval.metrics == ["chrf", "exact", "bertscore", "cee"]


def test_study_with_bertscore_and_cee_against_the_stub_judge(tmp_path, monkeypatch):
    """Table 1's three metrics end to end: BERTScore offline, CEE from the stub judge server."""
    from stub_judge_server import StubJudgeServer

    monkeypatch.setenv("STUDY_JUDGE_KEY", "k")
    cfg = copy.deepcopy(CONFIG)
    cfg.update(seeds=[0], metrics=["chrf", "bertscore", "cee"])
    cfg["base"]["eval"]["max_per_env"] = 2
    with StubJudgeServer() as server:
        cfg["base"]["eval"]["judge"] = {
            "base_url": server.url, "model": "stub", "api_key_env": "STUDY_JUDGE_KEY"
        }
        results = study.run_study(cfg, tmp_path, progress=False).to_dict()
    assert results["absent"] == {}
    assert set(results["paired"]["dynamic_birm"]) == {"exact", "cee"}  # the judge's 0/1 verdicts paired too
    distinct = 0
    for label, info in results["methods"].items():
        rows = [json.loads(line) for line in
                (tmp_path / "runs" / label / "seed-0" / "eval" / "predictions.jsonl").open()]
        distinct += len({(r["instruction"], r["target"], r["prediction"]) for r in rows})
        for group, ood in (("id", False), ("ood", True)):
            for metric in ("bertscore", "cee"):
                by_env: dict[str, list[float]] = {}
                for r in rows:
                    if r["ood"] == ood and r["scores"][metric] is not None:
                        by_env.setdefault(r["env"], []).append(r["scores"][metric])
                expected = np.mean([np.mean(v) for v in by_env.values()])
                assert info["summary"][group][metric]["mean"] == pytest.approx(expected)
        assert info["cee_counts"]["n_judged"] == len(rows)
    assert server.requests == 5 * distinct  # 5 prompts per distinct case, each run's cache
    report = (tmp_path / "report.md").read_text()
    assert "ID CEE" in report and "unreadable verdicts" in report and "Shown as —" not in report
