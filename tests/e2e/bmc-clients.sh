#!/usr/bin/env bash
# Real Redfish clients against `shiftlab bmc` on 127.0.0.1 (TLS + auth):
# the sushy scenario with bad requests, and DMTF's service validator, which
# must report 0 failures. Then 2,000 stalled POSTs (authenticated headers, a
# body that never comes) from 127.0.0.2-21 while a client on 127.0.0.1 is
# answered; the BMC runs under systemd's default soft open-file limit (1,024). Backend: BMC_E2E_URI (default test:///default,
# domain "test"); set BMC_E2E_DOMAIN and BMC_E2E_ISO for a real libvirtd.
NAME=bmc-clients
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
schemas=${BMC_SCHEMAS:-$repo/../shared/redfish/csdl}
uri=${BMC_E2E_URI:-test:///default}
domain=${BMC_E2E_DOMAIN:-test}
port=${BMC_E2E_PORT:-18443}

bmc_venv
(cd "$repo" && cargo build -q --bin shiftlab)
e2e_workdir bmc-clients
# BMC_E2E_ISO is served on loopback: allowed explicitly.
prlimit --nofile=1024:16384 "$bin" bmc --connect "$uri" --allow "$domain" --listen "127.0.0.1:$port" \
  --bmc-dir "$work/state" --allow-image-source 127.0.0.0/8 >"$work/bmc.log" 2>&1 &
pid=$!
on_exit 'stop_pid "$pid"'
wait_for 10 "the BMC on 127.0.0.1:$port" curl -sk "https://127.0.0.1:$port/redfish/v1/"
url="https://127.0.0.1:$port"
password=$(cat "$work/state/password")
ca="$work/state/tls/ca.crt"
uuid=$(curl -s --cacert "$ca" -u "admin:$password" "$url/redfish/v1/Systems/$domain" -o /dev/null -w '%{redirect_url}' | sed 's#.*/##')

"$venv/bin/python" "$here/bmc-sushy.py" "$url" admin "$password" "$ca" "$uuid" ${BMC_E2E_ISO:+"$BMC_E2E_ISO"}

"$venv/bin/rf_service_validator" --rhost "$url" -u admin -p "$password" --authtype Session \
  --schema_directory "$schemas" --logdir "$work/validator" >"$work/validator.out" 2>&1 || true
tail -8 "$work/validator.out"
fails=$(grep -A3 'FAIL' "$work/validator.out" | grep -Eo '^\|\s+[0-9]+\s+\|\s+[0-9]+\s+\|\s+[0-9]+' | awk -F'|' '{gsub(/ /,"",$4); print $4}' | tail -1)
if [ "${fails:-x}" != "0" ]; then
  echo "validator: ${fails:-unknown} failures"; echo "0 passed, 1 failed"; exit 1
fi
echo "validator: 0 failures"

# Stalled POSTs from 20 other loopback addresses: the BMC keeps answering.
grep '^Max open files' "/proc/$pid/limits" | contains -E '16384 +16384' || fail "soft open-file limit not raised"
python3 "$here/flood.py" 127.0.0.1 "$port" 2000 --tls --post "admin:$password" --hold 120 \
  --ready "$work/flood" $(for i in $(seq 2 21); do echo "--source 127.0.0.$i"; done) >/dev/null 2>&1 &
flooder=$!
on_exit 'stop_pid "$flooder"'
wait_for 120 "the flood to open its connections" test -s "$work/flood"
held=$(ls "/proc/$pid/fd" | wc -l)
echo "stalled POSTs: $(cat "$work/flood"); the BMC holds $held descriptors"
curl -sf --max-time 10 --cacert "$ca" -u "admin:$password" "$url/redfish/v1/Systems" | contains Members \
  || { tail -5 "$work/bmc.log"; fail "the BMC did not answer during the flood"; }
[ "$held" -lt 1100 ] || fail "the BMC holds $held descriptors (caps: 64 per peer, 1,024 in all)"
stop_pid "$flooder"
contains 'connections refused over the limits' "$work/bmc.log" || fail "refusals not logged"
echo "bmc flood: answered"
