#!/usr/bin/env python3
"""Checks one rendering of helm/psflow, as kubectl parsed it (a JSON List on stdin).

Usage: check_render.py CONFIG < objects.json, CONFIG one of the names in EXPECTED below. Exits 1
with one line per problem. What it holds the chart to:
  - exactly the expected objects (kind/name) for the configuration;
  - Kubernetes' recommended labels on every object;
  - the operator pod: restricted pod security, probes on the metrics port, flags the operator
    binary defines (operator/main.cc), leader election and POD_NAMESPACE;
  - the metrics Service, ServiceMonitor and PodMonitor select what they should; the PodMonitor
    uses the label and port name the operator puts on ps/worker pods (replica_objects.h);
  - one dashboard ConfigMap per helm/psflow/dashboards/*.json, labelled for Grafana's sidecar.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "helm", "psflow")

OPERATOR = ["ServiceAccount/psflow-operator", "Service/psflow-operator-metrics",
            "Deployment/psflow-operator"]
CLUSTER_RBAC = ["ClusterRole/psflow-operator", "ClusterRoleBinding/psflow-operator"]
NS_RBAC = ["Role/psflow-operator", "RoleBinding/psflow-operator"]
LEASE_RBAC = ["Role/psflow-operator-leader-election", "RoleBinding/psflow-operator-leader-election"]


def dashboards():
    return sorted(glob.glob(os.path.join(CHART, "dashboards", "*.json")))


def dashboard_objects():
    return ["ConfigMap/psflow-dashboard-%s" % os.path.basename(p)[:-5].removeprefix("psflow-")
            for p in dashboards()]


EXPECTED = {
    "defaults": OPERATOR + CLUSTER_RBAC + LEASE_RBAC,
    "namespaced": OPERATOR + NS_RBAC + LEASE_RBAC,
    "no-leader-election": OPERATOR + CLUSTER_RBAC,
    "no-rbac-no-sa": ["Service/psflow-operator-metrics", "Deployment/psflow-operator"],
    "all-features": OPERATOR + CLUSTER_RBAC + LEASE_RBAC
    + ["ServiceMonitor/psflow-operator", "PodMonitor/psflow-training", "PrometheusRule/psflow"]
    + dashboard_objects(),
}

problems = []


def expect(ok, message):
    if not ok:
        problems.append(message)


def source(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def operator_flags():
    return set(re.findall(r"ABSL_FLAG\([^,]+,\s*(\w+),", source("operator/main.cc")))


def replica_constant(name):
    m = re.search(r'%s\[\] = "([^"]+)"' % name, source("operator/controller/replica_objects.h"))
    return m.group(1)


def main():
    config = sys.argv[1]
    parsed = json.load(sys.stdin)
    items = parsed["items"] if parsed.get("kind") == "List" else [parsed]
    objects = {"%s/%s" % (o["kind"], o["metadata"]["name"]): o for o in items}
    expect(sorted(objects) == sorted(EXPECTED[config]),
           "objects %s, expected %s" % (sorted(objects), sorted(EXPECTED[config])))

    for key, o in objects.items():
        labels = o["metadata"].get("labels", {})
        for label in ["app.kubernetes.io/name", "app.kubernetes.io/instance",
                      "app.kubernetes.io/version", "app.kubernetes.io/part-of",
                      "app.kubernetes.io/managed-by", "app.kubernetes.io/component",
                      "helm.sh/chart"]:
            expect(label in labels, "%s lacks the label %s" % (key, label))

    deployment = objects.get("Deployment/psflow-operator")
    if deployment:
        check_deployment(config, deployment, objects)
    if "ServiceMonitor/psflow-operator" in objects:
        check_service_monitor(objects["ServiceMonitor/psflow-operator"],
                              objects["Service/psflow-operator-metrics"])
    if "PodMonitor/psflow-training" in objects:
        check_pod_monitor(objects["PodMonitor/psflow-training"])
    for path, key in zip(dashboards(), dashboard_objects()):
        if key in objects:
            check_dashboard(path, objects[key])
    if "PrometheusRule/psflow" in objects:
        groups = objects["PrometheusRule/psflow"]["spec"].get("groups", [])
        expect(groups and all(g.get("rules") for g in groups),
               "PrometheusRule: no rule groups, or an empty one")

    for p in problems:
        print("  %s: %s" % (config, p))
    sys.exit(1 if problems else 0)


def check_deployment(config, d, objects):
    pod = d["spec"]["template"]
    spec = pod["spec"]
    expect(d["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(),
           "the Deployment's selector does not select its own pods")
    psc = spec.get("securityContext", {})
    expect(psc.get("runAsNonRoot") is True, "pod securityContext.runAsNonRoot is not true")
    expect(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
           "pod securityContext.runAsUser is not a non-zero uid")
    expect(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
           "pod seccompProfile is not RuntimeDefault")
    [c] = spec["containers"]
    sc = c.get("securityContext", {})
    expect(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true")
    expect(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation is not false")
    expect(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities do not drop ALL")
    expect(c.get("resources", {}).get("requests"), "the operator container has no requests")

    flags = {}
    for arg in c.get("args", []):
        m = re.match(r"--(\w+)=(.*)$", arg)
        expect(m is not None, "argument %r is not --flag=value" % arg)
        if m:
            expect(m.group(1) in operator_flags(),
                   "--%s is not a flag of psflow-operator (operator/main.cc)" % m.group(1))
            flags[m.group(1)] = m.group(2)
    leader = config != "no-leader-election"
    expect(flags.get("leader_elect") == ("true" if leader else "false"),
           "--leader_elect=%s, expected %s" % (flags.get("leader_elect"), leader))
    # Without a Lease, an upgrade must not run the old and the new operator at once.
    strategy = d["spec"].get("strategy", {}).get("type", "RollingUpdate")
    expect(strategy == ("RollingUpdate" if leader else "Recreate"),
           "Deployment strategy %s with leader election %s" % (strategy, leader))
    expect(("namespace" in flags) == (config == "namespaced"),
           "--namespace given: %s" % flags.get("namespace"))
    env = {e["name"]: e for e in c.get("env", [])}
    expect(env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {})
           .get("fieldPath") == "metadata.namespace", "POD_NAMESPACE is not the pod's namespace")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    expect(str(ports.get("metrics")) == flags.get("metrics_port"),
           "container port metrics %s != --metrics_port %s"
           % (ports.get("metrics"), flags.get("metrics_port")))
    for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
        get = c.get(probe, {}).get("httpGet", {})
        expect(get.get("path") == path and get.get("port") == "metrics",
               "%s is not GET %s on port metrics: %s" % (probe, path, get))

    service = objects["Service/psflow-operator-metrics"]
    expect(service["spec"]["selector"].items() <= pod["metadata"]["labels"].items(),
           "the metrics Service does not select the operator pods")
    expect([p.get("targetPort") for p in service["spec"]["ports"]] == ["metrics"],
           "the metrics Service does not target the port named metrics")
    sa = spec.get("serviceAccountName")
    if "ServiceAccount/psflow-operator" in objects:
        expect(sa == "psflow-operator", "serviceAccountName %s" % sa)
    for key, o in objects.items():
        if key.endswith("Binding/psflow-operator") or "leader-election" in key and "Binding" in key:
            expect(o["subjects"] == [{"kind": "ServiceAccount", "name": sa,
                                      "namespace": d["metadata"]["namespace"]}],
                   "%s does not bind the operator's ServiceAccount" % key)


def check_service_monitor(monitor, service):
    selector = monitor["spec"]["selector"]["matchLabels"]
    expect(selector.items() <= service["metadata"]["labels"].items(),
           "the ServiceMonitor does not select the metrics Service")
    expect([e.get("port") for e in monitor["spec"]["endpoints"]] == ["metrics"],
           "the ServiceMonitor does not scrape the Service's port metrics")


def check_pod_monitor(monitor):
    expressions = monitor["spec"]["selector"].get("matchExpressions", [])
    expect(expressions == [{"key": replica_constant("kJobNameLabel"), "operator": "Exists"}],
           "the PodMonitor does not select pods by the operator's job label: %s" % expressions)
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    expect([e.get("port") for e in endpoints] == [replica_constant("kMetricsPortName")],
           "the PodMonitor does not scrape the port the operator names: %s" % endpoints)
    expect(all(e.get("honorLabels") for e in endpoints),
           "the PodMonitor would rename the series' job label (honorLabels)")


def check_dashboard(path, configmap):
    labels = configmap["metadata"]["labels"]
    expect(labels.get("grafana_dashboard") == "1", "%s lacks grafana_dashboard: \"1\"" % path)
    data = configmap.get("data", {})
    name = os.path.basename(path)
    with open(path) as f:
        expected = json.load(f)
    expect(list(data) == [name] and json.loads(data[name]) == expected,
           "the ConfigMap of %s does not hold that dashboard" % name)


if __name__ == "__main__":
    main()
