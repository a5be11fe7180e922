#!/usr/bin/env bash
# bench/infra/run.sh — provisioning benchmark of the libvirt engine (docs/benchmarks.md).
#
#   bench/infra/run.sh            (as root, on the host; it enters scripts/sandbox itself)
#
# Wall time of `shiftlab create infra --start-workers` until every domain runs (libvirt
# state "running") and until every node booted and printed its stand-in report (the
# rehearsal's real end), for 6, 20 and 50 stand-in nodes, next to
#   - raw: the same objects (shiftlab's own XML) made by the minimal sequence of
#     libvirt calls on one connection (bench/infra/raw.py), once sequential and once
#     with the starts in parallel (4 in flight, as shiftlab);
#   - the floor: N x one domain's start time (from the sequential raw run at 6
#     nodes, same repetition) / CPUs;
#   - kcli (PyPI `kcli`): the same network and N VMs from the same base image, with
#     its default plan and with `threaded=true` (kcli's own parallel mode).
# Prints a table and the ratios. Asserts nothing about timings.
#
# Environment:
#   BENCH_NODES="6 20 50"  cluster sizes (>= 4: 1 bootstrap + 3 control planes + workers)
#   BENCH_REPS=3           repetitions of each measurement (median and min–max reported)
#   BENCH_MEMORY=256       MiB per guest
#   BENCH_KCLI=1           0: skip kcli
#   BENCH_KCLI_NODES="6 20" the sizes kcli runs at (both plans)
#   BENCH_BOOT_TIMEOUT=900 seconds to wait for every node's stand-in report
#   BENCH_VENV=DIR         reuse a venv that has kcli + libvirt-python (else one is
#                          made in the temp dir: needs PyPI, ~1 min to build libvirt-python)
#   SHIFTLAB_BIN=PATH      the binary (default: cargo build --release, $CARGO_TARGET_DIR)
#   BENCH_OUT=FILE         also copy the result table (TSV of every run) to FILE
#   BENCH_KEEP=1           keep the temp dir (results, raw phases, command outputs)
#
# Writes only into a temp dir (/tmp/shiftlab-bench-infra.*, removed at exit) and the
# sandbox's private libvirt state; cleans up what it made on every exit path.
NAME=bench-infra
self=$(readlink -f "$0")
here=$(dirname "$self")
. "$here/../../tests/e2e/lib.sh"
NODES=${BENCH_NODES:-6 20 50}
REPS=${BENCH_REPS:-3}
MEMORY=${BENCH_MEMORY:-256}
CIDR=192.168.180.0/24
KCLI_CIDR=192.168.181.0/24

