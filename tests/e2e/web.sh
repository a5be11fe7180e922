#!/usr/bin/env bash
# tests/e2e/web.sh IMAGE — serve's web page in a real browser, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/web.sh /path/to/standin.qcow2
#
# `shiftlab serve --web 127.0.0.1:PORT` runs beside the sandbox's libvirtd while
# `shiftlab create cluster` installs a 3+2 rehearsal (stand-ins, the fake
# openshift-install from a loopback mirror, as tests/e2e/install.sh). Headless
# Chromium (Debian's, driven by web-page.py over the DevTools pipe) sees the
# target running now during the install; after it, every node, backend state and
# target of the API on the page, accessible and phone-sized; a screenshot is taken
# into the work directory, or to WEB_SCREENSHOT when set (the committed
# docs/img/serve-page.png changes only when asked:
# WEB_SCREENSHOT=$PWD/docs/img/serve-page.png). A stand-in
# destroyed with virsh shows its backend DOWN on the page, without a reload,
# within 5 s of the API and within the health-check bound. The health panel says
# "API not reachable: …" for the installer's API (the stand-ins speak no TLS on
# 6443), then, the admin kubeconfig pointed at a stand-in API
# (tests/e2e/kube-standin.py --troubled), shows its degraded operator and pending
# CSR, the nodes Ready, the oc login and export KUBECONFIG lines, the PTR records
# collapsed, the StorageClass of the plan and of the API, the NFS export's server
# and space, the users (admins marked, no password). The page has a token
# (--web-token-file, on loopback: console logs are shown only then); without it
# every request is 401. No response carries the secrets planted: pull secret,
# kubeadmin password, BMC password, proxy password, a private key (also echoed
# into a node's console log, which the page shows redacted).
set -euo pipefail

NAME=web
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
here=$repo/tests/e2e
command -v chromium >/dev/null || fail "no chromium (scripts/setup --tests installs it)"
e2e_workdir web
export SHIFTLAB_CACHE=$work/cache
cp /etc/hosts "$work/hosts"
mount --bind "$work/hosts" /etc/hosts
on_exit 'umount /etc/hosts 2>/dev/null'
serve="" create_pid="" kube_api=""
on_exit 'stop_pid "$serve"'
on_exit 'stop_pid "$kube_api"'
on_exit 'stop_pid "$create_pid"'
destroy_on_exit web
fail() {
	echo "FAIL $NAME: $*"
	echo "--- serve log"
	tail -30 "$work/serve.log" 2>/dev/null
	echo "--- create log"
	tail -15 "$work/create.out" 2>/dev/null
	exit 1
}

# The release mirror on loopback (lib.sh): release $V, the stand-in as CoreOS.
release_mirror
mirror_qcow2_stream "$IMAGE"

# Planted secrets.
pull_auth=$(printf 'planted:pull-%s' "$RANDOM$RANDOM" | base64 -w0)
printf '{"auths":{"registry.example":{"auth":"%s","email":"e2e@example.com"}}}\n' "$pull_auth" >"$work/pull-secret.json"
bmc_password="planted-bmc-$RANDOM$RANDOM$RANDOM"
f=$(cluster_file web 192.168.195.0/24 "version: $V" "mirror: $mirror_url" "method: upi" \
	"ctlplanes: 3" "workers: 2" "pull_secret: $work/pull-secret.json" \
	"storage: nfs" "users: [{name: alice, admin: true}, {name: bob}]")

# The page's token: console logs are shown only with it.
export WEB_TOKEN
WEB_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$WEB_TOKEN" >"$work/web-token")
# wcurl ARGS…: curl with the token.
wcurl() { curl -H "Authorization: Bearer $WEB_TOKEN" "$@"; }

# api_is JQ-FILTER [CLUSTER]: the cluster's API value satisfies the filter.
api_is() {
	local j
	j=$(wcurl -fs "$base/api/clusters/${2:-web}") && jq -e "$1" <<<"$j" >/dev/null
}

step "serve with the web page on a random loopback port"
wport=$((20000 + RANDOM % 20000))
while [[ $mirror_url == *:$wport ]]; do wport=$((20000 + RANDOM % 20000)); done
base=http://127.0.0.1:$wport
SHIFTLAB_LOG=info "$bin" serve --host-dns hosts --scan-interval 1 --web "127.0.0.1:$wport" \
	--web-token-file "$work/web-token" >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "the web page" wcurl -fs "$base/api/clusters"
