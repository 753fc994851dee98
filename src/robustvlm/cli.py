"""The `robustvlm` command line: parse, load config, call one function per subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from robustvlm.errors import ConfigError, MissingDataSource, RobustVLMError
from robustvlm.runs import release_run_folders

RESUME_HELP = (
    "continue the run that --out holds (its settings must match; finished work is kept); "
    "without it, a folder that holds a run is refused"
)
IMAGE_ROOT_HELP = (
    "folder that relative image paths in record files are taken from "
    "(LLaVA's --image_folder; default: the data file's folder)"
)
def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `low`, else an error naming the value and the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is out of range: an integer >= {low}")
        return value

    return parse


def _float_where(ok: Callable[[float], bool], allowed: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: {allowed}")
        return value

    return parse


def float_at_least(low: float) -> Callable[[str], float]:
    """An argparse type: a number >= `low`."""
    return _float_where(lambda v: v >= low, f"a number >= {low:g}")


def float_above(low: float) -> Callable[[str], float]:
    """An argparse type: a number > `low`."""
    return _float_where(lambda v: v > low, f"a number > {low:g}")


float_in_unit_interval = _float_where(lambda v: 0 < v <= 1, "a number in (0, 1]")

OUTSIDE_ROOT_HELP = (
    "accept image paths in data files that resolve outside the data root or --image-root "
    "(absolute paths, ../, symlinks); by default each is a bad record"
)


def _envs_infer(args: argparse.Namespace) -> int:
    from robustvlm.workflows.envs_infer import infer_environments

    summary = infer_environments(args.model, args.data, args.out, method=args.method, k=args.k,
                                 batch_size=args.batch_size, seed=args.seed, image_root=args.image_root,
                                 allow_outside_root=args.allow_outside_root, resume=args.resume)
    sizes = ", ".join(f"{name} {n}" for name, n in summary["sizes"].items())
    print(f"{summary['records']} training records -> {sizes}; purity against their own environments "
          f"{100 * summary['purity_vs_given']:.1f}%")
    print(f"env map: {Path(args.out) / 'env_map.yaml'} (data.env_map / --env-map)")
    return 0


def _add_served_options(parser: argparse.ArgumentParser) -> None:
    """The options of a served model (`--model openai:MODEL`), shared by every command that
    generates from `--model`."""
    group = parser.add_argument_group("served model (--model openai:MODEL, any OpenAI-compatible server)")
    group.add_argument("--base-url", metavar="URL", help="the server's API root, e.g. http://localhost:8000/v1")
    group.add_argument("--api-key-env", metavar="VAR",
                       help="NAME of the environment variable that holds the API key (never the key itself)")
    group.add_argument("--concurrency", type=int_at_least(1), default=8, metavar="N", help="requests in flight at once (8)")
    group.add_argument("--request-timeout", type=float_above(0.0), default=60.0, metavar="S",
                       help="seconds per request (60)")
    group.add_argument("--max-retries", type=int_at_least(0), default=5, metavar="N",
                       help="retries of a request on 429, 5xx and timeouts, with exponential backoff (5)")
    group.add_argument("--no-cache", action="store_true",
                       help="send every request (default: answers are reused from the response cache in "
                       "$ROBUSTVLM_CACHE, else ~/.cache/robustvlm)")


def _served(args: argparse.Namespace):
    """The ServedConfig of the served-model options, or None without --base-url."""
    from robustvlm.config import ServedConfig, validate_config

    if args.base_url is None:
        return None
    return validate_config({
        "base_url": args.base_url, "api_key_env": args.api_key_env, "max_concurrency": args.concurrency,
        "timeout_s": args.request_timeout, "max_retries": args.max_retries, "cache": not args.no_cache,
    }, "served-model options", ServedConfig)


def _data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.check import check_dataset

    report = check_dataset(
        args.path,
        fmt=args.format,
        env_column=args.env_column,
        env_map=args.env_map,
        task_rules=args.task_rules,
        image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
    )
    print(report.format())
    return 0 if report.ok else 1


def _data_synth(args: argparse.Namespace) -> int:
    from robustvlm.data.synth import synthesize

    manifest = synthesize(args.benchmark, Path(args.out), seed=args.seed, n_per_env=args.n_per_env)
    print(f"wrote {args.benchmark} to {args.out} (manifest: {manifest})")
    return 0


def _train(args: argparse.Namespace) -> int:
    from robustvlm.config import load_config
    from robustvlm.workflows.train import train

    cfg = load_config(args.config, args.overrides)
    result = train(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"final model: {result.final_dir}")
    return 0


def _embed_train(args: argparse.Namespace) -> int:
    from robustvlm.config import EmbedRunConfig, load_config
    from robustvlm.workflows.embed_train import embed_train

    cfg = load_config(args.config, args.overrides, EmbedRunConfig)
    result = embed_train(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"final embedding model ({result.family}): {result.final_dir}")
    return 0


def _embed_eval(args: argparse.Namespace) -> int:
    from robustvlm.workflows.embed_eval import embed_eval

    models = [{"name": m, "family": args.family} if args.family else m for m in args.model]
    result = embed_eval(
        models, args.out, benches=args.bench or (), retrieval=args.retrieval,
        retrieval_split=args.retrieval_split, resume=args.resume, batch_size=args.batch_size,
        allow_outside_root=args.allow_outside_root,
    )
    for path in (result.results_csv, result.retrieval_csv):
        if path is not None:
            print(f"{path}:\n{Path(path).read_text()}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from robustvlm.report.tables import env_table
    from robustvlm.workflows.evaluate import run_eval

    settings = {
        "split": args.split,
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "repetition_penalty": args.repetition_penalty,
        "max_per_env": args.max_per_env,
        "metrics": args.metrics.split(","),
    }
    metrics = run_eval(
        args.model, args.data, args.out, settings=settings, judge_file=args.judge,
        env_map=args.env_map, task_rules=args.task_rules, image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
        resume=args.resume, served=_served(args),
    )
    print(env_table(metrics, "chrf"))
    return 0


def _study(args: argparse.Namespace) -> int:
    from robustvlm.workflows.study import run_study

    name = Path(args.config).stem + ("-dry-run" if args.dry_run else "")
    run_study(args.config, args.out or Path("studies") / name, dry_run=args.dry_run)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from robustvlm.workflows.sweep import run_sweep

    name = Path(args.config).stem + ("-dry-run" if args.dry_run else "")
    run_sweep(
        args.config, args.out or Path("sweeps") / name, launcher=args.launcher, dry_run=args.dry_run
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    if args.overrides[:1] == ["robustness"]:
        from robustvlm.workflows.demo_robustness import run_robustness_demo

        run_robustness_demo(args.out or "demo_robustness", quick=args.quick)
        return 0
    if args.overrides[:1] == ["invariance"]:
        from robustvlm.config import read_yaml_mapping, validate_config
        from robustvlm.linear.protocol import METHODS
        from robustvlm.workflows.invariance_demo import run_invariance_demo
        from robustvlm.workflows.launchers import JobRunnerConfig

        launcher = None
        if args.launcher:
            raw = read_yaml_mapping(args.launcher, "launcher", "launcher settings")
            launcher = validate_config(raw, str(args.launcher), JobRunnerConfig)
        methods = tuple(m.strip() for m in args.methods.split(",")) if args.methods else METHODS
        budget = "quick" if args.quick else args.budget
        run_invariance_demo(args.out or "demo_invariance", n_envs=args.n_envs, dim_inv=args.dim_inv,
                            dim_spu=args.dim_spu, budget=budget, methods=methods, launcher=launcher)
        return 0
    if args.overrides[:1] == ["ladder"]:
        from robustvlm.workflows.ladder import run_ladder_demo

        run_ladder_demo(args.out or ("demo_ladder_quick" if args.quick else "demo_ladder"), quick=args.quick)
        return 0
    if args.overrides[:1] == ["reward"]:
        from robustvlm.workflows.demo_reward import run_reward_demo

        run_reward_demo(args.out or ("demo_reward_quick" if args.quick else "demo_reward"), quick=args.quick)
        return 0
    from robustvlm.workflows.demo import run_demo

    run_demo(args.out or ("demo_out_quick" if args.quick else "demo_out"), quick=args.quick,
             overrides=args.overrides)
    return 0


def _mc_build(args: argparse.Namespace) -> int:
    from robustvlm.workflows.mc_build import build_benchmark

    questions = build_benchmark(
        args.data,
        args.out,
        distractors=args.distractors,
        vision_model=args.vision_model,
        text_encoder=args.text_encoder,
        image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
        k=args.k,
        n=args.n,
        seed=args.seed,
        class_subset=args.class_subset,
        class_names=args.class_names,
        prompt=args.prompt,
        circular=args.circular,
    )
    print(f"wrote {len(questions)} questions to {args.out}")
    return 0


def _mc_eval(args: argparse.Namespace) -> int:
    from robustvlm.workflows.mc_eval import evaluate_models

    csv_path = evaluate_models(
        args.model,
        args.bench,
        args.out,
        method=args.method,
        circular=args.circular,
        resume=args.resume,
        batch_size=args.batch_size,
        normalize=not args.sum,
        served=_served(args),
    )
    print(Path(csv_path).read_text())
    return 0


def _mc_stability(args: argparse.Namespace) -> int:
    from robustvlm.report.tables import markdown_table
    from robustvlm.workflows.mc_eval import stability_rows

    rows = stability_rows(args.predictions, draws=args.draws, seed=args.seed)
    cells = [[str(r["size"])] + [f"{r[k]:.4f}" for k in ("mean", "std", "lo", "hi")] for r in rows]
    print(markdown_table(["questions", "mean", "std", "lo", "hi"], cells))
    return 0


def _robustness_fit(args: argparse.Namespace) -> int:
    from robustvlm.workflows.robustness import fit_from_results

    line = fit_from_results(
        args.results,
        ref=args.ref,
        shift=args.shift,
        baseline=args.baseline,
        transform=args.transform,
        out_dir=args.out,
        resume=args.resume,
    ).fit
    print(
        f"{args.transform} line: slope {line.slope:.3f}, intercept {line.intercept:.3f}, "
        f"r2 {line.r2:.3f} over {line.n} models; wrote {args.out}/fit.json, scatter.png"
    )
    return 0


def _robustness_simulate(args: argparse.Namespace) -> int:
    from robustvlm.workflows.robustness import simulate_to_dir

    result = simulate_to_dir(args.out, seed=args.seed, resume=args.resume)
    print(
        f"fitted slope {result['fit_test']['slope']:.3f}, predicted {result['predicted']['slope']:.3f}; "
        f"wrote {args.out}"
    )
    return 0


def _robustness_task_signal(args: argparse.Namespace) -> int:
    from robustvlm.workflows.task_signal import load_task_signal_config, run_task_signal

    config, overrides = args.config, list(args.overrides)
    if config is not None and "=" in config and not Path(config).is_file():  # an override, no config file
        config, overrides = None, [config, *overrides]
    cfg = load_task_signal_config(config, quick=args.quick, overrides=overrides)
    out = args.out or ("task_signal_quick" if args.quick else "task_signal")
    run_task_signal(cfg, out, resume=args.resume, label="quick" if args.quick else "")
    return 0


def _icl_eval(args: argparse.Namespace) -> int:
    from robustvlm.workflows.icl import run_icl

    run_icl(
        args.model,
        args.data,
        args.out,
        shots=tuple(int(k) for k in args.shots.split(",")),
        policies=tuple(args.demos.split(",")),
        n_per_domain=args.n_per_domain,
        seed=args.seed,
        batch_size=args.batch_size,
        resume=args.resume,
        served=_served(args),
    )
    print(f"wrote {args.out}/icl_results.json and icl_results.md")
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from robustvlm.workflows.diagnose import run_diagnosis

    run_diagnosis(
        args.model,
        args.data,
        args.out,
        descriptions=args.descriptions,
        shots=args.shots,
        n_per_domain=args.n_per_domain,
        seed=args.seed,
        resume=args.resume,
        served=_served(args),
    )
    print((Path(args.out) / "diagnosis.md").read_text())
    return 0


def _pair_options(args: argparse.Namespace) -> dict:
    """The preference-reading options every `rm` command that reads pairs shares."""
    return {"fmt": args.format, "split": args.split, "image_root": args.image_root,
            "allow_outside_root": args.allow_outside_root, "env_column": args.env_column,
            "aspect": args.aspect}


def _rm_data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.preference_check import check_pairs

    report = check_pairs(args.path, test_path=args.test, **_pair_options(args))
    print(report.format())
    return 0 if report.ok else 1


def _rm_train(args: argparse.Namespace) -> int:
    from robustvlm.config import RewardConfig, load_config
    from robustvlm.workflows.rm_train import train_reward_model

    cfg = load_config(args.config, args.overrides, RewardConfig)
    result = train_reward_model(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"reward model: {result.final_dir}")
    return 0


def _read_pairs_for(args: argparse.Namespace, skipped=None) -> tuple[list, dict]:
    """The pairs of --data and the options they were read with (stored with a run's settings);
    with a SkipLog `skipped`, bad records are counted there instead of stopping the command."""
    from robustvlm.data.preferences import load_pairs

    options = {**_pair_options(args), "split": None}
    on_bad = "skip" if skipped is not None else "error"
    pairs = load_pairs(args.data, verbose=False, on_bad_record=on_bad, skip_log=skipped, **options).pairs
    return pairs, {"path": args.data, **{k: v for k, v in options.items() if k != "split"}}


def _rm_eval(args: argparse.Namespace) -> int:
    from robustvlm.config import RewardEvalConfig
    from robustvlm.data.records import SkipLog
    from robustvlm.report.tables import markdown_table
    from robustvlm.workflows.rm_eval import check_split, evaluate_reward_model

    cfg = RewardEvalConfig(split=args.split or "test", shared_prefix=not args.full_sequences,
                           text_only_test=not args.no_text_only_test, text_mode=args.text_mode,
                           max_per_env=args.max_per_env)
    check_split(cfg, args.score_training_pairs)
    skipped = SkipLog() if args.skip_bad else None
    pairs, data = _read_pairs_for(args, skipped)
    metrics = evaluate_reward_model(args.model, pairs, args.out, cfg=cfg, data=data, resume=args.resume,
                                    skipped=skipped, training_pairs=args.score_training_pairs)
    if skipped is not None and len(skipped):
        print(f"skipped {len(skipped)} bad record(s): see {Path(args.out) / 'skipped.jsonl'}")
    if cfg.split == "train":
        print("scored the training split: accuracy on pairs the model may have been trained on")
    rows = [[env, *(f"{100 * acc[v].accuracy:.1f} [{100 * acc[v].ci_lo:.1f}, {100 * acc[v].ci_hi:.1f}]"
                    for v in metrics.views), str(acc[metrics.primary].n)]
            for env, acc in {**metrics.per_env, "all": metrics.overall}.items()]
    print(markdown_table(["env", *(f"accuracy % ({v})" for v in metrics.views), "pairs"], rows))
    return 0


def _rm_matrix(args: argparse.Namespace) -> int:
    from robustvlm.report.reward_report import summary_table
    from robustvlm.report.tables import markdown_table
    from robustvlm.workflows.rm_matrix import run_matrix

    name = Path(args.config).stem + ("-dry-run" if args.dry_run else "")
    out = args.out or Path("studies") / name
    table = summary_table(run_matrix(args.config, out, dry_run=args.dry_run).results)
    print(markdown_table(table.header, table.rows))
    print(f"report: {Path(out) / 'report.md'} and report.html")
    return 0


def _rm_sample(args: argparse.Namespace) -> int:
    from robustvlm.config import JudgeConfig, RewardEvalConfig, validate_config
    from robustvlm.workflows.rm_eval import eval_pairs
    from robustvlm.workflows.rm_sample import Sampling, sample_candidates

    if (args.policy is None) == (args.server is None):
        raise ConfigError("give exactly one of --policy MODEL or --server URL")
    if args.server is not None and args.server_model is None:
        raise ConfigError("--server needs --server-model (the model name the server serves)")
    server = validate_config(
        {"base_url": args.server, "model": args.server_model, "api_key_env": args.api_key_env},
        "--server", JudgeConfig,
    ) if args.server else None
    pairs, data = _read_pairs_for(args)
    prompts = eval_pairs(pairs, RewardEvalConfig(split=args.split or "test", max_per_env=args.max_per_env))
    sampling = Sampling(k=args.k, temperature=args.temperature, top_p=args.top_p,
                        max_new_tokens=args.max_new_tokens, seed=args.seed)
    path = sample_candidates(prompts, args.out, sampling=sampling, policy=args.policy, server=server,
                             data=data, resume=args.resume)
    print(f"wrote {path}")
    return 0


def _rm_score(args: argparse.Namespace) -> int:
    from robustvlm.config import load_judge_config
    from robustvlm.workflows.rm_score import score_candidates

    judge = load_judge_config(args.judge) if args.judge else None
    path = score_candidates(args.candidates, args.out, model=args.model, gold=args.gold, judge=judge,
                            shared_prefix=not args.full_sequences, resume=args.resume)
    print(f"wrote {path}")
    return 0


def _rm_bon(args: argparse.Namespace) -> int:
    from robustvlm.workflows.rm_bon import run_bon

    scores = {}
    for item in args.scores:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise ConfigError(f"--scores takes LABEL=SCORES.jsonl, not {item!r}")
        scores[label] = path
    results = run_bon(scores, args.out, gold=args.gold, resume=args.resume)
    for label, result in results.items():
        curve = ", ".join(f"N={r['n']}: {r['mean']:.3f}" for r in result["curve"])
        print(f"{label}: {curve} ({result['curve'][0]['n_prompts']} prompts)")
    print(f"wrote {Path(args.out) / 'bon.json'} and bon.png")
    return 0


def _add_train_parser(sub, help_text: str, example: str, func, config_help: str | None = None) -> None:
    """A `train` subcommand: CONFIG, key=value overrides, --out, --resume."""
    parser = sub.add_parser("train", help=help_text)
    parser.add_argument("config", help=config_help)
    parser.add_argument("overrides", nargs="*", help=f"key=value overrides, e.g. {example}")
    parser.add_argument("--out", help="run directory (default runs/<config name>)")
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP + " (from the last checkpoint)")
    parser.set_defaults(func=func)


def _add_pair_options(parser: argparse.ArgumentParser) -> None:
    from robustvlm.data.preference_layouts import FORMATS

    parser.add_argument("--format", default="auto", help=f"preference layout: {' | '.join(FORMATS)} "
                        "(auto recognises it from the columns and says which)")
    parser.add_argument("--split", help="keep only this split (train | val | test); for hf: the split loaded")
    parser.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP + "; COCO's folder for POVID")
    parser.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    parser.add_argument("--env-column", help="record field that names the environment (default env)")
    parser.add_argument("--aspect", default="mean", help="VLFeedback rating pairs are formed by: an aspect "
                        "(Helpfulness, 'Visual Faithfulness', 'Ethical Considerations') or mean")


def _add_rm_parser(sub) -> None:
    rm = sub.add_parser("rm", help="multimodal reward models: data, training, matrices, Best-of-N")
    rm_sub = rm.add_subparsers(dest="rm_command", required=True)

    rd = rm_sub.add_parser("data", help="check preference data")
    rd_sub = rd.add_subparsers(dest="rm_data_command", required=True)
    rc = rd_sub.add_parser("check", help="validate pairs (exit 1 on bad records); train / test overlap")
    rc.add_argument("path", help="preference data: JSONL, JSON, parquet, a saved dataset or hf:NAME")
    rc.add_argument("--test", help="a test set to check for images and queries shared with PATH")
    _add_pair_options(rc)
    rc.set_defaults(func=_rm_data_check)

    _add_train_parser(rm_sub, "train a reward model from a YAML config", "loss=shortcut_aware", _rm_train)

    re_ = rm_sub.add_parser("eval", help="pairwise accuracy per environment, with the text-only test")
    re_.add_argument("--model", required=True, help="a reward model folder (RUN/final)")
    re_.add_argument("--data", required=True, help="preference data")
    re_.add_argument("--out", required=True)
    re_.add_argument("--max-per-env", type=int_at_least(1), default=None)
    re_.add_argument("--no-text-only-test", action="store_true", help="skip scoring without the image")
    re_.add_argument("--text-mode", default="drop", choices=["drop", "blank"],
                     help="how the text-only test removes the image")
    re_.add_argument("--full-sequences", action="store_true",
                     help="score each response as its own sequence instead of sharing the prompt's cache")
    re_.add_argument("--resume", action="store_true", help=RESUME_HELP)
    re_.add_argument("--skip-bad", action="store_true",
                     help="leave bad records out (listed in OUT/skipped.jsonl, counted in metrics.json) "
                     "instead of stopping at the first")
    re_.add_argument("--score-training-pairs", action="store_true",
                     help="allow --split train (pairs the model may have been trained on; metrics.json says so)")
    _add_pair_options(re_)
    re_.set_defaults(func=_rm_eval)

    rmx = rm_sub.add_parser("matrix", help="train on each environment x test on every one, several "
                            "losses and seeds -> matrices, SFD, report (resumable)")
    rmx.add_argument("config", help="matrix YAML: base, losses, seeds, train_envs, per_env, jobs")
    rmx.add_argument("--out", help="output directory (default studies/<config name>[-dry-run])")
    rmx.add_argument("--dry-run", action="store_true", help="the same recipe on a tiny offline model and "
                     "built-in data for a few steps, first seed")
    rmx.set_defaults(func=_rm_matrix)

    rs = rm_sub.add_parser("sample", help="K candidate responses per prompt from a policy (Best-of-N)")
    rs.add_argument("--data", required=True, help="preference data whose (image, query) are the prompts")
    rs.add_argument("--out", required=True)
    rs.add_argument("--policy", help="a VLM (hub name, folder or tiny:...) sampled by robustvlm")
    rs.add_argument("--server", metavar="URL", help="an OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    rs.add_argument("--server-model", help="the model name the server serves")
    rs.add_argument("--api-key-env", help="NAME of the environment variable holding the server's key")
    rs.add_argument("--k", type=int_at_least(2), default=16, help="candidates per prompt")
    rs.add_argument("--temperature", type=float_at_least(0.0), default=1.0)
    rs.add_argument("--top-p", type=float_in_unit_interval, default=0.95)
    rs.add_argument("--max-new-tokens", type=int_at_least(1), default=64)
    rs.add_argument("--seed", type=int_at_least(0), default=0)
    rs.add_argument("--max-per-env", type=int_at_least(1), default=None, help="prompts per environment")
    rs.add_argument("--resume", action="store_true", help=RESUME_HELP)
    _add_pair_options(rs)
    rs.set_defaults(func=_rm_sample)

    rsc = rm_sub.add_parser("score", help="rewards and gold scores of sampled candidates (resumable)")
    rsc.add_argument("--candidates", required=True, help="candidates.jsonl written by rm sample")
    rsc.add_argument("--model", required=True, help="a reward model folder")
    rsc.add_argument("--out", required=True)
    rsc.add_argument("--gold", default="chrf", choices=["chrf", "exact", "judge"],
                     help="gold score: agreement with the reference answer (chrf, exact) or the CEE judge")
    rsc.add_argument("--judge", help="YAML with the judge endpoint for --gold judge")
    rsc.add_argument("--full-sequences", action="store_true", help="no shared prompt cache")
    rsc.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rsc.set_defaults(func=_rm_score)

    rb = rm_sub.add_parser("bon", help="Best-of-N curves (unbiased estimator) from rm score outputs")
    rb.add_argument("--scores", action="append", required=True, metavar="LABEL=SCORES.jsonl",
                    help="one reward model's scores; repeat to compare several")
    rb.add_argument("--out", required=True)
    rb.add_argument("--gold", default="chrf", help="the gold score's name on the plot")
    rb.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rb.set_defaults(func=_rm_bon)


def _metrics_help() -> str:
    """The eval command's --metrics help, from the metrics registry."""
    from robustvlm.evaluation.metrics.registry import METRICS, Metric, per_batch_metrics

    def one(m: Metric) -> str:
        about = f"{m.name} ({m.title}): {m.scale}, {'higher' if m.higher_is_better else 'lower'} is better"
        needs = m.needs
        if needs is None:
            return about
        if needs.required:
            return f"{about}, needs the {needs.what}: {needs.how}"
        return f"{about}, {needs.what}: {needs.how}, default {needs.default}"

    always = ", ".join(m.name for m in per_batch_metrics())
    return (
        f"comma-separated, of: {'; '.join(one(m) for m in METRICS.values())}; "
        f"{always} are always computed; the judge comes from --judge"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robustvlm",
        description="Measure and improve how vision-language models hold up under distribution shift.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="check datasets and synthesise the built-in benchmarks")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    check = data_sub.add_parser(
        "check", help="validate a dataset; list every bad record (exit 1 if any)"
    )
    check.add_argument("path")
    check.add_argument("--format", default="auto", help="auto|jsonl|json|llava|parquet|hf|folder")
    check.add_argument("--env-map", help="YAML mapping source names to environments")
    check.add_argument("--env-column", help="record field that holds the environment")
    check.add_argument(
        "--task-rules", action="store_true", help="assign task types from the instruction"
    )
    check.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    check.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    check.set_defaults(func=_data_check)
    synth = data_sub.add_parser("synth", help="write a built-in synthetic benchmark")
    synth.add_argument(
        "--benchmark", required=True,
        help="tasks | spurious | digits | domains | preferences | mnist | fashion | fashion-spurious",
    )
    synth.add_argument("--out", required=True)
    synth.add_argument("--seed", type=int_at_least(0), default=0)
    synth.add_argument("--n-per-env", type=int_at_least(1), default=None)
    synth.set_defaults(func=_data_synth)

    _add_train_parser(sub, "fine-tune a VLM from a YAML config", "train.lr=1e-4", _train)

    emb = sub.add_parser("embed", help="VLMs as embedding models (VLM2Vec): contrastive training, evaluation")
    emb_sub = emb.add_subparsers(dest="embed_command", required=True)
    _add_train_parser(
        emb_sub, "contrastive (InfoNCE) training of a VLM into an embedding model", "embed.chunk_size=8",
        _embed_train, config_help="YAML: model, data, embed, train sections",
    )
    ee = emb_sub.add_parser(
        "eval", help="embedding models as zero-shot classifiers (results.csv) and image-text retrievers (recall@1/5)"
    )
    ee.add_argument("--model", action="append", required=True,
                    help="a folder from embed train (family read from its embedding.json) or a hub name; repeatable")
    ee.add_argument("--family", choices=["vlm2vec-vqa", "vlm2vec-caption", "vlm2vec-mixed"],
                    help="the family of every --model (needed for models without embedding.json)")
    ee.add_argument("--bench", action="append", help="questions JSONL from mc build; repeatable")
    ee.add_argument("--retrieval", help="dataset of image-text records (any loader) for recall@1/5")
    ee.add_argument("--retrieval-split", default="test", help="which records of --retrieval to use")
    ee.add_argument("--out", required=True)
    ee.add_argument("--batch-size", type=int_at_least(1), default=16)
    ee.add_argument("--resume", action="store_true", help=RESUME_HELP + "; models and benchmarks may be added")
    ee.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    ee.set_defaults(func=_embed_eval)

    en = sub.add_parser("envs", help="environments inferred from data (no environment labels needed)")
    en_sub = en.add_subparsers(dest="envs_command", required=True)
    ei = en_sub.add_parser("infer", help="split the training records into environments from a reference "
                           "model's losses (EIIL, a loss split, or k-means); writes an env map")
    ei.add_argument("--model", required=True, help="the reference model (an ERM run's final/, a hub name)")
    ei.add_argument("--data", required=True, help="instruction data (any loader)")
    ei.add_argument("--out", required=True)
    ei.add_argument("--method", default="eiil", choices=["eiil", "loss-split", "cluster"],
                    help="EIIL (maximise the reference's IRMv1 penalty), the high-loss records apart, or "
                    "k-means of its hidden states")
    ei.add_argument("--k", type=int_at_least(2), default=2, help="environments (cluster; EIIL and loss-split: 2)")
    ei.add_argument("--batch-size", type=int_at_least(1), default=8)
    ei.add_argument("--seed", type=int_at_least(0), default=0)
    ei.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    ei.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    ei.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ei.set_defaults(func=_envs_infer)

    ev = sub.add_parser("eval", help="generate and score a model on a dataset")
    ev.add_argument("--model", required=True,
                    help="model directory (e.g. RUN/final), hub name, or openai:MODEL with --base-url")
    ev.add_argument("--data", required=True)
    ev.add_argument("--out", required=True)
    ev.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ev.add_argument("--split", default="test")
    ev.add_argument("--batch-size", type=int_at_least(1), default=8)
    ev.add_argument("--max-new-tokens", type=int_at_least(1), default=128)
    ev.add_argument("--repetition-penalty", type=float_above(0.0), default=1.15)
    ev.add_argument("--max-per-env", type=int_at_least(1), default=None)
    ev.add_argument("--metrics", default="chrf,exact", help=_metrics_help())
    ev.add_argument(
        "--judge", help="YAML with the judge endpoint for cee: base_url, model, api_key_env, ..."
    )
    ev.add_argument("--env-map")
    ev.add_argument("--task-rules", action="store_true")
    ev.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    ev.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    _add_served_options(ev)
    ev.set_defaults(func=_eval)

    st = sub.add_parser("study", help="methods x seeds -> train -> evaluate -> Table-1 report (resumable)")
    st.add_argument("config", help="study YAML: base, methods, seeds, metrics, launch")
    st.add_argument("--out", help="study directory (default studies/<config name>[-dry-run])")
    st.add_argument(
        "--dry-run",
        action="store_true",
        help="check a real recipe end to end: tiny offline model, built-in data, a few steps, "
        "first seed, no judge or launcher",
    )
    st.set_defaults(func=_study)

    sw = sub.add_parser(
        "sweep",
        help="random hyperparameter search x trial seeds, DomainBed's model selection (resumable)",
    )
    sw.add_argument(
        "config", help="sweep YAML: base, methods, n_draws, seeds, checkpoint_every, ..."
    )
    sw.add_argument("--out", help="sweep directory (default sweeps/<config name>[-dry-run])")
    sw.add_argument(
        "--launcher",
        choices=["local", "multi-gpu", "slurm"],
        help="overrides the config's launcher.kind: local (this process, or a pool of CPU worker processes with launcher.workers), "
        "multi-gpu (one worker process per GPU), slurm (submitit)",
    )
    sw.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny offline model, built-in data, 4 steps, at most 2 draws, first seed, in process",
    )
    sw.set_defaults(func=_sweep)

    dm = sub.add_parser(
        "demo",
        help="built-in data -> ERM, BIRM, Dynamic BIRM on a tiny VLM, 3 seeds -> Table 1 study report",
    )
    dm.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides of the demo config; or `robustness` for the "
        "accuracy-on-the-line demo (a family of tiny models, probit fits); or `reward` for the "
        "shortcut-aware reward-model demo (generalization matrices, SFD, Best-of-N); or `ladder` for the "
        "invariance ladder (the IRM paper's Colored MNIST on real images, pixels and frozen vision towers)",
    )
    dm.add_argument("--quick", action="store_true", help="a smaller run (a few minutes)")
    dm.add_argument(
        "--out", help="default demo_out (demo_out_quick with --quick; demo_robustness for robustness; "
        "demo_reward[_quick] for reward; demo_ladder[_quick] for ladder)"
    )
    dm.add_argument("--n-envs", type=int_at_least(2), default=3, help="demo invariance: environments")
    dm.add_argument("--dim-inv", type=int_at_least(1), default=5, help="demo invariance: invariant dimensions")
    dm.add_argument("--dim-spu", type=int_at_least(0), default=5, help="demo invariance: spurious dimensions")
    dm.add_argument(
        "--budget",
        choices=["quick", "default", "paper"],
        default="default",
        help="demo invariance: the sweep's size: quick (a smoke test, as --quick), default (a few CPU "
        "minutes), paper (the authors' 20 draws x 50 data seeds, 10,000 rows and steps: for a cluster, "
        "with --launcher)",
    )
    dm.add_argument(
        "--methods",
        help="demo invariance: comma-separated methods to train (default erm,irm,vrex,groupdro,birm,"
        "dynamic_birm,oracle; irm_eiil and dynamic_birm_eiil train on environments inferred by EIIL)",
    )
    dm.add_argument(
        "--launcher",
        metavar="YAML",
        help="demo invariance: the job runner's settings (a sweep's launcher: section: kind local / "
        "multi-gpu / slurm, workers, cluster, parameters); default 2 local worker processes",
    )
    dm.set_defaults(func=_demo)

    mc = sub.add_parser("mc", help="multiple-choice benchmarks with hard distractors")
    mc_sub = mc.add_subparsers(dest="mc_command", required=True)
    mb = mc_sub.add_parser("build", help="turn labelled images into K-way questions")
    mb.add_argument(
        "--data", required=True, help="labelled images (any loader; e.g. ROOT/DOMAIN/CLASS)"
    )
    mb.add_argument("--out", required=True, help="questions JSONL")
    mb.add_argument("--k", type=int_at_least(2), default=5)
    mb.add_argument(
        "--distractors",
        default="random",
        choices=["random", "wordnet", "text", "visual"],
        help="how wrong options are chosen: random classes; nearest in the WordNet tree; nearest "
        "class-name sentence embeddings; or visual: classes whose mean image embedding under "
        "--vision-model is nearest",
    )
    mb.add_argument(
        "--vision-model",
        help="for --distractors visual: a CLIP/SigLIP model or a VLM (its vision tower is "
        "used) as hub name, local folder or tiny:clip / tiny:siglip / tiny:idefics3",
    )
    mb.add_argument(
        "--text-encoder",
        help="for --distractors text: a sentence encoder (local folder or already-cached hub "
        "name; default the offline all-MiniLM-L6-v2)",
    )
    mb.add_argument("--n", type=int_at_least(1), default=None, help="number of questions (stratified by class)")
    mb.add_argument("--seed", type=int_at_least(0), default=0)
    mb.add_argument(
        "--class-subset", help="class list or {dataset_class: reference_class} mapping file"
    )
    mb.add_argument("--class-names", help="file mapping class keys (e.g. WordNet ids) to names")
    mb.add_argument("--prompt", type=int_at_least(0), default=0, help="prompt formulation 0-4")
    mb.add_argument("--circular", action="store_true", help="add every rotation of the options")
    mb.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    mb.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    mb.set_defaults(func=_mc_build)

    me = mc_sub.add_parser("eval", help="score models on question files; results.csv with CIs")
    me.add_argument("--model", action="append", required=True,
                    help="repeat for several models; openai:MODEL is a served model (--base-url)")
    me.add_argument("--bench", action="append", required=True, help="questions JSONL; repeatable")
    me.add_argument("--out", required=True)
    me.add_argument(
        "--method",
        default="loglik",
        choices=["loglik", "generate"],
        help="option log-likelihood (shared prefix) or generation + answer extraction",
    )
    me.add_argument(
        "--circular", action="store_true", help="count a question only if every rotation is right"
    )
    me.add_argument(
        "--sum",
        action="store_true",
        help="rank options by summed, not length-normalised, log-likelihood",
    )
    me.add_argument("--batch-size", type=int_at_least(1), default=8)
    me.add_argument("--resume", action="store_true", help=RESUME_HELP + "; models and benchmarks may be added")
    _add_served_options(me)
    me.set_defaults(func=_mc_eval)
    ms = mc_sub.add_parser("stability", help="accuracy against the number of sampled questions")
    ms.add_argument("predictions", help="per-question JSONL written by mc eval")
    ms.add_argument("--draws", type=int_at_least(1), default=50)
    ms.add_argument("--seed", type=int_at_least(0), default=0)
    ms.set_defaults(func=_mc_stability)

    rb = sub.add_parser("robustness", help="accuracy-on-the-line fits and effective robustness")
    rb_sub = rb.add_subparsers(dest="robustness_command", required=True)
    fit = rb_sub.add_parser("fit", help="fit the line of a baseline family; effective robustness")
    fit.add_argument("results", help="CSV with columns model, family, bench, accuracy, n")
    fit.add_argument("--ref", required=True, help="reference benchmark")
    fit.add_argument("--shift", required=True, help="shifted benchmark")
    fit.add_argument("--baseline", help="family whose models define the line (default: all)")
    fit.add_argument("--transform", default="probit", choices=["probit", "logit"])
    fit.add_argument("--out", default="robustness_fit")
    fit.add_argument("--resume", action="store_true", help="write into a folder that holds this same fit")
    fit.set_defaults(func=_robustness_fit)
    sim = rb_sub.add_parser(
        "simulate", help="the Gaussian location model behind accuracy on the line"
    )
    sim.add_argument("--out", default="robustness_simulate")
    sim.add_argument("--seed", type=int_at_least(0), default=0)
    sim.add_argument("--resume", action="store_true", help="write into a folder that holds this same simulation")
    sim.set_defaults(func=_robustness_simulate)
    ts = rb_sub.add_parser(
        "task-signal",
        help="caption- vs VQA-style embedding training on one frozen vision tower: one line per family, "
        "the lift between them with bootstrap CIs (built-in config: digits, tiny models, < 15 min on 2 cores)",
    )
    ts.add_argument("config", nargs="?", help="YAML (default: the built-in configs/task_signal.yaml)")
    ts.add_argument("overrides", nargs="*", help="key=value overrides, e.g. workers=1")
    ts.add_argument("--quick", action="store_true", help="merge the config's `quick` part (a smoke test)")
    ts.add_argument("--out", help="default task_signal (task_signal_quick with --quick)")
    ts.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ts.set_defaults(func=_robustness_task_signal)

    icl = sub.add_parser("icl", help="zero-shot and in-context (k-shot) evaluation across domains")
    icl_sub = icl.add_subparsers(dest="icl_command", required=True)
    ie = icl_sub.add_parser("eval", help="k-shot accuracy per domain and demo policy")
    ie.add_argument("--model", required=True, help="a model folder, hub name, or openai:MODEL with --base-url")
    ie.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    ie.add_argument("--out", required=True)
    ie.add_argument("--shots", default="0,1,2,4", help="comma-separated shot counts")
    ie.add_argument(
        "--demos",
        default="random",
        help="comma-separated: random, same-domain, cross-domain, label-shift, spurious",
    )
    ie.add_argument("--n-per-domain", type=int_at_least(1), default=20)
    ie.add_argument("--seed", type=int_at_least(0), default=0)
    ie.add_argument("--batch-size", type=int_at_least(1), default=8, help="prompts per generation batch")
    ie.add_argument("--resume", action="store_true", help=RESUME_HELP)
    _add_served_options(ie)
    ie.set_defaults(func=_icl_eval)

    dg = sub.add_parser("diagnose", help="is a failure visual, semantic or a mapping failure?")
    dg.add_argument("--model", required=True, help="a model folder, hub name, or openai:MODEL with --base-url")
    dg.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    dg.add_argument("--out", required=True)
    dg.add_argument("--descriptions", help="YAML {class: description} (default: WordNet glosses)")
    dg.add_argument("--shots", type=int_at_least(0), default=4)
    dg.add_argument("--n-per-domain", type=int_at_least(1), default=20)
    dg.add_argument("--seed", type=int_at_least(0), default=0)
    dg.add_argument("--resume", action="store_true", help=RESUME_HELP)
    _add_served_options(dg)
    dg.set_defaults(func=_diagnose)
    _add_rm_parser(sub)
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse `argv`, taking key=value overrides anywhere on the line, as intermixed parsing does.

    argparse's `parse_intermixed_args` refuses parsers with subcommands, and plain parsing ends a
    `nargs="*"` positional at the first option: `train CONFIG --out DIR steps=5` leaves
    `steps=5` unrecognised. Those leftovers are appended to the command's overrides; a leftover
    option (`--x`), or one given to a command that takes no overrides, is still an error.
    """
    args, extras = parser.parse_known_args(argv)
    stray = [e for e in extras if e.startswith("-") or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extras:
        args.overrides = [*args.overrides, *extras]
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `robustvlm` console script."""
    args = parse_command_line(build_parser(), argv)
    try:
        return args.func(args)
    except MissingDataSource as err:  # not bad input: something to install
        print(f"error: {err}", file=sys.stderr)
        return 1
    except RobustVLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished work is kept; re-run with --resume to continue", file=sys.stderr
        )
        return 130
    finally:
        release_run_folders()


if __name__ == "__main__":
    sys.exit(main())
