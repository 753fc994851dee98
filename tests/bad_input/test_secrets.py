"""Secrets (issues 17.5 and 29.1-4): a key is read from the environment only. A judge config that
holds one inline, in its URL, or instead of a variable's name is refused without echoing it; so
is every URL option given a key in its user-info, its query string, its path or a scheme-less
`user:key@host` (and a URL that is not http/https at all is refused at once); a key pasted into
any field of any config is never echoed by an error nor written to a run folder; and a run with
a key in the environment writes it nowhere. Kinds of bad input covered: 65 (4 judge-config
cases, the `--server` URL, 7 URL options x 4 places of a key in the URL, 4 URLs that are not
http/https, 5 commands given a key as `--api-key-env`, a key as a judge's `api_key_env` and as
its `timeout_s`, a key given to a numeric option, 9 config schemas with a key planted in every
field, 4 commands given a key as their method, model or data, data check of a key-like path, missing
and holding a bad record, a key-like model name or path in train, eval and mc eval (never sent to
the hub), an unreachable hub (issue 45.4-5))."""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from bad_input import expect_clean_failure, run_cli
from pydantic import BaseModel
from stub_judge_server import StubJudgeServer

from robustvlm.cli import main

SECRET = "sk-TOPSECRET-4242"
#: The shapes a pasted key takes: an OpenAI-style key, a Hugging Face token (letters, digits and
#: `_` only: it could pass for a variable's name), and a long random string with no prefix.
KEYS = ("sk-proj-Q7dK2mX9pL4vR8tW3nB6yH1cF5", "hf_PROBESECRETqWeRtY12345abcdEF", "aZ3kQ9mX2pL7vR4tW8nB5yH1cF6dG0sJ")
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "erm_tasks.yaml"


def _judge_yaml(folder: Path, body: str) -> Path:
    path = folder / "judge.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def _assert_written_nowhere(key: str, folder: Path, printed: str, *, inputs: tuple[Path, ...] = ()) -> None:
    """`key` is in no file below `folder` (but the inputs that hold it) and not in `printed`."""
    assert key not in printed, printed
    for path in folder.rglob("*"):
        if path.is_file() and path not in inputs:
            assert key.encode() not in path.read_bytes(), f"the key was written to {path}"


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\napi_key: {SECRET}\n", ["api_key", "environment variable"]),
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\ntoken: {SECRET}\n", ["token"]),
        (f"base_url: http://bob:{SECRET}@127.0.0.1:9/v1\nmodel: j\n", ["base_url", "credentials"]),
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\napi_key_env: {SECRET}\n", ["api_key_env", "NAME"]),
    ],
    ids=["inline-api-key", "inline-token", "credentials-in-url", "key-as-variable-name"],
)
def test_a_secret_in_a_judge_config_is_refused_without_echoing_it(body, mentions, tasks_data, tmp_path, capsys):
    judge = _judge_yaml(tmp_path, body)
    line = expect_clean_failure(
        ["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(tmp_path / "ev"),
         "--metrics", "chrf,cee", "--judge", str(judge)],
        capsys, mentions=[str(judge), *mentions],
    )
    assert SECRET not in line
    assert not (tmp_path / "ev").exists()


