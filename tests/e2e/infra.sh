#!/usr/bin/env bash
# tests/e2e/infra.sh IMAGE — the libvirt engine end to end, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/infra.sh /path/to/standin.qcow2
#
# A UPI cluster of stand-in nodes (1 bootstrap, 3 control planes, 2 workers,
# 256 MiB each) built by `shiftlab create infra`: every node must report the
# plan's hostname and address, resolve api/api-int/*.apps/PTR to the plan's
# addresses, and have received exactly its own Ignition. Then: re-running
# changes nothing; an added worker is added alone; a memory change of a running
# node is reported, not applied; a second cluster in another subnet, with a VNC
# screen on 127.0.0.1, runs beside the first; destroy leaves libvirt's object lists and the pool directory
# exactly as before; a second destroy is a no-op.
set -euo pipefail

NAME=infra
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
TIMEOUT=${INFRA_BOOT_TIMEOUT:-300}
e2e_workdir infra
# Whatever happened, leave the sandbox as we found it.
destroy_on_exit e2ea e2eb e2es

infra_file() { # name cidr workers ctlplane-memory [yaml-line]...
	cluster_file "$1" "$2" "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: $3" \
		"bootstrap: {memory: 256}" "ctlplane: {memory: $4}" "worker: {memory: 256}" "${@:5}"
}

snapshot() {
	{
		echo "# domains"
		virsh list --all --name | sort
		echo "# networks"
		virsh net-list --all --name | sort
		echo "# pools"
		virsh pool-list --all --name | sort
		for p in $(virsh pool-list --all --name); do
			echo "# volumes of $p"
			virsh vol-list "$p" 2>/dev/null | sort
		done
		echo "# files"
		find /var/lib/libvirt/images -printf '%p %s\n' 2>/dev/null | sort
	} >"$1"
}

# Wait until every node of a plan has printed its report; check each one.
check_reports() { # plan.json
	local plan=$1 deadline=$((SECONDS + TIMEOUT))
	local cd api ingress n
	cd=$(jq -r .cluster_domain "$plan")
	api=$(jq -r .vips.api "$plan")
	ingress=$(jq -r .vips.ingress "$plan")
	n=$(jq '.nodes | length' "$plan")
	local shas=()
	for ((i = 0; i < n; i++)); do
		local name ip log report
		name=$(jq -r ".nodes[$i].name" "$plan")
		ip=$(jq -r ".nodes[$i].ip" "$plan")
		log=/var/log/libvirt/qemu/$name-console.log
		report=""
		while [[ -z $report ]]; do
			# A complete report has resolved everything; keep waiting otherwise.
			report=$(grep -a 'SHIFTLAB-STANDIN-REPORT ' "$log" 2>/dev/null |
				sed 's/.*SHIFTLAB-STANDIN-REPORT //' |
				jq -c 'select(.ip != "" and .api != "" and .apps != "" and .ptr != "")' 2>/dev/null |
				tail -n 1 || true)
			[[ -n $report ]] && break
			((SECONDS < deadline)) || fail "$name printed no complete report within ${TIMEOUT}s; console: $(tail -c 600 "$log" 2>/dev/null)"
			sleep 2
		done
		# What QEMU hands the guest is the Ignition volume's file; it must be this
		# node's config (its hostname inside) and nothing else.
		local ign want_sha
		ign=$(virsh vol-path --pool shiftlab "$name.ign")
		want_sha=$(sha256sum <"$ign" | cut -d' ' -f1)
		jq -e --arg h "$name" '.storage.files[] | select(.path == "/etc/hostname") | .contents.source | endswith($h | @base64)' \
			"$ign" >/dev/null || fail "$ign is not $name's Ignition"
		local got
		for field in hostname ip api api_int apps ptr ignition_sha256; do
			got=$(jq -r ".$field" <<<"$report")
			case $field in
			hostname) want=$name ;;
			ip) want=$ip ;;
			api | api_int) want=$api ;;
			apps) want=$ingress ;;
			ptr) want=$name.$cd ;;
			ignition_sha256) want=$want_sha ;;
			esac
			[[ $got == "$want" ]] || fail "$name reported $field=$got, the plan says $want (report: $report)"
		done
		shas+=("$want_sha")
		echo "ok $name: $report" | cut -c1-160
	done
	local distinct
	distinct=$(printf '%s\n' "${shas[@]}" | sort -u | wc -l)
	[[ $distinct == "$n" ]] || fail "the $n nodes did not receive $n different Ignition configs"
}

step "build nothing yet: snapshot the sandbox"
snapshot "$work/before"

step "create infra for e2ea (1 bootstrap, 3 control planes, 2 workers)"
fa=$(infra_file e2ea 192.168.160.0/24 2 256)
"$bin" create infra -f "$fa" --start-workers | tee "$work/create1.out"
grep -q '^started domain e2ea-worker-1' "$work/create1.out" || fail "workers were not started"
"$bin" plan -f "$fa" -o json >"$work/e2ea.plan.json"
[[ $(virsh list --name | grep -c '^e2ea-') == 6 ]] || fail "not 6 running domains"
for d in $(virsh list --all --name | grep '^e2ea-'); do
	# (grep reads all of virsh's output: an early exit would SIGPIPE virsh under pipefail)
	[[ $(virsh dumpxml "$d") == *'https://shiftlab.dev/xmlns/libvirt/1'* ]] || fail "$d has no ownership metadata"
done
[[ $(virsh net-dumpxml shiftlab-e2ea) == *'https://shiftlab.dev/xmlns/libvirt/1'* ]] || fail "the network has no ownership metadata"

