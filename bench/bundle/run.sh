#!/usr/bin/env bash
# bench/bundle/run.sh — lab bundles against their floors (docs/benchmarks.md, "Lab bundles").
#
#   bench/bundle/run.sh           (as root, on the host; it enters scripts/sandbox itself)
#
# For each size N, on a rehearsal lab of stand-in nodes (1 bootstrap, 3 control
# planes, N-4 workers, made by `create infra --start-workers` as bench/infra does):
#   - create infra: wall time until every domain runs (the command's end: shiftlab's
#     own work) and until every node printed its stand-in report; the boot is the
#     difference;
#   - bundle create: `shiftlab stop` first (timed apart: the guests' ACPI shutdown),
#     then `bundle create` of the stopped lab, against the floor: `qemu-img convert
#     -c -O qcow2` of the same disks, one after the other as bundle create does
#     (flatten + compress, nothing else); the disks' sizes side by side;
#   - restore: `destroy cluster`, then `bundle restore --start` until the command
#     ends (every domain running) and until every node reported, twice: the first
#     imports the bundle's disks into the pool, the second shares them (every
#     restore after the first);
#   - overhead: the time until every domain runs (the boot excluded), restore's
#     against create infra's, and the ratio (the goal: 1.2x).
# Prints each number and the ratios. Asserts nothing about timings.
#
# Environment:
#   BENCH_NODES="6 20"     lab sizes (>= 4); a small host: BENCH_NODES=6
#   BENCH_REPS=1           repetitions of each size (median and min-max reported)
#   BENCH_MEMORY=256       MiB per guest
#   BENCH_BOOT_TIMEOUT=900 seconds to wait for every node's stand-in report
#   SHIFTLAB_BIN=PATH      the binary (default: cargo build --release, $CARGO_TARGET_DIR)
#   BENCH_OUT=FILE         also copy the results (TSV of every run) to FILE
#   BENCH_KEEP=1           keep the temp dir (results, command outputs)
#
# Writes only into a temp dir (/tmp/shiftlab-bench-bundle.*, removed at exit) and the
# sandbox's private libvirt state; cleans up what it made on every exit path.
NAME=bench-bundle
self=$(readlink -f "$0")
here=$(dirname "$self")
. "$here/../../tests/e2e/lib.sh"
NODES=${BENCH_NODES:-6 20}
REPS=${BENCH_REPS:-1}
MEMORY=${BENCH_MEMORY:-256}
CIDR=192.168.182.0/24

