# The two commands of the README:
#   make demo   trains, evaluates, exports and translates on the embedded corpus
#   make test   runs the test suite (what .ci/run calls)
# Each creates ./.venv and installs the package into it on first use; both can be run again.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_transformer.summary --preset=base

test: $(STAMP)
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) build *.egg-info
