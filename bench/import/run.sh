#!/usr/bin/env bash
# bench/import/run.sh — base image import against the disk's limit
# (docs/benchmarks.md, "Base image import"): a synthetic qcow2 of BENCH_GB GiB
# of written data (qemu-img + qemu-io, not sparse), then, inside the sandbox,
# `cp` of that file into the pool's directory (the limit: one read, one write)
# against shiftlab's import of it, as `shiftlab create infra` (a cold three-node
# UPI rehearsal) logs it; the whole create infra is shown too (it also starts
# the bootstrap and control planes). shiftlab's import is timed on both of
# its routes: straight into the volume's file (the default on a local host)
# and through libvirt's upload stream (SHIFTLAB_IMPORT=stream, what a remote
# host gets), beside `virsh vol-upload` (libvirt's own stream client).
# The pool is on the disk (a directory under BENCH_POOL_DIR, default /var/tmp;
# BENCH_POOL_DIR=tmpfs: the sandbox's tmpfs). The image is read from the page
# cache in every case (no cache dropping). Prints seconds and the ratios;
# asserts nothing.
#
#   sudo bench/import/run.sh          (enters scripts/sandbox itself)
#   BENCH_IMAGE=big.qcow2 BENCH_REPS=5 BENCH_POOL_DIR=tmpfs sudo bench/import/run.sh
NAME=bench-import
self=$(readlink -f "$0")
here=$(dirname "$self")
. "$here/../../tests/e2e/lib.sh"
GB=${BENCH_GB:-2}
REPS=${BENCH_REPS:-2}
if [[ ${1:-} != __inside ]]; then
	[[ $(id -u) == 0 ]] || fail "run as root (scripts/sandbox needs it)"
	bin=${SHIFTLAB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/shiftlab}
	[[ -x $bin ]] || (cd "$repo" && cargo build -q --release --bin shiftlab)
	img=$(mktemp -d /var/tmp/shiftlab-bench-import.XXXXXX)
	on_exit "rm -rf '$img'"
	if [[ -n ${BENCH_IMAGE:-} ]]; then # a synthetic image made before (it takes a minute)
		echo "# $(du -h "$BENCH_IMAGE" | cut -f1) qcow2 (BENCH_IMAGE), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(df --output=source,fstype "$BENCH_IMAGE" | tail -1)"
		"$repo/scripts/sandbox" run -- "$self" __inside "$(readlink -f "$BENCH_IMAGE")" "$bin"
		exit
	fi
	qemu-img create -q -f qcow2 "$img/big.qcow2" $((GB + 1))G
	# in 256 MiB requests (qemu-io takes at most 2 GiB - 1 per request)
	writes=()
	for ((o = 0; o < GB * 4; o++)); do writes+=(-c "write -P 0x5a $((o * 256))M 256M"); done
	qemu-io -f qcow2 "${writes[@]}" "$img/big.qcow2" >/dev/null
	echo "# $(du -h "$img/big.qcow2" | cut -f1) qcow2, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(df --output=source,fstype /var/tmp | tail -1)"
	"$repo/scripts/sandbox" run -- "$self" __inside "$img/big.qcow2" "$bin"
	exit
fi
IMAGE=$2 bin=$3
e2e_workdir bench-import
destroy_on_exit imp
# The pool (and cp's destination) on the disk, in a directory of BENCH_POOL_DIR
# (default /var/tmp, where the image is too); BENCH_POOL_DIR=tmpfs keeps the
# sandbox's tmpfs /var/lib/libvirt/images (memory, not a disk).
pooldir=${BENCH_POOL_DIR:-/var/tmp}
extra=()
if [[ $pooldir == tmpfs ]]; then
	pooldir=/var/lib/libvirt/images
else
	pooldir=$(mktemp -d "$pooldir/shiftlab-bench-pool.XXXXXX")
	on_exit "rm -rf '$pooldir'"
	extra=("libvirt: {pool_path: $pooldir/pool}")
