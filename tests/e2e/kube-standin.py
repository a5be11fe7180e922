#!/usr/bin/env python3
"""A stand-in Kubernetes API on loopback for a rehearsal cluster's stop/start,
with a kubelet model per plan node driven by the node's real boots.

    kube-standin.py [--troubled] PLAN_JSON CONSOLE_DIR PORT_FILE EVENTS_FILE

What it models, and where the behaviour comes from:

- The cluster was installed: every plan node but the bootstrap has a Node
  (registered under its host name with InternalIP/Hostname/InternalDNS
  addresses) that is Ready.
- A kubelet starts when its machine boots. The stand-in node prints its
  `SHIFTLAB-STANDIN-REPORT` line at the end of every boot, and libvirt appends
  the serial console to CONSOLE_DIR/<node>-console.log, so a new report line is a
  boot. The kubelet comes back with a client certificate that expired while the
  machine was off (the "cluster does not come back after a day" case): it falls
  back to its bootstrap kubeconfig and creates a client CSR as the
  machine-config-operator's node-bootstrapper (signer
  kubernetes.io/kube-apiserver-client-kubelet, subject O=system:nodes
  CN=system:node:<name>, usages digital signature + client auth; Kubernetes docs
  "TLS bootstrapping" and "Certificate Signing Requests" > "Kubernetes signers").
  Its Node turns Ready=Unknown ("Kubelet stopped posting node status.", the node
  lifecycle controller's reason NodeStatusUnknown) because the kubelet cannot
  post status without a client certificate.
- When the client CSR is approved the kubelet posts status again (Ready=True)
  and asks for its serving certificate as the node itself (signer
  kubernetes.io/kubelet-serving, requestor system:node:<name> in system:nodes,
  SANs its host name and InternalIP; usages digital signature + server auth).
  OpenShift's "Restarting the cluster gracefully" (openshift/openshift-docs,
  modules/graceful-restart.adoc) has the admin approve those pending CSRs.
- The install finished: the ClusterVersion `version` has the plan's version
  Available with a Completed history entry, and the ClusterOperators of a
  cluster are Available, not Progressing, not Degraded (field names: openshift/api
  config/v1 `0000_00_cluster-version-operator_01_clusterversion-Default.crd.yaml`
  and `…_01_clusteroperator.crd.yaml`; the messages are the CVO's). With
  --troubled (the web page's health panel, tests/e2e/web.sh): `authentication`
  is Degraded as the cluster-authentication-operator reports an unreachable
  oauth route, and the first worker's kubelet has a serving CSR pending.
- API paths: GET /version, GET the CSR list, GET one CSR, PUT …/approval (sets
  the status; a stale resourceVersion is a 409 Conflict as the real API answers),
  GET /api/v1/nodes, GET one Node, GET the ClusterVersion and ClusterOperator
  lists and one of each, GET the StorageClass list (with `storage: nfs` in the
  plan, the default class shiftlab's manifests make: src/render/storage.rs);
  anything else a 404 Status.

Each event (boot, CSR created, approved) is appended to EVENTS_FILE as one JSON
line, so the test can see what happened in which order. Nothing leaves 127.0.0.1.
Python's standard library and the openssl command (Debian's ca-certificates
depends on it) only: the sandbox has no package index.
"""

import base64
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
BOOTSTRAPPER = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
REPORT = b"SHIFTLAB-STANDIN-REPORT "

args = sys.argv[1:]
troubled = args[:1] == ["--troubled"]
if troubled:
    args = args[1:]
plan_path, console_dir, port_file, events_file = args[:4]
with open(plan_path) as f:
    plan = json.load(f)
members = [n for n in plan["nodes"] if n["role"] != "bootstrap"]

lock = threading.Lock()
version = [100]
csrs = {}  # name -> object
nodes = {}  # name -> object
csr_node = {}  # CSR name -> the plan node whose kubelet made it
CONFIG = "/apis/config.openshift.io/v1/"
cluster_versions = {}  # name -> object
cluster_operators = {}  # name -> object


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_version():
    version[0] += 1
    return str(version[0])


def event(**kv):
    kv["at"] = now()
    with open(events_file, "a") as f:
        f.write(json.dumps(kv) + "\n")


def set_ready(name, status, reason, message):
    n = nodes[name]
    n["metadata"]["resourceVersion"] = next_version()
    n["status"]["conditions"] = [
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastTransitionTime": now(), "lastHeartbeatTime": now()}
    ]


