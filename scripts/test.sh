#!/usr/bin/env bash
# Every check CI runs (through .ci/run, the README's test command), cheapest to read first:
# lint and format, the import contracts, the types, the default suite, then the tests marked slow.
#   bash scripts/test.sh            all of it
#   bash scripts/test.sh -k store   extra arguments go to both pytest runs
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
echo "== ruff check and format"
"$bin/ruff" check .
"$bin/ruff" format --check .
echo "== import contracts (pyproject.toml's [tool.importlinter])"
"$bin/lint-imports" --no-cache
echo "== types (mypy over kernels/ and workbench/, pyproject.toml's [tool.mypy])"
"$bin/mypy"
# One worker per core (pytest-xdist): the offline compiles and the engine's child processes keep
# both cores of a CI machine busy, where one worker left one idle most of the time.
echo "== the suite (pytest's default: everything not marked slow), one worker per core"
"$bin/python" -m pytest -q -n auto "$@"
echo "== the slow tests"
"$bin/python" -m pytest -q -n auto -m slow "$@"
