#!/usr/bin/env bash
# Real Ironic (PyPI, ironic-lib.sh) drives `shiftlab bmc` on a real libvirtd in
# the sandbox, through Ironic's own REST API on 127.0.0.1: a wrong password
# leaves a node enrolled with the BMC's refusal; a tiny domain with
# 2 sockets x 2 cores x 1 thread, 1 GiB and two NICs is enrolled as baremetal-operator
# enrolls a host (redfish, the BMC's CA verified), managed, and inspected out
# of band: the inventory's CPU count and architecture, cpu_arch, memory_mb,
# local_gb and one port per NIC. Then the vmedia API: Ironic publishes the ISO
# on its HTTPS image server, whose certificate comes from a private CA (the BMC
# runs with --media-ca): inserted; published behind a certificate the BMC does
# not trust: the node's history names the unknown CA. UEFI HTTP boot: Ironic's
# redfish-https boot interface refuses the node (UefiHttp not offered) and the
# BMC's own answer to a UefiHttp PATCH says why. Ironic's log has no "No chassis".
NAME=bmc-ironic
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/ironic-lib.sh"

[[ ${1:-} == __inside ]] || ironic_venv # skip loudly before building anything
bmc_suite 150 "$@"

e2e_workdir bmc-ironic
bmc_pids
ironic_venv
on_exit '[ "$rc" -eq 0 ] || tail -n 30 "$work/bmc.log" "$work/ironic/ironic.log"'

tiny_domains bmc-ironic-a
# 2 sockets x 2 cores, 1 GiB (Ironic reads whole GiB), 2 NICs (user-mode:
# nothing outside the sandbox, and the domain is never started here)
virsh -q dumpxml --inactive bmc-ironic-a |
	sed -e "s#>131072</#>1048576</#g" -e "s#<vcpu[^>]*>1</vcpu>#<vcpu>4</vcpu><cpu><topology sockets='2' cores='2' threads='1'/></cpu>#" \
		-e "s#</devices>#<interface type='user'><mac address='52:54:00:1c:00:01'/><model type='virtio'/></interface><interface type='user'><mac address='52:54:00:1c:00:02'/><model type='virtio'/></interface></devices>#" \
		>"$work/a.xml"
virsh -q define "$work/a.xml" >/dev/null
uuid=$(virsh domuuid bmc-ironic-a)
# Ironic counts disks of 4 GiB and more: a sparse 8 GiB one
virsh -q vol-resize bmc-ironic-a.qcow2 8G --pool default >/dev/null

# Ironic's image server, as metal3 runs it (HTTPS, port 6183 there): its
# published images over HTTPS with a certificate from a private CA; the same
# directory behind a certificate from another CA, which the BMC does not trust.
pub=$work/ironic/httpboot
mkdir -p "$work/iso" "$pub"
echo "shiftlab $NAME" >"$work/iso/README"
genisoimage -quiet -o "$pub/live.iso" -V SHIFTLAB -r -J "$work/iso"
ca() { # NAME: a CA, and a server certificate for 127.0.0.1 it signs
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$1 CA" -keyout "$work/$1-ca.key" \
		-out "$work/$1-ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$work/$1.key" -out "$work/$1.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n' >"$work/$1.ext"
	openssl x509 -req -in "$work/$1.csr" -CA "$work/$1-ca.crt" -CAkey "$work/$1-ca.key" -CAcreateserial \
		-days 1 -extfile "$work/$1.ext" -out "$work/$1.crt" 2>/dev/null
}
ca private
ca stranger
src() { "$venv/bin/python" "$here/bmc-sources.py" "$@" 2>/dev/null & pids+=($!); }
src 127.0.0.1 16183 "$work/private-src.log" --dir "$pub" --tls "$work/private.crt" "$work/private.key"
src 127.0.0.1 16184 "$work/stranger-src.log" --dir "$pub" --tls "$work/stranger.crt" "$work/stranger.key"
listening() { for p in 16183 16184; do [[ -n $(ss -ltnH "sport = :$p") ]] || return 1; done; }
wait_for 10 "the image servers" listening

port=16443
bmc_sources=(--media-ca "$work/private-ca.crt")
bmc_start "$port" bmc-ironic-a
password=$(cat "$work/bmc/password")
# Ironic checks an image URL before the BMC gets it: it trusts both CAs.
cat "$work/private-ca.crt" "$work/stranger-ca.crt" >"$work/ironic-cas.crt"
ironic_start "$work/ironic" 16385 https://127.0.0.1:16183 "$work/ironic-cas.crt"
step "Ironic from $ironic_venv"

# Enrolled as baremetal-operator does from install-config's
# redfish-virtualmedia+https://… address with the BMC's CA.
enroll() { # name password
	ironic_api POST /v1/nodes "$(jq -n --arg n "$1" --arg pw "$2" --arg ca "$work/bmc/tls/ca.crt" \
		--arg sys "/redfish/v1/Systems/$uuid" --arg addr "https://127.0.0.1:$port" '
	{name: $n, driver: "redfish", boot_interface: "redfish-virtual-media", inspect_interface: "redfish",
	 driver_info: {redfish_address: $addr, redfish_system_id: $sys, redfish_username: "admin",
	   redfish_password: $pw, redfish_verify_ca: $ca}}')" | jq -r .uuid
}
# A wrong password: manage fails with the BMC's refusal, the node stays enrolled.
wrong=$(enroll bmc-ironic-wrong "not-$password")
[[ $wrong =~ ^[0-9a-f-]{36}$ ]] || fail "enroll: $wrong"
ironic_api PUT "/v1/nodes/$wrong/states/provision" '{"target":"manage"}' >/dev/null
refused() { ironic_api GET "/v1/nodes/$wrong" | jq -e '.provision_state == "enroll" and (.last_error // "" | test("401|[Aa]uthenticat|[Uu]nauthori"))'; }
wait_for 60 "the refused manage" refused
ironic_api DELETE "/v1/nodes/$wrong" >/dev/null
step "ok: a wrong password: the node stays enrolled, refused by the BMC"
node=$(enroll bmc-ironic-a "$password")
[[ $node =~ ^[0-9a-f-]{36}$ ]] || fail "enroll: $node"
ironic_api PUT "/v1/nodes/$node/states/provision" '{"target":"manage"}' >/dev/null
ironic_wait "$node" provision_state manageable 60
step "ok: enrolled and managed"

