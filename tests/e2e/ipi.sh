#!/usr/bin/env bash
# tests/e2e/ipi.sh IMAGE — bare-metal IPI through shiftlab's BMC, end to end, in
# the sandbox.
#
#   scripts/sandbox run -- tests/e2e/ipi.sh /path/to/standin.qcow2
#
# A loopback release mirror serves the fake openshift-install and stream metadata
# whose metal ISO is the stand-in live ISO (what the installer's bootstrap VM and
# Ironic's hosts boot), and no qemu image: IPI needs none.
# `shiftlab create cluster` drives `method: ipi`, 3 control planes + 2 workers,
# with bmc.verify_certificate: the fake's `create cluster` creates its bootstrap
# VM on the network's bridge and runs the real Ironic (PyPI's, ironic-lib.sh;
# tests/fixtures/fake-openshift-install/ironic.sh), which enrolls each host as
# baremetal-operator does, inspects it out of band and deploys the role's live
# ISO from its HTTPS image server (a private CA the lab BMC is given with
# --media-ca), over TLS with the lab CA (bmcVerifyCA) and the lab password,
# through the BMC that `shiftlab serve` runs; with storage: nfs, a user and
# ntp_servers, whose manifests the bootstrap VM's Ignition carries (after the
# start over too). First the half-made states the real installer leaves
# (bootstrap VM stopped; a volume and the domain missing; metadata.json only),
# each rerun converging past it; then shiftlab is killed with -9 while the hosts
# are being provisioned, and Ironic with -9 once they are active; the rerun
# restarts Ironic on its database and completes. Checked: every node booted the ISO once,
# installed once and runs from its disk, its media ejected; every Ironic node
# inspected (cpu_arch) and `active`, no BMC password in Ironic's logs; the BMC's log has
# each system's InsertMedia, boot override and resets by the lab user; the
# bootstrap VM was on the right bridge and is gone with its pool. Then the same
# install as a user rehearses it (`rehearsal: true` alone, IPI 3+2, dual-stack
# with the BMC on the host's IPv6 address, its report exit 0), and a compact 3+0 rehearsal whose BMC refuses the media (it trusts a
# CA that did not sign the image server's certificate): the install fails at the
# first node, and `shiftlab report` names the node and the BMC's message, exit 9.
set -euo pipefail

NAME=ipi
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ironic-lib.sh"
ironic_venv # none: skip loudly (CI: fail)
e2e_sandbox "$@"
fake=$repo/assets/rehearsal/openshift-install
command -v coreos-installer >/dev/null || fail "coreos-installer not found (scripts/setup installs it)"
e2e_workdir ipi
export SHIFTLAB_CACHE=$work/cache XDG_CACHE_HOME=$work/xdg
export SHIFTLAB_FAKE_IRONIC=$repo/tests/fixtures/fake-openshift-install/ironic.sh IRONIC_VENV=$ironic_venv
# Ironic's image server: HTTPS with a certificate from a private CA, which the
# lab BMC is given (serve --media-ca).
export FAKE_IRONIC_TLS_DIR=$work/ironic-tls
mkdir -p "$FAKE_IRONIC_TLS_DIR"
(
	cd "$FAKE_IRONIC_TLS_DIR"
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=Ironic CA" -keyout ca.key -out ca.crt 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout tls.key -out tls.csr 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n' >tls.ext
	openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile tls.ext -out tls.crt 2>/dev/null
)
# The fake's waits, and the smallest bootstrap VM (the real one: 6 GiB, 4 vCPUs).
export FAKE_INSTALL_TIMEOUT=${FAKE_INSTALL_TIMEOUT:-900}
export FAKE_BOOTSTRAP_MEMORY_MIB=512 FAKE_BOOTSTRAP_VCPUS=1
# TCG, as shiftlab decides for the nodes here (the sandbox's /dev/kvm cannot give
# guests x86-64-v2).
export FAKE_BOOTSTRAP_DOMAIN_TYPE=qemu
C=ipi1
mirror_pid="" serve=""
on_exit 'stop_pid "$mirror_pid"'
on_exit 'stop_pid "$serve"'
on_exit 'p=$(cat "$SHIFTLAB_HOME/clusters/$C/assets/.ironic/pid" 2>/dev/null) && [[ -n $p ]] && kill "$p" 2>/dev/null'
destroy_on_exit "$C"
on_exit '[[ $rc == 0 ]] || for l in "$SHIFTLAB_HOME/clusters/$C/openshift-install.log" "$SHIFTLAB_HOME/clusters/$C/assets/.ironic/ironic.log" "$SHIFTLAB_HOME/clusters/$C/assets/.ironic/service/ironic.log" "$work/serve.log"; do [[ -f $l ]] && echo "--- $l" && tail -40 "$l"; done'
on_exit '[[ $rc == 0 ]] || grep -h "standin: " /var/log/libvirt/qemu/'"$C"'-*-console.log | tail -40'

