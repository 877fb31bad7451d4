# The two commands of README.md. Both create .venv and install everything on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
INSTALLED := $(VENV)/.installed

.PHONY: demo test venv clean

demo: $(INSTALLED)
	$(VENV)/bin/python -m examples.demo

# Two test processes at a time (most tests keep one core busy; local clusters claim their
# cores across processes), then the tests marked `alone`, which time real runs.
test: $(INSTALLED)
	$(VENV)/bin/python -m pytest -n 2 --dist worksteal -m "not alone" tests
	$(VENV)/bin/python -m pytest -m alone tests

venv: $(INSTALLED)

# Reinstalled whenever pyproject.toml (where the pins live) changes.
$(INSTALLED): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e ".[test]"
	touch $(INSTALLED)

clean:
	rm -rf $(VENV) .cache placeto-out *.egg-info
