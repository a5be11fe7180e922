#!/usr/bin/env bash
# bench/rehearsal/run.sh — how long a rehearsal of each method takes on this host
# (docs/benchmarks.md, "Rehearsals").
#
#   bench/rehearsal/run.sh        (as root, on the host; it enters scripts/sandbox itself)
#
# For each method, a cluster file with `rehearsal: true` alone (no mirror, no
# installer, no environment: the stand-in installer shiftlab ships) and
# `shiftlab create cluster` to "install complete" through serve's load balancer,
# then `shiftlab report` (what the rehearsal proved) and `destroy cluster`. Prints
# the wall time of each phase per method and its ratio to the 2-minute mark the
# README states. No other tool rehearses an install (kcli and the others need a
# release), so there is no anchor column: the mark is the comparison. Asserts
# nothing about timings; exits non-zero only when a rehearsal fails.
#
# Environment:
#   BENCH_METHODS="upi compact sno agent ipi"   what to rehearse (upi: 3+2,
#                              compact: 3+0, sno: 1, agent: 3+2, ipi: 3+2)
#   BENCH_REPS=1               repetitions per method (median and min–max)
#   SHIFTLAB_BIN=PATH          the binary (default: cargo build --release)
#   BENCH_OUT=FILE             also copy the results (TSV) to FILE
#   BENCH_KEEP=1               keep the temp dir (outputs of every command)
#
# Writes only into a temp dir (/tmp/shiftlab-bench-rehearsal.*, removed at exit)
# and the sandbox's private libvirt state; destroys what it made on every path.
NAME=bench-rehearsal
self=$(readlink -f "$0")
here=$(dirname "$self")
. "$here/../../tests/e2e/lib.sh"
METHODS=${BENCH_METHODS:-upi compact sno agent ipi}
REPS=${BENCH_REPS:-1}
MARK=120

say() { echo "bench: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# ------------------------------------------------------------------ outside
if [[ ${1:-} != __inner ]]; then
	[[ $(id -u) == 0 ]] || die "run as root (scripts/sandbox needs it)"
	work=$(mktemp -d /tmp/shiftlab-bench-rehearsal.XXXXXX)
	if [[ ${BENCH_KEEP:-} == 1 ]]; then
		on_exit 'say "kept $work"'
	else
		on_exit 'rm -rf "$work"'
	fi
	bin=${SHIFTLAB_BIN:-}
	if [[ -z $bin ]]; then
		say "cargo build --release"
		(cd "$repo" && cargo build --release --quiet --bin shiftlab)
		bin=${CARGO_TARGET_DIR:-$repo/target}/release/shiftlab
	fi
	[[ -x $bin ]] || die "no shiftlab binary at $bin"
	rc=0
	"$repo/scripts/sandbox" run -- "$self" __inner "$work" "$bin" || rc=$?
	[[ -n ${BENCH_OUT:-} && -f $work/results.tsv ]] && cp "$work/results.tsv" "$BENCH_OUT"
	exit "$rc"
fi

# ------------------------------------------------------------------- inside
[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] || die "__inner outside the sandbox"
work=$2 bin=$3
# A user's rehearsal: only the state and cache directories are the bench's own.
unset SHIFTLAB_FAKE_IRONIC SHIFTLAB_FAKE_STREAM_JSON IRONIC_VENV FAKE_IRONIC_TLS_DIR \
	FAKE_BOOTSTRAP_MEMORY_MIB FAKE_BOOTSTRAP_VCPUS FAKE_BOOTSTRAP_DOMAIN_TYPE FAKE_BOOTSTRAP_POOL_DIR
export SHIFTLAB_HOME=$work/state SHIFTLAB_CACHE=$work/cache XDG_CACHE_HOME=$work/xdg
results=$work/results.tsv
: >"$results"
serve=""
clusters=()
on_exit 'stop_pid "$serve"'
on_exit 'for c in "${clusters[@]}"; do "$bin" destroy cluster "$c" --purge-images >/dev/null 2>&1; done'

SHIFTLAB_LOG=info "$bin" serve --host-dns off --scan-interval 1 >"$work/serve.log" 2>&1 &
serve=$!
wait_for 20 "serve's control socket" test -S "$SHIFTLAB_HOME/serve.sock"

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# method rep phase seconds load-average
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(cut -d' ' -f1 /proc/loadavg)" >>"$results"; }

cluster_file() { # name method-lines...
	local name=$1
	shift
	{
		printf 'cluster: %s\ndomain: bench.test\ndistribution: okd\nrehearsal: true\n' "$name"
		echo "ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKeyOnly bench@shiftlab']"
		printf '%s\n' "$@"
		printf 'network:\n  cidr: 192.168.185.0/24\n'
	} >"$work/$name.yaml"
	echo "$work/$name.yaml"
}

shape() { # method -> cluster-file lines
	case $1 in
	upi) printf '%s\n' "method: upi" "ctlplanes: 3" "workers: 2" ;;
	compact) printf '%s\n' "method: upi" "ctlplanes: 3" "workers: 0" ;;
	sno) printf '%s\n' "method: sno" "ctlplanes: 1" "workers: 0" ;;
	agent) printf '%s\n' "method: agent" "ctlplanes: 3" "workers: 2" ;;
	# Ironic's out-of-band inspection reads whole GiB (tests/e2e/ipi.sh).
	ipi) printf '%s\n' "method: ipi" "ctlplanes: 3" "workers: 2" "memory: 1024" ;;
	*) die "unknown method $1 (upi, compact, sno, agent, ipi)" ;;
	esac
}

