#!/usr/bin/env python3
"""A stand-in Kubernetes API on loopback for a rehearsal cluster's stop/start,
with a kubelet model per plan node driven by the node's real boots.

    kube-standin.py [--troubled] [--lvms=N] PLAN_JSON CONSOLE_DIR PORT_FILE EVENTS_FILE

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

The lab's users (`shiftlab users`, docs/users.md), as the real API server
and OAuth server behave (Kubernetes API conventions,
community/contributors/devel/sig-architecture/api-conventions.md: "Concurrency
Control and Consistency", "HTTP Status codes", "Response Status Kind"):

- Secrets (GET, POST, PUT, DELETE one): a PUT whose metadata.resourceVersion
  is not the stored one is a 409 Conflict ("the object has been modified");
  without one it is an unconditional update (Secrets allow it); a PUT of a
  missing Secret is a 404 (no create on update); a POST of an existing name is
  a 409 AlreadyExists. Every write gets a new resourceVersion; an update
  that changes nothing is no write and keeps it.
- ClusterRoleBindings (rbac.authorization.k8s.io/v1: list, GET, POST, DELETE),
  the OAuth `cluster` (config.openshift.io/v1: GET, PUT as a Secret), and
  users and identities of user.openshift.io/v1 (list, GET, DELETE).
- A DELETE of an object that exists answers 200 with a Status of status
  Success and details (name, kind, uid), as kube-apiserver's generic registry
  does for these resources; of a missing one a 404 NotFound Status. Status
  bodies carry kind, apiVersion, metadata, status, message, reason, details
  and code as the real ones (`secrets "x" not found`,
  `clusterrolebindings.rbac.authorization.k8s.io "x" not found`).
- The cluster was installed without `users:`: the OAuth has `spec: {}`,
  kube-system/kubeadmin exists (key `kubeadmin`: a bcrypt hash, as the
  installer's pkg/asset/password writes it), the system cluster-admin
  bindings bind groups, no User exists.
- A login (`oc login -u`'s challenge flow: GET /oauth/authorize with
  client_id openshift-challenging-client, response_type token, Basic
  credentials, an X-CSRF-Token header) is checked against the htpasswd
  Secrets the OAuth's HTPasswd providers name, bcrypt by the C library's
  crypt(3); on success the OAuth server's `claim` mapping makes the Identity
  `<provider>:<user>` and the User listing it, and answers 302 with a token
  in the Location's fragment; otherwise 401. (The real OAuth server is
  oauth-openshift.apps.<domain>; here it shares the API's port.)
- A test's knob, POST /standin/concurrent-writer?namespace=N&name=S&user=U:
  when the next PUT of Secret N/S arrives, another writer's update lands
  first (the line U added to its htpasswd, a new resourceVersion), as an
  admin's `oc edit` between shiftlab's read and its write would; that PUT,
  carrying the version read, gets the real API's 409.

`storage: lvms` after install (--lvms=N; shiftlab's kube::lvms, docs/storage.md),
as the real API server and OLM behave (Kubernetes API conventions, "HTTP Status
codes", "Concurrency Control and Consistency", "Patch operations": a JSON merge
patch is RFC 7386, null removes a key):

- The install-time manifests made the Subscription `lvms-operator`; OLM installs
  the operator some time later, which the stand-in models by reads of the CRD
  `lvmclusters.lvm.topolvm.io`: a 404 NotFound Status until its Nth read, then
  the CRD with NamesAccepted but not yet Established, Established=True from the
  next read on. Meanwhile the operator's CSV (GET the namespace's
  clusterserviceversions) is in phase Installing, then Succeeded.
- Until the CRD is Established, any request on `lvm.topolvm.io` LVMClusters is
  the generic 404 ("the server could not find the requested resource") the API
  server gives for a resource it does not serve; then LVMClusters behave as
  Secrets: POST of an existing name a 409 AlreadyExists.
- PersistentVolumeClaims and ConfigMaps (GET, POST, PUT, DELETE) as Secrets;
  `openshift-monitoring/cluster-monitoring-config` exists as the install made it
  (retention, no claims).
- The image registry's Config `cluster` (imageregistry.operator.openshift.io/v1,
  on emptyDir as at install): GET, and PATCH with
  `application/merge-patch+json` only (another type is a 415
  UnsupportedMediaType); a patch that changes nothing is no write.

Each event (boot, CSR created, approved) is appended to EVENTS_FILE as one JSON
line, so the test can see what happened in which order. Nothing leaves 127.0.0.1.
Python's standard library and the openssl command (Debian's ca-certificates
depends on it) only: the sandbox has no package index.
"""

