# Convenience targets; the build itself is CMake (CMakePresets.json).
JOBS ?= $(shell nproc)
BUILD ?= build/release

.PHONY: deps build demo test clean

deps:
	bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the end-to-end demonstration (see README).
demo: build
	$(BUILD)/oal demo

# Serial: several tests share fixture files inside one suite; the whole suite takes
# about 8 minutes on 2 cores.
test: build
	cd $(BUILD) && ctest --output-on-failure

clean:
	rm -rf build
