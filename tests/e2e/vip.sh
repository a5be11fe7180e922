#!/usr/bin/env bash
# tests/e2e/vip.sh IMAGE — the stand-in's bare-metal IPI VIP model (docs/standin.md,
# "VIPs"), in the sandbox: no load balancer, keepalived's VIPs.
#
#   scripts/sandbox run -- tests/e2e/vip.sh /path/to/standin.qcow2
#
# An IPI-shaped network (api and api-int at the API VIP, *.apps at the ingress VIP,
# as shiftlab's plan writes them for method ipi) and three stand-ins with the
# installer's configs as the real ones are shaped:
#   vip-bootstrap  bootstrap.ign: bootkube.sh and the Infrastructure manifest with
#                  the VIPs (it learns them there)
#   vip-master-0   master.ign: a pointer to https://<API VIP>:22623/config/master
#                  (it learns the VIPs from the keepalived pod the bootstrap serves)
#   vip-worker-0   worker.ign: a pointer to .../config/worker; a router node
# Shown: the API VIP answered by the bootstrap (and not taken by the control plane
# while the bootstrap holds it), the ingress VIP by the router node; once the
# bootstrap's API stops (bootstrap complete) its keepalived stops and the control
# plane answers the API VIP, and keeps it when the bootstrap is shut down.
NAME=vip
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
TIMEOUT=${VIP_TIMEOUT:-240}

NET=sl-vip
BRIDGE=slbr-vip
POOL=sl-vip
POOLDIR=/var/lib/libvirt/images/$POOL
CD=vip.lab.test
API_VIP=192.168.198.2
INGRESS_VIP=192.168.198.3
CPU_MODEL=${STANDIN_CPU_MODEL:-Nehalem}
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}

# name mac ip
NODES=(
	"vip-bootstrap 52:54:00:5b:00:10 192.168.198.10"
	"vip-master-0 52:54:00:5b:00:11 192.168.198.11"
	"vip-worker-0 52:54:00:5b:00:20 192.168.198.20"
)

console() { echo "$POOLDIR/$1.console.log"; }
fail() {
	local n name
	echo "FAIL $NAME: $*"
	for n in "${NODES[@]}"; do
		read -r name _ <<<"$n"
		echo "---- $name console (tail)"
		tr -d '\r' <"$(console "$name")" 2>/dev/null | grep -a 'standin:' | tail -n 15
	done
	exit 1
}

cleanup() {
	local n name v
	for n in "${NODES[@]}"; do
		read -r name _ <<<"$n"
		virsh -q destroy "$name" >/dev/null 2>&1
		virsh -q undefine "$name" >/dev/null 2>&1
	done
	virsh -q net-destroy "$NET" >/dev/null 2>&1
	virsh -q net-undefine "$NET" >/dev/null 2>&1
	for v in $(virsh -q vol-list "$POOL" 2>/dev/null | awk '{print $1}'); do
		virsh -q vol-delete --pool "$POOL" "$v" >/dev/null 2>&1
	done
	virsh -q pool-destroy "$POOL" >/dev/null 2>&1
	virsh -q pool-undefine "$POOL" >/dev/null 2>&1
	rm -rf "$POOLDIR"
}
on_exit cleanup
e2e_workdir vip

# ---------------------------------------------------------------- network
dhcp_hosts=''
for n in "${NODES[@]}"; do
	read -r name mac ip <<<"$n"
	dhcp_hosts+="      <host mac='$mac' name='$name' ip='$ip'/>"$'\n'
done
cat >"$work/net.xml" <<EOF
<network xmlns:dnsmasq='http://libvirt.org/schemas/network/dnsmasq/1.0'>
  <name>$NET</name>
  <bridge name='$BRIDGE' stp='off'/>
  <domain name='$CD' localOnly='yes'/>
  <dns>
    <host ip='$API_VIP'>
      <hostname>api.$CD</hostname>
      <hostname>api-int.$CD</hostname>
    </host>
  </dns>
  <ip address='192.168.198.1' netmask='255.255.255.0'>
    <dhcp>
      <range start='192.168.198.192' end='192.168.198.254'/>
$dhcp_hosts    </dhcp>
  </ip>
  <dnsmasq:options>
    <dnsmasq:option value='address=/apps.$CD/$INGRESS_VIP'/>
  </dnsmasq:options>
</network>
EOF
virsh -q net-define "$work/net.xml" >/dev/null
virsh -q net-start "$NET" >/dev/null
virsh -q pool-define-as "$POOL" dir --target "$POOLDIR" >/dev/null
virsh -q pool-build "$POOL" >/dev/null
virsh -q pool-start "$POOL" >/dev/null
upload() { # volume file format
	virsh -q vol-create-as "$POOL" "$1" "$(stat -c %s "$2")" --format "$3" >/dev/null
	virsh -q vol-upload --pool "$POOL" "$1" "$2"
}
upload base.qcow2 "$IMAGE" qcow2

# -------------------------------------------------------- installer configs
b64() { base64 -w0; }
# bootstrap.ign: a full config (openshift/installer pkg/asset/ignition/bootstrap);
# the Infrastructure manifest as pkg/asset/manifests/infrastructure.go writes it.
infra=$(printf 'apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata:\n  name: cluster\nstatus:\n  platform: BareMetal\n  platformStatus:\n    baremetal:\n      apiServerInternalIP: %s\n      apiServerInternalIPs:\n      - %s\n      ingressIP: %s\n      ingressIPs:\n      - %s\n    type: BareMetal\n' \
	"$API_VIP" "$API_VIP" "$INGRESS_VIP" "$INGRESS_VIP" | b64)
