"""Imports point down only (DESIGN.md §2): a module may import its own layer or lower ones."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "memhub"

# lower number = lower layer
LAYERS = {
    "core": 0,
    "store": 1,
    "search": 2,
    "policy": 2,
    "auth": 2,
    "audit": 2,
    "services": 3,
    "mcp": 4,
    "http": 4,
    "cli": 5,  # the composition root may wire everything
}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "memhub":
        return None
    return parts[1] if parts[1] in LAYERS else None


def _drivers(path: Path) -> set[str]:
    """The database drivers `path` imports (sqlite3, psycopg)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found.update(top for name in names if (top := name.split(".")[0]) in ("sqlite3", "psycopg"))
    return found


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert packages <= set(LAYERS), packages - set(LAYERS)


def test_imports_point_down() -> None:
    violations = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                target = _layer(name)
                if target is not None and LAYERS[target] > LAYERS[own]:
                    violations.append(f"{rel}: {own} imports {name} ({target})")
    assert not violations, "\n".join(violations)


def _module_of(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _module_level(tree: ast.AST) -> list[ast.AST]:
    """The nodes of a module that run when it is imported: not inside its functions (an
    import there is a deliberate late binding, a factory picking its backend) and not under
    `if TYPE_CHECKING:` (annotations only)."""
    found: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _imports() -> dict[str, set[str]]:
    """module -> the memhub modules it imports when it is imported."""
    modules = {_module_of(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in _module_level(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:
                        targets.add(sub)
                    elif node.module in modules:
                        targets.add(node.module)
        graph[name] = targets - {name}
    return graph


def test_no_import_cycles() -> None:
    graph = _imports()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert len(graph) > 100 and "memhub.services.vault.state" in graph
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_modules_stay_small() -> None:
    big = [
        f"{p.relative_to(SRC)}: {n}"
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    ]
    assert not big, big


def test_only_the_sqlite_backend_imports_sqlite3() -> None:
    """Everything above the store speaks the Store protocols, so a second backend can replace it."""
    offenders = []
    backend = SRC / "store" / "sqlite"
    for path in SRC.rglob("*.py"):
        if backend in path.parents:
            continue
        if _drivers(path) & {"sqlite3"}:
            offenders.append(str(path.relative_to(SRC)))
    assert not offenders, offenders


def test_the_visibility_filter_is_written_once() -> None:
    """One SQL layer decides what a read may return (store/sql/visibility.py), for every backend."""
    holders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "scope = 'global'" in p.read_text(encoding="utf-8")
    ]
    assert holders == ["store/sql/visibility.py"], holders


def test_search_depends_on_the_vector_search_protocol() -> None:
    """Only the factory (search/vector_search.py) names the numpy index; the engine, the backfill
    and the services speak `VectorSearch`, so a pgvector adapter can take its place."""
    offenders = []
    for path in [*SRC.joinpath("search").glob("*.py"), *SRC.joinpath("services").rglob("*.py")]:
        if path.name in ("vectors.py", "vector_search.py", "__init__.py"):
            continue
        text = path.read_text(encoding="utf-8")
        if "memhub.search.vectors" in text or "VectorIndex" in text:
            offenders.append(str(path.relative_to(SRC)))
    assert not offenders, offenders


def test_only_the_store_tests_open_a_database_driver() -> None:
    """Every other test reaches its store through the `backend` fixture (tests/store/backends.py),
    so the whole suite can run on another backend."""
    tests = SRC.parents[1] / "tests"
    offenders = []
    for path in tests.rglob("*.py"):
        if tests / "store" in path.parents:
            continue
        if _drivers(path):
            offenders.append(str(path.relative_to(tests)))
    assert not offenders, offenders


def test_the_shared_sql_layer_imports_no_driver() -> None:
    """store/sql/ is pure string building, shared by the SQLite and PostgreSQL backends."""
    for path in (SRC / "store" / "sql").rglob("*.py"):
        assert not _drivers(path), path
