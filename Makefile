# The two commands: `make demo` and `make test`. Each builds .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lock fashion demo demo-quick demo-tasks demo-reward figures docs generated test test-fast lint typecheck install clean bench-real gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned and installed first: an unpinned torch pulls a CUDA build. Every package comes at
# the version of the lock (requirements/lock.txt, a pip constraints file), so that every install
# is the same environment; `make lock` rewrites the lock from this .venv (tools/lock.py), e.g. after
# installing a new dependency into it.
LOCK := requirements/lock.txt
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q -c $(LOCK) torch==2.13.0
	$(BIN)/pip install -q -c $(LOCK) -e ".[dev,data,docs,serve]"
	touch $(STAMP)

lock: | $(BIN)/python
	$(BIN)/python tools/lock.py $(LOCK)

# WordNet 3.0 from Debian (read from disk by NLTK) for WordNet distractors; tests that need it
# skip with a reason where it cannot be installed (no root).
WORDNET := /usr/share/wordnet/data.noun
$(WORDNET):
	-(apt-get update -qq && apt-get install -y -qq --no-install-recommends wordnet-base) >/dev/null 2>&1 \
	  || echo "warning: could not install Debian's wordnet-base; WordNet distractors unavailable"

# Fashion-MNIST (70,000 real images, MIT) for the default demo, the fashion suites and the zoo: read
# from $ROBUSTVLM_FASHION_MNIST (or --data-root), the fetched copy, or Debian's package; where none
# holds it, `robustvlm data fetch fashion-mnist` downloads it (30 MB, checked by checksum), and
# where that cannot reach its server, Debian's package is tried (as root; tests that need the data
# skip with a reason where neither works).
fashion: $(STAMP)
	@$(BIN)/python -c "from robustvlm.data.real_images import fashion_root; fashion_root()" 2>/dev/null \
	  || $(BIN)/robustvlm data fetch fashion-mnist \
	  || (apt-get update -qq && apt-get install -y -qq --no-install-recommends dataset-fashion-mnist) >/dev/null 2>&1 \
	  || echo "warning: no Fashion-MNIST: give --data-root DIR, or apt-get install dataset-fashion-mnist"

install: $(STAMP) $(WORDNET) fashion

# The default demo: Colored MNIST on real images (Fashion-MNIST), ERM against IRMv1 / V-REx / BIRM /
# Dynamic BIRM on the pixels and on the tiny VLM's frozen vision tower, 3 seeds; the report opens
# with its verdict (docs/getting-started-demo.md says what it shows and why it is the default).
demo: install
	$(BIN)/robustvlm demo --out demo_out

# README's picture is the one `make demo` draws: the demo's demo_out/ladder.png, copied (part of `make figures`).
figures-readme: demo
	cp demo_out/ladder.png docs/images/demo.png

# Getting started's picture (docs/images/tour.png): the five-minute tour's run, as the page prints it
# (about 2.5 CPU-min), into figures/tour, drawn from its train_log.jsonl and eval/metrics.json.
figures-tour: install
	rm -rf figures/tour
	$(BIN)/robustvlm data synth --benchmark tasks --out figures/tour/data
	$(BIN)/robustvlm train erm_tasks --out figures/tour/erm_tour train.steps=200
	$(BIN)/robustvlm eval --model figures/tour/erm_tour/final --data figures/tour/data --out figures/tour/erm_tour/eval --max-per-env 4
	$(BIN)/python -m robustvlm.report.tour_picture figures/tour/erm_tour figures/tour/erm_tour/eval docs/images/tour.png

# The pictures redrawn from their pages' own tables (spurious-study, real-size) and the Results
# index's picture of every page's headline picture (report.page_pictures; seconds; last in
# `make figures`, after the pictures it shows; tests/report/test_page_pictures.py checks them current).
figures-pages: $(BIN)/python
	$(BIN)/python -m robustvlm.report.page_pictures

demo-quick: install
	$(BIN)/robustvlm demo --quick --out demo_out_quick

# The Dynamic BIRM paper's Table 1 in miniature: ERM / BIRM / Dynamic BIRM fine-tuning a tiny VLM on the OCR tasks.
demo-tasks: install
	$(BIN)/robustvlm demo tasks --out demo_tasks

demo-reward: install
	$(BIN)/robustvlm demo reward --out demo_reward

