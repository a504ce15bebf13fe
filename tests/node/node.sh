#!/usr/bin/env bash
# A real Kubernetes node for the tests, joined to the control plane of tests/control_plane: pods
# run for real, in containers. containerd (CRI) + runc, a CNI bridge, kubelet and kube-scheduler
# v1.26, and cluster DNS.
#
#   node.sh start DIR CONTROL_PLANE_DIR   starts it, returns once the node is Ready
#   node.sh load-images DIR               scripts/images.sh --prebuilt for psflow/ps and
#                                         psflow/worker, loaded into the node's containerd
#   node.sh stop DIR                      removes its pods, stops what DIR's pids name
#
# The node is named "localhost": the API server reaches a kubelet (pod logs, exec) at the node's
# hostname, so the name must resolve to the address the kubelet listens on, 127.0.0.1. The
# scheduler schedules only pods with spec.schedulerName "psflow-node" (kSchedulerName in
# node_test.h), and only to this node: the other tests of the run bind their pods to the control
# plane's node-less psflow-test-node themselves (test_kubelet.h), and must not race it.
#
#   containerd  its own config, root, state and socket in DIR; CRI with a local pause image,
#               restrict_oom_score_adj (root here cannot lower oom_score_adj), runc v2 with
#               cgroupfs, CNI plugins from /usr/lib/cni and DIR/cni as conf_dir
#   pause       Debian's static catatonit as /pause, run as `catatonit -P` (what podman's infra
#               containers run); no image can be pulled here
#   CNI         bridge psflow0 (gateway 10.85.0.1, hairpin, no masquerade) + host-local on
#               10.85.0.0/16 (podman's default is 10.88.0.0/16): the pod network stays on this
#               machine. NetworkPolicy is not enforced.
#   DNS         CoreDNS stands in as dnsmasq on 10.85.0.1:53, serving the hosts files that
#               cluster_dns.py writes from the Services and this node's Pods
#               (<svc>.<ns>.svc.cluster.local, <hostname>.<subdomain>.<ns>.svc.cluster.local).
#               No kube-proxy: ClusterIP Services do not route (psflow's are headless), but
#               for one: the `kubernetes` Service's ClusterIP:443, which a pod's in-cluster
#               config dials (the chart's operator), is DNATed to the API server on 127.0.0.1
#               (chain PSFLOW-NODE in the nat table; route_localnet on the bridge)
#   kubelet     client certificate CN=system:node:localhost, O=system:nodes from the control
#               plane's CA; listens on 127.0.0.1 (anonymous, AlwaysAllow: the API server calls it
#               without a client certificate)
#
# kubelet, kube-scheduler and crictl come from $PSFLOW_KUBE_ASSETS as the control plane's
# binaries do (plain or .xz, decompressed into DIR/../kube-bin, checked against SHA256SUMS).
# Without them, root, the control plane or the Debian packages, `start` writes the reason to
# DIR/skip, prints it and exits 0: the tests that need the node skip with it.
#
# Processes run in their own sessions with output in DIR/*.log; `stop` removes the pods through
# CRI, then ends them by the pids in DIR/pids (SIGTERM, then SIGKILL), then any container shim
# or process the containerd of DIR left, by the pids in its state folder.
set -euo pipefail

