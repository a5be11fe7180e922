#!/usr/bin/env bash
# bench/serve/run.sh IMAGE — `shiftlab serve`'s footprint (docs/benchmarks.md, "Host
# services"): 5 rehearsal clusters (UPI, bootstrap + 3 control planes each, the
# domains stopped after `create infra`) in the sandbox, serve running their host
# services (HAProxy, HTTP artifacts; host DNS off). IPI clusters have no HAProxy
# (their API and ingress are VIPs): waiting for theirs never ended, which was
# why this run timed out. After a settling period: serve's RSS
# (VmRSS/VmHWM) and its CPU while idle at the default scan interval (utime+stime
# over BENCH_IDLE seconds, from
# /proc/PID/stat), plus HAProxy's RSS. Prints numbers; asserts nothing.
#
#   sudo bench/serve/run.sh /tmp/standin.qcow2     (enters scripts/sandbox itself)
NAME=bench-serve
self=$(readlink -f "$0")
here=$(dirname "$self")
. "$here/../../tests/e2e/lib.sh"
if [[ ${1:-} != __inside ]]; then
	[[ $(id -u) == 0 ]] || fail "run as root (scripts/sandbox needs it)"
	[[ -f ${1:-} ]] || fail "usage: $0 STANDIN-IMAGE.qcow2"
	bin=${SHIFTLAB_BIN:-$bin}
	exec timeout -k 30 900 "$repo/scripts/sandbox" run -- "$self" __inside "$(readlink -f "$1")" "$bin"
fi
IMAGE=$2 bin=$3
IDLE=${BENCH_IDLE:-30}
e2e_workdir bench-serve
serve=""
on_exit 'stop_pid "$serve"'
names=()
for i in 1 2 3 4 5; do
	names+=("sv$i")
	on_exit "\"\$bin\" destroy cluster sv$i --purge-images >/dev/null 2>&1"
	f=$(cluster_file "sv$i" "192.168.21$i.0/24" "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")
	"$bin" create infra -f "$f" >/dev/null
done
# serve's work does not depend on the guests running (its HAProxy checks fail
# against stopped backends); stopped, they leave the CPUs to the measurement
for d in $(virsh list --name); do virsh -q destroy "$d" >/dev/null; done
SHIFTLAB_LOG=warn "$bin" serve --host-dns off >"$work/serve.log" 2>&1 &
serve=$!
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/serve.log"'
# the HAProxy processes of these clusters (their configuration lives under this
# run's state directory); other processes on the machine are not counted
haproxies() {
	local p
	for p in $(pgrep -x haproxy); do
		grep -qF "$work/" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
	done
	return 0
}
# master and worker of each cluster's HAProxy
wait_for 180 "5 clusters' HAProxy" bash -c "[[ \$(for p in \$(pgrep -x haproxy); do grep -qF '$work/' /proc/\$p/cmdline && echo \$p; done | wc -l) -ge 10 ]]"
on_exit '[ "$rc" -eq 0 ] || tail -n 20 "$work/serve.log"' 
sleep "${BENCH_SETTLE:-10}"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks "$serve") s0=$EPOCHREALTIME
sleep "$IDLE"
t1=$(ticks "$serve") s1=$EPOCHREALTIME
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$serve/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$serve/status")
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v x="$s0" -v y="$s1" 'BEGIN { printf "%.3f", 100 * (b - a) / hz / (y - x) }')
hap=0
procs=$(haproxies)
for p in $procs; do
	hap=$((hap + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status")))
done
echo "# shiftlab serve, 5 rehearsal clusters (UPI, bootstrap + 3 control planes each, stopped), idle ${IDLE}s, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| what | value |"
echo "|---|---|"
echo "| serve RSS (current / peak) | $((rss / 1024)) MB / $((hwm / 1024)) MB |"
echo "| serve CPU while idle | $cpu % of one core |"
echo "| HAProxy processes, RSS total | $((hap / 1024)) MB ($(wc -w <<<"$procs") processes) |"
