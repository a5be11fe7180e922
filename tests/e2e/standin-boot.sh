#!/usr/bin/env bash
# tests/e2e/standin-boot.sh IMAGE — boot stand-in nodes on a real libvirt
# network and check what they report and serve.
#
#   scripts/sandbox run -- tests/e2e/standin-boot.sh /path/to/standin.qcow2
#
# Three nodes boot at once from thin overlays of IMAGE:
#   lab1-ctlplane-0  Ignition (plain data URLs + base64 role), role ctlplane
#   lab1-worker-0    Ignition (base64 hostname), role worker
#   lab1-worker-1    Ignition as shiftlab writes it: its files, and the installer's
#                    pointer config merged as a data: URL, role worker
#   lab1-spare-0     no Ignition at all: hostname from DHCP, no role services
# and two from an image built for x86-64-v3 (`image standin --cpu-level`), as
# SCOS 10 / RHEL 10 CoreOS are: on Nehalem (x86-64-v2) it refuses to come up,
# on Haswell-noTSX-IBRS (shiftlab's TCG model for such a stream) it comes up.
# Needs the sandbox (a private libvirtd); see docs/sandbox.md, docs/standin.md.
NAME=standin-boot
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
TIMEOUT=${STANDIN_BOOT_TIMEOUT:-120}

NET=sl-e2e
BRIDGE=slbr-e2e
POOL=sl-e2e
POOLDIR=/var/lib/libvirt/images/$POOL
CD=c1.example.test
API_IP=192.168.150.5
APPS_IP=192.168.150.2
CPU_MODEL=${STANDIN_CPU_MODEL:-Nehalem}
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}

# name mac ip role ignition-style
NODES=(
	"lab1-ctlplane-0 52:54:00:5a:00:10 192.168.150.10 ctlplane plain"
	"lab1-worker-0 52:54:00:5a:00:20 192.168.150.20 worker base64"
	"lab1-worker-1 52:54:00:5a:00:21 192.168.150.21 worker wrapped"
	"lab1-spare-0 52:54:00:5a:00:30 192.168.150.30 - none"
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

console() { echo "$POOLDIR/$1.console.log"; }

e2e_workdir standin-boot

echo "== $NAME: image $IMAGE, cpu $CPU_MODEL"

# ---------------------------------------------------------------- network
dns_hosts='' dhcp_hosts=''
for n in "${NODES[@]}"; do
	read -r name mac ip _ <<<"$n"
	dns_hosts+="    <host ip='$ip'><hostname>$name.$CD</hostname></host>"$'\n'
	dhcp_hosts+="      <host mac='$mac' name='$name' ip='$ip'/>"$'\n'
done
cat >"$work/net.xml" <<EOF
<network xmlns:dnsmasq='http://libvirt.org/schemas/network/dnsmasq/1.0'>
  <name>$NET</name>
  <bridge name='$BRIDGE' stp='off'/>
  <domain name='$CD' localOnly='yes'/>
  <dns>
    <host ip='$API_IP'>
      <hostname>api.$CD</hostname>
      <hostname>api-int.$CD</hostname>
    </host>
$dns_hosts  </dns>
  <ip address='192.168.150.1' netmask='255.255.255.0'>
    <dhcp>
      <range start='192.168.150.100' end='192.168.150.199'/>
$dhcp_hosts    </dhcp>
  </ip>
  <dnsmasq:options>
    <dnsmasq:option value='address=/apps.$CD/$APPS_IP'/>
    <dnsmasq:option value='no-resolv'/>
  </dnsmasq:options>
</network>
EOF
virsh_net "$NET" "$work/net.xml"

# ------------------------------------------------------------ pool, disks
virsh_pool "$POOL" "$POOLDIR"

upload() { # volume file format
	virsh -q vol-create-as "$POOL" "$1" "$(stat -c %s "$2")" --format "$3" >/dev/null
	virsh -q vol-upload --pool "$POOL" "$1" "$2"
}
upload standin-base.qcow2 "$IMAGE" qcow2

b64() { printf '%s' "$1" | base64 -w0; }
ignition() { # name role style
	local host_src role_src config=''
	case $3 in
	plain)
		host_src="data:,$1"
		role_src="data:text/plain;charset=utf-8;base64,$(b64 "$2")"
		;;
	base64)
		host_src="data:text/plain;charset=utf-8;base64,$(b64 "$1"$'\n')"
		role_src="data:,$2"
		# a pointer config as the installer writes it (in a real lab the
		# URL is api-int through the load balancer)
		config=', "config": { "merge": [ { "source": "https://lab1-ctlplane-0.'$CD':22623/config/worker" } ] }'
		;;
	wrapped)
		# shiftlab's per-node wrapper: the installer's config merged, unedited,
		# as a base64 data: URL (src/ignition); its pointer is inside.
		host_src="data:,$1"
		role_src="data:,$2"
		config=', "config": { "merge": [ { "source": "data:text/plain;charset=utf-8;base64,'$(b64 '{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://lab1-ctlplane-0.'$CD':22623/config/worker"}]}}}')'" } ] }'
		;;
	esac
	cat <<EOF
{
  "ignition": { "version": "3.2.0"$config },
  "storage": {
    "files": [
      {
        "path": "/etc/hostname",
        "mode": 420,
        "overwrite": true,
        "contents": { "source": "$host_src" }
      },
      {
        "path": "/etc/shiftlab/role",
        "mode": 420,
        "contents": { "source": "$role_src" }
      },
      {
        "path": "/etc/shiftlab/cluster-domain",
        "mode": 420,
        "contents": { "source": "data:,$CD%0A" }
      }
    ]
  }
}
EOF
}

