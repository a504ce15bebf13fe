#!/usr/bin/env bash
# Every test: installs what psflow needs, builds it (and, where the build links CUDA, the CPU-only
# binaries of the node tests' images: scripts/images.sh --cpu-binaries), runs the whole ctest
# suite (unit tests, multi-process end-to-end tests, the live-metrics test with promtool, the fuzz
# targets), then the sanitizer suites (scripts/sanitize.sh: ASan + UBSan and TSan, each in its own
# CPU-only build).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/images.sh --cpu-binaries  # the node tests' CPU images: built here, not in a test's time
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
scripts/sanitize.sh address thread
