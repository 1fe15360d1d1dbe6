# The course's entry points. `make lab` sets everything up and opens the
# course; `make test` sets everything up and runs every test.
#
# How torch is chosen: scripts/install_torch.py installs TORCH (default
# torch==2.13.0) into .venv *before* the package, so the package's range
# (torch>=2.4,<3) is already satisfied and pip does not pull another build. It
# picks the index itself: Linux without an NVIDIA GPU gets the CPU wheel from
# https://download.pytorch.org/whl/cpu (falling back to PyPI, with a message,
# when that cannot be reached); Linux with a GPU and macOS get PyPI's wheel.
# TORCH_INDEX overrides the choice (a URL, or "default" for PyPI):
#   make lab TORCH_INDEX=default
# TORCH_FIND_LINKS takes torch from a page of wheels instead, e.g. a domestic mirror of
# the CPU wheels; pip's own PIP_INDEX_URL picks the PyPI mirror for everything else
# (README: "Setting up from mainland China"):
#   PIP_INDEX_URL=https://pypi.tuna.tsinghua.edu.cn/simple \
#     make lab TORCH_FIND_LINKS=https://mirrors.aliyun.com/pytorch-wheels/cpu/
# A different Python for the virtual environment:
#   make test PYTHON=python3.12
# Every other package is installed at the version constraints.txt names (one file for
# Python 3.10 to 3.13 and every OS), so CI and a learner's setup run what was tested;
# `make constraints` resolves it afresh (the one command to update it), and
# `make setup CONSTRAINTS=` installs without it.

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_FIND_LINKS ?=
CONSTRAINTS ?= constraints.txt
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.tfcourse-installed

.PHONY: setup lab demo test test-fast test-wheel lint format constraints test-gpu notebooks notebooks-check execute capstone bench doctor site clean

setup: $(STAMP)

# Everything after torch is installed by uv (pinned in constraints.txt, itself installed by
# pip): the same versions as pip would pick, in a few seconds where pip took about a minute.
# uv does not read pip's settings, so scripts/pip_indexes.py passes pip's index, extra
# indexes and find-links on as uv's flags, wherever pip reads them (PIP_INDEX_URL, `pip config
# set global.index-url`, pip.conf / pip.ini): the mainland-China mirror of the README.
# Bytecode is compiled at install (pip's default, not uv's), and the package's own too: a
# process that may not write it (PYTHONDONTWRITEBYTECODE=1, or the grader's workers, which see
# the environment read-only) would otherwise compile every module it imports, every time.
# The setup's own line, in the reader's language (TFCOURSE_LANG=zh, as the package's).
NO_SANDBOX = $(if $(filter zh%,$(TFCOURSE_LANG)),make setup：没有评分沙箱：需要隔离运行学员代码的测试将被跳过,make setup: no grading sandbox: the tests that seal workers will be skipped)

# The grading sandbox (bubblewrap, libseccomp), where the machine lets setup install it (root,
# or sudo without a password); else the tests that seal workers are skipped, saying so.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	command -v bwrap >/dev/null 2>&1 || bash scripts/apt_install.sh bubblewrap libseccomp2 || \
	  echo "$(NO_SANDBOX)" >&2
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) scripts/install_torch.py --python $(PY) --torch "$(TORCH)" $(if $(TORCH_INDEX),--index "$(TORCH_INDEX)") $(if $(TORCH_FIND_LINKS),--find-links "$(TORCH_FIND_LINKS)")
	$(PY) -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) uv
	$(BIN)/uv pip install --python $(PY) --quiet --compile-bytecode $$($(PY) scripts/pip_indexes.py --python $(PY)) $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[dev]"
	$(PY) -m compileall -q tfcourse
	touch $(STAMP)

# Resolve constraints.txt afresh from pyproject.toml's ranges: the newest versions that
# work together, for every supported Python and OS (uv's universal resolution). torch is
# left out: scripts/install_torch.py installs TORCH, from the index that suits the machine
# (torch's CUDA-only dependencies stay listed and are never installed by the CPU build).
constraints: setup
	echo "$(TORCH)" | $(BIN)/uv pip compile pyproject.toml - --extra dev --universal \
	  --python-version 3.10 --no-emit-package torch --quiet -o constraints.txt

