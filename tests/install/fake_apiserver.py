#!/usr/bin/env python3
"""Discovery-only Kubernetes API server for `kubectl apply --dry-run=client` in tests/install.

kubectl maps each object's apiVersion/kind to a REST resource through the API server's discovery
documents even in client dry-run, and GETs the object to choose between create and patch. This
server answers discovery for the kinds psflow's manifests may use (an object of any other kind
fails kubectl's mapping: a typo in an apiVersion is caught), 404 for every object, and refuses
all writes. Usage: fake_apiserver.py PORT_FILE (binds 127.0.0.1 on a free port, writes it there).
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# group/version -> [(plural, kind, namespaced)]
RESOURCES = {
    "v1": [("namespaces", "Namespace", False), ("serviceaccounts", "ServiceAccount", True),
           ("services", "Service", True), ("configmaps", "ConfigMap", True),
           ("pods", "Pod", True), ("events", "Event", True),
           ("persistentvolumeclaims", "PersistentVolumeClaim", True)],
    "apps/v1": [("deployments", "Deployment", True)],
    "rbac.authorization.k8s.io/v1": [("clusterroles", "ClusterRole", False),
                                     ("clusterrolebindings", "ClusterRoleBinding", False),
                                     ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
    "coordination.k8s.io/v1": [("leases", "Lease", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", True)],
    "apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition", False)],
    "monitoring.coreos.com/v1": [("servicemonitors", "ServiceMonitor", True),
                                 ("podmonitors", "PodMonitor", True),
                                 ("prometheusrules", "PrometheusRule", True)],
    "psflow.io/v1alpha1": [("trainingjobs", "TrainingJob", True)],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def resource_list(group_version):
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                           "kind": kind, "verbs": VERBS}
                          for plural, kind, namespaced in RESOURCES[group_version]]}


def group_list():
    groups = []
    for group_version in RESOURCES:
        if "/" not in group_version:
            continue
        group, version = group_version.split("/")
        gv = {"groupVersion": group_version, "version": version}
        groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class Handler(BaseHTTPRequestHandler):
    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def status(self, code, reason, message):
        self.send_json(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": reason, "message": message, "code": code})

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/version":
            return self.send_json(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"})
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": []})
        if path == "/apis":
            return self.send_json(200, group_list())
        if path == "/api/v1":
            return self.send_json(200, resource_list("v1"))
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "apis" and f"{parts[2]}/{parts[3]}" in RESOURCES:
            return self.send_json(200, resource_list(f"{parts[2]}/{parts[3]}"))
        self.status(404, "NotFound", f"{path} not found")

    def refuse(self):
        self.status(405, "MethodNotAllowed", "this fake API server serves discovery only")

    do_POST = do_PUT = do_PATCH = do_DELETE = refuse

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