# The measured tables of the documentation's Results pages (docs/results/) and BENCHMARKS.md, rewritten from the full demos' results.json
# (about 30 min on 2 cores, and about 75 min more for the linear unit tests' settings) and from
# the reward follow-ups' `rm matrix` runs, which start from the reward demo's policy in
# demo_reward/ (matrix.json and sfc.json; 22 min more on 2 cores shared with other jobs);
# docs/quick_figures.md holds the quick demos' tables, which `make test` checks. `figures-readme` redraws
# README's picture (docs/images/demo.png) by running `make demo` (its time: src/robustvlm/timings.yaml).
REWARD_FOLLOWUPS = long_400 cue70 salient salient_300 mixed warm_mixed
INVARIANCE_SETTINGS = --n-envs=2 --n-envs=4 --n-envs=5 --n-envs=6 --n-envs=8 --n-envs=10 --dim-spu=0 --dim-spu=2 --dim-spu=8 --dim-spu=10
# `make figures` runs every experiment below; `make figures EXPERIMENT [EXPERIMENT ...]` only the
# named ones (e.g. `make figures reward`: the experiments of report/figure_sources.py, whose figure
# blocks tests/report/test_figure_stamps.py checks against the code they depend on).
FIGURE_EXPERIMENTS = readme ladder reward invariance openclip zoo-robustness ladder-zoo zoo-tasks icl zoo-ii zoo-iii reward-zoo tour pages
.PHONY: $(addprefix figures-,$(FIGURE_EXPERIMENTS) zoo)
ifeq ($(firstword $(MAKECMDGOALS)),figures)
FIGURES_ONLY := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
endif
figures: $(addprefix figures-,$(or $(FIGURES_ONLY),$(FIGURE_EXPERIMENTS)))
	# the pages' own pictures (the Results index shows every page's first picture): redrawn after any experiment
	$(BIN)/python -m robustvlm.report.page_pictures
ifneq ($(FIGURES_ONLY),)
$(FIGURES_ONLY): ; @:
endif
FIGURES_WRITE = $(BIN)/python -m robustvlm.figures --images docs/images

figures-ladder: install
	$(BIN)/robustvlm demo ladder --inferred-envs --out figures/ladder
	$(FIGURES_WRITE) docs/results/ladder.md ladder=figures/ladder ladder-vlm=figures/ladder

figures-reward: install
	$(BIN)/robustvlm demo reward --out demo_reward
	$(BIN)/robustvlm rm train configs/reward/warm_mixed.yaml --out runs/warm_mixed --resume
	for m in $(REWARD_FOLLOWUPS); do $(BIN)/robustvlm rm matrix configs/reward/matrix_$$m.yaml --out runs/matrix_$$m; done
	$(FIGURES_WRITE) docs/results/reward.md reward-matrix=demo_reward reward-linear=demo_reward \
		reward-ladder=demo_reward reward-ladder-sfc=demo_reward reward-ladder-runs=demo_reward \
		rm-seeds:long-400=runs/matrix_long_400 rm-seeds:cue70=runs/matrix_cue70 rm-runs:cue70=runs/matrix_cue70 \
		rm-seeds:salient=runs/matrix_salient rm-runs:salient=runs/matrix_salient rm-seeds:salient-300=runs/matrix_salient_300 \
		rm-seeds:mixed=runs/matrix_mixed rm-seeds:warm-mixed=runs/matrix_warm_mixed