import base64
import crypt  # bcrypt through libxcrypt; deprecated in 3.11, still here (the sandbox's python)
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
BOOTSTRAPPER = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
REPORT = b"SHIFTLAB-STANDIN-REPORT "

args = sys.argv[1:]
troubled = args[:1] == ["--troubled"]
if troubled:
    args = args[1:]
# --lvms=N: storage: lvms, the operator's CRD served from the CRD's Nth read.
lvms_polls = int(args[0].split("=", 1)[1]) if args and args[0].startswith("--lvms=") else None
if lvms_polls is not None:
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


def now(ago=0):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ago)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def next_version():
    version[0] += 1
    return str(version[0])


def event(**kv):
    kv["at"] = now()
    with open(events_file, "a") as f:
        f.write(json.dumps(kv) + "\n")


def set_ready(name, status, reason, message, ago=0):
    n = nodes[name]
    n["metadata"]["resourceVersion"] = next_version()
    n["status"]["conditions"] = [
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastTransitionTime": now(ago), "lastHeartbeatTime": now(ago)}
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
    # The kubelets last posted before this API came up (the lab was stopped or
    # bundled): a heartbeat older than the API, so never newer than a start
    # that follows it, however quickly (shiftlab's start counts a powered-on
    # node Ready only with a heartbeat since its power-on, in whole seconds).
    set_ready(m["name"], "True", "KubeletReady", "kubelet is posting ready status", ago=40)


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

    def status(self, code, reason, message, details=None):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "code": code, "reason": reason,
                "message": message}
        if details:
            body["details"] = details
        self.reply(code, body)

    def body(self):
        return json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")

    def do_POST(self):
        path, _, query = self.path.partition("?")
        with lock:
            if not users_api(self, "POST", path, query, self.body()):
                self.status(404, "NotFound", "the server could not find the requested resource")

    def do_PATCH(self):
        path, _, query = self.path.partition("?")
        with lock:
            if not users_api(self, "PATCH", path, query, self.body()):
                self.status(404, "NotFound", "the server could not find the requested resource")

    def do_DELETE(self):
        path, _, query = self.path.partition("?")
        with lock:
            if not users_api(self, "DELETE", path, query, None):
                self.status(404, "NotFound", "the server could not find the requested resource")

    def do_GET(self):
        path = self.path.split("?")[0]
        with lock:
            if users_api(self, "GET", path, self.path.partition("?")[2], None):
                return
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
        body = self.body()
        with lock:
            if users_api(self, "PUT", path, "", body):
                return
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


# --- the lab's users (see the docstring) ---
USER_API = "/apis/user.openshift.io/v1/"
RBAC = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
secrets = {}  # (namespace, name) -> object
oauths = {}
bindings = {}
ousers = {}
identities = {}
concurrent_writer = {}  # (namespace, name) -> the user the other writer adds


def bcrypt_hash(password):
    salt = base64.b64encode(os.urandom(16), b"./").decode()[:22]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crypt.crypt(password, "$2y$10$" + salt)


def bcrypt_ok(password, hashed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crypt.crypt(password, hashed) == hashed


def stamp(obj):
    md = obj.setdefault("metadata", {})
    md.setdefault("uid", str(uuid.uuid4()))
    md.setdefault("creationTimestamp", now())
    md["resourceVersion"] = next_version()
    return obj


stamp(secrets.setdefault(("kube-system", "kubeadmin"), {
    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": "kubeadmin", "namespace": "kube-system"},
    "data": {"kubeadmin": base64.b64encode(bcrypt_hash(base64.b64encode(os.urandom(18)).decode()).encode()).decode()}}))
oauths["cluster"] = stamp({"apiVersion": "config.openshift.io/v1", "kind": "OAuth",
                           "metadata": {"name": "cluster"}, "spec": {}})
for bname, group in (("cluster-admin", "system:masters"), ("cluster-admins", "system:cluster-admins")):
    bindings[bname] = stamp({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                             "metadata": {"name": bname},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": "cluster-admin"},
                             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                           "name": group}]})


