# The preamble the sandbox e2e suites share. Source it with NAME set:
#
#   NAME=infra
#   . "$(dirname "$0")/lib.sh"
#   e2e_sandbox "$@"          # inside scripts/sandbox, one stand-in image: IMAGE
#   e2e_workdir infra         # work=/tmp/shiftlab-e2e-infra.XXXXXX, SHIFTLAB_HOME in it
#
# A suite may define its own fail() after sourcing (to print a log first).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${SHIFTLAB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/shiftlab}

fail() {
	echo "FAIL $NAME: $*"
	exit 1
}
step() { echo "--- $NAME: $*"; }

# wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds (quietly), or fail.
wait_for() {
	local t=$1 what=$2
	shift 2
	for _ in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	fail "timed out waiting for $what"
}

# e2e_sandbox "$@": refuse to run outside the sandbox or without the image.
e2e_sandbox() {
	[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] ||
		fail "not inside the sandbox: run it with scripts/sandbox run -- $0 IMAGE"
	[[ $# == 1 && -f $1 ]] || fail "usage: $0 STANDIN-IMAGE.qcow2"
	IMAGE=$(readlink -f "$1")
	[[ -x $bin ]] || fail "no shiftlab binary at $bin (cargo build first)"
}

# e2e_workdir SUFFIX: a private work directory holding the suite's state.
e2e_workdir() {
	work=$(mktemp -d "/tmp/shiftlab-e2e-$1.XXXXXX")
	export SHIFTLAB_HOME=$work/state
}

# bmc_venv: the Python venv of the Redfish client suites (the real sushy client,
# DMTF's validator), made once at $BMC_VENV and repaired when a package is missing.
venv=${BMC_VENV:-${TMPDIR:-/tmp}/shiftlab-bmc-venv}
bmc_venv() {
	if [ ! -x "$venv/bin/rf_service_validator" ] ||
		! "$venv/bin/python" -c 'import ssl, sushy, requests' 2>/dev/null; then
		python3 -m venv "$venv"
		"$venv/bin/pip" install -q sushy==5.5.0 redfish-service-validator==3.1.8 requests
	fi
}