figures-invariance: install
	$(BIN)/robustvlm demo invariance --out figures/invariance/default
	for s in $(INVARIANCE_SETTINGS); do $(BIN)/robustvlm demo invariance $$s --methods erm,irm --out figures/invariance/$${s#--}; done
	$(BIN)/robustvlm demo invariance --methods irm,dynamic_birm,irm_eiil,dynamic_birm_eiil --out figures/invariance_eiil
	$(FIGURES_WRITE) docs/results/invariance.md invariance=figures/invariance/default invariance-spread=figures/invariance invariance-eiil=figures/invariance_eiil
	$(FIGURES_WRITE) BENCHMARKS.md invariance-spread=figures/invariance invariance-eiil=figures/invariance_eiil

figures-zoo: install
	$(BIN)/robustvlm zoo build

figures-zoo-robustness: figures-zoo
	$(BIN)/robustvlm demo robustness --zoo --out figures/robustness_zoo
	$(FIGURES_WRITE) docs/results/zoo-robustness.md zoo-robustness-members=figures/robustness_zoo \
		zoo-robustness-fits=figures/robustness_zoo zoo-robustness-er=figures/robustness_zoo zoo-task-signal=figures/robustness_zoo \
		zoo-robustness-corruptions=figures/robustness_zoo zoo-robustness-corruptions-er=figures/robustness_zoo

figures-ladder-zoo: figures-zoo
	$(BIN)/robustvlm demo ladder --zoo --modes full --out figures/ladder_zoo
	$(FIGURES_WRITE) docs/results/ladder.md ladder-zoo=figures/ladder_zoo \
		ladder-zoo-oracle=figures/ladder_zoo ladder-zoo-td=figures/ladder_zoo ladder-zoo-shot=figures/ladder_zoo \
		ladder-zoo:rebuilt=figures/ladder_zoo ladder-zoo-oracle:rebuilt=figures/ladder_zoo ladder-zoo-td:rebuilt=figures/ladder_zoo
	$(BIN)/robustvlm demo ladder --zoo --modes full --methods erm,dynamic_birm --seeds 0,1,2,3,4,5 --out figures/ladder_zoo
	$(FIGURES_WRITE) docs/results/ladder.md ladder-zoo-seeds=figures/ladder_zoo
	$(BIN)/robustvlm demo ladder --zoo --modes full --methods erm,dynamic_birm --seeds 0,1,2,3,4,5 --test-pictures 3000 \
		--out figures/ladder_zoo_t3000
	$(FIGURES_WRITE) docs/results/ladder.md ladder-zoo-paired=figures/ladder_zoo_t3000
	$(BIN)/robustvlm demo ladder --zoo --modes head,lora --out figures/ladder_zoo_head_lora
	$(FIGURES_WRITE) docs/results/ladder.md ladder-zoo:head-lora=figures/ladder_zoo_head_lora \
		ladder-zoo-oracle:head-lora=figures/ladder_zoo_head_lora ladder-zoo-td:head-lora=figures/ladder_zoo_head_lora
	$(BIN)/robustvlm demo ladder --zoo --members llava-clip-m --modes full --out figures/ladder_zoo_llava
	$(FIGURES_WRITE) docs/results/ladder.md ladder-zoo:llava=figures/ladder_zoo_llava \
		ladder-zoo-oracle:llava=figures/ladder_zoo_llava ladder-zoo-td:llava=figures/ladder_zoo_llava \
		ladder-zoo-shot:llava=figures/ladder_zoo_llava

figures-zoo-tasks: figures-zoo
	$(BIN)/robustvlm demo tasks --zoo --out figures/tasks_zoo
	$(FIGURES_WRITE) docs/results/zoo-tasks.md zoo-tasks=figures/tasks_zoo zoo-tasks-envs=figures/tasks_zoo \
		zoo-tasks:rebuilt=figures/tasks_zoo zoo-tasks-envs:rebuilt=figures/tasks_zoo

figures-icl: figures-zoo
	$(BIN)/robustvlm data synth --benchmark fashion-test --out figures/fashion-test --n-per-env 20
	mkdir -p figures/fashion-clean-rotated && for d in clean rotated; do ln -sfn ../fashion-test/$$d figures/fashion-clean-rotated/$$d; done
	for m in llava-clip-m llava-clip-m-icl; do \
		$(BIN)/robustvlm icl defined-labels --model zoo:$$m --data figures/fashion-test --out figures/defined_$$m --resume && \
		$(FIGURES_WRITE) docs/results/zoo-in-context.md icl-defined-labels:$$m=figures/defined_$$m || exit 1; \
	done
	$(BIN)/robustvlm icl eval --model zoo:llava-clip-m-icl --data figures/fashion-clean-rotated --out figures/icl_llava-clip-m-icl \
		--shots 0,1,2 --demos random,same-domain,cross-domain --n-per-env 100 --seed 0 --resume
	$(FIGURES_WRITE) docs/results/zoo-in-context.md icl-domains:llava-clip-m-icl=figures/icl_llava-clip-m-icl \
		icl-gain:llava-clip-m-icl=figures/icl_llava-clip-m-icl icl-shift-cost:llava-clip-m-icl=figures/icl_llava-clip-m-icl \
		icl-domains:llava-clip-m-icl-rebuilt=figures/icl_llava-clip-m-icl icl-gain:llava-clip-m-icl-rebuilt=figures/icl_llava-clip-m-icl

# A zoo member in context, its blocks written into a results page: $(call ZOO_ICL_FIGURES,MEMBER,PAGE) runs
# defined labels with 1 and 2 demonstrations per class (2 and 4 shots), k-shot by policy on every shift and
# the diagnosis, then writes those blocks and the member's card, stages and curves.
ZOO_II_QUERIES = 100
# one torch thread: these tiny models run faster so, and far faster on a busy machine
ZOO_II_RUN = OMP_NUM_THREADS=1 $(BIN)/robustvlm
define ZOO_ICL_FIGURES
	$(BIN)/robustvlm data synth --benchmark fashion-test --out figures/fashion-test --n-per-env 20
	$(ZOO_II_RUN) icl defined-labels --model zoo:$(1) --data figures/fashion-test --out figures/defined_$(1) --resume
	$(ZOO_II_RUN) icl defined-labels --model zoo:$(1) --data figures/fashion-test --out figures/defined_$(1)-4-shots \
		--shots 2 --resume
	$(ZOO_II_RUN) icl eval --model zoo:$(1) --data figures/fashion-test --out figures/icl_$(1) --shots 0,1,2,4 \
		--demos random,same-domain,cross-domain,label-shift,spurious --n-per-env $(ZOO_II_QUERIES) --seed 0 --resume
	$(ZOO_II_RUN) diagnose --model zoo:$(1) --data figures/fashion-test --out figures/diagnose_$(1) \
		--descriptions configs/descriptions/fashion.yaml --shots 1 --n-per-env $(ZOO_II_QUERIES) --resume
	$(FIGURES_WRITE) $(2) zoo-card:$(1)=zoo:$(1) curriculum-stages:$(1)=zoo:$(1) curriculum-curve:$(1)=zoo:$(1) \
		icl-defined-labels:$(1)=figures/defined_$(1) icl-defined-labels:$(1)-4-shots=figures/defined_$(1)-4-shots \
		icl-domains:$(1)=figures/icl_$(1) icl-gain:$(1)=figures/icl_$(1) icl-policy-cost:$(1)=figures/icl_$(1) \
		diagnose:$(1)=figures/diagnose_$(1)
endef

# Zoo II's curriculum member in context (docs/results/zoo-ii.md).
CURRICULUM = llava-clip-m-curriculum
figures-zoo-ii: figures-zoo
	$(call ZOO_ICL_FIGURES,$(CURRICULUM),docs/results/zoo-ii.md)

# Zoo III's language-model-first member in context (docs/results/zoo-iii.md): the same blocks as
# Zoo II's, on the member whose decoder learned to copy in text before it saw a picture.
# Then the served check: the same in-context cells, 20 queries per domain, from the member on the local
# backend and served by `transformers serve` (the serve extra; the server's process group is killed after
# the run), compared query by query.
LMFIRST = llava-clip-m-lmfirst
LMFIRST_SERVED = figures/icl_served_$(LMFIRST)
SERVED_ICL = --data figures/fashion-test --shots 0,1,2,4 --demos random,same-domain,cross-domain,label-shift,spurious \
	--n-per-env 20 --seed 0 --resume
figures-zoo-iii: figures-zoo
	$(call ZOO_ICL_FIGURES,$(LMFIRST),docs/results/zoo-iii.md)
	$(ZOO_II_RUN) icl eval --model zoo:$(LMFIRST) --out $(LMFIRST_SERVED)/local $(SERVED_ICL)
	OMP_NUM_THREADS=1 $(BIN)/python -m robustvlm.workflows.measure.transformers_serve zoo:$(LMFIRST) \
		--log $(LMFIRST_SERVED)/serve.log -- $(BIN)/robustvlm icl eval --model 'openai:{folder}' --base-url '{url}' \
		--out $(LMFIRST_SERVED)/served $(SERVED_ICL) --no-cache
	$(FIGURES_WRITE) docs/results/zoo-iii.md icl-served:$(LMFIRST)=$(LMFIRST_SERVED)

figures-reward-zoo: figures-zoo
	$(BIN)/robustvlm demo reward --zoo --out demo_reward_zoo
	$(BIN)/robustvlm rm train configs/reward/zoo_warm.yaml --out runs/zoo_warm --resume
	$(BIN)/robustvlm rm matrix configs/reward/matrix_zoo_warm.yaml --out runs/matrix_zoo_warm
	$(BIN)/robustvlm rm matrix configs/reward/matrix_zoo_loglik.yaml --out runs/matrix_zoo_loglik
	$(BIN)/robustvlm rm matrix configs/reward/matrix_zoo_loglik_fresh.yaml --out runs/matrix_zoo_loglik_fresh
	$(FIGURES_WRITE) docs/results/reward.md reward-zoo-matrix=demo_reward_zoo \
		reward-zoo-ladder=demo_reward_zoo reward-zoo-ladder-sfc=demo_reward_zoo reward-zoo-runs=demo_reward_zoo \
		reward-zoo-steps=demo_reward_zoo rm-seeds:zoo-warm=runs/matrix_zoo_warm rm-runs:zoo-warm=runs/matrix_zoo_warm \
		rm-seeds:zoo-loglik=runs/matrix_zoo_loglik rm-runs:zoo-loglik=runs/matrix_zoo_loglik \
		rm-steps:zoo-loglik=runs/matrix_zoo_loglik rm-seeds:zoo-loglik-fresh=runs/matrix_zoo_loglik_fresh \
		rm-runs:zoo-loglik-fresh=runs/matrix_zoo_loglik_fresh rm-steps:zoo-loglik-fresh=runs/matrix_zoo_loglik_fresh

# Real-size costs on this CPU (random-weight SmolVLM-256M, `real:` models): training steps of ERM,
# Dynamic BIRM and IRMv1, shared-prefix scoring, generation. Long on 2 shared cores: see
# BENCHMARKS.md, "Real-size models on CPU", for the parts run one at a time.
bench-real: $(STAMP)
	nice -n 10 $(BIN)/python benchmarks/bench_real.py

# The one prepared GPU check (docs/gpu-check.md): writes gpu_check/gpu_report.json and .md within an
# 8-minute budget on CUDA; GPU_CHECK_DRY=1 runs the same plan at tiny size on CPU (2-minute
# budget). No install step: on a lent GPU machine give its Python, e.g. GPU_CHECK_PYTHON=python3.
GPU_CHECK_PYTHON ?= $(BIN)/python
gpu-check:
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_CHECK_PYTHON) benchmarks/gpu_check.py --out gpu_check $(if $(GPU_CHECK_DRY),--dry)

