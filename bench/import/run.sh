#!/usr/bin/env bash
# bench/import/run.sh — base image import against the disk's limit
# (docs/benchmarks.md, "Base image import"): a synthetic qcow2 of BENCH_GB GiB
# of written data (qemu-img + qemu-io, not sparse), then, inside the sandbox,
# `cp` of that file into the pool's directory (the limit: one read, one write)
# against shiftlab's import of it, as `shiftlab create infra` (a cold three-node
# UPI rehearsal) logs it; the whole create infra is shown too (it also starts
# the bootstrap and control planes).
# The image is read from the page cache in both (the machine is shared: no
# cache dropping). Prints seconds and the ratio; asserts
# nothing.
#
#   sudo bench/import/run.sh          (enters scripts/sandbox itself)
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
f=$(cluster_file imp 192.168.199.0/24 "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")
dest=/var/lib/libvirt/images/bench-cp
mkdir -p "$dest"
on_exit "rm -rf '$dest'"
t() { local a=$EPOCHREALTIME; "$@" >/dev/null || fail "$* failed"; awk -v a="$a" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
cps=() sls=() ims=()
for ((r = 1; r <= REPS; r++)); do
	sync
	cps+=("$(t bash -c "cp '$IMAGE' '$dest/big.qcow2' && sync")")
	rm -f "$dest/big.qcow2"
	sync
	sls+=("$(t bash -c "SHIFTLAB_LOG=info '$bin' create infra -f '$f' 2>'$work/log' && sync")")
	# the import alone, as shiftlab logs it (volume created, stream, marker)
	ims+=("$(sed -n 's/.*base image imported.* seconds=\([0-9.]*\).*/\1/p' "$work/log")")
	[[ -n ${ims[-1]} ]] || fail "no import logged: $(cat "$work/log")"
	"$bin" destroy cluster imp --purge-images >/dev/null
	echo "run $r: cp ${cps[-1]} s, import ${ims[-1]} s, shiftlab create infra (cold: import, 4 domains started) ${sls[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
c=$(median "${cps[@]}") s=$(median "${sls[@]}") i=$(median "${ims[@]}")
echo "| what | seconds (median of $REPS) |"
echo "|---|---|"
echo "| cp + sync (the limit) | $c |"
echo "| shiftlab's import (volume, upload stream with sha256, verification, marker) | $i |"
echo "| shiftlab create infra, cold (pool, import, 4 nodes defined and started) + sync | $s |"
echo "| import / cp | $(awk -v a="$i" -v b="$c" 'BEGIN { printf "%.2f", a / b }') |"