domain_xml() { # name mac with-ignition
	local sysinfo=
	if [[ $3 == yes ]]; then
		sysinfo="<sysinfo type='fwcfg'>
    <entry name='opt/com.coreos/config' file='$POOLDIR/$1.ign'/>
  </sysinfo>"
	fi
	cat <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
  </os>
  $sysinfo
  <features><acpi/></features>
  <cpu mode='custom' match='exact' check='partial'>
    <model fallback='forbid'>$CPU_MODEL</model>
  </cpu>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$POOLDIR/$1.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='$2'/>
      <source network='$NET'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'>
      <source path='$(console "$1")'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}

declare -A IGN_SHA START
for n in "${NODES[@]}"; do
	read -r name mac ip role style <<<"$n"
	virsh -q vol-create-as "$POOL" "$name.qcow2" 64M --format qcow2 \
		--backing-vol standin-base.qcow2 --backing-vol-format qcow2 >/dev/null
	if [[ $style != none ]]; then
		ignition "$name" "$role" "$style" >"$work/$name.ign"
		upload "$name.ign" "$work/$name.ign" raw
		IGN_SHA[$name]=$(sha256sum "$POOLDIR/$name.ign" | cut -d' ' -f1)
	else
		IGN_SHA[$name]=none
	fi
	domain_xml "$name" "$mac" "$([[ $style != none ]] && echo yes || echo no)" >"$work/$name.xml"
	virsh_domain "$name" "$work/$name.xml" "$(console "$name")"
done
for n in "${NODES[@]}"; do
	read -r name _ <<<"$n"
	START[$name]=$(date +%s.%N)
	virsh -q start "$name" >/dev/null
done
# The image built for x86-64-v3, on a CPU model without it and on one with it
# (check='none' as shiftlab writes it: TCG drops Haswell's few features it lacks).
"$bin" image standin --cpu-level x86-64-v3 --out "$work/standin-v3.qcow2" >/dev/null
upload standin-v3.qcow2 "$work/standin-v3.qcow2" qcow2
LEVEL_NODES=(
	"lab1-v3-nehalem 52:54:00:5a:00:40 Nehalem"
	"lab1-v3-haswell 52:54:00:5a:00:41 Haswell-noTSX-IBRS"
)
for n in "${LEVEL_NODES[@]}"; do
	read -r name mac model <<<"$n"
	virsh -q vol-create-as "$POOL" "$name.qcow2" 64M --format qcow2 \
		--backing-vol standin-v3.qcow2 --backing-vol-format qcow2 >/dev/null
	CPU_MODEL=$model domain_xml "$name" "$mac" no | sed "s/check='partial'/check='none'/" >"$work/$name.xml"
	virsh_domain "$name" "$work/$name.xml" "$(console "$name")"
	virsh -q start "$name" >/dev/null