# The mirror: one OKD release (4.21: bmcVerifyCA needs it), the stand-in live ISO
# as its metal ISO, no qemu image (a fetch of one would fail).
V=4.21.0-okd-scos.0
port=$((20000 + RANDOM % 20000))
base=http://127.0.0.1:$port
d=$work/mirror/$V t=$work/tar
mkdir -p "$d" "$t/i" "$t/c"
cp "$fake" "$t/i/openshift-install"
printf '#!/bin/sh\necho "Client Version: %s"\n' "$V" >"$t/c/oc"
chmod +x "$t/c/oc"
tar -C "$t/i" -czf "$d/openshift-install-linux-$V.tar.gz" openshift-install
tar -C "$t/c" -czf "$d/openshift-client-linux-$V.tar.gz" oc
printf 'Name:      %s\n\nPull From: quay.io/okd/scos-release:%s\n\nRelease Metadata:\n  Version:  %s\n' "$V" "$V" "$V" >"$d/release.txt"
(cd "$d" && sha256sum openshift-*.tar.gz >sha256sum.txt)
"$bin" image standin --iso --out "$work/mirror/coreos-live.x86_64.iso" >/dev/null
sum() { sha256sum <"$1" | cut -d' ' -f1; }
jq -n --arg b "$base" --arg iso "$(sum "$work/mirror/coreos-live.x86_64.iso")" \
	'{stream:"scos-4.21",architectures:{x86_64:{artifacts:{
		metal:{formats:{iso:{disk:{location:($b + "/coreos-live.x86_64.iso"),sha256:$iso}}}}}}}}' \
	>"$work/stream.json"
export SHIFTLAB_FAKE_STREAM_JSON=$work/stream.json
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/mirror" >"$work/mirror.log" 2>&1 &
mirror_pid=$!
wait_for 10 "the mirror" curl -fs "$base/$V/release.txt"

# serve runs the lab's DNS, HTTP and the BMC (TLS with the lab CA, lab password);
# Ironic's image server is on loopback, which the lab BMC fetches from only
# when told (on the bootstrap VM it is on the lab network), trusting its CA.
SHIFTLAB_LOG=info "$bin" serve --host-dns off --scan-interval 1 --allow-image-source 127.0.0.0/8 \
	--media-ca "$FAKE_IRONIC_TLS_DIR/ca.crt" >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"

# 1 GiB nodes: Ironic's out-of-band inspection reads whole GiB (sushy's
# TotalSystemMemoryGiB) and fails on a node of less (QEMU touches only what the
# stand-in uses).
f=$(cluster_file "$C" 192.168.191.0/24 "version: $V" "mirror: $base" "method: ipi" "ctlplanes: 3" "workers: 2" \
	"memory: 1024" "bmc:" "  verify_certificate: true" "${lab_settings[@]}")
nodes=("$C-ctlplane-0" "$C-ctlplane-1" "$C-ctlplane-2" "$C-worker-0" "$C-worker-1")
assets=$SHIFTLAB_HOME/clusters/$C/assets
target_status() { jq -r --arg t "$1" '.targets[$t].status // "none"' "$SHIFTLAB_HOME/clusters/$C/install-state.json" 2>/dev/null || echo none; }
console() { cat "/var/log/libvirt/qemu/$1-console.log" 2>/dev/null || true; }
infra_id() { jq -r '.infraID // empty' "$assets/metadata.json" 2>/dev/null || true; }
# The lab's manifests (storage, users, time) in the Ignition of the bootstrap
# VM's live ISO, under /opt/openshift/ as `create cluster` puts them, and the
# Machine API objects kept (they are IPI's machines).
bootstrap_carries_the_lab() { # infraID case
	virsh -q vol-download --pool "$1-bootstrap" "$1-live-provisioner" "$work/bootstrap-$2.iso" >/dev/null
	coreos-installer iso ignition show "$work/bootstrap-$2.iso" >"$work/bootstrap-$2.ign"
	rm -f "$work/bootstrap-$2.iso"
	ign_has "$work/bootstrap-$2.ign" /opt/openshift/openshift/99-shiftlab-storage-storageclass.yaml \
		/opt/openshift/openshift/99-shiftlab-users-htpasswd-secret.yaml /opt/openshift/openshift/99-worker-chrony-shiftlab.yaml \
		/opt/openshift/openshift/99_openshift-cluster-api_master-machines-0.yaml
}

