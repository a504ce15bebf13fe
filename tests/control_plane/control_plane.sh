#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the tests: etcd + kube-apiserver +
# kube-controller-manager (garbage collection, namespaces, service accounts), TLS everywhere, an
# admin client certificate (O=system:masters) in DIR/kubeconfig.
#
#   control_plane.sh start DIR [--apply FILE]...   starts it, kubectl-applies each FILE (CRDs:
#                                                  before the controller manager starts), returns;
#                                                  DIR/limited.kubeconfig: a user with no rights
#   control_plane.sh stop DIR                      stops what DIR's pids name, removes etcd's data
#
# The binaries come from $PSFLOW_KUBE_ASSETS (envtest's KUBEBUILDER_ASSETS convention; default
# ../shared/kube beside the project): kube-apiserver and kube-controller-manager, plain or
# xz-compressed (decompressed into DIR/../kube-bin, checked against SHA256SUMS when there is one),
# and etcd from there or from PATH (Debian's etcd-server). When any is missing, `start` writes
# the reason to DIR/skip, prints it and exits 0: the tests that need the control plane skip with it.
# No kubelet and no scheduler: tests play the kubelet through pods/status (kubelet.h).
#
# Everything listens on 127.0.0.1 on free ports; the processes run in their own sessions with
# output in DIR/*.log, and `stop` ends them by the pids in DIR/pids (SIGTERM, then SIGKILL).
set -euo pipefail

usage() { echo "usage: control_plane.sh start DIR [--apply FILE]... | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd="$1"
dir="$2"
shift 2
root="$(cd "$(dirname "$0")/../.." && pwd)"
fixture="control plane"
source "$root/tests/control_plane/fixture_lib.sh"

stop_all() {
  [ -f "$dir/pids" ] || return 0
  local pids
  pids="$(tac "$dir/pids")"
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -f "$dir/pids"
  rm -rf "$dir/etcd-data"
}

case "$cmd" in
  stop)
    stop_all
    echo "control plane in $dir stopped"
    exit 0
    ;;
  start) ;;
  *) usage ;;
esac

