# The two commands of the README:
#   make demo   trains on the embedded corpus, exports a SavedModel, translates with it
#   make test   runs the test suite (exactly what .ci/run calls)
# Each creates ./.venv and installs the package into it on first use; both can be run again.
#
# Variables: RUN_DIR, EXPORT_DIR (where the demo writes), DEMO_ARGS (extra training flags,
# e.g. DEMO_ARGS=--train_steps=200), PYTEST_ARGS (e.g. PYTEST_ARGS='-m "not slow"' or a file),
# TEST_WORKERS (pytest-xdist processes, one test file each at a time; 0: run in this process).

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
RUN_DIR     ?= runs/demo
EXPORT_DIR  ?= runs/demo_export
DEMO_ARGS   ?=
PYTEST_ARGS ?= tests
TEST_WORKERS ?= 2

.PHONY: demo test install clean

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_transformer.train --flagfile=configs/demo.flags --model_dir=$(RUN_DIR) $(DEMO_ARGS)
	$(PY) -m export --model_dir=$(RUN_DIR) --export_dir=$(EXPORT_DIR)
	$(PY) -m keras_transformer.translate --export_dir=$(EXPORT_DIR) \
		--input=configs/demo_sentences.en --reference=configs/demo_sentences.de

test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
