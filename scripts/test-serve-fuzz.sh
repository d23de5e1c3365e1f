#!/usr/bin/env bash
# Fuzzes `transformer serve` against its own OpenAPI description (GET /spec, written by hand
# in crates/transformer-serve/assets/serve/openapi.json) with schemathesis from PyPI: valid and invalid requests
# generated for every operation, sent over loopback only, and every answer checked for a 5xx
# or a status, content type or body the description does not allow. Then the server must
# still answer /health and exit 0 on SIGTERM. Installs schemathesis in a venv under ~/.cache;
# trains the tiny model unless CHECKPOINT names one. SPEC=crates/transformer-serve/assets/serve/openapi.json checks
# that file instead of the copy compiled into BIN; FUZZ_EXAMPLES bounds the cases per
# operation and phase (default 1000), FUZZ_TIMEOUT the run's seconds (default 300), and
# FUZZ_SEED replays a run (its seed is printed).
#
#   BIN=target/release/transformer scripts/test-serve-fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${FUZZ_VENV:-$HOME/.cache/transformer/venv-fuzz}"
SCHEMATHESIS=4.32.5
EXAMPLES="${FUZZ_EXAMPLES:-1000}"
TIMEOUT="${FUZZ_TIMEOUT:-300}"
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -qx "schemathesis, version $SCHEMATHESIS"; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS"
fi
work=$(mktemp -d)
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
checkpoint="${CHECKPOINT:-}"
if [ -z "$checkpoint" ]; then
  "$BIN" train --device cpu --quiet --config configs/tiny.toml --out "$work/tiny"
  checkpoint="$work/tiny"
fi
# Limits low enough that generated requests reach them (413 and the 400s), and a request
# time limit (503 after) well inside the client's.
# shellcheck source=scripts/serve-start.sh
source scripts/serve-start.sh
start_server "$checkpoint" --timeout-ms 10000 --max-body-bytes 4096 --max-chars 400 \
  --max-texts 16 --max-request-tokens 4000 --max-queue 256
# The body of GET $url$1, which must answer 200.
get() {
  "$VENV/bin/python" -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as response:
    assert response.status == 200, response.status
    print(response.read().decode())' "$url$1"
}
# Random strings almost never name the model's languages, so about half the /translate bodies
# are given the pair /health reports: the fuzzer then reaches the translations, not only the 400.
pair=$(get /health | "$VENV/bin/python" -c 'import json, sys
health = json.load(sys.stdin)
print(health["source"], health["target"])')
cat > "$work/hooks.py" << 'HOOKS'
import os

import schemathesis
from hypothesis import strategies as st

SOURCE, TARGET = os.environ["FUZZ_PAIR"].split()


@schemathesis.hook
def before_generate_body(context, strategy):
    operation = context.operation
    if operation is None or operation.path != "/translate":
        return strategy
    sources = st.sampled_from([SOURCE, SOURCE.upper(), "auto"])

    def with_pair(body, source):
        if not isinstance(body, dict):
            return body
        return {**body, "source": source, "target": TARGET}

    return st.one_of(strategy, st.builds(with_pair, strategy, sources))
HOOKS
seed=()
[ -z "${FUZZ_SEED:-}" ] || seed=(--seed "$FUZZ_SEED")
# No stateful phase: no operation links to another. The coverage phase sends a fixed set of
# boundary cases; the examples and fuzzing phases at most EXAMPLES per operation.
status=0
FUZZ_PAIR="$pair" SCHEMATHESIS_HOOKS="$work/hooks.py" \
  timeout --signal=INT --kill-after=10 "$TIMEOUT" \
  "$VENV/bin/schemathesis" run "${SPEC:-$url/spec}" --url "$url" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --phases examples,coverage,fuzzing --max-examples "$EXAMPLES" ${seed[@]+"${seed[@]}"} \
  --workers 2 --request-timeout 20 --generation-database none --no-color \
  2>&1 | tee "$work/fuzz.log" || status=$?
# "  1234 generated, 1234 passed" or "  1234 generated, 3 found 2 unique failures, ..."
cases=$(grep -A1 '^Test cases:' "$work/fuzz.log" | tail -1 || true)
generated=$(sed -n 's/^ *\([0-9]*\) generated.*/\1/p' <<< "$cases")
passed=$(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<< "$cases")
if [ "$status" -ne 0 ] || [ -z "$generated" ] || [ "$passed" != "$generated" ]; then
  [ "$status" -ne 124 ] || echo "serve fuzz: schemathesis ran past FUZZ_TIMEOUT=${TIMEOUT}s" >&2
  echo "serve fuzz: FAILED (schemathesis exit $status; test cases:${cases:- none counted})" >&2
  exit 1
fi
get /health > /dev/null || { echo "serve fuzz: /health did not answer 200 after fuzzing" >&2; exit 1; }
stop_server
echo "serve fuzz: $passed passed, 0 failed (schemathesis $SCHEMATHESIS, seed and phases above, ${SECONDS}s in all)"
