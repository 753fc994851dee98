"""`robustvlm train`, `study` and `sweep`: fine-tuning runs, method x seed studies, hyperparameter sweeps."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.options import SubParsers, add_train_parser, config_file, example


def _train(args: argparse.Namespace) -> int:
    from robustvlm.config import RunConfig, load_config
    from robustvlm.workflows.finetune.train import train

    cfg: RunConfig = load_config(args.config, args.overrides)
    result = train(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"final model: {Path(result.final_dir).resolve()}")
    return 0


def _study(args: argparse.Namespace) -> int:
    from robustvlm.workflows.finetune.study import run_study, study_runs
    from robustvlm.workflows.finetune.study_dry_run import plan_lines

    name = Path(args.config).stem + ("-smoke" if args.smoke else "")
    out = Path(args.out or Path("studies") / name).resolve()
    if args.dry_run:
        print("\n".join(plan_lines(study_runs(args.config, smoke=args.smoke), out)))
        return 0
    run_study(args.config, out, smoke=args.smoke, heading=f"Study {Path(args.config).stem}")
    print(f"report: {out / 'report.md'} and {out / 'report.html'}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from robustvlm.workflows.finetune.sweep import run_sweep, sweep_plan
    from robustvlm.workflows.finetune.sweep_dry_run import sweep_plan_lines

    name = Path(args.config).stem + ("-smoke" if args.smoke else "")
    out = Path(args.out or Path("sweeps") / name)
    if args.dry_run:
        plan = sweep_plan(args.config, out.resolve(), smoke=args.smoke, launcher=args.launcher, check_envs=False)
        print("\n".join(sweep_plan_lines(plan)))
        return 0
    run_sweep(args.config, out, launcher=args.launcher, smoke=args.smoke)
    return 0


def add_train(sub: SubParsers) -> None:
    add_train_parser(sub, "fine-tune a VLM from a YAML config", "train.lr=1e-4", _train,
                     run_example="robustvlm train configs/erm_tasks.yaml --out runs/erm train.steps=500")


def add_study(sub: SubParsers) -> None:
    st = sub.add_parser("study", help="methods x seeds -> train -> evaluate -> Table-1 report (resumable)",
                        epilog=example("robustvlm study configs/paper/dynamic_birm_smolvlm.yaml --dry-run"))
    st.add_argument("config", type=config_file, help="study YAML: base, methods, seeds, metrics, launcher")
    st.add_argument("--out", help="study directory (default studies/<config name>[-smoke])")
    st.add_argument("--dry-run", action="store_true",
                    help="print the plan (runs, steps, models, budget) and train nothing")
    st.add_argument(
        "--smoke",
        action="store_true",
        help="check a real recipe end to end: tiny offline model, built-in data, a few steps, "
        "first seed, no judge or launcher",
    )
    st.set_defaults(func=_study)


def add_sweep(sub: SubParsers) -> None:
    sw = sub.add_parser(
        "sweep",
        help="random hyperparameter search x trial seeds, DomainBed's model selection (resumable)",
        epilog=example("robustvlm sweep configs/sweep_spurious.yaml --dry-run"),
    )
    sw.add_argument(
        "config", type=config_file, help="sweep YAML: base, methods, n_draws, seeds, checkpoint_every, ..."
    )
    sw.add_argument("--out", help="sweep directory (default sweeps/<config name>[-smoke])")
    sw.add_argument(
        "--launcher",
        choices=["local", "multi-gpu", "slurm"],
        help="overrides the config's launcher.kind: local (this process, or a pool of CPU worker processes with launcher.workers), "
        "multi-gpu (one worker process per GPU), slurm (submitit)",
    )
    sw.add_argument("--dry-run", action="store_true",
                    help="print the plan (runs, draws, steps, models, budget) and train nothing")
    sw.add_argument(
        "--smoke",
        action="store_true",
        help="check a sweep end to end: tiny offline model, built-in data, 4 steps, at most 2 draws, "
        "first seed, in process",
    )
    sw.set_defaults(func=_sweep)
