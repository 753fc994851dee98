"""`robustvlm demo`: the built-in demos. Without a name: Colored MNIST on real images, ERM against
the invariant objectives on pixels and on a frozen VLM vision tower (`make demo`); named: `tasks`
(the Table-1 study on the OCR tasks; `--zoo`: on a pretrained zoo VLM), `robustness`, `invariance`, `ladder`, `reward`."""

from __future__ import annotations

import argparse

from robustvlm.cli.options import SubParsers, add_data_root, config_file, example, int_at_least
from robustvlm.errors import ConfigError
from robustvlm.extras import require

DEMOS = ("tasks", "robustness", "invariance", "ladder", "reward")
"""The named demos; without a name, `demo` runs the default (`workflows.demos.ladder.DEMO`)."""

#: option -> the demos that read it ("NAME" or "NAME --zoo"); given to any other demo it is refused.
_OPTION_SCOPES: dict[str, tuple[str, ...]] = {
    "--zoo": ("robustness --zoo", "tasks --zoo", "reward --zoo", "ladder --zoo"),
    "--members": ("robustness --zoo", "reward --zoo", "ladder --zoo"),
    "--modes": ("ladder --zoo",),
    "--inferred-envs": ("ladder",),
    "--methods": ("invariance", "tasks", "tasks --zoo", "ladder", "ladder --zoo"),
    "--seeds": ("ladder", "ladder --zoo"),
    "--n-envs": ("invariance",),
    "--dim-inv": ("invariance",),
    "--dim-spu": ("invariance",),
    "--budget": ("invariance",),
    "--launcher": ("invariance",),
}


def _dest(option: str) -> str:
    """The attribute argparse stores `option` in ("--n-envs" -> "n_envs")."""
    return option[2:].replace("-", "_")


def _refuse_unread_options(args: argparse.Namespace) -> None:
    """A ConfigError naming the first option given (set away from its default, which `add_demo`
    stores in `args.option_defaults`) to a demo that does not read it."""
    name = args.overrides[0] if args.overrides and args.overrides[0] in DEMOS else ""
    demo = f"{name} --zoo".strip() if args.zoo else name
    for option, demos in _OPTION_SCOPES.items():
        if getattr(args, _dest(option)) != args.option_defaults[option] and demo not in demos:
            shown = f"robustvlm demo {name if option == '--zoo' else demo}".strip()
            readers = ", ".join(f"`demo {d}`" for d in demos)
            raise ConfigError(f"{option} does not apply to `{shown}`: it applies to {readers} only")


def _demo_robustness(args: argparse.Namespace) -> int:
    """`demo robustness`: on the seven random-initialisation models, or on the zoo (`--zoo`)."""
    if args.zoo:
        from robustvlm.workflows.demos.robustness_zoo import run_zoo_robustness

        run_zoo_robustness(args.out or ("demo_robustness_zoo_quick" if args.quick else "demo_robustness_zoo"),
                           quick=args.quick, members=_members(args))
        return 0
    from robustvlm.workflows.demos.robustness import run_robustness_demo

    run_robustness_demo(args.out or "demo_robustness", quick=args.quick)
    return 0


def _demo_reward(args: argparse.Namespace) -> int:
    """`demo reward`: from the demo's fine-tuned tiny policy, or from a pretrained zoo VLM (`--zoo`)."""
    if args.zoo:
        from robustvlm.workflows.demos.reward_zoo import run_zoo_reward

        member = args.members.strip() if args.members else None
        if member and "," in member:
            raise ConfigError(f"demo reward --zoo: --members takes one zoo VLM, not {member!r}")
        run_zoo_reward(args.out or ("demo_reward_zoo_quick" if args.quick else "demo_reward_zoo"),
                       quick=args.quick, member=member)
        return 0
    from robustvlm.workflows.demos.reward import run_reward_demo

    run_reward_demo(args.out or ("demo_reward_quick" if args.quick else "demo_reward"), quick=args.quick)
    return 0


def _members(args: argparse.Namespace) -> list[str] | None:
    """`--members`' comma-separated zoo members (None when not given)."""
    return [n.strip() for n in args.members.split(",") if n.strip()] if args.members else None


