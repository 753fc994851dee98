"""`--blind` on eval, mc eval (loglik and generate) and icl eval, local and served, and
`mc build --filter-blind`: the blind figures are the model's answers to text-only prompts (or
blank images), and the vision gain per environment is recomputed here from the per-question
files of the two runs."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from stub_openai_server import StubOpenAIServer, last_user_text

from robustvlm.cli import main
from robustvlm.model_ref import ModelRef
from robustvlm.models.blind import BLANK_IMAGE, TEXT_ONLY, text_only
from robustvlm.models.chat import ChatPrompt
from robustvlm.multiple_choice.build import MCQuestion, read_questions, write_questions
from robustvlm.multiple_choice.generative import option_continuations, question_prompt
from robustvlm.workflows import mc_eval as ev

FAST = ["--max-retries", "1", "--request-timeout", "5"]
OPTIONS = ["dog", "cat", "bird"]
ANSWERS = [1, 0, 1, 2, 1, 0]  # q0..q5; environments alternate park / street


def _png(i: int, size: tuple[int, int] = (24, 16)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (40 * i, 90, 200)).save(buf, format="PNG")
    return buf.getvalue()


def _bench(path: Path, *, black: bool = False) -> Path:
    questions = [MCQuestion(id=f"q{i}", image=_black() if black else _png(i + 1), question="",
                            options=OPTIONS, answer=a, source=("park", "street")[i % 2], dataset_class="x",
                            prompt="What is in this photo?") for i, a in enumerate(ANSWERS)]
    write_questions(questions, path, embed_images=True)
    return path


def _black() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 16)).save(buf, format="PNG")
    return buf.getvalue()


def _csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _images_sent(body: dict) -> int:
    return sum(p["type"] == "image_url" for m in body["messages"] if isinstance(m["content"], list) for p in m["content"])


def _expected_gain(normal: dict, blind: dict, env_of: dict) -> dict[str, float]:
    """env -> mean(normal) - mean(blind), computed directly, "all" pooled."""
    out: dict[str, list[float]] = defaultdict(list)
    for key, score in normal.items():
        for env in (env_of[key], "all"):
            out[env].append(score - blind[key])
    return {env: float(np.mean(v)) for env, v in out.items()}


def _check_gain_csv(path: Path, expected: dict[str, float], **labels: str) -> None:
    rows = [r for r in _csv(path) if all(r[k] == v for k, v in labels.items())]
    assert {r["env"]: pytest.approx(float(r["gain"])) for r in rows} == expected
    assert all(float(r["ci_lo"]) <= float(r["gain"]) + 1e-9 and float(r["gain"]) <= float(r["ci_hi"]) + 1e-9
               for r in rows)


def test_mc_eval_blind_over_a_server_generate_and_loglik(tmp_path, capsys):
    bench = _bench(tmp_path / "bench.jsonl")
    base = ["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), "--blind", *FAST]
    with StubOpenAIServer(answer=lambda body: "B" if _images_sent(body) else "A") as server:
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "gen"), "--method", "generate"]) == 0
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "ll")]) == 0
    assert "vision gain" in capsys.readouterr().out
    assert sorted({_images_sent(b) for b in server.bodies}) == [0, 1]  # blind requests carry no image
    env_of = {f"q{i}": ("park", "street")[i % 2] for i in range(6)}
    normal = {f"q{i}": float(a == 1) for i, a in enumerate(ANSWERS)}  # "B" with the image
    blind = {f"q{i}": float(a == 0) for i, a in enumerate(ANSWERS)}  # "A" without
    _check_gain_csv(tmp_path / "gen" / "vision_gain.csv", _expected_gain(normal, blind, env_of), method="generate")
    (row,) = _csv(tmp_path / "gen" / "blind" / "results.csv")
    assert float(row["accuracy"]) == pytest.approx(2 / 6)
    assert {r["blind_input"] for r in _csv(tmp_path / "gen" / "vision_gain.csv")} == {TEXT_ONLY}
    assert "vision gain" in (tmp_path / "gen" / "vision_gain.html").read_text()
    # the stub's option log-likelihoods do not depend on the image: no gain, from text-only requests
    blind_rows = _jsonl(tmp_path / "ll" / "blind" / "openai_m" / "bench.jsonl")
    normal_rows = _jsonl(tmp_path / "ll" / "openai_m" / "bench.jsonl")
    assert [r["scores"] for r in blind_rows] == [r["scores"] for r in normal_rows]
    _check_gain_csv(tmp_path / "ll" / "vision_gain.csv", {"park": 0.0, "street": 0.0, "all": 0.0})


@pytest.mark.slow
def test_mc_eval_blind_local_loglik_generate_and_a_dual_encoder(tmp_path, tiny_backends):
    bench = _bench(tmp_path / "bench.jsonl")
    out = tmp_path / "ll"
    ev.evaluate_models([ModelRef.tiny("idefics3"), ModelRef.tiny("clip")], [bench], out, blind=True)
    backend = tiny_backends("idefics3")
    for q, row in zip(read_questions(bench), _jsonl(out / "blind" / "tiny_idefics3" / "bench.jsonl")):
        messages, _ = question_prompt(q)  # asked directly, text only
        direct = backend.option_logliks(text_only(messages), option_continuations(q.options), images=[])
        assert row["scores"] == pytest.approx(direct.mean, abs=1e-5)
    # a dual encoder's blind run is its normal run on black images of the same size
    black = tmp_path / "black" / "bench.jsonl"
    black.parent.mkdir()
    ev.evaluate_models([ModelRef.tiny("clip")], [_bench(black, black=True)], tmp_path / "black_out")
    np.testing.assert_allclose([r["scores"] for r in _jsonl(out / "blind" / "tiny_clip" / "bench.jsonl")],
                               [r["scores"] for r in _jsonl(tmp_path / "black_out" / "tiny_clip" / "bench.jsonl")],
                               atol=1e-5)
    gains = _csv(out / "vision_gain.csv")
    assert {(r["model"], r["blind_input"]) for r in gains} == {("tiny:idefics3", TEXT_ONLY), ("tiny:clip", BLANK_IMAGE)}
    env_of = {f"q{i}": ("park", "street")[i % 2] for i in range(6)}
    for model in ("tiny:idefics3", "tiny:clip"):
        slug = ev.model_slug(model)
        normal = {r["id"]: float(r["correct"]) for r in _jsonl(out / slug / "bench.jsonl")}
        blind = {r["id"]: float(r["correct"]) for r in _jsonl(out / "blind" / slug / "bench.jsonl")}
        _check_gain_csv(out / "vision_gain.csv", _expected_gain(normal, blind, env_of), model=model)
    gen = tmp_path / "gen"
    ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], gen, method="generate", max_new_tokens=2, blind=True)
    prompts = [question_prompt(q) for q in read_questions(bench)]
    direct_replies = backend.generate_chats([ChatPrompt(text_only(m), []) for m, _ in prompts], max_new_tokens=2,
                                            repetition_penalty=1.0)
    assert [r["response"] for r in _jsonl(gen / "blind" / "tiny_idefics3" / "bench.jsonl")] == direct_replies


def test_a_finished_run_gets_its_blind_half_with_resume(tmp_path):
    bench = _bench(tmp_path / "bench.jsonl")
    with StubOpenAIServer(answer=lambda body: "B" if _images_sent(body) else "A") as server:
        base = ["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), "--base-url", server.url, "--method",
                "generate", "--out", str(tmp_path / "out"), *FAST]
        assert main(base) == 0
        sent = server.requests
        assert main([*base, "--blind", "--resume"]) == 0
        assert server.requests - sent == 6  # only the blind questions are asked
    assert (tmp_path / "out" / "vision_gain.csv").is_file()


def test_eval_blind_over_a_server(tasks_data, tmp_path):
    with StubOpenAIServer(answer=lambda body: ("echo: " + last_user_text(body)) if _images_sent(body) else "no idea") \
            as server:
        assert main(["eval", "--model", "openai:m", "--base-url", server.url, "--data", str(tasks_data), "--out",
                     str(tmp_path / "out"), "--blind", "--max-per-env", "2", *FAST]) == 0
    blind_rows = _jsonl(tmp_path / "out" / "blind" / "predictions.jsonl")
    assert {r["prediction"] for r in blind_rows} == {"no idea"}
    normal = {r["id"]: r for r in _jsonl(tmp_path / "out" / "predictions.jsonl")}
    env_of = {i: r["env"] for i, r in normal.items()}
    for metric in ("chrf", "exact"):
        expected = _expected_gain({i: r["scores"][metric] for i, r in normal.items()},
                                  {r["id"]: r["scores"][metric] for r in blind_rows}, env_of)
        _check_gain_csv(tmp_path / "out" / "vision_gain.csv", expected, metric=metric)


@pytest.mark.slow
def test_eval_blind_local(tasks_data, tmp_path):
    assert main(["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(tmp_path / "out"),
                 "--max-per-env", "1", "--max-new-tokens", "2", "--blind"]) == 0
    normal = {r["id"]: r for r in _jsonl(tmp_path / "out" / "predictions.jsonl")}
    blind = {r["id"]: r["scores"]["chrf"] for r in _jsonl(tmp_path / "out" / "blind" / "predictions.jsonl")}
    expected = _expected_gain({i: r["scores"]["chrf"] for i, r in normal.items()}, blind,
                              {i: r["env"] for i, r in normal.items()})
    _check_gain_csv(tmp_path / "out" / "vision_gain.csv", expected, metric="chrf")


def _icl_gain(out: Path) -> dict[tuple[str, str], dict[str, float]]:
    normal = {(r["shots"], r["policy"], r["id"]): r for r in _jsonl(out / "icl_predictions.jsonl")}
    blind = {(r["shots"], r["policy"], r["id"]): r for r in _jsonl(out / "blind" / "icl_predictions.jsonl")}
    cells = {(k, p) for k, p, _ in normal}
    return {(str(k), p): _expected_gain({i: float(r["correct"]) for (kk, pp, i), r in normal.items() if (kk, pp) == (k, p)},
                                        {i: float(r["correct"]) for (kk, pp, i), r in blind.items() if (kk, pp) == (k, p)},
                                        {i: r["domain"] for (kk, pp, i), r in normal.items()})
            for k, p in cells}


def test_icl_eval_blind_over_a_server_removes_every_image(domains_suite, tmp_path):
    with StubOpenAIServer(answer=lambda body: "circle" if _images_sent(body) else "square") as server:
        assert main(["icl", "eval", "--model", "openai:m", "--base-url", server.url, "--data",
                     str(domains_suite / "shapes"), "--out", str(tmp_path / "icl"), "--shots", "0,2",
                     "--demos", "random", "--n-per-env", "2", "--blind", *FAST]) == 0
    assert sorted({_images_sent(b) for b in server.bodies}) == [0, 1, 3]  # blind: neither query nor demo images
    blind_answers = {r["answer"] for r in _jsonl(tmp_path / "icl" / "blind" / "icl_predictions.jsonl")}
    assert blind_answers == {"square"}
    for (k, policy), expected in _icl_gain(tmp_path / "icl").items():
        _check_gain_csv(tmp_path / "icl" / "vision_gain.csv", expected, shots=k, policy=policy)


@pytest.mark.slow
def test_icl_eval_blind_local(domains_suite, tmp_path):
    assert main(["icl", "eval", "--model", "tiny:idefics3", "--data", str(domains_suite / "shapes"), "--out",
                 str(tmp_path / "icl"), "--shots", "0,1", "--demos", "random", "--n-per-env", "1",
                 "--max-new-tokens", "2", "--blind"]) == 0
    for (k, policy), expected in _icl_gain(tmp_path / "icl").items():
        _check_gain_csv(tmp_path / "icl" / "vision_gain.csv", expected, shots=k, policy=policy)


def _letter_of(option: str, text: str) -> str:
    return next(line[0] for line in text.splitlines() if line[1:] == f". {option}")


def test_mc_build_filter_blind_drops_and_counts(domains_suite, tmp_path, capsys):
    data = str(domains_suite / "shapes")
    build = ["mc", "build", "--data", data, "--k", "3", "--n", "16", "--seed", "1"]
    assert main([*build, "--out", str(tmp_path / "all.jsonl")]) == 0
    # blind, the stub picks "circle" whenever it is offered: right in every rotation exactly when it is the answer
    with StubOpenAIServer(answer=lambda body: _letter_of("circle", last_user_text(body))
                          if "circle" in last_user_text(body) and not _images_sent(body) else "Z") as server:
        assert main([*build, "--out", str(tmp_path / "kept.jsonl"), "--filter-blind", "openai:m", "--filter-method",
                     "generate", "--base-url", server.url, *FAST]) == 0
    assert {_images_sent(b) for b in server.bodies} == {0}
    everything = read_questions(tmp_path / "all.jsonl")
    circles = [q.id for q in everything if q.answer_class == "circle"]
    assert circles  # the check below is not vacuous
    assert [q.id for q in read_questions(tmp_path / "kept.jsonl")] == [q.id for q in everything if q.id not in circles]
    report = json.loads((tmp_path / "kept.blind_filter.json").read_text())
    assert (report["questions"], report["dropped"], report["dropped_ids"]) == (16, len(circles), circles)
    assert sum(e["dropped"] for e in report["per_env"].values()) == len(circles)
    assert f"dropped {len(circles)} of 16 questions" in capsys.readouterr().out


@pytest.mark.slow
def test_mc_build_filter_blind_local_matches_blind_circular_scoring(domains_suite, tmp_path):
    build = ["mc", "build", "--data", str(domains_suite / "shapes"), "--k", "3", "--n", "6"]
    assert main([*build, "--out", str(tmp_path / "all.jsonl")]) == 0
    assert main([*build, "--out", str(tmp_path / "kept.jsonl"), "--filter-blind", "tiny:clip"]) == 0
    ev.evaluate_models([ModelRef.tiny("clip")], [tmp_path / "all.jsonl"], tmp_path / "scored", circular=True, blind=True)
    rotations = defaultdict(list)
    for r in _jsonl(tmp_path / "scored" / "blind" / "tiny_clip" / "all.jsonl"):
        rotations[r["id"]].append(r["correct"])
    answered = sorted(i for i, right in rotations.items() if all(right))
    report = json.loads((tmp_path / "kept.blind_filter.json").read_text())
    assert sorted(report["dropped_ids"]) == answered and report["blind_input"] == BLANK_IMAGE
    assert len(read_questions(tmp_path / "kept.jsonl")) == 6 - len(answered)
