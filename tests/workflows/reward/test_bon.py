"""Best-of-N end to end: sampling from a local policy and from an OpenAI-compatible server,
resumable scoring, and the curves."""

from __future__ import annotations

import json

import pytest
from stub_openai_server import StubOpenAIServer

from robustvlm.cli import main
from robustvlm.config import JudgeConfig
from robustvlm.data.preferences import load_pairs
from robustvlm.workflows.reward.bon import n_grid
from robustvlm.workflows.reward.sample import Sampling, sample_candidates, server_messages


@pytest.fixture(scope="module")
def prefs(tmp_path_factory):
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("prefs")
    synthesize("preferences", root, seed=2, n_per_env=6)
    return root


class PolicyServer(StubOpenAIServer):
    """Answers a chat request with `n` numbered candidates (the stub records the request bodies)."""

    def choices_for(self, body: dict) -> list[str]:
        return [f"There are {i} shapes." for i in range(body.get("n", 1))]


def test_local_policy_sample_score_bon_and_resume(prefs, reward_folder, tmp_path, capsys):
    samples, scores = tmp_path / "samples", tmp_path / "scores"
    base = ["rm", "sample", "--data", str(prefs), "--out", str(samples), "--policy", "tiny:idefics3",
            "--k", "3", "--max-per-env", "1", "--max-new-tokens", "4"]
    assert main(base) == 0
    rows = [json.loads(line) for line in (samples / "candidates.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(len(r["candidates"]) == 3 for r in rows)
    assert {"id", "env", "query", "image", "reference", "candidates"} == set(rows[0])
    # a resumed run draws what the uninterrupted one did: the RNG is seeded per prompt
    (samples / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert main([*base, "--resume"]) == 0
    assert [json.loads(line) for line in (samples / "candidates.jsonl").read_text().splitlines()] == rows
    assert main(["rm", "score", "--candidates", str(samples / "candidates.jsonl"), "--model", str(reward_folder),
                 "--out", str(scores)]) == 0
    scored = [json.loads(line) for line in (scores / "scores.jsonl").read_text().splitlines()]
    assert len(scored) == 4 and all(len(s["rewards"]) == 3 and all(0 <= g <= 1 for g in s["gold"]) for s in scored)
    assert main(["rm", "bon", "--scores", f"rm={scores / 'scores.jsonl'}", "--out", str(tmp_path / "bon")]) == 0
    result = json.loads((tmp_path / "bon" / "bon.json").read_text())
    assert [r["n"] for r in result["rm"]["curve"]] == [1, 2, 3]
    assert result["rm"]["curve"][0]["mean"] == pytest.approx(
        sum(sum(s["gold"]) / 3 for s in scored) / 4)  # N = 1 is the average candidate
    assert (tmp_path / "bon" / "bon.png").is_file()
    assert main(["rm", "bon", "--scores", "nolabel", "--out", str(tmp_path / "b2")]) == 2
    assert n_grid(16) == [1, 2, 4, 8, 16] and n_grid(6) == [1, 2, 4, 6]


def test_server_sampling_through_the_judge_client(prefs, tmp_path, monkeypatch):
    monkeypatch.setenv("POLICY_KEY", "secret-value")
    pairs = [p for p in load_pairs(prefs, verbose=False).pairs if p.split == "test"][:2]
    with PolicyServer() as server:
        config = JudgeConfig(base_url=server.url, model="served-policy", api_key_env="POLICY_KEY")
        path = sample_candidates(pairs, tmp_path, sampling=Sampling(k=5, temperature=0.7, top_p=0.9),
                                 server=config, data={"path": str(prefs)}, progress=False)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["candidates"] for r in rows] == [[f"There are {i} shapes." for i in range(5)]] * 2
    body = server.bodies[0]
    assert (body["n"], body["temperature"], body["top_p"], body["model"]) == (5, 0.7, 0.9, "served-policy")
    assert body["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert server.authorization == ["Bearer secret-value"] * 2
    assert "secret-value" not in (tmp_path / "config.resolved.yaml").read_text()
    assert server_messages(pairs[0])[0]["content"][1] == {"type": "text", "text": pairs[0].query}
