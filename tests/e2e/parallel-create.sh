#!/usr/bin/env bash
# Two clusters created at once on a fresh libvirtd: the shared objects (pool, base
# image, digest cache) are made under the host lock, so both succeed — before it,
# one failed with "pool 'shiftlab' already exists". Then both are destroyed and the
# sandbox is as before.
#
#   scripts/sandbox run -- tests/e2e/parallel-create.sh STANDIN-IMAGE.qcow2
set -euo pipefail

NAME=parallel-create
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir parallel
destroy_on_exit para parb

small_file() { # name cidr
	cluster_file "$1" "$2" "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 0" \
		"bootstrap: {memory: 128}" "ctlplane: {memory: 128}"
}

before=$(virsh pool-list --all --name | sort | tr '\n' ' ')
[[ $before != *shiftlab* ]] || fail "the sandbox already has a shiftlab pool"
fa=$(small_file para 192.168.171.0/24)
fb=$(small_file parb 192.168.172.0/24)

step "create infra for two clusters at once on a fresh host"
"$bin" create infra -f "$fa" >"$work/a.out" 2>&1 &
pa=$!
"$bin" create infra -f "$fb" >"$work/b.out" 2>&1 &
pb=$!
rca=0 rcb=0
wait "$pa" || rca=$?
wait "$pb" || rcb=$?
cat "$work/a.out" "$work/b.out"
[[ $rca == 0 ]] || fail "create infra of para failed ($rca)"
[[ $rcb == 0 ]] || fail "create infra of parb failed ($rcb)"
[[ $(virsh pool-list --all --name | awk '$1 == "shiftlab"' | wc -l) == 1 ]] || fail "not exactly one shiftlab pool"
[[ $(cat "$work/a.out" "$work/b.out" | grep -c '^created pool shiftlab') == 1 ]] ||
	fail "the pool was not created exactly once"
[[ $(virsh vol-list shiftlab | grep -c 'shiftlab-base-[0-9a-f]*\.qcow2 ') == 1 ]] || fail "not exactly one base image"

step "destroy both"
"$bin" destroy cluster para --purge-images
"$bin" destroy cluster parb --purge-images
[[ -z $(virsh list --all --name | grep '^par' || true) ]] || fail "domains left"
after=$(virsh pool-list --all --name | sort | tr '\n' ' ')
[[ $after == "$before" ]] || fail "pools before [$before], after [$after]"
echo "PASS $NAME"
