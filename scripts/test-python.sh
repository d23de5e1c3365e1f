#!/usr/bin/env bash
# The Python package (python/) from outside: `pip install ./python` from the clone into a
# fresh venv, then imported and run there without the source tree; the wheel as `maturin build
# --release` makes it; its type stubs against the module (mypy's stubtest); and the pytest
# suite (python/tests) against the binary, with pytest, sacreBLEU, python-docx and mypy from
# PyPI in a venv under ~/.cache that later runs reuse. Both
# builds go to the target directory the other builds use, so only the package's own crate and
# PyO3 are compiled.
#
#   BIN=target/release/transformer scripts/test-python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
BIN="$(realpath "${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}")"
VENV="${PYTHON_VENV:-$HOME/.cache/transformer/venv-python}"
if ! "$VENV/bin/python" -c "import maturin, pytest, sacrebleu, docx, mypy" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet maturin pytest sacrebleu python-docx mypy
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The package in a fresh venv, used from outside the clone: it imports from the venv, and
# translates as the binary does.
used_from_elsewhere() {
  (
    cd "$work"
    "$1/bin/python" - "$repo/tests/fixtures/parity" "$BIN" "$2" <<'PY'
import subprocess, sys, transformer
checkpoint, binary, how = sys.argv[1:4]
assert not transformer.__file__.startswith(checkpoint.rsplit("/tests/", 1)[0]), transformer.__file__
ours = transformer.Translator(checkpoint).translate("ich mochte ein bier").translation
theirs = subprocess.run([binary, "translate", "--checkpoint", checkpoint, "ich mochte ein bier"],
                        capture_output=True, text=True, check=True).stdout.strip()
assert ours == theirs, (ours, theirs)
print(f"{how}: transformer {transformer.__version__} from {transformer.__file__}: {ours!r}")
PY
  )
}

# What a user types in a clone: the package built and installed.
python3 -m venv "$work/fresh"
"$work/fresh/bin/pip" install --quiet ./python
used_from_elsewhere "$work/fresh" "pip install ./python"

# The wheel maturin makes, alone in another fresh venv, and in the test venv for the tests.
"$VENV/bin/maturin" build --release --locked --quiet -m python/Cargo.toml -o "$work/wheels"
python3 -m venv "$work/wheel-only"
"$work/wheel-only/bin/pip" install --quiet --no-index "$work"/wheels/*.whl
used_from_elsewhere "$work/wheel-only" "the wheel alone"
"$VENV/bin/pip" install --quiet --force-reinstall "$work"/wheels/*.whl
# The type stubs against the module itself (mypy's stubtest: every name, every signature),
# and checked as mypy --strict reads them. The classes are PyO3's: final, with no stub of the
# native submodule.
(cd "$work" && "$VENV/bin/python" -m mypy.stubtest --ignore-disjoint-bases --ignore-missing-stub transformer)
"$VENV/bin/python" -m mypy --strict --no-incremental python/transformer.pyi
TRANSFORMER_BIN="$BIN" "$VENV/bin/python" -m pytest -q -p no:cacheprovider python/tests
