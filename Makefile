# Entry points (see README.md):
#   make run    set up on a fresh machine and run the headline experiment
#   make test   set up and run all tests (Rust and Python) after the lint checks
#   make bench  simulator-speed benchmarks
#   make clean  remove the virtualenv and build products
#   make fuzz   seeded fuzzing of every input (N=100000 SEED=0), outside make test
#   make ledger the baselines against the old kernels' figures (docs/validation.md)
#
# Set-up is a Python virtualenv in $(VENV) holding the package, built by
# maturin (installed as editable: Python sources are used in place; the
# extension is rebuilt only when Rust sources or presets change). With
# VMSIM_PGO=1 the extension and `make bench` are built with the cargo
# profile `pgo`: whole-crate optimisation and profile data from
# tools/pgo/profile, which prints nothing when it cannot make them (then a
# plain release build). Without it, a plain release build.

PYTHON ?= python3
CARGO  ?= cargo
VENV   ?= .venv
BIN    := $(VENV)/bin
TOOLS  := $(VENV)/.tools-installed
STAMP  := $(VENV)/.vmsim-built

# What the extension is built from (presets may be embedded in the core).
BUILD_INPUTS := Cargo.toml pyproject.toml $(wildcard Cargo.lock) \
	$(shell find crates machines experiments -type f \( -name '*.rs' -o -name '*.toml' \) 2>/dev/null) \
	tools/pgo/profile $(wildcard tools/pgo/train/*.toml bench/prof/*.toml)

.PHONY: run test lint test-rust test-python bench setup clean fuzz ledger

run: $(STAMP)
	$(BIN)/vmsim compare clear-target-last

test: lint test-rust test-python

# Formatting and lints are part of the tests: CI runs `make test`.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

test-rust:
	$(CARGO) test --workspace --release

test-python: $(STAMP)
	$(BIN)/python -m pytest -q tests/python

# The profile data of build $(1) (extension or bench), if any, for a build
# with the cargo profile `pgo`, in its own target directory (other
# RUSTFLAGS would rebuild target/); without it, cargo options $(2).
PGO_ENV = prof=$$(VMSIM_PGO=$${VMSIM_PGO:-0} $(PYTHON) tools/pgo/profile $(1) < /dev/null); \
	if [ -n "$$prof" ]; then \
		export RUSTFLAGS="-Cprofile-use=$$prof -Cllvm-args=-no-pgo-warn-mismatch -Cllvm-args=-pgso=false"; \
		export CARGO_TARGET_DIR="$(abspath target/pgo/use-$(1))"; \
		profile="--profile pgo"; \
	else profile="$(2)"; fi; \
	echo "building with cargo $${profile:-(default profile)}" >&2

# The simulator's speed, then a study's: the same sweep on 1 and 2 workers.
bench: $(STAMP)
	$(call PGO_ENV,bench,); $(CARGO) bench -p vmsim-core --bench sim_speed $$profile
	$(BIN)/python tools/study_timing.py --speedup --points 8 --size-mib 128

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(TOOLS): | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" pytest
	touch $@

$(STAMP): $(TOOLS) $(BUILD_INPUTS)
	$(call PGO_ENV,extension,--release); export VIRTUAL_ENV="$(abspath $(VENV))" PATH="$(abspath $(BIN)):$$PATH"; \
	$(BIN)/maturin develop $$profile --extras full,test,dask || { [ "$$profile" != "--release" ] && \
		echo "the pgo build failed: building without profile-guided optimisation" >&2 && \
		env -u RUSTFLAGS -u CARGO_TARGET_DIR $(BIN)/maturin develop --release --extras full,test,dask; }
	touch $@

clean:
	rm -rf $(VENV) python/vmsim/_core*.so
	find python tests -name __pycache__ -type d -prune -exec rm -rf {} +
	$(CARGO) clean

# Seeded fuzzing of configs, presets, experiment files, sweep grids,
# command lines, programs, Python policies and traces changed under their
# replay against the documented oracle (tools/fuzz.py, docs/config.md); not
# part of `make test`, which runs a short pass (tests/python/test_fuzz.py).
N    ?= 10000
SEED ?= 0
fuzz: $(STAMP)
	$(BIN)/python tools/fuzz.py -n $(N) --seed $(SEED)

# The ledger (docs/validation.md, "The ledger"): the five experiments at
# their default scales, through the result cache, into docs/ledger.json,
# docs/validation.md and README's trust table.
ledger: $(STAMP)
	$(BIN)/vmsim ledger --write
