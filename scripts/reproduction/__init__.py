"""Helpers shared by the paper-reproduction scripts (table2.sh, make_tables.py, bench_epoch.py).

Kept in one place so the experiment names, their hyper-parameters and the paper's published
numbers cannot drift apart between the script that trains and the scripts that report.
"""
