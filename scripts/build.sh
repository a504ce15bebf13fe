#!/usr/bin/env bash
# Configures and builds psflow into build/ (Release with debug info), through ccache when it is
# installed (scripts/compiler_cache.sh). Extra arguments go to cmake, e.g.
# scripts/build.sh -DPSFLOW_CUDA=OFF. BUILD_DIR overrides the folder; PSFLOW_BUILD_TARGETS (names
# separated by spaces) builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
source scripts/compiler_cache.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher_args[@]}" "$@" \
  >/dev/null
# shellcheck disable=SC2086  # the target names split on spaces
ninja -C "$build_dir" ${PSFLOW_BUILD_TARGETS:-}
