#!/usr/bin/env bash
# tests/e2e/lab-bmc.sh IMAGE — the lab's Redfish BMC inside `shiftlab serve`, in
# the sandbox: an ipi cluster's domains, addressed by the UUIDs install-config
# names, behind TLS (the lab CA) and the lab password; power through Redfish is
# seen by libvirt; domains of other clusters are not exposed; virtual media
# only from the cluster's machine network (serve has no --allow-image-source
# here): an image on loopback is refused and its server sees nothing.
set -euo pipefail
NAME=lab-bmc
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
fail() { echo "FAIL $NAME: $*"; tail -20 "$work/serve.log" 2>/dev/null; exit 1; }
e2e_workdir bmc
serve=""
on_exit 'stop_pid "$serve"'
destroy_on_exit bmc
cluster_file bmc 192.168.195.0/24 "method: ipi" "image: $IMAGE" "ctlplanes: 3" "workers: 1" >/dev/null
SHIFTLAB_LOG=info "$bin" serve --host-dns off --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
"$bin" create install-config -f "$work/bmc.yaml" --dir "$work/ic" >/dev/null
"$bin" create infra -f "$work/bmc.yaml" >/dev/null
pw=$(cat "$SHIFTLAB_HOME/clusters/bmc/bmc-password")
ca=$SHIFTLAB_HOME/clusters/bmc/bmc/tls/ca.crt
for _ in $(seq 60); do [[ -f $ca ]] && curl -sf --cacert "$ca" https://192.168.195.1:8443/redfish/v1/ >/dev/null && break; sleep 0.5; done
curl -sf --cacert "$ca" https://192.168.195.1:8443/redfish/v1/ >/dev/null || fail "the BMC does not answer with the lab CA"
[[ $(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" https://192.168.195.1:8443/redfish/v1/Systems) == 401 ]] || fail "no auth required"
members=$(curl -sf --cacert "$ca" -u "admin:$pw" https://192.168.195.1:8443/redfish/v1/Systems | jq -r '.Members[]."@odata.id"' | sort)
want=$(grep -o 'redfish/v1/Systems/[0-9a-f-]*' "$work/ic/install-config.yaml" | sed 's|^|/|' | sort)
[[ $members == "$want" ]] || fail "systems $members, install-config names $want"
sys=$(grep -m1 -o 'redfish/v1/Systems/[0-9a-f-]*' "$work/ic/install-config.yaml")
uuid=${sys##*/}
dom=$(virsh domname "$uuid")
[[ $(virsh domstate "$dom") == "shut off" ]] || fail "$dom should start off (the installer powers it)"
curl -sf --cacert "$ca" -u "admin:$pw" -H 'Content-Type: application/json' \
	-d '{"ResetType":"On"}' "https://192.168.195.1:8443/$sys/Actions/ComputerSystem.Reset" >/dev/null || fail "power on"
[[ $(virsh domstate "$dom") == running ]] || fail "$dom did not start"
[[ $(curl -sf --cacert "$ca" -u "admin:$pw" "https://192.168.195.1:8443/$sys" | jq -r .PowerState) == On ]] || fail "PowerState"
curl -sf --cacert "$ca" -u "admin:$pw" -H 'Content-Type: application/json' \
	-d '{"ResetType":"ForceOff"}' "https://192.168.195.1:8443/$sys/Actions/ComputerSystem.Reset" >/dev/null || fail "power off"
[[ $(virsh domstate "$dom") == "shut off" ]] || fail "$dom did not stop"
# loopback is not the lab's network: refused, with the one message, nothing fetched
mkdir -p "$work/www" && echo iso >"$work/www/x.iso"
python3 -m http.server 18099 --bind 127.0.0.1 --directory "$work/www" >"$work/iso.log" 2>&1 &
iso=$!
on_exit 'stop_pid "$iso"'
iso_up() { [[ -n $(ss -ltnH 'sport = :18099') ]]; }
wait_for 10 "the loopback ISO server" iso_up
code=$(curl -s -o "$work/insert.json" -w '%{http_code}' --cacert "$ca" -u "admin:$pw" -H 'Content-Type: application/json' \
	-d '{"Image":"http://127.0.0.1:18099/x.iso"}' "https://192.168.195.1:8443/$sys/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia")
[[ $code == 400 ]] || fail "a loopback image: HTTP $code"
jq -r '.error.message' "$work/insert.json" | contains 'refused by the BMC' || fail "message: $(cat "$work/insert.json")"
! grep -q 'GET /x.iso' "$work/iso.log" || fail "the lab BMC fetched from loopback"
grep -F 'is a loopback address' "$work/serve.log" >/dev/null || fail "serve's log does not say why"
echo "PASS $NAME"
