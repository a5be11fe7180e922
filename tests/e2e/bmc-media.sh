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

if [ "${1:-}" != __inside ]; then
  bmc_venv
  (cd "$repo" && cargo build -q --bin shiftlab)
  sandbox=$repo/scripts/sandbox
  # bounded: the sandbox stops everything it started when the time is up
  exec timeout -k 30 170 "$sandbox" run -- "$0" __inside
fi

# ---- inside the sandbox: LIBVIRT_DEFAULT_URI=qemu:///system
e2e_workdir bmc-media
pids=()
on_exit 'for p in "${pids[@]}"; do stop_pid "$p"; done'
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/bmc.log" "$work/http.log"'

virsh -q pool-define-as default dir --target /var/lib/libvirt/images >/dev/null
virsh -q pool-start default >/dev/null
for d in a b; do
  virsh -q vol-create-as default "bmc-$d.qcow2" 16M --format qcow2 >/dev/null
  cat >"$work/$d.xml" <<EOF
<domain type='qemu'>
  <name>bmc-media-$d</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>
  <features><acpi/></features>
  <devices>
    <disk type='volume' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source pool='default' volume='bmc-$d.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
  </devices>
</domain>
EOF
  virsh -q define "$work/$d.xml" >/dev/null
done

mkdir -p "$work/iso" "$work/www"
echo "shiftlab bmc virtual media test" >"$work/iso/README"
genisoimage -quiet -o "$work/www/boot.iso" -V SHIFTLAB -r -J "$work/iso"
http_port=18080
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$http_port" >"$work/http.log" 2>&1 &
pids+=($!)

port=18443
"$bin" -v bmc --connect qemu:///system --allow bmc-media-a --allow bmc-media-b --pool default \
  --listen "127.0.0.1:$port" --bmc-dir "$work/bmc" >"$work/bmc.log" 2>&1 &
pids+=($!)
wait_for 10 "the ISO server" curl -s "http://127.0.0.1:$http_port/"
wait_for 10 "the BMC" curl -sk "https://127.0.0.1:$port/redfish/v1/"

"$venv/bin/python" "$here/bmc-media.py" "https://127.0.0.1:$port" admin "$(cat "$work/bmc/password")" \
  "$work/bmc/tls/ca.crt" "http://127.0.0.1:$http_port/boot.iso" "$work/http.log" bmc-media-a bmc-media-b
