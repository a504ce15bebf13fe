#!/usr/bin/env bash
# Every test: installs what psflow needs, builds it, runs the whole ctest suite (unit tests,
# multi-process end-to-end tests, the live-metrics test with promtool, the fuzz targets), then the
# sanitizer suites (scripts/sanitize.sh: ASan + UBSan and TSan, each in its own CPU-only build).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
scripts/sanitize.sh address thread
