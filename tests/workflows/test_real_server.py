"""A real OpenAI-compatible server this project did not write: Hugging Face's `transformers
serve` (the optional `serve` extra), bound to 127.0.0.1, serving a folder that `robustvlm train`
wrote, for two families. With the default decoding (greedy, no repetition penalty) `eval`,
`mc eval --method generate` and `icl eval` over the server give the local run's predictions,
record for record; `diagnose` completes with the semantic stage not measured (the server has no
prompt log-probabilities and refuses vLLM's fields with HTTP 422); `mc eval --method loglik`
stops after one request with one error line (issue 30).

One server per family for the module, started with a bounded lifetime (`timeout`) in a process
group of its own, the group killed at teardown (killing the `timeout` wrapper alone left the
server running). The weights are trained one step at a negligible learning rate, so the answers are
the varied, long token strings of an untrained model: identical answers are not a coincidence
of two empty replies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fastapi", reason="`transformers serve` needs the serve extra: pip install -e '.[serve]'")
pytest.importorskip("uvicorn", reason="`transformers serve` needs the serve extra: pip install -e '.[serve]'")

from robustvlm.cli import main  # noqa: E402
from robustvlm.multiple_choice.build import MCQuestion, write_questions  # noqa: E402
from robustvlm.workflows.measure.transformers_serve import served_folder  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("idefics3", "llava")
SERVER_LIFETIME_S = 900  # the server kills itself after this, whatever happens to the tests
FAST = ["--max-retries", "2", "--request-timeout", "120", "--no-cache"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """tasks records, the domains image folders, a 4-question MC benchmark and class descriptions."""
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("real_server_data")
    synthesize("tasks", root / "tasks", seed=0, n_per_env=1)
    synthesize("domains", root / "domains", seed=0, n_per_env=2)
    shapes = root / "domains" / "shapes"
    images = sorted(shapes.rglob("*.png"))[::7][:4]
    classes = sorted({p.parent.name for p in shapes.rglob("*.png")})
    write_questions([MCQuestion(id=f"q{i}", image=str(img), question="", options=[img.parent.name, "an ox", "a kite"],
                                answer=0, source="test", dataset_class=img.parent.name, prompt="What is shown?")
                     for i, img in enumerate(images)], root / "bench.jsonl")
    (root / "descriptions.yaml").write_text(yaml.safe_dump({c: f"a drawing of a {c}" for c in classes}))
    return {"tasks": root / "tasks" / "data.jsonl", "shapes": shapes, "bench": root / "bench.jsonl",
            "descriptions": root / "descriptions.yaml"}


@pytest.fixture(scope="module", params=FAMILIES)
def served(request, tmp_path_factory) -> tuple[str, str]:
    """(the folder `train` wrote, the API root of `transformers serve` serving it; the server's
    process group killed at teardown, `transformers_serve.served_folder`)."""
    family = request.param
    run = tmp_path_factory.mktemp(f"run_{family}") / "run"
    assert main(["train", str(ROOT / "configs" / "erm_tasks.yaml"), "--out", str(run), "train.steps=1",
                 "train.save_every=1", "train.lr=1e-6", "train.batch_size=2", "data.n_per_env=2",
                 f"model.name=tiny:{family}"]) == 0
    folder = str(run / "final")
    with served_folder(folder, run.parent / "serve.log", lifetime_s=SERVER_LIFETIME_S) as url:
        yield folder, url


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _by(rows: list[dict], *keys: str, value: str) -> dict:
    return {tuple(r[k] for k in keys): r[value] for r in rows}


def test_eval_over_the_server_predicts_what_the_local_model_predicts(served, data, tmp_path):
    folder, url = served
    common = ["--data", str(data["tasks"]), "--max-per-env", "1", "--max-new-tokens", "12"]  # CPU time
    assert main(["eval", "--model", folder, "--out", str(tmp_path / "local"), *common]) == 0
    assert main(["eval", "--model", f"openai:{folder}", "--base-url", url, "--out", str(tmp_path / "served"),
                 *common, *FAST]) == 0
    local = _by(_jsonl(tmp_path / "local" / "predictions.jsonl"), "id", value="prediction")
    remote = _by(_jsonl(tmp_path / "served" / "predictions.jsonl"), "id", value="prediction")
    assert len(local) == 10 and remote == local
    assert len(set(local.values())) > 1  # varied answers: agreement is not two empty strings
    resolved = yaml.safe_load((tmp_path / "served" / "config.resolved.yaml").read_text())
    assert resolved["eval"]["repetition_penalty"] == 1.0  # what was applied, on both sides
    usage = json.loads((tmp_path / "served" / "usage.json").read_text())
    assert usage["requests"] == 10 and usage["completion_tokens"] > 0


def test_mc_generate_and_icl_over_the_server_answer_as_locally(served, data, tmp_path):
    folder, url = served
    mc = ["mc", "eval", "--benchmark", str(data["bench"]), "--method", "generate"]
    assert main([*mc, "--model", folder, "--out", str(tmp_path / "mc_local")]) == 0
    assert main([*mc, "--model", f"openai:{folder}", "--base-url", url, "--out", str(tmp_path / "mc_served"),
                 *FAST]) == 0
    (local_mc,) = (tmp_path / "mc_local").glob("*/bench.jsonl")
    (served_mc,) = (tmp_path / "mc_served").glob("*/bench.jsonl")
    assert _by(_jsonl(served_mc), "id", value="response") == _by(_jsonl(local_mc), "id", value="response")
    icl = ["icl", "eval", "--data", str(data["shapes"]), "--shots", "0,1", "--demos", "random",
           "--n-per-env", "1"]
    assert main([*icl, "--model", folder, "--out", str(tmp_path / "icl_local")]) == 0
    assert main([*icl, "--model", f"openai:{folder}", "--base-url", url, "--out", str(tmp_path / "icl_served"),
                 *FAST]) == 0
    answers = {side: _by(_jsonl(tmp_path / f"icl_{side}" / "icl_predictions.jsonl"), "shots", "policy", "id",
                         value="answer") for side in ("local", "served")}
    assert len(answers["local"]) == 8 and answers["served"] == answers["local"]


def test_diagnose_completes_without_the_semantic_stage_and_loglik_stops_with_one_line(served, data, tmp_path, capsys):
    folder, url = served
    assert main(["diagnose", "--model", f"openai:{folder}", "--base-url", url, "--data", str(data["shapes"]),
                 "--out", str(tmp_path / "dg"), "--shots", "1", "--n-per-env", "1",
                 "--descriptions", str(data["descriptions"]), *FAST]) == 0
    rows = json.loads((tmp_path / "dg" / "diagnosis.json").read_text())["rows"]
    assert rows and all(r["semantic_acc"] is None and r["zero_shot_acc"] is not None for r in rows)
    capsys.readouterr()
    out = tmp_path / "ll"
    assert main(["mc", "eval", "--model", f"openai:{folder}", "--base-url", url, "--benchmark", str(data["bench"]),
                 "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err
    lines = [line for line in re.split(r"[\r\n]", err) if line.startswith("error:")]
    assert len(lines) == 1 and "HTTP 422" in lines[0] and "--method generate" in lines[0]
    assert "--resume" not in err and "Traceback" not in err
    (usage,) = out.glob("*/usage.json")
    assert json.loads(usage.read_text())["requests"] == 1
