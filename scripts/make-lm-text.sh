#!/usr/bin/env bash
# Writes data/genesis.txt, the language-model corpus of configs/lm-tiny.toml: the Book of
# Genesis in the King James Version (public domain), one verse per line, from Debian's
# bible-kjv package (installed with apt-get if missing). The file is committed; this script
# says where it came from and regenerates it.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bible > /dev/null || apt-get install -y -qq bible-kjv > /dev/null
# Wide lines so that no verse wraps; keep "  N text" verse lines, drop chapter headings.
COLUMNS=10000 bible -l10000 gen1:1-50:26 \
  | sed -n 's/^ *[0-9][0-9]* \(.*\)$/\1/p' > data/genesis.txt
echo "make-lm-text: data/genesis.txt, $(wc -l < data/genesis.txt) verses, $(wc -c < data/genesis.txt) bytes" >&2
