#!/usr/bin/env bash
# bench/import/run.sh — base image import against the disk's limit
# (docs/benchmarks.md, "Base image import"): a synthetic qcow2 of BENCH_GB GiB
# of written data (qemu-img + qemu-io, not sparse), then, inside the sandbox,
# `cp` of that file into the pool's directory (the limit: one read, one write)
# against a cold `shiftlab create infra` of a three-node IPI cluster (the pool
# and base image made inside the timing; the domain is defined, not started).
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
f=$(cluster_file imp 192.168.199.0/24 "method: ipi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")
dest=/var/lib/libvirt/images/bench-cp
mkdir -p "$dest"
on_exit "rm -rf '$dest'"
t() { local a=$EPOCHREALTIME; "$@" >/dev/null || fail "$* failed"; awk -v a="$a" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
cps=() sls=()
for ((r = 1; r <= REPS; r++)); do
	sync
	cps+=("$(t bash -c "cp '$IMAGE' '$dest/big.qcow2' && sync")")
	rm -f "$dest/big.qcow2"
	sync
	sls+=("$(t bash -c "'$bin' create infra -f '$f' && sync")")
	"$bin" destroy cluster imp --purge-images >/dev/null
	echo "run $r: cp ${cps[-1]} s, shiftlab create infra (cold, import) ${sls[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
c=$(median "${cps[@]}") s=$(median "${sls[@]}")
echo "| what | seconds (median of $REPS) |"
echo "|---|---|"
echo "| cp + sync (the limit) | $c |"
echo "| shiftlab create infra, cold (import + 3 nodes defined) + sync | $s |"
echo "| shiftlab / cp | $(awk -v a="$s" -v b="$c" 'BEGIN { printf "%.2f", a / b }') |"
