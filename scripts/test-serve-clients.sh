#!/usr/bin/env bash
# Tests `transformer serve` with clients no one here wrote: LibreTranslate's Python client
# (libretranslatepy, PyPI), a .docx written and read back by python-docx (PyPI) through
# /translate_file, HTML compared by Python's html.parser, and the page in a real headless
# browser (Debian's chromium driven by Playwright from PyPI, over the DevTools protocol). Installs what is missing: chromium
# with apt-get, the Python packages in a venv under ~/.cache. Trains the tiny model unless
# CHECKPOINT names one; SCREENSHOT=docs/serve-page.png refreshes the picture in docs/serving.md.
#
#   BIN=target/release/transformer scripts/test-serve-clients.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${SERVE_VENV:-$HOME/.cache/transformer/venv-serve}"
if ! command -v chromium >/dev/null; then
  apt_get=(apt-get)
  [ "$(id -u)" = 0 ] || apt_get=(sudo apt-get)
  "${apt_get[@]}" update -q
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -q chromium
fi
if ! "$VENV/bin/python" -c "import libretranslatepy, playwright, docx" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet libretranslatepy==2.1.4 playwright==1.65.2 python-docx==1.2.0
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
# shellcheck source=scripts/serve-start.sh
source scripts/serve-start.sh
start_server "$checkpoint"
"$VENV/bin/python" scripts/serve_clients.py --url "$url" \
  --screenshot "${SCREENSHOT:-$work/page.png}" --chromium "$(command -v chromium)"
stop_server
echo "serve clients: libretranslatepy, python-docx, html.parser and the page in chromium passed"
