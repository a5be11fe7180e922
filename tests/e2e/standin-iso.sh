#!/usr/bin/env bash
# tests/e2e/standin-iso.sh IMAGE — the stand-in live ISO boots like CoreOS's:
# Ignition embedded by the real coreos-installer, the ISO on a CD-ROM behind an
# empty disk, an install that writes the disk and reboots, and the node back from
# its disk with the same Ignition.
#
#   scripts/sandbox run -- tests/e2e/standin-iso.sh /path/to/standin.qcow2
#
# Two nodes boot the same ISO (each its own embedded config):
#   iso-good-0   boot order disk, then CD-ROM: ISO once, install, then its disk
#   iso-loop-0   boot order CD-ROM first: after the install it boots the ISO
#                again — the boot loop a wrong boot order causes on real hosts
set -euo pipefail

NAME=standin-iso
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir iso
command -v coreos-installer >/dev/null || fail "coreos-installer not found (scripts/setup installs it)"
TIMEOUT=${STANDIN_BOOT_TIMEOUT:-240}

NET=sl-iso
POOL=sl-iso
POOLDIR=/var/lib/libvirt/images/$POOL
CD=iso.example.test
CPU_MODEL=${STANDIN_CPU_MODEL:-Nehalem}
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}
# name mac ip boot-order(disk cdrom)
NODES=(
	"iso-good-0 52:54:00:5b:00:10 192.168.151.10 1 2"
	"iso-loop-0 52:54:00:5b:00:11 192.168.151.11 2 1"
)

FAILURES=()
check() { # description expected actual
	if [[ $2 == "$3" ]]; then
		echo "  ok   $1: $3"
	else
		echo "  FAIL $1: expected '$2', got '$3'"
		FAILURES+=("$1")
	fi
}
console() { echo "$work/$1.console.log"; }
step "building the stand-in live ISO"
"$bin" image standin --iso --out "$work/standin.iso" >/dev/null
isoinfo -R -f -i "$work/standin.iso" >"$work/iso.files"
for f in /images/ignition.img /images/pxeboot/vmlinuz /images/pxeboot/initrd.img \
	/images/pxeboot/rootfs.img /isolinux/isolinux.bin /isolinux/isolinux.cfg; do
	grep -qx "$f" "$work/iso.files" || fail "the ISO has no $f"
done
# An empty embed area: coreos-installer shows nothing embedded yet.
if coreos-installer iso ignition show "$work/standin.iso" >/dev/null 2>&1; then
	fail "a fresh ISO must carry no Ignition"
fi

dhcp_hosts='' dns_hosts=''
for n in "${NODES[@]}"; do
	read -r name mac ip _ <<<"$n"
	dhcp_hosts+="<host mac='$mac' name='$name' ip='$ip'/>"
	dns_hosts+="<host ip='$ip'><hostname>$name.$CD</hostname></host>"
done
cat >"$work/net.xml" <<EOF
<network>
  <name>$NET</name>
  <bridge name='slbr-iso' stp='off'/>
  <domain name='$CD' localOnly='yes'/>
  <dns>$dns_hosts</dns>
  <ip address='192.168.151.1' netmask='255.255.255.0'>
    <dhcp><range start='192.168.151.100' end='192.168.151.199'/>$dhcp_hosts</dhcp>
  </ip>
</network>
EOF
virsh_net "$NET" "$work/net.xml"
virsh_pool "$POOL" "$POOLDIR"

ignition() { # name
	cat <<EOF
{"ignition":{"version":"3.2.0"},"storage":{"files":[
 {"path":"/etc/hostname","mode":420,"overwrite":true,"contents":{"source":"data:,$1"}},
 {"path":"/etc/shiftlab/role","mode":420,"contents":{"source":"data:,master"}},
 {"path":"/etc/shiftlab/cluster-domain","mode":420,"contents":{"source":"data:,$CD"}},
 {"path":"/etc/shiftlab/install-disk","mode":420,"contents":{"source":"data:,/dev/vda"}}]}}
EOF
}

