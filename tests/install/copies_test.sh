#!/usr/bin/env bash
# The chart ships copies of files whose source of truth is elsewhere in the tree (Helm cannot
# read outside the chart): each copy must be byte-identical to its source, and no source may lack
# its copy. To refresh: cp deploy/crd/trainingjobs.psflow.io.yaml helm/psflow/crds/;
# cp deploy/grafana/*.json helm/psflow/dashboards/; cp deploy/prometheus/psflow-alerts.yml
# helm/psflow/rules/ (every deploy/prometheus/*.yml with a top-level `groups:` is a rule file).
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"

same() {  # same SOURCE COPY
  [ -f "$2" ] || fail "${2#"$ROOT"/} is missing: copy ${1#"$ROOT"/} there"
  cmp -s "$1" "$2" || fail "${2#"$ROOT"/} differs from ${1#"$ROOT"/}: copy it again"
}

# pairs SOURCE_DIR COPY_DIR GLOB [FILTER]: every source has its copy, every copy its source.
pairs() {
  local src_dir="$1" copy_dir="$2" glob="$3" filter="${4:-}" f
  for f in "$src_dir"/$glob; do
    [ -f "$f" ] || continue
    if [ -n "$filter" ] && ! grep -q "$filter" "$f"; then continue; fi
    same "$f" "$copy_dir/$(basename "$f")"
  done
  for f in "$copy_dir"/$glob; do
    [ -f "$f" ] || continue
    [ -f "$src_dir/$(basename "$f")" ] ||
      fail "${f#"$ROOT"/} has no source in ${src_dir#"$ROOT"/}: remove it or restore the source"
    same "$src_dir/$(basename "$f")" "$f"
  done
}

check "helm/psflow/crds/ holds exactly deploy/crd/trainingjobs.psflow.io.yaml"
same "$ROOT/deploy/crd/trainingjobs.psflow.io.yaml" "$CHART/crds/trainingjobs.psflow.io.yaml"
[ "$(ls "$CHART/crds")" = "trainingjobs.psflow.io.yaml" ] ||
  fail "helm/psflow/crds/ holds more than the CRD: $(ls "$CHART/crds")"

check "helm/psflow/dashboards/*.json == deploy/grafana/*.json"
pairs "$ROOT/deploy/grafana" "$CHART/dashboards" "*.json"
ls "$CHART"/dashboards/*.json >/dev/null 2>&1 || fail "helm/psflow/dashboards/ holds no dashboard"

check "helm/psflow/rules/*.yml == the rule files of deploy/prometheus/"
pairs "$ROOT/deploy/prometheus" "$CHART/rules" "*.yml" "^groups:"
ls "$CHART"/rules/*.yml >/dev/null 2>&1 || fail "helm/psflow/rules/ holds no rule file"
pass
