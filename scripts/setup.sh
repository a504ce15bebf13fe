#!/usr/bin/env bash
# Installs everything psflow needs to build and test, from Debian 12 packages only.
# Idempotent: packages already present are skipped without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev libgrpc-dev
  libabsl-dev nlohmann-json3-dev libyaml-cpp-dev prometheus-cpp-dev libcpprest-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libopenblas-dev zlib1g-dev
  prometheus dataset-fashion-mnist clang-format
  clang libclang-rt-14-dev
  python3 wordnet-base
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
