# milkit: `make demo` and `make test` set up a fresh machine, build, and run.
PYTHON ?= python3
BUILD ?= build
JOBS ?= 2
APT_PACKAGES = libprotobuf-dev protobuf-compiler nlohmann-json3-dev catch2 ccache cmake ninja-build g++ valgrind libopenblas-dev \
  graphviz chromium libminizip-dev dpkg-dev debootstrap clang libc++-dev libc++abi-dev
STAMP = $(BUILD)/.deps-stamp
# whether Debian package $$p (`name` or `name:arch`) is installed for that architecture (the machine's
# own when none is given, or arch "all"); `dpkg -s name` is ambiguous once the same -dev package is
# installed for a second architecture (make deps-aarch64)
deb_installed = { a="$${p\#*:}"; [ "$$a" = "$$p" ] && a=$$(dpkg --print-architecture); \
  dpkg-query -W -f='$${db:Status-Status} $${Architecture}\n' "$$p" 2>/dev/null | grep -qE "^installed ($$a|all)$$"; }
# the aarch64 wheel (make wheel-aarch64, test-wheel-aarch64; not part of make test): Debian's cross
# compiler and the arm64 builds of the same -dev libraries (multiarch), the target Python's headers,
# and qemu-user to run an arm64 root
PYVER = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
APT_PACKAGES_AARCH64 = g++-aarch64-linux-gnu pkgconf:arm64 libprotobuf-dev:arm64 libopenblas-dev:arm64 \
  libopenblas-pthread-dev:arm64 libminizip-dev:arm64 zlib1g-dev:arm64 libpython$(PYVER)-dev:arm64 \
  qemu-user-static binfmt-support
STAMP_AARCH64 = $(BUILD)/.deps-aarch64-stamp
# ccache hits across build trees (plain CMake build, pip's scikit-build tree, sanitizer tree)
export CCACHE_BASEDIR = $(CURDIR)
# (no include_file_mtime / include_file_ctime sloppiness: it lets ccache store an object compiled
# from a header that changed during the compile under the header's other content, and with several
# work trees sharing one cache that object was later served to a tree whose header never had it)
export CMAKE_BUILD_PARALLEL_LEVEL = $(JOBS)
# one compiler name for every GCC tree: ccache keys include it, and CMake's default (c++) differs
# from what scikit-build-core's builds pick (g++), which made every pip / wheel compile a miss
export CC = gcc
export CXX = g++

.PHONY: deps deps-aarch64 build demo test test-cpp test-python test-notebooks test-install lint docs bench sanitize \
  sanitize-python wheel test-wheel wheel-aarch64 test-wheel-aarch64 clang-build test-clang check-libcxx clean

deps: $(STAMP)

$(STAMP): requirements-dev.txt Makefile
	@missing=""; for p in $(APT_PACKAGES); do $(deb_installed) || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	$(PYTHON) -m pip install -q -r requirements-dev.txt
	@mkdir -p $(BUILD) && touch $(STAMP)

deps-aarch64: $(STAMP_AARCH64)

$(STAMP_AARCH64): $(STAMP)
	@SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	  echo "adding the arm64 architecture (dpkg multiarch)"; \
	  $$SUDO dpkg --add-architecture arm64 && $$SUDO apt-get update -qq; \
	fi; \
	missing=""; for p in $(APT_PACKAGES_AARCH64); do $(deb_installed) || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@touch $(STAMP_AARCH64)

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$$(command -v $(PYTHON))
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	PYTHONPATH=python $(PYTHON) examples/demo.py

# The clang build and the libc++ check compile on one core while the GCC tests run (pytest mostly
# keeps one core busy), then the clang build's tests run.
test: build lint docs
	@mkdir -p $(BUILD)
	@echo "clang build and libc++ check in the background: $(BUILD)/side-builds.log"
	@( $(MAKE) --no-print-directory JOBS=1 clang-build check-libcxx > $(BUILD)/side-builds.log 2>&1; \
	   echo $$? > $(BUILD)/side-builds.rc ) & \
	$(MAKE) --no-print-directory test-cpp test-python test-notebooks test-install test-wheel; rc=$$?; \
	wait; echo "---- clang build and libc++ check:"; tail -3 $(BUILD)/side-builds.log; \
	[ $$rc = 0 ] || exit $$rc; \
	[ "$$(cat $(BUILD)/side-builds.rc)" = 0 ] || { tail -60 $(BUILD)/side-builds.log; exit 1; }
	$(MAKE) --no-print-directory test-clang