failed=0
for m in $METHODS; do
	for rep in $(seq "$REPS"); do
		c=r$m$rep
		mapfile -t lines < <(shape "$m")
		f=$(cluster_file "$c" "${lines[@]}")
		clusters+=("$c")
		say "$m (rep $rep): create cluster"
		t0=$(now)
		if ! "$bin" create cluster -f "$f" >"$work/$c.create.out" 2>&1; then
			say "$m: create cluster failed: $(tail -5 "$work/$c.create.out")"
			failed=1
			"$bin" destroy cluster "$c" >/dev/null 2>&1 || true
			continue
		fi
		t1=$(now)
		record "$m" "$rep" install "$(elapsed "$t0" "$t1")"
		"$bin" report "$c" >"$work/$c.report.out" 2>&1 || { say "$m: the report names a failure: $(cat "$work/$c.report.out")"; failed=1; }
		t2=$(now)
		record "$m" "$rep" report "$(elapsed "$t1" "$t2")"
		"$bin" destroy cluster "$c" >"$work/$c.destroy.out" 2>&1 || { say "$m: destroy failed: $(tail -5 "$work/$c.destroy.out")"; failed=1; }
		t3=$(now)
		record "$m" "$rep" destroy "$(elapsed "$t2" "$t3")"
		record "$m" "$rep" total "$(elapsed "$t0" "$t3")"
	done
done

echo
echo "rehearsal of each method, $(nproc) CPUs, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
printf '%-8s %10s %10s %10s %10s %12s\n' METHOD INSTALL REPORT DESTROY TOTAL "TOTAL/${MARK}s"
for m in $METHODS; do
	med() { awk -F'\t' -v m="$m" -v p="$1" '$1 == m && $3 == p {print $4}' "$results" | sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.1f", a[int((NR+1)/2)]; else printf "-"}'; }
	total=$(med total)
	ratio=-
	[[ $total == - ]] || ratio=$(awk -v t="$total" -v k="$MARK" 'BEGIN { printf "%.2f", t / k }')
	printf '%-8s %10s %10s %10s %10s %12s\n' "$m" "$(med install)" "$(med report)" "$(med destroy)" "$total" "$ratio"
done
echo "(seconds, median of $REPS; load average at each phase's end in the TSV)"
exit "$failed"