def _demo_ladder(args: argparse.Namespace) -> int:
    """`demo ladder`: the whole ladder, or its VLM rungs from pretrained zoo members (`--zoo`);
    `--methods` and `--seeds` train a subset."""
    from robustvlm.workflows.demos.ladder import (
        FULL,
        QUICK,
        ladder_subset,
        run_ladder_demo,
        zoo_plan,
    )

    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.zoo:
        plan = zoo_plan(_members(args), quick=args.quick,
                        modes=[m.strip() for m in args.modes.split(",")] if args.modes else None)
        run_ladder_demo(args.out or ("demo_ladder_zoo_quick" if args.quick else "demo_ladder_zoo"), quick=args.quick,
                        plan=ladder_subset(plan, methods, args.seeds))
        return 0
    run_ladder_demo(args.out or ("demo_ladder_quick" if args.quick else "demo_ladder"), quick=args.quick,
                    plan=ladder_subset(QUICK if args.quick else FULL, methods, args.seeds),
                    inferred_envs=args.inferred_envs)
    return 0


def _seeds(text: str) -> list[int]:
    """`--seeds`' comma-separated model seeds (integers >= 0)."""
    return [int_at_least(0)(part.strip()) for part in text.split(",") if part.strip()]


def _demo(args: argparse.Namespace) -> int:
    _refuse_unread_options(args)
    if args.overrides[:1] in (["robustness"], ["ladder"]):
        require("data", f"demo {args.overrides[0]} (its real MNIST digits)")
    if args.overrides[:1] == ["robustness"]:
        return _demo_robustness(args)
    if args.overrides[:1] == ["invariance"]:
        from robustvlm.config import read_yaml_mapping, validate_config
        from robustvlm.workflows.demos.invariance import run_invariance_demo
        from robustvlm.workflows.launchers import JobRunnerConfig

        launcher = None
        if args.launcher:
            raw = read_yaml_mapping(args.launcher, "launcher", "launcher settings")
            launcher = validate_config(raw, str(args.launcher), JobRunnerConfig)
        methods = tuple(m.strip() for m in args.methods.split(",")) if args.methods else None
        budget = "quick" if args.quick else args.budget
        run_invariance_demo(args.out or "demo_invariance", n_envs=args.n_envs, dim_inv=args.dim_inv,
                            dim_spu=args.dim_spu, budget=budget, methods=methods, launcher=launcher)
        return 0
    if args.overrides[:1] == ["ladder"]:
        return _demo_ladder(args)
    if args.overrides[:1] == ["reward"]:
        return _demo_reward(args)
    if args.overrides[:1] == ["tasks"]:
        from robustvlm.workflows.demos.finetune import run_demo

        chosen = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
        default = "demo_tasks_zoo" if args.zoo else "demo_tasks"
        run_demo(args.out or (default + "_quick" if args.quick else default), quick=args.quick,
                 overrides=args.overrides[1:], zoo=args.zoo, methods=chosen)
        return 0
    if args.overrides:
        raise ConfigError(f"demo: unknown demo or override {args.overrides[0]!r}: name one of {', '.join(DEMOS)}; "
                          "key=value overrides apply to `robustvlm demo tasks` (the Table-1 study)")
    if args.quick:
        require("data", "demo --quick (its real MNIST digits)")
    from robustvlm.workflows.demos.ladder import DEMO, DEMO_QUICK, run_ladder_demo

    run_ladder_demo(args.out or ("demo_out_quick" if args.quick else "demo_out"), quick=args.quick,
                    plan=DEMO_QUICK if args.quick else DEMO)
    return 0