done
echo "  started ${#NODES[@]} nodes, waiting up to ${TIMEOUT}s for their reports"

# ----------------------------------------------------------------- report
reports() { # name -> every report payload in its console log
	tr -d '\r' <"$(console "$1")" 2>/dev/null |
		sed -n 's/.*SHIFTLAB-STANDIN-REPORT \({.*}\)$/\1/p'
}
wait_report() { # name min-count -> last report
	local i r
	for ((i = 0; i < TIMEOUT * 2; i++)); do
		r=$(reports "$1")
		if [[ -n $r ]] && (($(wc -l <<<"$r") >= $2)); then
			tail -n 1 <<<"$r"
			return 0
		fi
		sleep 0.5
	done
	return 1
}
field() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1"; }
http() { # url -> "code body"
	local body code
	body=$(mktemp)
	code=$(curl -s -o "$body" -w '%{http_code}' --max-time 5 "$1" || true)
	printf '%s %s' "$code" "$(tr -d '\n' <"$body")"
	rm -f "$body"
}

for n in "${NODES[@]}"; do
	read -r name mac ip role style <<<"$n"
	[[ $role == - ]] && role=
	echo "-- $name"
	if ! REPORT=$(wait_report "$name" 1); then
		echo "---- $name console log (tail) ----"
		tail -n 40 "$(console "$name")" 2>/dev/null || true
		fail "$name: no report line within ${TIMEOUT}s"
	fi
	ELAPSED=$(awk -v a="${START[$name]}" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	echo "  report seen ${ELAPSED}s after start (guest uptime $(field "$REPORT" uptime)s):"
	echo "  $REPORT"
	check hostname "$name" "$(field "$REPORT" hostname)"
	check ip "$ip" "$(field "$REPORT" ip)"
	check mac "$mac" "$(field "$REPORT" mac)"
	check role "$role" "$(field "$REPORT" role)"
	check ignition_sha256 "${IGN_SHA[$name]}" "$(field "$REPORT" ignition_sha256)"
	if [[ $style != none ]]; then
		check api "$API_IP" "$(field "$REPORT" api)"
		check api_int "$API_IP" "$(field "$REPORT" api_int)"
		check apps "$APPS_IP" "$(field "$REPORT" apps)"
	else
		check "api (no cluster domain)" "" "$(field "$REPORT" api)"
	fi
	check ptr "$name.$CD" "$(field "$REPORT" ptr)"
	check x86_64_v2 yes "$(field "$REPORT" x86_64_v2)"
	check boot disk "$(field "$REPORT" boot)"
	check ignition_source "$([[ $style == none ]] && echo none || echo fw_cfg)" "$(field "$REPORT" ignition_source)"
	if [[ $style == base64 || $style == wrapped ]]; then
		check "pointer config fetched" ok "$(field "$REPORT" pointer)"
		check "pointer config served by" lab1-ctlplane-0 "$(field "$REPORT" pointer_from)"
	else
		check "pointer (none in Ignition)" "" "$(field "$REPORT" pointer)"
	fi
	check "GET :8000/report ip" "$ip" "$(field "$(http "http://$ip:8000/report")" ip)"

	case $role in
	ctlplane)
		check "GET :6443/readyz" "200 ok $name" "$(http "http://$ip:6443/readyz")"
		check "GET :22623/config/master" \
			"200 {\"ignition\":{\"version\":\"3.2.0\"},\"storage\":{\"files\":[{\"path\":\"/etc/shiftlab/served-by\",\"contents\":{\"source\":\"data:,$name\"},\"mode\":420}]}}" \
			"$(http "http://$ip:22623/config/master")"
		check "GET :22623/config/worker" 200 "$(http "http://$ip:22623/config/worker" | cut -d' ' -f1)"
		check "GET :8000/fail-readyz" "200 readyz down $name" "$(http "http://$ip:8000/fail-readyz")"
		check "GET :6443/readyz (down)" "500 down $name" "$(http "http://$ip:6443/readyz")"
		check "GET :8000/restore-readyz" "200 readyz up $name" "$(http "http://$ip:8000/restore-readyz")"
		check "GET :6443/readyz (up again)" "200 ok $name" "$(http "http://$ip:6443/readyz")"
		check "GET :6443/nope" "404 not found $name" "$(http "http://$ip:6443/nope")"
		check "GET :80/ (not a worker)" "000 " "$(http "http://$ip:80/")"
		;;
	worker)
		check "GET :80/" "200 ok $name" "$(http "http://$ip:80/")"
		check "GET :443/anything (plain HTTP)" "200 ok $name" "$(http "http://$ip:443/anything")"
		check "GET :6443/readyz (not a control plane)" "000 " "$(http "http://$ip:6443/readyz")"
		;;
	*)
		check "GET :6443/readyz (no role)" "000 " "$(http "http://$ip:6443/readyz")"
		check "GET :80/ (no role)" "000 " "$(http "http://$ip:80/")"
		;;
	esac
