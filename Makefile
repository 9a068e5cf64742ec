# Benchmarks.  `make bench` runs every bench/bench_*.py then plots each results file;
# `make bench-quick` does the same with --quick.
PY := $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
export DGLBACKEND := pytorch

.PHONY: bench bench-quick plot

bench:
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done
	@$(MAKE) --no-print-directory plot

bench-quick:
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f --quick || exit 1; done
	@$(MAKE) --no-print-directory plot

plot:
	@for r in bench/results/*.jsonl; do [ -e "$$r" ] && $(PY) bench/plot.py "$$r"; done; true
