#!/usr/bin/env bash
# tests/e2e/install.sh IMAGE — the install driver end to end, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/install.sh /path/to/standin.qcow2
#
# `shiftlab create cluster` drives a fake openshift-install (the test double of
# testing.md: same verbs and files; its wait-for verbs check the stand-in nodes)
# from the cluster file to "install complete": every target recorded as done, the
# installer's Ignition wrapped per node, the bootstrap removed after
# bootstrap-complete, workers started after it. Then the same again, killed with
# -9 during `infra` and during the bootstrap-complete wait: the rerun completes
# with no duplicated libvirt objects.
set -euo pipefail

NAME=install
fail() {
	echo "FAIL $NAME: $*"
	exit 1
}
step() { echo "--- $NAME: $*"; }

[[ ${SHIFTLAB_SANDBOX:-} == 1 ]] ||
	fail "not inside the sandbox: run it with scripts/sandbox run -- $0 IMAGE"
[[ $# == 1 && -f $1 ]] || fail "usage: $0 STANDIN-IMAGE.qcow2"
IMAGE=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SHIFTLAB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/shiftlab}
fake=$repo/tests/fixtures/fake-openshift-install/openshift-install
[[ -x $bin ]] || fail "no shiftlab binary at $bin (cargo build first)"

work=$(mktemp -d /tmp/shiftlab-e2e-install.XXXXXX)
export SHIFTLAB_HOME=$work/state
cleanup() {
	for c in inst1 inst2; do "$bin" destroy cluster "$c" --purge-images >/dev/null 2>&1 || true; done
	pkill -f "$fake" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cluster_file() { # name cidr
	cat >"$work/$1.yaml" <<EOF
cluster: $1
domain: lab.test
distribution: okd
version: 4.17.0-okd-scos.0
method: upi
rehearsal: true
image: $IMAGE
openshift_install: $fake
ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eTestKeyOnly e2e@shiftlab']
ctlplanes: 3
workers: 1
network:
  cidr: $2
EOF
	echo "$work/$1.yaml"
}

target_status() { # cluster target
	jq -r --arg t "$2" '.targets[$t].status // "none"' "$SHIFTLAB_HOME/clusters/$1/install-state.json" 2>/dev/null || echo none
}

check_finished() { # cluster
	local c=$1 t
	for t in install-config manifests ignition infra bootstrap-complete bootstrap-removal workers csr-approval install-complete; do
		[[ $(target_status "$c" "$t") == done ]] || fail "$c: target $t is $(target_status "$c" "$t"), not done"
	done
	[[ -z $(virsh list --all --name | grep "^$c-bootstrap" || true) ]] || fail "$c: the bootstrap domain is still there"
	[[ -z $(virsh vol-list shiftlab | grep "$c-bootstrap" || true) ]] || fail "$c: the bootstrap volumes are still there"
	[[ $(virsh list --name | grep -c "^$c-ctlplane-") == 3 ]] || fail "$c: not 3 running control planes"
	[[ $(virsh list --name | grep -c "^$c-worker-") == 1 ]] || fail "$c: the worker does not run"
	[[ $(virsh list --all --name | grep -c "^$c-") == 4 ]] || fail "$c: unexpected domains: $(virsh list --all --name | grep "^$c-" | tr '\n' ' ')"
	[[ $(virsh net-list --all --name | grep -c "^shiftlab-$c\$") == 1 ]] || fail "$c: not exactly one network"
	[[ $(virsh vol-list shiftlab | grep -c "$c-") == 8 ]] || fail "$c: volumes: $(virsh vol-list shiftlab | grep "$c-" | awk '{print $1}' | tr '\n' ' ')"
}

step "create cluster from the cluster file to install complete"
f1=$(cluster_file inst1 192.168.180.0/24)
"$bin" create cluster -f "$f1" 2>&1 | tee "$work/run1.out"
grep -q 'console: *https://console-openshift-console.apps.inst1.lab.test' "$work/run1.out" || fail "no console URL printed"
grep -q 'export KUBECONFIG=.*/clusters/inst1/assets/auth/kubeconfig' "$work/run1.out" || fail "no KUBECONFIG printed"
check_finished inst1
# Workers start only after bootstrap-complete: their domain started after the
# bootstrap-complete target was recorded as done.
grep -n '^==> \|started domain inst1-worker' "$work/run1.out" | tee "$work/order"
[[ $(grep -n '^==> workers' "$work/run1.out" | cut -d: -f1) -gt $(grep -n '^==> bootstrap-complete' "$work/run1.out" | cut -d: -f1) ]] || fail "workers before bootstrap-complete"
# The node's Ignition merges the installer's config, unedited.
ign=$(virsh vol-path --pool shiftlab inst1-ctlplane-0.ign)
jq -r '.ignition.config.merge[0].source' "$ign" | sed 's/^data:[^,]*,//' | base64 -d |
	jq -e '.ignition.config.merge[0].source == "https://api-int.inst1.lab.test:22623/config/master"' >/dev/null ||
	fail "the control plane's Ignition does not merge master.ign"
[[ -f $SHIFTLAB_HOME/clusters/inst1/install-config.backup.yaml ]] || fail "no install-config backup"
[[ $(stat -c %a "$SHIFTLAB_HOME/clusters/inst1/install-config.backup.yaml") == 600 ]] || fail "the backup is not 0600"
grep -q 'Install complete' "$SHIFTLAB_HOME/clusters/inst1/openshift-install.log" || fail "the installer log is not kept"

step "running it again does nothing"
"$bin" create cluster -f "$f1" 2>&1 | tee "$work/run2.out"
if grep -q '^==> ' "$work/run2.out"; then fail "a finished install ran targets again"; fi
check_finished inst1
"$bin" destroy cluster inst1 >/dev/null

step "kill -9 during infra, then during the bootstrap-complete wait; reruns complete"
f2=$(cluster_file inst2 192.168.181.0/24)
kill_during() { # target
	"$bin" create cluster -f "$f2" >"$work/killed-$1.out" 2>&1 &
	local pid=$! deadline=$((SECONDS + 300))
	until [[ $(target_status inst2 "$1") == started ]]; do
		kill -0 "$pid" 2>/dev/null || fail "shiftlab ended before reaching $1: $(tail -5 "$work/killed-$1.out")"
		((SECONDS < deadline)) || fail "never reached $1"
		sleep 0.2
	done
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	echo "killed during $1"
}
kill_during infra
"$bin" create cluster -f "$f2" 2>&1 | tail -3
check_finished inst2
"$bin" destroy cluster inst2 >/dev/null
kill_during bootstrap-complete
[[ $(target_status inst2 infra) == done ]] || fail "infra was not done before bootstrap-complete"
"$bin" create cluster -f "$f2" 2>&1 | tee "$work/resume.out" | tail -3
check_finished inst2
if grep -q '^==> infra' "$work/resume.out"; then fail "the rerun repeated infra"; fi

echo "PASS $NAME"