def test_a_server_url_with_credentials_is_refused_without_echoing_it(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("")
    line = expect_clean_failure(
        ["rm", "sample", "--data", str(pairs), "--out", str(tmp_path / "s"),
         "--base-url", f"http://bob:{SECRET}@127.0.0.1:9/v1", "--server-model", "m"],
        capsys, mentions=["--base-url", "credentials"],
    )
    assert SECRET not in line


# ------------------------------------------------- every URL option, every way to put a key in it


def _inputs(t: Path, tasks_data: Path, domains_suite: Path) -> dict[str, str]:
    bench = t / "q.jsonl"
    bench.write_text(json.dumps({"id": "q", "image": "a.png", "question": "?", "options": ["a", "b"], "answer": 1,
                                 "source": "s", "dataset_class": "b", "prompt": "?"}) + "\n")
    candidates = t / "candidates.jsonl"
    candidates.write_text("")
    return {"data": str(tasks_data), "bench": str(bench), "images": str(domains_suite / "shapes"),
            "candidates": str(candidates), "out": str(t / "out")}


def _served(command: list[str], data_option: str, data: str):
    return lambda i, url: [*command, "--model", "openai:m", data_option, i[data], "--out", i["out"], "--base-url", url]


#: {URL option: (mentions, argv of a command given the URL)}; a judge's URL goes in a YAML file.
URL_OPTIONS = {
    "eval --base-url": ("base_url", _served(["eval"], "--data", "data")),
    "mc eval --base-url": ("base_url", _served(["mc", "eval"], "--benchmark", "bench")),
    "icl eval --base-url": ("base_url", _served(["icl", "eval"], "--data", "images")),
    "diagnose --base-url": ("base_url", _served(["diagnose"], "--data", "images")),
    "rm sample --base-url": ("--base-url", lambda i, url: ["rm", "sample", "--data", i["data"], "--out", i["out"],
                                                       "--base-url", url, "--server-model", "m"]),
    "eval --judge": ("base_url", lambda i, url: ["eval", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1",
                                                 "--data", i["data"], "--out", i["out"], "--metrics", "chrf,cee",
                                                 "--judge", i["judge"]]),
    "rm score --judge": ("base_url", lambda i, url: ["rm", "score", "--candidates", i["candidates"], "--model", "m",
                                                     "--out", i["out"], "--gold", "judge", "--judge", i["judge"]]),
}
#: Ways a key ends up in a URL (issue 29.1: a query parameter; 29.2: user-info without a scheme).
KEY_IN_URL = {
    "user-info": "http://bob:{key}@127.0.0.1:9/v1",
    "query-parameter": "http://127.0.0.1:9/v1?api_key={key}",
    "scheme-less-user-info": "u:{key}@127.0.0.1:9/v1",
    "key-in-path": "http://127.0.0.1:9/{key}/v1",
}


def _run_with_url(option: str, url: str, tmp_path: Path, tasks_data: Path, domains_suite: Path, capsys,
                  mentions: list[str]) -> str:
    inputs = _inputs(tmp_path, tasks_data, domains_suite)
    judge = _judge_yaml(tmp_path, f"base_url: '{url}'\nmodel: j\n")
    inputs["judge"] = str(judge)
    mention, argv = URL_OPTIONS[option]
    line = expect_clean_failure(argv(inputs, url), capsys, mentions=[mention, *mentions])
    assert not Path(inputs["out"]).exists(), "the refused command wrote its output folder"
    return line


@pytest.mark.parametrize("form", list(KEY_IN_URL))
@pytest.mark.parametrize("option", list(URL_OPTIONS))
def test_a_key_in_any_url_is_refused_at_once_and_written_nowhere(option, form, tmp_path, tasks_data, domains_suite,
                                                                 capsys):
    key = KEYS[0]
    line = _run_with_url(option, KEY_IN_URL[form].format(key=key), tmp_path, tasks_data, domains_suite, capsys,
                         ["credentials", "environment variable"])
    _assert_written_nowhere(key, tmp_path, line, inputs=(tmp_path / "judge.yaml",))


@pytest.mark.parametrize(("url", "option"), [
    ("notaurl", "eval --base-url"),  # issue 29.15: `ValueError: unknown url type` was a traceback
    ("ftp://127.0.0.1:9/v1", "eval --base-url"),  # issue 29.23: was retried for 38 s
    ("ftp://127.0.0.1:9/v1", "eval --judge"),
    ("http://127.0.0.1:notaport/v1", "rm sample --base-url"),
])
def test_a_url_that_is_not_http_is_refused_at_once(url, option, tmp_path, tasks_data, domains_suite, capsys):
    _run_with_url(option, url, tmp_path, tasks_data, domains_suite, capsys, [])


# ------------------------------------------------------------- a key where a name or number goes


@pytest.mark.parametrize("option", ["eval --base-url", "mc eval --base-url", "icl eval --base-url",
                                    "diagnose --base-url", "rm sample --base-url"])
def test_a_key_given_as_the_variable_name_is_refused_without_echoing_it(option, tmp_path, tasks_data,
                                                                       domains_suite, capsys, monkeypatch):
    """Issue 29.3: a Hugging Face token is made of letters, digits and `_` like a variable's name;
    it was stored in config.resolved.yaml and run.lock, and printed when the variable was unset."""
    key = KEYS[1]
    monkeypatch.delenv(key, raising=False)
    inputs = _inputs(tmp_path, tasks_data, domains_suite)
    argv = [*URL_OPTIONS[option][1](inputs, "http://127.0.0.1:9/v1"), "--api-key-env", key]
    line = expect_clean_failure(argv, capsys, mentions=["api_key_env", "NAME"])
    _assert_written_nowhere(key, tmp_path, line)
    assert not Path(inputs["out"]).exists()


@pytest.mark.parametrize(("field", "mentions"), [
    ("api_key_env", ["api_key_env", "NAME"]),  # issue 29.3
    ("timeout_s", ["timeout_s", "valid number"]),  # issue 29.4: the error echoed the key
])
def test_a_key_in_a_judge_field_is_never_echoed(field, mentions, tasks_data, tmp_path, capsys):
    key = KEYS[1]
    judge = _judge_yaml(tmp_path, f"base_url: http://127.0.0.1:9/v1\nmodel: j\n{field}: {key}\n")
    line = expect_clean_failure(
        ["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(tmp_path / "ev"),
         "--metrics", "chrf,cee", "--judge", str(judge)], capsys, mentions=[str(judge), *mentions])
    _assert_written_nowhere(key, tmp_path, line, inputs=(judge,))


def test_a_key_given_to_a_numeric_option_is_not_echoed(tasks_data, tmp_path, capsys):
    key = KEYS[0]
    line = expect_clean_failure(
        ["eval", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(tasks_data),
         "--out", str(tmp_path / "ev"), "--request-timeout", key], capsys, mentions=["--request-timeout"])
    _assert_written_nowhere(key, tmp_path, line)


# --------------------------------------------------------- a key planted in every field of every config


def _schemas() -> dict[str, tuple[type[BaseModel], dict[str, Any]]]:
    """{name: (config schema, a valid raw config of it)}: every config a run writes or reads."""
    from robustvlm.config import (
        EmbedRunConfig,
        JudgeConfig,
        RewardConfig,
        RunConfig,
        ServedConfig,
        TaskSignalConfig,
    )
    from robustvlm.workflows.plan_configs import MatrixConfig, StudyConfig, SweepConfig

    run = {"data": {"benchmark": "tasks"}}
    return {
        "RunConfig": (RunConfig, run),
        "RewardConfig": (RewardConfig, {"data": {"benchmark": "preferences"}}),
        "EmbedRunConfig": (EmbedRunConfig, run),
        "TaskSignalConfig": (TaskSignalConfig, {}),
        "JudgeConfig": (JudgeConfig, {"base_url": "http://127.0.0.1:9/v1", "model": "j"}),
        "ServedConfig": (ServedConfig, {"base_url": "http://127.0.0.1:9/v1"}),
        "StudyConfig": (StudyConfig, {"base": run, "methods": {"erm": {"method": "erm"}}}),
        "SweepConfig": (SweepConfig, {"base": run, "methods": {"erm": {"method": "erm"}}}),
        "MatrixConfig": (MatrixConfig, {"base": {"data": {"benchmark": "preferences"}},
                                        "losses": {"std": {"loss": "standard"}}}),
    }


#: Valid contents of sections that are absent by default (so that a key can be planted in each field).
SECTION_DEFAULTS = {"JudgeConfig": {"base_url": "http://127.0.0.1:9/v1", "model": "j"}, "SplitSizes": {"test": 1}}


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field's annotation holds directly or in an Optional, else None."""
    for tp in (annotation, *typing.get_args(annotation)):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
    return None


def _plants(schema: type[BaseModel], raw: dict[str, Any], key: str, prefix: tuple[str, ...] = ()):
    """(dotted field, raw config with `key` in that field) for every field of `schema` and of its
    sections: the key itself, a list of it, or a mapping that holds it under a credential's name."""
    for name, field in schema.model_fields.items():
        path = (*prefix, name)
        section = _model_in(field.annotation)
        if section is not None:
            inner = _get(raw, path) or SECTION_DEFAULTS.get(section.__name__, {})
            yield from _plants(section, _set(raw, path, inner), key, path)
            continue
        origin = typing.get_origin(field.annotation)
        args = typing.get_args(field.annotation)
        if origin is dict or dict in args:
            value: Any = {"api_key": key, "note": key}
        elif origin is list:
            value = [key]
        else:
            value = key
        yield ".".join(path), _set(raw, path, value)


def _get(raw: dict, path: tuple[str, ...]) -> Any:
    for part in path:
        raw = raw.get(part) if isinstance(raw, dict) else None
    return raw


def _set(raw: dict, path: tuple[str, ...], value: Any) -> dict:
    out = copy.deepcopy(raw)
    node = out
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("name", list(_schemas()))
def test_a_key_planted_in_any_config_field_is_never_echoed_or_written(name, tmp_path):
    """Every field of every config, with each shape of key: an error that refuses it never shows
    it; a config that takes it (a string field) writes it neither to config.resolved.yaml nor to
    run.lock, and sends it to no experiment tracker."""
    from robustvlm.config import validate_config
    from robustvlm.errors import ConfigError
    from robustvlm.runs import claim_run_folder, release_run_folders, resolved_settings

    schema, base = _schemas()[name]
    planted = taken = 0
    for key in KEYS:
        for field, raw in _plants(schema, base, key):
            planted += 1
            try:
                cfg = validate_config(raw, "planted.yaml", schema)
            except ConfigError as err:
                assert key not in str(err), f"{field}: the error echoes the key: {err}"
                continue
            taken += 1
            assert key not in json.dumps(resolved_settings(cfg)), f"{field}: the key goes to the trackers"
            run = tmp_path / f"run{taken}"
            claim_run_folder(run, cfg, command="test", resume=False)
            release_run_folders()
            _assert_written_nowhere(key, run, "")
    assert planted >= 3 * len(schema.model_fields)
    if name not in ("ServedConfig", "JudgeConfig"):
        assert taken > 0  # free-text fields take any string: what is written is redacted


@pytest.mark.parametrize("argv", [
    ["train", str(CONFIG), "--out", "{out}", "method={key}"],
    ["train", str(CONFIG), "--out", "{out}", "data.benchmark=null", "data.path={key}"],
    ["eval", "--model", "{key}", "--data", "{data}", "--out", "{out}"],
    ["eval", "--model", "tiny:idefics3", "--data", "{key}", "--out", "{out}"],
], ids=["train-method", "train-data", "eval-model", "eval-data"])
def test_a_key_given_as_a_model_or_data_is_not_echoed(argv, tasks_data, tmp_path, capsys):
    key = KEYS[2]
    out = tmp_path / "out"
    filled = [a.format(key=key, out=out, data=tasks_data) for a in argv]
    code = run_cli(filled)
    printed = "".join(capsys.readouterr())
    assert code == 2, printed
    assert "Traceback" not in printed
    _assert_written_nowhere(key, tmp_path, printed)


def test_a_key_in_the_environment_is_written_nowhere(tasks_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    out = tmp_path / "ev"
    with StubJudgeServer() as stub:
        judge = _judge_yaml(tmp_path, f"base_url: {stub.url}\nmodel: j\napi_key_env: JUDGE_KEY\n")
        code = main(["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(out),
                     "--max-per-env", "1", "--max-new-tokens", "4", "--metrics", "chrf,cee",
                     "--judge", str(judge)])
    printed = "".join(capsys.readouterr())
    assert code == 0, printed
    assert stub.authorization and all(a == f"Bearer {SECRET}" for a in stub.authorization)  # it was used
    assert SECRET not in printed
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "metrics.json" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), f"the key was written to {path}"


@pytest.mark.parametrize("where", ["missing-input", "bad-record"])
def test_data_check_masks_a_key_like_path(where, tmp_path, capsys):
    """Issue 45.5: `data check d/sk-test-...` printed the key-like path unmasked."""
    folder = tmp_path / KEYS[0]
    folder.mkdir()
    records = folder / "records.jsonl"
    if where == "bad-record":
        records.write_text('{"id": "a"}\n', encoding="utf-8")
    run_cli(["data", "check", str(records)])
    printed = "".join(capsys.readouterr())
    assert "Traceback" not in printed and "records.jsonl" in printed, printed
    _assert_written_nowhere(KEYS[0], tmp_path, printed)


# ------------------------------------------------------------- a key as a model name never reaches the hub


@pytest.fixture
def hub_calls(monkeypatch) -> list[str]:
    """The names every transformers loader is asked for (none of them reach the network: the
    tests run with HF_HUB_OFFLINE, and each loader here refuses at once)."""
    import transformers

    asked: list[str] = []

    def refuse(name, *args, **kwargs):
        asked.append(str(name))
        raise OSError(f"{name}: not loaded in this test")

    for loader in ("AutoConfig", "AutoModel", "AutoModelForImageTextToText", "AutoProcessor", "AutoTokenizer"):
        monkeypatch.setattr(getattr(transformers, loader), "from_pretrained", refuse)
    return asked


@pytest.mark.parametrize("argv", [
    ["train", str(CONFIG), "--out", "{out}", "train.steps=1", "model.name={key}"],
    ["train", str(CONFIG), "--out", "{out}", "train.steps=1", "model.name=runs/{key}/final"],
    ["eval", "--model", "{key}", "--data", "{data}", "--out", "{out}"],
    ["mc", "eval", "--model", "{key}", "--bench", "{data}", "--out", "{out}"],
], ids=["train-model-name", "train-model-path", "eval-model", "mc-eval-model"])
def test_a_key_like_model_name_is_never_sent_to_the_hub(argv, hub_calls, tasks_data, tmp_path, capsys):
    """Issue 45.4: `train CONFIG model.name=sk-test-...` sent the key-like name to the hub URL and
    printed it in every retry line."""
    key = "sk-test-" + KEYS[2]
    out = tmp_path / "out"
    line = expect_clean_failure([a.format(key=key, out=out, data=tasks_data) for a in argv], capsys,
                                mentions=["looks like a key"])
    assert not any(key in name for name in hub_calls), hub_calls
    _assert_written_nowhere(key, tmp_path, line)


def test_an_unreachable_hub_ends_with_one_line_at_once(tasks_data, tmp_path, capsys, monkeypatch):
    """Issue 45.4: offline, a hub name was retried for minutes (five retries per file, with
    exponential backoff) and no error line came. Here no connection can be made (the socket
    layer refuses at once) and the hub is not in offline mode: one error line, no retry, no wait."""
    import socket
    import time

    import huggingface_hub.constants

    def no_network(*args, **kwargs):
        raise OSError("network unreachable (test)")

    waits: list[float] = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(time, "sleep", waits.append)
    line = expect_clean_failure(["eval", "--model", "someorg/some-vlm", "--data", str(tasks_data),
                                 "--out", str(tmp_path / "ev")], capsys,
                                mentions=["someorg/some-vlm", "cannot be reached"])
    assert not waits, f"retried with waits {waits}"
    assert "\n" not in line