fi
f=$(cluster_file imp 192.168.199.0/24 "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 0" "${extra[@]}")
dest=$pooldir/bench-cp
echo "# pool on $(df --output=source,fstype "$pooldir" | tail -1)" >&2
mkdir -p "$dest"
on_exit "rm -rf '$dest'"
t() { local a=$EPOCHREALTIME; "$@" >/dev/null || fail "$* failed"; awk -v a="$a" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
cps=() sls=() ims=() sts=() vus=() hs=()
pool=
for ((r = 1; r <= REPS; r++)); do
	sync
	cps+=("$(t bash -c "cp '$IMAGE' '$dest/big.qcow2' && sync")")
	rm -f "$dest/big.qcow2"
	sync
	sls+=("$(t bash -c "SHIFTLAB_LOG=info '$bin' create infra -f '$f' 2>'$work/log' && sync")")
	# the import alone, as shiftlab logs it (volume created, bytes written with
	# their sha256, verification, marker)
	ims+=("$(sed -n 's/.*base image imported.* seconds=\([0-9.]*\).*/\1/p' "$work/log")")
	[[ -n ${ims[-1]} ]] || fail "no import logged: $(cat "$work/log")"
	grep -q 'route="\?file' "$work/log" || fail "the import did not take the file route: $(cat "$work/log")"
	"$bin" destroy cluster imp --purge-images >/dev/null
	sync
	SHIFTLAB_IMPORT=stream SHIFTLAB_LOG=info "$bin" create infra -f "$f" 2>"$work/log" >/dev/null || fail "create infra (stream) failed: $(cat "$work/log")"
	sync
	sts+=("$(sed -n 's/.*base image imported.* seconds=\([0-9.]*\).*/\1/p' "$work/log")")
	[[ -n ${sts[-1]} ]] || fail "no stream import logged: $(cat "$work/log")"
	# libvirt's own client into the cluster's pool (it goes with the cluster)
	pool=$(virsh pool-list --name | awk 'NF {print $1; exit}')
	virsh -q vol-create-as "$pool" bench-upload.qcow2 "$(qemu-img info --output=json "$IMAGE" | python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')" --format qcow2 >/dev/null
	sync
	vus+=("$(t bash -c "virsh -q vol-upload bench-upload.qcow2 '$IMAGE' --pool '$pool' && sync")")
	virsh -q vol-delete bench-upload.qcow2 --pool "$pool"
	"$bin" destroy cluster imp --purge-images >/dev/null
	# what hashing alone costs on one core (OpenSSL's SHA-NI code, as fast as any)
	hs+=("$(t openssl dgst -sha256 "$IMAGE")")
	echo "run $r: sha256 alone ${hs[-1]} s, cp ${cps[-1]} s, import ${ims[-1]} s (file), ${sts[-1]} s (stream), virsh vol-upload ${vus[-1]} s, shiftlab create infra (cold: import, 4 domains started) ${sls[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
c=$(median "${cps[@]}") s=$(median "${sls[@]}") i=$(median "${ims[@]}") st=$(median "${sts[@]}") vu=$(median "${vus[@]}") h=$(median "${hs[@]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "| what | seconds (median of $REPS: ${cps[*]} / ${ims[*]} / ${sts[*]} / ${vus[*]}) | / cp |"
echo "|---|---|---|"
echo "| cp + sync (the limit) | $c | 1.00 |"
echo "| shiftlab's import, file route (volume, write with sha256, fdatasync, verification, marker) | $i | **$(ratio "$i" "$c")** |"
echo "| shiftlab's import, stream route (SHIFTLAB_IMPORT=stream: what a remote host gets) | $st | $(ratio "$st" "$c") |"
echo "| sha256 of the file alone, one core (openssl dgst -sha256) | $h | $(ratio "$h" "$c") |"
echo "| virsh vol-upload + sync (libvirt's own stream client, no hashing) | $vu | $(ratio "$vu" "$c") |"
echo "| shiftlab create infra, cold (pool, import, 4 nodes defined and started) + sync | $s | |"
# run by run (each pair measured at one moment of the machine and the disk)
pairs=() hpairs=()
for ((r = 0; r < REPS; r++)); do
	pairs+=("$(ratio "${ims[r]}" "${cps[r]}")") hpairs+=("$(ratio "${ims[r]}" "${hs[r]}")")
done
echo
echo "import (file route) / cp, run by run: ${pairs[*]} (median $(median "${pairs[@]}"))"
echo "import (file route) / sha256 alone, run by run: ${hpairs[*]} (median $(median "${hpairs[@]}"))"