def resource(path):
    """(store, key, collection?, resource, group, namespaced, list kind, api version) for a users path."""
    parts = path.strip("/").split("/")
    core = {"secrets": (secrets, "SecretList"), "configmaps": (configmaps, "ConfigMapList"),
            "persistentvolumeclaims": (claims, "PersistentVolumeClaimList")}
    if path.startswith("/api/v1/namespaces/") and len(parts) in (5, 6) and parts[4] in core:
        key = (parts[3], parts[5]) if len(parts) == 6 else (parts[3], None)
        store, list_kind = core[parts[4]]
        return store, key, len(parts) == 5, parts[4], "", list_kind, "v1"
    # LVMClusters only once their CRD is Established: before, the API server
    # serves no such resource (the generic 404).
    if path.startswith(LVMCLUSTERS_API) and len(parts) in (6, 7) and parts[5] == "lvmclusters" \
            and lvms_crd_established():
        key = (parts[4], parts[6]) if len(parts) == 7 else (parts[4], None)
        return lvm_clusters, key, len(parts) == 6, "lvmclusters", "lvm.topolvm.io", "LVMClusterList", \
            "lvm.topolvm.io/v1alpha1"
    table = ((RBAC, bindings, "clusterrolebindings", "rbac.authorization.k8s.io", "ClusterRoleBindingList",
              "rbac.authorization.k8s.io/v1"),
             (CONFIG + "oauths", oauths, "oauths", "config.openshift.io", "OAuthList", "config.openshift.io/v1"),
             (USER_API + "users", ousers, "users", "user.openshift.io", "UserList", "user.openshift.io/v1"),
             (USER_API + "identities", identities, "identities", "user.openshift.io", "IdentityList",
              "user.openshift.io/v1"),
             (REGISTRY_CONFIGS, registry_configs, "configs", "imageregistry.operator.openshift.io", "ConfigList",
              "imageregistry.operator.openshift.io/v1"))
    for prefix, store, plural, group, list_kind, api in table:
        if path == prefix:
            return store, None, True, plural, group, list_kind, api
        if path.startswith(prefix + "/") and "/" not in path[len(prefix) + 1:]:
            return store, urllib.parse.unquote(path[len(prefix) + 1:]), False, plural, group, list_kind, api
    return None


def qualified(plural, group):
    return plural + "." + group if group else plural


def details(name, plural, group, uid=None):
    d = {"name": name, "kind": plural}
    if group:
        d["group"] = group
    if uid:
        d["uid"] = uid
    return d


def add_line(secret, user):
    text = base64.b64decode(secret.get("data", {}).get("htpasswd", "")).decode()
    text += "%s:%s\n" % (user, bcrypt_hash(base64.b64encode(os.urandom(12)).decode()))
    secret.setdefault("data", {})["htpasswd"] = base64.b64encode(text.encode()).decode()
    stamp(secret)


