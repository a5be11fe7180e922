#!/usr/bin/env bash
# tests/e2e/lab-bmc.sh IMAGE — the lab's Redfish BMC inside `shiftlab serve`, in
# the sandbox: an ipi cluster's domains, addressed by the UUIDs install-config
# names, behind TLS (the lab CA) and the lab password; power through Redfish is
# seen by libvirt; domains of other clusters are not exposed; virtual media
# only from the cluster's machine network (serve has no --allow-image-source
# here): an image on loopback is refused and its server sees nothing.
# With `storage: nfs`, the cluster's NFS export (docs/storage.md) from clients in
# namespaces of this script's own: one on the lab bridge writes a file with the
# userspace client (nfs-cp) and it lands in the data directory; one from another
# subnet is refused by the export; a killed server is started again; behind a
# default-drop nftables input chain serve opens 2049 for the subnet; destroy
# stops the server, its rule and config go, the data stays; destroy
# --purge-storage removes it.
set -euo pipefail
NAME=lab-bmc
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
fail() { echo "FAIL $NAME: $*"; tail -20 "$work/serve.log" 2>/dev/null; exit 1; }
e2e_workdir bmc
serve=""
on_exit 'stop_pid "$serve"'
destroy_on_exit bmc
command -v nfs-cp >/dev/null || fail "nfs-cp is missing (libnfs-utils; scripts/setup installs it)"
cluster_file bmc 192.168.195.0/24 "method: ipi" "image: $IMAGE" "ctlplanes: 3" "workers: 1" "storage: nfs" >/dev/null
# Another subnet, 10.199.0.0/24, in a namespace of its own routed through this
# one (made first: its link-local address is this namespace's first IPv6
# address but loopback's, without which NFS-Ganesha binds every address).
other=nfso$$
on_exit "ip netns del $other 2>/dev/null"
ip netns add "$other"
ip link add "o$other" type veth peer name eth0 netns "$other"
ip addr add 10.199.0.1/24 dev "o$other"
ip link set "o$other" up
ip -n "$other" addr add 10.199.0.2/24 dev eth0
ip -n "$other" link set eth0 up
ip -n "$other" route add default via 10.199.0.1
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

step "storage: nfs: the export on the gateway, to the subnet only"
export_url="nfs://192.168.195.1/shiftlab/bmc"
data=$SHIFTLAB_HOME/storage/bmc/export
nfs_listening() { ss -ltnH 'sport = :2049' | awk '{print $4}'; }
nfs_up() { [[ -n $(nfs_listening) ]]; }
wait_for 30 "the NFS server on 192.168.195.1:2049" nfs_up
[[ $(nfs_listening) == *192.168.195.1]:2049 || $(nfs_listening) == 192.168.195.1:2049 ]] || fail "2049 listens on $(nfs_listening), not the gateway alone"
contains -x '        Clients = 192.168.195.0/24;' "$SHIFTLAB_HOME/clusters/bmc/nfs/ganesha.conf" || fail "the export's clients"
br=$(jq -r .network.bridge "$SHIFTLAB_HOME/clusters/bmc/plan.json")
node=nfsn$$
on_exit "ip netns del $node 2>/dev/null"
ip netns add "$node"
ip link add "n$node" type veth peer name eth0 netns "$node"
ip link set "n$node" master "$br" up
ip -n "$node" addr add 192.168.195.250/24 dev eth0
ip -n "$node" link set eth0 up
echo "written from the lab network" >"$work/nfs-in.txt"
ip netns exec "$node" timeout 20 nfs-cp "$work/nfs-in.txt" "$export_url/from-node.txt?version=4" || fail "a client in the subnet cannot write"
cmp "$work/nfs-in.txt" "$data/from-node.txt" || fail "the file did not land in $data"
# The other subnet reaches the server (no firewall yet) and the export refuses it.
if ip netns exec "$other" timeout 20 nfs-cp "$work/nfs-in.txt" "$export_url/from-other.txt?version=4" >"$work/other.out" 2>&1; then fail "a client of another subnet wrote"; fi
if ip netns exec "$other" timeout 20 nfs-ls "$export_url?version=4" >>"$work/other.out" 2>&1; then fail "a client of another subnet listed the export"; fi
contains NFS4ERR "$work/other.out" || fail "the other subnet was not refused by the server: $(cat "$work/other.out")"
[[ ! -e $data/from-other.txt ]] || fail "the other subnet's file landed"

step "a killed NFS server is started again by serve"
pid=$(cat "$SHIFTLAB_HOME/clusters/bmc/nfs/ganesha.pid")
kill -9 "$pid"
restarted() { [[ $(cat "$SHIFTLAB_HOME/clusters/bmc/nfs/ganesha.pid" 2>/dev/null) != "$pid" ]] && nfs_up; }
wait_for 30 "the NFS server restarted" restarted
contains 'nfs server exited; starting it again' "$work/serve.log" || fail "serve did not log the exit"

step "behind a default-drop input chain, serve opens 2049 for the subnet"
nft -f - <<'EOF'
table inet e2enfs {
  chain input {
    type filter hook input priority 0; policy drop;
    ct state established,related accept
    iif "lo" accept
  }
}
EOF
on_exit 'nft delete table inet e2enfs 2>/dev/null'
"$bin" serve notify bmc >/dev/null || fail "serve notify"
nfs_rule() { nft list ruleset | contains -F 'shiftlab bmc 192.168.195.1:2049'; }
wait_for 20 "the firewall rule for 2049" nfs_rule
ip netns exec "$node" timeout 20 nfs-cp "$work/nfs-in.txt" "$export_url/through-firewall.txt?version=4" || fail "the subnet is not let through to 2049"
cmp "$work/nfs-in.txt" "$data/through-firewall.txt" || fail "through the firewall: the file did not land"

step "destroy stops the export, its rule and config go, the data stays"
pid=$(cat "$SHIFTLAB_HOME/clusters/bmc/nfs/ganesha.pid")
"$bin" destroy cluster bmc | tee "$work/destroy.out"
contains -F "kept storage $SHIFTLAB_HOME/storage/bmc" "$work/destroy.out" || fail "destroy does not say the storage is kept"
if kill -0 "$pid" 2>/dev/null; then fail "the NFS server $pid still runs"; fi
if nfs_up; then fail "2049 still listens: $(nfs_listening)"; fi
if nfs_rule; then fail "the firewall rule for 2049 is left"; fi
[[ ! -e $SHIFTLAB_HOME/clusters/bmc/nfs ]] || fail "the server's config is left"
cmp "$work/nfs-in.txt" "$data/from-node.txt" || fail "destroy did not keep the data"
"$bin" destroy cluster bmc --purge-storage | tee "$work/purge.out"
contains -F "removed storage $SHIFTLAB_HOME/storage/bmc" "$work/purge.out" || fail "--purge-storage did not say it removed the storage"
[[ ! -e $SHIFTLAB_HOME/storage/bmc ]] || fail "--purge-storage left the data"
echo "PASS $NAME"