# The half-made states the real installer leaves, on which its `destroy
# bootstrap` fails (pkg/infrastructure/baremetal: bootstrap.go destroyBootstrap,
# variables.go getConfig). Made from a `create cluster` stopped right after its
# bootstrap VM: without Ironic (SHIFTLAB_FAKE_IRONIC unset) the fake fails there.
# From each, the rerun gets a whole bootstrap VM again; the last one goes on.
whole_bootstrap() { # infraID
	[[ $(virsh -q domstate "$1-bootstrap" 2>/dev/null) == running ]] &&
		virsh -q vol-info --pool "$1-bootstrap" "$1-live-provisioner" >/dev/null 2>&1 &&
		virsh -q vol-info --pool "$1-bootstrap" "$1-scratch" >/dev/null 2>&1
}
without_ironic() { # case
	if env -u SHIFTLAB_FAKE_IRONIC "$bin" create cluster -f "$f" >"$work/$1.shiftlab.out" 2>&1; then
		fail "$1: create cluster went past the bootstrap without Ironic"
	fi
	cp "$SHIFTLAB_HOME/clusters/$C/openshift-install.log" "$work/$1.out"
	[[ $(tail -n 1 "$work/$1.out") == *'SHIFTLAB_FAKE_IRONIC names no Ironic driver'* ]] ||
		fail "$1: create cluster stopped elsewhere: $(tail -20 "$work/$1.out")"
}
step "half-made bootstrap states: stopped, missing volume, metadata.json only"
without_ironic first
id=$(infra_id)
[[ -n $id ]] && whole_bootstrap "$id" || fail "no whole bootstrap VM after the first create cluster"
bootstrap_carries_the_lab "$id" first
virsh -q destroy "$id-bootstrap" >/dev/null
without_ironic stopped
grep -q 'failed to destroy bootstrap: .*domain is not running' "$work/stopped.out" ||
	fail "stopped: the installer's destroy bootstrap did not fail as the real one does: $(tail -20 "$work/stopped.out")"
grep -q 'removing what is left of the bootstrap through libvirt' "$work/stopped.shiftlab.out" ||
	fail "stopped: shiftlab did not remove the bootstrap itself: $(tail -20 "$work/stopped.shiftlab.out")"
[[ $(infra_id) == "$id" ]] && whole_bootstrap "$id" || fail "stopped: no whole bootstrap VM $id-bootstrap after the rerun"
step "ok: a stopped bootstrap VM: removed through libvirt, made again"
virsh -q destroy "$id-bootstrap" >/dev/null
virsh -q undefine "$id-bootstrap" >/dev/null
virsh -q vol-delete --pool "$id-bootstrap" "$id-scratch" >/dev/null
without_ironic half
grep -q 'failed to destroy bootstrap: .*Domain not found' "$work/half.out" ||
	fail "half: the installer's destroy bootstrap did not fail as the real one does: $(tail -20 "$work/half.out")"
grep -q 'removing what is left of the bootstrap through libvirt' "$work/half.shiftlab.out" ||
	fail "half: shiftlab did not remove the bootstrap itself: $(tail -20 "$work/half.shiftlab.out")"
whole_bootstrap "$id" || fail "half: no whole bootstrap VM after the rerun"
step "ok: a half-made bootstrap (no domain, no scratch volume): removed through libvirt, made again"
virsh -q destroy "$id-bootstrap" >/dev/null
virsh -q undefine "$id-bootstrap" >/dev/null
for v in "$id-live-provisioner" "$id-scratch"; do virsh -q vol-delete --pool "$id-bootstrap" "$v" >/dev/null; done
virsh -q pool-destroy "$id-bootstrap" >/dev/null
virsh -q pool-delete "$id-bootstrap" >/dev/null
virsh -q pool-undefine "$id-bootstrap" >/dev/null
rm "$assets/terraform.tfvars.json" "$assets/terraform.platform.auto.tfvars.json"
destroys=$(grep -c 'openshift-install destroy bootstrap' "$SHIFTLAB_HOME/clusters/$C/openshift-install.log")