# The documentation site (mkdocs.yml), built in strict mode into site/: a broken link, a page
# missing from nav or any warning fails. The reference pages are regenerated from the code first.
docs: install
	$(BIN)/python tools/docs_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Every file generated from the code, in one step (about a minute): what adding an objective, a demo, a
# results reader or an option changes besides its own file and registry line. The help snapshot
# (tests/cli_help.txt, which tests/test_cli_help.py compares), then the pages tools/docs_reference.py
# writes: the cli / config / api references, Getting started's extras table, the recorded times'
# blocks, the method lists and the demo tables (docs/contributing.md, "Generated files"). Review the diff
# before a commit.
generated: $(STAMP)
	ROBUSTVLM_HELP_SNAPSHOT=rewrite $(BIN)/python -m pytest tests/test_cli_help.py -p no:cacheprovider -q
	$(BIN)/python tools/docs_reference.py

# The whole suite, every tier (CI runs it through .ci/run): all but the distributed tier on two
# workers (pytest-xdist), then the distributed tier (its tests start torchrun processes of their
# own) alone; each prints its slowest tests.
test: install
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "not distributed" -n 2 --durations 30
	$(BIN)/python -m pytest tests -p no:cacheprovider -m distributed --durations 10

# The fast tier for feedback while working: every test but the e2e, docs, slow and distributed
# ones (tiers: tests/conftest.py), on two workers (pytest-xdist); a test past 120 s fails.
test-fast: install
	$(BIN)/python -m pytest tests -p no:cacheprovider -m "not e2e and not docs and not slow and not distributed" \
		-n 2 --timeout 120 --durations 15