[[ $(wcurl -fs "$base/") == *'<main id="main"'* ]] || fail "no page at /"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/api/clusters") == 401 ]] || fail "the API answered without the token"
if "$bin" serve --web 0.0.0.0:1 --scan-interval 1 >"$work/refused.out" 2>&1; then fail "a non-loopback --web without a token was accepted"; fi
grep -q -- '--web-token-file' "$work/refused.out" || fail "the refusal does not say what to do: $(cat "$work/refused.out")"

step "create cluster (3 control planes, 2 workers); the page shows the target running now"
"$bin" create cluster -f "$f" >"$work/create.out" 2>&1 &
create_pid=$!
wait_for 300 "the cluster's libvirt objects" api_is '.nodes | length > 0'
# The BMC password file is the lab's (method ipi writes it; here it is planted).
printf '%s\n' "$bmc_password" >"$SHIFTLAB_HOME/clusters/web/bmc-password"
chmod 600 "$SHIFTLAB_HOME/clusters/web/bmc-password"
python3 "$here/web-page.py" running "$base" web || fail "the running target"
wait "$create_pid" || fail "create cluster failed"
create_pid=""
grep -q 'console: *https://console-openshift-console.apps.web.lab.test' "$work/create.out" || fail "the install did not complete"
"$bin" status web -o json | jq -e 'all(.install.targets[]; .status == "done")' >/dev/null || fail "not every target is done"

step "the page shows the lab's full state, as status -o json does"
# Every backend of the finished install UP (the bootstrap removed) before the page is checked.
wait_for 300 "every backend UP" api_is '[.services.load_balancer.frontends[].backends[] | select(.bootstrap | not) | .status] | all(. == "UP")'
# One function: the API's status keys are status -o json's.
diff <("$bin" status web -o json | jq -S '{cluster, network, nodes: [.nodes[] | {name, role, mac, planned_ip}], install: .install.targets | map({target, status, started, finished})}') \
	<(wcurl -fs "$base/api/clusters/web" | jq -S '{cluster, network, nodes: [.nodes[] | {name, role, mac, planned_ip}], install: .install.targets | map({target, status, started, finished})}') ||
	fail "the API and status -o json differ"
wcurl -fs "$base/api/clusters" | jq -e '.clusters[] | select(.cluster == "web") | .method == "upi" and .nodes_running == 5 and .nodes_total == 5 and .install.done == .install.total' >/dev/null ||
	fail "overview: $(wcurl -fs "$base/api/clusters")"
# Its timestamps differ on every run: the committed one is rewritten only when asked.
shot=${WEB_SCREENSHOT:-$work/serve-page.png}
mkdir -p "$(dirname "$shot")"
python3 "$here/web-page.py" full "$base" web "$shot" || fail "the full page"
[[ -s $shot ]] || fail "no screenshot"

step "the health panel: API not reachable, then a degraded operator and a pending CSR"
# admin_kubeconfig SERVER TOKEN: the admin kubeconfig, a context as the real
# installer's has (pkg/asset/kubeconfig/admin.go; the fake's has none).
api_token="planted-api-token-$RANDOM$RANDOM"
admin_kubeconfig() {
	(umask 077 && printf '%s\n' "apiVersion: v1" "kind: Config" "clusters:" "- name: web" "  cluster:" \
		"    server: $1" "contexts:" "- name: admin" "  context: {cluster: web, user: admin}" \
		"current-context: admin" "users:" "- name: admin" "  user: {token: $2}" \
		>"$SHIFTLAB_HOME/clusters/web/assets/auth/kubeconfig")
}
# The installer's API, https://api.web.lab.test:6443, where the stand-ins answer
# plain HTTP: no API for the panel, the rest of the page stays.
admin_kubeconfig https://api.web.lab.test:6443 "$api_token"
wait_for 30 "the health panel's verdict on the API" \
	api_is '.health.state == "unreachable" and (.health.reason | startswith("loading kubeconfig") | not)'
python3 "$here/web-page.py" health "$base" web unreachable || fail "API not reachable on the page"
# The stand-in API: authentication Degraded, a worker's serving CSR pending.
python3 "$here/kube-standin.py" --troubled "$SHIFTLAB_HOME/clusters/web/plan.json" /var/log/libvirt/qemu \
	"$work/api.port" "$work/api.events" >"$work/api.log" 2>&1 &
