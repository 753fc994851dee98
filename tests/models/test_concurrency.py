"""Adaptive concurrency (`models.concurrency`): the AIMD limit alone, against simulated servers
(a discrete-event clock: no threads, no sleeping), and the thread gate with a served model
against a stub server that refuses above a capacity."""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import threading

import pytest
from stub_openai_server import StubOpenAIServer

from robustvlm.cli import main
from robustvlm.cli.options import add_served_options, served
from robustvlm.config import ServedConfig
from robustvlm.model_ref import ModelRef
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.concurrency import AIMD, AdaptiveLimit
from robustvlm.models.served import ServedModel


def test_slow_start_doubles_then_one_more_per_round_trip():
    control = AIMD(64)
    assert control.allowed == 8
    for _ in range(8):  # one round trip of 8 replies: slow start adds one per reply
        control.on_reply(0.1)
    assert control.allowed == 16
    control.on_overload(epoch=0)
    assert control.limit == 16 * 0.9 and control.allowed == 14 and not control.slow_start
    for _ in range(14):  # a round trip of 14 replies adds one, in steps of 1/limit
        control.on_reply(0.1)
    assert 16 * 0.9 + 0.9 < control.limit <= 16 * 0.9 + 1


def test_one_burst_of_refusals_is_one_decrease():
    control = AIMD(64, start=20)
    sent_before = control.epoch
    for _ in range(10):  # ten refusals of requests sent before the first decrease
        control.on_overload(sent_before)
    assert control.limit == 20 * 0.9 and control.epoch == 1
    control.on_overload(control.epoch)  # a request sent after it: a new sign of overload
    assert control.limit == 20 * 0.9 * 0.9


def test_limit_stays_between_one_and_the_ceiling():
    control = AIMD(10)
    for _ in range(1000):
        control.on_reply(0.1)
    assert control.limit == 10.0 and control.allowed == 10
    for _ in range(100):
        control.on_overload(control.epoch)
    assert control.limit == 1.0 and control.allowed == 1 and control.at_floor
    with pytest.raises(ValueError):
        AIMD(0)


def test_slow_replies_hold_the_limit():
    control = AIMD(64, smoothing=1.0)  # the mean is the last reply: one step per reply
    control.on_reply(1.0)
    assert control.allowed == 9
    control.on_reply(2.5)  # more than twice the fastest: the server queues
    control.on_reply(2.5)
    assert control.allowed == 9
    assert not control.slow_start  # one reply that slow ends slow start
    control.on_reply(1.5)  # fast again: one more per round trip
    assert control.limit == 9 + 1 / 9


def simulate(control: AIMD, *, capacity: int, latency_s: float, horizon_s: float, queueing: bool = False):
    """Requests sent as fast as `control` allows to a server of `capacity` requests in flight
    that answers each after `latency_s`; above capacity it refuses at once (HTTP 429) or, with
    `queueing`, shares its capacity (each answer takes latency x in-flight / capacity). A
    refused request is sent again. Returns (answers per second, highest limit after the first
    second)."""
    now, seq, admitted, answered, highest = 0.0, itertools.count(), 0, 0, 0
    pending: list = []  # (finish time, seq, sent at, epoch, answered?)
    while now < horizon_s:
        while len(pending) < control.allowed:
            refused = not queueing and admitted >= capacity
            if not refused:
                admitted += 1
            took = 1e-4 if refused else latency_s * max(1.0, admitted / capacity if queueing else 1.0)
            heapq.heappush(pending, (now + took, next(seq), now, control.epoch, not refused))
        now, _, sent, epoch, ok = heapq.heappop(pending)
        if ok:
            admitted -= 1
            answered += 1
            control.on_reply(now - sent)
        else:
            control.on_overload(epoch)
        if now > 1.0:
            highest = max(highest, control.allowed)
    return answered / now, highest


@pytest.mark.parametrize("capacity", [3, 12, 40])
def test_against_a_refusing_server_auto_gets_within_ten_percent_of_its_capacity(capacity):
    best = capacity / 0.05
    rate, _ = simulate(AIMD(64), capacity=capacity, latency_s=0.05, horizon_s=60.0)
    assert 0.9 * best <= rate <= best


