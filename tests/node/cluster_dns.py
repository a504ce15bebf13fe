#!/usr/bin/python3
"""Cluster DNS records for the test node: a stand-in for CoreDNS, which Debian does not package.

  cluster_dns.py --server URL --ca CA --cert CERT --key KEY --node NAME --hosts-dir DIR

Watches the API server's Services (all namespaces) and the Pods bound to NODE, and keeps one
hosts file per namespace in DIR that dnsmasq serves (--hostsdir: it re-reads a file as it
changes; files are written beside DIR and renamed in). The records CoreDNS's kubernetes plugin
would give:
  <svc>.<ns>.svc.cluster.local                   a ClusterIP Service: its ClusterIP; a headless
                                                 one: the IPs of the pods its selector matches
                                                 (ready ones, or all with publishNotReadyAddresses)
  <hostname>.<subdomain>.<ns>.svc.cluster.local  a pod with spec.hostname and spec.subdomain,
                                                 when a headless Service named <subdomain>
                                                 selects it (and would publish its address), as
                                                 the endpoints controller gives the hostname
The test control plane runs no endpoints controller (tests/control_plane/control_plane.sh says
why), so a headless Service's addresses come from its selector and the pods, not from Endpoints;
only pods on this node have addresses another pod can reach, so only they are watched. Not
served: SRV records, selector-less Services, reverse lookups.

It also gives each namespace with a pod on NODE the ConfigMap openshift-service-ca.crt (key
service-ca.crt: the cluster CA), as OpenShift's service-ca operator does: the API server (the
MicroShift tree of tests/control_plane) puts it into every pod's service-account volume, and
the kubelet does not start a pod whose volume it cannot fill.

Each resource: list, then watch from the list's resourceVersion; an error or 410 Gone lists
again after 0.5 s. Standard library only. Runs until killed.
"""

import argparse
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

DOMAIN = "svc.cluster.local"


class Cluster:
    """The Services and this node's Pods, by (namespace, name); writes the hosts files."""

    def __init__(self, hosts_dir):
        self.hosts_dir = hosts_dir
        self.tmp_dir = hosts_dir.rstrip("/") + ".tmp"
        os.makedirs(hosts_dir, exist_ok=True)
        os.makedirs(self.tmp_dir, exist_ok=True)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.objects = {"services": {}, "pods": {}}  # guarded by lock
        self.dirty = set()  # namespaces to rewrite; guarded by lock
        self.written = {}  # namespace -> text last written; the writer thread's own

    def replace(self, kind, items):
        with self.lock:
            old = self.objects[kind]
            self.dirty.update(ns for ns, _ in old)
            self.objects[kind] = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                                  for o in items}
            self.dirty.update(ns for ns, _ in self.objects[kind])
            self.changed.notify()

    def apply(self, kind, event_type, obj):
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        with self.lock:
            if event_type == "DELETED":
                self.objects[kind].pop(key, None)
            else:
                self.objects[kind][key] = obj
            self.dirty.add(key[0])
            self.changed.notify()

    def _records(self, ns):
        """The hosts-file text of namespace ns. Called with lock held."""
        pods = [p for (pns, _), p in self.objects["pods"].items() if pns == ns]
        lines = []
        for (sns, name), svc in sorted(self.objects["services"].items()):
            if sns != ns:
                continue
            spec = svc.get("spec", {})
            fqdn = f"{name}.{ns}.{DOMAIN}"
            cluster_ip = spec.get("clusterIP", "")
            if cluster_ip and cluster_ip != "None":
                lines.append(f"{cluster_ip} {fqdn}")
                continue
            selector = spec.get("selector") or {}
            if not selector:
                continue
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                if all(labels.get(k) == v for k, v in selector.items()) and serving(
                        pod, spec.get("publishNotReadyAddresses", False)):
                    lines.append(f"{pod['status']['podIP']} {fqdn}")
        for pod in pods:
            spec = pod.get("spec", {})
            svc = self.objects["services"].get((ns, spec.get("subdomain")))
            if not spec.get("hostname") or svc is None:
                continue
            svc_spec = svc.get("spec", {})
            selector = svc_spec.get("selector") or {}
            labels = pod["metadata"].get("labels") or {}
            if (svc_spec.get("clusterIP") == "None" and selector
                    and all(labels.get(k) == v for k, v in selector.items())
                    and serving(pod, svc_spec.get("publishNotReadyAddresses", False))):
                lines.append(f"{pod['status']['podIP']} "
                             f"{spec['hostname']}.{spec['subdomain']}.{ns}.{DOMAIN}")
        return "".join(line + "\n" for line in sorted(set(lines)))

    def write_forever(self):
        while True:
            with self.lock:
                while not self.dirty:
                    self.changed.wait()
                texts = {ns: self._records(ns) for ns in self.dirty}
                self.dirty.clear()
            for ns, text in texts.items():
                if self.written.get(ns) == text:
                    continue
                # A namespace left without records gets an empty file, never none: dnsmasq
                # reads a file renamed in (its old records go) but does not notice one
                # deleted, whose records it would go on serving (a suspended job's pods made
                # again got their deleted predecessors' addresses).
                path = os.path.join(self.hosts_dir, ns)
                tmp = os.path.join(self.tmp_dir, ns)
                with open(tmp, "w") as f:
                    f.write(text)
                os.rename(tmp, path)
                self.written[ns] = text


