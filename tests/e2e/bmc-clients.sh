#!/usr/bin/env bash
# Real Redfish clients against `shiftlab bmc` on 127.0.0.1 (TLS + auth):
# the sushy scenario with bad requests, and DMTF's service validator, which
# must report 0 failures. Backend: BMC_E2E_URI (default test:///default,
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
"$bin" bmc --connect "$uri" --allow "$domain" --listen "127.0.0.1:$port" --bmc-dir "$work/state" \
  --allow-image-source 127.0.0.0/8 >"$work/bmc.log" 2>&1 &
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
