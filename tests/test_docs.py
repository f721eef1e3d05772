"""The README and docs/ kept honest: every relative link and #anchor resolves, the README stays a
manual (a line budget, no dates, years of the project's history or commit hashes), every script a
page names exists, and every code block that claims to run does run (`<!-- runs: quick -->`) or
names the test that runs it (`<!-- runs: tests/FILE.py::TEST -->`); the rest are illustrative
(docs/development.md, "Documentation checks"). The code points into the docs too: every README
section or docs path that a source file names exists, and so does every file a docs table names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from data.shared import SHARED_DIR
from tests.kit import REPO

README = REPO / "README.md"
CHANGELOG = REPO / "CHANGELOG.md"
PAGES = [README, CHANGELOG, *sorted((REPO / "docs").rglob("*.md"))]
README_MAX_LINES = 350

FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
MARKER = re.compile(r"<!--\s*(runs|illustrative):\s*(.*?)\s*-->")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
TEST_ID = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
SCRIPT_MODULE = re.compile(r"python3? -m (scripts(?:\.[a-z_]+)+)(?![.{\w])")
SCRIPT_PATH = re.compile(r"\bscripts/[\w/]+\.(?:py|sh|txt)\b")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
MACHINES = re.compile(r"\b(EPYC|Xeon|H100|H200)\b")
#: A pointer from the code into the docs: README or docs/PATH, an optional #anchor, and an optional
#: section name in quotes after it: `docs/gpu.md#defaults`, `(README, "Tests")`, `docs/lhotse.md, 'Shar'`.
POINTER = re.compile(
    r"\b(README(?:\.md)?|docs/[\w./-]*[\w/])(?:#([\w-]+))?(?:(?:,| \(|:) ?[\"']([^\"'\n]{2,60})[\"'])?"
)
SOURCE_SUFFIXES = {".py", ".yaml", ".sh", ".toml"}
SOURCE_NAMES = {"Makefile", "Dockerfile"}
#: A file named in a docs table cell, in backticks: `batching/planner.py`, `table2.sh`.
TABLE_FILE = re.compile(r"`([\w./-]+\.(?:py|md|sh|yaml|txt|json|png|tsv|toml))`")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page, first line (1-based), language, text and the marker before it."""

    page: Path
    line: int
    language: str
    text: str
    marker: tuple[str, str] | None

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def split_page(page: Path) -> tuple[list[str], list[Block]]:
    """The page's prose lines (code blocks blanked, so links and headings in code are left out) and its blocks."""
    prose, blocks, fence, start, body, marker = [], [], None, 0, [], None
    last_text = ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            found = MARKER.search(last_text)
            fence, start, body = opening[1], number, []
            language, marker = opening[2].lower(), (found[1], found[2]) if found else None
            prose.append("")
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append(Block(page, start, language, "\n".join(body), marker))
            fence = None
            prose.append("")
        elif fence is not None:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
            if line.strip():
                last_text = line
    return prose, blocks


def without_inline_code(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).replace("`", "").strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for line in split_page(page)[0]:
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading[1])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    prose = split_page(page)[0]
    return [
        (number, target) for number, line in enumerate(prose, 1) for target in LINK.findall(without_inline_code(line))
    ]


def broken_links(page: Path) -> list[str]:
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z][\w+.-]*:", target):  # https:, mailto: ... (not checked offline)
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        why = unresolved(resolved, anchor)
        if why:
            broken.append(f"{page.relative_to(REPO)}:{number}: {target} {why}")
    return broken


def unresolved(page: Path, anchor: str) -> str | None:
    """Why a link or pointer to `page` (a file or folder), at `anchor` if given, does not resolve: the
    page is missing or, for Markdown, has no such heading; None when it resolves."""
    if not page.exists():
        return "(no such file)"
    if anchor and page.suffix == ".md" and anchor not in anchors(page):
        return f"(no heading #{anchor} in {page.name})"
    return None


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in split_page(page)[1]]


