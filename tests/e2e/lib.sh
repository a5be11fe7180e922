# The preamble every e2e suite shares (and the benchmarks' venv helper). Source it
# with NAME set:
#
#   NAME=infra
#   . "$(dirname "$0")/lib.sh"
#   e2e_sandbox "$@"              # inside scripts/sandbox, one stand-in image: IMAGE
#   e2e_workdir infra             # work=/tmp/shiftlab-e2e-infra.XXXXXX, SHIFTLAB_HOME in it
#   destroy_on_exit c1 c2         # the suite's clusters go, whatever happens
#   on_exit 'stop_pid "$serve"'   # anything else to undo (evaluated at exit)
#   f=$(cluster_file c1 192.168.160.0/24 "method: upi" "workers: 2")
#   release_mirror                # the install suites' release mirror at $mirror_url
#   kill_during "$f" c1 infra     # create cluster, killed -9 during a target
#   netns_host, netns_node, netns_inside   # the netns suites' namespaces
#   virsh_net, virsh_pool, virsh_domain    # a hand-built libvirt lab, gone at exit
#
# A suite may define its own fail() after sourcing (to print a log first). It must
# not set its own EXIT trap: on_exit is the one place for cleanups.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${SHIFTLAB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/shiftlab}

fail() {
	echo "FAIL $NAME: $*"
	exit 1
}
step() { echo "--- $NAME: $*"; }

# `cmd | contains PATTERN`: grep that reads its whole input. A quiet grep (-q) under
# pipefail is false whenever grep's early exit kills cmd with SIGPIPE.
contains() { grep "$@" >/dev/null; }

# ign_has IGNITION PATH...: each PATH is a file of the Ignition config (a JSON
# file): the lab's manifests reached it (docs/targets.md, "The lab's manifests").
ign_has() {
	local ign=$1 p
	shift
	for p; do
		jq -e --arg p "$p" 'any(.storage.files[]; .path == $p)' "$ign" >/dev/null ||
			fail "$ign has no file $p (its manifests: $(jq -r '[.storage.files[].path | select(contains("manifests") or contains("openshift/"))] | join(" ")' "$ign"))"
	done
}
# The lab settings an install carries into its manifests, for cluster_file: NFS
# storage, one generated user, a time server.
lab_settings=("storage: nfs" "users: [{name: ann, admin: true}]" "ntp_servers: [ntp.lab.test]")

# wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds (quietly), or fail.
wait_for() {
	local t=$1 what=$2
	shift 2
	for _ in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	fail "timed out waiting for $what"
}

# on_exit 'COMMAND': run COMMAND at exit, the last registered first, whatever
# happened ($rc holds the suite's exit status); that status is kept (a failing
# cleanup never turns a pass into a failure, nor a failure into a pass).
_on_exit=()
on_exit() { _on_exit=("$1" "${_on_exit[@]}"); }
_run_on_exit() {
	local rc=$? c
	set +e
	for c in "${_on_exit[@]}"; do eval "$c"; done
	[[ -z ${_workdir:-} ]] || rm -rf "$_workdir"
	exit "$rc"
}
trap _run_on_exit EXIT

