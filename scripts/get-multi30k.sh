#!/usr/bin/env bash
# Puts Multi30k Task 1 (raw, German-English; Elliott et al. 2016) into data/multi30k/.
#
#   scripts/get-multi30k.sh [--from DIR] [--dest DIR]
#
# With --from DIR (or when ../shared/data/multi30k exists) the files are copied from that local
# mirror; otherwise they are downloaded from the official repository, pinned to one commit.
# Every file is checked against its SHA-256, so a partial or altered download fails loudly.
# The data is for non-commercial research and teaching; see the upstream README.
set -euo pipefail

commit=a3d2e0d26b56f3846f66a952536ffed4e401d05a
upstream="https://raw.githubusercontent.com/multi30k/dataset/$commit/data/task1/raw"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/data/multi30k"
mirror=""
if [ -d "$root/../shared/data/multi30k" ]; then
  mirror="$root/../shared/data/multi30k"
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --from) mirror="$2"; shift 2 ;;
    --dest) dest="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1; see --help" >&2; exit 2 ;;
  esac
done

# local name, upstream name, sha256 of the .gz
files="
train.de.gz train.de.gz 726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6
train.en.gz train.en.gz d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f
val.de.gz val.de.gz f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a
val.en.gz val.en.gz 14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28
test2016.de.gz test_2016_flickr.de.gz 9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8
test2016.en.gz test_2016_flickr.en.gz 611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9
test2017_flickr.de.gz test_2017_flickr.de.gz a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee
test2017_flickr.en.gz test_2017_flickr.en.gz 76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074
test2017_mscoco.de.gz test_2017_mscoco.de.gz 799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338
test2017_mscoco.en.gz test_2017_mscoco.en.gz aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58
test2018_flickr.de.gz test_2018_flickr.de.gz ddd0130c7d97482dc5197a02141dae8dd79f20f03586c480d675c09a32daf608
test2018_flickr.en.gz test_2018_flickr.en.gz ef4f4844037d4c5dea75c9a8ed5fd78905967a26f67c255e230cc9780032654d
"

mkdir -p "$dest"
echo "$files" | while read -r name remote sha; do
  [ -n "$name" ] || continue
  target="$dest/$name"
  if [ -f "$target" ] && echo "$sha  $target" | sha256sum --check --status; then
    continue
  fi
  if [ -n "$mirror" ]; then
    if [ ! -f "$mirror/$name" ]; then
      echo "error: $mirror/$name is missing; point --from at a directory with the Multi30k .gz files" >&2
      exit 1
    fi
    cp "$mirror/$name" "$target.part"
  else
    if ! curl --fail --location --silent --show-error -o "$target.part" "$upstream/$remote"; then
      rm -f "$target.part"
      echo "error: cannot download $remote from the Multi30k repository; check the network or" \
        "pass --from DIR with a local copy of the files" >&2
      exit 1
    fi
  fi
  if ! echo "$sha  $target.part" | sha256sum --check --status; then
    rm -f "$target.part"
    echo "error: $name does not have the expected SHA-256; the source is damaged or changed" >&2
    exit 1
  fi
  mv "$target.part" "$target"
done
echo "Multi30k is in $dest ($(ls "$dest" | wc -l) files, checksums verified)"
