# T1 Forge: `make demo` and `make test` set up everything they need (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Debian packages: the sandbox (bubblewrap, util-linux), offline base images (mmdebstrap) and
# the tools seed tasks require.
# faketime, locales: the audit's flakiness reruns ship libfaketime and a compiled de_DE.UTF-8.
APT_PACKAGES := bubblewrap util-linux git make gcc g++ python3 python3-venv jq sqlite3 xz-utils \
	zip unzip bc file patch openssl perl cmake tmux strace procps passwd mmdebstrap \
	e2fsprogs iproute2 slirp4netns faketime locales
# The docker backend's engine in tests (a private Podman service).
APT_PACKAGES += podman runc conmon catatonit uidmap containernetworking-plugins
# Optional: the browser test skips (saying why) without it.
APT_OPTIONAL := chromium

.PHONY: install system-deps test lint typecheck demo bench clean clean-data clean-system lock

install: system-deps $(STAMP)

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages:$$missing"; \
	    echo "run as root:  apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi
	@for p in $(APT_OPTIONAL); do dpkg -s $$p >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$p >/dev/null \
	      || echo "optional package $$p not installed (its tests will skip)"; \
	  else echo "optional: apt-get install $$p (browser test)"; fi; done

# constraints.txt is the lock: the exact versions the committed results were measured with.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "installing the locked packages into $(VENV) (log: $(VENV)/install.log) ..."
	@$(BIN)/pip install -q -c constraints.txt -e '.[train,orchestrate,dev]' \
	  --config-settings editable_mode=compat >$(VENV)/install.log 2>&1 \
	  || { tail -n 40 $(VENV)/install.log; echo "pip install failed: $(VENV)/install.log"; exit 1; }
	touch $(STAMP)

# Resolve pyproject.toml afresh into constraints.new (review it, pin back the versions results
# were measured with, then move it over constraints.txt).
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q -e '.[train,orchestrate,dev]'
	.lock-venv/bin/pip freeze --exclude-editable > constraints.new
	rm -rf .lock-venv
	@echo "wrote constraints.new; compare with constraints.txt"

lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# mypy with the pydantic plugin over the packages ([tool.mypy] in pyproject.toml).
typecheck: install
	$(BIN)/mypy

# The suite runs on two pytest-xdist workers (it mostly waits on sandboxes, engines and
# servers; its measured times are in README.md, one place).
# A file's tests stay on one worker, in order (--dist loadfile); the Ray modules take turns
# (tests/executor/conftest.py); a test that times a training run gets the warm start from
# the `warm_policy` fixture first (tests/conftest.py). TEST_WORKERS=0: one process.
# The warm start (a few CPU minutes on a clean checkout) starts beside lint and mypy, which
# use one core, rather than inside the suite, where it held a worker for 8 minutes under the
# other's load; a test that needs it before it is done waits for it (training/warm_start.py).
TEST_WORKERS ?= 2
WARM_START := $(BIN)/python -c 'from training.warm_start import warm_started_policy as w; w(reuse_stale=True)'

test: install
	@$(WARM_START) >$(VENV)/warm-start.log 2>&1 & ws=$$!; trap 'kill $$ws 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory lint typecheck || { kill $$ws 2>/dev/null; exit 1; }; \
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25; rc=$$?; \
	wait $$ws || echo "the warm-start build beside lint failed (log: $(VENV)/warm-start.log)"; \
	exit $$rc

demo: install
	$(BIN)/t1 demo

bench: install
	$(BIN)/python benchmarks/sandbox_overhead.py

# clean: what this checkout made (the venv, caches, the store, runs, reports, the Dagster and
# Prefect instances, the warm-start cache). clean-system: the sandbox state shared by every
# checkout on this machine ($(SANDBOX_STATE): base images, layers, the Podman storage), after
# reclaiming what killed runs left; run it when no other checkout uses the sandbox.
SANDBOX_STATE ?= $(or $(T1_SANDBOX_STATE),/var/cache/t1-forge)
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .lock-venv constraints.new
	rm -rf data runs artifacts .dagster .prefect .cache/t1-forge
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
	rm -rf *.egg-info

clean-system:
	@if [ -x $(BIN)/t1 ]; then $(BIN)/t1 sandbox gc || true; fi
	rm -rf $(SANDBOX_STATE) /dev/shm/t1-forge
