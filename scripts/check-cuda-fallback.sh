#!/usr/bin/env bash
# The CUDA build on a machine without a GPU (CI's case): started with the stub libcuda.so on
# the library path (scripts/setup-cuda.sh), `--device auto` must fall back to the CPU with a
# one-line notice and give the CPU-only build's answer, and `--device cuda` must fail with a
# one-line error; never a panic.
#
#   eval "$(scripts/setup-cuda.sh --env)"
#   scripts/check-cuda-fallback.sh CUDA-BINARY CPU-BINARY
set -uo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/check-cuda-fallback.sh CUDA-BINARY CPU-BINARY"
BIN="${1:?$usage}"
CPU_BIN="${2:?$usage}"
FIXTURE=tests/fixtures/parity
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() { # check NAME CONDITION-COMMAND...
  local name="$1"
  shift
  if "$@"; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    sed 's/^/    /' "$work/stderr"
    failed=$((failed + 1))
  fi
}
lines() { grep -c '' "$1"; }

"$BIN" translate --checkpoint "$FIXTURE" --device auto --max-len 8 "ich mochte ein bier" \
  > "$work/auto.out" 2> "$work/stderr"
status=$?
check "--device auto exits 0" test "$status" = 0
check "--device auto says once, on one line, that it falls back to the CPU" \
  grep -q '^device: cpu (auto: no NVIDIA driver is installed' "$work/stderr"
check "--device auto prints nothing else on stderr" test "$(lines "$work/stderr")" = 1
"$CPU_BIN" translate --checkpoint "$FIXTURE" --device cpu --max-len 8 "ich mochte ein bier" \
  > "$work/cpu.out" 2> "$work/stderr"
status=$?
check "the CPU-only build translates the same sentence (exit 0)" test "$status" = 0
check "the CPU-only build's answer is not empty" test -s "$work/cpu.out"
check "--device auto translates as the CPU-only build does" \
  cmp -s "$work/auto.out" "$work/cpu.out"

"$BIN" translate --checkpoint "$FIXTURE" --device cuda "ich mochte ein bier" \
  > /dev/null 2> "$work/stderr"
status=$?
check "--device cuda exits 1" test "$status" = 1
check "--device cuda names the cause and the fix in one error line" \
  grep -q '^error: --device cuda:0 is not available: no NVIDIA driver is installed.*use --device cpu$' \
  "$work/stderr"
check "--device cuda prints only that line" test "$(lines "$work/stderr")" = 1
check "nothing panicked" bash -c "! grep -rq panicked '$work'"

echo "cuda-fallback: $passed passed, $failed failed"
[ "$failed" = 0 ]
