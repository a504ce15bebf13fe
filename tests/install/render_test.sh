#!/usr/bin/env bash
# helm/psflow renders, and kubectl parses what it renders, with the default values and with every
# optional feature on (tests/install/all-features.yaml), watching one namespace, without leader
# election, and without RBAC or ServiceAccount; check_render.py then holds each rendering to the
# objects and fields it must have.
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
start_fake_api

declare -A configs=(
  [defaults]=""
  [all-features]="-f $HERE/all-features.yaml"
  [namespaced]="--set operator.watchNamespace=team-a"
  [no-leader-election]="--set operator.leaderElection.enabled=false"
  [no-rbac-no-sa]="--set rbac.create=false --set serviceAccount.create=false --set serviceAccount.name=existing"
)
for config in defaults all-features namespaced no-leader-election no-rbac-no-sa; do
  check "helm template ($config) | kubectl apply --dry-run=client; the objects and their fields"
  # shellcheck disable=SC2086
  render ${configs[$config]} >"$TMP/$config.yaml" 2>"$TMP/helm.err" ||
    fail "helm template ($config) failed: $(cat "$TMP/helm.err")"
  kube_apply_dry_run "the $config rendering" <"$TMP/$config.yaml" >"$TMP/$config.json"
  python3 "$HERE/check_render.py" "$config" <"$TMP/$config.json" >"$TMP/problems" ||
    fail "the $config rendering:
$(cat "$TMP/problems")"
done

check "the PrometheusRule holds exactly the rule groups of helm/psflow/rules/*.yml"
for rules in "$CHART"/rules/*.yml; do yaml_to_json "$rules"; done >"$TMP/rule-files.json"
python3 - "$TMP/rule-files.json" "$TMP/all-features.json" <<'PY' || fail "the PrometheusRule differs from helm/psflow/rules/"
import json, sys
want = [g for line in open(sys.argv[1]) for g in json.loads(line)["groups"]]
items = json.load(open(sys.argv[2]))["items"]
[rule] = [o for o in items if o["kind"] == "PrometheusRule"]
sys.exit(0 if rule["spec"]["groups"] == want else 1)
PY

check "the CRD comes with the chart (helm template --include-crds) and kubectl parses it"
# Into a file first: `grep -q` stops reading at its match, and the writer's SIGPIPE would fail
# the pipeline (pipefail) whenever the rendering outgrows the pipe's buffer.
render --include-crds | kube_apply_dry_run "the rendering with the CRD" >"$TMP/with-crds.json"
grep -q '"name": "trainingjobs.psflow.io"' "$TMP/with-crds.json" ||
  fail "helm template --include-crds has no CRD"

check "operator.replicas=2 without leader election is refused"
if render --set operator.replicas=2 --set operator.leaderElection.enabled=false >/dev/null 2>"$TMP/err"; then
  fail "two operator replicas without leader election rendered"
fi
grep -q "needs operator.leaderElection.enabled" "$TMP/err" || fail "unclear message: $(cat "$TMP/err")"
pass
