"""The paper's reproduction (table1.sh, table2.sh, quality.sh, make_tables.py over table_numbers.py,
table_markdown.py and fig4.py, compare_sweeps.py) and what it shares
with the benchmarks (paper.py: the experiments and the published figures; parse_seeds).

Kept in one place so the experiment names, their hyper-parameters and the paper's published
numbers cannot drift apart between the script that trains and the scripts that report.
"""


def parse_seeds(text: str) -> list[int] | None:
    """'0,1,2' -> [0, 1, 2] (duplicates dropped, order kept); None when it is not such a list."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return list(dict.fromkeys(int(p) for p in parts))
