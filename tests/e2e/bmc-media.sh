#!/usr/bin/env bash
# Virtual media against a real libvirtd: inside a hermetic sandbox (own
# network + mount namespace, private libvirtd), `shiftlab bmc` (TLS + auth)
# serves two tiny QEMU domains and the real sushy client runs Ironic's
# virtual-media sequence with an ISO served over HTTP on 127.0.0.1;
# bmc-media.py checks every step through virsh (domstate, dumpxml, vol-list)
# and the HTTP server's log (the same image is not downloaded twice).
# Then the image-source rule (docs/bmc.md, "Where images come from"): a "lab
# network" address in the sandbox's own network namespace serves the ISO
# over HTTPS with a certificate openssl makes here (fetched); six concurrent
# InsertMedia into one slot: one download, five 409; a second BMC, allowed
# that network only and given another CA with --media-ca, refuses loopback
# (plain, 127.1, 2130706433, [::1]), 169.254.169.254 and a redirect to
# loopback with the rule's message (none of those servers sees a
# connection), and names the cause of the wrong certificate (unknown CA) and
# of a closed port (connection refused), the URL's query redacted.
# Needs root and scripts/setup's packages; pip-installs sushy into a venv.
NAME=bmc-media
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# bounded: the sandbox stops everything it started when the time is up
bmc_suite 200 "$@"

# ---- inside the sandbox: LIBVIRT_DEFAULT_URI=qemu:///system
e2e_workdir bmc-media
bmc_pids
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/bmc.log" "$work/http.log" "$work"/bmc2.log "$work"/*-src.log'

tiny_domains bmc-media-a bmc-media-b
http_port=18080
iso_server "$http_port" boot.iso
port=18443
lab=10.77.0.1
bmc_sources=(--allow-image-source 10.77.0.0/24)
bmc_start "$port" bmc-media-a bmc-media-b

"$venv/bin/python" "$here/bmc-media.py" "https://127.0.0.1:$port" admin "$(cat "$work/bmc/password")" \
  "$work/bmc/tls/ca.crt" "http://127.0.0.1:$http_port/boot.iso" "$work/http.log" bmc-media-a bmc-media-b

# ---- where images may come from
# The lab network, inside this sandbox's network namespace (no route leaves
# it); on its lo, as the kernel may lack the dummy link type.
ip addr add "$lab/24" dev lo
ip addr add 169.254.169.254/32 dev lo
# The image server's own self-signed certificate, and an unrelated CA.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$lab" -addext "subjectAltName=IP:$lab" \
  -addext basicConstraints=critical,CA:FALSE -keyout "$work/lab.key" -out "$work/lab.crt" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=other CA" \
  -keyout "$work/other.key" -out "$work/other.crt" 2>/dev/null
src() { "$venv/bin/python" "$here/bmc-sources.py" "$@" 2>/dev/null & pids+=($!); }
src "$lab" 18445 "$work/https-src.log" --dir "$work/www" --tls "$work/lab.crt" "$work/lab.key"
src "$lab" 18446 "$work/slow-src.log" --dir "$work/www" --delay 2
src "$lab" 18447 "$work/redirect-src.log" --redirect "http://127.0.0.1:18090/boot.iso"
src 127.0.0.1 18090 "$work/victim-src.log" --dir "$work/www"
src ::1 18091 "$work/victim-src.log" --dir "$work/www"
src 169.254.169.254 18092 "$work/victim-src.log" --dir "$work/www"
listening() { for p in 18445 18446 18447 18090 18091 18092; do [[ -n $(ss -ltnH "sport = :$p") ]] || return 1; done; }
wait_for 10 "the image servers" listening

uuid_b=$(virsh domuuid bmc-media-b)
# media URL IMAGE [CA PASSWORD-FILE]: InsertMedia into bmc-media-b's CD through
# the BMC at URL; prints the status, the body in $work/media.out.
media() {
  curl -s --cacert "${3:-$work/bmc/tls/ca.crt}" -u "admin:$(cat "${4:-$work/bmc/password}")" \
    -H 'Content-Type: application/json' -d "{\"Image\":\"$2\"}" -o "$work/media.out" -w '%{http_code}' \
    "$1/redfish/v1/Systems/$uuid_b/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
}
eject() {
  curl -sf --cacert "$work/bmc/tls/ca.crt" -u "admin:$(cat "$work/bmc/password")" \
    -H 'Content-Type: application/json' -d '{}' \
    "https://127.0.0.1:$port/redfish/v1/Systems/$uuid_b/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia" >/dev/null
}
checks=0
ok() { echo "ok   $*"; checks=$((checks + 1)); }