def serving(pod, not_ready_too):
    """Whether the pod has an address that a Service would publish."""
    status = pod.get("status", {})
    if not status.get("podIP") or pod["metadata"].get("deletionTimestamp"):
        return False
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not_ready_too:
        return True
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions", []))


class Api:
    def __init__(self, server, ca, cert, key):
        url = urllib.parse.urlparse(server)
        self.host, self.port = url.hostname, url.port or 443
        self.context = ssl.create_default_context(cafile=ca)
        self.context.load_cert_chain(cert, key)

    def connect(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                           timeout=timeout)

    def create(self, path, obj):
        """POSTs obj; True when created or already there."""
        conn = self.connect(30)
        try:
            conn.request("POST", path, body=json.dumps(obj),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            return response.status in (201, 409)
        finally:
            conn.close()

    def list(self, path):
        conn = self.connect(30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
            return json.loads(body)
        finally:
            conn.close()

    def watch(self, path, resource_version):
        """Yields (type, object) until the server ends the watch."""
        sep = "&" if "?" in path else "?"
        conn = self.connect(330)  # the server ends a watch within timeoutSeconds
        try:
            conn.request("GET", f"{path}{sep}watch=1&timeoutSeconds=300"
                         f"&allowWatchBookmarks=true&resourceVersion={resource_version}")
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"watch {path}: {response.status}")
            while True:
                line = response.readline()
                if not line:
                    return
                event = json.loads(line)
                yield event["type"], event["object"]
        finally:
            conn.close()


class ServiceCaPublisher:
    def __init__(self, api, ca_file):
        self.api = api
        with open(ca_file) as f:
            self.ca = f.read()
        self.done = set()  # namespaces that have it; the pods thread's own

    def ensure(self, ns):
        if ns in self.done:
            return
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "openshift-service-ca.crt", "namespace": ns},
                      "data": {"service-ca.crt": self.ca}}
        if self.api.create(f"/api/v1/namespaces/{ns}/configmaps", config_map):
            self.done.add(ns)


def follow(api, cluster, kind, path, on_object):
    while True:
        try:
            listed = api.list(path)
            for obj in listed.get("items", []):
                on_object(obj)
            cluster.replace(kind, listed.get("items", []))
            version = listed["metadata"]["resourceVersion"]
            for event_type, obj in api.watch(path, version):
                if event_type == "ERROR":  # 410 Gone: the version is too old
                    break
                if event_type == "BOOKMARK":
                    continue
                if event_type != "DELETED":
                    on_object(obj)
                cluster.apply(kind, event_type, obj)
        except Exception as e:  # noqa: BLE001 -- any failure: list again
            print(f"cluster_dns: {kind}: {e}; listing again", file=sys.stderr, flush=True)
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in ("server", "ca", "cert", "key", "node", "hosts-dir"):
        parser.add_argument("--" + flag, required=True)
    args = parser.parse_args()
    api = Api(args.server, args.ca, args.cert, args.key)
    cluster = Cluster(args.hosts_dir)
    service_ca = ServiceCaPublisher(api, args.ca)
    node = urllib.parse.quote(f"spec.nodeName={args.node}")
    for kind, path, on_object in (
            ("services", "/api/v1/services", lambda obj: None),
            ("pods", f"/api/v1/pods?fieldSelector={node}",
             lambda obj: service_ca.ensure(obj["metadata"]["namespace"]))):
        threading.Thread(target=follow, args=(api, cluster, kind, path, on_object),
                         daemon=True).start()
    print(f"cluster_dns: serving {args.hosts_dir} for node {args.node}", flush=True)
    cluster.write_forever()


if __name__ == "__main__":
    main()
