#!/usr/bin/env bash
# OpenMPI for `--features mpi` builds and their tests: Debian's libopenmpi-dev and openmpi-bin,
# libclang-dev for the `mpi` crate's bindgen, and iproute2 (`ip netns`) for the two-host test.
# Installs only what is missing (apt-get, as root or through sudo); prints the mpirun version.
set -euo pipefail

packages=(libopenmpi-dev openmpi-bin libclang-dev iproute2)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg -s "$package" > /dev/null 2>&1; then
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  as_root=()
  if [ "$(id -u)" != 0 ]; then
    as_root=(sudo)
  fi
  echo "installing ${missing[*]}"
  if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"; then
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}"
  fi
fi
mpirun --version | head -n 1
