#!/usr/bin/env bash
# tests/e2e/ipv6.sh IMAGE — a dual-stack lab's libvirt network (docs/ipv6.md) as
# the sandbox's real libvirt and dnsmasq take it, and a stand-in node (IMAGE) on it.
#
#   scripts/sandbox run -- tests/e2e/ipv6.sh /path/to/standin.qcow2
#
# The network shiftlab renders for tests/golden/ipv6/upi.cluster.yaml (the
# golden that tests/ipv6.rs keeps equal to the renderer's output) is defined and
# started: NAT66, the load balancer's IPv6 VIP on the host side of the bridge.
# A client on the bridge with a node's MAC, asking as OpenShift's NetworkManager
# does (a link-layer DUID: isc-dhcp-client's dhclient -6 -D LL), gets the router
# advertisement and, by DHCPv6, the node's planned IPv6 address; a client with a
# MAC the plan does not know gets one from the pool. dnsmasq answers AAAA,
# ip6.arpa PTR and the IPv6 *.apps over IPv6. A stand-in booted with a node's MAC
# takes that node's planned IPv6 by DHCPv6 and answers on it. First, doctor's ipv6 check is held
# to libvirt's rule: an uplink whose routes came from router advertisements (a
# netns on a veth whose dnsmasq sends them) with accept_ra 1 makes doctor fail
# naming it and libvirt refuse to start the network; with accept_ra 2 both go on.
set -euo pipefail

NAME=ipv6
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir ipv6
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}
command -v dhclient >/dev/null || fail "no dhclient (Debian's isc-dhcp-client: scripts/setup --tests)"

