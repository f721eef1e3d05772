"""Benchmarks, each `python -m scripts.bench.NAME`; what they share lives in steps.py (shape-faithful
training steps) and scripts/common.py (tables, the machine, timing)."""