def login(handler, query):
    """The OAuth server's challenge flow for oc login."""
    q = urllib.parse.parse_qs(query)
    auth = handler.headers.get("Authorization", "")
    if q.get("client_id") != ["openshift-challenging-client"] or q.get("response_type") != ["token"] \
            or not handler.headers.get("X-CSRF-Token"):
        return handler.reply(400, {"error": "invalid_request"})
    if auth.startswith("Basic "):
        user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        for idp in oauths["cluster"].get("spec", {}).get("identityProviders") or []:
            if idp.get("type") != "HTPasswd":
                continue
            sec = secrets.get(("openshift-config", idp.get("htpasswd", {}).get("fileData", {}).get("name")))
            text = base64.b64decode((sec or {}).get("data", {}).get("htpasswd", "")).decode()
            for line in text.splitlines():
                n, _, h = line.partition(":")
                if n == user and h and bcrypt_ok(password, h):
                    ident = "%s:%s" % (idp["name"], user)
                    if ident not in identities:
                        identities[ident] = stamp({"apiVersion": "user.openshift.io/v1", "kind": "Identity",
                                                   "metadata": {"name": ident}, "providerName": idp["name"],
                                                   "providerUserName": user,
                                                   "user": {"name": user}})
                    u = ousers.setdefault(user, stamp({"apiVersion": "user.openshift.io/v1", "kind": "User",
                                                        "metadata": {"name": user}, "identities": [],
                                                        "groups": None}))
                    if ident not in u["identities"]:
                        u["identities"].append(ident)
                        stamp(u)
                    identities[ident]["user"]["uid"] = u["metadata"]["uid"]
                    event(event="login", user=user, identity=ident)
                    handler.send_response(302)
                    handler.send_header("Location", "https://oauth.invalid/oauth/token/implicit#access_token=sha256~"
                                        + uuid.uuid4().hex + "&token_type=Bearer")
                    handler.send_header("content-length", "0")
                    return handler.end_headers()
    event(event="login-refused", user=auth and "?")
    handler.send_response(401)
    handler.send_header("WWW-Authenticate", 'Basic realm="openshift"')
    handler.send_header("content-length", "0")
    handler.end_headers()


def users_api(handler, method, path, query, body):
    """The users' part of the API; False when `path` is not one of its objects."""
    if path == "/oauth/authorize" and method == "GET":
        login(handler, query)
        return True
    if path == "/standin/concurrent-writer" and method == "POST":
        q = urllib.parse.parse_qs(query)
        concurrent_writer[(q["namespace"][0], q["name"][0])] = q["user"][0]
        handler.reply(200, {"armed": True})
        return True
    if path == LVMS_CRD and method == "GET" and lvms_polls is not None:
        crd_reads[0] += 1
        if crd_reads[0] < lvms_polls:
            handler.status(404, "NotFound", 'customresourcedefinitions.apiextensions.k8s.io "%s" not found'
                           % LVMS_CRD_NAME, details(LVMS_CRD_NAME, "customresourcedefinitions",
                                                    "apiextensions.k8s.io"))
        else:
            handler.reply(200, lvms_crd())
        return True
    if path == LVMS_CSVS and method == "GET" and lvms_polls is not None:
        handler.reply(200, {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersionList",
                            "metadata": {"resourceVersion": str(version[0])}, "items": [lvms_csv()]})
        return True
    r = resource(path)
    if r is None:
        return False
    store, key, collection, plural, group, list_kind, api = r
    name = key[1] if isinstance(key, tuple) else key
    what = qualified(plural, group)
    not_found = lambda: handler.status(404, "NotFound", '%s "%s" not found' % (what, name),
                                       details(name, plural, group))
    if collection and method == "GET" and not isinstance(key, tuple):
        handler.reply(200, {"apiVersion": api, "kind": list_kind, "metadata": {"resourceVersion": str(version[0])},
                            "items": list(store.values())})
    elif collection and method == "POST":
        new_name = body.get("metadata", {}).get("name")
        k = (key[0], new_name) if isinstance(key, tuple) else new_name
        if k in store:
            handler.status(409, "AlreadyExists", '%s "%s" already exists' % (what, new_name),
                           details(new_name, plural, group))
        else:
            if isinstance(key, tuple):
                body["metadata"]["namespace"] = key[0]
            store[k] = stamp(body)
            event(event="create", object=what + "/" + new_name)
            handler.reply(201, store[k])
    elif collection:
        handler.status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    elif key not in store:
        not_found()
    elif method == "GET":
        handler.reply(200, store[key])
    elif method == "PUT":
        other = concurrent_writer.pop(key, None) if isinstance(key, tuple) else None
        if other:
            add_line(store[key], other)
            event(event="concurrent-write", object=what + "/" + name, user=other)
        obj = store[key]
        rv = body.get("metadata", {}).get("resourceVersion")
        if body.get("metadata", {}).get("name") != name:
            handler.status(400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)"
                           % (body.get("metadata", {}).get("name"), name))
        elif rv not in (None, "", obj["metadata"]["resourceVersion"]):
            event(event="conflict", object=what + "/" + name)
            handler.status(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                           "modified; please apply your changes to the latest version and try again" % (what, name),
                           details(name, plural, group))
        else:
            body["metadata"]["uid"] = obj["metadata"]["uid"]
            body["metadata"]["creationTimestamp"] = obj["metadata"]["creationTimestamp"]
            body["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            # An update that changes nothing is not written (no new resourceVersion).
            if body != obj:
                store[key] = stamp(body)
                event(event="update", object=what + "/" + name)
            handler.reply(200, store[key])
    elif method == "PATCH":
        if handler.headers.get("content-type", "").split(";")[0].strip() != "application/merge-patch+json":
            handler.status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                           "accepted media types include: application/json-patch+json, "
                           "application/merge-patch+json, application/apply-patch+yaml")
        else:
            obj = store[key]
            merged = merge_patch(json.loads(json.dumps(obj)), body)
            if merged != obj:
                store[key] = stamp(merged)
                event(event="patch", object=what + "/" + name)
            handler.reply(200, store[key])
    elif method == "DELETE":
        obj = store.pop(key)
        event(event="delete", object=what + "/" + name)
        handler.reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                            "details": details(name, plural, group, obj["metadata"]["uid"])})
    else:
        handler.status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    return True


