"""The package's import graph: no cycles between modules, and no module imports another's
private names (``from .runner import _resume_point``). Every import counts, the lazy ones inside
functions too: a cycle hidden in a function is still a cycle."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "fedprox_cli"


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


def _imports(name: str, path: Path):
    """(imported module, imported names) for each import of a package module in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                yield (sub, None) if sub in MODULES else (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        graph[name] = {m for m, _ in _imports(name, path) if m in MODULES and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _is_package_init_edge(a: str, b: str) -> bool:
    """A package's ``__init__`` re-exporting its own modules, which import siblings through the
    package: not a cycle between modules."""
    return a == b.rpartition(".")[0] or b == a.rpartition(".")[0]


def test_no_import_cycles():
    graph = {a: {b for b in bs if not _is_package_init_edge(a, b)} for a, bs in _graph().items()}
    assert _cycles(graph) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(name: str, path: Path):
    """Another module's private names that ``path`` imports or reaches as ``module._name`` (the
    package's modules: the interpreter's own, as ``os._exit``, are documented functions)."""
    bound = {}
    for source, imported in _imports(name, path):
        if imported is None and source != name and source in MODULES:
            bound[source.rpartition(".")[2]] = source
        elif imported and _private(imported) and source in MODULES and source != name:
            yield f"{source}.{imported}"
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and _private(node.attr)
        ):
            yield f"{bound[node.value.id]}.{node.attr}"


def test_no_private_names_used_across_modules():
    assert (
        sorted({(name, use) for name, path in MODULES.items() for use in _private_uses(name, path)})
        == []
    )


@pytest.mark.parametrize(
    "graph", [{"a": {"b"}, "b": {"a"}}, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}]
)
def test_the_cycle_finder_finds_cycles(graph):
    assert _cycles(graph) == [sorted(k for k in graph if graph[k])]


# The layers of docs/design.md, top to bottom: a module imports its own layer or lower ones. The
# package's own top-level modules stand in them too: ``python -m fedprox_cli`` (``__main__``) is a
# command like cli's; the Python API (``api``, and ``__init__`` that hands it on) stands under the
# commands, which may use it, and above everything it uses.
LAYERS = [
    {"cli", "cluster", "__main__"},
    {"api", "__init__"},
    {"claims"},
    {"analysis"},
    {"runs"},
    {"algorithms", "config"},
    {"engine"},
    {"operators", "data"},
    {"common"},
]
RANK = {package: len(LAYERS) - i for i, layer in enumerate(LAYERS) for package in layer}


def _place(module: str) -> str:
    """The subpackage or top-level module that ``module`` belongs to (``__init__`` for the
    package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _rank(module: str) -> int:
    return RANK[_place(module)]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if _rank(b) > _rank(a))


def test_every_module_has_a_layer():
    assert sorted({_place(m) for m in MODULES} - set(RANK)) == []


def test_no_import_points_up_a_layer():
    assert _upward(_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {
        "fedprox_cli.common.files": {"fedprox_cli.runs.signals"},
        "fedprox_cli.cli.main": {"fedprox_cli.common.files"},
    }
    assert _upward(graph) == ["fedprox_cli.common.files -> fedprox_cli.runs.signals"]


def test_the_layer_check_ranks_the_package_root():
    """The package's ``__init__`` and API stand above every subpackage but the commands: a
    lower module that imports them points up."""
    graph = {
        "fedprox_cli.config.validate": {"fedprox_cli"},
        "fedprox_cli.runs.outputs": {"fedprox_cli.api"},
        "fedprox_cli.cli.check_algorithm": {"fedprox_cli"},
        "fedprox_cli": {"fedprox_cli.common.package"},
    }
    assert _upward(graph) == [
        "fedprox_cli.config.validate -> fedprox_cli",
        "fedprox_cli.runs.outputs -> fedprox_cli.api",
    ]


def _reaches(graph: dict[str, set[str]], upper: str, lower: str) -> list[str]:
    """``a -> b`` for each import of a module of ``lower`` by a module of ``upper``."""
    return sorted(
        f"{a} -> {b}"
        for a, bs in graph.items()
        for b in bs
        if _place(a) == upper and _place(b) == lower
    )


def test_the_command_line_reaches_runs_through_its_face_only():
    """cli/ imports runs/ through one module, runs/face.py (what the command line asks of the
    runs layer), never another of its modules."""
    assert [
        e for e in _reaches(_graph(), "cli", "runs") if not e.endswith(" -> fedprox_cli.runs.face")
    ] == []
    assert "fedprox_cli.runs.face" in _graph()["fedprox_cli.cli.main"]


def test_the_face_check_finds_a_reach_past_the_face():
    graph = {
        "fedprox_cli.cli.status": {"fedprox_cli.runs.face", "fedprox_cli.runs.view"},
        "fedprox_cli.analysis.results": {"fedprox_cli.runs.view"},
    }
    assert _reaches(graph, "cli", "runs") == [
        "fedprox_cli.cli.status -> fedprox_cli.runs.face",
        "fedprox_cli.cli.status -> fedprox_cli.runs.view",
    ]


LOADS_TORCH = (
    "import atexit, sys; atexit.register(lambda: print('torch loaded:', 'torch' in sys.modules)); "
    "from fedprox_cli.cli import commands; sys.argv[0] = {prog!r}; commands.{command}()"
)


@pytest.mark.parametrize("command", ["table", "plot", "report"])
def test_the_analysis_commands_load_no_torch(tmp_path, command):
    """fedrun-table, -plot and -report print the methods' display names (FedCanon, FedMiD)
    read from their classes' source, not from the classes imported with torch."""
    import subprocess
    import sys

    from conftest import child_env
    from test_plot_scripts import acc_run

    acc_run(tmp_path / "runs", "c", 0.7)
    acc_run(tmp_path / "runs", "m", 0.6, **{"algorithm.name": "fedmid"})
    extra = ["--out", str(tmp_path / "fig.png")] if command == "plot" else []
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            LOADS_TORCH.format(prog=f"fedrun-{command}", command=command),
            str(tmp_path / "runs"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert p.stdout.strip().endswith("torch loaded: False"), p.stdout + p.stderr
    if command != "report":
        assert "FedCanon" in p.stdout and "FedMiD" in p.stdout, p.stdout


def test_the_fedrun_command_loads_torch_only_inside_its_handler():
    """Importing fedrun's command module loads no torch: a library that fails to load (memory
    running out) fails inside fedrun's handler, as its one line, not before it."""
    import subprocess
    import sys

    from conftest import child_env

    p = subprocess.run(
        [sys.executable, "-c", "import sys, fedprox_cli.cli.main; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert p.stdout.strip() == "False", p.stdout + p.stderr
