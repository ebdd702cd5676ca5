# mor-streamer: the README's two commands. Both set everything up on a bare machine
# (virtualenv, the project, Maven-resolved JVM jars) and are fast when run again.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMPS := .stamps
PYTEST_ARGS ?=

.PHONY: demo test setup venv jars lint fast bench clean

demo: setup
	$(BIN)/streamer demo

test: setup
	$(BIN)/ruff check streamer sources transforms tests benchmarks
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast subset: no Spark, no Kafka, nothing slow.
fast: setup
	$(BIN)/python -m pytest -m "not integration and not kafka and not slow" $(PYTEST_ARGS)

setup: venv jars

venv: $(STAMPS)/venv
jars: $(STAMPS)/jars

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMPS)/venv: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/jars: pom.xml jvm/spark-kafka/pom.xml jvm/kafka-broker/pom.xml jvm/apicurio/pom.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) and Java 17+ are needed to resolve the JVM jars" >&2; exit 1; }
	rm -rf .jvm
	mvn -q -B package
	@mkdir -p $(STAMPS) && touch $@

lint: venv
	$(BIN)/ruff check streamer sources transforms tests benchmarks

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .jvm $(STAMPS) lake .pytest_cache