step "create cluster from metadata.json only, killed with -9 while Ironic provisions the hosts"
"$bin" create cluster -f "$f" >"$work/killed.out" 2>&1 &
pid=$!
deadline=$((SECONDS + 1200))
until grep -qs ': deploying ' "$assets/.ironic/ironic.log"; do
	kill -0 "$pid" 2>/dev/null || fail "shiftlab ended before Ironic provisioned: $(tail -20 "$work/killed.out")"
	((SECONDS < deadline)) || fail "Ironic never started provisioning"
	sleep 1
done
old=$id id=$(infra_id)
[[ -n $id ]] || fail "no infraID in metadata.json once Ironic runs"
grep -q 'the installer made nothing last time: starting over' "$work/killed.out" ||
	fail "metadata.json only: shiftlab did not start over: $(tail -20 "$work/killed.out")"
[[ $id != "$old" ]] || fail "metadata.json only: the installer kept its state (infraID $id)"
[[ $(grep -c 'openshift-install destroy bootstrap' "$SHIFTLAB_HOME/clusters/$C/openshift-install.log") == "$destroys" ]] ||
	fail "metadata.json only: destroy bootstrap ran"
# The bootstrap VM's NICs, recorded while it exists.
virsh -q domiflist "$id-bootstrap" | tee "$work/bootstrap-nics.txt"
# Started over, the installer would discard the manifests on disk (its
# install-config is new to it): shiftlab made them again, the lab's with them.
bootstrap_carries_the_lab "$id" again
if contains 'Discarding the' "$SHIFTLAB_HOME/clusters/$C/openshift-install.log"; then
	fail "the installer discarded manifests: $(grep 'Discarding the' "$SHIFTLAB_HOME/clusters/$C/openshift-install.log")"
fi
deployed=$(ls "$assets/.ironic/deployed" 2>/dev/null | wc -l)
((deployed < 5)) || fail "every host was deployed before the kill"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
echo "killed shiftlab with $deployed of 5 hosts deployed"
gone=$((SECONDS + 15))
while pgrep -f "$work/cache/.*openshift-install create cluster" >/dev/null; do
	((SECONDS < gone)) || fail "the installer outlived the shiftlab that ran it"
	sleep 0.2
done
# Ironic dies too (the bootstrap VM's Ironic container restarting), its nodes
# active: the rerun restarts it on the same database, which leaves them alone.
ironic_url=$(sed -n 's/.* at \(http:[^,]*\), images at .*/\1/p' "$assets/.ironic/ironic.log" | tail -n 1)
[[ -n $ironic_url ]] || fail "no Ironic API in $(cat "$assets/.ironic/ironic.log")"
active() { [[ $(ironic_api GET '/v1/nodes?fields=provision_state' | jq '[.nodes[] | select(.provision_state == "active")] | length') == 5 ]]; }
wait_for 300 "Ironic's nodes active" active
deployed=$(ls "$assets/.ironic/deployed" 2>/dev/null | wc -l)
((deployed < 5)) || fail "every host was deployed before Ironic was killed"
# The driver, Ironic and its image server: one process group (setsid).
kill -9 -- "-$(cat "$assets/.ironic/pid")"
echo "killed Ironic with $deployed of 5 hosts deployed"

bridge=$(virsh net-dumpxml "shiftlab-$C" | sed -n "s/.*<bridge name='\([^']*\)'.*/\1/p")
[[ -n $bridge ]] || fail "no bridge for network shiftlab-$C"
awk '{print $2, $3}' "$work/bootstrap-nics.txt" | contains "^bridge $bridge\$" ||
	fail "the bootstrap VM is not on the network's bridge $bridge: $(cat "$work/bootstrap-nics.txt")"
step "ok: the installer's bootstrap VM $id-bootstrap ran on $bridge"

step "rerun: the install resumes to install complete"
"$bin" create cluster -f "$f" 2>&1 | tee "$work/rerun.out" | tail -8
grep -q 'resuming the install' "$work/rerun.out" || fail "the rerun did not resume"
grep -q 'console: *https://console-openshift-console.apps.'"$C"'.lab.test' "$work/rerun.out" || fail "no console URL"
for tg in release install-config manifests infra install-complete; do
	[[ $(target_status "$tg") == done ]] || fail "target $tg is $(target_status "$tg")"
done

# The bootstrap VM and its pool are gone.
[[ -z $(virsh list --all --name | grep -- "-bootstrap$" || true) ]] || fail "a bootstrap VM is left: $(virsh list --all --name)"
if virsh pool-info "$id-bootstrap" >/dev/null 2>&1; then fail "the bootstrap pool is left"; fi
step "ok: the bootstrap VM and its pool were removed"