# ruff as configured in pyproject.toml ([tool.ruff]: style, imports, bugbear, complexity C901),
# after mypy; both come with the [dev] extra that $(STAMP) installs. CI runs it first.
lint: typecheck $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# mypy on the package, as configured in pyproject.toml ([tool.mypy]); CI runs it through `lint`.
typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) site demo_out demo_out_quick demo_tasks demo_tasks_quick demo_robustness demo_invariance demo_reward demo_reward_quick demo_reward_zoo demo_reward_zoo_quick studies

# Accuracy on the line on open_clip's published table (docs/data/openclip_results.csv, MIT): one
# `robustness fit --group-by source` per shift, its tables into docs/results/openclip.md and its
# scatter plots into docs/images/openclip/ (seconds; part of `make figures`).
figures-openclip: $(BIN)/python
	mkdir -p docs/images/openclip
	for pair in "1-v2:ImageNet v2" "2-sketch:ImageNet Sketch" "3-r:ImageNet-R" "4-a:ImageNet-A" "5-objectnet:ObjectNet" "6-camelyon17:Camelyon17"; do \
		slug=$${pair%%:*}; shift=$${pair#*:}; \
		$(BIN)/robustvlm robustness fit docs/data/openclip_results.csv --ref "ImageNet 1k" --shift "$$shift" \
			--group-by source --out figures/openclip/$$slug --resume || exit 1; \
		cp figures/openclip/$$slug/scatter.png docs/images/openclip/$${slug#*-}.png; \
	done
	$(FIGURES_WRITE) docs/results/openclip.md openclip-lines=figures/openclip openclip-er=figures/openclip
