#!/usr/bin/env bash
# The host firewall end to end, in namespaces this script creates (needs root,
# nft, iptables, haproxy; firewalld and dbus-daemon for the firewalld phase):
#   - a "host" network namespace with the cluster bridge sl-fwe2e holding the
#     gateway 192.168.151.1 (HTTP artifacts :8080) and the load balancer's
#     address 192.168.151.2 (6443, 22623, 80, 443), and for the lab's IPv6 (it is
#     dual-stack, docs/ipv6.md) the gateway fd00:5:151::1 and the load balancer's
#     fd00:5:151::2, in a private mount namespace (firewalld's D-Bus socket and
#     run directory are tmpfs there);
#   - a "node" network namespace plugged into the bridge at 192.168.151.10 and
#     fd00:5:151::10.
# For each firewall the host can have — nftables with an inet input policy of
# drop, iptables and ip6tables INPUT DROP, and the real firewalld with the bridge
# in libvirt's zone — it shows that a node cannot reach the host services over
# either family with `--host-firewall off`, can with the default, and that
# `serve forget` (destroy's hook) leaves the ruleset exactly as it was.
NAME=firewall-netns
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_TRACE:-}" ] && set -x
tag=fwe2e$$
H=${tag}h
N=${tag}n

if [ "${1:-}" != "--inside" ]; then
  for t in nft iptables ip6tables haproxy; do
    command -v "$t" >/dev/null || fail "$t is missing (scripts/setup installs it)"
  done
  [ "$(id -u)" -eq 0 ] || fail "needs root"
  [ -x "$bin" ] || (cd "$repo" && cargo build -q --bin shiftlab)
  netns_host "$H" sl-fwe2e 192.168.151.1/24 192.168.151.2/32
  netns_node "$N" "fw${$}n" 192.168.151.10/24
  # IPv6 without duplicate address detection: usable at once, as libvirt's are
  # once DAD ends.
  ip -n "$H" addr add fd00:5:151::1/64 dev sl-fwe2e nodad
  ip -n "$H" addr add fd00:5:151::2/128 dev sl-fwe2e nodad
  ip -n "$N" addr add fd00:5:151::10/64 dev eth0 nodad
  netns_inside "$N"
  exit $?
fi

# ---- inside the host namespace, with a private mount namespace -------------
N=$2
e2e_workdir firewall-netns
state=$work/state
sl() { "$bin" --state-dir "$state" "$@"; }
fail() {
  echo "FAIL $NAME: $*"
  echo "--- serve log"
  tail -30 "$work/serve.log" 2>/dev/null
  exit 1
}
# From the node: can it open a TCP connection to the host's address:port?
reach() { ip netns exec "$N" timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }
# Every opening: the HTTP artifacts (IPv4) and the load balancer on both VIPs.
nodes_reach_all() {
  local a
  reach 192.168.151.1 8080 || return 1
  for a in 192.168.151.2 fd00:5:151::2; do
    for p in 6443 22623 443 80; do reach "$a" "$p" || return 1; done
  done
}
# A listener of this namespace answers locally (lo is accepted by every ruleset here).
serving() { timeout 2 bash -c 'exec 3<>/dev/tcp/192.168.151.1/8080' 2>/dev/null; }

cf=$(cluster_file fw '[192.168.151.0/24, "fd00:5:151::/64"]' "method: upi" "ctlplanes: 3" "workers: 1")
echo "  bridge: sl-fwe2e" >>"$cf" # under network:, which cluster_file writes last
serve=
on_exit 'stop_pid "$serve"'
start_serve() { # --host-firewall value
  mkdir -p "$state/clusters/fw"
  rm -f "$state/clusters/fw/serve-stopped"
  HOME=$work sl plan -f "$cf" -o json >"$state/clusters/fw/plan.json" 2>/dev/null
  # Not through sl(): $! must be serve itself, not a subshell around it.
  SHIFTLAB_LOG=info "$bin" --state-dir "$state" serve --host-dns off --host-firewall "$1" --scan-interval 1 >>"$work/serve.log" 2>&1 &
  serve=$!
  wait_for 10 "serve's control socket" test -S "$state/serve.sock"
  wait_for 10 "the HTTP artifact server" serving
}
stop_serve() {
  stop_pid "$serve" || true # (serve's exit status on SIGTERM is not the point)
  serve=
  rm -rf "$state/clusters/fw" "$state/serve.sock"
}