test-cpp:
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-python:
	PYTHONPATH=python $(PYTHON) -m pytest tests/python -q

test-notebooks:
	PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest --nbmake notebooks

# pip install . into a throwaway venv, then import and build a program
test-install: deps
	rm -rf $(BUILD)/venv && $(PYTHON) -m venv --system-site-packages $(BUILD)/venv
	$(BUILD)/venv/bin/pip install -q --no-build-isolation .
	cd /tmp && $(CURDIR)/$(BUILD)/venv/bin/python -c "import milkit, sys; assert 'site-packages' in milkit.__file__, milkit.__file__; print('installed', milkit.__file__)"
	cd /tmp && $(CURDIR)/$(BUILD)/venv/bin/milkit --version

# the binary wheel (manylinux, protobuf-lite / OpenBLAS / minizip linked in) and the sdist, in dist/
wheel: deps
	BUILD=$(BUILD) packaging/wheel.sh $(PYTHON)

# the wheel installed and used in a clean Debian root (debootstrap; python3 and python3-venv only)
test-wheel: wheel
	BUILD=$(BUILD) packaging/test-wheel.sh $(PYTHON)

# the aarch64 wheel, cross-compiled (packaging/aarch64-linux-gnu.cmake), in dist/
wheel-aarch64: deps-aarch64
	BUILD=$(BUILD) packaging/wheel.sh $(PYTHON) arm64

# ... installed and used in a clean arm64 Debian root, through qemu-user (slow: see packaging/test-wheel.sh)
test-wheel-aarch64: wheel-aarch64
	BUILD=$(BUILD) packaging/test-wheel.sh $(PYTHON) arm64

# ruff, and no function over 150 lines where the code maps, rewrites and runs (lizard -L; its
# complexity and argument-count warnings are turned off)
lint: deps
	$(PYTHON) -m ruff check python tests benchmarks examples docs
	$(PYTHON) -m lizard cpp/src/frontends cpp/src/passes cpp/src/exec -L 150 -C 100000 -a 100 -w

# the user docs (Sphinx: guides + reference from the docstrings) into $(BUILD)/docs/html; warnings are errors
docs: build
	rm -rf $(BUILD)/docs
	PYTHONPATH=$(CURDIR)/python $(PYTHON) -m sphinx -W --keep-going -q -b html -d $(BUILD)/docs/doctrees docs $(BUILD)/docs/html
	@echo "docs: $(BUILD)/docs/html/index.html"

bench: build
	$(PYTHON) -m pip install -q -r requirements-bench.txt
	PYTHONPATH=python $(PYTHON) benchmarks/run.py

