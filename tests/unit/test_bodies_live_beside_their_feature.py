"""Every body the document publishes is declared in api_funcs/schemas/<feature>.py, beside the
routes of that feature (docs/architecture.md): a route module declares no model, and each schemas
module but the shared field types names a feature of api_funcs/routes."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from pydantic import BaseModel

from api_funcs.app import FEATURES

API = Path(__file__).resolve().parents[2] / "api_funcs"


def _classes(path: Path) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def test_no_route_module_declares_a_body() -> None:
    for feature in FEATURES:
        module = importlib.import_module(f"api_funcs.routes.{feature}")
        declared = [
            name
            for name, value in vars(module).items()
            if isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__ == module.__name__
        ]
        assert declared == [], f"api_funcs/routes/{feature}.py declares {declared}"


def test_each_schemas_module_is_a_features_or_the_shared_fields() -> None:
    modules = {p.stem for p in (API / "schemas").glob("*.py")} - {"__init__"}
    assert modules == {*FEATURES, "fields"}
    assert _classes(API / "schemas" / "fields.py") == []
