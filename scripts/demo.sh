#!/usr/bin/env bash
# The demo: installs what psflow needs, builds it, and trains the seed MLP on Fashion-MNIST
# between-graph with 1 ps + 2 workers on this machine (deploy/examples/mnist-mlp.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/bin/psflow run deploy/examples/mnist-mlp.yaml
