"""Helpers shared by the paper-reproduction scripts (table2.sh, make_tables.py, bench_epoch.py).

Kept in one place so the experiment names, their hyper-parameters and the paper's published
numbers cannot drift apart between the script that trains and the scripts that report.
"""


def parse_seeds(text: str) -> list[int] | None:
    """'0,1,2' -> [0, 1, 2] (duplicates dropped, order kept); None when it is not such a list."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return list(dict.fromkeys(int(p) for p in parts))
