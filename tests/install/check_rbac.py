#!/usr/bin/env python3
"""The operator's RBAC is exactly what its code does to the API: no more, no less.

Usage: check_rbac.py CLUSTER_JSON NAMESPACED_JSON (kubectl's parse of helm/psflow rendered with
default values, and with operator.watchNamespace=team-a). Three sets must be equal:
  EXPECTED (below, each rule with the code that needs it),
  the calls the operator's sources make (KubeClient calls on kube::<Resource>(), informers),
  the rules the chart renders (ClusterRole, or Role in the watched namespace; the leader Role).
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))

# (apiGroup, resource, verb, resourceName or ""), grouped by the Role that grants them.
EXPECTED = {
    "jobs": {
        # controller.cc: the TrainingJob informer lists and watches; main.cc Preflight lists.
        ("psflow.io", "trainingjobs", "list", ""),
        ("psflow.io", "trainingjobs", "watch", ""),
        # reconciler.cc: ttlSecondsAfterFinished deletes the finished job; a status write that
        # conflicts reads the current job to write over it once.
        ("psflow.io", "trainingjobs", "delete", ""),
        ("psflow.io", "trainingjobs", "get", ""),
        # reconciler.cc: schedulingTimeoutSeconds past for a job whose suspend is in use sets
        # spec.runPolicy.suspend.
        ("psflow.io", "trainingjobs", "update", ""),
        # reconciler.cc: UpdateStatus writes status through the status subresource.
        ("psflow.io", "trainingjobs/status", "update", ""),
        # replica_objects.cc: the ownerReference of pods and Services sets blockOwnerDeletion,
        # which the OwnerReferencesPermissionEnforcement admission plugin grants only to whoever
        # may update the owner's finalizers.
        ("psflow.io", "trainingjobs/finalizers", "update", ""),
        # controller.cc: pod and Service informers; main.cc Preflight lists them.
        ("", "pods", "list", ""), ("", "pods", "watch", ""),
        ("", "services", "list", ""), ("", "services", "watch", ""),
        # reconciler.cc: one pod per replica, created, read when its name is taken, and deleted;
        # the job's one Service, created, read when its name is taken, and deleted.
        ("", "pods", "create", ""), ("", "pods", "get", ""), ("", "pods", "delete", ""),
        ("", "services", "create", ""), ("", "services", "get", ""),
        ("", "services", "delete", ""),
        # job_certificates.cc: the job's Secrets (its CA and every replica's certificate),
        # created, read back to sign replicas created later, and updated on a scale-up.
        ("", "secrets", "create", ""), ("", "secrets", "get", ""), ("", "secrets", "update", ""),
        # job_model.cc: the ConfigMap of spec.modelFile, created, read back when it exists and
        # updated when the spec's model was edited.
        ("", "configmaps", "create", ""), ("", "configmaps", "get", ""),
        ("", "configmaps", "update", ""),
        # event_recorder.cc: Events on the TrainingJob, created, and updated when one repeats
        # (its count).
        ("", "events", "create", ""), ("", "events", "update", ""),
        # reconciler.cc: the NetworkPolicy of a job with spec.networkPolicy.enabled, created
        # before its pods, read when it exists and updated to an edited spec (deleted with the
        # job by the garbage collector: no delete, no watch).
        ("networking.k8s.io", "networkpolicies", "create", ""),
        ("networking.k8s.io", "networkpolicies", "get", ""),
        ("networking.k8s.io", "networkpolicies", "update", ""),
        # reconciler.cc: a gang's PodGroup, created before its pods; when it is there already,
        # read and, after a scale, its replica counts updated.
        ("scheduling.volcano.sh", "podgroups", "create", ""),
        ("scheduling.x-k8s.io", "podgroups", "create", ""),
        ("scheduling.volcano.sh", "podgroups", "get", ""),
        ("scheduling.x-k8s.io", "podgroups", "get", ""),
        ("scheduling.volcano.sh", "podgroups", "update", ""),
        ("scheduling.x-k8s.io", "podgroups", "update", ""),
    },
    "lease": {
        # leader_election.cc: creates the Lease when missing (RBAC cannot name what is created),
        ("coordination.k8s.io", "leases", "create", ""),
        # then reads and renews (and releases) only the Lease named --lease_name.
        ("coordination.k8s.io", "leases", "get", "psflow-operator"),
        ("coordination.k8s.io", "leases", "update", "psflow-operator"),
    },
}

RESOURCES = {"TrainingJobs": ("psflow.io", "trainingjobs"), "Pods": ("", "pods"),
             "Services": ("", "services"), "Secrets": ("", "secrets"),
             "ConfigMaps": ("", "configmaps"), "Events": ("", "events"),
             "Leases": ("coordination.k8s.io", "leases"),
             "NetworkPolicies": ("networking.k8s.io", "networkpolicies"),
             "VolcanoPodGroups": ("scheduling.volcano.sh", "podgroups"),
             "CoschedulingPodGroups": ("scheduling.x-k8s.io", "podgroups")}
VERBS = {"Get": "get", "List": "list", "Watch": "watch", "Create": "create", "Update": "update",
         "UpdateStatus": "update", "Delete": "delete"}

problems = []


def code_rules():
    """(group, resource, verb) for every API call in the operator's non-test sources."""
    rules = set()
    for path in glob.glob(os.path.join(ROOT, "operator", "**", "*.cc"), recursive=True):
        rel = os.path.relpath(path, ROOT)
        if rel.endswith("_test.cc") or rel.startswith("operator/local/"):
            continue
        with open(path) as f:
            text = f.read()
        if rel == "operator/controller/cluster_view.cc":
            # DirectView reads the API directly; only tests use it (the controller reads its
            # informer caches). Make sure that is still so.
            users = [p for p in glob.glob(os.path.join(ROOT, "operator", "**", "*.*"),
                                          recursive=True)
                     if "DirectView" in open(p).read() and not p.endswith("_test.cc")
                     and "cluster_view." not in p]
            if users:
                problems.append("DirectView is used by %s: its calls need RBAC" % users)
            continue
        for verb, resource in re.findall(
                r"\.(Get|List|Watch|Create|Update|UpdateStatus|Delete)\(\s*(?:psflow::)?kube::(\w+)\(\)",
                text):
            group, plural = RESOURCES[resource]
            rules.add((group, plural + ("/status" if verb == "UpdateStatus" else ""),
                       VERBS[verb]))
        for resource in re.findall(r"Informer>\(\s*\w+,\s*kube::(\w+)\(\)", text):
            group, plural = RESOURCES[resource]
            rules.update({(group, plural, "list"), (group, plural, "watch")})
        if '{"blockOwnerDeletion", true}' in text:
            rules.add(("psflow.io", "trainingjobs/finalizers", "update"))
    return rules


