"""The quick start runs the main job: `scripts/run.sh` serves, delivers notices (Runner=Api)
and prints the journey as lines to paste, each with the answer to expect. These tests read the
script's REAL output and run what it printed, so the lines stay true (docs/quickstart.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.checkout import REPO
from tests.support.connections import unused_port
from tests.support.served import clean_environ, wait_for

RUN_SH = REPO / "scripts" / "run.sh"
WAIT = 180.0  # seconds: the script migrates, seeds two users and starts a server first
_STEP = re.compile(r"^(\d+)\. (.+)\n   expect: (.+)\n  \$ (.+)$", re.M)
_PRELUDE = re.compile(r"^  \$ (BASE=\S+ TOKEN=\S+ KEY=\S+)$", re.M)


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    expect: tuple[str, ...]  # the clauses of its `expect:` line
    command: str


def _environ(tmp_path: Path, port: int) -> dict[str, str]:
    """No app setting from this process but a database of the test's own; the script's state and
    the user's state directory (the pickup's parent) in `tmp_path`, outside any git tree."""
    return clean_environ(
        f"sqlite:///{tmp_path / 'azurebank.db'}",
        AZUREBANK_STATE=str(tmp_path / "state"),
        XDG_STATE_HOME=str(tmp_path / "xdg"),
        AZUREBANK_PORT=str(port),
        AZUREBANK_HOST="127.0.0.1",
    )


def _pickup(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "azurebank" / "pickup"


def _steps(output: str) -> list[Step]:
    return [Step(int(m[1]), m[2], tuple(m[3].split("; ")), m[4]) for m in _STEP.finditer(output)]


@contextmanager
def _run_sh(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`scripts/run.sh ARGS` in its own process group (the server is its child), stdout in a
    file; always stopped on the way out, as Ctrl-C stops it (SIGINT to the group)."""
    out = tmp_path / "run.out"
    with out.open("wb") as sink, (tmp_path / "run.err").open("wb") as err:
        process = subprocess.Popen(
            ["bash", str(RUN_SH), *args],
            cwd=REPO,
            env=_environ(tmp_path, unused_port()),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=err,
            start_new_session=True,
        )
    try:
        yield process, out
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)


def _answer(text: str) -> tuple[int | None, dict[str, str], str]:
    """Status, headers (lower-case names) and body of `curl -si` output."""
    text = text.replace("\r\n", "\n")
    match = re.search(r"^HTTP/[\d.]+ (\d{3})[^\n]*\n(.*?)\n\n(.*)\Z", text, re.M | re.S)
    if match is None:
        return None, {}, text
    headers = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in match[2].split("\n"))
    )
    return int(match[1]), headers, match[3]


def _run_printed_lines(prelude: str, steps: list[Step]) -> dict[int, str]:
    """The lines as a person pastes them: one shell, in order, the prelude first."""
    script = [prelude]
    for step in steps:
        script += [f"echo '@@ step {step.number}'", step.command, "echo"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    parts = re.split(r"^@@ step (\d+)\n", done.stdout, flags=re.M)
    return {int(n): text.rstrip("\n") for n, text in zip(parts[1::2], parts[2::2], strict=True)}


def _check(step: Step, answers: dict[int, str]) -> list[str]:
    """Each clause of the step's `expect:` held against what its command answered."""
    status, headers, body = _answer(answers[step.number])
    misses: list[str] = []
    for clause in step.expect:
        if clause.isdigit():
            ok = status == int(clause)
        elif clause.startswith("header "):
            name, _, value = clause.removeprefix("header ").partition(": ")
            ok = headers.get(name.lower()) == value
        elif clause.startswith("errorCode "):
            ok = json.loads(body).get("errorCode") == clause.split()[1]
        elif clause.startswith("members "):
            ok = set(clause.removeprefix("members ").split(", ")) <= set(json.loads(body))
        elif clause.startswith("shows "):
            ok = clause.removeprefix("shows ") in answers[step.number]
        elif m := re.fullmatch(r"the same body as step (\d+)", clause):
            ok = _answer(answers[int(m[1])])[2] == body
        else:
            ok = False
        if not ok:
            misses.append(f"step {step.number} ({step.title}): {clause}")
    return misses


@pytest.mark.e2e
def test_the_printed_journey_answers_what_each_line_says_when_pasted(tmp_path: Path) -> None:
    with _run_sh(tmp_path) as (process, out):
        wait_for(
            lambda: "Ctrl-C stops the server." in out.read_text() or process.poll() is not None,
            "run.sh to print the journey",
            timeout=WAIT,
        )
        printed = out.read_text()
        assert process.poll() is None, (printed, (tmp_path / "run.err").read_text())
        prelude = _PRELUDE.search(printed)
        assert prelude is not None, printed
        steps = _steps(printed)
        answers = _run_printed_lines(prelude[1], steps)

    # The journey of the quick start, in its order: the PIN change and its notice, the mint,
    # the transfer and its replay, the allowance, and the mint over the day's limit.
    expects = ["; ".join(s.expect) for s in steps]
    assert [s.number for s in steps] == list(range(1, 8)), printed
    assert expects[0].startswith("200") and "PinChanged" in expects[0]
    assert "shows Subject: Your AzureBank PIN was changed" in expects[1]
    assert expects[2].startswith("201; members authorizationId")
    assert expects[3].startswith("201; members transactionId")
    assert expects[4] == "201; header Idempotency-Replayed: true; the same body as step 4"
    assert expects[5] == "200; members limit, used, remaining, resetsAt"
    assert (
        expects[6]
        == "422; errorCode DAILY_LIMIT_EXCEEDED; members limit, used, requested, resetsAt"
    )
    assert "Idempotency-Key: $KEY" in steps[3].command

    misses = [miss for step in steps for miss in _check(step, answers)]
    assert not misses, "\n".join(misses) + "\n\n" + json.dumps(answers, indent=1)
    # The 422's figures are numbers (ADR-0050 D7), and the replay moved nothing twice.
    refusal = json.loads(_answer(answers[7])[2])
    assert all(isinstance(refusal[k], int | float) for k in ("limit", "used", "requested"))
    assert json.loads(_answer(answers[6])[2])["used"] == 100
    # The pickup directory the script printed, and the two notices in it.
    assert str(_pickup(tmp_path)) in printed
    assert len(list(_pickup(tmp_path).glob("*.eml"))) == 2


@pytest.mark.e2e
def test_demo_runs_the_journey_itself_and_prints_each_answer(tmp_path: Path) -> None:
    with _run_sh(tmp_path, "--demo") as (process, out):
        code = process.wait(timeout=WAIT)
    output = out.read_text()
    assert code == 0, output + (tmp_path / "run.err").read_text()
    steps = _steps(output)
    assert len(steps) == 7
    # Each step's answer, then its verdict against the `expect:` line printed above it.
    for step in steps:
        assert f"✓ as expected: {'; '.join(step.expect)}" in output
    assert "   | HTTP/1.1 422 Unprocessable Entity" in output
    assert "   | idempotency-replayed: true" in output
    assert "Every step answered as expected." in output
    assert len(list(_pickup(tmp_path).glob("*.eml"))) == 2
