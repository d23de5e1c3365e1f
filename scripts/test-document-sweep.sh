#!/usr/bin/env bash
# The document sweep (scripts/document-sweep.py): Word files made by python-docx, by Python's
# ElementTree rewriting them (WordprocessingML as `ns0:`, and as the default namespace) and by
# LibreOffice, an HTML page and a text file, translated by `transformer translate --file`:
# every sentence in comes out translated. Installs what is missing: LibreOffice's Writer
# (Debian's libreoffice-writer-nogui) with apt-get, python-docx in the venv
# scripts/test-serve-clients.sh shares. Trains a toy German model of two sentences (seconds).
#
#   BIN=target/release/transformer scripts/test-document-sweep.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${SERVE_VENV:-$HOME/.cache/transformer/venv-serve}"
if ! command -v soffice >/dev/null; then
  apt_get=(apt-get)
  [ "$(id -u)" = 0 ] || apt_get=(sudo apt-get)
  "${apt_get[@]}" update -q
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -q --no-install-recommends \
    libreoffice-writer-nogui
fi
if ! "$VENV/bin/python" -c "import docx" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet python-docx==1.2.0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'Ich mochte ein Bier.\tI want a beer.\nIch mochte eine Cola.\tI want a coke.\n' > "$work/pairs.tsv"
sed "s|data/toy.tsv|$work/pairs.tsv|" configs/tiny.toml > "$work/config.toml"
"$BIN" train --device cpu --quiet --config "$work/config.toml" --out "$work/run"
"$VENV/bin/python" scripts/document-sweep.py --bin "$BIN" --checkpoint "$work/run" \
  --soffice "$(command -v soffice)"