# Each node: booted the ISO once, installed once, runs from its disk, media ejected.
password=$(cat "$SHIFTLAB_HOME/clusters/$C/bmc-password")
ca=$SHIFTLAB_HOME/clusters/$C/bmc/tls/ca.crt
for n in "${nodes[@]}"; do
	[[ $(console "$n" | grep -c 'standin: boot: iso') == 1 ]] || fail "$n booted the ISO $(console "$n" | grep -c 'standin: boot: iso') times"
	[[ $(console "$n" | grep -c 'SHIFTLAB-STANDIN-INSTALLED') == 1 ]] || fail "$n installed $(console "$n" | grep -c SHIFTLAB-STANDIN-INSTALLED) times"
	console "$n" | grep 'SHIFTLAB-STANDIN-REPORT' | tail -n 1 | contains '"boot":"disk"' || fail "$n does not run from its disk"
	[[ $(virsh -q domstate "$n") == running ]] || fail "$n is $(virsh -q domstate "$n")"
	virsh -q domblklist "$n" --details --inactive | awk '$2 == "cdrom" && $4 != "-" {exit 1}' ||
		fail "$n: media still in its definition: $(virsh -q domblklist "$n" --details --inactive)"
	uuid=$(virsh domuuid "$n")
	for what in 'media inserted' 'boot patched' ' reset' 'media ejected'; do
		grep "system=$uuid\|system=/redfish/v1/Systems/$uuid" "$work/serve.log" | grep "$what" | contains 'user=admin' ||
			fail "$n: the BMC log has no '$what' by admin"
	done
	# The BMC answers over TLS with the lab CA and the lab password.
	curl -fsS --cacert "$ca" -u "admin:$password" "https://192.168.191.1:8443/redfish/v1/Systems/$uuid" |
		jq -e '.PowerState == "On"' >/dev/null || fail "$n: the BMC does not report it on"
done
step "ok: every node powered, booted once from virtual media then from disk, through the BMC as admin"
grep -q 'bmcVerifyCA' "$SHIFTLAB_HOME/clusters/$C/install-config.backup.yaml" 2>/dev/null ||
	grep -rqs 'bmcVerifyCA' "$SHIFTLAB_HOME/clusters/$C/" || fail "install-config carries no bmcVerifyCA"
cmp -s <(sed -n '/BEGIN/,/END/p' "$assets/.ironic/bmc-ca.pem") <(sed -n '/BEGIN/,/END/p' "$ca") ||
	fail "Ironic was not given the lab CA"
step "ok: Ironic verified the BMC with the lab CA from bmcVerifyCA"
# Ironic's own record: every node inspected out of band and active.
"$ironic_venv/bin/python" -c 'import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for name, state, props in db.execute("select name, provision_state, properties from nodes order by name"):
    print(name, state, json.loads(props).get("cpu_arch"))' "$assets/.ironic/service/ironic.sqlite" | tee "$work/nodes.txt"
for n in "${nodes[@]}"; do contains "^$n active x86_64\$" "$work/nodes.txt" || fail "Ironic's node $n: $(grep "^$n " "$work/nodes.txt")"; done
[[ $(wc -l <"$work/nodes.txt") == 5 ]] || fail "Ironic has other nodes: $(cat "$work/nodes.txt")"
grep -q '"GET /.*\.iso' "$assets/.ironic/service/httpd.log" || fail "the BMC fetched no ISO from Ironic's HTTPS image server"
for l in "$assets/.ironic/ironic.log" "$assets/.ironic/service/ironic.log" "$assets/.ironic/service/ironic.out"; do
	! grep -qF "$password" "$l" || fail "a BMC password in $l"
done
[[ $(stat -c %a "$assets/.ironic/service/ironic.sqlite") == 600 ]] || fail "Ironic's database is not 0600"
[[ $(grep -c ' at http://127.0.0.1:[0-9]*, images at ' "$assets/.ironic/ironic.log") == 2 ]] ||
	fail "Ironic was not restarted once: $(grep ' images at ' "$assets/.ironic/ironic.log")"
[[ $(grep -c ': deploying ' "$assets/.ironic/ironic.log") == 5 ]] ||
	fail "a host was deployed again after Ironic's restart: $(grep ': deploying ' "$assets/.ironic/ironic.log")"
step "ok: Ironic inspected and deployed every node (active), from its HTTPS image server; restarted on its database, no host deployed twice; no password in its logs"
"$bin" status "$C" -o json | jq -e '.install.flow == "ipi"' >/dev/null || fail "status does not show the ipi flow"

