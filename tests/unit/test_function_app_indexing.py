"""DESIGN §2: importing function_app.py opens nothing; the host's indexing sees every Function."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_importing_function_app_with_an_unreachable_database_connects_to_nothing() -> None:
    # A fresh interpreter, so get_functions() runs once in its process (FACTS: never twice),
    # and socket.connect is watched from before the import.
    port = _closed_port()
    code = textwrap.dedent(
        f"""
        import json, os, socket
        os.environ["Database__Url"] = "postgresql+psycopg://nobody@127.0.0.1:{port}/nothing"
        attempts = []
        real = socket.socket.connect
        def watch(self, address):
            attempts.append(repr(address))
            return real(self, address)
        socket.socket.connect = watch
        import function_app
        fns = {{f.get_function_name(): json.loads(f.get_function_json())
               for f in function_app.app.get_functions()}}
        print(json.dumps({{"attempts": attempts, "functions": fns}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["attempts"] == []
    health = result["functions"]["health"]
    trigger = next(b for b in health["bindings"] if b["type"] == "httpTrigger")
    assert trigger["route"] == "health"
    assert trigger["authLevel"] == "ANONYMOUS"
    assert trigger["methods"] == ["GET"]
