#!/usr/bin/env bash
# Every leaf of helm/psflow/values.yaml (a scalar, a list, or an empty map) has a row in the
# Values table of helm/psflow/README.md with its default as JSON and a description, and the table
# has no row for a key values.yaml lacks.
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"

check "values.yaml leaves == the README's Values table (keys, defaults, descriptions)"
yaml_to_json "$CHART/values.yaml" >"$TMP/values.json"
python3 - "$TMP/values.json" "$CHART/README.md" >"$TMP/problems" <<'PY' ||
import json, re, sys

values = json.load(open(sys.argv[1]))
def leaves(d, prefix=""):
    for key, value in d.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, prefix + key + ".")
        else:
            yield prefix + key, value
want = dict(leaves(values))

rows = {}
section = None
for line in open(sys.argv[2]):
    if line.startswith("## "):
        section = line.strip()
    m = re.match(r"\|\s*`([^`]+)`\s*\|\s*`(.*)`\s*\|(.*)\|\s*$", line)
    if section == "## Values" and m:
        rows[m.group(1)] = (m.group(2), m.group(3).strip())

problems = []
for key in sorted(set(want) - set(rows)):
    problems.append("%s is not in the README's Values table" % key)
for key in sorted(set(rows) - set(want)):
    problems.append("the README documents %s, which values.yaml lacks" % key)
for key in sorted(set(want) & set(rows)):
    default, description = rows[key]
    try:
        documented = json.loads(default)
    except ValueError:
        documented = default
    if documented != want[key]:
        problems.append("%s: the README's default `%s`, values.yaml's %s"
                        % (key, default, json.dumps(want[key])))
    if not description:
        problems.append("%s has no description" % key)
print("\n".join("  " + p for p in problems))
sys.exit(1 if problems else 0)
PY
  fail "helm/psflow/README.md and values.yaml disagree:
$(cat "$TMP/problems")"
pass
