"""The shape of the code, checked: no nested functions, no function over 60 lines, no import circle
(not even one that only type annotations need), no strategy name compared outside batching/ (the strategy
table decides), one way to switch a config's strategy, and one home for a rule: whether a plan is a block
plan, the decoder's frames per step; the batch crosses into the model and the loss whole, build_loaders'
record is read by name, a Run is built by keyword; Triton is imported by the kernel modules only, and
those on first use; every sampler pass refuses the engines' wrappers that would deal its ranks again;
each Lhotse sampler sits in a module named after it; no file over 400 lines."""

import ast
import inspect
from pathlib import Path

import pytest

from batching import STRATEGIES
from batching.planner import PLANNERS
from model import Tacotron2, Tacotron2Loss
from model.config import FUSED_SWITCHES
from tests.kit import REPO

PACKAGES = ("batching", "data", "model", "training", "scripts")


def project_files(include_tests: bool = False) -> list[Path]:
    files = [REPO / "train.py", *(p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py")))]
    return files + (sorted((REPO / "tests").glob("*.py")) if include_tests else [])


def functions(tree: ast.AST):
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def docstring_lines(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of a function's docstring: documentation (a `:param:` line per argument, say), not code."""
    first = func.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


@pytest.mark.parametrize("path", project_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_nested_function_and_none_over_60_lines(path):
    tree = ast.parse(path.read_text())
    for func in functions(tree):
        nested = [inner.name for inner in functions(func) if inner is not func]
        assert not nested, f"{path.name}:{func.lineno} {func.name} defines {nested}: make them module-level"
        length = func.end_lineno - func.lineno + 1 - docstring_lines(func)
        assert length <= 60, f"{path.name}:{func.lineno} {func.name} is {length} lines, its docstring left out"


def imports_of(source: str, package: str) -> set[str]:
    """Every module a file's source imports, `package` being its own (for relative imports):
    those under `if TYPE_CHECKING:` too, since a circle held together by annotations is still one."""
    return {name for node in ast.walk(ast.parse(source)) for name in node_imports(node, package)}


def node_imports(node: ast.AST, package: str) -> set[str]:
    """The modules (and, for `from m import x`, m.x) one import statement names; none for other nodes."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
    return {base} | {f"{base}.{alias.name}" for alias in node.names}


def module_graph() -> dict[str, set[str]]:
    files = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p for p in project_files()}
    return {
        name: {m for m in imports_of(path.read_text(), package_of(path)) if m in files and m != name}
        for name, path in files.items()
    }


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules, by iterative depth-first search; None when there is none."""
    state: dict[str, int] = {}
    for start in graph:
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_no_import_circle():
    graph = module_graph()
    assert "batching.strategies" in graph["batching.config"] and "batching.config" in graph["batching.planner"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_every_strategy_row_has_its_planner():
    """The rows (strategies.py) sit below the config, their planners (planner.py) above it."""
    assert set(PLANNERS) == set(STRATEGIES)


def test_the_model_and_the_planner_know_nothing_of_each_other():
    """model/ imports nothing of batching/, and batching/ nothing else of the project (it ships alone)."""
    for name, imports in module_graph().items():
        if name.startswith("model"):
            assert not [m for m in imports if m.startswith("batching")], f"{name} imports {imports}"
        if name.startswith("batching"):
            assert all(m.startswith("batching") for m in imports), f"{name} imports {imports}"


def test_training_asks_the_corpus_table_and_corpora_know_nothing_of_training():
    """training/ and train.py import only the package data.corpora (its table and settings), never a
    corpus builder; data/corpora imports nothing of training/ (adding a corpus stays in its folder)."""
    graph = module_graph()
    assert "data.corpora.demo" in graph["data.corpora.table"]
    for name, imports in graph.items():
        if name == "train" or name.startswith("training"):
            builders = [m for m in imports if m.startswith("data.corpora.")]
            assert not builders, f"{name} imports {builders}: ask data.corpora's table instead"
        if name.startswith("data.corpora"):
            assert not [m for m in imports if m.startswith("training")], f"{name} imports {imports}"


def test_an_import_for_annotations_only_counts():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .config import BatchingConfig\n"
    assert "batching.config" in imports_of(source, "batching")


@pytest.mark.parametrize("path", sorted((REPO / "training").glob("*.py")), ids=lambda p: p.name)
def test_training_parts_take_the_configs_they_read(path):
    """Only the composition root (build_run) and train.py take the whole RunConfig."""
    for func in functions(ast.parse(path.read_text())):
        args = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
        takes = [a.arg for a in args if a.annotation is not None and "RunConfig" in ast.unparse(a.annotation)]
        assert not takes or func.name == "build_run", f"{path.name}:{func.lineno} {func.name} takes RunConfig {takes}"


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    "path",
    [p for p in project_files() if p.parts[len(REPO.parts)] != "batching"],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_no_strategy_name_is_compared_outside_batching(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops
        ):
            literals = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            assert not set(literals) & set(STRATEGIES), f"{path.name}:{node.lineno} compares a strategy name"


@pytest.mark.parametrize(
    "path", [p for p in project_files() if p != REPO / "batching" / "config.py"], ids=lambda p: str(p.relative_to(REPO))
)
def test_a_config_switches_strategy_only_with_its_method(path):
    """`replace(config, batching=...)` would keep options the target does not own:
    BatchingConfig.with_strategy is the one switch."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "replace":
            assert "batching" not in {k.arg for k in node.keywords}, (
                f"{path.name}:{node.lineno} switches strategy with replace(): use config.with_strategy(name, ...)"
            )


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def attribute_reads(path: Path, name: str) -> list[int]:
    """The lines where the file reads an attribute `name` (x.name)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load)
    ]


def hparam_reads(path: Path, key: str) -> list[int]:
    """The lines where the file reads the hparam `key` off the flat hparams (`hp`, `hparams`, `stored`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Subscript)
        and getattr(node.value, "id", "") in ("hp", "hparams", "stored")
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == key
    ]


def field_holders(path: Path, name: str) -> list[str]:
    """The classes of the file that declare a field `name` (an annotated class attribute)."""
    return [
        node.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(isinstance(s, ast.AnnAssign) and getattr(s.target, "id", "") == name for s in node.body)
    ]


def test_one_home_asks_whether_a_plan_is_a_block_plan():
    """A strategy row's block_plan is read by BatchingConfig.plans_blocks alone: the sampler, the
    loader, the Lhotse sampler, the CLI, the recipe's checks and the benches take its answer."""
    readers = {relative(p): lines for p in project_files() if (lines := attribute_reads(p, "block_plan"))}
    assert list(readers) == ["batching/config.py"] and len(readers["batching/config.py"]) == 1, (
        f"the row's block_plan is read at {readers}: use BatchingConfig.plans_blocks"
    )


def test_one_reader_hands_on_the_frames_per_step():
    """The hparam n_frames_per_step is read once (training/config.py's frames_per_step), which hands
    r to the model config, its home, and a copy to the batching config for block plans; no other
    class holds it (the run reads the model's, the loss the model output's, the collates and the
    benches take the model config's), and the loss takes none. (`python -m batching` reads hparams.yaml's
    value itself, batching/recipe.py, into its BatchingConfig: it ships alone and imports nothing of training.)"""
    readers = {relative(p): lines for p in project_files() if (lines := hparam_reads(p, "n_frames_per_step"))}
    assert (
        readers == {"training/config.py": readers.get("training/config.py")} and len(readers["training/config.py"]) == 1
    ), f"the hparam n_frames_per_step is read at {readers}"
    holders = {cls for p in project_files() for cls in field_holders(p, "n_frames_per_step")}
    assert holders == {"Tacotron2Config", "BatchingConfig"}, f"classes holding n_frames_per_step: {holders}"
    assert "n_frames_per_step" not in inspect.signature(Tacotron2Loss).parameters


def test_the_batch_crosses_into_the_model_and_the_loss_whole():
    """The model's forward and the loss take the Batch (model/batch.py) whole, so a new batch field
    touches the collate, the model and the loss only (tests/test_model_batch.py adds one)."""
    assert list(inspect.signature(Tacotron2.forward).parameters) == ["self", "batch", "shape"]
    assert list(inspect.signature(Tacotron2Loss.__call__).parameters) == ["self", "out", "batch"]


def calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == name
    ]


@pytest.mark.parametrize("path", project_files(include_tests=True), ids=lambda p: str(p.relative_to(REPO)))
def test_records_are_read_by_name_and_the_run_is_built_by_keyword(path):
    """build_loaders returns a named record (Loaders), never indexed; Run's fields are set by keyword."""
    tree = ast.parse(path.read_text())
    indexed = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and node.value in calls_of(node, "build_loaders")
    ]
    assert not indexed, f"{path.name}:{indexed} indexes build_loaders(...): read its fields by name"
    positional = [call.lineno for call in calls_of(tree, "Run") if call.args]
    assert not positional, f"{path.name}:{positional} builds a Run by position: name each field"


def test_the_lhotse_samplers_write_their_batch_source_only():
    """batching/lhotse/base.py owns Lhotse's protocol once (as Lhotse's CutSampler does): __next__, the
    state envelope, pickling, filter and dataloading info; a sampler on it writes its source's hooks."""
    protocol = {"__next__", "__iter__", "state_dict", "load_state_dict", "__getstate__", "filter"}
    samplers = {}
    for path in sorted((REPO / "batching" / "lhotse").glob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if isinstance(cls, ast.ClassDef) and {ast.unparse(b) for b in cls.bases} & {"CutSampler", "BaseCutSampler"}:
                samplers[cls.name] = {f.name for f in functions(cls)} & protocol
        calls = path.read_text().count("attach_dataloading_info(")
        assert calls == (path.name == "base.py"), f"{relative(path)} attaches dataloading info {calls} times"
    assert samplers == {
        "BaseCutSampler": protocol,
        "PlanCutSampler": set(),
        "StreamCutSampler": set(),
        "SharCutSampler": set(),
    }, samplers


def test_every_sampler_pass_refuses_the_engines_wrappers():
    """A sampler that deals the ranks itself loses batches, silently, under a wrapper that deals them
    again: every sampler's __iter__ in batching/ (a class with __iter__ and state_dict) asks about
    Accelerate's shard and Lightning's DistributedSamplerWrapper (batching/accelerate_shard.py,
    batching/lightning_guard.py)."""
    guards = {"refuse_unannounced_shard", "refuse_lightning_wrapper"}
    passes = {}
    for path in sorted((REPO / "batching").rglob("*.py")):
        classes = [c for c in ast.walk(ast.parse(path.read_text())) if isinstance(c, ast.ClassDef)]
        for cls in classes:
            methods = {f.name: f for f in functions(cls)}
            if {"__iter__", "state_dict"} <= set(methods):
                calls = [n.func for n in ast.walk(methods["__iter__"]) if isinstance(n, ast.Call)]
                passes[f"{relative(path)}:{cls.name}"] = guards <= {f.id for f in calls if isinstance(f, ast.Name)}
    assert passes and all(passes.values()), passes


def test_each_lhotse_sampler_has_a_module_named_after_it():
    """In batching/lhotse/ a sampler's module is named after it, as Lhotse names dynamic_bucketing.py
    after DynamicBucketingSampler: XCutSampler alone in x_sampler.py (their base in base.py); no module
    of the wing repeats a name of batching/'s core; the wing logs through one logger (base.log)."""
    wing = REPO / "batching" / "lhotse"
    core = {path.name for path in (REPO / "batching").glob("*.py")}
    repeated = sorted(path.name for path in wing.glob("*.py") if path.name in core - {"__init__.py"})
    assert not repeated, f"batching/lhotse/ repeats the core's module names {repeated}: name it after what it holds"
    for path in sorted(wing.glob("*.py")):
        tree = ast.parse(path.read_text())
        samplers = [
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            and {ast.unparse(b) for b in node.bases} & {"CutSampler", "BaseCutSampler"}
        ]
        expected = [f"{path.stem.removesuffix('_sampler').title().replace('_', '')}CutSampler"]
        assert samplers in ([], expected) or (path.name, samplers) == ("base.py", ["BaseCutSampler"]), (
            f"{relative(path)} defines {samplers}: each sampler goes alone in a module named after it "
            "(PlanCutSampler in plan_sampler.py)"
        )
        loggers = path.read_text().count("getLogger(")
        assert loggers == (path.name == "base.py"), f"{relative(path)} makes {loggers} loggers: use base.log"


#: The most lines a file of the project packages may have: a newcomer reads one in one sitting.
MAX_FILE_LINES = 400


def test_no_file_of_the_project_packages_is_over_400_lines():
    """No file of train.py and the packages is over MAX_FILE_LINES lines: one that is does two things."""
    lengths = {relative(path): len(path.read_text().splitlines()) for path in project_files()}
    over = {path: lines for path, lines in sorted(lengths.items()) if lines > MAX_FILE_LINES}
    assert not over, f"{over} are over {MAX_FILE_LINES} lines: split each where it does two things"


def test_train_py_reads_as_a_short_recipe():
    assert len((REPO / "train.py").read_text().splitlines()) < 200


def is_script(path: Path) -> bool:
    """A command (it has an `if __name__ == "__main__":` block), not a module others may share."""
    return path.name == "__main__.py" or '\nif __name__ == "__main__":' in path.read_text()


def test_scripts_are_packages_that_share_modules_not_scripts():
    """scripts/ runs as `python -m scripts.ROOM.NAME`: no sys.path surgery, and a script imports
    shared modules (scripts/common.py, a room's helpers) but never another script."""
    scripts = [p for p in project_files() if p.parts[len(REPO.parts)] == "scripts"]
    commands = {".".join(p.relative_to(REPO).with_suffix("").parts) for p in scripts if is_script(p)}
    assert "scripts.bench.epoch" in commands and "scripts.common" not in commands
    for path in scripts:
        assert "sys.path.insert" not in path.read_text(), f"{path.relative_to(REPO)} edits sys.path"
        assert (path.parent / "__init__.py").is_file(), f"{path.parent.relative_to(REPO)} is not a package"
        imported = imports_of(path.read_text(), package_of(path)) & commands
        assert not imported, f"{path.relative_to(REPO)} imports the script(s) {sorted(imported)}"


#: The GPU operations' package: it imports nothing else of model/, and only its kernel modules
#: (model/ops/*kernels*.py) and their shared Triton helpers import Triton.
OPS = "model/ops/"
KERNEL_MATH = "model/ops/kernel_math.py"
#: The compile bench's modules (scripts.bench.kernels: what it compiles, how it plans the launches, the
#: compiling): they compile the kernels for a GPU, Triton is what they are about.
COMPILE_BENCH = ("scripts/bench/kernels.py", "scripts/bench/kernel_variants.py", "scripts/bench/kernel_plan.py")


def sources(paths: list[Path]) -> dict[str, str]:
    return {relative(p): p.read_text() for p in paths}


def module_of(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def is_kernel_module(rel: str) -> bool:
    return rel.startswith(OPS) and "kernels" in rel.removeprefix(OPS)


def import_sites(rel: str, source: str) -> list[tuple[set[str], bool]]:
    """Each import statement of a file: the modules it names and whether it runs at import time
    (not inside a function)."""
    tree = ast.parse(source)
    deferred = {id(node) for func in functions(tree) for node in ast.walk(func)}
    package = module_of(rel).rpartition(".")[0] if not rel.endswith("__init__.py") else module_of(rel)
    return [(names, id(node) not in deferred) for node in ast.walk(tree) if (names := node_imports(node, package))]


def ops_import_violations(files: dict[str, str]) -> list[str]:
    """The imports by model/ops/ of the rest of model/ (TYPE_CHECKING ones included)."""
    found = []
    for rel, source in files.items():
        if rel.startswith(OPS):
            for names, _ in import_sites(rel, source):
                outside = [n for n in names if n.split(".")[0] == "model" and n.split(".")[:2] != ["model", "ops"]]
                found += [f"{rel} imports {n}" for n in sorted(outside)]
    return found


def triton_violations(files: dict[str, str]) -> list[str]:
    """Triton imported outside the kernel modules and kernel_math.py; a kernel module imported from
    outside model/ops/ or at import time (but by another kernel module: its shared helpers); kernel_math.py
    imported by anything but a kernel module.
    The compile bench (COMPILE_BENCH) may import both."""
    kernels = {module_of(rel) for rel in files if is_kernel_module(rel)}
    found = []
    for rel, source in files.items():
        if rel in COMPILE_BENCH:
            continue
        for names, at_import in import_sites(rel, source):
            if any(n.split(".")[0] == "triton" for n in names) and not (is_kernel_module(rel) or rel == KERNEL_MATH):
                found.append(f"{rel} imports Triton")
            if names & kernels and not (rel.startswith(OPS) and (not at_import or is_kernel_module(rel))):
                found.append(f"{rel} imports {sorted(names & kernels)} (only model/ops/, inside the function using it)")
            if module_of(KERNEL_MATH) in names and not is_kernel_module(rel):
                found.append(f"{rel} imports {KERNEL_MATH} (the kernel modules' helpers)")
    return found


def test_the_ops_package_imports_nothing_else_of_the_model():
    """model/ops/ holds the GPU operations: it can be rewritten, switched off or deleted without
    editing Tacotron2's files, so it depends on none of them (not even for annotations)."""
    ops = sorted((REPO / "model" / "ops").glob("*.py"))
    assert len(ops) > 1
    assert ops_import_violations(sources(ops)) == []


def jit_kernels(source: str) -> set[str]:
    """The @triton.jit functions of a kernel module named *_kernel (what its launchers launch)."""
    return {
        node.name
        for node in functions(ast.parse(source))
        if node.name.endswith("_kernel") and any("jit" in ast.unparse(d) for d in node.decorator_list)
    }


def test_the_kernels_a_profiler_names_are_the_kernel_modules_kernels():
    """model.ops.KERNELS (the names bench.step's per-kernel timing keeps) lists every launched kernel."""
    from model.ops import KERNELS

    files = sources(project_files())
    found = set().union(*(jit_kernels(source) for rel, source in files.items() if is_kernel_module(rel)))
    assert found == set(KERNELS) and len(KERNELS) == len(set(KERNELS))


def test_triton_lives_in_the_kernel_modules_imported_on_first_use():
    """Only model/ops/*kernels*.py and their shared helpers, model/ops/kernel_math.py, import Triton
    (and the bench that compiles them, scripts/bench/kernels.py); a kernel module is imported only by
    model/ops/, inside the function that launches it, and the helpers by the kernel modules only: the
    recipe runs where Triton is absent, and the interpreter switch is read at first use."""
    files = sources(project_files(include_tests=True))
    kernels = [rel for rel in files if is_kernel_module(rel)]
    launched = {
        name
        for rel, source in files.items()
        if rel.startswith(OPS)
        for names, at_import in import_sites(rel, source)
        if not at_import
        for name in names
    }
    assert kernels and all(module_of(k) in launched for k in kernels), (kernels, launched)
    assert triton_violations(files) == []


#: Made-up files (path: source) that keep the two folder rules, and files that each break one.
KEPT = {
    "model/ops/a.py": "import torch\nfrom .support import x\n\ndef launch():\n    from .a_kernels import forward\n",
    "model/ops/a_kernels.py": "import triton\nfrom .kernel_math import mma\n",
    "model/ops/b_kernels.py": "from .a_kernels import shared_helper\n",  # a kernel module's helpers
    KERNEL_MATH: "import triton.language as tl\n",
    "model/decoder.py": "from model.ops.a import launch\n",
}
OPS_BREACHES = (
    "from ..decoder import Decoder\n",
    "if TYPE_CHECKING:\n    from model.decoder import Decoder\n",
    "from .. import shapes\n",
)
TRITON_BREACHES = {
    "model/ops/b.py": "import triton\n",
    "model/shapes.py": "from triton import language\n",
    "model/ops/c.py": "from .a_kernels import forward\n",  # at import time
    "model/d.py": "def launch():\n    from model.ops.a_kernels import forward\n",  # outside model/ops/
    "model/ops/e.py": "from . import kernel_math\n",
}


def test_the_folder_rules_catch_a_breach():
    """The two rules above on made-up files: the allowed forms pass, each breach is reported."""
    assert ops_import_violations(KEPT) == [] and triton_violations(KEPT) == []
    for source in OPS_BREACHES:
        assert ops_import_violations({**KEPT, "model/ops/b.py": source}), source
    for rel, source in TRITON_BREACHES.items():
        assert triton_violations({**KEPT, rel: source}), rel


def is_design_switch(name: str) -> bool:
    """A config switch that picks a design of a decoder step's part (model/fast_steps.py): any `fused_*`
    name, and every one of model.config.FUSED_SWITCHES (split_lstm's rival cell included)."""
    return name.startswith("fused_") or name in FUSED_SWITCHES


def fused_switch_reads(rel: str, source: str) -> list[str]:
    """Where a file reads a design switch's attribute (is_design_switch): 'path:line Class.method'
    (or the function's name, or <module> outside any function)."""
    tree = ast.parse(source)
    owner = {}
    for cls in [None, *(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef))]:
        for func in functions(tree) if cls is None else [f for f in cls.body if isinstance(f, ast.FunctionDef)]:
            name = func.name if cls is None else f"{cls.name}.{func.name}"
            owner |= {id(node): name for node in ast.walk(func)}
    reads = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_design_switch(node.attr) and isinstance(node.ctx, ast.Load)
    ]
    return [f"{rel}:{node.lineno} {owner.get(id(node), '<module>')}" for node in sorted(reads, key=lambda n: n.lineno)]


#: A breach of the rule below: a method other than the constructor branches on a switch.
BRANCHING_LOOP = """
class FastDecoder:
    def __init__(self, cfg):
        self.attention_step = FusedAttention() if cfg.fused_attention else PlainAttention()

    def loop(self, cfg):
        if cfg.fused_lstm:
            pass

    def cells(self, cfg):
        return cfg.split_lstm
"""


def test_plain_or_fused_is_chosen_once_in_the_fast_decoders_constructor():
    """FastDecoder.__init__ picks the attention step and the LSTM cells (model/fast_steps.py); no
    other function of the project reads a fused or split switch as an attribute, so the loop, its
    steps and the graph runner do not branch on one (a further design is one class and one clause there)."""
    reads = [read for rel, source in sources(project_files()).items() for read in fused_switch_reads(rel, source)]
    assert reads and {read.split(":")[0] + " " + read.split(" ")[1] for read in reads} == {
        "model/fast_decoder.py FastDecoder.__init__"
    }, reads
    assert [read.split(" ")[1] for read in fused_switch_reads("x.py", BRANCHING_LOOP)] == [
        "FastDecoder.__init__",
        "FastDecoder.loop",
        "FastDecoder.cells",
    ]


def test_one_atomic_writer_makes_the_temporary_files_of_outputs():
    """Every file the recipe writes goes through data.atomic.atomic_open, which gives it the user's
    umask: a mkstemp anywhere else would leave outputs at mode 0o600, unreadable to colleagues."""
    makers = [relative(path) for path in project_files() if calls_of(ast.parse(path.read_text()), "mkstemp")]
    assert makers == ["data/atomic.py"], f"mkstemp outside data/atomic.py (use atomic_open): {makers}"
