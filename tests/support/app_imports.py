"""What an app's own code can import, read from its source: every `import` and `from … import`
of every module reachable from its entry module, those inside functions included (the app
imports most of its modules on first use), those under `if TYPE_CHECKING:` left out (they never
run). Used to tell the files a package must hold from those it need not."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Imports:
    """The app's own module files reachable from the entry (paths relative to the app's root),
    and the top-level names of everything else it imports that is not the standard library."""

    files: frozenset[str]
    third_party: frozenset[str]


def reachable(root: Path, entry: str = "function_app") -> Imports:
    files: set[str] = set()
    third_party: set[str] = set()
    todo = [entry]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _file_of(root, module)
        if path is None:
            top = module.split(".")[0]
            if top not in sys.stdlib_module_names and _file_of(root, top) is None:
                third_party.add(top)
            continue
        files.add(path.relative_to(root).as_posix())
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages' __init__
        package = module if path.name == "__init__.py" else ".".join(parts[:-1])
        todo += _imported(ast.parse(path.read_text(encoding="utf-8")), package, root)
    return Imports(frozenset(files), frozenset(third_party))


def _file_of(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(tree: ast.Module, package: str, root: Path) -> list[str]:
    names: list[str] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.append(base)
            # `from package import module` imports the module too.
            names += [
                f"{base}.{alias.name}"
                for alias in node.names
                if _file_of(root, f"{base}.{alias.name}") is not None
            ]
    return names


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            found += _runtime_nodes(ast.Module(body=node.orelse, type_ignores=[]))
            continue
        found.append(node)
        found += _runtime_nodes(node)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