# --- storage: lvms after install (see the docstring) ---
configmaps = {}
claims = {}
lvm_clusters = {}
registry_configs = {}
crd_reads = [0]
LVMS_CRD_NAME = "lvmclusters.lvm.topolvm.io"
LVMS_CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + LVMS_CRD_NAME
LVMCLUSTERS_API = "/apis/lvm.topolvm.io/v1alpha1/namespaces/"
REGISTRY_CONFIGS = "/apis/imageregistry.operator.openshift.io/v1/configs"
# The operator's namespace: openshift-lvm-storage from 4.20 (src/render/lvms.rs).
# A plan's version may name no minor (`stable`): lvms needs one, so any
# namespace serves such a plan (no LVMS there).
_minor = re.search(r"4\.(\d+)", release)
lvms_ns = "openshift-lvm-storage" if _minor and int(_minor.group(1)) >= 20 else "openshift-storage"
LVMS_CSVS = "/apis/operators.coreos.com/v1alpha1/namespaces/%s/clusterserviceversions" % lvms_ns


def lvms_crd_established():
    return lvms_polls is not None and crd_reads[0] > lvms_polls


def lvms_crd():
    established = "True" if lvms_crd_established() else "False"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": LVMS_CRD_NAME, "resourceVersion": "1"},
            "spec": {"group": "lvm.topolvm.io", "scope": "Namespaced",
                     "names": {"plural": "lvmclusters", "kind": "LVMCluster", "singular": "lvmcluster"},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True}]},
            "status": {"conditions": [
                condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
                condition("Established", established, "InitialNamesAccepted" if established == "True"
                          else "Installing", "the initial names have been accepted"
                          if established == "True" else "the CRD is being established")]}}


def lvms_csv():
    phase = "Succeeded" if lvms_crd_established() else "Installing"
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "lvms-operator.v%s" % release, "namespace": lvms_ns},
            "status": {"phase": phase, "reason": "InstallSucceeded" if phase == "Succeeded" else "InstallWaiting"}}


def merge_patch(target, patch):
    """RFC 7386: an object patch merges key by key, null removes; anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


if lvms_polls is not None:
    configmaps[("openshift-monitoring", "cluster-monitoring-config")] = stamp({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-monitoring-config", "namespace": "openshift-monitoring"},
        "data": {"config.yaml": "prometheusK8s:\n  retention: 24h\n"}})
    registry_configs["cluster"] = stamp({
        "apiVersion": "imageregistry.operator.openshift.io/v1", "kind": "Config",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "replicas": 1, "storage": {"emptyDir": {}}}})

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
