# The commands of the README:
#   make demo   trains on the embedded corpus, exports a SavedModel, translates with it
#   make test   runs the test suite but the tests marked slow (what .ci/run calls first)
#   make test-slow  runs only the tests marked slow (what .ci/run calls then), the hostile-input signal cases last
#   make docs   builds the documentation site into docs/_build/html (strict: a warning fails it)
# Each creates ./.venv and installs the package into it on first use; each can be run again.
#
# Variables: RUN_DIR, EXPORT_DIR (where the demo writes), DEMO_ARGS (extra training flags,
# e.g. DEMO_ARGS=--train_steps=200), PYTEST_ARGS (what `make test` runs; default: every test not marked
# slow; e.g. a file, or PYTEST_ARGS=tests for every test),
# TEST_WORKERS (pytest-xdist processes, one test file each at a time; 0: run in this process),
# DOCS_NOTEBOOKS (auto: the site's notebook pages show outputs, the notebooks executed first when
# they changed, minutes the first time; stored: without outputs, nothing executed).

PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
DEMO_STAMP  := $(VENV)/.installed-demo
DOCS_STAMP  := $(VENV)/.installed-docs
RUN_DIR     ?= runs/demo
EXPORT_DIR  ?= runs/demo_export
DEMO_ARGS   ?=
PYTEST_ARGS ?= -m "not slow" tests
TEST_WORKERS ?= 2
# Every skip is listed with its reason (-rs), an unregistered marker is an error, and a test that hangs
# fails after 30 minutes (pytest-timeout) instead of holding CI.
PYTEST_OPTIONS := -q -rs --strict-markers --timeout=1800
# The hostile-input signal cases time signals to moments of a command's run: they run after the other slow
# tests, in one process, so that no other test file loads the host meanwhile.
HOSTILE     := tests/faults/test_faults_hostile.py
DOCS_NOTEBOOKS ?= auto

.PHONY: demo test test-slow docs install clean

# $(call install_extra,EXTRA): ./.venv (created if missing) with the package and its EXTRA installed; then the
# target's stamp file.
define install_extra
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.$(if $(1),[$(1)])'
	touch $@
endef

# The demo needs the package alone (no test, docs or CTranslate2 extras).
$(DEMO_STAMP): setup.py
	$(call install_extra,)

$(STAMP): setup.py
	$(call install_extra,test)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m keras_transformer.train --flagfile=configs/demo.flags --model_dir=$(RUN_DIR) $(DEMO_ARGS)
	$(PY) -m keras_transformer.export --model_dir=$(RUN_DIR) --export_dir=$(EXPORT_DIR)
	$(PY) -m keras_transformer.translate --export_dir=$(EXPORT_DIR) \
		--input=configs/demo_sentences.en --reference=configs/demo_sentences.de

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_OPTIONS) -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest $(PYTEST_OPTIONS) -n $(TEST_WORKERS) --dist loadfile -m slow tests -k "not test_hostile_signal"
	$(PY) -m pytest $(PYTEST_OPTIONS) -m slow $(HOSTILE) -k test_hostile_signal

$(DOCS_STAMP): setup.py
	$(call install_extra,docs)

# The notebooks run (when changed) into docs/_build/notebooks, then Sphinx reads every page afresh (-E).
docs: $(DOCS_STAMP)
	test "$(DOCS_NOTEBOOKS)" = stored || $(PY) docs/_ext/notebook_pages.py
	$(PY) -m sphinx -E -W --keep-going -n -b html -D kt_notebooks=$(DOCS_NOTEBOOKS) docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