def rendered_rules(obj):
    out = set()
    for rule in obj.get("rules", []):
        if rule.get("nonResourceURLs"):
            problems.append("%s grants nonResourceURLs" % obj["metadata"]["name"])
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    for name in rule.get("resourceNames") or [""]:
                        out.add((group, resource, verb, name))
    return out


def objects(path):
    with open(path) as f:
        parsed = json.load(f)
    items = parsed["items"] if parsed.get("kind") == "List" else [parsed]
    return {"%s/%s" % (o["kind"], o["metadata"]["name"]): o for o in items}


def compare(what, got, want):
    if got != want:
        problems.append("%s: extra %s, missing %s" % (what, sorted(got - want), sorted(want - got)))


def main():
    expected_all = EXPECTED["jobs"] | EXPECTED["lease"]
    compare("the operator's code (operator/**/*.cc) vs tests/install/check_rbac.py EXPECTED",
            code_rules(), {r[:3] for r in expected_all})
    cluster = objects(sys.argv[1])
    namespaced = objects(sys.argv[2])
    compare("ClusterRole psflow-operator", rendered_rules(cluster["ClusterRole/psflow-operator"]),
            EXPECTED["jobs"])
    compare("Role psflow-operator (watchNamespace team-a)",
            rendered_rules(namespaced["Role/psflow-operator"]), EXPECTED["jobs"])
    if namespaced["Role/psflow-operator"]["metadata"].get("namespace") != "team-a":
        problems.append("the Role of a watched namespace is not in that namespace")
    if any(k.startswith("Cluster") for k in namespaced):
        problems.append("watching one namespace still creates %s"
                        % [k for k in namespaced if k.startswith("Cluster")])
    for objs in (cluster, namespaced):
        lease_role = objs["Role/psflow-operator-leader-election"]
        compare("Role psflow-operator-leader-election", rendered_rules(lease_role),
                EXPECTED["lease"])
        if lease_role["metadata"].get("namespace") != "psflow-system":
            problems.append("the leader-election Role is not in the release namespace")
    for p in problems:
        print("  " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