done

# ------------------------------------------------- the level the image needs
refusals() { # name -> the refusal payload in its console log
	tr -d '\r' <"$(console "$1")" 2>/dev/null |
		sed -n 's/.*SHIFTLAB-STANDIN-REFUSED \({.*}\)$/\1/p'
}
echo "-- lab1-v3-nehalem: an x86-64-v3 image on Nehalem"
refused=
for ((i = 0; i < TIMEOUT * 2; i++)); do
	refused=$(refusals lab1-v3-nehalem)
	[[ -n $refused ]] && break
	sleep 0.5
done
check "refused, level" x86-64-v3 "$(field "$refused" cpu_level)"
check "refused, missing" "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave" "$(field "$refused" missing)"
check "no report from the refusing node" "" "$(reports lab1-v3-nehalem)"
echo "-- lab1-v3-haswell: an x86-64-v3 image on Haswell-noTSX-IBRS"
if v3=$(wait_report lab1-v3-haswell 1); then
	check "report, x86_64_v2" yes "$(field "$v3" x86_64_v2)"
	check "the image's level met" 1 "$(grep -c 'standin: cpu: x86-64-v3 as this image needs' "$(console lab1-v3-haswell)")"
else
	check "report from lab1-v3-haswell" "a report" "none"
fi

# ------------------------------------------------- re-print, ACPI shutdown
first=${NODES[0]%% *}
echo "-- $first: waiting for the report to be printed again (every 30 s)"
if again=$(wait_report "$first" 2); then
	check "report re-printed, ip" "192.168.150.10" "$(field "$again" ip)"
else
	check "report re-printed" "a second report" "none"
fi

spare=${NODES[2]%% *}
echo "-- $spare: ACPI shutdown"
virsh -q shutdown "$spare" >/dev/null
state=
for ((i = 0; i < 60; i++)); do
	state=$(virsh -q domstate "$spare" 2>/dev/null)
	[[ $state == "shut off" ]] && break
	sleep 0.5
done
check "state after virsh shutdown" "shut off" "$state"

if ((${#FAILURES[@]})); then
	for n in "${NODES[@]}" "${LEVEL_NODES[@]}"; do
		read -r name _ <<<"$n"
		echo "---- $name console log (tail) ----"
		tail -n 15 "$(console "$name")" || true
	done
	fail "${#FAILURES[@]} check(s) failed: ${FAILURES[*]}"
fi
echo "PASS $NAME"
