# mor-streamer: the README's two commands. Both set everything up on a bare machine
# (virtualenv, the project, Maven-resolved JVM jars) and are fast when run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMPS := .stamps
PYTEST_ARGS ?=
# Two pytest-xdist workers: the second fills the waits on JVM starts, servers and killed
# processes (tests/conftest.py groups and orders the work).
# TEST_WORKERS=0 runs in one process, in collection order.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
# Apache Hudi's JVM tier (tests/hudi_jvm): its own interpreter with pyspark 3.5.x.
HUDI_VENV := .venv-hudi
# The class-data archive the suite's Spark JVMs start from (tests/support/jvm_archive.py):
# a third less CPU per JVM start, for the hundred or so a run starts.
JVM_ARCHIVE := .cache/spark-classes.jsa

.PHONY: demo test test-setup test-campaigns campaigns-setup setup venv jars hudi-env pushgateway mariadb lint typecheck fast bench clean

# The set-up steps do not depend on each other (two virtualenvs, Maven, Go, apt; the class
# archive and the checks only on the first virtualenv): a sub-make runs them side by side,
# which on a bare machine takes the set-up from the sum of their times (about 4:45 here)
# to the longest chain (pip, then the class archive). GNU Make before 4.4 ignores a -j set
# inside the Makefile, hence the sub-make.
SETUP_JOBS ?= 6

# Python writes and reuses its bytecode caches here even where the environment turns them
# off: a run starts a few hundred interpreters (each `streamer run` of the campaigns, each
# Spark Python worker, each pytest worker rewriting the test modules' asserts), and without
# the caches every one of them compiles this project's modules again.
unexport PYTHONDONTWRITEBYTECODE

demo:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) venv jars
	$(BIN)/streamer demo

# Every test, campaigns at smoke size. A skip fails the run (MOR_NO_SKIP) unless it names
# an optional engine (Docker), which the summary lists.
test:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) test-setup
	MOR_REQUIRE_HUDI=1 MOR_NO_SKIP=1 MOR_CAMPAIGN_SIZE=smoke $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# The crash and fault campaigns at full size (tests marked `campaign`).
test-campaigns:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) campaigns-setup
	MOR_REQUIRE_HUDI=1 MOR_NO_SKIP=1 MOR_CAMPAIGN_SIZE=full $(BIN)/python -m pytest -m campaign $(XDIST) $(PYTEST_ARGS)

test-setup: campaigns-setup lint typecheck
campaigns-setup: setup hudi-env $(JVM_ARCHIVE)

# The fast subset: no Spark, no Kafka, no Hudi JVM, nothing slow.
fast:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) setup
	$(BIN)/python -m pytest -m "not integration and not kafka and not slow and not hudi_jvm" $(PYTEST_ARGS)

setup: venv jars pushgateway mariadb

venv: $(STAMPS)/venv
jars: $(STAMPS)/jars
hudi-env: $(STAMPS)/hudi-env
pushgateway: $(STAMPS)/pushgateway
mariadb: $(STAMPS)/mariadb

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# --no-compile: pip byte-compiles every module it installs (pyspark, pandas, botocore and the
# rest, most of which nothing here imports): half of pip's time here (35 s -> 19 s alone). The
# modules a run imports are compiled on first import instead (the caches kept on above), so
# the set-up as a whole gains less: about 5 CPU-s on a clean clone (benchmarks/RESULTS.md).
$(STAMPS)/venv: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -e '.[test]'
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/hudi-env: jvm/hudi/requirements.txt
	$(PYTHON) -m venv $(HUDI_VENV)
	$(HUDI_VENV)/bin/python -m pip install -q --upgrade pip
	$(HUDI_VENV)/bin/python -m pip install -q --no-compile -r jvm/hudi/requirements.txt
	@mkdir -p $(STAMPS) && touch $@

$(JVM_ARCHIVE): $(STAMPS)/venv $(STAMPS)/jars
	rm -f $@
	$(BIN)/python -m tests.support.jvm_archive $@

$(STAMPS)/jars: pom.xml jvm/spark-kafka/pom.xml jvm/kafka-broker/pom.xml jvm/apicurio/pom.xml jvm/hudi/pom.xml jvm/s3proxy/pom.xml jvm/hive-metastore/pom.xml jvm/connect/pom.xml jvm/connect-apicurio/pom.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) and Java 17+ are needed to resolve the JVM jars" >&2; exit 1; }
	rm -rf .jvm
	mvn -q -B package
	@mkdir -p $(STAMPS) && touch $@