cat >"$work/vip-bootstrap.ign" <<EOF
{"ignition":{"version":"3.2.0"},"storage":{"files":[
 {"path":"/usr/local/bin/bootkube.sh","mode":365,"contents":{"source":"data:;base64,$(printf '#!/usr/bin/env bash\n' | b64)"}},
 {"path":"/opt/openshift/manifests/cluster-infrastructure-02-config.yml","mode":420,"contents":{"source":"data:;base64,$infra"}}]}}
EOF
# master.ign/worker.ign: pointer configs to the API VIP on baremetal
# (pkg/asset/ignition/machine/node.go).
for role in master worker; do
	printf '{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://%s:22623/config/%s"}]}}}\n' \
		"$API_VIP" "$role" >"$work/vip-$role-0.ign"
done

domain_xml() { # name mac
	cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <sysinfo type='fwcfg'><entry name='opt/com.coreos/config' file='$POOLDIR/$1.ign'/></sysinfo>
  <features><acpi/></features>
  <cpu mode='custom' match='exact' check='partial'><model fallback='forbid'>$CPU_MODEL</model></cpu>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$POOLDIR/$1.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'><mac address='$2'/><source network='$NET'/><model type='virtio'/></interface>
    <serial type='file'><source path='$(console "$1")'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
for n in "${NODES[@]}"; do
	read -r name mac _ <<<"$n"
	virsh -q vol-create-as "$POOL" "$name.qcow2" 64M --format qcow2 \
		--backing-vol base.qcow2 --backing-vol-format qcow2 >/dev/null
	upload "$name.ign" "$work/$name.ign" raw
	domain_xml "$name" "$mac" >"$work/$name.xml"
	virsh -q define "$work/$name.xml" >/dev/null
done

# body of GET URL ("" when nothing answers)
get() { curl -s --max-time 3 "$1" 2>/dev/null || true; }
# until GET URL's body is BODY, or fail
wait_body() { # seconds url body what
	local i b=
	for ((i = 0; i < $1; i += 2)); do
		b=$(get "$2")
		[[ $b == "$3" ]] && return 0
		sleep 2
	done
	fail "$4: $2 said '${b}', expected '$3' (${1}s)"
}

# ---------------------------------------------------------------- the run
step "the bootstrap claims the API VIP"
virsh -q start vip-bootstrap >/dev/null
wait_body "$TIMEOUT" "http://$API_VIP:6443/readyz" "ok vip-bootstrap" "API VIP on the bootstrap"
[[ -z $(get "http://$INGRESS_VIP/") ]] || fail "the ingress VIP answers before any router node runs (the bootstrap has no ingress instance)"

step "a control plane and a router node join"
virsh -q start vip-master-0 >/dev/null
virsh -q start vip-worker-0 >/dev/null
wait_body "$TIMEOUT" "http://$INGRESS_VIP/" "ok vip-worker-0" "ingress VIP on the router node"
# The control plane is one by its pointer config, and learnt the VIPs from the
# keepalived pod in the machine config the bootstrap served.
learnt() { tr -d '\r' <"$(console vip-master-0)" | contains -a "keepalived: API VIPs $API_VIP, ingress VIPs $INGRESS_VIP"; }
wait_for "$TIMEOUT" "the control plane to learn the VIPs from its machine config" learnt
get http://192.168.198.11:8000/report | contains '"role":"master"' || fail "vip-master-0 is no control plane"
# It is a backup while the bootstrap answers: give its election time to run.
sleep 20
[[ $(get "http://$API_VIP:6443/readyz") == "ok vip-bootstrap" ]] || fail "the API VIP left the bootstrap while it runs"
[[ $(get "http://192.168.198.11:8000/vips") == "vips vip-master-0" ]] || fail "the control plane holds a VIP while the bootstrap runs"
[[ $(get "http://192.168.198.10:8000/vips") == "vips api vip-bootstrap" ]] || fail "the bootstrap's /vips"
[[ $(get "http://192.168.198.20:8000/vips") == "vips ingress vip-worker-0" ]] || fail "the worker's /vips"

step "bootstrap complete: the bootstrap's API stops, its keepalived too; the control plane takes the API VIP"
# What bootkube's end does to the bootstrap control plane (its API stops answering).
[[ $(get "http://192.168.198.10:8000/fail-readyz") == "readyz down vip-bootstrap" ]] || fail "fail-readyz"
wait_body "$TIMEOUT" "http://$API_VIP:6443/readyz" "ok vip-master-0" "API VIP on the control plane"
stopped() { tr -d '\r' <"$(console vip-bootstrap)" | contains -a "keepalived: the local API and Ironic are down: keepalived stopped"; }
wait_for 30 "the bootstrap's console to say keepalived stopped" stopped
took() { tr -d '\r' <"$(console vip-master-0)" | contains -a "keepalived: api VIP $API_VIP is mine now"; }
wait_for 30 "the control plane's console to say it took the API VIP" took
[[ $(get "http://$INGRESS_VIP/") == "ok vip-worker-0" ]] || fail "the ingress VIP moved"

step "the bootstrap goes away: the API VIP stays on the control plane"
virsh -q destroy vip-bootstrap >/dev/null
sleep 10
[[ $(get "http://$API_VIP:6443/readyz") == "ok vip-master-0" ]] || fail "the API VIP left the control plane"
[[ $(get "http://$INGRESS_VIP/") == "ok vip-worker-0" ]] || fail "the ingress VIP moved"
echo "PASS $NAME"
