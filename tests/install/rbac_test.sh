#!/usr/bin/env bash
# The chart's RBAC grants psflow-operator exactly the API calls its code makes (check_rbac.py
# keeps the expected rules, each with the code that needs it), cluster-wide by default and in
# one namespace with operator.watchNamespace.
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
start_fake_api
check "rendered ClusterRole / Role / leader-election Role == expected rules == the operator's API calls"
render | kube_apply_dry_run "the default rendering" >"$TMP/cluster.json"
render --set operator.watchNamespace=team-a |
  kube_apply_dry_run "the namespaced rendering" >"$TMP/namespaced.json"
python3 "$HERE/check_rbac.py" "$TMP/cluster.json" "$TMP/namespaced.json" >"$TMP/problems" ||
  fail "RBAC is not least privilege:
$(cat "$TMP/problems")"
pass