# The same install as a user rehearses it: `rehearsal: true` alone runs the
# shipped stand-in installer, its bootstrap VM and `shiftlab ironic-standin`
# (Ironic 39's Redfish sequence, media over HTTPS from its own CA), with no
# mirror, no tests/ path, no environment. serve without --allow-image-source or
# --media-ca (they would win): a rehearsal's lab BMC trusts its stand-in's CA.
step "rehearsal: true alone: IPI 3+2 through serve's BMC with the shipped stand-ins"
"$bin" destroy cluster "$C" >/dev/null
stop_pid "$mirror_pid"
stop_pid "$serve"
clean=(env -u SHIFTLAB_FAKE_IRONIC -u SHIFTLAB_FAKE_STREAM_JSON -u IRONIC_VENV -u FAKE_IRONIC_TLS_DIR
	-u FAKE_BOOTSTRAP_MEMORY_MIB -u FAKE_BOOTSTRAP_VCPUS -u FAKE_BOOTSTRAP_DOMAIN_TYPE -u FAKE_INSTALL_TIMEOUT)
rm -f "$SHIFTLAB_HOME/serve.sock"
SHIFTLAB_LOG=info "${clean[@]}" "$bin" serve --host-dns off --scan-interval 1 >"$work/serve2.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"
R=ipi2
destroy_on_exit "$R"
on_exit 'p=$(cat "$SHIFTLAB_HOME/clusters/'"$R"'/assets/.ironic/pid" 2>/dev/null) && [[ -n $p ]] && kill "$p" 2>/dev/null'
on_exit '[[ $rc == 0 ]] || for l in "$SHIFTLAB_HOME/clusters/'"$R"'/openshift-install.log" "$SHIFTLAB_HOME/clusters/'"$R"'/assets/.ironic/ironic.log" "$work/serve2.log"; do [[ -f $l ]] && echo "--- $l" && tail -40 "$l"; done'
# version: bmc.verify_certificate needs 4.21's bmcVerifyCA (spec/resolve/versions.rs).
# Dual-stack, IPv6 primary: the BMC defaults to the host's IPv6 address, so
# Ironic drives every host at redfish-virtualmedia+https://[fd00:192::1]:8443;
# the pointer configs name the IPv6 API VIP (https://[VIP]:22623), which the
# nodes fetch over IPv6; keepalived holds a VIP of each family per list.
f2=$(cluster_file "$R" "['fd00:192::/64', 192.168.192.0/24]" 'version: "4.21"' "method: ipi" "ctlplanes: 3" "workers: 2" "bmc:" "  verify_certificate: true")
"${clean[@]}" "$bin" create cluster -f "$f2" >"$work/rehearsal.out" 2>&1 || {
	grep -E '^[a-z0-9-]+ +[^ ].* failed +' "$work/rehearsal.out" || true # the report's failed rows
	tail -8 "$work/rehearsal.out"
	fail "the IPI rehearsal failed"
}
tail -3 "$work/rehearsal.out"
for tg in release install-config infra install-complete; do
	[[ $(jq -r --arg t "$tg" '.targets[$t].status // "none"' "$SHIFTLAB_HOME/clusters/$R/install-state.json") == done ]] ||
		fail "$R: target $tg is not done"
done
state=$SHIFTLAB_HOME/clusters/$R/install-state.json
jq -e --arg c "$SHIFTLAB_CACHE/rehearsal/" '.flow == "ipi" and (.facts.openshift_install | startswith($c))
	and .facts.release_version == "4.21.0-rehearsal"' "$state" >/dev/null ||
	fail "the rehearsal did not run the shipped installer: $(jq -c '{flow, facts}' "$state")"
contains "Install complete!" "$SHIFTLAB_HOME/clusters/$R/openshift-install.log" || fail "the stand-in installer did not say Install complete!"
a2=$SHIFTLAB_HOME/clusters/$R/assets
n2=("$R-ctlplane-0" "$R-ctlplane-1" "$R-ctlplane-2" "$R-worker-0" "$R-worker-1")
[[ $(ls "$a2/.ironic/deployed" | tr '\n' ' ') == "${n2[*]} " ]] ||
	fail "the stand-in Ironic deployed: $(ls "$a2/.ironic/deployed")"