def add_demo(sub: SubParsers) -> None:
    dm = sub.add_parser(
        "demo",
        help="built-in demos; default: Colored MNIST on real images, ERM vs IRMv1 / V-REx / BIRM / Dynamic "
        "BIRM on pixels and a frozen VLM vision tower, 3 seeds (about 5 min on 2 cores)",
        epilog=example("robustvlm demo --quick --out demo_out_quick"),
    )
    dm.add_argument(
        "overrides",
        nargs="*",
        help="which demo: none for the default; `tasks` for the Dynamic BIRM paper's Table 1 in miniature "
        "(ERM, BIRM, Dynamic BIRM fine-tuning a tiny VLM on the OCR tasks, 3 seeds), then its key=value "
        "config overrides; `robustness` for the accuracy-on-the-line demo (a family of tiny models, probit "
        "fits); `reward` for the shortcut-aware reward-model demo (generalization matrices, SFD, Best-of-N); "
        "`ladder` for the whole invariance ladder (the IRM paper's Colored MNIST on real images, pixels, "
        "frozen vision towers and VLMs); `invariance` for the linear unit tests of invariance",
    )
    dm.add_argument("--quick", action="store_true", help="a smaller run (a smoke test, seconds to minutes)")
    dm.add_argument(
        "--out", help="default demo_out (demo_out_quick with --quick); demo_tasks[_zoo][_quick] for tasks; "
        "demo_robustness for robustness; demo_reward[_zoo][_quick] for reward; demo_ladder[_zoo][_quick] for ladder"
    )
    _add_zoo_options(dm)
    add_data_root(dm)
    dm.add_argument("--inferred-envs", action="store_true",
                    help="demo ladder: also infer environments from data (EIIL, loss split, k-means) on the "
                    "pixel rung and train IRMv1 / Dynamic BIRM on them")
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
        "dynamic_birm,oracle; irm_eiil and dynamic_birm_eiil train on environments inferred by EIIL); "
        "demo tasks: the study's methods by objective name (default erm,birm,dynamic_birm); demo ladder: "
        "the methods to train (default erm,irm,vrex,birm,dynamic_birm,oracle)",
    )
    dm.add_argument("--seeds", type=_seeds, metavar="SEEDS",
                    help="demo ladder: comma-separated model seeds (default 0,1,2; --quick: 0); a run's "
                    "results do not depend on the other methods or seeds beside it")
    dm.add_argument(
        "--launcher",
        metavar="YAML",
        type=config_file,
        help="demo invariance: the job runner's settings (a sweep's launcher: section: kind local / "
        "multi-gpu / slurm, workers, cluster, parameters); default 2 local worker processes",
    )
    dm.set_defaults(func=_demo, option_defaults={o: dm.get_default(_dest(o)) for o in _OPTION_SCOPES})


def _add_zoo_options(dm: argparse.ArgumentParser) -> None:
    """`demo`'s options for the demos' variants on the pretrained model zoo."""
    dm.add_argument("--zoo", action="store_true",
                    help="demo robustness: over the model zoo's pretrained members (`zoo build` first; `--quick`: "
                    "its quick members) on Fashion-MNIST test-split scans, with the task-signal experiment on a "
                    "zoo tower; default --out demo_robustness_zoo[_quick]. demo tasks: the Table-1 study "
                    "fine-tuning the pretrained zoo:llava-clip-m (`--quick`: zoo:quick-llava) on the "
                    "fashion-tasks benchmark, its zero-shot scores beside. demo reward: the reward ladder from "
                    "zoo:idefics3-siglip-m (`--quick`: zoo:quick-idefics3) on Fashion-MNIST preference pairs with "
                    "the same text shortcuts, SFC weights per step; default --out demo_reward_zoo[_quick]. demo "
                    "ladder: the ladder's VLM rungs (head, lora, full) from a pretrained zoo VLM instead of the "
                    "random tiny one; default --out demo_ladder_zoo[_quick]")
    dm.add_argument("--members", metavar="NAMES",
                    help="demo robustness --zoo: measure only these zoo members (comma-separated; a reduced zoo: "
                    ">= 2 dual encoders and a VLM); demo reward --zoo: the one zoo VLM to start from; demo ladder "
                    "--zoo: the zoo VLMs to start from (default idefics3-siglip-m; --quick: quick-idefics3)")
    dm.add_argument("--modes", metavar="MODES", help="demo ladder --zoo: the VLM rungs to run (comma-separated "
                    "of head, lora, full; default all three; --quick: head,full)")