file=$repo/tests/golden/ipv6/upi.cluster.yaml
net=shiftlab-ds-upi
br=sl-ds-upi
gw6=fd00:5:140::1
cd=ds-upi.lab.test
"$bin" plan -f "$file" -o json >"$work/plan.json"
ipv6_of() { jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .ipv6' "$work/plan.json"; }
mac_of() { jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .mac' "$work/plan.json"; }
api6=$(jq -r .vips.api6 "$work/plan.json")
[[ $api6 == fd00:5:140::2 ]] || fail "the plan's IPv6 API VIP is $api6"

ipv6_verdict() { # the doctor's ipv6 check as "severity verdict"
	"$bin" doctor -f "$file" -o json >"$work/doctor.json" || true
	jq -r '.checks[] | select(.id == "ipv6") | .severity + " " + .verdict' "$work/doctor.json"
}

step "doctor's ipv6 check and libvirt agree on routes from router advertisements"
v=$(ipv6_verdict)
[[ $v == "ok "* ]] || fail "doctor's ipv6 check on the sandbox: $v"
# An uplink: sl6ra here, its peer in a netns whose dnsmasq advertises a prefix
# and a default route; the kernel here learns them (RTF_ADDRCONF) while IPv6
# forwarding is still off.
up=slv6up
on_exit "ip netns del $up 2>/dev/null"
ip netns add "$up"
on_exit "ip link del sl6ra 2>/dev/null"
ip link add sl6ra type veth peer name sl6rb netns "$up"
ip -n "$up" link set lo up
ip -n "$up" addr add 2001:db8:99::1/64 dev sl6rb nodad
ip -n "$up" link set sl6rb up
echo 1 >/proc/sys/net/ipv6/conf/sl6ra/accept_ra
ip link set sl6ra up
ip netns exec "$up" dnsmasq --keep-in-foreground --port=0 --no-resolv --no-hosts --user=root \
	--interface=sl6rb --bind-interfaces --enable-ra --dhcp-range=2001:db8:99::,ra-only,64 \
	--dhcp-leasefile="$work/up.leases" --pid-file="$work/up.pid" --log-facility="$work/up.log" &
ra=$!
on_exit "stop_pid $ra"
wait_for 30 "sl6ra to learn its routes from the advertisements" \
	bash -c "ip -6 route show dev sl6ra proto ra | grep '^default via fe80::' >/dev/null"
ip -6 route show dev sl6ra proto ra >"$work/ra-routes"
stop_pid "$ra" # the learned routes stay until they expire
v=$(ipv6_verdict)
[[ $v == "fail "*"sl6ra (accept_ra 1)"* ]] || fail "doctor's ipv6 check with advertised routes on sl6ra ($(cat "$work/ra-routes")): $v"
virsh -q net-define "$repo/tests/golden/ipv6/upi.network.xml" >/dev/null
on_exit "virsh -q net-destroy $net >/dev/null 2>&1; virsh -q net-undefine $net >/dev/null 2>&1"
if virsh net-start "$net" >"$work/refused.out" 2>&1; then fail "libvirt started the network though doctor said it would not"; fi
contains 'accept_ra set to 2' "$work/refused.out" || fail "libvirt refused otherwise: $(cat "$work/refused.out")"
contains 'sl6ra' "$work/refused.out" || fail "libvirt named another link: $(cat "$work/refused.out")"
echo 2 >/proc/sys/net/ipv6/conf/sl6ra/accept_ra
v=$(ipv6_verdict)
[[ $v == "ok "* ]] || fail "doctor's ipv6 check with accept_ra 2: $v"

step "the network started: the bridge's addresses, IPv6 forwarding"
virsh net-start "$net" >"$work/started.out" 2>&1 || fail "libvirt refused with accept_ra 2: $(cat "$work/started.out")"
ip -6 addr show dev "$br" >"$work/br.addr"
for a in "$gw6/64" "$api6/128"; do
	contains -F "inet6 $a" "$work/br.addr" || fail "the bridge has not $a: $(cat "$work/br.addr")"
done
[[ $(cat /proc/sys/net/ipv6/conf/all/forwarding) == 1 ]] || fail "libvirt did not turn IPv6 forwarding on for NAT66"

# client NS MAC: a netns on the lab bridge whose eth0 has MAC.
client() {
	local ns=$1 mac=$2
	on_exit "ip netns del $ns 2>/dev/null"
	ip netns add "$ns"
	# No duplicate address detection: dhclient binds the link-local address at once.
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
	ip link add "v$ns" type veth peer name eth0 netns "$ns"
	ip -n "$ns" link set eth0 address "$mac"
	ip link set "v$ns" master "$br" up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 up
}
# lease NS: its DHCPv6 address into $leased, from dhclient -6 with a link-layer
# DUID configuring nothing (-sf /bin/true); the lease file says what it got and
# which DUID it sent.
lease() {
	local ns=$1
	on_exit "kill \$(cat $work/$ns.pid 2>/dev/null) 2>/dev/null"
	ip netns exec "$ns" timeout 60 dhclient -6 -D LL -1 -v -sf /bin/true \
		-lf "$work/$ns.leases" -pf "$work/$ns.pid" eth0 >"$work/$ns.dhclient" 2>&1 ||
		fail "$ns got no DHCPv6 lease: $(tail -5 "$work/$ns.dhclient")"
	leased=$(sed -n 's/^ *iaaddr \([0-9a-f:]*\) {.*/\1/p' "$work/$ns.leases" | tail -n 1)
	[[ -n $leased ]] || fail "$ns: no address in its lease: $(cat "$work/$ns.leases")"
}

step "router advertisements and DHCPv6 by DUID-LL: worker-0's planned address"
w0=ds-upi-worker-0
client slv6w0 "$(mac_of "$w0")"
wait_for 30 "a default route from libvirt's router advertisements" \
	bash -c "ip -n slv6w0 -6 route show proto ra | grep '^default via fe80::' >/dev/null"
lease slv6w0
got=$leased
[[ $got == "$(ipv6_of "$w0")" ]] || fail "$w0's MAC got $got by DHCPv6, planned $(ipv6_of "$w0"): $(cat "$work/slv6w0.leases")"
# The DUID dhclient sent: type 3 (link layer), hardware 1, the MAC (dhclient
# writes it without leading zeros).
duid=$(printf '0:3:0:1:%s' "$(mac_of "$w0" | sed 's/\(^\|:\)0\([0-9a-f]\)/\1\2/g')")
contains -F "$duid" "$work/slv6w0.leases" || fail "dhclient sent no DUID-LL $duid: $(cat "$work/slv6w0.leases")"
ip -n slv6w0 addr add "$got/64" dev eth0

step "a MAC the plan does not know: an address from the pool"
client slv6x 52:54:00:66:66:66
lease slv6x
other=$leased
read -r pool_start pool_end < <(jq -r '.network.ipv6.dhcp | .start + " " + .end' "$work/plan.json")
python3 -c 'import sys; from ipaddress import ip_address as a; sys.exit(not a(sys.argv[2]) <= a(sys.argv[1]) <= a(sys.argv[3]))' \
	"$other" "$pool_start" "$pool_end" || fail "an unknown MAC got $other, not from the pool $pool_start to $pool_end"

step "dnsmasq over IPv6: AAAA, ip6.arpa PTR, the IPv6 *.apps"
q() { ip netns exec slv6w0 dig +short +time=2 +tries=3 @"$gw6" "$@"; }
[[ $(q AAAA "api.$cd") == "$api6" ]] || fail "AAAA api: $(q AAAA "api.$cd")"
[[ $(q AAAA "api-int.$cd") == "$api6" ]] || fail "AAAA api-int: $(q AAAA "api-int.$cd")"
[[ $(q AAAA "console-openshift-console.apps.$cd") == "$api6" ]] || fail "AAAA *.apps: $(q AAAA "console-openshift-console.apps.$cd")"
[[ $(q A "console-openshift-console.apps.$cd") == 192.168.140.2 ]] || fail "A *.apps: $(q A "console-openshift-console.apps.$cd")"
for n in ds-upi-ctlplane-0 "$w0"; do
	[[ $(q AAAA "$n.$cd") == "$(ipv6_of "$n")" ]] || fail "AAAA $n: $(q AAAA "$n.$cd")"
	[[ $(q -x "$(ipv6_of "$n")") == "$n.$cd." ]] || fail "PTR of $(ipv6_of "$n"): $(q -x "$(ipv6_of "$n")")"
done

step "a stand-in node on the lab: its planned IPv6 by DHCPv6, as a node's NetworkManager asks"
# ctlplane-0's MAC, a thin overlay of IMAGE: after the router advertisement the
# stand-in runs dhclient -6 -D LL (docs/standin.md) and reports what it bound.
n0=ds-upi-ctlplane-0
pooldir=$work/pool
virsh_pool slv6pool "$pooldir"
virsh -q vol-create-as slv6pool base.qcow2 "$(stat -c %s "$IMAGE")" --format qcow2 >/dev/null
virsh -q vol-upload --pool slv6pool base.qcow2 "$IMAGE"
virsh -q vol-create-as slv6pool "$n0.qcow2" 64M --format qcow2 \
	--backing-vol base.qcow2 --backing-vol-format qcow2 >/dev/null
cat >"$work/$n0.xml" <<EOX
<domain type='qemu'>
  <name>$n0</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <features><acpi/></features>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$pooldir/$n0.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='$(mac_of "$n0")'/>
      <source network='$net'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'><source path='$work/$n0.console'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOX
virsh_domain "$n0" "$work/$n0.xml" "$work/$n0.console"
virsh -q start "$n0" >/dev/null
reported_ipv6() {
	tr -d '\r' <"$work/$n0.console" 2>/dev/null | sed -n 's/.*SHIFTLAB-STANDIN-REPORT \({.*}\)$/\1/p' |
		tail -n 1 | jq -r '.ipv6 // empty' 2>/dev/null
}
# Booting under TCG on a loaded host, then the advertisement, then DHCPv6.
deadline=$((SECONDS + 300))
until [[ -n $(reported_ipv6) ]]; do
	((SECONDS < deadline)) || {
		tail -n 20 "$work/$n0.console"
		fail "$n0 reported no IPv6 address within 300 s"
	}
	sleep 2
done
[[ $(reported_ipv6) == "$(ipv6_of "$n0")" ]] ||
	fail "$n0 took $(reported_ipv6) by DHCPv6, planned $(ipv6_of "$n0"): $(grep 'standin: ' "$work/$n0.console" | tail -n 5)"
# The DNS server DHCPv6 named, which a node asks over IPv6: the lab's dnsmasq.
dns6=$(tr -d '\r' <"$work/$n0.console" | sed -n 's/.*SHIFTLAB-STANDIN-REPORT \({.*}\)$/\1/p' | tail -n 1 | jq -r '.dns6 // empty')
[[ $dns6 == "$gw6" ]] || fail "DHCPv6 named $n0 the DNS server '$dns6', not the lab's dnsmasq at $gw6"
# The node answers on it: its report port, over IPv6, from the lab's gateway.
curl -fsS -m 10 "http://[$(ipv6_of "$n0")]:8000/report" | jq -e --arg a "$(ipv6_of "$n0")" '.ipv6 == $a' >/dev/null || {
	ip -6 neigh show dev "$br"
	ip -6 route get "$(ipv6_of "$n0")" || true
	ping -6 -c 2 -W 2 "$(ipv6_of "$n0")" || true
	grep 'standin: ' "$work/$n0.console" | tail -n 8
	fail "$n0 does not answer on [$(ipv6_of "$n0")]:8000"
}

echo "PASS $NAME"
