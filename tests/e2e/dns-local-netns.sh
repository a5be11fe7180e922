#!/usr/bin/env bash
# `serve --host-dns local` end to end, in a network namespace and a mount
# namespace this script creates (needs root, dig, getent, dnsmasq, haproxy):
#   - the cluster bridge sl-dnse2e with the gateway and the LB address;
#   - a stand-in for the host's own nameserver: dnsmasq on 127.0.0.1:53 that
#     knows only upstream.example.test;
#   - /etc/resolv.conf a bind-mounted copy naming 127.0.0.1.
# Checks with the real glibc resolver (getent) and dig: a user's route under
# *.apps resolves on the host, other names still go to the host's nameserver
# (REFUSED, next nameserver), stopping serve withdraws the block, and destroy's
# hook gives resolv.conf back byte for byte.
NAME=dns-local-netns
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_TRACE:-}" ] && set -x
H=dnse2e$$

if [ "${1:-}" != "--inside" ]; then
  for t in dig getent dnsmasq haproxy; do
    command -v "$t" >/dev/null || fail "$t is missing"
  done
  [ "$(id -u)" -eq 0 ] || fail "needs root"
  [ -x "$bin" ] || (cd "$repo" && cargo build -q --bin shiftlab)
  netns_host "$H" sl-dnse2e 192.168.152.1/24 192.168.152.2/32
  netns_inside
  exit $?
fi

# ---- inside the namespaces ---------------------------------------------------
e2e_workdir dns-local-netns
state=$work/state
fail() {
  echo "FAIL $NAME: $*"
  echo "--- resolv.conf"; cat /etc/resolv.conf
  echo "--- serve log"; tail -30 "$work/serve.log" 2>/dev/null
  exit 1
}
printf '# the host'"'"'s own resolver (a stand-in)\nnameserver 127.0.0.1\n' >"$work/resolv.orig"
cp "$work/resolv.orig" "$work/resolv.conf"
mount --bind "$work/resolv.conf" /etc/resolv.conf
on_exit 'umount /etc/resolv.conf'
# NSS through DNS only: the hosts file must not answer for us.
printf 'hosts: dns\n' >"$work/nsswitch.conf"
mount --bind "$work/nsswitch.conf" /etc/nsswitch.conf
on_exit 'umount /etc/nsswitch.conf'

dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces \
  --listen-address=127.0.0.1 --port=53 --address=/upstream.example.test/10.9.9.9 \
  --pid-file= --log-facility=- >"$work/dnsmasq.log" 2>&1 &
upstream=$!
on_exit 'stop_pid "$upstream"'
wait_for 10 "the stand-in upstream" sh -c 'dig +short +time=1 +tries=1 @127.0.0.1 upstream.example.test | grep -x 10.9.9.9 >/dev/null'

cf=$(cluster_file loc 192.168.152.0/24 "method: upi" "ctlplanes: 3" "workers: 1")
echo "  bridge: sl-dnse2e" >>"$cf" # under network:, which cluster_file writes last
mkdir -p "$state/clusters/loc"
HOME=$work "$bin" --state-dir "$state" plan -f "$cf" -o json >"$state/clusters/loc/plan.json" 2>/dev/null

step "before: a route name does not resolve on the host"
getent hosts myapp-myns.apps.loc.lab.test && fail "resolved before serve"

step "serve --host-dns local"
SHIFTLAB_LOG=info "$bin" --state-dir "$state" serve --host-dns local --host-firewall off --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
on_exit 'stop_pid "$serve"'
wait_for 15 "the local block in resolv.conf" grep -qx 'nameserver 127.0.1.53' /etc/resolv.conf
[ "$(head -1 /etc/resolv.conf)" = "# shiftlab begin local-dns" ] || fail "the block is not first"
[ "$(dig +short @127.0.1.53 api.loc.lab.test)" = 192.168.152.2 ] || fail "dig api"
[ "$(dig +short @127.0.1.53 +tcp console-openshift-console.apps.loc.lab.test)" = 192.168.152.2 ] || fail "dig over tcp"
dig @127.0.1.53 upstream.example.test | grep 'status: REFUSED' >/dev/null || fail "a foreign name is not refused"
dig @127.0.1.53 nope.loc.lab.test | grep 'status: NXDOMAIN' >/dev/null || fail "an unknown cluster name is not NXDOMAIN"
# glibc: the cluster's zone from serve, any route name, and everything else from
# the host's own nameserver after the REFUSED.
getent hosts myapp-myns.apps.loc.lab.test | grep '^192\.168\.152\.2 ' >/dev/null || fail "a user's route does not resolve"
getent hosts api.loc.lab.test | grep '^192\.168\.152\.2 ' >/dev/null || fail "api does not resolve"
getent hosts upstream.example.test | grep '^10\.9\.9\.9 ' >/dev/null || fail "other names no longer reach the host's nameserver"
sl_status=$("$bin" --state-dir "$state" serve status loc -o json)
[ "$(jq -r .host_dns.configured <<<"$sl_status")" = true ] || fail "status: $sl_status"

step "a resolv.conf rewritten under serve gets the block back"
cp "$work/resolv.orig" /etc/resolv.conf
wait_for 15 "the block again" grep -qx 'nameserver 127.0.1.53' /etc/resolv.conf

step "stopping serve withdraws the block; restarting puts it back"
stop_pid "$serve" || true
cmp /etc/resolv.conf "$work/resolv.orig" || fail "resolv.conf not restored when serve stopped"
getent hosts upstream.example.test >/dev/null || fail "host DNS after serve stopped"
SHIFTLAB_LOG=info "$bin" --state-dir "$state" serve --host-dns local --host-firewall off --scan-interval 1 >>"$work/serve.log" 2>&1 &
serve=$!
wait_for 15 "the block after the restart" grep -qx 'nameserver 127.0.1.53' /etc/resolv.conf
getent hosts x.apps.loc.lab.test | grep '^192\.168\.152\.2 ' >/dev/null || fail "after the restart"

step "destroy's hook: resolv.conf byte for byte"
"$bin" --state-dir "$state" serve forget loc || fail "forget"
cmp /etc/resolv.conf "$work/resolv.orig" || fail "resolv.conf not restored byte for byte"
[ -z "$(dig +short +time=1 +tries=1 @127.0.1.53 api.loc.lab.test)" ] || fail "still answering for a forgotten cluster"
echo "dns-local-netns: all checks passed"