# The habits CI enforces first (the fast lane): ruff's rules and format, and mypy's types,
# as far as pyproject.toml turns them on. `make format` applies what ruff can fix itself.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

lab: setup
	$(BIN)/tfcourse lab

demo: setup
	$(BIN)/tfcourse demo

# Everything: unit, parity and grader tests, nbval over the solution notebooks,
# the learner notebooks failing at every exercise, the browser test. JOBS pytest
# workers (pytest-xdist; notebook kernels run single-threaded, so one per core).
# The fast set runs first, so a broken unit fails the run within minutes; then the slow set.
JOBS ?= auto
# Every process of the parallel set uses one thread: two workers with two OpenMP threads each
# on two cores spin against each other (a training run measured 4 s alone, 21 s so). The tests
# marked `alone` use several threads on purpose and run afterwards, by themselves. The slow set
# is handed out a test at a time, the ones marked `long` first (tests/conftest.py says why),
# and its slowest twenty are listed: the CI run must stay well under twenty minutes.
test: test-fast
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --dist load --maxschedchunk 1 -m "slow and not alone" --durations=20
	$(PY) -m pytest -m alone

# The course as a learner installs it: the wheel built, installed into a fresh venv and used
# from an empty folder (doctor, notebooks, grading in English and Chinese).
test-wheel: setup
	$(PY) scripts/check_wheel.py

# The fast set: one to one and a half minutes on 2 idle cores, no notebook execution.
test-fast: setup
	$(PY) -m pytest -n $(JOBS) -m "not slow"

# The same tests and nbval runs (tests/test_notebooks.py) on a CUDA GPU: every
# notebook kernel and check runs on TFCOURSE_DEVICE=cuda, and nbval compares with
# the outputs stored from CPU runs. Stops at once, saying why, without a GPU. Threads and
# order as in `make test` (one thread per worker, the `alone` tests afterwards).
test-gpu: setup
	$(PY) scripts/check_cuda.py
	TFCOURSE_DEVICE=cuda OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --dist load --maxschedchunk 1 -m "not alone"
	TFCOURSE_DEVICE=cuda $(PY) -m pytest -m alone

notebooks: setup
	$(BIN)/tfcourse build-notebooks

notebooks-check: setup
	$(BIN)/tfcourse build-notebooks --check

# Every solution but the capstone, whose stored outputs come from its full run
# (TFCOURSE_CAPSTONE=full tfcourse execute --timeout 3600 solutions/12_capstone.ipynb, then
# the same for solutions/zh/12_capstone.ipynb). English first; then the Chinese edition is
# rebuilt from it and executed, which fills the cells that print translated text.
NOT_CAPSTONE = $(filter-out %/12_capstone.ipynb,$(sort $(wildcard $(1)/*.ipynb)))
execute: setup
	$(BIN)/tfcourse execute $(call NOT_CAPSTONE,solutions)
	$(BIN)/tfcourse build-notebooks
	$(BIN)/tfcourse execute $(call NOT_CAPSTONE,solutions/zh)
	$(BIN)/tfcourse build-notebooks

# Notebook 12 in full (about ten minutes on an idle 2-core CPU, half of them training) in a
# copy under build/capstone/; prints its verdicts.
capstone: setup
	mkdir -p build/capstone
	cp solutions/*.ipynb build/capstone/  # tc.yours() reads the parts from the notebooks beside it
	TFCOURSE_CAPSTONE=full $(BIN)/tfcourse execute --timeout 3600 build/capstone/12_capstone.ipynb
	$(PY) -c "import nbformat; nb = nbformat.read('build/capstone/12_capstone.ipynb', 4); print(''.join(o.get('text', '') for c in nb.cells if c.get('id') in ('ngram', 'train', 'verdict', 'copy-train', 'phase', 'copy-verdict', 'head') for o in c.outputs))"

bench: setup
	$(PY) benchmarks/block_speed.py

doctor: setup
	$(BIN)/tfcourse doctor

# The course as a static HTML site in build/site/ (offline: open build/site/index.html).
site: setup
	$(BIN)/tfcourse site

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
