# shellcheck shell=bash
# Shared by the tests/install/*.sh tests (sourced, not run). Finds helm and kubectl where
# scripts/setup.sh installs them, gives each test a temp dir, and wraps the commands the tests run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/helm/psflow"
HERE="$ROOT/tests/install"
TOOLS_BIN="${PSFLOW_TOOLS_DIR:-$ROOT/build/tools}/bin"
HELM="$TOOLS_BIN/helm"
KUBECTL="$TOOLS_BIN/kubectl"
TEST_NAME="$(basename "$0" .sh)"

fail() {
  echo "FAIL [$TEST_NAME]: $*" >&2
  exit 1
}
check() { echo "[$TEST_NAME] check: $*"; }
pass() { echo "[$TEST_NAME] PASS"; }

for tool in "$HELM" "$KUBECTL"; do
  [ -x "$tool" ] || fail "$tool not found: run scripts/setup.sh (it installs helm and kubectl there)"
done

TMP="$(mktemp -d)"
FAKE_API_PID=""
cleanup() {
  if [ -n "$FAKE_API_PID" ]; then kill "$FAKE_API_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# helm with its own empty config, cache and data dirs: no repositories or plugins of the user's.
helm_() {
  HELM_CONFIG_HOME="$TMP/helm/config" HELM_CACHE_HOME="$TMP/helm/cache" \
    HELM_DATA_HOME="$TMP/helm/data" "$HELM" "$@"
}

# The chart rendered with the release name psflow in namespace psflow-system; extra args go to
# helm template (-f FILE, --set K=V, --include-crds).
render() { helm_ template psflow "$CHART" --namespace psflow-system "$@"; }

# Prints a YAML file of one mapping (values.yaml, a Prometheus rule file) as one line of JSON:
# Helm reads it as a values file and a one-template chart prints the values.
yaml_to_json() {
  if [ ! -d "$TMP/dump" ]; then
    mkdir -p "$TMP/dump/templates"
    printf 'apiVersion: v2\nname: dump\nversion: 0.0.1\n' >"$TMP/dump/Chart.yaml"
    printf '{{ toJson .Values }}\n' >"$TMP/dump/templates/values.json"
  fi
  helm_ template dump "$TMP/dump" -f "$1" 2>"$TMP/helm.err" | grep '^{' ||
    fail "helm cannot read ${1#"$ROOT"/}: $(cat "$TMP/helm.err")"
}

# kubectl with no kubeconfig of the user's; `kube_apply_dry_run` needs start_fake_api first.
kubectl_() { KUBECONFIG="$TMP/kubeconfig" "$KUBECTL" --cache-dir="$TMP/kube-cache" "$@"; }

start_fake_api() {
  python3 "$HERE/fake_apiserver.py" "$TMP/api-port" &
  FAKE_API_PID=$!
  for _ in $(seq 100); do
    [ -s "$TMP/api-port" ] && break
    sleep 0.05
  done
  [ -s "$TMP/api-port" ] || fail "the fake API server (tests/install/fake_apiserver.py) did not start"
  cat >"$TMP/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "http://127.0.0.1:$(cat "$TMP/api-port")"}}]
contexts: [{name: fake, context: {cluster: fake, namespace: default}}]
current-context: fake
users: []
KUBECONFIG
}

# Reads manifests on stdin, prints them as kubectl parsed them (a JSON List), and fails with
# kubectl's message when it cannot: bad YAML, an unknown kind or apiVersion, a missing name.
# Kustomize parses first: its YAML reader refuses duplicate keys and duplicate objects, which
# kubectl apply lets through.
kube_apply_dry_run() {
  local what="$1" out
  mkdir -p "$TMP/strict"
  cat >"$TMP/strict/objects.yaml"
  printf 'resources: [objects.yaml]\n' >"$TMP/strict/kustomization.yaml"
  kubectl_ kustomize "$TMP/strict" >/dev/null 2>"$TMP/kubectl.err" ||
    fail "kustomize cannot read $what: $(cat "$TMP/kubectl.err")"
  out="$(kubectl_ apply --dry-run=client --validate=false -o json -f "$TMP/strict/objects.yaml" 2>"$TMP/kubectl.err")" ||
    fail "kubectl apply --dry-run=client rejects $what: $(cat "$TMP/kubectl.err")"
  printf '%s\n' "$out" >"$TMP/strict/parsed.json"
  server_dry_run "$what" "$TMP/strict/parsed.json"
  printf '%s\n' "$out"
}

# With the real control plane of the test run (tests/control_plane: PSFLOW_CONTROL_PLANE_DIR), the
# objects of FILE (a JSON List) whose kinds a plain Kubernetes 1.26 serves go through the API
# server's own validation as well: kubectl apply --dry-run=server --validate=strict, in the
# namespaces they name (created when missing). The CRD is the one the control plane has
# installed, so TrainingJobs are checked against it. Prometheus-operator kinds (ServiceMonitor,
# PrometheusRule) are not served there: kubectl's client-side parse above is all they get. Without
# a control plane (no assets) this says so and checks nothing more.
server_dry_run() {
  local what="$1" file="$2" dir="${PSFLOW_CONTROL_PLANE_DIR:-}"
  if [ -z "$dir" ] || [ ! -f "$dir/server" ]; then
    echo "[$TEST_NAME] no Kubernetes control plane (PSFLOW_CONTROL_PLANE_DIR): $what is parsed by kubectl only"
    return 0
  fi
  python3 - "$file" "$TMP/strict/served.json" "$TMP/strict/namespaces" <<'PY'
import json, sys
parsed = json.load(open(sys.argv[1]))
items = parsed["items"] if parsed.get("kind") == "List" else [parsed]
served = [o for o in items if not o["apiVersion"].startswith("monitoring.coreos.com/")]
json.dump({"apiVersion": "v1", "kind": "List", "items": served}, open(sys.argv[2], "w"))
names = sorted({o["metadata"].get("namespace", "") for o in served} - {""})
open(sys.argv[3], "w").write("".join(n + "\n" for n in names))
PY
  local real=(--kubeconfig="$dir/kubeconfig" --cache-dir="$TMP/real-kube-cache")
  while read -r ns; do
    [ -n "$ns" ] || continue
    "$KUBECTL" "${real[@]}" get namespace "$ns" >/dev/null 2>&1 ||
      "$KUBECTL" "${real[@]}" create namespace "$ns" >/dev/null 2>&1 || true
  done <"$TMP/strict/namespaces"
  "$KUBECTL" "${real[@]}" apply --dry-run=server --validate=strict -f "$TMP/strict/served.json" \
    >/dev/null 2>"$TMP/kubectl.err" ||
    fail "the API server (kubectl apply --dry-run=server --validate=strict) rejects $what: $(cat "$TMP/kubectl.err")"
}
