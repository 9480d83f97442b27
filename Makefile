# Two commands do all set-up on a fresh machine with Python 3.11:
#   make book   creates .venv if absent (the book's pinned environment), runs the default model matrix, builds the HTML book
#   make test   adds the test environment to .venv if absent, runs the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
# The pinned data beside the checkout when it is there; otherwise loaders download and verify.
ATLAS_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
# Offline by default (hub weights come from the local cache); `make book HF_HUB_OFFLINE=0` allows downloads.
HF_HUB_OFFLINE ?= 1
export ATLAS_DATA_DIR HF_HUB_OFFLINE

# The installer: uv (pinned; installs the lock files in parallel, about 30 s for the book's environment), or plain
# pip with `make book INSTALLER=pip` (one package at a time: several minutes).
INSTALLER  ?= uv
UV_VERSION := 0.13.9
UV         := $(BIN)/uv
# torch 2.13.0 CPU build: a local wheel directory when the machine has one, else PyTorch's CPU index.
ifneq ($(wildcard /opt/wheels/torch-2.13.0*),)
TORCH_PIP := --find-links /opt/wheels
TORCH_UV  := --find-links /opt/wheels
else
TORCH_PIP := --extra-index-url https://download.pytorch.org/whl/cpu
TORCH_UV  := --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match
endif
ifeq ($(INSTALLER),pip)
INSTALL := $(BIN)/python -m pip install --quiet --use-pep517 $(TORCH_PIP)
NODEPS  := $(BIN)/python -m pip install --quiet --no-deps
EDITABLE := $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
else
INSTALL := $(UV) pip install --quiet --compile-bytecode --python $(BIN)/python $(TORCH_UV)
NODEPS  := $(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --no-deps
EDITABLE := $(UV) pip install --quiet --python $(BIN)/python --no-deps -e .
endif

# Bytecode: every run, lesson and test starts Python processes (papermill kernels, `atlas` subprocesses) that import
# pandas, scipy, torch and transformers. uv installs them without their compiled bytecode (`--compile-bytecode`
# asks for it: about 40 s more on 2 cores), and where PYTHONDONTWRITEBYTECODE is set no process ever writes it, so
# each process compiled every module it imported again: 2-3 s for pandas alone. atlaslib's own modules are compiled
# before each build or test run (under 1 s; what Python writes itself on a machine without that setting).
COMPILE := $(BIN)/python -m compileall -q atlaslib >/dev/null

# llama-cpp-python (tests only: the llama.cpp server the API tests run against) has no wheel for this platform. It is
# built once per machine from its sdist into a folder named by its version, the build flags and the Python, and
# installed from there while those are unchanged. Portable x86-64 baseline flags: a native build's AVX-512 / AMX
# kernels crashed the server with a general protection fault in libggml-cpu on this machine's CPU.
LLAMA_VERSION    := 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_BUILD_KEY  := $(shell printf '%s|%s|%s' '$(LLAMA_VERSION)' '$(LLAMA_CMAKE_ARGS)' "$$($(PYTHON) -c 'import sys,platform;print(sys.implementation.cache_tag, platform.machine())' 2>/dev/null)" | sha256sum | cut -c1-16)
WHEEL_CACHE      ?= $(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/clinical-nlp-atlas-wheels
LLAMA_WHEEL_DIR  := $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_BUILD_KEY)

# The test command README gives (`make test`): every test, two workers (tests that share a built book run on one
# worker: --dist loadgroup), the 25 slowest listed, and no .pytest_cache written into the checkout (the suite writes
# only under its temporary folders). Three workers measured slower than two on the 2-core machine (639 s against
# 614 s, 2026-12-03). A test that hangs fails with its name after 900 s: the whole suite took 614 s on two workers
# (2026-12-03), so no one test, a session book's build counted in it, took longer than that; 900 s is that with a
# margin of about 1.5 (a loaded machine's 15-minute builds, seen while other builds shared its 2 cores, are what
# the margin is not for: rerun on a quiet machine).
PYTEST_ARGS ?= -q -n 2 --dist loadgroup --timeout 900 --durations 25 -p no:cacheprovider

.PHONY: book publish test env test-env browser clean
env: $(VENV)/.installed
test-env: $(VENV)/.test-installed

$(VENV)/.installed: requirements-lock.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
ifneq ($(INSTALLER),pip)
	test -x $(UV) && $(UV) --version | grep -q ' $(UV_VERSION)' || $(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
endif
	$(INSTALL) -r requirements-lock.txt
	$(NODEPS) -r requirements-nodeps.txt
	$(EDITABLE)
	touch $@

$(LLAMA_WHEEL_DIR)/.built:
	@echo "building llama-cpp-python $(LLAMA_VERSION) from its sdist once for this machine (about 8 min on 2 cores) into $(LLAMA_WHEEL_DIR)"
	rm -rf $(LLAMA_WHEEL_DIR).tmp && mkdir -p $(LLAMA_WHEEL_DIR).tmp
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --quiet --no-deps --no-cache-dir \
	  --no-binary llama-cpp-python -w $(LLAMA_WHEEL_DIR).tmp llama-cpp-python==$(LLAMA_VERSION)
	printf '%s\n' 'llama-cpp-python==$(LLAMA_VERSION)' 'CMAKE_ARGS=$(LLAMA_CMAKE_ARGS)' > $(LLAMA_WHEEL_DIR).tmp/BUILD-FLAGS.txt
	touch $(LLAMA_WHEEL_DIR).tmp/.built
	rm -rf $(LLAMA_WHEEL_DIR) && mv $(LLAMA_WHEEL_DIR).tmp $(LLAMA_WHEEL_DIR)

$(VENV)/.test-installed: $(VENV)/.installed requirements-test.txt $(LLAMA_WHEEL_DIR)/.built $(VENV)/.harness-installed
	$(INSTALL) -r requirements-test.txt
	$(NODEPS) $(LLAMA_WHEEL_DIR)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	touch $@

# lm-eval and inspect-ai (the harness tests run them on exported cards) would move pins of the book's environment, so
# they are installed, pinned and without dependency resolution, into a folder beside it (requirements-harness.txt):
# only the processes that run a harness put it on their path.
HARNESS := $(VENV)/harness
ifeq ($(INSTALLER),pip)
HARNESS_INSTALL := $(BIN)/python -m pip install --quiet --no-deps --target $(HARNESS)
else
HARNESS_INSTALL := $(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --no-deps --target $(HARNESS)
endif
$(VENV)/.harness-installed: $(VENV)/.installed requirements-harness.txt
	rm -rf $(HARNESS)
	$(HARNESS_INSTALL) -r requirements-harness.txt
	touch $@

book: env
	$(COMPILE)
	$(BIN)/atlas book

publish: env
	$(COMPILE)
	$(BIN)/atlas book --publish

# The browser tests open the built book in Debian's headless chromium; install it once when missing (apt as root,
# else through sudo). Quick no-op when chromium is already on PATH.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package) for the browser test"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }
	@chromium --version 2>/dev/null  # Debian's wrapper script prints a shell warning on some machines

test: test-env browser
	$(COMPILE)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf _build results book/runs
