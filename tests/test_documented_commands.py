"""Every command line printed in a code block of README.md, docs/ and BENCHMARKS.md, and every
example in a command's help (`robustvlm CMD --help`, groups' helps such as `robustvlm data --help`
included, after the docs' lines), is known to this test: each `robustvlm` line parses as written, the configs it names exist, and each line
either runs here with tiny settings (appended overrides or options, listed in RUNS) or is listed
in NOT_RUN with the reason. A new documented line fails the test until it is classified, so a
documented example can never break unnoticed (issue 17.1: the README's first example was refused).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from bad_input import run_cli
from documented import documented_commands

ROOT = Path(__file__).resolve().parents[1]


#: {documented line: what is appended to run it here with tiny settings}.
RUNS = {
    "robustvlm robustness convert docs/data/openclip_results.csv --out runs/openclip_long.csv": "",
    "robustvlm robustness convert tests/data/fixtures/results/clip_benchmark --out runs/clip_benchmark_long.csv": "",
    "robustvlm robustness fit tests/data/fixtures/results/lmms_eval --ref ai2d --shift mmstar --out runs/lmms_fit": "",
    "robustvlm compare tests/data/fixtures/results/lmms_eval/lmms-lab__llava-onevision-qwen2-0.5b-ov "
    "tests/data/fixtures/results/lmms_eval/lmms-lab__llava-onevision-qwen2-7b-ov": "--n-boot 100",
    'robustvlm robustness fit docs/data/openclip_results.csv --ref "ImageNet 1k" --shift "ImageNet-R" --out runs/openclip_fit':
        "",
    'robustvlm robustness fit docs/data/openclip_results.csv --ref "ImageNet 1k" --shift "ImageNet-R" --group-by '
    'source --out runs/openclip_r': "--n-boot 100",
    "robustvlm robustness fit docs/data/vlmevalkit_work --ref MMBench_DEV_EN --shift MMStar --out runs/vlmevalkit_fit": "",
    "robustvlm robustness subsets docs/data/vlmevalkit_work --ref MMBench_DEV_EN --shift MMStar --by category "
    "--out runs/subsets": "",
    "robustvlm compare docs/data/vlmevalkit_work/sim_llava_v1.5_7b docs/data/vlmevalkit_work/sim_idefics2_8b "
    "--out runs/compare_vlmevalkit": "",
    "robustvlm data synth --benchmark tasks --out data/tasks": "--n-per-env 2",
    "robustvlm data synth --benchmark spurious --out data/bench": "--n-per-env 1",
    "robustvlm data synth --benchmark tasks --out data/bench --overwrite": "--n-per-env 1",
    "robustvlm train configs/erm_tasks.yaml --out runs/erm train.steps=500": "train.steps=2 train.save_every=2",
    "robustvlm eval --model runs/erm/final --data data/tasks --out runs/erm/eval": "--max-per-env 1 --max-new-tokens 4",
    "robustvlm train configs/erm_tasks.yaml --out runs/erm_qwen2_vl model.name=tiny:qwen2_vl":
        "train.steps=2 train.save_every=2",
    "robustvlm sweep configs/sweep_spurious.yaml --dry-run": "",
    "robustvlm sweep configs/sweep_spurious.yaml --smoke": "",
    "robustvlm study configs/paper/dynamic_birm_smolvlm.yaml --dry-run": "",
    "robustvlm study configs/paper/dynamic_birm_smolvlm.yaml --smoke": "",
    "robustvlm rm matrix configs/paper/shortcut_aware_rm.yaml --dry-run": "",
    "robustvlm rm matrix configs/paper/shortcut_aware_rm.yaml --smoke": "",
    "robustvlm rm train configs/reward/shortcut_aware.yaml --out runs/rm_shortcut_aware":
        "train.steps=2 train.save_every=2 data.n_per_env=8",
    "robustvlm rm eval --model runs/rm_shortcut_aware/final --data runs/rm_shortcut_aware/data --out runs/rm_shortcut_aware/eval":
        "--max-per-env 2",
    "robustvlm rm matrix configs/reward/matrix_salient.yaml --out runs/matrix_salient": "--smoke",
    "robustvlm rm matrix configs/reward/matrix_mixed.yaml --out runs/matrix_mixed": "--smoke",
    "robustvlm rm train configs/reward/warm_mixed.yaml --out runs/warm_mixed":
        "model.name=tiny:idefics3 train.steps=2 train.save_every=2 data.n_per_env=8",
    "robustvlm rm matrix configs/reward/matrix_warm_mixed.yaml --out runs/matrix_warm_mixed": "--smoke",
    "robustvlm rm matrix configs/reward/matrix_zoo_loglik.yaml --out runs/matrix_zoo_loglik": "--smoke",
    "robustvlm zoo list": "",
    "robustvlm data corrupt data/domains/digits/clean --out data/digits-corrupted": "--corruptions fog,contrast --severities 2",
    "robustvlm zoo probe-recall --fresh-depth 2 --steps 4000 --every 100 --out out/recall_fresh2": "--steps 2 --every 1",
    "robustvlm zoo probe-recall --fresh-depth 2 --steps 1500 --out out/recall_fresh2_short": "--steps 2 --every 1",
    "robustvlm zoo probe-recall --fresh-depth 2 --steps 3000 --out out/recall_fresh2_3000": "--steps 2 --every 1",
    "robustvlm zoo probe-recall --fresh-depth 2 --steps 4000 --every 100 --save-model --out out/recall_fresh2_saved":
        "--steps 2 --every 1",
    "robustvlm zoo probe-context --init out/recall_fresh2_saved/model --named --queries 6 --steps 300 --out out/named_after_recall":
        "--steps 2 --every 1 --batch-size 2 --n-images 100",
    "robustvlm configs list": "",
    "robustvlm data synth --benchmark domains --out data/domains": "--n-per-env 10",
    "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out runs/icl_digits --shots 0,1,2 --demos random,same-domain,cross-domain --n-per-env 4":
        "--max-new-tokens 4",
    "robustvlm diagnose --model tiny:idefics3 --data data/domains/digits --out runs/diagnose_digits --shots 1 --n-per-env 4":
        "--max-new-tokens 4",
    "robustvlm mc build --data data/domains/digits --env clean --out q/clean.jsonl": "--k 3",
    "robustvlm mc build --data data/domains/digits --env rotated --out q/rotated.jsonl": "--k 3",
    "robustvlm mc build --data data/domains/digits --out q/digits.jsonl --k 3 --n 40": "--n 6",
    "robustvlm mc eval --model tiny:idefics3 --model tiny:clip --benchmark q/digits.jsonl --out runs/mc_blind --blind": "",
    "robustvlm mc eval --model tiny:idefics3 --benchmark q/digits.jsonl --out runs/mc_blind_generate --method generate --blind":
        "--max-new-tokens 2",
    "robustvlm eval --model tiny:idefics3 --data data/tasks --out runs/eval_blind --max-per-env 4 --blind":
        "--max-per-env 1 --max-new-tokens 2",
    "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out runs/icl_blind --shots 0,1 --n-per-env 4 --blind":
        "--n-per-env 1 --max-new-tokens 2",
    "robustvlm mc build --data data/domains/digits --out q/digits_curated.jsonl --k 3 --n 40 --filter-blind tiny:idefics3":
        "--n 6",
    "robustvlm mc eval --model tiny:clip --model tiny:siglip --benchmark q/clean.jsonl --benchmark q/rotated.jsonl --out runs/mc_paired --baseline tiny:clip":
        "",
    "robustvlm compare runs/mc_paired/tiny_siglip/clean.jsonl runs/mc_paired/tiny_clip/clean.jsonl": "",
    "robustvlm configs copy erm_tasks my_configs": "",
    "robustvlm train erm_tasks --out runs/erm_tour train.steps=200": "train.steps=2 train.save_every=2",
    "robustvlm eval --model runs/erm_tour/final --data data/tasks --out runs/erm_tour/eval --max-per-env 4":
        "--max-new-tokens 4",
    # the examples of the commands' help that no page prints
    "robustvlm data check data/tasks": "",
    "robustvlm envs infer --model runs/erm/final --data data/tasks --method loss-split --out runs/erm_envs":
        "--batch-size 4",
    "robustvlm mc stability runs/mc_paired/tiny_siglip/clean.jsonl": "--draws 5",
    "robustvlm robustness simulate --out runs/simulate": "",
    "robustvlm icl defined-labels --model tiny:llava --data data/domains/shapes --query-domain photo --out runs/defined_shapes":
        "--trials 2",
    "robustvlm rm data check runs/rm_shortcut_aware/data": "",
    "robustvlm rm sample --data runs/rm_shortcut_aware/data --policy tiny:idefics3 --k 4 --out runs/bon/samples":
        "--k 2 --max-per-env 1 --max-new-tokens 4",
    "robustvlm rm score --candidates runs/bon/samples/candidates.jsonl --model runs/rm_shortcut_aware/final --out runs/bon/scores":
        "",
    "robustvlm rm bon --scores shortcut_aware=runs/bon/scores/scores.jsonl --out runs/bon/curves": "",
    "robustvlm embed eval --model tiny:idefics3 --family vlm2vec-mixed --benchmark q/digits.jsonl --out runs/embed_eval": "",
    "robustvlm mc eval --model tiny:idefics3 --benchmark q/digits.jsonl --out runs/mc_shard0 --shard 0/2": "",
    "robustvlm mc eval --model tiny:idefics3 --benchmark q/digits.jsonl --out runs/mc_shard1 --shard 1/2": "",
    "robustvlm merge runs/mc_shard0 runs/mc_shard1 --out runs/mc_merged": "",
    "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out runs/icl_shard0 --shots 0,1 --n-per-env 4 "
    "--shard 0/2": "--max-new-tokens 4",
    "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out runs/icl_shard1 --shots 0,1 --n-per-env 4 "
    "--shard 1/2": "--max-new-tokens 4",
    "robustvlm merge runs/icl_shard0 runs/icl_shard1 --out runs/icl_merged": "",
    "robustvlm diagnose --model tiny:idefics3 --data data/domains/digits --out runs/diagnose_shard0 --shots 1 "
    "--n-per-env 4 --shard 0/2": "--max-new-tokens 4",
    "robustvlm diagnose --model tiny:idefics3 --data data/domains/digits --out runs/diagnose_shard1 --shots 1 "
    "--n-per-env 4 --shard 1/2": "--max-new-tokens 4",
    "robustvlm merge runs/diagnose_shard0 runs/diagnose_shard1 --out runs/diagnose_merged": "",
    "robustvlm grid configs/eval_grid.yaml --dry-run": "",
    "robustvlm grid configs/eval_grid.yaml --out runs/grid": "",
}

#: {documented line: why it does not run in the test suite}.
NOT_RUN = {
    "make figures zoo-ii": "needs the Zoo II member zoo:llava-clip-m-curriculum (the full zoo build first); its "
                           "figure kinds are tested in tests/report/test_zoo_ii_figures.py",
    "make figures zoo-iii": "needs the Zoo III member zoo:llava-clip-m-lmfirst (the full zoo build first); its "
                            "figure kinds are Zoo II's, tested in tests/report/test_zoo_ii_figures.py",
    "robustvlm zoo build --members llava-clip-m-lmfirst": "a full member and its tower (about 15 CPU-minutes; "
                                                          "docs/results/zoo-iii.md); its quick version is built "
                                                          "in tests/workflows/test_zoo_lmfirst.py",
    "make figures-openclip": "six group fits of the shipped open_clip table (minutes on the shared machine); "
                             "its tables are checked in tests/workflows/measure/test_openclip_page.py",
    'robustvlm robustness fit docs/data/openclip_results.csv --ref "ImageNet 1k" --shift "ImageNet-R" --group-by '
    'source --baseline "LAION-2B/5B" --baseline-table my_results.csv --out runs/mine_vs_laion':
        "needs your own results; --baseline-table is tested in tests/workflows/measure/test_results_files_fit.py",
    "robustvlm compare out/model_a/20260101_120000_samples_mmbench_en.jsonl "
    "out/model_b/20260101_130000_samples_mmbench_en.jsonl":
        "needs two lmms-eval runs; runs on samples built like lmms-eval's in tests/workflows/measure/test_compare_imports.py",
    "robustvlm zoo build --quick": "about 1.5 CPU-minutes (its language-model-first member 60 CPU-s); run by tests/workflows/test_zoo.py (its module fixture)",
    "robustvlm zoo probe-context --fresh-depth 2 --named --queries 6 --steps 300 --out out/named_fresh2":
        "about 3 CPU-minutes; the same command with --init runs above at tiny settings",
    "robustvlm zoo build --jobs 2": "the full zoo: 23 min wall on the busy 2-core machine (docs/guides/model-zoo.md)",
    "robustvlm zoo build --members llava-clip-m": "a full member and its tower (minutes); builds of named members run in tests/workflows/test_zoo.py",
    "robustvlm zoo build --members clip-m,llava-clip-m": "two full members (minutes); builds of named members run in tests/workflows/test_zoo.py",
    "make demo": "the full demo (minutes); `demo --quick` runs in tests/experiments/demos/test_default_demo.py",
    "robustvlm demo --quick --out demo_out_quick": "about 20 CPU-seconds; runs in tests/experiments/demos/test_default_demo.py",
    "robustvlm demo default --quick --out demo_out_quick":
        "the same demo as `demo --quick` (its name spelt out); runs in tests/experiments/demos/test_default_demo.py",
    "robustvlm demo tasks --out demo_tasks":
        "a full study (minutes); `demo tasks --quick` runs with tiny settings in tests/experiments/demos/test_finetune.py",
    "make test": "this suite itself",
    "robustvlm data fetch fashion-mnist --to data/fashion-mnist":
        "downloads 30 MB; fetched and checked offline from a local mirror in tests/data/test_fashion_source.py",
    "make test-fast": "this suite's fast tier",
    "make install": "creates .venv and installs the package (the same steps as tests/test_install.py)",
    "robustvlm compare runs/erm/eval runs/dynamic_birm/eval --metric chrf --out runs/compare_erm_dbirm":
        "needs two evaluated runs; compare on hand-written runs is tested in tests/analysis/test_paired.py",
    "robustvlm compare mc_out/model-a/clean.jsonl mc_out/model-b/clean.jsonl --cluster id":
        "needs two mc eval runs; compare on mc question files is tested in tests/analysis/test_paired.py",
    "robustvlm rm data check hf:MMInstruction/VL-RewardBench --format vl-rewardbench --split test":
        "downloads the benchmark; its layout is read from a fixture in tests/workflows/reward/test_benchmarks_and_swap.py",
    "robustvlm rm eval --model runs/rm_shortcut_aware/final --data vl_rewardbench/test-00000-of-00001.parquet --format vl-rewardbench --out runs/rm_shortcut_aware/vl_rewardbench":
        "needs the downloaded benchmark; rm eval on a fixture in its layout runs in tests/workflows/reward/test_benchmarks_and_swap.py",
    "robustvlm rm eval --model runs/rm_shortcut_aware/final --data multimodal_rewardbench/data/all_data.json --format mm-rewardbench --out runs/rm_shortcut_aware/mm_rewardbench":
        "needs the downloaded benchmark; rm eval on a fixture in its layout runs in tests/workflows/reward/test_benchmarks_and_swap.py",
    "robustvlm rm eval --model runs/rm_shortcut_aware/final --data mmrb2/benchmark/reasoning.json --format mmrb2 --out runs/rm_shortcut_aware/mmrb2_reasoning":
        "needs the built benchmark; rm eval on a fixture in its layout runs in tests/workflows/reward/test_field_benchmark_layouts.py",
    "robustvlm rm eval --model runs/rm_shortcut_aware/final --data rmhackbench/test-00000-of-00001.parquet --format rmhackbench --out runs/rm_shortcut_aware/rmhackbench":
        "needs the downloaded benchmark; rm eval on a fixture in its layout runs in tests/workflows/reward/test_field_benchmark_layouts.py",
    "make gpu-check GPU_CHECK_DRY=1": "the CPU dry run (about a minute); tests/benchmarks/test_gpu_check.py runs it",
    "make gpu-check GPU_CHECK_PYTHON=python3": "needs a lent GPU machine (docs/gpu-check.md); its dry run is tested",
    "make bench-real": "real-size CPU benchmark (an hour on 2 shared cores); figures in BENCHMARKS.md",
    "robustvlm demo --quick --out demo_quick": "minutes on 2 cores; `demo --quick` runs in tests/experiments/demos/test_default_demo.py",
    "robustvlm study configs/study_tasks.yaml --out runs/study_tasks": "a full study (minutes); study runs are tested in tests/workflows/finetune/test_study.py",
    "robustvlm sweep configs/sweep_spurious.yaml --out sweeps/sweep_spurious": "a full sweep (30 min); its smoke run is run here",
    "robustvlm sweep configs/sweep_digits.yaml --out sweeps/sweep_digits": "a full sweep (20 min)",
    "robustvlm embed train configs/paper/vlm2vec_vqa.yaml --out runs/vlm2vec_vqa": "hub model (GPU machine)",
    "robustvlm embed train configs/paper/vlm2vec_caption.yaml --out runs/vlm2vec_caption": "hub model (GPU machine)",
    "robustvlm embed train my_embed.yaml embed.chunk_size=8 --out runs/emb": "the user's own config",
    "robustvlm robustness task-signal --out task_signal": "the full experiment (8 min)",
    "robustvlm zoo build": "the full zoo (23 min wall with --jobs 2 on the shared 2-core machine; see the model-zoo guide)",
    "robustvlm demo robustness --zoo --out figures/robustness_zoo": "the full zoo's measurement (needs `zoo build`; see docs/results/zoo-robustness.md for its wall time)",
    "robustvlm demo tasks --zoo --out figures/tasks_zoo": "the full study on zoo:llava-clip-m (needs `zoo build`; see docs/results/zoo-tasks.md for its wall time)",
    "robustvlm demo tasks --zoo --quick --out tasks_zoo_quick": "needs the quick zoo's LLaVA (`zoo build --quick`); run by tests/experiments/demos/test_tasks_zoo.py",
    "robustvlm demo tasks --zoo --methods erm,vrex --out tasks_zoo_vrex": "the full study with other objectives (needs `zoo build`); --methods runs in tests/experiments/demos/test_registered_objective.py",
    "robustvlm zoo build --members idefics3-siglip-m": "builds a full zoo member (minutes of CPU; already built in the shared cache)",
    "robustvlm demo ladder --zoo --modes head,lora --out figures/ladder_zoo_head_lora": "the pretrained head and lora rungs' measurement (18 min on the 2-core machine; docs/results/ladder.md)",
    "robustvlm demo ladder --zoo --members llava-clip-m --modes full --out figures/ladder_zoo_llava": "the full rung from zoo:llava-clip-m (18 min on the 2-core machine; docs/results/ladder.md)",
    "python -m robustvlm.experiments.ladder.trace figures/ladder_zoo vlm:full:zoo:idefics3-siglip-m dynamic_birm 1 smooth=lambda": "one traced full-rung run (about a minute of CPU after the ladder run it reads); the module's command line runs with tiny settings in tests/experiments/demos/test_ladder_trace.py",
    "python -m robustvlm.experiments.ladder.trace figures/ladder_zoo vlm:full:zoo:idefics3-siglip-m dynamic_birm 1 smooth=risks": "as the line above, with the risks averaged",
    "robustvlm zoo probe-context --init zoo:llava-clip-m --named --queries 6 --steps 600 --out out/probe_named": "a context probe run (23 min on the 2-core machine; the command runs with tiny settings in tests/workflows/test_zoo_context.py)",
    "robustvlm zoo probe-context --init zoo:llava-clip-m --queries 4 --steps 600 --out out/probe_pictures": "a context probe run (23 min on the 2-core machine; tiny settings in tests/workflows/test_zoo_context.py)",
    "robustvlm zoo probe-context --fresh-depth 4 --named --queries 6 --steps 600 --out out/probe_fresh4_named": "a context probe run (26 min on the 2-core machine; tiny settings in tests/workflows/test_zoo_context.py)",
    "robustvlm demo ladder --zoo --modes full --out figures/ladder_zoo": "the pretrained ladder rung's measurement (25 min on the shared 2-core machine; docs/results/ladder.md)",
    "robustvlm demo ladder --zoo --modes full --methods erm,dynamic_birm --seeds 0,1,2,3,4,5 --out figures/ladder_zoo": "six seeds of two methods at the pretrained full rung (about 3 CPU-minutes after the command above; docs/results/ladder.md)",
    "robustvlm demo ladder --zoo --modes full --methods erm,dynamic_birm --seeds 0,1,2,3,4,5 --test-pictures 3000 --out figures/ladder_zoo_t3000": "twelve pretrained full-rung runs on 3,000 test pictures (about 8 CPU-minutes; docs/results/ladder.md; --test-pictures is run by tests/data/test_colored_mnist.py and the quick zoo ladder)",
    "robustvlm zoo probe-recall --init zoo:llava-clip-m --steps 4000 --batch-size 32 --out out/recall_llava_b32": "4,000 recall steps from a full zoo member (about 3 CPU-minutes after the zoo's build; docs/results/zoo-ii.md)",
    "robustvlm demo ladder --zoo --members idefics3-siglip-m,llava-clip-m --out demo_ladder_zoo": "two members' three rungs (about 2 CPU-hours); the same code path as the measured one",
    "robustvlm demo ladder --zoo --quick --out demo_ladder_zoo_quick": "needs the quick zoo (`zoo build --quick`); run by tests/experiments/demos/test_ladder_zoo.py",
    "robustvlm demo robustness --zoo --quick --out zr_quick": "needs the quick zoo (`zoo build --quick`); run by tests/experiments/demos/test_robustness_zoo.py",
    "robustvlm demo robustness --zoo --members MEMBERS --out figures/robustness_zoo": "a reduced zoo's measurement (minutes to an hour); the same code path as the full one",
    "robustvlm demo reward --zoo --out demo_reward_zoo": "the full measurement from zoo:idefics3-siglip-m (needs `zoo build`; 24 min on the shared 2-core box, docs/results/reward.md)",
    "robustvlm demo reward --zoo --quick": "needs the quick zoo (`zoo build --quick`); run by tests/experiments/demos/test_reward_zoo.py",
    "robustvlm rm train configs/reward/zoo_warm.yaml --out runs/zoo_warm": "needs the full zoo's member and `demo reward --zoo`'s data; the same rm train path runs on tiny models above",
    "robustvlm rm matrix configs/reward/matrix_zoo_warm.yaml --out runs/matrix_zoo_warm": "needs the zoo warm start (above) and 14 min; the same rm matrix path runs in its smoke runs above",
    "robustvlm rm matrix configs/reward/matrix_zoo_loglik_fresh.yaml --out runs/matrix_zoo_loglik_fresh": "configs/reward/matrix_zoo_loglik.yaml (its smoke run runs above) with seeds 3-5; 13 min",
    "robustvlm robustness task-signal --quick --out ts_quick": "about a minute; tested in tests/workflows/measure/test_task_signal.py",
    "robustvlm robustness task-signal my.yaml workers=1 --out ts": "the user's own config",
    "robustvlm study configs/paper/dynamic_birm_smolvlm.yaml --out studies/dynamic_birm_smolvlm": "hub model and data (GPU machine); its smoke run is run here",
    "robustvlm rm matrix configs/paper/shortcut_aware_rm.yaml --out studies/shortcut_aware_rm": "hub model and data (GPU machine); its smoke run is run here",
    "robustvlm demo invariance --out figures/invariance/default": "the full demo (minutes); `--quick` runs in tests/experiments/demos/test_invariance.py",
    "robustvlm demo invariance --methods irm,dynamic_birm,irm_eiil,dynamic_birm_eiil --out figures/invariance_eiil":
        "minutes; the EIIL methods run quick in tests/experiments/demos/test_invariance.py",
    "robustvlm demo invariance --budget paper --launcher configs/launchers/slurm_invariance.yaml":
        "a SLURM cluster (42,000 models); the launcher file is checked to exist and the line to parse",
    "robustvlm rm matrix configs/reward/matrix_long_400.yaml --out runs/matrix_long_400": "needs the full reward demo's policy (15 min) and 25 min more; tests/workflows/reward/test_matrix.py checks the config",
    "robustvlm rm matrix configs/reward/matrix_cue70.yaml --out runs/matrix_cue70": "needs the full reward demo's policy and 16 min more; tests/workflows/reward/test_matrix.py checks the config",
    "robustvlm rm matrix configs/reward/matrix_salient_300.yaml --out runs/matrix_salient_300":
        "needs the full reward demo's policy and about 7 min more; matrix_salient.yaml's smoke run runs the same recipe, "
        "tests/workflows/reward/test_matrix.py checks the config",
    "robustvlm data synth --benchmark fashion-test --out data/fashion-test --n-per-env 20":
        "needs Debian's dataset-fashion-mnist; the suite is built and checked in tests/data/synth/test_real.py",
    "robustvlm icl eval --model zoo:llava-clip-m --data data/fashion-test --out runs/icl_llava --shots 0,1,2,3 --demos random,same-domain,cross-domain,label-shift,spurious --n-per-env 100 --seed 0":
        "needs the full zoo's member (zoo build, tens of minutes) and 5 min; icl eval runs on tiny:idefics3 above",
    "robustvlm diagnose --model zoo:llava-clip-m --data data/fashion-test --out runs/diagnose_llava --descriptions configs/descriptions/fashion.yaml --shots 1 --n-per-env 100":
        "needs the full zoo's member (zoo build, tens of minutes); diagnose runs on tiny:idefics3 above",
    "robustvlm zoo build --members llava-clip-m-icl":
        "needs zoo:llava-clip-m built and about 13 CPU-minutes more; the defined-label sequences and the init path "
        "are tested in tests/workflows/test_zoo_context.py",
    "robustvlm data synth --benchmark fashion-test --out figures/fashion-test --n-per-env 20":
        "needs Debian's dataset-fashion-mnist; the suite is built and checked in tests/data/synth/test_real.py",
    "robustvlm icl defined-labels --model zoo:llava-clip-m-icl --data figures/fashion-test --out figures/defined_llava-clip-m-icl":
        "needs the full zoo's member; icl defined-labels runs on tiny:llava in tests/workflows/measure/test_defined_labels.py",
    "robustvlm icl eval --model zoo:llava-clip-m-icl --data figures/fashion-clean-rotated --out figures/icl_llava-clip-m-icl --shots 0,1,2 --demos random,same-domain,cross-domain --n-per-env 100 --seed 0":
        "needs the full zoo's member and the suite's links (make figures); icl eval runs on tiny:idefics3 above",
}
POWER_PREFIX = "python -m robustvlm.analysis.power "
"""The power lines written beside the results' figures take their numbers as arguments: every one
runs as written (`test_documented_power_lines_run_as_written`)."""


def test_every_documented_line_is_classified():
    unknown = [c for c in documented_commands() if c not in RUNS and c not in NOT_RUN and not _needs_outputs(c)
               and not c.startswith(POWER_PREFIX)]
    assert not unknown, f"classify these documented command lines in RUNS or NOT_RUN: {unknown}"
    stale = sorted((set(RUNS) | set(NOT_RUN)) - set(documented_commands()))
    assert not stale, f"RUNS / NOT_RUN name lines the docs no longer print: {stale}"


def _needs_outputs(command: str) -> bool:
    """A line that reads what an earlier GPU run, a served model or the user's own data provide
    (runs/, evals/, data/povid, openai:..., ...): it must parse, and is not run (served-model
    commands run against the stub server in tests/workflows/test_served_commands.py)."""
    return bool(re.search(r"(--model (runs|HuggingFaceTB|openai:)|evals/|data/povid|data/onevision|q/clean)", command))


@pytest.mark.parametrize("command", [c for c in documented_commands() if c.startswith("robustvlm ")])
def test_every_documented_robustvlm_line_parses_and_names_existing_configs(command):
    from robustvlm.cli import build_parser, parse_command_line

    argv = shlex.split(command)[1:]
    if "..." in argv:
        argv = argv[: argv.index("...")]
    parse_command_line(build_parser(), argv)  # SystemExit(2) on a line argparse refuses
    for arg in argv:
        if arg.startswith("configs/"):
            assert (ROOT / arg).is_file(), f"{command}: {arg} does not exist"


@pytest.mark.parametrize("command", [c for c in documented_commands() if c.startswith(POWER_PREFIX)])
def test_documented_power_lines_run_as_written(command, capsys):
    from robustvlm.analysis.power import main

    assert main(shlex.split(command)[3:]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert ("changed correctness" if "--discordant" in command else "95% interval") in printed, printed


def test_documented_lines_run_as_written_with_tiny_settings(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    (tmp_path / "docs").symlink_to(ROOT / "docs")  # the shipped results tables (docs/data/)
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the tools' own results files (tests/data/fixtures/results/)
    for command in documented_commands():  # in the order the docs give them
        if command in RUNS:
            code = run_cli(shlex.split(command)[1:] + shlex.split(RUNS[command]))
            assert code == 0, f"{command!r} failed:\n{capsys.readouterr().err[-3000:]}"
    assert (tmp_path / "runs" / "erm" / "eval" / "metrics.json").is_file()
    assert (tmp_path / "runs" / "erm_tour" / "eval" / "metrics.json").is_file()  # a built-in config by name
    assert (tmp_path / "my_configs" / "erm_tasks.yaml").is_file()
    for blind_run in ("mc_blind", "mc_blind_generate", "eval_blind", "icl_blind"):
        assert (tmp_path / "runs" / blind_run / "vision_gain.html").is_file()
    assert json.loads((tmp_path / "q" / "digits_curated.blind_filter.json").read_text())["questions"] == 6
    assert (tmp_path / "q" / "clean.jsonl").is_file() and (tmp_path / "q" / "rotated.jsonl").is_file()  # one domain each
    assert (tmp_path / "runs" / "erm_qwen2_vl" / "final" / "config.json").is_file()
    assert set(json.loads((tmp_path / "runs" / "mc_paired" / "results.json").read_text())["paired"]["tiny:siglip"]) == {
        "clean", "rotated", "all"}  # the mc eval report's paired table (docs/guides/compare.md)
    study = json.loads((tmp_path / "studies" / "dynamic_birm_smolvlm-smoke" / "results.json").read_text())  # the --smoke run (--dry-run writes nothing)
    assert set(study["paired"]) == set(study["methods"]) - {study["baseline"]} and study["paired"]["birm"]["exact"]
    assert (tmp_path / "runs" / "rm_shortcut_aware" / "eval").is_dir()
    assert (tmp_path / "runs" / "mc_merged" / "results.csv").is_file()  # the shards joined (guides/invariant-finetuning.md)
    assert (tmp_path / "runs" / "icl_merged" / "icl_results.json").is_file()
    assert (tmp_path / "runs" / "diagnose_merged" / "diagnosis.json").is_file()
    assert json.loads((tmp_path / "runs" / "grid" / "grid.json").read_text()) == {  # the grid of the same guide
        "tiny_idefics3": {"digits": "tiny_idefics3/digits/merged"}, "tiny_clip": {"digits": "tiny_clip/digits/merged"}}
    salient = tmp_path / "runs" / "matrix_salient"
    assert json.loads((salient / "data" / "manifest.json").read_text())["benchmark"] == "preferences-salient"
    assert (salient / "sfc.json").is_file()
    mixed = tmp_path / "runs" / "matrix_mixed"
    assert json.loads((mixed / "data" / "manifest.json").read_text())["benchmark"] == "preferences-mixed"
    assert (mixed / "sfc.json").is_file()
    assert (tmp_path / "runs" / "warm_mixed" / "final" / "reward_head.safetensors").is_file()
    warm = tmp_path / "runs" / "matrix_warm_mixed"
    assert json.loads((warm / "data" / "manifest.json").read_text())["benchmark"] == "preferences-mixed"
    assert (warm / "sfc.json").is_file()
