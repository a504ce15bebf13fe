#!/usr/bin/env bash
# deploy/examples/gpu/: one GPU variant per example, identical to it but for the name (-gpu),
# the worker's CUDA image (-cuda), --device=gpu and an nvidia.com/gpu limit of 1.
# (The NetworkPolicy of a job is the operator's: spec.networkPolicy, tests/operator_e2e_test.cc.)
# kubectl parses every file, and the real API server validates it (tests/crd_apiserver_test.cc
# applies the examples too; tests/examples_test.cc runs the CPU examples' worker command lines).
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
EXAMPLES="$ROOT/deploy/examples"
start_fake_api

check "every example and GPU variant parses (kubectl apply --dry-run=client)"
for f in "$EXAMPLES"/*.yaml "$EXAMPLES"/gpu/*.yaml; do
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

pass
