"""Shared fixtures: the `transformer` binary (the reference the package must agree with), the
repository's fixtures, and a tiny model trained once by the binary."""

import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def binary() -> str:
    path = os.environ.get("TRANSFORMER_BIN") or str(
        pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "transformer"
    )
    assert os.access(path, os.X_OK), f"no transformer binary at {path}; set TRANSFORMER_BIN"
    return path


def run(binary, *args, input=None, check=True):
    """The binary run from the repository's root, as the tests' configs expect."""
    done = subprocess.run(
        [binary, *map(str, args)], input=input, capture_output=True, text=True, cwd=REPO
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def cli_error(done) -> str:
    """The binary's error line, without its `error: `."""
    assert done.returncode != 0, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert lines, done.stderr
    return lines[-1][len("error: "):]


def cli_json(binary, checkpoint, sources, *flags):
    """`transformer translate --json` of `sources` (one per line, all waiting on stdin, so
    that they are decoded as one batch, as the package decodes a list)."""
    done = run(binary, "translate", "--json", "--checkpoint", checkpoint, *flags,
               input="".join(s + "\n" for s in sources))
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="session")
def tiny_run(binary, tmp_path_factory) -> pathlib.Path:
    """configs/tiny.toml trained by the binary: our own model, with a vocabulary of words."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    run(binary, "train", "--quiet", "--device", "cpu", "--config", "configs/tiny.toml", "--out", out)
    return out