for m in members:
    nodes[m["name"]] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": m["name"], "resourceVersion": next_version(),
                     # The kubelet's role labels (`oc get nodes` ROLES).
                     "labels": dict({"kubernetes.io/hostname": m["name"]},
                                    **({"node-role.kubernetes.io/worker": ""} if m["role"] == "worker" else
                                       {"node-role.kubernetes.io/control-plane": "",
                                        "node-role.kubernetes.io/master": ""}))},
        "status": {"addresses": [
            {"type": "InternalIP", "address": m["ip"]},
            {"type": "Hostname", "address": m["name"]},
            {"type": "InternalDNS", "address": m["fqdn"]},
        ]},
    }
    set_ready(m["name"], "True", "KubeletReady", "kubelet is posting ready status")


def condition(kind, status, reason="AsExpected", message=""):
    c = {"type": kind, "status": status, "lastTransitionTime": now(), "reason": reason}
    if message:
        c["message"] = message
    return c


release = plan.get("version") or "4.18.0"
# The provisioner's default class (render/storage.rs), as the API returns it.
storage_classes = [{
    "metadata": {"name": "shiftlab-nfs", "resourceVersion": "1",
                 "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": "k8s-sigs.io/nfs-subdir-external-provisioner",
    "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
}] if (plan.get("storage") or {}).get("nfs") else []
cluster_versions["version"] = {
    "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
    "metadata": {"name": "version", "resourceVersion": next_version()},
    "spec": {"clusterID": "00000000-0000-4000-8000-000000000000", "channel": "stable-4.18"},
    "status": {
        "desired": {"version": release, "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + "0" * 64},
        "history": [{"state": "Completed", "version": release, "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + "0" * 64,
                     "startedTime": now(), "completionTime": now(), "verified": False}],
        "observedGeneration": 1, "versionHash": "standin", "availableUpdates": None,
        "conditions": [
            condition("Available", "True", "", "Done applying " + release),
            condition("Failing", "False"),
            condition("Progressing", "False", "", "Cluster version is " + release),
            condition("RetrievedUpdates", "False", "NoChannel", "The update channel has not been configured."),
        ]},
}
for name in ("authentication", "console", "dns", "etcd", "ingress", "kube-apiserver",
             "machine-config", "network"):
    degraded = troubled and name == "authentication"
    cluster_operators[name] = {
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
        "metadata": {"name": name, "resourceVersion": next_version()},
        "spec": {},
        "status": {
            "versions": [{"name": "operator", "version": release}],
            "relatedObjects": [{"group": "", "resource": "namespaces", "name": "openshift-" + name}],
            "conditions": [
                condition("Available", "True"),
                condition("Progressing", "False"),
                condition("Degraded", "True", "OAuthServerRouteEndpointAccessibleController_SyncError",
                          "OAuthServerRouteEndpointAccessibleControllerDegraded: Get \"https://oauth-openshift.apps."
                          + plan["cluster_domain"] + "/healthz\": dial tcp: connect: connection refused")
                if degraded else condition("Degraded", "False"),
                condition("Upgradeable", "True"),
            ]},
    }


def request_pem(name, sans):
    """A PKCS#10 request as the kubelet makes one (a fresh P-256 key), by openssl."""
    cmd = ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", "/dev/null", "-subj", "/O=system:nodes/CN=system:node:" + name]
    if sans:
        cmd += ["-addext", "subjectAltName=" + ",".join(sans)]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def create_csr(m, kind):
    name = "csr-%s-%s-%d" % (kind, m["name"], version[0])
    if kind == "client":
        spec = {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "username": BOOTSTRAPPER,
                "groups": ["system:serviceaccounts",
                           "system:serviceaccounts:openshift-machine-config-operator",
                           "system:authenticated"],
                "usages": ["digital signature", "client auth"],
                "request": base64.b64encode(request_pem(m["name"], [])).decode()}
    else:
        sans = ["DNS:" + m["name"], "IP:" + m["ip"]]
        spec = {"signerName": "kubernetes.io/kubelet-serving",
                "username": "system:node:" + m["name"],
                "groups": ["system:nodes", "system:authenticated"],
                "usages": ["digital signature", "server auth"],
                "request": base64.b64encode(request_pem(m["name"], sans)).decode()}
    csrs[name] = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                  "metadata": {"name": name, "resourceVersion": next_version(),
                               "creationTimestamp": now()},
                  "spec": spec, "status": {}}
    csr_node[name] = m
    event(event="csr", csr=name, node=m["name"], kind=kind)


def boots(m):
    try:
        with open(os.path.join(console_dir, m["name"] + "-console.log"), "rb") as f:
            return f.read().count(REPORT)
    except FileNotFoundError:
        return 0


def kubelets():
    seen = {m["name"]: boots(m) for m in members}
    while True:
        time.sleep(1)
        for m in members:
            b = boots(m)
            if b > seen[m["name"]]:
                seen[m["name"]] = b
                with lock:
                    event(event="boot", node=m["name"])
                    set_ready(m["name"], "Unknown", "NodeStatusUnknown",
                              "Kubelet stopped posting node status.")
                    create_csr(m, "client")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason, message):
        self.reply(code, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "code": code, "reason": reason,
                          "message": message})

    def do_GET(self):
        path = self.path.split("?")[0]
        with lock:
            if path == "/version":
                return self.reply(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0",
                                        "gitCommit": "", "gitTreeState": "clean",
                                        "buildDate": "", "goVersion": "", "compiler": "gc",
                                        "platform": "linux/amd64"})
            if path == CSRS:
                return self.reply(200, {"apiVersion": "certificates.k8s.io/v1",
                                        "kind": "CertificateSigningRequestList",
                                        "metadata": {"resourceVersion": str(version[0])},
                                        "items": list(csrs.values())})
            if path == "/apis/storage.k8s.io/v1/storageclasses":
                return self.reply(200, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClassList",
                                        "metadata": {"resourceVersion": str(version[0])},
                                        "items": storage_classes})
            if path == "/api/v1/nodes":
                return self.reply(200, {"apiVersion": "v1", "kind": "NodeList",
                                        "metadata": {"resourceVersion": str(version[0])},
                                        "items": list(nodes.values())})
            for plural, objs, kind in (("clusterversions", cluster_versions, "ClusterVersionList"),
                                       ("clusteroperators", cluster_operators, "ClusterOperatorList")):
                if path == CONFIG + plural:
                    return self.reply(200, {"apiVersion": "config.openshift.io/v1", "kind": kind,
                                            "metadata": {"resourceVersion": str(version[0])},
                                            "items": list(objs.values())})
            for prefix, objs, kind in ((CSRS + "/", csrs, "certificatesigningrequests"),
                                       ("/api/v1/nodes/", nodes, "nodes"),
                                       (CONFIG + "clusterversions/", cluster_versions,
                                        "clusterversions.config.openshift.io"),
                                       (CONFIG + "clusteroperators/", cluster_operators,
                                        "clusteroperators.config.openshift.io")):
                name = path[len(prefix):] if path.startswith(prefix) else None
                if name and "/" not in name:
                    if name in objs:
                        return self.reply(200, objs[name])
                    return self.status(404, "NotFound", '%s "%s" not found' % (kind, name))
        self.status(404, "NotFound", "the server could not find the requested resource")

    def do_PUT(self):
        path = self.path.split("?")[0]
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        name = path[len(CSRS) + 1:-len("/approval")] if (
            path.startswith(CSRS + "/") and path.endswith("/approval")) else None
        with lock:
            if not name or name not in csrs:
                return self.status(404, "NotFound", "the server could not find the requested resource")
            csr = csrs[name]
            if body.get("metadata", {}).get("resourceVersion") not in (None, csr["metadata"]["resourceVersion"]):
                return self.status(409, "Conflict", "Operation cannot be fulfilled on "
                                   'certificatesigningrequests.certificates.k8s.io "%s": the object '
                                   "has been modified; please apply your changes to the latest "
                                   "version and try again" % name)
            csr["status"] = body.get("status", {})
            csr["metadata"]["resourceVersion"] = next_version()
            approved = any(c.get("type") == "Approved" and c.get("status") == "True"
                           for c in csr["status"].get("conditions", []))
            m = csr_node[name]
            if approved:
                kind = "client" if csr["spec"]["signerName"].endswith("client-kubelet") else "serving"
                event(event="approved", csr=name, node=m["name"], kind=kind)
                if kind == "client":
                    # The kubelet has a client certificate: it posts status, then asks to serve.
                    set_ready(m["name"], "True", "KubeletReady", "kubelet is posting ready status")
                    create_csr(m, "serving")
            self.reply(200, csr)


if troubled:
    # A kubelet's serving certificate not approved yet (as after a restart).
    workers = [m for m in members if m["role"] == "worker"] or members
    with lock:
        create_csr(workers[0], "serving")

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=kubelets, daemon=True).start()
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