contains ' images at https://127\.0\.0\.1:' "$a2/.ironic/ironic.log" || fail "the stand-in's image server is not HTTPS: $(cat "$a2/.ironic/ironic.log")"
# Its bootstrap VM: baked 512 MiB, 1 vCPU, on the nodes' accelerator; gone now.
inst=$(jq -r .facts.openshift_install "$state")
kind=$(virsh dumpxml "$R-ctlplane-0" | sed -n "s/^<domain type='\([a-z]*\)'.*/\1/p")
for l in BOOTSTRAP_MEMORY_MIB=512 BOOTSTRAP_VCPUS=1 "BOOTSTRAP_DOMAIN_TYPE=$kind"; do
	contains -x "$l" "$inst" || fail "the rehearsal's installer was not baked with $l: $(grep '^BOOTSTRAP_' "$inst")"
done
id2=$(jq -r .infraID "$a2/metadata.json")
qlog=/var/log/libvirt/qemu/$id2-bootstrap.log
contains -E -- '-m (size=524288k|512)( |,|$)' "$qlog" && contains -E -- '-smp 1(,| |$)' "$qlog" ||
	fail "the bootstrap VM did not run with 512 MiB and 1 vCPU: $(grep -- '-m ' "$qlog")"
[[ -z $(virsh list --all --name | grep -- "-bootstrap$" || true) ]] || fail "a bootstrap VM is left: $(virsh list --all --name)"
if virsh pool-info "$id2-bootstrap" >/dev/null 2>&1; then fail "the bootstrap pool is left"; fi
pw2=$(cat "$SHIFTLAB_HOME/clusters/$R/bmc-password")
if grep -rlF -- "$pw2" "$a2/.ironic"; then fail "a BMC password in the stand-in Ironic's files"; fi
for n in "${n2[@]}"; do
	[[ $(console "$n" | grep -c 'standin: boot: iso') == 1 ]] || fail "$n booted the ISO $(console "$n" | grep -c 'standin: boot: iso') times"
	console "$n" | grep 'SHIFTLAB-STANDIN-REPORT' | tail -n 1 | contains '"boot":"disk"' || fail "$n does not run from its disk"
	virsh -q domblklist "$n" --details --inactive | awk '$2 == "cdrom" && $4 != "-" {exit 1}' ||
		fail "$n: media still in its definition: $(virsh -q domblklist "$n" --details --inactive)"
	uuid=$(virsh domuuid "$n")
	for what in 'media inserted' 'media ejected'; do
		grep "system=$uuid\|system=/redfish/v1/Systems/$uuid" "$work/serve2.log" | grep "$what" | contains 'user=admin' ||
			fail "$n: the BMC log has no '$what' by admin"
	done
done
"$bin" report "$R" >"$work/report.out" 2>&1 || { cat "$work/report.out"; fail "shiftlab report $R did not exit 0"; }
contains 'redfish bmc serving the lab.s domains.*addr=\[fd00:192::1\]:8443' "$work/serve2.log" ||
	fail "serve's BMC is not on [fd00:192::1]:8443: $(grep 'redfish bmc' "$work/serve2.log")"
[[ $(grep -c '^dhcp6 .* proven ' "$work/report.out") == 5 ]] || { cat "$work/report.out"; fail "not every node took its planned IPv6 address"; }
[[ $(grep -c '^resolve6 .* proven ' "$work/report.out") == 5 ]] || { cat "$work/report.out"; fail "not every node resolved the VIPs and its own address over IPv6"; }
for row in vip-api vip-ingress vip-api6 vip-ingress6; do
	contains -E "^$row +keepalived +proven " "$work/report.out" || { cat "$work/report.out"; fail "$row is not proven"; }
done
api6=$("$bin" plan -f "$f2" -o json | jq -r .vips.api6)
[[ $api6 == fd00:192::* ]] || fail "the plan's IPv6 API VIP: $api6"
for n in "${n2[@]}"; do
	console "$n" | grep 'SHIFTLAB-STANDIN-REPORT' | tail -n 1 | contains '"pointer":"ok"' ||
		fail "$n did not fetch its pointer config"
	tr -d '\r' <"/var/log/libvirt/qemu/$n-console.log" | contains -a "keepalived: API VIPs $api6 " ||
		fail "$n did not learn the IPv6 API VIP first: $(grep -a 'keepalived: API VIPs' "/var/log/libvirt/qemu/$n-console.log" | tail -1)"
done
step "ok: the rehearsal installed 3+2 dual-stack, IPv6 primary, by IPI: each host deployed by the stand-in Ironic over TLS through the BMC on IPv6, its pointer config fetched from the IPv6 API VIP, a VIP of each family held by keepalived, each node resolving over IPv6, its ISO over HTTPS from the stand-in's CA, booted once then from disk; the 512 MiB bootstrap VM gone; no password in .ironic"

