"""docs/cli.md: `azurebank serve` serves GET /api/health on localhost from a migrated SQLite file,
and stops cleanly when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.served import clean_environ, run_cli, served


@pytest.mark.e2e
def test_serve_answers_health_200_and_stops_cleanly(tmp_path: Path) -> None:
    env = clean_environ(f"sqlite:///{tmp_path / 'azurebank.db'}")
    upgrade = run_cli(env, "db", "upgrade")
    assert upgrade.returncode == 0, upgrade.stderr

    with served(env, tmp_path / "serve.log") as server:
        response = server.health
        assert response is not None, "serve never answered"
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
    output = server.output()
    assert server.returncode == 0, output
    assert "Traceback" not in output