declare -A SHA
for n in "${NODES[@]}"; do
	read -r name mac _ disk_order cd_order <<<"$n"
	ignition "$name" >"$work/$name.ign"
	SHA[$name]=$(sha256sum "$work/$name.ign" | cut -d' ' -f1)
	coreos-installer iso ignition embed -i "$work/$name.ign" -o "$POOLDIR/$name.iso" "$work/standin.iso"
	shown=$(coreos-installer iso ignition show "$POOLDIR/$name.iso" | sha256sum | cut -d' ' -f1)
	check "$name: coreos-installer reads back the embedded config" "${SHA[$name]}" "$shown"
	# An empty disk, as a node's disk before the install.
	qemu-img create -q -f qcow2 "$POOLDIR/$name.qcow2" 1G
	cat >"$work/$name.xml" <<EOF
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>320</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact' check='partial'><model fallback='forbid'>$CPU_MODEL</model></cpu>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$POOLDIR/$name.qcow2'/>
      <target dev='vda' bus='virtio'/>
      <boot order='$disk_order'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <source file='$POOLDIR/$name.iso'/>
      <target dev='hdc' bus='ide'/>
      <readonly/>
      <boot order='$cd_order'/>
    </disk>
    <interface type='network'>
      <mac address='$mac'/>
      <source network='$NET'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'><source path='$(console "$name")'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
	virsh_domain "$name" "$work/$name.xml" "$(console "$name")"
done
for n in "${NODES[@]}"; do
	read -r name _ <<<"$n"
	virsh -q start "$name" >/dev/null
done
step "started ${#NODES[@]} nodes from the ISO, waiting up to ${TIMEOUT}s"

lines() { # name prefix -> payloads of that console line
	tr -d '\r' <"$(console "$1")" 2>/dev/null | sed -n "s/.*$2 \({.*}\)\$/\1/p"
}
field() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1"; }
# wait_line NAME PREFIX PATTERN: until a PREFIX line matching PATTERN shows.
wait_line() {
	local i
	for ((i = 0; i < TIMEOUT * 2; i++)); do
		[[ $(lines "$1" "$2") == *"$3"* ]] && return 0
		sleep 0.5
	done
	echo "---- $1 console log (tail) ----"
	tail -n 30 "$(console "$1")" 2>/dev/null || true
	fail "$1: no $2 line matching $3 within ${TIMEOUT}s"
}

# The good node: live once, installed, then from its disk with the same config.
name=iso-good-0
ip=192.168.151.10
wait_line $name SHIFTLAB-STANDIN-REPORT '"boot":"disk"'
live=$(lines $name SHIFTLAB-STANDIN-REPORT | grep '"boot":"iso"' || true)
check "$name: live ISO boots" 1 "$(grep -c . <<<"$live")"
check "$name: live boot's Ignition" "embedded ${SHA[$name]}" \
	"$(field "$live" ignition_source) $(field "$live" ignition_sha256)"
check "$name: live boot hostname" $name "$(field "$live" hostname)"
installed=$(lines $name SHIFTLAB-STANDIN-INSTALLED)
check "$name: installs" 1 "$(grep -c . <<<"$installed")"
check "$name: installed to" /dev/vda "$(field "$installed" disk)"
disk=$(lines $name SHIFTLAB-STANDIN-REPORT | grep '"boot":"disk"' | tail -n 1)
check "$name: disk boot's Ignition" "installed ${SHA[$name]}" \
	"$(field "$disk" ignition_source) $(field "$disk" ignition_sha256)"
check "$name: disk boot hostname, address, PTR" "$name $ip $name.$CD" \
	"$(field "$disk" hostname) $(field "$disk" ip) $(field "$disk" ptr)"
check "$name: role services after the install" "200" \
	"$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$ip:6443/readyz" || true)"
# The disk boot lasts: a later report is still from the disk, with no second install.
n0=$(lines $name SHIFTLAB-STANDIN-REPORT | grep -c '"boot":"disk"')
for ((i = 0; i < 80; i++)); do
	(($(lines $name SHIFTLAB-STANDIN-REPORT | grep -c '"boot":"disk"') > n0)) && break
	sleep 0.5
done
check "$name: re-reports from its disk" yes \
	"$( (($(lines $name SHIFTLAB-STANDIN-REPORT | grep -c '"boot":"disk"') > n0)) && echo yes || echo no)"
check "$name: still one install" 1 "$(lines $name SHIFTLAB-STANDIN-INSTALLED | grep -c .)"

# The node with the CD-ROM first boots the ISO again after installing.
name=iso-loop-0
for ((i = 0; i < TIMEOUT * 2; i++)); do
	(($(lines $name SHIFTLAB-STANDIN-INSTALLED | grep -c .) >= 2)) && break
	sleep 0.5
done
check "$name: CD-ROM first boots the ISO again (a boot loop)" yes \
	"$( (($(lines $name SHIFTLAB-STANDIN-INSTALLED | grep -c .) >= 2)) && echo yes || echo no)"
check "$name: never boots its disk" 0 "$(lines $name SHIFTLAB-STANDIN-REPORT | grep -c '"boot":"disk"' || true)"

if ((${#FAILURES[@]})); then
	fail "${#FAILURES[@]} check(s) failed: ${FAILURES[*]}"
fi
echo "PASS $NAME"