step "every node reports the plan's identity, DNS and its own Ignition"
check_reports "$work/e2ea.plan.json"

step "create infra again changes nothing"
"$bin" create infra -f "$fa" --start-workers | tee "$work/create2.out"
grep -q '^nothing to do: e2ea matches its plan' "$work/create2.out" || fail "a second create infra was not a no-op"
if grep -q '^created\|^started' "$work/create2.out"; then fail "a second create infra created something"; fi

step "status and list"
"$bin" status e2ea | tee "$work/status.out"
[[ $(grep -c ' running ' "$work/status.out") == 6 ]] || fail "status does not show 6 running nodes"
"$bin" status e2ea -o json | jq -e '.nodes | length == 6' >/dev/null || fail "status -o json"
"$bin" list -o json | jq -e '.[] | select(.cluster == "e2ea") | .nodes == 6' >/dev/null || fail "list -o json"
# create infra went through the lab flow: release and infra recorded, shown by status.
"$bin" status e2ea -o json | jq -e '.install.flow == "lab" and ([.install.targets[] | select(.status == "done") | .target] == ["release", "infra"])' >/dev/null ||
	fail "status does not show release and infra done: $("$bin" status e2ea -o json | jq -c .install)"
grep -q '^install targets (lab' "$work/status.out" || fail "status shows no install targets"

step "a third worker is added alone"
fa3=$(infra_file e2ea 192.168.160.0/24 3 256)
"$bin" create infra -f "$fa3" --start-workers | tee "$work/create3.out"
grep -q '^created domain e2ea-worker-2$' "$work/create3.out" || fail "worker-2 was not created"
if grep '^created domain' "$work/create3.out" | grep -v 'e2ea-worker-2' >/dev/null; then fail "other domains were touched"; fi
"$bin" plan -f "$fa3" -o json >"$work/e2ea3.plan.json"
check_reports "$work/e2ea3.plan.json"

step "a memory change of running nodes is reported, not applied"
fm=$(infra_file e2ea 192.168.160.0/24 3 512)
if "$bin" create infra -f "$fm" >"$work/drift.out" 2>&1; then fail "drift was not reported as an error"; fi
cat "$work/drift.out"
grep -q 'e2ea-ctlplane-0: memory is 256 MiB, the plan says 512 MiB' "$work/drift.out" || fail "the drift message does not name the difference"
[[ $(virsh dominfo e2ea-ctlplane-0 | awk '/Max memory/ {print $3}') == 262144 ]] || fail "memory was changed"

step "a host that is not ready: nothing is created"
virsh net-define <(printf "<network><name>squatter</name><bridge name='sl-squat'/><ip address='192.168.170.1' netmask='255.255.255.0'/></network>") >/dev/null
fs=$(infra_file e2es 192.168.170.0/24 0 256)
if "$bin" create infra -f "$fs" >"$work/preflight.out" 2>&1; then fail "an overlapping subnet was accepted"; fi
cat "$work/preflight.out"
grep -q 'overlaps 192.168.170.0/24 of libvirt network squatter' "$work/preflight.out" || fail "the overlap is not named"
if [[ $(virsh list --all --name) == *e2es-* ]]; then fail "a domain was created despite the failed check"; fi
virsh net-undefine squatter >/dev/null

step "a second cluster in another subnet runs beside the first, with a VNC screen on loopback"
fb=$(infra_file e2eb 192.168.161.0/24 0 256 "libvirt: {graphics: vnc}")
"$bin" create infra -f "$fb" | tee "$work/createb.out"
"$bin" plan -f "$fb" -o json >"$work/e2eb.plan.json"
check_reports "$work/e2eb.plan.json"
display=$(virsh domdisplay e2eb-ctlplane-0)
[[ $display =~ ^vnc://127\.0\.0\.1:[0-9]+ ]] || fail "e2eb-ctlplane-0's screen is at '$display', not VNC on 127.0.0.1"
[[ $(virsh domdisplay e2ea-ctlplane-0 2>&1 || true) != vnc://* ]] || fail "a rehearsal node got a screen it did not ask for"
"$bin" list | tee "$work/list.out"
grep -q '^e2ea ' "$work/list.out" && grep -q '^e2eb ' "$work/list.out" || fail "list does not show both clusters"

step "destroy both: the sandbox is as before"
"$bin" destroy cluster e2eb --purge-images | tee "$work/destroyb.out"
grep -q 'removed network shiftlab-e2eb' "$work/destroyb.out" || fail "e2eb's network was not removed"
[[ $(virsh list --name | grep -c '^e2ea-') == 7 ]] || fail "destroying e2eb touched e2ea"
"$bin" destroy cluster -f "$fa3" | tee "$work/destroya.out"
if grep -q '^removed volume shiftlab-base-' "$work/destroya.out"; then fail "the base image went without --purge-images"; fi
[[ -z $(virsh list --all --name | grep '^e2ea-' || true) ]] || fail "domains left after destroy"
logs=(/var/log/libvirt/qemu/e2ea-*-console.log)
[[ ! -e ${logs[0]} ]] || fail "console logs left after destroy: ${logs[*]}"
"$bin" destroy cluster e2ea --purge-images | tee "$work/destroya2.out"
snapshot "$work/after"
diff -u "$work/before" "$work/after" || fail "destroy left something behind (diff above)"
"$bin" destroy cluster e2ea | tee "$work/destroya3.out"
grep -q '^nothing to remove' "$work/destroya3.out" || fail "a second destroy was not a no-op"

echo "PASS $NAME"
