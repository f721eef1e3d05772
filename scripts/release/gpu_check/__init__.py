"""The whole GPU measurement in one command (`python -m scripts.release.gpu_check`, `make gpu-check`):
command.py reads the arguments, runs the parts in order and writes the report; each part is a module
of its own (env, tests, train, bench, graphed, fill) on what they share (checks.py)."""
