#!/usr/bin/env bash
# tests/e2e/standin-boot.sh IMAGE — boot one stand-in node on a real libvirt
# network and check what it reports and serves.
#
#   scripts/sandbox run -- tests/e2e/standin-boot.sh /path/to/standin.qcow2
#
# Needs the sandbox (a private libvirtd); see docs/sandbox.md, docs/standin.md.
set -euo pipefail

NAME=standin-boot
fail() {
	echo "FAIL $NAME: $*"
	exit 1
}

[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] ||
	fail "not inside the sandbox: run it with scripts/sandbox run -- $0 IMAGE"
[[ $# == 1 && -f $1 ]] || fail "usage: $0 STANDIN-IMAGE.qcow2"
IMAGE=$(readlink -f "$1")
TIMEOUT=${STANDIN_BOOT_TIMEOUT:-120}

NET=sl-e2e
BRIDGE=slbr-e2e
POOL=sl-e2e
POOLDIR=/var/lib/libvirt/images/$POOL
CD=c1.example.test
HOST=lab1-ctlplane-0
FQDN=$HOST.$CD
MAC=52:54:00:5a:00:10
IP=192.168.150.10
API_IP=192.168.150.5
APPS_IP=192.168.150.2
CPU_MODEL=${STANDIN_CPU_MODEL:-Nehalem}
CONSOLE=$POOLDIR/$HOST.console.log
export LIBVIRT_DEFAULT_URI=${LIBVIRT_DEFAULT_URI:-qemu:///system}

FAILURES=()
check() { # description expected actual
	if [[ $2 == "$3" ]]; then
		echo "  ok   $1: $3"
	else
		echo "  FAIL $1: expected '$2', got '$3'"
		FAILURES+=("$1")
	fi
}

cleanup() {
	local rc=$?
	set +e
	if [[ -f $CONSOLE && -n ${SHIFTLAB_SANDBOX_STATE:-} ]]; then
		cp "$CONSOLE" "$SHIFTLAB_SANDBOX_STATE/" 2>/dev/null
	fi
	virsh -q destroy "$HOST" >/dev/null 2>&1
	virsh -q undefine "$HOST" >/dev/null 2>&1
	virsh -q net-destroy "$NET" >/dev/null 2>&1
	virsh -q net-undefine "$NET" >/dev/null 2>&1
	for v in $(virsh -q vol-list "$POOL" 2>/dev/null | awk '{print $1}'); do
		virsh -q vol-delete --pool "$POOL" "$v" >/dev/null 2>&1
	done
	virsh -q pool-destroy "$POOL" >/dev/null 2>&1
	virsh -q pool-undefine "$POOL" >/dev/null 2>&1
	rm -rf "$POOLDIR"
	exit "$rc"
}
trap cleanup EXIT

echo "== $NAME: image $IMAGE, cpu $CPU_MODEL"

# ---------------------------------------------------------------- network
TMP=$(mktemp -d)
cat >"$TMP/net.xml" <<EOF
<network xmlns:dnsmasq='http://libvirt.org/schemas/network/dnsmasq/1.0'>
  <name>$NET</name>
  <bridge name='$BRIDGE' stp='off'/>
  <domain name='$CD' localOnly='yes'/>
  <dns>
    <host ip='$API_IP'>
      <hostname>api.$CD</hostname>
      <hostname>api-int.$CD</hostname>
    </host>
    <host ip='$IP'>
      <hostname>$FQDN</hostname>
    </host>
  </dns>
  <ip address='192.168.150.1' netmask='255.255.255.0'>
    <dhcp>
      <range start='192.168.150.100' end='192.168.150.199'/>
      <host mac='$MAC' name='$HOST' ip='$IP'/>
    </dhcp>
  </ip>
  <dnsmasq:options>
    <dnsmasq:option value='address=/apps.$CD/$APPS_IP'/>
    <dnsmasq:option value='no-resolv'/>
  </dnsmasq:options>
</network>
EOF
virsh -q net-define "$TMP/net.xml" >/dev/null
virsh -q net-start "$NET" >/dev/null

# ------------------------------------------------------------ pool, disks
virsh -q pool-define-as "$POOL" dir --target "$POOLDIR" >/dev/null
virsh -q pool-build "$POOL" >/dev/null
virsh -q pool-start "$POOL" >/dev/null

upload() { # volume file format
	virsh -q vol-create-as "$POOL" "$1" "$(stat -c %s "$2")" --format "$3" >/dev/null
	virsh -q vol-upload --pool "$POOL" "$1" "$2"
}
upload standin-base.qcow2 "$IMAGE" qcow2
virsh -q vol-create-as "$POOL" "$HOST.qcow2" 64M --format qcow2 \
	--backing-vol standin-base.qcow2 --backing-vol-format qcow2 >/dev/null

data_b64() { printf '%s' "$1" | base64 -w0; }
cat >"$TMP/$HOST.ign" <<EOF
{
  "ignition": { "version": "3.2.0" },
  "storage": {
    "files": [
      {
        "path": "/etc/hostname",
        "mode": 420,
        "overwrite": true,
        "contents": { "source": "data:,$HOST" }
      },
      {
        "path": "/etc/shiftlab/role",
        "mode": 420,
        "contents": { "source": "data:text/plain;charset=utf-8;base64,$(data_b64 ctlplane)" }
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
upload "$HOST.ign" "$TMP/$HOST.ign" raw
IGN=$POOLDIR/$HOST.ign
IGN_SHA=$(sha256sum "$IGN" | cut -d' ' -f1)

# ----------------------------------------------------------------- domain
cat >"$TMP/dom.xml" <<EOF
<domain type='qemu'>
  <name>$HOST</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
  </os>
  <sysinfo type='fwcfg'>
    <entry name='opt/com.coreos/config' file='$IGN'/>
  </sysinfo>
  <features><acpi/></features>
  <cpu mode='custom' match='exact' check='partial'>
    <model fallback='forbid'>$CPU_MODEL</model>
  </cpu>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$POOLDIR/$HOST.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='$MAC'/>
      <source network='$NET'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'>
      <source path='$CONSOLE'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
virsh -q define "$TMP/dom.xml" >/dev/null
START=$(date +%s.%N)
virsh -q start "$HOST" >/dev/null
echo "  started $HOST ($MAC), waiting up to ${TIMEOUT}s for its report"

# ----------------------------------------------------------------- report
REPORT=
for ((i = 0; i < TIMEOUT * 2; i++)); do
	REPORT=$(tr -d '\r' <"$CONSOLE" 2>/dev/null |
		sed -n 's/.*SHIFTLAB-STANDIN-REPORT \({.*}\)$/\1/p' | tail -n 1)
	[[ -n $REPORT ]] && break
	sleep 0.5
done
if [[ -z $REPORT ]]; then
	echo "---- console log (tail) ----"
	tail -n 40 "$CONSOLE" 2>/dev/null || true
	fail "no report line within ${TIMEOUT}s"
fi
ELAPSED=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "  report after ${ELAPSED}s: $REPORT"

field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$REPORT"; }
check hostname "$HOST" "$(field hostname)"
check ip "$IP" "$(field ip)"
check mac "$MAC" "$(field mac)"
check role ctlplane "$(field role)"
check ignition_sha256 "$IGN_SHA" "$(field ignition_sha256)"
check api "$API_IP" "$(field api)"
check api_int "$API_IP" "$(field api_int)"
check apps "$APPS_IP" "$(field apps)"
check ptr "$FQDN" "$(field ptr)"
check x86_64_v2 yes "$(field x86_64_v2)"
echo "  guest uptime at first report: $(field uptime)s"

# ------------------------------------------------------------------- HTTP
http() { # url -> "code body"
	local body code
	body=$(mktemp)
	code=$(curl -s -o "$body" -w '%{http_code}' --max-time 5 "$1" || true)
	printf '%s %s' "$code" "$(tr -d '\n' <"$body")"
	rm -f "$body"
}
check "GET :6443/readyz" "200 ok $HOST" "$(http "http://$IP:6443/readyz")"
check "GET :22623/config/master" \
	"200 {\"ignition\":{\"version\":\"3.2.0\"},\"storage\":{\"files\":[{\"path\":\"/etc/shiftlab/served-by\",\"contents\":{\"source\":\"data:,$HOST\"},\"mode\":420}]}}" \
	"$(http "http://$IP:22623/config/master")"
check "GET :8000/fail-readyz" "200 readyz down $HOST" "$(http "http://$IP:8000/fail-readyz")"
check "GET :6443/readyz (down)" "500 down $HOST" "$(http "http://$IP:6443/readyz")"
check "GET :8000/restore-readyz" "200 readyz up $HOST" "$(http "http://$IP:8000/restore-readyz")"
check "GET :6443/readyz (up again)" "200 ok $HOST" "$(http "http://$IP:6443/readyz")"
check "GET :6443/nope" "404 not found $HOST" "$(http "http://$IP:6443/nope")"
check "GET :8000/report ip" "$IP" "$(http "http://$IP:8000/report" |
	sed -n 's/.*"ip":"\([^"]*\)".*/\1/p')"

rm -rf "$TMP"
if ((${#FAILURES[@]})); then
	echo "---- console log (tail) ----"
	tail -n 30 "$CONSOLE" || true
	fail "${#FAILURES[@]} check(s) failed: ${FAILURES[*]}"
fi
echo "PASS $NAME (report ${ELAPSED}s after start)"
