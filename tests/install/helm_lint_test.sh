#!/usr/bin/env bash
# `helm lint --strict` passes on helm/psflow with its defaults, every feature on, and one
# watched namespace (lint warnings are errors under --strict).
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
for args in "" "-f $HERE/all-features.yaml" "--set operator.watchNamespace=team-a"; do
  check "helm lint --strict helm/psflow $args"
  # shellcheck disable=SC2086
  helm_ lint --strict --namespace psflow-system "$CHART" $args >"$TMP/lint.out" 2>&1 ||
    fail "helm lint --strict $args:
$(cat "$TMP/lint.out")"
done
pass