kube_api=$!
wait_for 20 "the stand-in API" test -s "$work/api.port"
api_url=http://127.0.0.1:$(cat "$work/api.port")
admin_kubeconfig "$api_url" "$api_token"
csrs=$(curl -fs "$api_url/apis/certificates.k8s.io/v1/certificatesigningrequests")
csr=$(jq -r '.items[0].metadata.name' <<<"$csrs")
csr_request=$(jq -r '.items[0].spec.request' <<<"$csrs")
wait_for 30 "the stand-in's health on the API" api_is '.health.state == "ok"'
python3 "$here/web-page.py" health "$base" web degraded authentication "$csr" || fail "the health panel: $(tail -5 "$work/api.log")"

step "no API response carries a planted secret"
kubeadmin=$(cat "$SHIFTLAB_HOME/clusters/web/assets/auth/kubeadmin-password")
[[ ${#kubeadmin} -ge 8 ]] || fail "no kubeadmin password was written"
# A node that echoes them on its console (and a proxy URL with its password, a
# private key): the page's console tail shows them redacted.
log=$(wcurl -fs "$base/api/clusters/web" | jq -r '.nodes[] | select(.name == "web-worker-0") | .console_log')
proxy_password="planted-proxy-$RANDOM$RANDOM"
key_body="MIIEplanted$RANDOM$RANDOM"
printf 'e2e: %s %s %s\nproxy http://e2e:%s@proxy.lab.test:3128\n-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\n' \
	"$kubeadmin" "$bmc_password" "$pull_auth" "$proxy_password" "$key_body" >>"$log"
sleep 1.5
responses=$work/responses
mkdir -p "$responses"
wcurl -fs "$base/api/clusters" >"$responses/clusters.json"
wcurl -fs "$base/api/clusters/web" >"$responses/web.json"
wcurl -s --max-time 4 "$base/api/clusters/web/events" >"$responses/events.txt" || true
wcurl -s "$base/api/clusters/nope" >"$responses/nope.json"
wcurl -fs "$base/" >"$responses/index.html"
wcurl -fs "$base/assets/app.js" >"$responses/app.js"
curl -s "$base/api/clusters/web" >"$responses/no-token.json"
grep -q '^event: cluster' "$responses/events.txt" || fail "no cluster event on the stream"
alice_password=$(cat "$SHIFTLAB_HOME/clusters/web/assets/auth/alice-password")
[[ ${#alice_password} -ge 8 ]] || fail "no password was generated for alice"
for s in "$kubeadmin" "$alice_password" "$bmc_password" "$pull_auth" "registry.example" "$proxy_password" "$key_body" "$api_token" "$csr_request"; do
	if grep -rlF -- "$s" "$responses"; then fail "a planted secret is in an API response"; fi
done
jq -e '.consoles[] | select(.node == "web-worker-0") | .lines | any(startswith("e2e: <redacted> <redacted> <redacted>"))' "$responses/web.json" >/dev/null ||
	fail "the console line with the secrets is not shown redacted"
jq -e '.consoles[] | select(.node == "web-worker-0") | .lines | any(. == "proxy http://e2e:<redacted>@proxy.lab.test:3128") and any(. == "<redacted private key>")' "$responses/web.json" >/dev/null ||
	fail "the proxy URL or the private key is not shown redacted"
echo "no planted secret in $(ls "$responses" | wc -l) responses"

step "a destroyed stand-in's backend goes DOWN on the page without a reload"
# HAProxy (render/haproxy.rs): the next check within inter 5 s, then fall 3
# failing checks fastinter 2 s apart, each up to timeout check 5 s (a destroyed
# node's address answers no ARP): DOWN within 5 + 3 × (5 + 2) = 26 s of the
# kill, 40 s with room for a loaded machine; on the page within 5 s of the API.
python3 "$here/web-page.py" kill "$base" web api/web-ctlplane-2 40 -- virsh destroy web-ctlplane-2 ||
	fail "the killed stand-in"

step "destroy"
"$bin" destroy cluster web >/dev/null
wait_for 10 "the cluster gone from the overview" sh -c "curl -fs -H 'Authorization: Bearer $WEB_TOKEN' $base/api/clusters | grep -x '{\"clusters\":\[\]}'"

echo "PASS $NAME"