usage() {
  echo "usage: node.sh start DIR CONTROL_PLANE_DIR | load-images DIR | stop DIR" >&2
  exit 2
}
[ $# -ge 2 ] || usage
cmd="$1"
dir="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
fixture="node"
source "$root/tests/control_plane/fixture_lib.sh"
node_name=localhost
bridge=psflow0
gateway=10.85.0.1
subnet=10.85.0.0/16
pause_image=localhost/psflow/pause:catatonit
sock() { echo "$dir/containerd.sock"; }

# Every mount under $1 (pods' volumes, container root file systems), deepest first.
umount_under() {
  local target
  for target in $(findmnt -rn -o TARGET | grep "^$1/" | sort -r); do
    umount -l "$target" 2>/dev/null || true
  done
}

stop_all() {
  [ -d "$dir" ] || return 0
  # The pods first, through CRI, while containerd runs: their containers, shims and network
  # namespaces go with them.
  # The kubelet writes container logs under /var/log/pods (fixed in v1.26) with links in
  # /var/log/containers, and removes them only for pods it removes itself: these go too.
  if [ -x "$dir/../kube-bin/crictl" ] && [ -S "$(sock)" ]; then
    local crictl=("$dir/../kube-bin/crictl" --runtime-endpoint "unix://$(sock)" --timeout 20s)
    local log_dirs
    log_dirs="$(timeout 30 "${crictl[@]}" inspectp -o json $(timeout 30 "${crictl[@]}" pods -q 2>/dev/null) 2>/dev/null |
      sed -n 's|.*"log_directory": "\(/var/log/pods/[^"/]*\)".*|\1|p' | sort -u || true)"
    timeout 60 "${crictl[@]}" rmp --force --all >/dev/null 2>&1 || true
    local log_dir link
    for log_dir in $log_dirs; do
      for link in /var/log/containers/*.log; do
        case "$(readlink "$link" 2>/dev/null)" in "$log_dir"/*) rm -f "$link" ;; esac
      done
      rm -rf "$log_dir"
    done
  fi
  if [ -f "$dir/pids" ]; then
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
  fi
  # What outlived containerd (shims are daemons of their own; a run that was killed did not
  # remove its pods): each shim and container init names its pid in containerd's state folder.
  local file
  for file in $(find "$dir/containerd/state" -name 'shim.pid' -o -name 'init.pid' 2>/dev/null); do
    kill -KILL "$(cat "$file")" 2>/dev/null || true
  done
  umount_under "$dir"
  if iptables -t nat -S PSFLOW-NODE >/dev/null 2>&1; then
    iptables -t nat -D PREROUTING -j PSFLOW-NODE 2>/dev/null || true
    iptables -t nat -F PSFLOW-NODE
    iptables -t nat -X PSFLOW-NODE
  fi
}

case "$cmd" in
  stop)
    stop_all
    echo "node in $dir stopped"
    exit 0
    ;;
  load-images)
    if [ -f "$dir/skip" ]; then
      echo "images not loaded: $(cat "$dir/skip")"
      exit 0
    fi
    [ -S "$(sock)" ] || { echo "node.sh: no node running in $dir" >&2; exit 1; }
    exec "$root/scripts/images.sh" --prebuilt --load "$(sock)"
    ;;
  start) [ $# -eq 3 ] || usage ;;
  *) usage ;;
esac
plane="$3"

stop_all  # a node an earlier run left in DIR
rm -rf --one-file-system "$dir"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

[ -d "$plane" ] || skip "no control plane in $plane (the kube_control_plane fixture)"
plane="$(cd "$plane" && pwd)"
[ ! -f "$plane/skip" ] || skip "no control plane: $(cat "$plane/skip")"
[ -f "$plane/server" ] || skip "no control plane in $plane (the kube_control_plane fixture)"
[ "$(id -u)" -eq 0 ] || skip "the node needs root (containers, network namespaces, mounts): run the tests as root"
for tool in containerd containerd-shim-runc-v2 runc ctr /usr/lib/cni/bridge /usr/lib/cni/host-local \
  /usr/lib/cni/loopback catatonit dnsmasq iptables conntrack findmnt python3 openssl curl; do
  command -v "$tool" >/dev/null || skip "no $tool: scripts/setup.sh installs the node's Debian packages"
done

assets="${PSFLOW_KUBE_ASSETS:-$root/../shared/kube}"
how="set PSFLOW_KUBE_ASSETS to a folder with kubelet and kube-scheduler v1.26 and crictl (plain or .xz)"
bin_cache="$(dirname "$dir")/kube-bin"
mkdir -p "$bin_cache"
kubelet="$(kube_asset kubelet)" || skip "no kubelet in $assets: $how"
scheduler="$(kube_asset kube-scheduler)" || skip "no kube-scheduler in $assets: $how"
crictl="$(kube_asset crictl)" || skip "no crictl in $assets: $how"
[ "$crictl" = "$bin_cache/crictl" ] || ln -sf "$crictl" "$bin_cache/crictl"  # for stop_all

trap 'fail "interrupted"' INT TERM

# run NAME COMMAND...: in a session of its own, output in DIR/NAME.log, pid in DIR/pids.
run() {
  local name="$1"
  shift
  setsid "$@" </dev/null >"$dir/$name.log" 2>&1 &
  echo $! >> "$dir/pids"
}

server="$(cat "$plane/server")"
kubectl="$(command -v kubectl || true)"
[ -x "$root/build/tools/bin/kubectl" ] && kubectl="$root/build/tools/bin/kubectl"
[ -n "${PSFLOW_KUBECTL:-}" ] && kubectl="$PSFLOW_KUBECTL"
[ -n "$kubectl" ] || fail "no kubectl (scripts/setup.sh installs it into build/tools/bin)"
kctl() { "$kubectl" --kubeconfig "$plane/kubeconfig" "$@"; }

# --- Certificates from the control plane's CA: the kubelet's (the Node authorizer's subject)
# and the scheduler's.
pki="$dir/pki"
mkdir -p "$pki"
cert() {
  ssl req -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2"
  ssl x509 -req -in "$pki/$1.csr" -CA "$plane/pki/ca.crt" -CAkey "$plane/pki/ca.key" \
    -CAcreateserial -CAserial "$pki/ca.srl" -out "$pki/$1.crt" -days 2
}
cert kubelet "/O=system:nodes/CN=system:node:$node_name"
cert scheduler "/CN=system:kube-scheduler"
kubeconfig() {
  cat > "$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: psflow-test
  cluster: {server: $server, certificate-authority: $plane/pki/ca.crt}
users:
- name: $1
  user: {client-certificate: $pki/$1.crt, client-key: $pki/$1.key}
contexts:
- name: psflow-test
  context: {cluster: psflow-test, user: $1}
current-context: psflow-test
EOF
}
kubeconfig kubelet
kubeconfig scheduler

# --- The pod network: the bridge with its gateway address exists before any pod, so dnsmasq can
# listen there and the kubelet can take it as the node's address (it refuses loopback).
if ! ip link show "$bridge" >/dev/null 2>&1; then
  ip link add name "$bridge" type bridge || fail "could not create bridge $bridge"
fi
ip addr replace "$gateway/16" dev "$bridge" || fail "could not address bridge $bridge"
ip link set "$bridge" up
# What kube-proxy would do for the `kubernetes` Service alone: its ClusterIP:443 from the pod
# network to the API server, which listens on loopback only.
api_host_port="${server#https://}"
cluster_ip="$(kctl get service kubernetes -n default -o jsonpath='{.spec.clusterIP}')" ||
  fail "could not read the kubernetes Service"
sysctl -qw "net.ipv4.conf.$bridge.route_localnet=1" || fail "could not set route_localnet on $bridge"
iptables -t nat -N PSFLOW-NODE && iptables -t nat -A PREROUTING -j PSFLOW-NODE &&
  iptables -t nat -A PSFLOW-NODE -i "$bridge" -d "$cluster_ip/32" -p tcp --dport 443 \
    -j DNAT --to-destination "$api_host_port" || fail "could not route $cluster_ip:443 to $api_host_port"
mkdir -p "$dir/cni" "$dir/cni-ipam"
cat > "$dir/cni/10-psflow.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "psflow-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "hairpinMode": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni-ipam",
        "ranges": [[{"subnet": "$subnet", "gateway": "$gateway"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF

# --- containerd.
mkdir -p "$dir/containerd"
cat > "$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$(sock)"
[ttrpc]
  address = "$dir/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
    max_conf_num = 1
EOF
run containerd containerd --config "$dir/containerd/config.toml"
containerd_ready() { ctr --address "$(sock)" version; }
wait_for containerd 30 containerd_ready

# --- The pause image: catatonit as /pause in a docker-archive tar, imported.
python3 - "$(command -v catatonit)" "$pause_image" "$dir/pause.tar" <<'PY' || fail "could not make the pause image"
import hashlib, io, json, sys, tarfile
binary, tag, out = sys.argv[1:]
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w") as t:
    info = t.gettarinfo(binary, arcname="pause")
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755
    with open(binary, "rb") as f:
        t.addfile(info, f)
layer = layer.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
config = json.dumps({
    "architecture": "amd64", "os": "linux",
    "config": {"Entrypoint": ["/pause", "-P"], "User": "65535:65535"},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]},
}).encode()
config_name = hashlib.sha256(config).hexdigest() + ".json"
with tarfile.open(out, mode="w") as t:
    for name, data in ((config_name, config), ("layer.tar", layer),
                       ("manifest.json", json.dumps([{"Config": config_name,
                                                      "RepoTags": [tag],
                                                      "Layers": ["layer.tar"]}]).encode())):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
PY
ctr --address "$(sock)" -n k8s.io images import "$dir/pause.tar" >>"$dir/ctr.log" 2>&1 ||
  fail "ctr could not import the pause image: $(tail -n 3 "$dir/ctr.log")"

# --- Cluster DNS.
mkdir -p "$dir/dns/hosts"
run cluster-dns python3 "$root/tests/node/cluster_dns.py" --server "$server" \
  --ca "$plane/pki/ca.crt" --cert "$plane/pki/admin.crt" --key "$plane/pki/admin.key" \
  --node "$node_name" --hosts-dir "$dir/dns/hosts"
run dnsmasq dnsmasq --keep-in-foreground --user=root --pid-file= --conf-file=/dev/null \
  --bind-interfaces --listen-address="$gateway" --except-interface=lo --port=53 \
  --no-resolv --no-hosts --no-poll --hostsdir="$dir/dns/hosts" --local=/cluster.local/ \
  --local-ttl=1 --neg-ttl=1 --log-facility=-
echo "nameserver $gateway" > "$dir/resolv.conf"

# --- kubelet.
kubelet_port="$(free_port)"
healthz_port="$(free_port)"
mkdir -p "$dir/kubelet"
cat > "$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
clusterDNS: [$gateway]
clusterDomain: cluster.local
resolvConf: $dir/resolv.conf
evictionHard: {nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%", memory.available: "10Mi"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
# The node an earlier kubelet registered would look Ready until its status went stale.
kctl delete node "$node_name" --ignore-not-found --wait=true >>"$dir/kubectl.log" 2>&1 ||
  fail "could not delete the old node $node_name"
run kubelet "$kubelet" --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
  --container-runtime-endpoint "unix://$(sock)" --node-ip "$gateway" \
  --hostname-override "$node_name" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
  --pod-infra-container-image "$pause_image" --v=1
node_ready() {
  [ "$(kctl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "the kubelet's node $node_name" 90 node_ready
# A kubelet registers its node tainted not-ready, and the node lifecycle controller lifts the taint
# once the node is Ready; the test control plane runs none (it would evict psflow-test-node's pods).
kctl taint node "$node_name" node.kubernetes.io/not-ready:NoSchedule- >>"$dir/kubectl.log" 2>&1 || true
untainted() { [ -z "$(kctl get node "$node_name" -o jsonpath='{.spec.taints}')" ]; }
wait_for "the untainted node $node_name" 30 untainted

# --- kube-scheduler: one profile, psflow-node, pinned to this node; pods' scheduling gates
# honoured (PodSchedulingReadiness, as on the API server).
scheduler_port="$(free_port)"
cat > "$dir/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $dir/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: psflow-node
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchFields: [{key: metadata.name, operator: In, values: [$node_name]}]
EOF
run kube-scheduler "$scheduler" --config "$dir/scheduler.yaml" \
  --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
  --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$scheduler_port" \
  --feature-gates=PodSchedulingReadiness=true
scheduler_healthy() { [ "$(curl -sk "https://127.0.0.1:$scheduler_port/healthz")" = ok ]; }
wait_for kube-scheduler 60 scheduler_healthy

echo "$node_name" > "$dir/node"
echo "node $node_name ready (containerd $(sock), logs in $dir)"