applies=()
while [ $# -gt 0 ]; do
  case "$1" in
    --apply) [ $# -ge 2 ] || usage; applies+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done

stop_all  # a control plane an earlier run left in DIR
rm -rf "$dir"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"


assets="${PSFLOW_KUBE_ASSETS:-$root/../shared/kube}"
how="set PSFLOW_KUBE_ASSETS to a folder with kube-apiserver and kube-controller-manager v1.26 (plain or .xz) and install etcd (apt-get install etcd-server)"
bin_cache="$(dirname "$dir")/kube-bin"
mkdir -p "$bin_cache"
apiserver="$(kube_asset kube-apiserver)" || skip "no kube-apiserver in $assets: $how"
controller_manager="$(kube_asset kube-controller-manager)" || skip "no kube-controller-manager in $assets: $how"
if [ -x "$assets/etcd" ]; then etcd="$assets/etcd"; else etcd="$(command -v etcd)" || skip "no etcd in $assets or on PATH: $how"; fi
for tool in openssl curl; do
  command -v "$tool" >/dev/null || skip "no $tool on PATH (scripts/setup.sh installs it)"
done
kubectl="$(command -v kubectl || true)"
[ -x "$root/build/tools/bin/kubectl" ] && kubectl="$root/build/tools/bin/kubectl"
[ -n "${PSFLOW_KUBECTL:-}" ] && kubectl="$PSFLOW_KUBECTL"

trap 'fail "interrupted"' INT TERM


# --- Certificates: one CA signs the server's and the clients' certificates.
pki="$dir/pki"
mkdir -p "$pki"
ssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 \
  -subj "/CN=psflow-test-ca"
# client_cert NAME SUBJECT [EXTFILE]
cert() {
  local name="$1" subject="$2" ext="${3:-}"
  ssl req -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subject"
  if [ -n "$ext" ]; then
    ssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -out "$pki/$name.crt" -days 2 -extfile "$ext"
  else
    ssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -out "$pki/$name.crt" -days 2
  fi
}
# 10.96.0.1: the ClusterIP of the `kubernetes` Service (the first of --service-cluster-ip-range),
# the address a pod's in-cluster config dials (tests/node/node.sh routes it here).
printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' \
  > "$pki/server.ext"
cert server "/CN=kube-apiserver" "$pki/server.ext"
cert admin "/O=system:masters/CN=psflow-test-admin"
cert controller-manager "/CN=system:kube-controller-manager"
# A user with no rights but those a test grants it (RBAC tests of least privilege).
cert limited "/CN=psflow-test-limited"
ssl genrsa -out "$pki/sa.key" 2048
ssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

# --- etcd
etcd_port="$(free_port)"
peer_port="$(free_port)"
setsid "$etcd" --name psflow-test --data-dir "$dir/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "psflow-test=http://127.0.0.1:$peer_port" \
  </dev/null >"$dir/etcd.log" 2>&1 &
echo $! >> "$dir/pids"
etcd_healthy() { curl -sf "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; }
wait_for etcd 30 etcd_healthy

# An audit log of every write to a pod and its status (who, when, what), kept beside the other
# logs: the record a test's diagnosis reads when a pod's status is not what its kubelet reported.
cat > "$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [create, update, patch, delete, deletecollection]
  resources: [{group: "", resources: [pods, pods/status, pods/binding]}]
- level: None
EOF

# --- kube-apiserver. Its default admission plugins (PodSecurity among them: a namespace labelled
# pod-security.kubernetes.io/enforce refuses the pods its level forbids) and
# OwnerReferencesPermissionEnforcement, as OpenShift has it: setting blockOwnerDeletion in an
# ownerReference needs `update` of the owner's finalizers, so the operator's RBAC is checked for it.
# PodSchedulingReadiness (alpha in 1.26; beta and on from 1.27): pods' spec.schedulingGates, which
# Kueue's admission gate uses (tests/node/queue_on_node_test.cc).
api_port="$(free_port)"
setsid "$apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --tls-cert-file="$pki/server.crt" --tls-private-key-file="$pki/server.key" \
  --client-ca-file="$pki/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
  --enable-admission-plugins=OwnerReferencesPermissionEnforcement \
  --feature-gates=PodSchedulingReadiness=true \
  --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/audit.log" \
  --audit-log-maxsize=200 --audit-log-maxbackup=1 \
  </dev/null >"$dir/kube-apiserver.log" 2>&1 &
echo $! >> "$dir/pids"
server="https://127.0.0.1:$api_port"
api_ready() {
  [ "$(curl -s --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "$server/readyz")" = "ok" ]
}
wait_for kube-apiserver 90 api_ready

# kubeconfig USER FILE
kubeconfig() {
  cat > "$2" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: psflow-test
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $1
  user:
    client-certificate: $pki/$1.crt
    client-key: $pki/$1.key
contexts:
- name: psflow-test
  context: {cluster: psflow-test, user: $1}
current-context: psflow-test
EOF
}
kubeconfig admin "$dir/kubeconfig"
kubeconfig controller-manager "$dir/controller-manager.kubeconfig"
kubeconfig limited "$dir/limited.kubeconfig"

kctl() { "$kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
[ -n "$kubectl" ] || fail "no kubectl (scripts/setup.sh installs it into build/tools/bin)"

# --- The applied files (the CRDs), before the controller manager starts: its garbage collector
# looks for new resource types only every 30 s, and until it has seen a kind it neither watches
# its objects nor resolves ownerReferences to them, so the dependents of a TrainingJob deleted in
# that window (a test's pods, Secrets, NetworkPolicy) outlive it by up to a minute (the lookups
# that fail back off exponentially).
for file in "${applies[@]}"; do
  kctl apply -f "$file" >>"$dir/kubectl.log" 2>&1 || fail "kubectl apply -f $file failed: $(tail -n 3 "$dir/kubectl.log")"
done
if [ ${#applies[@]} -gt 0 ]; then
  kctl wait --for=condition=Established crd --all --timeout=60s >>"$dir/kubectl.log" 2>&1 ||
    fail "the applied CRDs did not become Established"
  # Established is not yet discovery, which the controller manager reads when it starts.
  crds_discovered() {
    local resource
    for resource in $(kctl get crd -o jsonpath='{range .items[*]}{.spec.names.plural}.{.spec.group}{" "}{end}'); do
      kctl get "$resource" -A --request-timeout=5s >/dev/null 2>&1 || return 1
    done
  }
  wait_for "the applied CRDs in discovery" 30 crds_discovered
fi

# --- kube-controller-manager, with the controllers the tests need: garbage collection through
# ownerReferences, namespace deletion, ServiceAccounts (pods need their namespace's default one)
# and the root CA ConfigMap. Not the endpoints/endpointslice controllers, which follow every
# headless Service and its pods (a core's worth of CPU under bench_operator_scale on a 2-core
# machine, where a real cluster runs them on other machines), nor node lifecycle (it would evict
# the pods of the test node, which has no kubelet to heartbeat). The PersistentVolume binder binds
# the data examples' claim to the PersistentVolume a test makes as docs/operator.md tells a user to.
# The Deployment and ReplicaSet controllers run the chart's operator Deployment on the real node
# (tests/node/chart_on_node_test.cc).
controllers="garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher"
controllers+=",persistentvolume-binder,deployment,replicaset"
kcm_port="$(free_port)"
setsid "$controller_manager" --kubeconfig="$dir/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" --leader-elect=false \
  --controllers="$controllers" --use-service-account-credentials=true \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  </dev/null >"$dir/kube-controller-manager.log" 2>&1 &
echo $! >> "$dir/pids"
kcm_healthy() { [ "$(curl -sk "https://127.0.0.1:$kcm_port/healthz")" = "ok" ]; }
wait_for kube-controller-manager 60 kcm_healthy
# Pods need their namespace's default ServiceAccount, which the controller manager creates.
wait_for "the default ServiceAccount" 60 kctl get serviceaccount default -n default

# The node the tests' kubelet binds pods to (tests/control_plane/test_kubelet.h).
kctl apply -f - >>"$dir/kubectl.log" 2>&1 <<EOF || fail "the test node could not be created"
apiVersion: v1
kind: Node
metadata:
  name: psflow-test-node
  labels: {kubernetes.io/hostname: psflow-test-node}
EOF

echo "$server" > "$dir/server"
echo "control plane ready at $server (kubeconfig $dir/kubeconfig, logs in $dir)"