def test_against_a_queueing_server_the_limit_stops_growing():
    control = AIMD(1000)
    rate, highest = simulate(control, capacity=12, latency_s=0.05, horizon_s=60.0, queueing=True)
    assert rate >= 0.9 * 12 / 0.05
    # replies past twice the fastest end slow start (overshooting by one round trip's growth) and
    # then hold the limit: far below the ceiling, where a fixed 1000 would queue 1000 requests
    assert highest <= 5 * 12 and control.allowed == highest


def test_served_model_with_auto_concurrency_answers_everything_within_capacity():
    prompts = [ChatPrompt([{"role": "user", "content": f"q{i}"}], record=str(i)) for i in range(120)]
    with StubOpenAIServer(latency_s=0.02, capacity=6, lifetime_s=60) as stub:
        config = ServedConfig(base_url=stub.url, max_concurrency=32, adaptive_concurrency=True, cache=False,
                              backoff_s=5.0)
        model = ServedModel(ModelRef.parse("openai:m"), config)
        answers = model.generate(prompts, max_new_tokens=4)
    assert answers == [f"echo: q{i}" for i in range(120)]
    assert stub.refused > 0 and stub.max_in_flight == 6  # it probed past the capacity and backed off
    limit = model.client.limit
    assert limit is not None and limit.control.epoch > 0 and limit.in_flight == 0
    assert model.usage["requests"] == 120 + stub.refused  # every attempt counts, refused ones too


def test_the_gate_never_lets_more_than_the_limit_through():
    control = AIMD(8, start=3)
    limit, lock, inside, most = AdaptiveLimit(control, clock=lambda: 0.0), threading.Lock(), [0], [0]
    control.on_reply = lambda seconds: None  # hold the limit at 3  # type: ignore[method-assign]

    def work():
        with limit.slot() as attempt:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            threading.Event().wait(0.01)
            with lock:
                inside[0] -= 1
            attempt.answered = True

    threads = [threading.Thread(target=work) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 3 and limit.in_flight == 0 and not math.isnan(control.limit)


def test_concurrency_options_of_the_commands(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_served_options(parser)
    url = ["--base-url", "http://127.0.0.1:9/v1"]
    auto = served(parser.parse_args([*url, "--concurrency", "auto"]))
    assert auto.adaptive_concurrency and auto.max_concurrency == 64
    assert served(parser.parse_args([*url, "--concurrency", "auto", "--max-concurrency", "20"])).max_concurrency == 20
    fixed = served(parser.parse_args([*url, "--concurrency", "4"]))
    assert not fixed.adaptive_concurrency and fixed.max_concurrency == 4
    assert served(parser.parse_args(url)).max_concurrency == 8
    with pytest.raises(SystemExit):
        parser.parse_args([*url, "--concurrency", "fast"])
    assert "'fast' is neither an integer >= 1 nor 'auto'" in capsys.readouterr().err
    code = main(["mc", "eval", "--model", "openai:m", "--benchmark", str(tmp_path), "--out", str(tmp_path / "out"),
                 "--method", "generate", *url, "--max-concurrency", "20"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-concurrency is the ceiling of --concurrency auto" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_eval_with_auto_concurrency_answers_every_record_of_a_rate_limited_server(tmp_path):
    from robustvlm.data.synth import synthesize

    synthesize("tasks", tmp_path / "tasks", seed=0, n_per_env=3)
    with StubOpenAIServer(latency_s=0.02, capacity=2, lifetime_s=120) as stub:
        code = main(["eval", "--model", "openai:stub-vlm", "--base-url", stub.url, "--data",
                     str(tmp_path / "tasks" / "data.jsonl"), "--out", str(tmp_path / "run"), "--batch-size", "16",
                     "--max-new-tokens", "4", "--concurrency", "auto"])
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert code == 0 and rows and all(r["prediction"] == "echo: " + r["instruction"] for r in rows)
    # it started at 8: many refusals on the way down to 2, none counted against the 5 retries
    assert stub.max_in_flight == 2 and stub.refused > 5