ironic_api PUT "/v1/nodes/$node/states/provision" '{"target":"inspect"}' >/dev/null
ironic_wait "$node" provision_state manageable 60
props=$(ironic_api GET "/v1/nodes/$node" | jq -c .properties)
[[ $(jq -r .cpu_arch <<<"$props") == x86_64 ]] || fail "cpu_arch: $props"
[[ $(jq -r .memory_mb <<<"$props") == 1024 ]] || fail "memory_mb: $props"
# local_gb: the disk less 1 GiB, as Ironic counts
[[ $(jq -r .local_gb <<<"$props") == 7 ]] || fail "local_gb: $props $(curl -s --cacert "$work/bmc/tls/ca.crt" -u "admin:$password" "https://127.0.0.1:$port/redfish/v1/Systems/$uuid/SimpleStorage/1") $(virsh vol-info bmc-ironic-a.qcow2 --pool default)"
macs=$(ironic_api GET "/v1/ports?node=$node" | jq -r '[.ports[].address] | sort | join(" ")')
[[ $macs == "52:54:00:1c:00:01 52:54:00:1c:00:02" ]] || fail "ports: $macs"
inv=$(ironic_api GET "/v1/nodes/$node/inventory" | jq -c .inventory.cpu)
[[ $(jq -r .architecture <<<"$inv") == x86_64 && $(jq -r .count <<<"$inv") == 4 ]] || fail "inventory cpu: $inv"
step "ok: out-of-band inspection: $props, ports $macs"

# Virtual media through Ironic's vmedia API: Ironic fetches the image and
# publishes it on its image server; the BMC fetches it from there.
vmedia() {
	ironic_api POST "/v1/nodes/$node/vmedia" '{"device_type": "cdrom", "image_url": "https://127.0.0.1:16183/live.iso"}'
}
cd_inserted() {
	curl -s --cacert "$work/bmc/tls/ca.crt" -u "admin:$password" \
		"https://127.0.0.1:$port/redfish/v1/Systems/$uuid/VirtualMedia/Cd" | jq -r .Inserted
}
# Ironic records a failed vmedia attach in the node's history.
history_says() { ironic_api GET "/v1/nodes/$node/history?detail=true" | jq -r '.history[].event' | contains "$1"; }
cd_is() { [[ $(cd_inserted) == "$1" ]]; }
# This node's images published behind the certificate the BMC does not trust.
ironic_api PATCH "/v1/nodes/$node" '[{"op":"add","path":"/driver_info/external_http_url","value":"https://127.0.0.1:16184"}]' >/dev/null
out=$(vmedia)
for _ in $(seq 60); do history_says 'TLS: unknown CA' && break; sleep 1; done
history_says 'TLS: unknown CA' ||
	fail "Ironic's history: $(ironic_api GET "/v1/nodes/$node/history?detail=true" | jq -r '.history[].event') $out"
cd_is false || fail "inserted from an untrusted server"
contains 'media insert failed.*TLS: unknown CA' "$work/bmc.log" || fail "the BMC's log does not say why"
ironic_api PATCH "/v1/nodes/$node" '[{"op":"remove","path":"/driver_info/external_http_url"}]' >/dev/null
vmedia >/dev/null
wait_for 60 "the inserted ISO" cd_is true
grep '"GET /redfish/cdrom-' "$work/private-src.log" | contains '" 200 ' || fail "the private-CA server served no ISO"
virsh -q domblklist bmc-ironic-a --details --inactive | contains 'cdrom.*shiftlab-media-' || fail "no ISO in the definition"
step "ok: vmedia from the private-CA HTTPS server inserted; from an untrusted one refused naming the unknown CA"

# UEFI HTTP boot: not offered; Ironic's redfish-https refuses, the BMC says why.
ironic_api PATCH "/v1/nodes/$node" '[{"op":"replace","path":"/boot_interface","value":"redfish-https"}]' >/dev/null
reason=$(ironic_api GET "/v1/nodes/$node/validate" | jq -r .boot.reason)
[[ $reason == *UefiHttp* ]] || fail "redfish-https validated: $reason"
answer=$(curl -s -X PATCH --cacert "$work/bmc/tls/ca.crt" -u "admin:$password" -H 'Content-Type: application/json' \
	-d '{"Boot":{"BootSourceOverrideTarget":"UefiHttp","HttpBootUri":"https://127.0.0.1:16183/live.iso"}}' \
	"https://127.0.0.1:$port/redfish/v1/Systems/$uuid")
jq -r '.error["@Message.ExtendedInfo"][0].Message' <<<"$answer" | contains 'boots images only as virtual media' ||
	fail "UefiHttp: $answer"
step "ok: UefiHttp refused ($reason)"

! grep -i 'no chassis' "$work/ironic/ironic.log" >/dev/null || fail "Ironic: $(grep -m1 -i 'no chassis' "$work/ironic/ironic.log")"
! grep -F "$password" "$work/bmc.log" >/dev/null || fail "the BMC's password is in its log"
step "ok: no 'No chassis' in Ironic's log"
echo "PASS $NAME"
