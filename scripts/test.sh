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
# The node tests' CPU images (they run as root only): their binaries built here, not in a test's
# time; a failure leaves the build to Node.LoadImages, which then says why.
if [ "$(id -u)" -eq 0 ]; then scripts/images.sh --cpu-binaries || true; fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
scripts/sanitize.sh address thread
