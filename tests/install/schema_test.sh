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

check "good values are accepted"
accepts --set operator.replicas=2 --set operator.qps=0.5 --set operator.logFormat=json
accepts --set operator.watchNamespace=team-a --set metrics.service.type=NodePort
accepts -f "$HERE/all-features.yaml"
pass