say() { echo "bench: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# ------------------------------------------------------------------ outside
if [[ ${1:-} != __inner ]]; then
	[[ $(id -u) == 0 ]] || die "run as root (scripts/sandbox needs it)"
	work=$(mktemp -d /tmp/shiftlab-bench-bundle.XXXXXX)
	if [[ ${BENCH_KEEP:-} == 1 ]]; then
		on_exit 'say "kept $work (results.tsv, command outputs)"'
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
	say "building the stand-in image"
	"$bin" image standin --out "$work/standin.qcow2" >/dev/null
	rc=0
	"$repo/scripts/sandbox" run -- "$self" __inner "$work" "$bin" || rc=$?
	[[ -n ${BENCH_OUT:-} && -f $work/results.tsv ]] && cp "$work/results.tsv" "$BENCH_OUT"
	exit "$rc"
fi

# ------------------------------------------------------------------- inside
[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] || die "__inner outside the sandbox"
work=$2 bin=$3
export SHIFTLAB_HOME=$work/state
image=$work/standin.qcow2
results=$work/results.tsv
: >"$results"
clusters=()

cleanup() {
	set +e
	for c in "${clusters[@]}"; do
		"$bin" destroy cluster "$c" >/dev/null 2>&1
		[[ -f $work/bundle-$c/bundle.json ]] && "$bin" bundle delete "$work/bundle-$c" >/dev/null 2>&1
	done
	for c in "${clusters[@]}"; do
		"$bin" destroy cluster "$c" --purge-images >/dev/null 2>&1
	done
}
on_exit cleanup

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# what N rep value load-average(1 min, whole machine, when recorded)
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(cut -d' ' -f1 /proc/loadavg)" >>"$results"; }
# bytes of the files given (as allocated on the disk)
bytes() { du -cB1 "$@" | tail -n 1 | cut -f1; }

cluster_file() { # name nodes
	cat >"$work/$1.yaml" <<EOF
cluster: $1
domain: bench.test
distribution: okd
method: upi
rehearsal: true
image: $image
ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKeyOnly bench@shiftlab']
ctlplanes: 3
workers: $(($2 - 4))
bootstrap: {memory: $MEMORY}
ctlplane: {memory: $MEMORY}
worker: {memory: $MEMORY}
network:
  cidr: $CIDR
libvirt:
  domain_type: qemu
EOF
	echo "$work/$1.yaml"
}

# Seconds from T0 until every domain named PREFIX* printed a complete stand-in
# report on its console (as bench/infra/run.sh and tests/e2e/infra.sh wait).
wait_booted() { # prefix count t0
	local deadline=$((SECONDS + ${BENCH_BOOT_TIMEOUT:-900})) done name log
	while :; do
		done=0
		for name in $(virsh list --name | grep "^$1"); do
			log=/var/log/libvirt/qemu/$name-console.log
			grep -a 'SHIFTLAB-STANDIN-REPORT ' "$log" 2>/dev/null |
				sed 's/.*SHIFTLAB-STANDIN-REPORT //' |
				jq -e -s 'map(select(.ip != "" and .api != "" and .apps != "" and .ptr != "")) | length > 0' >/dev/null 2>&1 &&
				done=$((done + 1))
		done
		((done == $2)) && break
		((SECONDS < deadline)) || die "$1: $done of $2 nodes reported within ${BENCH_BOOT_TIMEOUT:-900}s"
		sleep 0.5
	done
	elapsed "$3" "$(now)"
}
clear_logs() { rm -f /var/log/libvirt/qemu/"$1"*-console.log; }

# runs a shiftlab command, timed; dies with its output when it fails
timed() { # out-file args...
	local out=$1 t0
	shift
	t0=$(now)
	"$bin" "$@" >"$out" 2>&1 || die "shiftlab $* failed: $(cat "$out")"
	elapsed "$t0" "$(now)"
}

# one restore, timed: "running booted" (seconds); leaves the lab running
restore() { # name nodes bundle tag
	local t0 t1
	clear_logs "$1-"
	t0=$(now)
	"$bin" bundle restore "$3" --start >"$work/$1.$4.out" 2>&1 ||
		die "bundle restore failed: $(cat "$work/$1.$4.out")"
	t1=$(now)
	echo "$(elapsed "$t0" "$t1") $(wait_booted "$1-" "$2" "$t0")"
}

say "importing the base image once (untimed warm-up run, 4 nodes)"
clusters+=(bbwarm)
"$bin" create infra -f "$(cluster_file bbwarm 4)" >/dev/null
"$bin" destroy cluster bbwarm >/dev/null

for n in $NODES; do
	c=bb$n
	clusters+=("$c")
	for ((r = 1; r <= REPS; r++)); do
		say "$n nodes #$r: create infra"
		f=$(cluster_file "$c" "$n")
		clear_logs "$c-"
		t0=$(now)
		"$bin" create infra -f "$f" --start-workers >"$work/$c.create.out" 2>&1 ||
			die "create infra failed: $(cat "$work/$c.create.out")"
		ci=$(elapsed "$t0" "$(now)")
		cib=$(wait_booted "$c-" "$n" "$t0") || die "create infra: not every node booted"
		"$bin" plan -f "$f" -o json >"$work/$c.plan.json"

		say "$n nodes #$r: stop, bundle create, the floor"
		st=$(timed "$work/$c.stop.out" stop "$c" --timeout 120)
		b=$work/bundle-$c
		bc=$(timed "$work/$c.bundle.out" bundle create "$c" --out "$b")
		pool=$(jq -r .libvirt.pool "$work/$c.plan.json")
		rm -rf "$work/floor" && mkdir "$work/floor"
		mapfile -t names < <(jq -r '.nodes[].name' "$b/bundle.json")
		t0=$(now)
		for name in "${names[@]}"; do
			vol=$(jq -r --arg n "$name" '.nodes[] | select(.name == $n) | .disks[0].volume' "$work/$c.plan.json")
			qemu-img convert -c -O qcow2 "$(virsh vol-path --pool "$pool" "$vol")" "$work/floor/$name.qcow2"
		done
		fl=$(elapsed "$t0" "$(now)")
		bs=$(bytes "$b"/disks/*.qcow2)
		fs=$(bytes "$work/floor"/*.qcow2)
		all=$(bytes "$b")
		rm -rf "$work/floor"

		say "$n nodes #$r: destroy, restore (imports), destroy, restore (shared)"
		"$bin" destroy cluster "$c" >/dev/null
		read -r r1 r1b < <(restore "$c" "$n" "$b" restore1)
		"$bin" destroy cluster "$c" >/dev/null
		read -r r2 r2b < <(restore "$c" "$n" "$b" restore2)
		# (a failure inside the substitution ends only the subshell)
		[[ -n $r1b && -n $r2b ]] || die "a restore failed (above)"
		"$bin" destroy cluster "$c" >/dev/null
		"$bin" bundle delete "$b" >/dev/null

		record infra "$n" "$r" "$ci"
		record infra-booted "$n" "$r" "$cib"
		record stop "$n" "$r" "$st"
		record bundle-create "$n" "$r" "$bc"
		record floor "$n" "$r" "$fl"
		record bundle-disks-bytes "$n" "$r" "$bs"
		record floor-bytes "$n" "$r" "$fs"
		record bundle-bytes "$n" "$r" "$all"
		record restore-import "$n" "$r" "$r1"
		record restore-import-booted "$n" "$r" "$r1b"
		record restore "$n" "$r" "$r2"
		record restore-booted "$n" "$r" "$r2b"
		say "  $n #$r: create infra ${ci}/${cib}s; stop ${st}s; bundle create ${bc}s, floor ${fl}s;" \
			"disks ${bs} B, floor ${fs} B; restore (import) ${r1}/${r1b}s, restore (shared) ${r2}/${r2b}s"
	done
done

# ---- report
python3 - "$results" <<'EOF'
import os, statistics, sys
t, loads = {}, []
for l in open(sys.argv[1]).read().split("\n"):
    if not l:
        continue
    what, n, rep, v, load = l.split("\t")
    t.setdefault((what, int(n)), []).append(float(v))
    loads.append(float(load))
def med(w, n):
    v = t.get((w, n))
    return statistics.median(v) if v else None
def cell(w, n, scale=1.0, fmt="{:.2f}"):
    v = [x / scale for x in t.get((w, n), [])]
    if not v:
        return "-"
    m = fmt.format(statistics.median(v))
    return f"{m} ({fmt.format(min(v))}-{fmt.format(max(v))})" if len(v) > 1 else m
def boot(w, n):
    a, b = med(w + "-booted", n), med(w, n)
    return a - b if a is not None and b is not None else None
def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"
reps = max(len(v) for v in t.values())
sizes = sorted({n for (w, n) in t})
MiB = 1 << 20
print()
print(f"seconds and MiB, median (min-max) of {reps} repetition(s); {os.cpu_count()} CPUs")
print()
print("| nodes | bundle create (stopped lab) | floor: qemu-img convert -c, same disks | / floor | bundle disks MiB | floor MiB | / floor | whole bundle MiB | stop (apart) |")
print("|---:|---|---|---:|---|---|---:|---|---|")
for n in sizes:
    print(f"| {n} | {cell('bundle-create', n)} | {cell('floor', n)} | **{ratio(med('bundle-create', n), med('floor', n))}** "
          f"| {cell('bundle-disks-bytes', n, MiB, '{:.1f}')} | {cell('floor-bytes', n, MiB, '{:.1f}')} "
          f"| **{ratio(med('bundle-disks-bytes', n), med('floor-bytes', n))}** | {cell('bundle-bytes', n, MiB, '{:.1f}')} | {cell('stop', n)} |")
print()
print("| nodes | what | domains running (shiftlab's own time) | every node reporting | boot (difference) |")
print("|---:|---|---|---|---:|")
for n in sizes:
    for w, label in (("infra", "create infra --start-workers"), ("restore-import", "bundle restore --start, first (imports the disks)"),
                     ("restore", "bundle restore --start, again (disks shared)")):
        b = boot(w, n)
        print(f"| {n} | {label} | {cell(w, n)} | {cell(w + '-booted', n)} | {b and round(b, 2)} |")
print()
print("| nodes | overhead: restore (shared) / create infra | restore (first, imports) / create infra | every node reporting: restore (shared) / create infra |")
print("|---:|---:|---:|---:|")
for n in sizes:
    print(f"| {n} | **{ratio(med('restore', n), med('infra', n))}** | {ratio(med('restore-import', n), med('infra', n))} "
          f"| {ratio(med('restore-booted', n), med('infra-booted', n))} |")
print(f"\nmachine load average (1 min) at the records: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
EOF
