#!/usr/bin/env bash
# bench/infra/run.sh — provisioning benchmark of the libvirt engine (docs/benchmarks.md).
#
#   bench/infra/run.sh            (as root, on the host; it enters scripts/sandbox itself)
#
# Wall time of `shiftlab create infra --start-workers` until every domain runs (libvirt
# state "running", not booted) for 6, 20 and 50 stand-in nodes, next to
#   - raw: the same objects (shiftlab's own XML) made by the minimal sequence of
#     libvirt calls, sequential, one connection (bench/infra/raw.py);
#   - kcli (PyPI `kcli`): the same network and 6 VMs from the same base image.
# Prints a table and the ratios. Asserts nothing about timings.
#
# Environment:
#   BENCH_NODES="6 20 50"  cluster sizes (>= 4: 1 bootstrap + 3 control planes + workers)
#   BENCH_REPS=3           repetitions of each measurement (median and min–max reported)
#   BENCH_MEMORY=256       MiB per guest
#   BENCH_KCLI=1           0: skip kcli
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

expect_running() { # prefix count what
	local got
	got=$(raw running "$1")
	[[ $got == "$2" ]] || die "$3: $got of $2 domains running"
}

# shiftlab create infra, timed; leaves the cluster running.
run_shiftlab() { # name nodes
	local f t0 t1
	f=$(cluster_file "$1" "$2")
	t0=$(now)
	"$bin" create infra -f "$f" --start-workers >"$work/$1.create.out" 2>&1 ||
		die "shiftlab create infra failed: $(cat "$work/$1.create.out")"
	t1=$(now)
	expect_running "$1-" "$2" "shiftlab create infra $1"
	elapsed "$t0" "$t1"
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
	{
		echo "benchnet:"
		echo "  type: network"
		echo "  cidr: $KCLI_CIDR"
		for i in 0 1 2 3 4 5; do
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
	} >"$work/kcli-plan.yml"
fi

run_kcli() {
	local t0 t1
	t0=$(now)
	kcli create plan -f "$work/kcli-plan.yml" benchplan >"$work/kcli-create.out" 2>&1 ||
		die "kcli create plan failed: $(cat "$work/kcli-create.out")"
	t1=$(now)
	expect_running kcli- 6 "kcli create plan"
	elapsed "$t0" "$t1"
	kcli delete plan benchplan -y >/dev/null 2>&1
}

for n in $NODES; do
	c=bench$n
	clusters+=("$c")
	say "warm runs, $n nodes"
	for ((r = 1; r <= REPS; r++)); do
		s=$(run_shiftlab "$c" "$n")
		if [[ ! -f $work/raw-$c/manifest.json ]]; then
			mkdir -p "$work/raw-$c"
			raw capture "$c" "$work/raw-$c" >/dev/null
		fi
		"$bin" destroy cluster "$c" >/dev/null
		rw=$(raw create "$work/raw-$c")
		expect_running "$c-" "$n" "raw create"
		raw destroy "$work/raw-$c"
		record shiftlab "$n" "$r" "$s"
		record raw "$n" "$r" "$rw"
		msg="  $n #$r: shiftlab ${s}s, raw ${rw}s"
		if [[ $n == 6 && ${BENCH_KCLI:-1} == 1 ]]; then
			k=$(run_kcli)
			record kcli 6 "$r" "$k"
			msg+=", kcli ${k}s"
		fi
		say "$msg"
	done
done

# ---- report
"$py" - "$results" "$work/raw-phases.jsonl" <<'EOF'
import sys, statistics
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
t = {}
loads = []
for what, n, rep, s, load in rows:
    t.setdefault((what, int(n)), []).append(float(s))
    loads.append(float(load))
def cell(k):
    v = t.get(k)
    if not v:
        return "-", None
    m = statistics.median(v)
    return (f"{m:.2f} ({min(v):.2f}–{max(v):.2f})", m)
print()
print(f"wall time to all domains running, seconds: median (min–max) of {max(len(v) for v in t.values())} runs")
print(f"{'what':<16} {'nodes':>5}  {'shiftlab':<20} {'raw libvirt':<20} {'shiftlab/raw':>12}")
for (what, n) in sorted({(w.replace('raw', 'shiftlab'), n) for (w, n) in t if w.startswith(('shiftlab', 'raw'))}, key=lambda k: (k[0] != 'shiftlab-cold', k[1])):
    raw = what.replace("shiftlab", "raw")
    (sc, sm), (rc, rm) = cell((what, n)), cell((raw, n))
    ratio = f"{sm / rm:.2f}" if sm and rm else "-"
    label = "cold (import)" if "cold" in what else "warm"
    print(f"{label:<16} {n:>5}  {sc:<20} {rc:<20} {ratio:>12}")
if ("kcli", 6) in t:
    (kc, km), (sc, sm) = cell(("kcli", 6)), cell(("shiftlab", 6))
    print()
    print(f"kcli create plan, 6 VMs + network: {kc}")
    print(f"shiftlab create infra, 6 nodes:     {sc}")
    sh6 = {r: float(s) for w, n, r, s, _ in rows if w == "shiftlab" and n == "6"}
    per = [float(s) / sh6[r] for w, n, r, s, _ in rows if w == "kcli" and r in sh6]
    print(f"kcli/shiftlab = {km / sm:.2f} (ratio of medians); per repetition: " + ", ".join(f"{x:.2f}" for x in per))
import json
ph = {}
for l in open(sys.argv[2]):
    r = json.loads(l)
    ph.setdefault((r["cold"], r["n"]), []).append(r)
print()
print("raw baseline by phase, seconds (median):")
for (cold, n), rs in sorted(ph.items()):
    keys = [k for k in rs[0] if k not in ("n", "cold")]
    print(f"  {'cold' if cold else 'warm'} {n:>3}: " + "  ".join(f"{k} {statistics.median(r.get(k, 0) for r in rs):.2f}" for k in keys))
print(f"\nmachine load average (1 min) at the records: {min(loads):.1f}–{max(loads):.1f} on {__import__('os').cpu_count()} CPUs")
EOF
