#!/usr/bin/env bash
# helm/psflow/values.schema.json refuses bad values before anything renders (wrong types,
# out-of-range numbers, unknown keys, values outside an enum), and accepts good ones.
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"

rejects() {  # rejects EXPECTED_MESSAGE_PART HELM_ARGS...
  local want="$1"
  shift
  if render "$@" >/dev/null 2>"$TMP/err"; then
    fail "helm template $* rendered; the schema should reject it"
  fi
  grep -qF -- "$want" "$TMP/err" ||
    fail "helm template $* failed without naming '$want': $(cat "$TMP/err")"
}
accepts() {
  render "$@" >/dev/null 2>"$TMP/err" || fail "helm template $* failed: $(cat "$TMP/err")"
}

check "bad values are rejected, naming the value"
rejects "operator.replicas" --set operator.replicas=-1
rejects "operator.replicas" --set operator.replicas=0
rejects "operator.replicas" --set operator.replicas=two
rejects "operator.workers" --set operator.workers=0
rejects "operator.qps" --set operator.qps=0
rejects "operator.qps" --set operator.qps=fast
rejects "operator.leaderElection.retryPeriodSeconds" --set operator.leaderElection.retryPeriodSeconds=-1
rejects "operator.metricsPort" --set operator.metricsPort=70000
rejects "operator.logFormat" --set operator.logFormat=xml
rejects "operator.watchNamespace" --set operator.watchNamespace=Not_A_Namespace
rejects "operator.leaderElection.enabled" --set-string operator.leaderElection.enabled=yes
rejects "image.pullPolicy" --set image.pullPolicy=Sometimes
rejects "metrics.service.type" --set metrics.service.type=ExternalName
rejects "metrics.podMonitor.interval" --set metrics.podMonitor.interval=fast
rejects "Additional property replica is not allowed" --set operator.replica=2
rejects "Additional property bogus is not allowed" --set bogus=1
rejects "operator.extraArgs.0" --set "operator.extraArgs[0]=no-dashes"
rejects "renewDeadlineSeconds must be less than leaseDurationSeconds" \
  --set operator.leaderElection.renewDeadlineSeconds=20
# What the operator itself refuses at start (a pod that would crash-loop).
rejects "retryPeriodSeconds must be less than renewDeadlineSeconds" \
  --set operator.leaderElection.retryPeriodSeconds=10
rejects "leaseDurationSeconds must be at least 1" --set operator.leaderElection.leaseDurationSeconds=0.5 \
  --set operator.leaderElection.renewDeadlineSeconds=0.4 --set operator.leaderElection.retryPeriodSeconds=0.2
rejects "retryPeriodSeconds must be at least 0.001" \
  --set operator.leaderElection.retryPeriodSeconds=0.0005
# Compared in whole milliseconds, as the operator reads them: 2.0005 s is 2000 ms.
rejects "retryPeriodSeconds must be less than renewDeadlineSeconds" \
  --set operator.leaderElection.renewDeadlineSeconds=2.0005
rejects "operator.burst" --set operator.burst=3000000000
# A Service's name is a DNS-1035 label: no dots, and room for the "-operator-metrics" suffix.
rejects "fullnameOverride" --set fullnameOverride=psflow.prod
rejects "nameOverride" --set "nameOverride=$(printf 'n%.0s' $(seq 47))"

check "numbers of a million or more reach the operator's flags as integers, not 2e+06"
render --set operator.burst=2000000 --set operator.watchTimeoutSeconds=3000000 >"$TMP/big.yaml"
grep -qF -- "--burst=2000000" "$TMP/big.yaml" || fail "--burst not rendered as an integer: $(grep -F -- --burst "$TMP/big.yaml")"
grep -qF -- "--watch_timeout_s=3000000" "$TMP/big.yaml" || fail "--watch_timeout_s not rendered as an integer"

check "the longest names the schema allows keep their suffixes and fit their limits"
long="$(printf 'f%.0s' $(seq 46))"
render --set "fullnameOverride=$long" --set "nameOverride=$long" >"$TMP/long.yaml"
grep -qF "name: $long-operator-metrics" "$TMP/long.yaml" || fail "the Service lost its suffix"
grep -qF "name: $long-operator" "$TMP/long.yaml" || fail "the Deployment lost its suffix"
# Past the schema (helm --skip-schema-validation, a 63-character name): the templates' own cuts
# keep the operator's label value within 63 characters and the Service's suffix whole.
longer="$(printf 'n%.0s' $(seq 63))"
render --skip-schema-validation --set "nameOverride=$longer" --set "fullnameOverride=$longer" \
  >"$TMP/longer.yaml"
if grep -E '^\s*app\.kubernetes\.io/name: \S{64,}' "$TMP/longer.yaml"; then
  fail "a label value over 63 characters"
fi
grep -qE "name: n{46}-operator-metrics$" "$TMP/longer.yaml" || fail "the Service lost its suffix"

check "good values are accepted"
accepts --set operator.replicas=2 --set operator.qps=0.5 --set operator.logFormat=json
accepts --set operator.watchNamespace=team-a --set metrics.service.type=NodePort
accepts -f "$HERE/all-features.yaml"
pass