# A Prometheus push gateway for the metrics tests (tests/unit/observe/test_metrics.py,
# tests/integration/test_observability.py), built from the Go module proxy into .tools/bin.
# `go install ...@version` is refused here by the proxy's deprecation lookup (403 on
# @v/list), so the tagged module is downloaded with `go mod download` and built in place.
# Go is a set-up requirement: without it, or if the build fails, this step fails and says
# how to install Go (the metrics tests fail the same way if the binary is missing).
PUSHGATEWAY_VERSION ?= v1.11.1
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
TOOLS := .tools
GO_INSTALL_HINT := install Go 1.21+ (https://go.dev/dl/ into /usr/local/go, or Debian/Ubuntu: sudo apt-get install golang), or pass GO=/path/to/go

$(STAMPS)/pushgateway:
	@if [ ! -x "$(GO)" ]; then \
	  echo "error: Go not found (GO=$(GO)); the push gateway for the metrics tests is built with it." >&2; \
	  echo "  $(GO_INSTALL_HINT), then run: make pushgateway" >&2; \
	  exit 1; \
	fi; \
	dir=$$($(GO) mod download -json github.com/prometheus/pushgateway@$(PUSHGATEWAY_VERSION) \
	  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	if [ -z "$$dir" ]; then \
	  echo "error: could not download github.com/prometheus/pushgateway@$(PUSHGATEWAY_VERSION) with $(GO)" >&2; \
	  echo "  the Go module proxy must be reachable (GOPROXY=$$($(GO) env GOPROXY)); then run: make pushgateway" >&2; \
	  exit 1; \
	fi; \
	mkdir -p $(TOOLS)/bin && (cd "$$dir" && $(GO) build -o $(CURDIR)/$(TOOLS)/bin/pushgateway .) || { \
	  echo "error: building the push gateway $(PUSHGATEWAY_VERSION) with $(GO) failed (see above)" >&2; \
	  echo "  $(GO_INSTALL_HINT), then run: make pushgateway" >&2; \
	  exit 1; }; \
	mkdir -p $(STAMPS) && touch $@

# A MariaDB server for the MySQL change-data-capture tests (tests/support/mariadb.py starts
# its own `mariadbd` in a temp folder; Debian packages MariaDB, not Oracle's MySQL). Found on
# the PATH or in /usr/sbin (`mariadbd`, or a `mysqld` that is MariaDB's), nothing is
# installed; else, as root, Debian's mariadb-server is installed without starting its
# system service (a policy-rc.d that refuses service starts while apt runs, removed after
# unless one was there already), and the service the package enables is disabled again;
# not as root, the step says what to install and fails.
MARIADB_HINT := install MariaDB 10.11+ (Debian/Ubuntu: sudo apt-get install mariadb-server), then run: make mariadb

$(STAMPS)/mariadb:
	@search="$$PATH:/usr/sbin:/usr/local/sbin"; \
	found=$$(PATH="$$search" command -v mariadbd) || { \
	  found=$$(PATH="$$search" command -v mysqld) && "$$found" --version | grep -q MariaDB || found=; }; \
	if [ -z "$$found" ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	    echo "error: no MariaDB server (mariadbd) on the PATH or in /usr/sbin; the MySQL change-data-capture tests start one." >&2; \
	    echo "  $(MARIADB_HINT)" >&2; \
	    exit 1; \
	  fi; \
	  echo "installing Debian's mariadb-server (service not started)"; \
	  policy=/usr/sbin/policy-rc.d; ours=; \
	  if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' >$$policy && chmod 755 $$policy && ours=1; fi; \
	  apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mariadb-server >/dev/null; \
	  rc=$$?; [ -n "$$ours" ] && rm -f $$policy; \
	  if [ $$rc != 0 ]; then echo "error: apt-get install mariadb-server failed (code $$rc); $(MARIADB_HINT)" >&2; exit 1; fi; \
	  if command -v systemctl >/dev/null; then systemctl disable --quiet mariadb.service >/dev/null 2>&1 || true; fi; \
	  found=$$(PATH="$$PATH:/usr/sbin" command -v mariadbd) || { echo "error: mariadb-server installed but no mariadbd found" >&2; exit 1; }; \
	fi; \
	echo "MariaDB server: $$found ($$($$found --version))"; \
	mkdir -p $(STAMPS) && touch $@

lint: venv
	$(BIN)/ruff check streamer sources transforms tests benchmarks

typecheck: venv
	$(BIN)/mypy

bench:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) setup hudi-env
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(HUDI_VENV) .jvm $(STAMPS) $(TOOLS) lake .pytest_cache .mypy_cache .cache