# stop_pid PID: stop a process this suite started (no-op when PID is empty). PID
# must be the process itself: `"$bin" serve &`, not a shell function run in the
# background (its $! is a subshell, and killing that leaves the process running).
# The process's exit status (143 after the TERM) does not end the suite.
stop_pid() {
	[[ -n ${1:-} ]] || return 0
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# destroy_on_exit CLUSTER...: destroy these clusters (and their images) at exit.
destroy_on_exit() {
	local c
	for c; do on_exit "\"\$bin\" destroy cluster $c --purge-images >/dev/null 2>&1"; done
}

# e2e_sandbox "$@": refuse to run outside the sandbox or without the image.
e2e_sandbox() {
	[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] ||
		fail "not inside the sandbox: run it with scripts/sandbox run -- $0 IMAGE"
	[[ $# == 1 && -f $1 ]] || fail "usage: $0 STANDIN-IMAGE.qcow2"
	IMAGE=$(readlink -f "$1")
	[[ -x $bin ]] || fail "no shiftlab binary at $bin (cargo build first)"
}

# e2e_workdir SUFFIX: a private work directory holding the suite's state, removed
# at exit after every other cleanup (they may need the state in it).
e2e_workdir() {
	work=$(mktemp -d "/tmp/shiftlab-e2e-$1.XXXXXX")
	_workdir=$work
	export SHIFTLAB_HOME=$work/state
}

# cluster_file NAME CIDR [YAML-LINE]...: $work/NAME.yaml, a rehearsal OKD lab in
# CIDR with the test SSH key, plus the given top-level lines; prints its path.
cluster_file() {
	local name=$1 cidr=$2 f=$work/$1.yaml
	shift 2
	{
		printf 'cluster: %s\ndomain: lab.test\ndistribution: okd\nrehearsal: true\n' "$name"
		echo "ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKeyOnly e2e@shiftlab']"
		printf '%s\n' "$@"
		printf 'network:\n  cidr: %s\n' "$cidr"
	} >"$f"
	echo "$f"
}

# py_venv DIR 'MODULE, …' PACKAGE...: a Python venv at DIR in which the modules
# import, made from Debian's python3 (python3-venv and python3-dev come from
# scripts/setup; libvirt-python builds against them) and remade when one is
# missing. Needs PyPI only when it has to install.
py_venv() {
	local dir=$1 modules=$2
	shift 2
	[[ -n $dir ]] || fail "py_venv: no directory"
	"$dir/bin/python" -c "import $modules" 2>/dev/null && return 0
	rm -rf "$dir"
	/usr/bin/python3 -m venv "$dir"
	"$dir/bin/pip" install -q "$@"
	"$dir/bin/python" -c "import $modules" || fail "py_venv $dir: $modules do not import after installing $*"
}

# bmc_venv: the venv of the Redfish client suites (the real sushy client, DMTF's
# validator) at $venv (BMC_VENV to reuse one).
venv=${BMC_VENV:-${TMPDIR:-/tmp}/shiftlab-bmc-venv}
bmc_venv() {
	py_venv "$venv" 'ssl, sushy, requests, redfish_service_validator' \
		sushy==5.5.0 redfish-service-validator==3.1.8 requests
}

# The loopback release mirror of the install suites (inside the sandbox's own
# network namespace), laid out as OKD's release assets:
# <mirror_url>/<version>/{release.txt,sha256sum.txt,openshift-*-linux-<version>.tar.gz},
# the installer being the fake openshift-install, the client the stand-in oc
# beside it. Needs $work (e2e_workdir).
#
#   release_mirror                  serve $work/mirror at $mirror_url, release $V in it
#   mirror_release 4.17.0-okd-scos.1 corrupt     another release, its installer tarball damaged
#   mirror_qcow2_stream "$IMAGE"    IMAGE as the stream's CoreOS qcow2 (the fake's stream)
#   mirror_qcow2_stream "$IMAGE" c10s 10.0.20250628-0   the same as another stream and release
#   mirror_downloads PATTERN        how many GETs of /PATTERN the mirror served
V=4.17.0-okd-scos.0
fake=$repo/assets/rehearsal/openshift-install
mirror_pid=""
release_mirror() {
	local port=$((20000 + RANDOM % 20000))
	mirror_url=http://127.0.0.1:$port
	mirror_release "$V"
	python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/mirror" >"$work/mirror.log" 2>&1 &
	mirror_pid=$!
	on_exit 'stop_pid "$mirror_pid"'
	wait_for 10 "the release mirror" curl -fs "$mirror_url/$V/release.txt"
}

# mirror_release VERSION [corrupt]: release VERSION in the mirror, as OKD publishes it.
mirror_release() {
	local v=$1 d=$work/mirror/$1 t=$work/tar-$1
	mkdir -p "$d" "$t/i" "$t/c"
	cp "$fake" "$t/i/openshift-install"
	# Each release's installer differs (else the cache, keyed by digest, serves it).
	echo "# release $v" >>"$t/i/openshift-install"
	# The stand-in oc (what agent create image runs), its version the release's.
	sed "s/^FAKE_OC_VERSION=.*/FAKE_OC_VERSION=$v/" "$(dirname "$fake")/oc" >"$t/c/oc"
	chmod +x "$t/c/oc"
	tar -C "$t/i" -czf "$d/openshift-install-linux-$v.tar.gz" openshift-install
	tar -C "$t/c" -czf "$d/openshift-client-linux-$v.tar.gz" oc
	printf 'Name:      %s\n\nPull From: quay.io/okd/scos-release:%s\n\nRelease Metadata:\n  Version:  %s\n' "$v" "$v" "$v" >"$d/release.txt"
	(cd "$d" && sha256sum openshift-*.tar.gz >sha256sum.txt)
	if [[ ${2:-} == corrupt ]]; then echo garbage >>"$d/openshift-install-linux-$v.tar.gz"; fi
}

# mirror_qcow2_stream IMAGE: IMAGE, xz-compressed, in the mirror as the CoreOS qcow2
# of stream metadata the fake installer prints ($work/stream.json, exported as
# SHIFTLAB_FAKE_STREAM_JSON), shaped as the real OKD installer before 4.19 prints
# it (the mirror's releases are OKD): Fedora CoreOS 39 `stable`, whose qemu disk
# is only qcow2.xz; or the STREAM and RELEASE given (OKD's SCOS 10: c10s
# 10.0.20250628-0). Compressed by liblzma through Python's lzma module.
mirror_qcow2_stream() {
	local stream=${2:-stable} release=${3:-39.20231101.3.0} name=coreos-qemu.x86_64.qcow2.xz
	[[ $stream == stable ]] || name=coreos-qemu-$stream.x86_64.qcow2.xz
	local xz=$work/mirror/$name
	python3 -c 'import lzma, shutil, sys
with open(sys.argv[1], "rb") as i, lzma.open(sys.argv[2], "wb", preset=1) as o:
    shutil.copyfileobj(i, o)' "$1" "$xz"
	jq -n --arg loc "$mirror_url/$name" --arg stream "$stream" --arg release "$release" \
		--arg xz "$(sha256sum <"$xz" | cut -d' ' -f1)" \
		--arg raw "$(sha256sum <"$1" | cut -d' ' -f1)" \
		'{stream:$stream,architectures:{x86_64:{artifacts:{qemu:{release:$release,formats:{"qcow2.xz":{disk:{location:$loc,sha256:$xz,"uncompressed-sha256":$raw}}}}}}}}' \
		>"$work/stream.json"
	export SHIFTLAB_FAKE_STREAM_JSON=$work/stream.json
}

mirror_downloads() { grep -c "GET /$1" "$work/mirror.log" || true; }

# target_status CLUSTER TARGET: the install target's status (none before it starts).
target_status() {
	jq -r --arg t "$2" '.targets[$t].status // "none"' "$SHIFTLAB_HOME/clusters/$1/install-state.json" 2>/dev/null || echo none
}

# kill_during CLUSTER-FILE CLUSTER TARGET [PROCESS-PATTERN]: start create cluster,
# kill -9 it once TARGET has started and (if given) a process matching
# PROCESS-PATTERN runs — the child doing the work — then see that the child does
# not outlive it (it would race the rerun over the asset directory). The output
# goes to $work/killed-CLUSTER-TARGET.out. Environment set on the call reaches
# create cluster (SHIM_DELAY=4 kill_during …).
kill_during() {
	local f=$1 c=$2 target=$3 pattern=${4:-} pid out=$work/killed-$2-$3.out
	# Generous: TCG boots on a loaded machine.
	local deadline=$((SECONDS + 900))
	"$bin" create cluster -f "$f" >"$out" 2>&1 &
	pid=$!
	until [[ $(target_status "$c" "$target") == started ]] && { [[ -z $pattern ]] || pgrep -f "$pattern" >/dev/null; }; do
		kill -0 "$pid" 2>/dev/null || fail "shiftlab ended before $c reached $target: $(tail -5 "$out")"
		((SECONDS < deadline)) || fail "$c never reached $target"
		sleep 0.2
	done
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	echo "killed $c during $target"
	[[ -n $pattern ]] || return 0
	local gone=$((SECONDS + 15))
	while pgrep -f "$pattern" >/dev/null; do
		((SECONDS < gone)) || fail "$pattern outlived the shiftlab that ran it"
		sleep 0.2
	done
}

# ---- hand-built virsh labs (the stand-in suites, in the sandbox): a network,
# a dir pool and domains from the suite's own XML, each removed at exit (the
# domains first, their console logs kept in the sandbox's state directory).
#
#   virsh_net NAME XML-FILE           define the network NAME from the file, start it
#   virsh_pool NAME DIR               a dir pool NAME at DIR, built and started
#   virsh_domain NAME XML-FILE [LOG]  define the domain NAME from the file; LOG,
#                                     its console log, is kept at exit
virsh_net() {
	on_exit "virsh -q net-destroy $(printf %q "$1") >/dev/null 2>&1; virsh -q net-undefine $(printf %q "$1") >/dev/null 2>&1"
	virsh -q net-define "$2" >/dev/null
	virsh -q net-start "$1" >/dev/null
}
_virsh_pool_gone() { # name dir
	local v
	for v in $(virsh -q vol-list "$1" 2>/dev/null | awk '{print $1}'); do
		virsh -q vol-delete --pool "$1" "$v" >/dev/null 2>&1
	done
	virsh -q pool-destroy "$1" >/dev/null 2>&1
	virsh -q pool-undefine "$1" >/dev/null 2>&1
	rm -rf "$2"
}
virsh_pool() {
	on_exit "_virsh_pool_gone $(printf %q "$1") $(printf %q "$2")"
	virsh -q pool-define-as "$1" dir --target "$2" >/dev/null
	virsh -q pool-build "$1" >/dev/null
	virsh -q pool-start "$1" >/dev/null
}
_virsh_domain_gone() { # name [console-log]
	if [[ -n ${2:-} && -f $2 && -n ${SHIFTLAB_SANDBOX_STATE:-} ]]; then
		cp "$2" "$SHIFTLAB_SANDBOX_STATE/" 2>/dev/null
	fi
	virsh -q destroy "$1" >/dev/null 2>&1
	virsh -q undefine "$1" >/dev/null 2>&1
}
virsh_domain() {
	on_exit "_virsh_domain_gone $(printf %q "$1") $(printf %q "${3:-}")"
	virsh -q define "$2" >/dev/null
}

# ---- the netns suites: everything in network namespaces the suite makes (root),
# traffic only between them and on their loopbacks.
#
#   netns_host NS BRIDGE ADDR/LEN...  the "host" namespace NS (lo up) with the
#                                     bridge BRIDGE up, holding the addresses
#   netns_node NS VETH ADDR/LEN       a "node" namespace NS (lo up) plugged into
#                                     the host's bridge by the veth VETH (eth0 in NS)
#   netns_inside ARG...               the suite again, as "$0" --inside ARG..., in
#                                     the host namespace and a private mount
#                                     namespace (VAR=value before it reaches it)
#
# Every namespace made here goes at exit, the last made first, its processes
# killed before.
_netns=()
_netns_host=""
_netns_bridge=""
_netns_cleanup() {
	local ns
	for ns in "${_netns[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
}
_netns_add() {
	[[ ${#_netns[@]} -gt 0 ]] || on_exit _netns_cleanup
	_netns=("$1" "${_netns[@]}")
	ip netns add "$1"
	ip -n "$1" link set lo up
}
netns_host() {
	local ns=$1 br=$2 a
	shift 2
	_netns_add "$ns"
	ip -n "$ns" link add "$br" type bridge
	for a; do ip -n "$ns" addr add "$a" dev "$br"; done
	ip -n "$ns" link set "$br" up
	_netns_host=$ns
	_netns_bridge=$br
}
netns_node() {
	local ns=$1 veth=$2 addr=$3
	[[ -n $_netns_host ]] || fail "netns_node $ns: no netns_host before it"
	_netns_add "$ns"
	ip link add "$veth" netns "$_netns_host" type veth peer name eth0 netns "$ns"
	ip -n "$_netns_host" link set "$veth" master "$_netns_bridge" up
	ip -n "$ns" addr add "$addr" dev eth0
	ip -n "$ns" link set eth0 up
}
netns_inside() {
	[[ -n $_netns_host ]] || fail "netns_inside: no netns_host before it"
	ip netns exec "$_netns_host" unshare -m --propagation private "$0" --inside "$@"
}

# ---- the BMC suites: `shiftlab bmc` serving tiny QEMU domains in the sandbox.
#
#   bmc_suite 170 "$@"               outside: venv, binary, then this script again
#                                    in scripts/sandbox (bounded); inside: returns
#   e2e_workdir NAME; bmc_pids
#   tiny_domains NAME-a NAME-b       domains with a disk and an empty CD-ROM
#   iso_server 18080 boot.iso        an ISO on http://127.0.0.1:18080/boot.iso
#   bmc_start 18443 NAME-a NAME-b    the BMC on https://127.0.0.1:18443 for them

# bmc_suite SECONDS "$@": the suite runs twice. Outside the sandbox (no __inside
# argument) it makes the client venv and the binary, then runs itself again in
# scripts/sandbox, which stops everything it started after SECONDS; inside, this
# returns.
bmc_suite() {
	local t=$1
	shift
	[[ ${1:-} != __inside ]] || return 0
	bmc_venv
	(cd "$repo" && cargo build -q --bin shiftlab)
	exec timeout -k 30 "$t" "$repo/scripts/sandbox" run -- "$0" __inside
}

# bmc_pids: the background servers of the suite go in pids; they stop at exit.
bmc_pids() {
	pids=()
	on_exit 'for p in "${pids[@]}"; do stop_pid "$p"; done'
}

# tiny_domain NAME [VOLUME]: define a 128 MiB TCG domain NAME booting from disk
# with an empty SATA CD-ROM for virtual media (what the BMC inserts into); with
# VOLUME, its disk is that qcow2 volume of the pool "default".
tiny_domain() {
	local disk=
	[[ -z ${2:-} ]] || disk="<disk type='volume' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source pool='default' volume='$2'/>
      <target dev='vda' bus='virtio'/>
    </disk>"
	virsh -q define /dev/stdin >/dev/null <<EOX
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>
  <features><acpi/></features>
  <devices>
    $disk
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
  </devices>
</domain>
EOX
}

# tiny_domains NAME...: the pool "default" (made here), and per NAME a tiny
# domain (tiny_domain) with a 16 MiB qcow2 volume NAME.qcow2 as its disk.
tiny_domains() {
	local d
	virsh -q pool-define-as default dir --target /var/lib/libvirt/images >/dev/null
	virsh -q pool-start default >/dev/null
	for d; do
		virsh -q vol-create-as default "$d.qcow2" 16M --format qcow2 >/dev/null
		tiny_domain "$d" "$d.qcow2"
	done
}

# iso_server PORT FILE: a small ISO at $work/www/FILE, served over HTTP on
# 127.0.0.1:PORT (log: $work/http.log; the server in pids).
iso_server() {
	mkdir -p "$work/iso" "$work/www"
	echo "shiftlab $NAME test" >"$work/iso/README"
	genisoimage -quiet -o "$work/www/$2" -V SHIFTLAB -r -J "$work/iso"
	python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$1" >"$work/http.log" 2>&1 &
	pids+=($!)
	wait_for 10 "the ISO server" curl -s "http://127.0.0.1:$1/"
}

# bmc_start PORT DOMAIN...: `shiftlab bmc` (TLS, its password and CA under
# $work/bmc) for the domains on https://127.0.0.1:PORT, logging to $work/bmc.log
# (the server in pids). Images may come from the suite's loopback servers
# (--allow-image-source 127.0.0.0/8), and from wherever the array bmc_sources
# adds (more --allow-image-source flags).
bmc_start() {
	local port=$1 d allow=()
	shift
	for d; do allow+=(--allow "$d"); done
	"$bin" -v bmc --connect qemu:///system "${allow[@]}" --pool default \
		--allow-image-source 127.0.0.0/8 ${bmc_sources[@]+"${bmc_sources[@]}"} \
		--listen "127.0.0.1:$port" --bmc-dir "$work/bmc" >"$work/bmc.log" 2>&1 &
	pids+=($!)
	wait_for 10 "the BMC" curl -sk "https://127.0.0.1:$port/redfish/v1/"
}
