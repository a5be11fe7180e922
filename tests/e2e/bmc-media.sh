#!/usr/bin/env bash
# Virtual media against a real libvirtd: inside a hermetic sandbox (own
# network + mount namespace, private libvirtd), `shiftlab bmc` (TLS + auth)
# serves two tiny QEMU domains and the real sushy client runs Ironic's
# virtual-media sequence with an ISO served over HTTP on 127.0.0.1;
# bmc-media.py checks every step through virsh (domstate, dumpxml, vol-list)
# and the HTTP server's log (the same image is not downloaded twice).
# Needs root and scripts/setup's packages; pip-installs sushy into a venv.
NAME=bmc-media
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# bounded: the sandbox stops everything it started when the time is up
bmc_suite 170 "$@"

# ---- inside the sandbox: LIBVIRT_DEFAULT_URI=qemu:///system
e2e_workdir bmc-media
bmc_pids
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/bmc.log" "$work/http.log"'

tiny_domains bmc-media-a bmc-media-b
http_port=18080
iso_server "$http_port" boot.iso
port=18443
bmc_start "$port" bmc-media-a bmc-media-b

"$venv/bin/python" "$here/bmc-media.py" "https://127.0.0.1:$port" admin "$(cat "$work/bmc/password")" \
  "$work/bmc/tls/ca.crt" "http://127.0.0.1:$http_port/boot.iso" "$work/http.log" bmc-media-a bmc-media-b