# A BMC that refuses the media, as a real host's does when it trusts a CA other
# than the one that signed the image server's certificate: the cluster's
# stand-in CA certificate (<assets>/.ironic/tls/ca.crt, which the lab BMC
# trusts) is another CA's before the install (the stand-in keeps a CA
# certificate byte for byte, and signs its server's with its own key). The cheapest IPI, compact 3+0: the first InsertMedia is refused, the
# stand-in Ironic stops there, the installer at its next look (every 3 s), and
# the report names the node and the BMC's message with exit 9, no node being
# waited for (none runs).
step "rehearsal: the BMC refuses the media (a CA that did not sign the image server's): the report names the node and the BMC's refusal, exit 9"
"$bin" destroy cluster "$R" >/dev/null
M=ipi3
destroy_on_exit "$M"
on_exit 'p=$(cat "$SHIFTLAB_HOME/clusters/'"$M"'/assets/.ironic/pid" 2>/dev/null) && [[ -n $p ]] && kill "$p" 2>/dev/null'
f3=$(cluster_file "$M" 192.168.193.0/24 "method: ipi" "ctlplanes: 3" "workers: 0")
tls3=$SHIFTLAB_HOME/clusters/$M/assets/.ironic/tls
mkdir -p "$tls3"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=another CA" -keyout "$work/other-ca.key" -out "$tls3/ca.crt" 2>/dev/null
rc=0
"${clean[@]}" "$bin" create cluster -f "$f3" >"$work/media.out" 2>&1 || rc=$?
[[ $rc != 0 ]] || fail "the install of $M went on with its media refused"
rc_create=$rc
tail -3 "$work/media.out"
contains "failed to provision the hosts: $M-ctlplane-0: InsertMedia: " "$SHIFTLAB_HOME/clusters/$M/openshift-install.log" ||
	fail "the installer did not fail on the refused media: $(tail -5 "$SHIFTLAB_HOME/clusters/$M/openshift-install.log")"
[[ $(jq -r '.targets["install-complete"].status // "none"' "$SHIFTLAB_HOME/clusters/$M/install-state.json") != done ]] ||
	fail "$M: install-complete is done"
rc=0
"$bin" report "$M" >"$work/media-report.out" 2>&1 || rc=$?
[[ $rc == 9 ]] || { cat "$work/media-report.out"; fail "with the media refused report exited $rc, not 9"; }
grep -E '^(bmc|boot) ' "$work/media-report.out"
contains -E "^bmc +$M-ctlplane-0 +failed +the stand-in Ironic's deployment failed: InsertMedia: POST /redfish/v1/[^ ]*InsertMedia: 400 fetching the image https://127\.0\.0\.1:[0-9]+/redfish/boot-[0-9a-f-]+\.iso failed: TLS: unknown CA" \
	"$work/media-report.out" || { cat "$work/media-report.out"; fail "the report does not name the node and the BMC's refusal"; }
for n in "$M-ctlplane-1" "$M-ctlplane-2"; do
	contains -E "^bmc +$n +failed +its stand-in report: its domain is shutoff, not running" "$work/media-report.out" ||
		fail "$n: its bmc row does not say it never ran: $(grep -E "^bmc +$n " "$work/media-report.out")"
done
# create itself showed the report after its failure, and kept its own exit status.
[[ $rc_create != 9 ]] || fail "create exited with the report's 9, not its failed target's"
contains "what the rehearsal of $M proved before it failed:" "$work/media.out" ||
	fail "create did not show the report after the failure"
contains -E "^bmc +$M-ctlplane-0 +failed +the stand-in Ironic's deployment failed: InsertMedia: " "$work/media.out" ||
	fail "create's report does not name the refused node"
pw3=$(cat "$SHIFTLAB_HOME/clusters/$M/bmc-password")
if grep -F -- "$pw3" "$work/media.out" "$work/media-report.out" "$SHIFTLAB_HOME/clusters/$M/assets/.ironic/failed/$M-ctlplane-0"; then
	fail "a BMC password in the report"
fi
[[ $(stat -c %a "$SHIFTLAB_HOME/clusters/$M/assets/.ironic/failed/$M-ctlplane-0") == 600 ]] || fail "the kept failure is not 0600"
step "ok: the refused media failed the install at the first host, and the report named it (exit 9)"
echo "PASS $NAME"
