#!/usr/bin/env bash
# The BMC's in-memory state against a real libvirtd (scripts/sandbox): GETs are
# served from memory kept true by libvirt's lifecycle events, so changes made
# behind the BMC's back — `virsh start`, `virsh destroy`, `virsh define` of an
# edited definition (what `virsh edit` does) — show in the next GETs; and after
# libvirtd restarts, the BMC reconnects, resyncs and follows events again.
# Asserts behaviour only: each change must show within a bound far above an
# event's delivery, which only stops a broken build from hanging.
# Needs root and scripts/setup's packages; no image, no network.
NAME=bmc-events
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

if [ "${1:-}" != __inside ]; then
  (cd "$repo" && cargo build -q --bin shiftlab)
  exec timeout -k 30 300 "$repo/scripts/sandbox" run -- "$0" __inside
fi

# ---- inside the sandbox: LIBVIRT_DEFAULT_URI=qemu:///system
e2e_workdir bmc-events
bmc=""
on_exit 'stop_pid "$bmc"'
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/bmc.log"'
port=18480
cat >"$work/dom.xml" <<'EOF'
<domain type='qemu'>
  <name>bmc-events-0</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>
  <features><acpi/></features>
  <devices/>
</domain>
EOF
virsh -q define "$work/dom.xml" >/dev/null
on_exit 'virsh -q destroy bmc-events-0 >/dev/null 2>&1; virsh -q undefine bmc-events-0 >/dev/null 2>&1'
uuid=$(virsh domuuid bmc-events-0)
url="http://127.0.0.1:$port/redfish/v1/Systems/$uuid"

SHIFTLAB_LOG=info "$bin" bmc --allow bmc-events-0 --listen "127.0.0.1:$port" \
  --insecure-http --no-auth --bmc-dir "$work/bmc" >"$work/bmc.log" 2>&1 &
bmc=$!
wait_for 20 "the BMC on 127.0.0.1:$port" curl -sf "$url"

field() { curl -sf "$url" | jq -r "$1"; }
# shows JQ VALUE WHAT: the GET's JQ becomes VALUE (polled), else fail.
shows() {
  local jq=$1 want=$2 what=$3 got=""
  for _ in $(seq 100); do
    got=$(field "$jq") || got="(GET failed)"
    [[ $got == "$want" ]] && return 0
    sleep 0.1
  done
  fail "$what: $jq is $got, want $want"
}

step "initial state"
[[ $(field .PowerState) == Off ]] || fail "a defined, stopped domain must be Off"
# the GET is served from memory: a second one reads the same and libvirt saw events subscribed
grep -q "no libvirt events" "$work/bmc.log" && fail "the BMC runs without libvirt events"

step "virsh start behind the BMC's back"
virsh -q start bmc-events-0 >/dev/null
shows .PowerState On "after virsh start"

step "virsh destroy behind the BMC's back"
virsh -q destroy bmc-events-0 >/dev/null
shows .PowerState Off "after virsh destroy"

step "virsh edit behind the BMC's back (a new definition)"
virsh dumpxml --inactive bmc-events-0 | sed 's|<vcpu\([^>]*\)>1</vcpu>|<vcpu\1>2</vcpu>|' >"$work/edited.xml"
grep -q '>2</vcpu>' "$work/edited.xml" || fail "could not edit the vcpu count"
virsh -q define "$work/edited.xml" >/dev/null
shows .ProcessorSummary.Count 2 "after virsh define of an edited definition"

step "power through the BMC shows in the very next GET"
curl -sf -H 'Content-Type: application/json' -d '{"ResetType":"On"}' "$url/Actions/ComputerSystem.Reset" >/dev/null ||
  fail "Reset On"
[[ $(field .PowerState) == On ]] || fail "the GET right after Reset On must say On"
[[ $(virsh domstate bmc-events-0) == running ]] || fail "libvirt does not run the domain"

step "libvirtd restarts: the BMC reconnects and follows events again"
# the sandbox's own libvirtd (scripts/sandbox started it; the pid file is its)
old=$(cat /run/libvirt/libvirtd.pid)
kill "$old"
for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
kill -0 "$old" 2>/dev/null && fail "libvirtd $old did not stop"
libvirtd -d -p /run/libvirt/libvirtd.pid
for _ in $(seq 100); do virsh -q version >/dev/null 2>&1 && break; sleep 0.1; done
# scripts/sandbox stops the daemon named in its state directory at exit
cp /run/libvirt/libvirtd.pid "$SHIFTLAB_SANDBOX_STATE/libvirtd.pid"
[[ $(virsh domstate bmc-events-0) == running ]] || fail "the domain did not survive the daemon restart"
# the BMC notices the closed connection (EOF or keepalive), reconnects at its next request
shows .PowerState On "after the restart"
virsh -q destroy bmc-events-0 >/dev/null
shows .PowerState Off "after virsh destroy on the restarted daemon"
grep -q "reconnected to libvirt" "$work/bmc.log" || fail "the BMC did not log its reconnection"
virsh -q start bmc-events-0 >/dev/null
shows .PowerState On "after virsh start on the restarted daemon"

echo "PASS $NAME"
