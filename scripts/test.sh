#!/usr/bin/env bash
# Every test: installs what psflow needs, builds it, runs the whole ctest suite (unit tests,
# multi-process end-to-end tests, the live-metrics test with promtool, the fuzz targets). The
# sanitizer suites are scripts/sanitize.sh, not yet part of this command (README, Building).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