say() { echo "bench: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# ------------------------------------------------------------------ outside
if [[ ${1:-} != __inner ]]; then
	[[ $(id -u) == 0 ]] || die "run as root (scripts/sandbox needs it)"
	work=$(mktemp -d /tmp/shiftlab-bench-infra.XXXXXX)
	if [[ ${BENCH_KEEP:-} == 1 ]]; then
		on_exit 'say "kept $work (results.tsv, raw-phases.jsonl, command outputs)"'
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
	venv=${BENCH_VENV:-}
	if [[ ${BENCH_KCLI:-1} == 1 && -z $venv ]]; then
		# pip runs here, on the host: the sandbox has no network.
		say "installing kcli and libvirt-python from PyPI into $work/venv"
		py_venv "$work/venv" 'kvirt, libvirt' kcli libvirt-python
		venv=$work/venv
	fi
	if [[ -z $venv ]]; then
		# raw.py only needs the libvirt bindings
		/usr/bin/python3 -c 'import libvirt' 2>/dev/null ||
			die "raw.py needs libvirt-python: set BENCH_VENV or apt-get install python3-libvirt"
	fi
	rc=0
	"$repo/scripts/sandbox" run -- "$self" __inner "$work" "$bin" "$venv" || rc=$?
	[[ -n ${BENCH_OUT:-} && -f $work/results.tsv ]] && cp "$work/results.tsv" "$BENCH_OUT"
	exit "$rc"
fi

# ------------------------------------------------------------------- inside
[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] || die "__inner outside the sandbox"
work=$2 bin=$3 venv=$4
py=${venv:+$venv/bin/python3}
py=${py:-/usr/bin/python3}
raw() { RAW_PHASES=$work/raw-phases.jsonl "$py" "$here/raw.py" "$@"; }
export SHIFTLAB_HOME=$work/state
image=$work/standin.qcow2
results=$work/results.tsv
: >"$results"
clusters=()

cleanup() {
	set +e
	for c in "${clusters[@]}"; do
		"$bin" destroy cluster "$c" >/dev/null 2>&1
		[[ -f $work/raw-$c/manifest.json ]] && raw destroy "$work/raw-$c" >/dev/null 2>&1
	done
	if [[ -n ${KCLI_HOME:-} ]]; then
		HOME=$KCLI_HOME "$venv/bin/kcli" delete plan benchplan -y >/dev/null 2>&1
		HOME=$KCLI_HOME "$venv/bin/kcli" delete pool kcli-bench -y >/dev/null 2>&1
	fi
	for c in "${clusters[@]}"; do
		"$bin" destroy cluster "$c" --purge-images >/dev/null 2>&1
	done
	[[ -f $work/raw-cold/manifest.json ]] && raw destroy "$work/raw-cold" --cold >/dev/null 2>&1
}
on_exit cleanup

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# what N rep seconds load-average(1 min, whole machine, when recorded)
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(cut -d' ' -f1 /proc/loadavg)" >>"$results"; }

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
# report on its console (what tests/e2e/infra.sh waits for).
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

expect_running() { # prefix count what
	local got
	got=$(raw running "$1")
	[[ $got == "$2" ]] || die "$3: $got of $2 domains running"
}

# shiftlab create infra, timed; leaves the cluster running. With a third
# argument, also waits for every node's report: prints "running booted".
run_shiftlab() { # name nodes [booted]
	local f t0 t1 b
	f=$(cluster_file "$1" "$2")
	clear_logs "$1-"
	t0=$(now)
	"$bin" create infra -f "$f" --start-workers >"$work/$1.create.out" 2>&1 ||
		die "shiftlab create infra failed: $(cat "$work/$1.create.out")"
	t1=$(now)
	expect_running "$1-" "$2" "shiftlab create infra $1"
	if [[ -n ${3:-} ]]; then
		b=$(wait_booted "$1-" "$2" "$t0")
		echo "$(elapsed "$t0" "$t1") $b"
	else
		elapsed "$t0" "$t1"
	fi
}

# raw.py create, timed from the shell too; waits for the reports: "running booted".
run_raw() { # name nodes dir [--parallel]
	local t0 rw b
	clear_logs "$1-"
	t0=$(now)
	rw=$(raw create "$3" ${4:-})
	expect_running "$1-" "$2" "raw create ${4:-}"
	b=$(wait_booted "$1-" "$2" "$t0")
	raw destroy "$3"
	echo "$rw $b"
}

# ---- 1. cold: pool and base image do not exist yet (imported within the timing)
say "cold runs (pool and base image created and imported inside the timing), 6 nodes"
clusters+=(benchcold)
for ((r = 1; r <= REPS; r++)); do
	s=$(run_shiftlab benchcold 6)
	if [[ ! -f $work/raw-cold/manifest.json ]]; then
		mkdir -p "$work/raw-cold"
		raw capture benchcold "$work/raw-cold" >/dev/null
	fi
	"$bin" destroy cluster benchcold --purge-images >/dev/null
	[[ -z $(virsh pool-list --all --name | grep -x shiftlab || true) ]] || die "purge left the pool"
	rw=$(raw create "$work/raw-cold" --cold "$image")
	expect_running benchcold- 6 "raw create (cold)"
	raw destroy "$work/raw-cold" --cold
	record shiftlab-cold 6 "$r" "$s"
	record raw-cold 6 "$r" "$rw"
	say "  cold 6 #$r: shiftlab ${s}s, raw ${rw}s"
done

# ---- 2. warm: the base image stays imported (pool + base volume kept)
say "importing the base image once (untimed warm-up run, 4 nodes)"
clusters+=(benchwarm)
run_shiftlab benchwarm 4 >/dev/null
"$bin" destroy cluster benchwarm >/dev/null

if [[ ${BENCH_KCLI:-1} == 1 ]]; then
	# kcli: private HOME, client = the sandbox's qemu:///system, its own pool
	# holding a copy of the same stand-in image, network of the same size.
	export KCLI_HOME=$work/kcli-home
	mkdir -p "$KCLI_HOME/.kcli"
	cat >"$KCLI_HOME/.kcli/config.yml" <<EOF
default:
  client: local
local:
  type: kvm
  host: 127.0.0.1
  pool: kcli-bench
EOF
	kcli() { HOME=$KCLI_HOME "$venv/bin/kcli" "$@"; }
	kcli create pool -p /var/lib/libvirt/images/kcli-bench kcli-bench >"$work/kcli-pool.out" 2>&1 ||
		die "kcli create pool failed: $(cat "$work/kcli-pool.out")"
	cp "$image" /var/lib/libvirt/images/kcli-bench/standin.qcow2
	virsh pool-refresh kcli-bench >/dev/null
fi
kcli_plan() { # nodes -> plan file
	local i f=$work/kcli-plan-$1.yml
	{
		echo "benchnet:"
		echo "  type: network"
		echo "  cidr: $KCLI_CIDR"
		for ((i = 0; i < $1; i++)); do
			cat <<EOF
kcli-$i:
  image: standin.qcow2
  pool: kcli-bench
  virttype: qemu
  memory: $MEMORY
  numcpus: 1
  nets: [benchnet]
EOF
		done
	} >"$f"
	echo "$f"
}

# kcli create plan, timed: prints the seconds, or "failed" when the plan did
# not end with every VM running (kcli's own errors, e.g. its threaded plan's
# "pool ... has asynchronous jobs running", are kept in $work/kcli-failures and
# shown in the report; the run goes on).
run_kcli() { # nodes [-P threaded=true]
	local t0 t1 f rc=0 got
	f=$(kcli_plan "$1")
	t0=$(now)
	kcli create plan -f "$f" "${@:2}" benchplan >"$work/kcli-create.out" 2>&1 || rc=$?
	t1=$(now)
	got=$(raw running kcli-)
	if [[ $rc == 0 && $got == "$1" ]]; then
		elapsed "$t0" "$t1"
	else
		printf '%s\t%s\t%s of %s VMs running, exit %s: %s\n' "$1" "${*:2}" "$got" "$1" "$rc" \
			"$(sed 's/\x1b\[[0-9;]*m//g' "$work/kcli-create.out" | grep -i -m1 'error\|fail\|asynchronous' | tr '\t' ' ')" >>"$work/kcli-failures"
		echo failed
	fi
	kcli delete plan benchplan -y >/dev/null 2>&1
}

for n in $NODES; do
	c=bench$n
	clusters+=("$c")
	say "warm runs, $n nodes"
	for ((r = 1; r <= REPS; r++)); do
		read -r s sb < <(run_shiftlab "$c" "$n" booted)
		if [[ ! -f $work/raw-$c/manifest.json ]]; then
			mkdir -p "$work/raw-$c"
			raw capture "$c" "$work/raw-$c" >/dev/null
		fi
		"$bin" destroy cluster "$c" >/dev/null
		read -r rw rwb < <(run_raw "$c" "$n" "$work/raw-$c")
		read -r rp rpb < <(run_raw "$c" "$n" "$work/raw-$c" --parallel)
		record shiftlab "$n" "$r" "$s"
		record shiftlab-booted "$n" "$r" "$sb"
		record raw "$n" "$r" "$rw"
		record raw-booted "$n" "$r" "$rwb"
		record rawpar "$n" "$r" "$rp"
		record rawpar-booted "$n" "$r" "$rpb"
		msg="  $n #$r: running/booted: shiftlab ${s}/${sb}s, raw sequential ${rw}/${rwb}s, raw parallel ${rp}/${rpb}s"
		if [[ ${BENCH_KCLI:-1} == 1 && " ${BENCH_KCLI_NODES:-6 20} " == *" $n "* ]]; then
			k=$(run_kcli "$n")
			kt=$(run_kcli "$n" -P threaded=true)
			[[ $k == failed ]] || record kcli "$n" "$r" "$k"
			[[ $kt == failed ]] || record kcli-threaded "$n" "$r" "$kt"
			msg+=", kcli ${k}, kcli threaded ${kt} (seconds, or failed: see the report)"
		fi
		say "$msg"
	done
done

# ---- report
touch "$work/kcli-failures"
"$py" - "$results" "$work/raw-phases.jsonl" "$work/kcli-failures" <<'EOF'
import json, os, statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
t, loads = {}, []
for what, n, rep, s, load in rows:
    t.setdefault((what, int(n)), {})[rep] = float(s)
    loads.append(float(load))
cpus = os.cpu_count()
# one domain's start time, per repetition: the sequential raw run's starts at the
# smallest size, divided by its node count
ph = [json.loads(l) for l in open(sys.argv[2])]
seq = [r for r in ph if not r["cold"] and not r.get("parallel")]
nmin = min((r["n"] for r in seq), default=None)
one = [r["dom-start"] / r["n"] for r in seq if r["n"] == nmin]
one_start = statistics.median(one) if one else None
def med(k):
    v = list(t.get(k, {}).values())
    return statistics.median(v) if v else None
def cell(k):
    v = list(t.get(k, {}).values())
    if not v:
        return "-"
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{v[0]:.2f}"
def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"
sizes = sorted({n for (w, n) in t if w == "shiftlab"})
print()
print(f"seconds, median (min-max) of the repetitions; {cpus} CPUs; one domain start = {one_start and round(one_start, 3)} s")
print()
print("| nodes | what | domains running | every node booted and reporting |")
print("|---:|---|---|---|")
for n in sizes:
    floor = n * one_start / cpus if one_start else None
    print(f"| {n} | shiftlab create infra | {cell(('shiftlab', n))} | {cell(('shiftlab-booted', n))} |")
    print(f"| {n} | raw calls, starts parallel (4) | {cell(('rawpar', n))} | {cell(('rawpar-booted', n))} |")
    print(f"| {n} | raw calls, sequential | {cell(('raw', n))} | {cell(('raw-booted', n))} |")
    print(f"| {n} | floor: N x one start / CPUs | {floor and round(floor, 2)} | |")
    if ("kcli", n) in t:
        print(f"| {n} | kcli create plan (default) | {cell(('kcli', n))} | (no report: no Ignition) |")
        print(f"| {n} | kcli create plan, threaded=true | {cell(('kcli-threaded', n))} | |")
print()
print("| nodes | shiftlab / floor | shiftlab / raw parallel | raw sequential / shiftlab | kcli / shiftlab | kcli threaded / shiftlab | booted: shiftlab / raw parallel |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for n in sizes:
    sm = med(("shiftlab", n))
    floor = n * one_start / cpus if one_start else None
    print(f"| {n} | {ratio(sm, floor)} | {ratio(sm, med(('rawpar', n)))} | {ratio(med(('raw', n)), sm)} | "
          f"{ratio(med(('kcli', n)), sm)} | {ratio(med(('kcli-threaded', n)), sm)} | "
          f"{ratio(med(('shiftlab-booted', n)), med(('rawpar-booted', n)))} |")
if ("shiftlab-cold", 6) in t:
    print()
    print(f"cold, 6 nodes (pool + base image import timed): shiftlab {cell(('shiftlab-cold', 6))}, raw sequential {cell(('raw-cold', 6))}")
print()
print("raw baseline by phase, seconds (median):")
groups = {}
for r in ph:
    groups.setdefault((r["cold"], bool(r.get("parallel")), r["n"]), []).append(r)
for (cold, par, n), rs in sorted(groups.items()):
    keys = [k for k in rs[0] if k not in ("n", "cold", "parallel")]
    label = ("cold" if cold else "warm") + (" parallel" if par else " sequential")
    print(f"  {label:<16} {n:>3}: " + "  ".join(f"{k} {statistics.median(r.get(k, 0) for r in rs):.2f}" for k in keys))
fails = [l.split("\t") for l in open(sys.argv[3]).read().split("\n") if l]
if fails:
    print("\nkcli runs that failed (not in the medians):")
    for n, opts, why in fails:
        print(f"  {n} nodes, {opts or 'default plan'}: {why}")
print(f"\nmachine load average (1 min) at the records: {min(loads):.1f}-{max(loads):.1f} on {cpus} CPUs")
EOF
