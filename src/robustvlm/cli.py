"""The `robustvlm` command line: parse, load config, call one function per subcommand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from robustvlm.errors import RobustVLMError

RESUME_HELP = (
    "continue the run that --out holds (its settings must match; finished work is kept); "
    "without it, a folder that holds a run is refused"
)
IMAGE_ROOT_HELP = (
    "folder that relative image paths in record files are taken from "
    "(LLaVA's --image_folder; default: the data file's folder)"
)


def _data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.check import check_dataset

    report = check_dataset(
        args.path,
        fmt=args.format,
        env_column=args.env_column,
        env_map=args.env_map,
        task_rules=args.task_rules,
        image_root=args.image_root,
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
        resume=args.resume,
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
        from robustvlm.workflows.invariance_demo import run_invariance_demo

        run_invariance_demo(args.out or "demo_invariance", n_envs=args.n_envs, dim_inv=args.dim_inv,
                            dim_spu=args.dim_spu, quick=args.quick)
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
    ).fit
    print(
        f"{args.transform} line: slope {line.slope:.3f}, intercept {line.intercept:.3f}, "
        f"r2 {line.r2:.3f} over {line.n} models; wrote {args.out}/fit.json, scatter.png"
    )
    return 0


def _robustness_simulate(args: argparse.Namespace) -> int:
    from robustvlm.workflows.robustness import simulate_to_dir

    result = simulate_to_dir(args.out, seed=args.seed)
    print(
        f"fitted slope {result['fit_test']['slope']:.3f}, predicted {result['predicted']['slope']:.3f}; "
        f"wrote {args.out}"
    )
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
    )
    print((Path(args.out) / "diagnosis.md").read_text())
    return 0


def _metrics_help() -> str:
    """The eval command's --metrics help, from the metrics registry."""
    from robustvlm.evaluation.metrics.registry import METRICS, PER_BATCH, Metric

    def one(m: Metric) -> str:
        needs = m.needs
        if needs is None:
            return f"{m.name} ({m.title})"
        if needs.required:
            return f"{m.name} ({m.title}; needs the {needs.what}: {needs.how})"
        return f"{m.name} ({m.title}; {needs.what}: {needs.how}, default {needs.default})"

    always = ", ".join(m.name for m in METRICS.values() if m.when == PER_BATCH)
    return (
        f"comma-separated, of: {', '.join(one(m) for m in METRICS.values())}; all 0-1, higher "
        f"is better; {always} are always computed; the judge comes from --judge"
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
    check.set_defaults(func=_data_check)
    synth = data_sub.add_parser("synth", help="write a built-in synthetic benchmark")
    synth.add_argument("--benchmark", required=True, help="tasks | spurious | digits | domains")
    synth.add_argument("--out", required=True)
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--n-per-env", type=int, default=None)
    synth.set_defaults(func=_data_synth)

    tr = sub.add_parser("train", help="fine-tune a VLM from a YAML config")
    tr.add_argument("config")
    tr.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.lr=1e-4")
    tr.add_argument("--out", help="run directory (default runs/<config name>)")
    tr.add_argument("--resume", action="store_true", help=RESUME_HELP + " (from the last checkpoint)")
    tr.set_defaults(func=_train)

    ev = sub.add_parser("eval", help="generate and score a model on a dataset")
    ev.add_argument("--model", required=True, help="model directory (e.g. RUN/final) or hub name")
    ev.add_argument("--data", required=True)
    ev.add_argument("--out", required=True)
    ev.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ev.add_argument("--split", default="test")
    ev.add_argument("--batch-size", type=int, default=8)
    ev.add_argument("--max-new-tokens", type=int, default=128)
    ev.add_argument("--repetition-penalty", type=float, default=1.15)
    ev.add_argument("--max-per-env", type=int, default=None)
    ev.add_argument("--metrics", default="chrf,exact", help=_metrics_help())
    ev.add_argument(
        "--judge", help="YAML with the judge endpoint for cee: base_url, model, api_key_env, ..."
    )
    ev.add_argument("--env-map")
    ev.add_argument("--task-rules", action="store_true")
    ev.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
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
        help="overrides the config's launcher.kind: local (in process, one run after another), "
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
        "accuracy-on-the-line demo (a family of tiny models, probit fits)",
    )
    dm.add_argument("--quick", action="store_true", help="a smaller run (a few minutes)")
    dm.add_argument(
        "--out", help="default demo_out (demo_out_quick with --quick; demo_robustness for robustness)"
    )
    dm.add_argument("--n-envs", type=int, default=3, help="demo invariance: environments")
    dm.add_argument("--dim-inv", type=int, default=5, help="demo invariance: invariant dimensions")
    dm.add_argument("--dim-spu", type=int, default=5, help="demo invariance: spurious dimensions")
    dm.set_defaults(func=_demo)

    mc = sub.add_parser("mc", help="multiple-choice benchmarks with hard distractors")
    mc_sub = mc.add_subparsers(dest="mc_command", required=True)
    mb = mc_sub.add_parser("build", help="turn labelled images into K-way questions")
    mb.add_argument(
        "--data", required=True, help="labelled images (any loader; e.g. ROOT/DOMAIN/CLASS)"
    )
    mb.add_argument("--out", required=True, help="questions JSONL")
    mb.add_argument("--k", type=int, default=5)
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
    mb.add_argument("--n", type=int, default=None, help="number of questions (stratified by class)")
    mb.add_argument("--seed", type=int, default=0)
    mb.add_argument(
        "--class-subset", help="class list or {dataset_class: reference_class} mapping file"
    )
    mb.add_argument("--class-names", help="file mapping class keys (e.g. WordNet ids) to names")
    mb.add_argument("--prompt", type=int, default=0, help="prompt formulation 0-4")
    mb.add_argument("--circular", action="store_true", help="add every rotation of the options")
    mb.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    mb.set_defaults(func=_mc_build)

    me = mc_sub.add_parser("eval", help="score models on question files; results.csv with CIs")
    me.add_argument("--model", action="append", required=True, help="repeat for several models")
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
    me.add_argument("--batch-size", type=int, default=8)
    me.add_argument("--resume", action="store_true", help=RESUME_HELP + "; models and benchmarks may be added")
    me.set_defaults(func=_mc_eval)
    ms = mc_sub.add_parser("stability", help="accuracy against the number of sampled questions")
    ms.add_argument("predictions", help="per-question JSONL written by mc eval")
    ms.add_argument("--draws", type=int, default=50)
    ms.add_argument("--seed", type=int, default=0)
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
    fit.set_defaults(func=_robustness_fit)
    sim = rb_sub.add_parser(
        "simulate", help="the Gaussian location model behind accuracy on the line"
    )
    sim.add_argument("--out", default="robustness_simulate")
    sim.add_argument("--seed", type=int, default=0)
    sim.set_defaults(func=_robustness_simulate)

    icl = sub.add_parser("icl", help="zero-shot and in-context (k-shot) evaluation across domains")
    icl_sub = icl.add_subparsers(dest="icl_command", required=True)
    ie = icl_sub.add_parser("eval", help="k-shot accuracy per domain and demo policy")
    ie.add_argument("--model", required=True)
    ie.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    ie.add_argument("--out", required=True)
    ie.add_argument("--shots", default="0,1,2,4", help="comma-separated shot counts")
    ie.add_argument(
        "--demos",
        default="random",
        help="comma-separated: random, same-domain, cross-domain, label-shift, spurious",
    )
    ie.add_argument("--n-per-domain", type=int, default=20)
    ie.add_argument("--seed", type=int, default=0)
    ie.add_argument("--batch-size", type=int, default=8, help="prompts per generation batch")
    ie.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ie.set_defaults(func=_icl_eval)

    dg = sub.add_parser("diagnose", help="is a failure visual, semantic or a mapping failure?")
    dg.add_argument("--model", required=True)
    dg.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    dg.add_argument("--out", required=True)
    dg.add_argument("--descriptions", help="YAML {class: description} (default: WordNet glosses)")
    dg.add_argument("--shots", type=int, default=4)
    dg.add_argument("--n-per-domain", type=int, default=20)
    dg.add_argument("--seed", type=int, default=0)
    dg.add_argument("--resume", action="store_true", help=RESUME_HELP)
    dg.set_defaults(func=_diagnose)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `robustvlm` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RobustVLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished work is kept; re-run with --resume to continue", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