sanitize: deps
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMILKIT_SANITIZE=ON -DMILKIT_BUILD_PYTHON=OFF
	cmake --build $(BUILD)-asan -j$(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure

# the Python package (subpackages included, no extension) into $(1), beside a side build's extension
copy_python_package = mkdir -p $(1) && tar -C python -cf - --exclude='_core*.so' --exclude=__pycache__ milkit | tar -C $(1) -xf -

# the interpreter's kernel tests (Python) against an ASan/UBSan build of the extension
ASAN_PKG = $(BUILD)-asan-py/pkg
sanitize-python: deps
	cmake -S . -B $(BUILD)-asan-py -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMILKIT_SANITIZE=ON -DMILKIT_BUILD_TESTS=OFF \
	  -DPython_EXECUTABLE=$$(command -v $(PYTHON)) -DMILKIT_PYTHON_OUTPUT_DIR=$(CURDIR)/$(ASAN_PKG)/milkit
	$(call copy_python_package,$(ASAN_PKG))
	cmake --build $(BUILD)-asan-py -j$(JOBS)
	LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONPATH=$(ASAN_PKG) \
	  $(PYTHON) -m pytest -q -p no:cacheprovider tests/python/exec

# the whole build with clang, warnings as errors (-DMILKIT_WERROR=ON), in its own tree; its ctest, then
# the Python API and interpreter tests against its extension (in $(CLANG_PKG), beside a copy of the
# Python package, so python/milkit's GCC extension stays)
CLANG_BUILD = $(BUILD)-clang
CLANG_PKG = $(CLANG_BUILD)/pkg
clang-build: deps
	CC=clang CXX=clang++ cmake -S . -B $(CLANG_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DMILKIT_WERROR=ON \
	  -DPython_EXECUTABLE=$$(command -v $(PYTHON)) -DMILKIT_PYTHON_OUTPUT_DIR=$(CURDIR)/$(CLANG_PKG)/milkit
	@grep -q 'CMAKE_CXX_COMPILER_ID "Clang"' $(CLANG_BUILD)/CMakeFiles/*/CMakeCXXCompiler.cmake || \
	  { echo "$(CLANG_BUILD) was configured with another compiler than clang: remove it"; exit 1; }
	cmake --build $(CLANG_BUILD) -j$(JOBS)

test-clang: clang-build
	ctest --test-dir $(CLANG_BUILD) --output-on-failure -j$(JOBS)
	mkdir -p $(CLANG_PKG)
	$(call copy_python_package,$(CLANG_PKG))
	PYTHONPATH=$(CURDIR)/$(CLANG_PKG) $(PYTHON) -c "import milkit._core as c; \
	  assert c.__file__.startswith('$(CURDIR)/$(CLANG_PKG)/'), c.__file__; print('clang extension', c.__file__)"
	PYTHONPATH=$(CURDIR)/$(CLANG_PKG) $(PYTHON) -m pytest -q -p no:cacheprovider \
	  tests/python/api/test_api.py tests/python/exec

# every milkit source (core, bindings, C++ tests) through clang++ -stdlib=libc++ -fsyntax-only: code
# that leans on libstdc++'s extensions or transitive includes fails here. No linking (Debian's
# protobuf is built against libstdc++). One file at a time; a file is checked again only when it or a
# header it includes changes (clang's -MMD dependency files).
LIBCXX_BUILD = $(BUILD)-libcxx
LIBCXX_SRCS := $(shell find cpp/src -name '*.cpp' | sort) $(wildcard bindings/*.cpp) $(wildcard tests/cpp/*.cpp)
LIBCXX_OKS := $(LIBCXX_SRCS:%.cpp=$(LIBCXX_BUILD)/%.ok)
LIBCXX_PROTOS := $(patsubst proto/%.proto,$(LIBCXX_BUILD)/proto/%.pb.h,$(wildcard proto/*.proto))
check-libcxx: deps
	@$(MAKE) --no-print-directory -j1 libcxx-all

.PHONY: libcxx-all
libcxx-all: $(LIBCXX_PROTOS) $(LIBCXX_OKS)
	@echo "check-libcxx: $(words $(LIBCXX_OKS)) files clean under libc++"

$(LIBCXX_BUILD)/proto/%.pb.h: proto/%.proto
	@mkdir -p $(@D)
	protoc --cpp_out=$(@D) -I proto $<

# third-party and generated headers as -isystem: only milkit's own code is held to -Werror
$(LIBCXX_BUILD)/flags: Makefile
	@mkdir -p $(@D)
	@{ echo "-std=c++17 -stdlib=libc++ -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror"; \
	  echo "-Icpp/include -isystem $(LIBCXX_BUILD)/proto"; \
	  for d in /usr/include/openblas /usr/include/*/openblas-pthread /usr/include/*/openblas-openmp; do \
	    if [ -f $$d/cblas.h ]; then echo "-isystem $$d"; break; fi; done; \
	  $(PYTHON) -m pybind11 --includes | sed 's/-I/-isystem /g'; } > $@.tmp && mv $@.tmp $@

$(LIBCXX_BUILD)/%.ok: %.cpp $(LIBCXX_BUILD)/flags $(LIBCXX_PROTOS)
	@mkdir -p $(@D)
	@echo "libc++ $<"
	@clang++ @$(LIBCXX_BUILD)/flags -MMD -MP -MF $(@:.ok=.d) -MT $@ $< && touch $@

-include $(LIBCXX_OKS:.ok=.d)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-asan-py $(CLANG_BUILD) $(LIBCXX_BUILD) python/milkit/_core*.so
