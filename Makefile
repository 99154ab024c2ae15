# Two entry points for a fresh machine with Python 3.11+ and Java 17+:
#   make demo   creates .venv, installs TinyStream, runs the main job locally
#   make test   creates .venv, installs TinyStream with its test tools, runs the tests
# Each target installs what it needs itself; re-running is cheap (stamp files).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test test-slow test-all test-kind kind-prereqs tools venv clean help lint k8s-binaries

# The real Kubernetes control plane the operator's fast tier starts as processes (tests/operator/k8s/api_server).
K8S_FAST_TIER := etcd kube-apiserver kube-controller-manager kubectl helm

help:
	@echo "make demo       run the main job on the embedded default (local, no Kubernetes)"
	@echo "make test       install, check layers, lint and types (make lint), run the default test suite"
	@echo "make test-slow  run the slow suites (long property runs, Java tools, chaos)"
	@echo "make test-kind  run the real-Kubernetes suite (e2e/kind) on a kind cluster; builds what it needs"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "TinyStream needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install --quiet -e '.[test,spark,operator,registry,bench]'
	@touch $@

# Third-party clients for the compatibility suite (kcat from Debian, Kafka's
# own Java tools from Maven Central) and helm (built through the Go module
# proxy) for the chart checks, kadmcheck (franz-go's admin client, also through
# the Go module proxy) for tests/compat/test_kadm.py, franzbench (franz-go's kgo, the `--client franz` load
# generator of the benchmarks), Debian's chromium for the dashboard's browser test, a Docker engine
# (Debian's docker.io, started when none runs) for the image tests. Best effort: tests that need a missing
# tool skip and say which install step to run.
$(VENV)/.tools: $(VENV)/.installed
	-@bash tools/install-clients.sh
	-@bash tools/install-kafka-jars.sh
	-@bash tools/install-helm.sh
	-@bash tools/install-go-programs.sh
	-@bash tools/install-browser.sh
	-@bash tools/install-docker.sh
	-@bash tools/k8s/build-binaries.sh $(K8S_FAST_TIER)
	@touch $@

venv: $(VENV)/.installed

# Every Kubernetes component a real cluster needs, built from the Go module proxy into .cache/k8s/bin.
k8s-binaries:
	bash tools/k8s/build-binaries.sh

tools: $(VENV)/.tools

demo: $(VENV)/.installed
	$(BIN)/tinystream demo

# The layer contracts (import-linter), lint (ruff) and strict types on the pure packages (mypy).
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python tools/import_tree.py lint
	$(BIN)/python tools/import_tree.py mypy

test: $(VENV)/.tools lint
	$(BIN)/python -m pytest -m "not slow and not kind" $(PYTEST_ARGS)

test-slow: $(VENV)/.tools
	$(BIN)/python -m pytest -m "slow and not kind" $(PYTEST_ARGS)

# The real-cluster suite: every Kubernetes binary (Go module proxy), then the
# offline kind node image where kind's stock one cannot be pulled (podman,
# root), then e2e/kind on a 3-node kind cluster. Measured on 2 cores: warm ~27 min
# (almost all of it the suite); cold adds the binaries (~17-25 min), the node image
# (~2.5 min), the broker and Spark images (~4 min).
test-kind: $(VENV)/.installed kind-prereqs
	$(BIN)/python -m pytest e2e/kind -m kind -v $(PYTEST_ARGS)

# What the kind suite needs beyond `make tools`: the other Kubernetes binaries and the offline node
# image. .ci/run builds it in the background (niced) while the default suite runs.
# Also MetalLB's controller and CRDs (through the Go module proxy: ~10 min cold, mostly downloads, so
# here, in CI's background build beside `make test`, and beside the Kubernetes binaries) for the slow
# load balancer listener test on the real API server; a failed build only makes that test skip.
kind-prereqs:
	mkdir -p .cache; bash tools/install-metallb.sh >.cache/install-metallb.log 2>&1 & metallb=$$!; \
	bash tools/k8s/build-binaries.sh && bash tools/k8s/build-node-image.sh --if-needed; rc=$$?; \
	wait $$metallb && tail -1 .cache/install-metallb.log || echo "metallb: not built, see .cache/install-metallb.log"; \
	exit $$rc

test-all: test test-slow

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