def quick_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.marker and b.marker[0] == "runs" and b.marker[1] == "quick"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_anchor_resolves(page):
    assert not broken_links(page), "\n".join(broken_links(page))


def test_the_link_check_finds_broken_links_and_anchors(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Using `batching` in another project?\n")
    page.write_text(
        "# Page\n\n[ok](other.md#using-batching-in-another-project) [self](#page)\n"
        "[gone](missing.md) [anchor](other.md#nope) `[code](missing2.md)`\n\n"
        "```\n[in code](missing3.md)\n```\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "REPO", tmp_path)
        found = broken_links(page)
    assert [f.split(": ", 1)[1] for f in found] == [
        "missing.md (no such file)",
        "other.md#nope (no heading #nope in other.md)",
    ]


def test_the_readme_stays_a_manual():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines: move depth to docs/"
    years = set(re.findall(r"^## (\d{4})-", CHANGELOG.read_text(encoding="utf-8"), re.M))
    assert years, "CHANGELOG.md has no '## YYYY-MM-DD' sections"
    for number, line in enumerate(lines, 1):
        assert not DATE.search(line), f"README.md:{number}: a date (dates go in docs/results.md, CHANGELOG.md)"
        assert not years & set(re.findall(r"\b\d{4}\b", line)), f"README.md:{number}: a year of the project's history"
        assert not COMMIT.search(line), f"README.md:{number}: a commit hash (provenance goes in docs/results.md)"
        assert not MACHINES.search(line), f"README.md:{number}: a machine (measurements go in docs/results.md)"


def test_every_readme_shell_block_says_whether_it_runs():
    unmarked = [str(b) for b in split_page(README)[1] if b.language in ("bash", "sh", "shell") and not b.marker]
    assert not unmarked, (
        f"mark these <!-- runs: quick -->, <!-- runs: tests/F.py::T --> or <!-- illustrative: why -->: {unmarked}"
    )


def test_every_test_a_marker_names_exists():
    missing = []
    for block in all_blocks():
        if (
            block.marker
            and block.marker[0] == "runs"
            and block.marker[1] != "quick"
            and not TEST_ID.search(block.marker[1])
        ):
            missing.append(f"{block}: 'runs: {block.marker[1]}' is neither quick nor tests/FILE.py::TEST")
        for path, name in TEST_ID.findall(block.marker[1] if block.marker else ""):
            source = REPO / path
            if not source.is_file() or not re.search(rf"^def {name}\(", source.read_text(), re.M):
                missing.append(f"{block}: {path}::{name} does not exist")
    assert not missing, "\n".join(missing)


def test_every_script_a_page_names_exists():
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for module in set(SCRIPT_MODULE.findall(text)):
            base = REPO.joinpath(*module.split("."))
            if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
                missing.append(f"{page.relative_to(REPO)}: python -m {module}")
        missing += [
            f"{page.relative_to(REPO)}: {path}"
            for path in set(SCRIPT_PATH.findall(text))
            if not (REPO / path).is_file()
        ]
    assert not missing, "\n".join(sorted(missing))


@pytest.mark.parametrize("block", quick_blocks(), ids=str)
def test_quick_blocks_run(block):
    """A `runs: quick` block runs from the checkout's root with the suite's Python first on the PATH."""
    if "../shared" in block.text and not SHARED_DIR.is_dir():
        pytest.skip(f"{SHARED_DIR} is absent: it ships in ../shared beside the repo (CI has it)")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = (
        [sys.executable, "-c", block.text]
        if block.language == "python"
        else ["bash", "-euo", "pipefail", "-c", block.text]
    )
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{block} exited {done.returncode}\n{block.text}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    )


def test_there_are_quick_blocks_and_the_readme_has_one():
    assert any(b.page == README for b in quick_blocks())


def source_files() -> list[Path]:
    """The kinds of source that may point into the docs; not this file, whose check's examples are stale on
    purpose, nor the top-level folders of environments and outputs."""
    skip = {".venv", ".git", "runs", "corpora", ".cache", "wheelhouse", ".gpu", ".hypothesis", ".pytest_cache"}
    return sorted(
        p
        for p in REPO.rglob("*")
        if p.is_file()
        and p.relative_to(REPO).parts[0] not in skip
        and (p.suffix in SOURCE_SUFFIXES or p.name in SOURCE_NAMES)
        and p != Path(__file__).resolve()
    )


def names_a_heading(page: Path, section: str) -> bool:
    """Whether `section` names a heading of `page`: its anchor, or the first words of one."""
    wanted = slug(section)
    return any(anchor == wanted or anchor.startswith(wanted + "-") for anchor in anchors(page))


def stale_pointers(path: Path) -> list[str]:
    """Each README section or docs path that `path` names and that does not exist. Line breaks and the
    comment marks of a wrapped comment are read as one space, so a name split over two lines counts."""
    text = re.sub(r"\s*\n\s*(?:#+:?\s*)?", " ", path.read_text(encoding="utf-8"))
    stale = []
    for target, anchor, section in POINTER.findall(text):
        page = REPO / ("README.md" if target.startswith("README") else target)
        where = (
            f"{path.relative_to(REPO)}: {target}{'#' + anchor if anchor else ''}{f' {section!r}' if section else ''}"
        )
        why = unresolved(page, anchor)
        if why is None and page.suffix == ".md" and section and not names_a_heading(page, section):
            why = f"(no heading {section!r} in {page.name})"
        if why:
            stale.append(f"{where} {why}")
    return stale


def test_every_docs_pointer_in_the_code_resolves():
    stale = [line for path in source_files() for line in stale_pointers(path)]
    assert not stale, "the code points at docs that are not there:\n" + "\n".join(stale)


def test_the_pointer_check_finds_stale_pointers(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Title\n\n## The settings that matter\n")
    (tmp_path / "docs" / "gpu.md").write_text("# GPU\n\n## Defaults\n\n## Shar: `SharCutSampler`\n")
    code = tmp_path / "code.py"
    code.write_text(
        '"""(README, "The settings\n    that matter") docs/gpu.md#defaults (docs/gpu.md, \'Shar\')\n'
        '(README, "Settings") docs/gpu.md#nope docs/gone.md"""\n# see docs/gpu.md, "Gone\n# away"\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "REPO", tmp_path)
        found = stale_pointers(code)
    assert [f.split(": ", 1)[1] for f in found] == [
        "README 'Settings' (no heading 'Settings' in README.md)",
        "docs/gpu.md#nope (no heading #nope in gpu.md)",
        "docs/gone.md (no such file)",
        "docs/gpu.md 'Gone away' (no heading 'Gone away' in gpu.md)",
    ]


def missing_table_files(page: Path, everywhere: set[str]) -> list[str]:
    """Files named in `page`'s table rows that exist neither from the checkout's root nor from the page's
    folder; a bare file name counts when a file of that name is anywhere in the checkout."""
    missing = []
    for number, line in enumerate(split_page(page)[0], 1):
        if not line.lstrip().startswith("|"):
            continue
        for name in TABLE_FILE.findall(line):
            found = (REPO / name).exists() or (page.parent / name).exists() or ("/" not in name and name in everywhere)
            if not found:
                missing.append(f"{page.relative_to(REPO)}:{number}: {name}")
    return missing


def test_every_file_a_docs_table_names_exists():
    everywhere = (
        {p.name for p in source_files()}
        | {p.name for p in REPO.rglob("*.md")}
        | {p.name for p in (REPO / "docs").rglob("*")}
    )
    missing = [line for page in PAGES for line in missing_table_files(page, everywhere)]
    assert not missing, "docs tables name files that are not there:\n" + "\n".join(missing)
