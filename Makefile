# Agent Desk: `make run` starts the app, `make test` runs the whole suite (`make test-fast` the quick part),
# `make bench` prints the figures.
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(not ((3,11) <= sys.version_info[:2] < (3,14)))' && { echo $$p; break; }; done)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run test test-fast bench lint engine images package deb-tools clean keyring-deps test-floors postgres-tools \
	rootless-deps remote-tools bench-tools

$(PY):
	@test -n "$(PYTHON)" || { echo "error: Python >=3.11,<3.14 is needed (qasync breaks on 3.14)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[dev,package,postgres]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/agent-desk

# The sandbox tests need a Docker engine and the test images: engine.sh starts dockerd when none answers
# (as root on Linux) and builds the base image offline with debootstrap. `make engine RUNSC=1` also installs
# gVisor's runsc (Debian) and registers it with the dockerd engine.sh starts (done too when runsc is on PATH).
engine:
	RUNSC="$(RUNSC)" sandbox_images/engine.sh

# The remote-engine tests' programs (Debian, installed as root when missing): openssh-server (a real sshd on
# loopback for DOCKER_HOST=ssh://) and runsc (gVisor). Without runsc the gVisor tests skip, saying so, except
# under CI=true, where a runsc that cannot be installed stops the run here (and the tests would fail).
remote-tools:
	@test -x /usr/sbin/sshd || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server >/dev/null; \
	  else echo "remote-tools: install openssh-server (Debian); the ssh tests need it"; exit 1; fi; }
	@command -v runsc >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -q >/dev/null; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >/dev/null || \
	      echo "remote-tools: Debian's runsc could not be installed: the gVisor tests skip, saying so"; \
	  else echo "remote-tools: no runsc (Debian: runsc): the gVisor tests skip, saying so"; fi; \
	  command -v runsc >/dev/null || [ "$$CI" != true ] || { echo "remote-tools: runsc is required in CI"; exit 1; }; }

images: $(STAMP) engine
	$(VENV)/bin/agent-desk images build minimal

# The wheel, the sdist, the bundle and the .deb into dist/ (packaging/make_package.py; reused while unchanged),
# built in a venv of their own from requirements.lock's hashed pins, not from $(VENV).
package: $(STAMP) deb-tools
	$(PY) packaging/make_package.py

# Debian's tools for `make package` and tests/packaging (installed as root): dpkg-deb, readelf and strip
# (binutils), lintian, desktop-file-validate, and Debian's python3 with its venv module and shared libpython
# (the bundle's interpreter: its prefix is /usr, no path of this machine).
DEB_TOOLS := dpkg binutils lintian desktop-file-utils python3-venv \
	$(shell /usr/bin/python3 -c 'import sysconfig; print("libpython" + sysconfig.get_config_var("LDVERSION"))' 2>/dev/null)
deb-tools:
	@( for t in dpkg-deb readelf strip lintian desktop-file-validate; do command -v $$t >/dev/null || exit 1; done; \
	   /usr/bin/python3 -c 'import ensurepip, sysconfig, pathlib, sys; \
	     sys.exit(not (pathlib.Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("INSTSONAME")).exists())'; \
	 ) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(DEB_TOOLS) >/dev/null; \
	  else echo "deb-tools: install $(DEB_TOOLS) (the packaging tests skip without them)"; fi; }

# The rootless base-image test: mmdebstrap, uidmap and a non-root user with subordinate ids (as root).
rootless-deps:
	.ci/rootless-deps.sh

# PostgreSQL's programs (initdb, pg_ctl, postgres) for the tests' throwaway server (tests/postgres.py):
# Debian's postgresql package when they are neither on PATH nor in /usr/lib/postgresql (installed as root).
postgres-tools:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null; \
	  else echo "postgres-tools: install PostgreSQL (Debian: postgresql); the store tests need it"; exit 1; fi; }

# The real keyring test needs gnome-keyring and dbus (Debian): installed when missing, as root.
keyring-deps:
	.ci/keyring-deps.sh

# The lint (style and the import contracts of docs/architecture.md) runs first: a broken layer fails CI.
# tests/packaging (marked slow) builds and installs the packages: the first run takes minutes.
# --durations=25 names the slowest tests of every run (tests/README.md says what each marker costs).
test: lint remote-tools engine keyring-deps deb-tools postgres-tools rootless-deps
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest --durations=25

# The edit loop: no Docker engine, no package builds, no end-to-end runs (PostgreSQL's programs still needed).
test-fast: $(STAMP) postgres-tools
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not docker and not slow and not e2e" --durations=25

# The dependency floors, proven in a venv of their own (CI runs it after `make test`).
test-floors: remote-tools engine
	.ci/floors

# The figures need the engine and its images, and PostgreSQL's programs for bench_store_pg's server.
# The proxy benchmark's yardsticks in C (benchmarks/bench_proxy.py): a figure each when installed, none otherwise.
bench-tools:
	@command -v socat >/dev/null && command -v tinyproxy >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends socat tinyproxy-bin >/dev/null \
	    || echo "bench-tools: socat and tinyproxy-bin did not install: the proxy benchmark has no yardsticks"; \
	  else echo "bench-tools: install socat and tinyproxy for the proxy benchmark's yardsticks"; fi; }

bench: $(STAMP) engine postgres-tools bench-tools
	QT_QPA_PLATFORM=offscreen $(PY) -m benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --cache-dir $(VENV)/.import-linter-cache

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
