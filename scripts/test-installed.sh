#!/usr/bin/env bash
# The tool as its specification types it, installed and run from outside the repository:
# `cargo install` (over the build CI already has), then in an empty directory elsewhere
# `transformer train --config base.toml` (a config the tool ships, named as the README and the
# specification name it) and `transformer translate "ich mochte ein bier"`, which must print
# `i want a beer .`.
#
#   scripts/test-installed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cargo install --quiet --locked --path . --root "$root"
mkdir "$root/elsewhere"
cd "$root/elsewhere"
"$root/bin/transformer" train --device cpu --quiet --config base.toml 2> train.log > /dev/null
if ! grep -q "configs/base.toml" train.log; then
  echo "train --config base.toml did not say it took the shipped config:" >&2
  cat train.log >&2
  exit 1
fi
got=$("$root/bin/transformer" translate --device cpu "ich mochte ein bier" 2> /dev/null)
if [ "$got" != "i want a beer ." ]; then
  echo "translate printed '$got', not 'i want a beer .'" >&2
  exit 1
fi
echo "installed: train --config base.toml and translate from $root/elsewhere: $got"
