#!/usr/bin/env bash
# tests/e2e/veth-bridge.sh IMAGE — the bridges of bare-metal IPI (docs/install.md,
# "Bare-metal IPI"), in the sandbox:
# - `network.external_bridge: veth`: `create infra` makes the Linux bridge
#   `baremetal`, veth-linked to the cluster's NAT bridge, refusing first while a
#   bridge of that name is someone else's (nothing created); a stand-in VM on
#   `baremetal` (where the installer puts its bootstrap VM) gets its DHCP lease
#   from the cluster network's dnsmasq; `destroy` removes the links;
# - `mode: bridge`: an existing host bridge is refused while it is down, used
#   when up, and left in place by `destroy`.
#
#   scripts/sandbox run -- tests/e2e/veth-bridge.sh /path/to/standin.qcow2
NAME=veth-bridge
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir veth
TIMEOUT=${VETH_TIMEOUT:-180}
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}
VM=veth-probe
MAC=52:54:00:5c:00:99
POOLDIR=/var/lib/libvirt/images/veth-probe
destroy_on_exit vb hb
on_exit 'rm -rf "$POOLDIR"; ip link del dev baremetal 2>/dev/null; ip link del dev slhost0 2>/dev/null'

link_alias() { ip -j link show dev "$1" 2>/dev/null | jq -r '.[0].ifalias // ""'; }
link_master() { ip -j link show dev "$1" 2>/dev/null | jq -r '.[0].master // ""'; }
exists() { ip link show dev "$1" >/dev/null 2>&1; }

# ------------------------------------------------------------- veth-linked
f=$(cluster_file vb 192.168.199.0/24 "method: ipi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")
echo "  external_bridge: veth" >>"$f"
"$bin" create install-config -f "$f" --dir "$work/ic" >/dev/null
grep -q '^    externalBridge: baremetal$' "$work/ic/install-config.yaml" || fail "install-config's externalBridge is not the veth-linked bridge"

step "a bridge named baremetal that is not shiftlab's is refused, and kept"
ip link add name baremetal type bridge
if "$bin" create infra -f "$f" >"$work/refused.log" 2>&1; then fail "create infra used someone else's bridge"; fi
contains "baremetal: a host interface of that name exists and is not shiftlab's" <"$work/refused.log" ||
	fail "the refusal does not say why: $(cat "$work/refused.log")"
! virsh -q net-info shiftlab-vb >/dev/null 2>&1 || fail "the refusal created the network"
exists baremetal || fail "the user's bridge went"
ip link del dev baremetal

step "create infra makes the veth-linked bridge"
"$bin" create infra -f "$f" >"$work/infra.log" 2>&1 || fail "create infra: $(cat "$work/infra.log")"
nat=$(virsh net-dumpxml shiftlab-vb | sed -n "s/.*<bridge name='\([^']*\)'.*/\1/p")
[[ $(link_alias baremetal) == shiftlab:vb ]] || fail "baremetal carries no ownership alias"
ends=$(ip -j link show type veth | jq -r '.[] | select(.ifalias == "shiftlab:vb") | .ifname' | sort | tr '\n' ' ')
[[ $(wc -w <<<"$ends") == 2 ]] || fail "expected one veth pair owned by vb, found: $ends"
for e in $ends; do
	case $(link_master "$e") in
	baremetal | "$nat") ;;
	*) fail "$e is a port of '$(link_master "$e")', not baremetal or $nat" ;;
	esac
done
[[ $(link_master "${ends%% *}") != $(link_master "$(awk '{print $2}' <<<"$ends")") ]] || fail "both veth ends in one bridge"
"$bin" create infra -f "$f" >/dev/null 2>&1 || fail "create infra again (idempotent) failed"
"$bin" status vb | contains "veth-linked bridge baremetal: linked" || fail "status does not show the linked bridge"
[[ $("$bin" status vb -o json | jq -r .veth_bridge.linked) == true ]] || fail "status -o json: veth_bridge.linked"

step "a VM on baremetal gets its lease from the cluster's dnsmasq"
mkdir -p "$POOLDIR"
qemu-img create -q -f qcow2 -F qcow2 -b "$IMAGE" "$POOLDIR/$VM.qcow2" 64M
cat >"$work/$VM.xml" <<EOF
<domain type='qemu'>
  <name>$VM</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <cpu mode='custom' match='exact' check='partial'><model fallback='forbid'>${STANDIN_CPU_MODEL:-Nehalem}</model></cpu>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$POOLDIR/$VM.qcow2'/><target dev='vda' bus='virtio'/></disk>
    <interface type='bridge'><mac address='$MAC'/><source bridge='baremetal'/><model type='virtio'/></interface>
    <serial type='file'><source path='$POOLDIR/$VM.console.log'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
virsh_domain $VM "$work/$VM.xml" "$POOLDIR/$VM.console.log"
virsh -q start $VM >/dev/null
leased() { virsh -q net-dhcp-leases shiftlab-vb | contains -i "$MAC"; }
wait_for "$TIMEOUT" "a DHCP lease for $MAC in shiftlab-vb (through baremetal and the veth)" leased
virsh -q net-dhcp-leases shiftlab-vb | grep -i "$MAC" | awk '{print "  lease:", $5}'
virsh -q destroy $VM >/dev/null
virsh -q undefine $VM >/dev/null

step "destroy removes the links it made"
"$bin" destroy cluster vb >/dev/null 2>&1 || fail "destroy"
! exists baremetal || fail "baremetal is still there"
[[ -z $(ip -j link show type veth | jq -r '.[] | select(.ifalias == "shiftlab:vb") | .ifname') ]] || fail "a veth end is still there"

# ------------------------------------------------------------ host bridge
step "mode bridge: a host bridge that is down is refused"
ip link add name slhost0 type bridge
g=$(cluster_file hb 192.168.201.0/24 "method: ipi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")
printf '  mode: bridge\n  bridge: slhost0\n' >>"$g"
if "$bin" create infra -f "$g" >"$work/down.log" 2>&1; then fail "create infra used a bridge that is down"; fi
contains "network.bridge slhost0: the bridge is down" <"$work/down.log" || fail "the refusal does not say why: $(cat "$work/down.log")"
ip link set dev slhost0 up
"$bin" create infra -f "$g" >"$work/hb.log" 2>&1 || fail "create infra on the host bridge: $(cat "$work/hb.log")"
"$bin" destroy cluster hb >/dev/null 2>&1 || fail "destroy hb"
exists slhost0 || fail "destroy removed the user's bridge"
echo "PASS $NAME"
