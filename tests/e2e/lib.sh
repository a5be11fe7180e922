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

# stop_pid PID: stop a process this suite started (no-op when PID is empty).
stop_pid() {
	[[ -n ${1:-} ]] || return 0
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
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