# phase NAME SNAPSHOT-COMMAND [WHILE-OPEN-COMMAND]: the three checks for one firewall.
phase() {
  local name=$1 snap=$2 while_open=${3:-} before after
  step "$name: blocked without shiftlab's rules"
  before=$(eval "$snap")
  start_serve off
  reach 192.168.151.1 8080 && fail "$name: the node reaches :8080 although the firewall drops it"
  reach 192.168.151.2 6443 && fail "$name: the node reaches :6443 although the firewall drops it"
  reach fd00:5:151::2 6443 && fail "$name: the node reaches [fd00:5:151::2]:6443 although the firewall drops it"
  stop_serve
  [ "$(eval "$snap")" = "$before" ] || fail "$name: --host-firewall off changed the ruleset"
  step "$name: open with --host-firewall auto"
  start_serve auto
  wait_for 15 "the node to reach every service" nodes_reach_all
  sl serve status fw -o json | jq -e '.host_firewall.rules | length >= 9' >/dev/null ||
    fail "$name: status does not show the rules: $(sl serve status fw -o json)"
  # 5 IPv4 openings (the load balancer's 4, HTTP), 4 IPv6 (the load balancer's).
  jq -e '[.openings.ports[].address | select(contains(":"))] | length == 4' "$state/clusters/fw/host-firewall.json" >/dev/null &&
    jq -e '.openings.ports | length == 9' "$state/clusters/fw/host-firewall.json" >/dev/null ||
    fail "$name: record $(cat "$state/clusters/fw/host-firewall.json")"
  [ -z "$while_open" ] || eval "$while_open"
  step "$name: destroy's hook takes exactly that away"
  sl serve forget fw || fail "$name: forget"
  after=$(eval "$snap")
  [ "$after" = "$before" ] || fail "$name: ruleset differs after forget:
$(diff <(echo "$before") <(echo "$after"))"
  [ ! -e "$state/clusters/fw/host-firewall.json" ] || fail "$name: record left behind"
  stop_serve
}

# 1. nftables, a default-drop input chain of the admin's own table (ICMPv6
#    accepted: without neighbour discovery no IPv6 works at all).
nft -f - <<'EOF'
table inet filter {
  chain input {
    type filter hook input priority 0; policy drop;
    ct state established,related accept
    iif "lo" accept
    meta l4proto ipv6-icmp accept
  }
}
EOF
phase nftables 'nft list ruleset'
nft flush ruleset

# 2. iptables and ip6tables INPUT DROP (iptables-nft on Debian 12).
for t in iptables ip6tables; do
  $t -w -A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  $t -w -A INPUT -i lo -j ACCEPT
  $t -w -P INPUT DROP
done
ip6tables -w -A INPUT -p ipv6-icmp -j ACCEPT
phase iptables 'iptables -w -S; ip6tables -w -S'
for t in iptables ip6tables; do
  $t -w -P INPUT ACCEPT
  $t -w -F INPUT
done
nft flush ruleset

# 3. The real firewalld, on a private system bus, with the bridge in libvirt's
#    zone as libvirt puts it (firewall-cmd --change-interface, runtime).
if command -v firewalld >/dev/null && command -v dbus-daemon >/dev/null; then
  mount -t tmpfs tmpfs /run/dbus 2>/dev/null || { mkdir -p /run/dbus && mount -t tmpfs tmpfs /run/dbus; }
  mkdir -p /run/firewalld "$work/fwlog"
  mount -t tmpfs tmpfs /run/firewalld
  mount --bind "$work/fwlog" /var/log 2>/dev/null || true
  dbus-daemon --system --nofork --nopidfile >"$work/dbus.log" 2>&1 &
  dbus=$!
  on_exit 'stop_pid "$dbus"'
  wait_for 10 "the private system bus" test -S /run/dbus/system_bus_socket
  firewalld --nofork --nopid >"$work/firewalld.log" 2>&1 &
  fwd=$!
  on_exit 'stop_pid "$fwd"'
  wait_for 60 "firewalld" sh -c '[ "$(firewall-cmd --state 2>/dev/null)" = running ]'
  firewall-cmd --zone=libvirt --change-interface=sl-fwe2e >/dev/null || fail "binding the bridge to zone libvirt"
  [ "$(firewall-cmd --get-zone-of-interface=sl-fwe2e)" = libvirt ] || fail "zone of the bridge"
  permanent_before=$(firewall-cmd --permanent --zone=libvirt --list-rich-rules)
  # A reload drops runtime rules (and the bridge's runtime zone, which libvirt
  # sets again on firewalld's Reloaded signal); serve adds them back.
  reload='firewall-cmd --reload >/dev/null
    firewall-cmd --zone=libvirt --change-interface=sl-fwe2e >/dev/null
    reach 192.168.151.1 8080 && fail "firewalld: open right after a reload"
    sl serve notify fw || fail "notify"
    wait_for 15 "the rules back after a firewalld reload" nodes_reach_all'
  phase firewalld 'firewall-cmd --zone=libvirt --list-all; nft list ruleset' "$reload"
  [ "$(firewall-cmd --permanent --zone=libvirt --list-rich-rules)" = "$permanent_before" ] ||
    fail "firewalld: a permanent rule was written"
else
  echo "SKIP firewalld phase: firewalld or dbus-daemon not installed (scripts/setup installs them)"
fi
echo "firewall-netns: all checks passed"
