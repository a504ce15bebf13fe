#!/usr/bin/env bash
# deploy/examples/gpu/: one GPU variant per example, identical to it but for the name (-gpu),
# the worker's CUDA image (-cuda), --device=gpu and an nvidia.com/gpu limit of 1.
# deploy/examples/policy/networkpolicy.yaml: admits to a job's psflow-port only that job's pods.
# kubectl parses every file, and the real API server validates it (tests/crd_apiserver_test.cc
# applies the examples too; tests/examples_test.cc runs the CPU examples' worker command lines).
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
EXAMPLES="$ROOT/deploy/examples"
start_fake_api

check "every example, GPU variant and policy parses (kubectl apply --dry-run=client)"
for f in "$EXAMPLES"/*.yaml "$EXAMPLES"/gpu/*.yaml "$EXAMPLES"/policy/*.yaml; do
  parsed="$TMP/$(basename "$(dirname "$f")")-$(basename "$f" .yaml).json"
  kube_apply_dry_run "${f#"$ROOT"/}" <"$f" >"$parsed"
done

check "each GPU variant is its CPU example plus GPU settings, and nothing else"
python3 - "$TMP" "$EXAMPLES" >"$TMP/problems" <<'PY' ||
import copy, glob, json, os, sys

tmp, examples = sys.argv[1], sys.argv[2]
problems = []
cpu = sorted(os.path.basename(p)[:-5] for p in glob.glob(examples + "/*.yaml"))
gpu = sorted(os.path.basename(p)[:-5] for p in glob.glob(examples + "/gpu/*.yaml"))
if cpu != gpu:
    problems.append("deploy/examples/gpu/ holds %s, deploy/examples/ %s" % (gpu, cpu))
for name in sorted(set(cpu) & set(gpu)):
    want = json.load(open("%s/examples-%s.json" % (tmp, name)))
    got = json.load(open("%s/gpu-%s.json" % (tmp, name)))
    want["metadata"]["name"] += "-gpu"
    [c] = [c for c in want["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
           if c["name"] == "psflow"]
    c["image"] += "-cuda"
    c["args"].append("--device=gpu")
    c.setdefault("resources", {}).setdefault("limits", {})["nvidia.com/gpu"] = 1
    for o in (want, got):  # kubectl's bookkeeping annotation holds the whole file
        o["metadata"].get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if got != want:
        problems.append("gpu/%s.yaml is not %s.yaml plus the GPU settings:\n    got  %s\n    want %s"
                        % (name, name, json.dumps(got, sort_keys=True), json.dumps(want, sort_keys=True)))
print("\n".join("  " + p for p in problems))
sys.exit(1 if problems else 0)
PY
  fail "GPU variants:
$(cat "$TMP/problems")"

check "--device=gpu is a flag of psflow-worker (worker/main.cc)"
grep -q 'ABSL_FLAG([^,]*, device,' "$ROOT/worker/main.cc" ||
  fail "worker/main.cc defines no --device flag, which the GPU variants pass"

check "the NetworkPolicy admits to mnist-mlp's psflow-port only mnist-mlp's pods"
python3 - "$TMP/policy-networkpolicy.json" "$TMP/examples-mnist-mlp.json" \
  "$ROOT/operator/controller/replica_objects.h" >"$TMP/problems" <<'PY' ||
import json, re, sys

policy = json.load(open(sys.argv[1]))
job = json.load(open(sys.argv[2]))
label = re.search(r'kJobNameLabel\[\] = "([^"]+)"', open(sys.argv[3]).read()).group(1)
metrics = re.search(r'kMetricsPortName\[\] = "([^"]+)"', open(sys.argv[3]).read()).group(1)
ps_ports = {p["name"] for c in job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])}
own = {"matchLabels": {label: job["metadata"]["name"]}}
problems = []
spec = policy["spec"]
if spec["podSelector"] != own:
    problems.append("podSelector %s, expected %s" % (spec["podSelector"], own))
if spec.get("policyTypes") != ["Ingress"]:
    problems.append("policyTypes %s" % spec.get("policyTypes"))
for rule in spec["ingress"]:
    ports = [p["port"] for p in rule["ports"]]
    if "psflow-port" in ports:
        if "psflow-port" not in ps_ports:
            problems.append("the ps pods of %s have no port psflow-port" % job["metadata"]["name"])
        if rule["from"] != [{"podSelector": own}]:
            problems.append("psflow-port is open to %s, not only the job's pods" % rule["from"])
    elif ports != [metrics]:
        problems.append("a rule opens %s (only psflow-port and %s are expected)" % (ports, metrics))
if not any("psflow-port" in [p["port"] for p in r["ports"]] for r in spec["ingress"]):
    problems.append("no rule admits the job's own pods to psflow-port")
print("\n".join("  " + p for p in problems))
sys.exit(1 if problems else 0)
PY
  fail "deploy/examples/policy/networkpolicy.yaml:
$(cat "$TMP/problems")"
pass