# The lab's HTTPS server with its own certificate: fetched (not verified by default).
[[ $(media "https://127.0.0.1:$port" "https://$lab:18445/boot.iso") == 204 ]] ||
  fail "HTTPS with the installer's own certificate: $(cat "$work/media.out")"
grep '"GET /boot.iso' "$work/https-src.log" | contains '" 200 ' || fail "the HTTPS server served no ISO"
eject
ok "HTTPS image with a certificate made here is fetched"

# Six concurrent inserts into one slot (the image server answers after 2 s).
for i in 1 2 3 4 5 6; do media "https://127.0.0.1:$port" "http://$lab:18446/boot.iso" >"$work/six.$i" & done
wait_six() { for i in 1 2 3 4 5 6; do [[ -s $work/six.$i ]] || return 1; done; }
wait_for 60 "six inserts" wait_six
codes=$(for i in 1 2 3 4 5 6; do cat "$work/six.$i"; echo; done | sort | tr '\n' ' ')
[[ $codes == "204 409 409 409 409 409 " ]] || fail "six inserts: $codes"
[[ $(grep -c '"GET /boot.iso' "$work/slow-src.log") == 1 ]] || fail "six inserts: $(cat "$work/slow-src.log")"
eject
ok "six concurrent inserts: one download, five 409"

# A second BMC: images from the lab network only, certificates from another CA.
"$bin" -v bmc --connect qemu:///system --allow bmc-media-b --pool default --listen 127.0.0.1:18444 \
  --bmc-dir "$work/bmc2" --allow-image-source 10.77.0.0/24 --media-ca "$work/other.crt" >"$work/bmc2.log" 2>&1 &
pids+=($!)
wait_for 10 "the second BMC" curl -sk https://127.0.0.1:18444/redfish/v1/
# insert_refused IMAGE TEXT: the second BMC answers 400 naming TEXT.
insert_refused() {
  local code msg
  code=$(media https://127.0.0.1:18444 "$1" "$work/bmc2/tls/ca.crt" "$work/bmc2/password")
  msg=$(jq -r '.error."@Message.ExtendedInfo"[0].Message' "$work/media.out")
  [[ $code == 400 ]] || fail "$1: HTTP $code $(cat "$work/media.out")"
  [[ $msg == *"$2"* ]] || fail "$1: the message does not say '$2': $msg"
}
# What the rule refuses: one cause, no connection made.
for image in http://127.0.0.1:18090/boot.iso http://127.1:18090/boot.iso http://2130706433:18090/boot.iso \
  "http://[::1]:18091/boot.iso" http://169.254.169.254:18092/boot.iso "http://$lab:18447/boot.iso"; do
  insert_refused "$image" "refused by the BMC's image-source rule"
done
# What an allowed source fails with: its cause.
insert_refused "https://$lab:18445/boot.iso?sig=s3cret" "TLS: unknown CA"
! grep -F 's3cret' "$work/media.out" >/dev/null || fail "the URL's query is in the answer: $(cat "$work/media.out")"
insert_refused "http://$lab:18449/boot.iso" "connection refused"
[[ ! -s $work/victim-src.log ]] || fail "a refused source was reached: $(cat "$work/victim-src.log")"
[[ $(grep -c '"GET /boot.iso' "$work/redirect-src.log") == 1 ]] || fail "the redirect: $(cat "$work/redirect-src.log")"
[[ -z $(virsh -q vol-list default | grep shiftlab-media- || true) ]] || fail "a refused insert left a volume"
for why in 'is a loopback address' 'written as a number or in short form' 'is a link-local address' \
  'after 1 redirect(s)' 'media insert failed' 'TLS: unknown CA' 'connection refused'; do
  grep -F "$why" "$work/bmc2.log" >/dev/null || fail "the BMC's log does not say: $why"
done
! grep -F "$(cat "$work/bmc2/password")" "$work/bmc2.log" >/dev/null || fail "the password is in the log"
! grep -F 's3cret' "$work/bmc2.log" >/dev/null || fail "the URL's query is in the log"
ok "refused sources: the rule's message, nothing reached; failed ones: their cause; the causes in the log"
echo "$checks passed, 0 failed"
