# The two commands of the README. Each does its own set-up (apt packages, .venv, pip).
.PHONY: demo demo-rig test lint bench bench-rig dist
# four pytest workers, each with its own private systemd, on CI's two cores: the rig tests mostly
# wait on starts in real time (the run uses about half a core), so more workers than cores cut the wall
# time; docs/testing.md has the runs measured (3 workers: 562 s of pytest, 4: 454 s, one after the other)
TEST_WORKERS ?= 4
demo:
	@scripts/setup
	.venv/bin/svcdiag replay --example dflash-smoke; \
	.venv/bin/svcdiag replay --example max-running-zero --config dflash-tp1-mr8; \
	test $$? -eq 1   # the seed's failure: exit 1 is the expected answer

test:
	@scripts/setup rig
	.venv/bin/ruff check -q svcdiag tests bench ansible_collections
	.venv/bin/lint-imports --no-cache >.lint-imports.log 2>&1 || { cat .lint-imports.log; exit 1; }
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint:
	.venv/bin/ruff check svcdiag tests bench ansible_collections
	.venv/bin/lint-imports --no-cache

demo-rig:
	@scripts/setup rig
	.venv/bin/python -m svcdiag.systemd.rig run -- svcdiag --units units up demo-smoke --wait-ready

# each row beside its anchor, with the ratio (docs/benchmarks.md): replay of clean and noisy logs against
# grep (both pre-filter engines side by side), bundles of bad shapes (answered or refused), the fixed cost of everyday commands against `python -c pass`, the supervisor against cat + the grammar;
# as root, then the rig rows (bench-rig, below)
bench:
	@scripts/setup
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/replay_noise.py
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/bundle_shapes.py
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/fixed_cost.py
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/supervise_cost.py
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/scan.py
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory bench-rig; \
	else echo "bench: the rig rows (status, top, logs --milestones on >= 5M journal entries) boot a private systemd: make bench-rig as root"; fi

# as root (boots the private systemd rig): status, top and logs --milestones beside systemctl status and
# journalctl | grep, on a journal of >= 5M entries (building it takes ~3 to 5 minutes on two cores)
bench-rig:
	@scripts/setup rig
	env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/rig_ratios.py

# the wheel and sdist an operator installs on a GPU host (docs/install.md)
dist:
	@scripts/setup
	.venv/bin/python -m build --outdir dist .
