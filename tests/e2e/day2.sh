#!/usr/bin/env bash
# tests/e2e/day2.sh IMAGE — day-2 commands on a rehearsal cluster, in the sandbox.
#
#   scripts/sandbox run -- tests/e2e/day2.sh /path/to/standin.qcow2
#
# doctor's real run on the sandbox host (a verdict per check, the exit code by
# severity); a UPI rehearsal (bootstrap, 3 control planes, 2 workers, 256 MiB
# each) built by create infra; env and ssh; the serial console over libvirt's
# stream, attached while stop shuts the nodes down (workers first, ACPI, the
# stand-in's power-button message seen on the console); start (control planes
# first, no API in a lab: said so); stop and start again with a stand-in API whose
# kubelets ask for new certificates on boot (tests/e2e/kube-standin.py), approved
# by start; the lab's users through that API (shiftlab users: add, a rerun
# that changes nothing, a 409 on the Secret read again, list, logins checked by
# the stand-in's OAuth server, remove, kubeadmin's removal refused until a
# cluster-admin has logged in, the last admin kept); gather with no secret of
# the state in it; a bundle of the lab (a
# create killed -9 mid-way leaves no bundle and its rerun converges; verify, list,
# a damaged copy found), the lab destroyed, a restore killed -9 mid-import
# (what it made removed by destroy; killed again, then resumed with --start
# through the stand-in API: expired kubelets' CSRs approved, nodes Ready),
# and restored twice from it: every
# node boots its bundled disk (the stand-in's disk marker, written at its first
# boot, and its boot count), with its identity, and the second restore does not
# see the first one's writes.
set -euo pipefail

NAME=day2
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
TIMEOUT=${DAY2_BOOT_TIMEOUT:-300}
e2e_workdir day2
destroy_on_exit e2ed

f=$(cluster_file e2ed 192.168.171.0/24 "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 2" \
	"bootstrap: {memory: 256}" "ctlplane: {memory: 256}" "worker: {memory: 256}")

step "doctor on the sandbox host"
rc=0
"$bin" doctor -f "$f" -o json >"$work/doctor.json" || rc=$?
[[ $rc == 0 || $rc == 3 || $rc == 4 ]] || fail "doctor exited $rc"
jq -e --argjson rc "$rc" '
	([.checks[].id] | index("kvm") != null and index("libvirt") != null and index("memory") != null)
	and ((.worst == "fail") == ($rc == 4)) and ((.worst == "warn") == ($rc == 3))' \
	"$work/doctor.json" >/dev/null || fail "doctor's report: $(jq -c '[.worst, [.checks[] | .id + "=" + .severity]]' "$work/doctor.json")"
jq -e '.checks[] | select(.id == "libvirt") | .severity == "ok"' "$work/doctor.json" >/dev/null ||
	fail "doctor does not see the sandbox's libvirt: $(jq -c '.checks[] | select(.id == "libvirt")' "$work/doctor.json")"
"$bin" doctor -f "$f" || true

step "create infra for e2ed"
"$bin" create infra -f "$f" --start-workers | tee "$work/create.out"
"$bin" plan -f "$f" -o json >"$work/plan.json"
mapfile -t NODES < <(jq -r '.nodes[].name' "$work/plan.json")
wait_report() { # node
	local log=/var/log/libvirt/qemu/$1-console.log deadline=$((SECONDS + TIMEOUT))
	until grep -aq 'SHIFTLAB-STANDIN-REPORT ' "$log" 2>/dev/null; do
		((SECONDS < deadline)) || fail "$1 printed no report within ${TIMEOUT}s: $(tail -c 400 "$log" 2>/dev/null)"
		sleep 2
	done
}
for n in "${NODES[@]}"; do wait_report "$n"; done

step "env and ssh"
if "$bin" env e2ed >"$work/env.out" 2>&1; then fail "env printed a kubeconfig a lab does not have"; fi
grep -q 'has no kubeconfig yet' "$work/env.out" || fail "env: $(cat "$work/env.out")"
w0_ip=$(jq -r '.nodes[] | select(.name == "e2ed-worker-0") | .ip' "$work/plan.json")
"$bin" ssh e2ed worker-0 --print -- uptime | tee "$work/ssh.out"
grep -q -- "-l core -- $w0_ip uptime\$" "$work/ssh.out" || fail "ssh: $(cat "$work/ssh.out")"

step "console attached while stop shuts the nodes down, workers first"
"$bin" console e2ed worker-0 >"$work/console.out" 2>&1 < <(sleep 300) &
console_pid=$!
on_exit 'stop_pid "$console_pid"'
wait_for 30 "the console to attach" grep -q "connected to e2ed-worker-0's console" "$work/console.out"
"$bin" stop e2ed --timeout 90 -o json | tee "$work/stop.json"
jq -e '.action == "stop" and ([.nodes[0:2][].node] | sort) == ["e2ed-worker-0", "e2ed-worker-1"]' "$work/stop.json" >/dev/null ||
	fail "stop did not begin with the workers: $(jq -c '[.nodes[] | [.node, .action]]' "$work/stop.json")"
jq -e '[.nodes[] | select(.node != "e2ed-bootstrap" or .action != "absent") | .action] | all(. == "acpi-shutdown" or . == "forced-off")' \
	"$work/stop.json" >/dev/null || fail "stop: $(jq -c '[.nodes[] | [.node, .action]]' "$work/stop.json")"
for n in "${NODES[@]}"; do
	[[ $(virsh domstate "$n") == "shut off" ]] || fail "$n is $(virsh domstate "$n") after stop"
done
wait_for 30 "the console to end with the domain" bash -c "! kill -0 $console_pid 2>/dev/null"
grep -aq "ACPI power button, powering off" "$work/console.out" ||
	fail "the console did not show the ACPI shutdown: $(tail -c 600 "$work/console.out")"
grep -q "console closed" "$work/console.out" || fail "the console did not say it closed"
[[ -f $SHIFTLAB_HOME/clusters/e2ed/power.json ]] || fail "stop recorded nothing"
"$bin" stop e2ed -o json | jq -e '[.nodes[].action] | all(. == "already-off" or . == "absent")' >/dev/null ||
	fail "a second stop was not a no-op"

step "start: control planes first"
"$bin" start e2ed -o json | tee "$work/start.json"
jq -e '[.nodes[] | select(.action == "started") | .node] | ((.[-2:] | sort) == ["e2ed-worker-0", "e2ed-worker-1"]) and (length == 6)' \
	"$work/start.json" >/dev/null || fail "start order: $(jq -c '[.nodes[] | [.node, .action]]' "$work/start.json")"
jq -e '.note | contains("no kubeconfig")' "$work/start.json" >/dev/null || fail "start did not say why the API was not looked at"
for n in "${NODES[@]}"; do
	[[ $(virsh domstate "$n") == "running" ]] || fail "$n is $(virsh domstate "$n") after start"
done
"$bin" start e2ed -o json | jq -e '[.nodes[].action] | all(. == "already-running")' >/dev/null ||
	fail "a second start was not a no-op"

step "stop and start again, the kubelets asking through a stand-in API"
# tests/e2e/kube-standin.py: every member has a Ready Node; a node's next boot
# (its console's next report line) is a kubelet whose client certificate expired
# while it was off: its Node turns NotReady and it asks again through the node
# bootstrapper. Start must approve those client CSRs and the serving CSRs that
# follow, and wait until the Nodes are Ready again.
for n in "${NODES[@]}"; do
	wait_for "$TIMEOUT" "$n's second boot to finish" \
		bash -c "(( \$(grep -ac 'SHIFTLAB-STANDIN-REPORT ' /var/log/libvirt/qemu/$n-console.log) >= 2 ))"
done
/usr/bin/python3 "$repo/tests/e2e/kube-standin.py" "$work/plan.json" /var/log/libvirt/qemu \
	"$work/api.port" "$work/api.events" >"$work/api.log" 2>&1 &
api=$!
on_exit 'stop_pid "$api"'
wait_for 20 "the stand-in API" test -s "$work/api.port"
printf '%s\n' "apiVersion: v1" "kind: Config" "clusters:" "- name: e2ed" "  cluster:" \
	"    server: http://127.0.0.1:$(cat "$work/api.port")" "contexts:" "- name: admin" \
	"  context: {cluster: e2ed, user: admin}" "current-context: admin" "users:" "- name: admin" \
	"  user: {token: e2e-token}" >"$work/kubeconfig"
"$bin" stop e2ed --timeout 90 -o json >"$work/stop2.json"
jq -e '[.nodes[].action] | all(. == "acpi-shutdown" or . == "forced-off" or . == "absent")' "$work/stop2.json" >/dev/null ||
	fail "second stop: $(jq -c '[.nodes[] | [.node, .action]]' "$work/stop2.json")"
[[ ! -s $work/api.events ]] || fail "the stand-in saw events before the start: $(cat "$work/api.events")"
"$bin" start e2ed --kubeconfig "$work/kubeconfig" --interval 2 --timeout $((TIMEOUT * 2)) -o json >"$work/start2.json" ||
	fail "start with the API: $(cat "$work/start2.json"; tail -20 "$work/api.log")"
members=$(jq -c '[.nodes[] | select(.role != "bootstrap") | .name] | sort' "$work/plan.json")
jq -e --argjson m "$members" '(.api.ready | sort) == $m and .api.not_ready == [] and (.api.approved | length) == 2 * ($m | length)' \
	"$work/start2.json" >/dev/null || fail "start's API side: $(jq -c .api "$work/start2.json")"
# Per member, in order: its boot, its client CSR, approved; then its serving CSR, approved.
for n in $(jq -r '.[]' <<<"$members"); do
	got=$(jq -r --arg n "$n" 'select(.node == $n) | .event + ":" + (.kind // "")' "$work/api.events" | paste -sd' ')
	[[ $got == "boot: csr:client approved:client csr:serving approved:serving" ]] ||
		fail "$n's kubelet: '$got' ($(cat "$work/api.events"))"
done
jq -e '.api.approved | length > 0' "$SHIFTLAB_HOME/clusters/e2ed/power.json" >/dev/null || fail "power.json has no approvals"

step "users through the stand-in API: add, list, a conflict, remove, kubeadmin"
# The stand-in's cluster was installed without users: (OAuth spec {},
# kube-system/kubeadmin, no User); its OAuth server checks a login against the
# htpasswd Secret with crypt(3)'s bcrypt and makes the User and Identity.
api_url=http://127.0.0.1:$(cat "$work/api.port")
users() { "$bin" users e2ed "$@" --kubeconfig "$work/kubeconfig"; }
login() { # USER PASSWORD: the HTTP code of oc login's challenge flow
	curl -s -o /dev/null -w '%{http_code}' -u "$1:$2" -H 'X-CSRF-Token: 1' \
		"$api_url/oauth/authorize?client_id=openshift-challenging-client&response_type=token"
}
if users remove kubeadmin >"$work/users-k1.out" 2>&1; then fail "kubeadmin removed with no other cluster-admin"; fi
grep -q 'refusing to remove kubeadmin: no user is a cluster-admin' "$work/users-k1.out" || fail "kubeadmin: $(cat "$work/users-k1.out")"
users add alice --admin -o json >"$work/users-alice.json"
jq -e '(.done | length) == 3 and (.done[1] | contains("identity provider shiftlab-htpasswd"))' "$work/users-alice.json" >/dev/null ||
	fail "add alice: $(cat "$work/users-alice.json")"
alice_pw_file=$SHIFTLAB_HOME/clusters/e2ed/assets/auth/alice-password
[[ $(stat -c %a "$alice_pw_file") == 600 ]] || fail "alice's generated password is $(stat -c %a "$alice_pw_file")"
alice_pw=$(cat "$alice_pw_file")
users add alice --admin -o json | jq -e '.done == []' >/dev/null || fail "a rerun of add alice changed something"
if users remove kubeadmin >"$work/users-k2.out" 2>&1; then fail "kubeadmin removed before alice logged in"; fi
grep -q 'log in once as alice' "$work/users-k2.out" || fail "kubeadmin: $(cat "$work/users-k2.out")"
[[ $(login alice wrong-password) == 401 ]] || fail "alice logged in with a wrong password"
[[ $(login alice "$alice_pw") == 302 ]] || fail "alice cannot log in with her generated password"
# bob while another admin writes the Secret between shiftlab's read and write:
# the PUT gets 409, shiftlab reads again, the other writer's line stays.
printf 'bob-%s\n' "$RANDOM$RANDOM" >"$work/bob.pw"
curl -fs -X POST "$api_url/standin/concurrent-writer?namespace=openshift-config&name=shiftlab-htpasswd&user=carol" >/dev/null
users add bob --password-file "$work/bob.pw" | tee "$work/users-bob.out"
grep -q '"event": "conflict", "object": "secrets/shiftlab-htpasswd"' "$work/api.events" || fail "no 409 on the Secret: $(tail -5 "$work/api.events")"
[[ $(login bob "$(head -1 "$work/bob.pw")") == 302 ]] || fail "bob cannot log in with his password"
users list -o json >"$work/users-list.json"
users list | tee "$work/users-list.out"
jq -e '[.users[] | [.name, .admin, .logged_in]] == [["alice", true, true], ["carol", false, false], ["bob", false, true]] and .kubeadmin' \
	"$work/users-list.json" >/dev/null || fail "list: $(cat "$work/users-list.json")"
for f in "$work"/users-*; do
	if grep -qF -e "$alice_pw" -e "$(head -1 "$work/bob.pw")" -e '$2y$' "$f"; then fail "$f shows a password or a hash"; fi
done
users remove kubeadmin | tee "$work/users-k3.out"
grep -q 'Secret kube-system/kubeadmin: deleted' "$work/users-k3.out" || fail "kubeadmin: $(cat "$work/users-k3.out")"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$api_url/api/v1/namespaces/kube-system/secrets/kubeadmin") == 404 ]] || fail "kubeadmin's Secret is still there"
if users remove alice >"$work/users-last.out" 2>&1; then fail "the last cluster-admin was removed with kubeadmin gone"; fi
grep -q 'alice is the last cluster-admin' "$work/users-last.out" || fail "remove alice: $(cat "$work/users-last.out")"
users remove bob -o json >"$work/users-rm-bob.json"
jq -e '.done == ["Secret openshift-config/shiftlab-htpasswd: bob removed", "Identity shiftlab-htpasswd:bob: deleted", "User bob: deleted"]' \
	"$work/users-rm-bob.json" >/dev/null || fail "remove bob: $(cat "$work/users-rm-bob.json")"
[[ $(login bob "$(head -1 "$work/bob.pw")") == 401 ]] || fail "bob still logs in"
users remove bob -o json | jq -e '.done == []' >/dev/null || fail "a second remove bob changed something"

step "gather"
token=$(cat "$SHIFTLAB_HOME/clusters/e2ed/http-token" 2>/dev/null || true)
"$bin" gather e2ed --out "$work/g.tar.gz" | tee "$work/gather.out"
mkdir "$work/g" && tar -xzf "$work/g.tar.gz" -C "$work/g"
for n in "${NODES[@]}"; do
	[[ -s $work/g/gather-e2ed/libvirt/domain-$n.xml ]] || fail "gather has no domain XML of $n"
	[[ -s $work/g/gather-e2ed/nodes/$n.console.log ]] || fail "gather has no console log of $n"
done
[[ -s $work/g/gather-e2ed/libvirt/network-shiftlab-e2ed.xml ]] || fail "gather has no network XML: $(ls "$work/g/gather-e2ed/libvirt")"
[[ -s $work/g/gather-e2ed/state/plan.json ]] || fail "gather has no plan"
if [[ -n $token ]] && grep -rqF "$token" "$work/g"; then fail "the HTTP token is in the tarball"; fi
if grep -rqF "$alice_pw" "$work/g"; then fail "a user's password is in the tarball"; fi
step "bundle create: killed -9 mid-way, then again"
stop_pid "$api"
last_report() { # node min-boots: its console's last report of a boot counted at least min-boots
	grep -a 'SHIFTLAB-STANDIN-REPORT ' "/var/log/libvirt/qemu/$1-console.log" 2>/dev/null |
		sed 's/.*SHIFTLAB-STANDIN-REPORT //' |
		jq -c --argjson b "$2" 'select(.marker != "" and .ptr != "" and (.boots | tonumber) >= $b)' 2>/dev/null |
		tail -n 1 || true
}
has_report() { [[ -n $(last_report "$1" "$2") ]]; }
declare -A MARK BOOTS
for n in "${NODES[@]}"; do
	r=$(last_report "$n" 1)
	MARK[$n]=$(jq -r .marker <<<"$r")
	BOOTS[$n]=$(jq -r .boots <<<"$r")
	[[ ${MARK[$n]} == "$n-"* && ${BOOTS[$n]} -ge 2 ]] || fail "$n reports no disk marker of its own: $r"
done
b=$SHIFTLAB_HOME/bundles/e2ed
# A qemu-img that waits: the kill lands while the first disk is being flattened.
mkdir "$work/slow"
printf '#!/bin/sh\necho $$ >"%s/convert.pid"\nsleep 60\nexec /usr/bin/qemu-img "$@"\n' "$work" >"$work/slow/qemu-img"
chmod +x "$work/slow/qemu-img"
PATH=$work/slow:$PATH "$bin" bundle create e2ed --timeout 90 >"$work/killed.out" 2>&1 &
creator=$!
on_exit 'stop_pid "$creator"'
for _ in $(seq 900); do
	[[ -s $work/convert.pid ]] && break
	kill -0 "$creator" 2>/dev/null || fail "bundle create ended before it flattened a disk: $(cat "$work/killed.out")"
	sleep 0.2
done
[[ -s $work/convert.pid ]] || fail "bundle create flattened no disk within 180s: $(cat "$work/killed.out")"
kill -9 "$creator" "$(cat "$work/convert.pid")"
wait "$creator" 2>/dev/null || true
[[ -d $b && ! -e $b/bundle.json ]] || fail "a killed create left $(ls -A "$b" 2>&1)"
if "$bin" bundle verify e2ed >"$work/verify-killed.out" 2>&1; then fail "a killed create's directory verified as a bundle"; fi
contains 'is no bundle' "$work/verify-killed.out" || fail "verify: $(cat "$work/verify-killed.out")"
"$bin" bundle create e2ed --timeout 90 -o json >"$work/bundle.json" || fail "bundle create again: $(cat "$work/bundle.json")"
for n in "${NODES[@]}"; do
	[[ $(virsh domstate "$n") == "shut off" ]] || fail "$n is $(virsh domstate "$n") after bundle create"
	qemu-img info --output=json "$b/disks/$n.qcow2" >"$work/info.json"
	jq -e '.format == "qcow2" and ."backing-filename" == null' "$work/info.json" >/dev/null ||
		fail "$n's bundled disk is not a self-contained qcow2: $(cat "$work/info.json")"
done
jq -e --slurpfile p "$work/plan.json" \
	'([.manifest.nodes[] | [.name, .mac, .ip, .role]] | sort) == ([$p[0].nodes[] | [.name, .mac, .ip, .role]] | sort)' \
	"$work/bundle.json" >/dev/null || fail "the bundle's identities are not the plan's: $(jq -c .manifest.nodes "$work/bundle.json")"
for f in state/plan.json ignition/e2ed-worker-0.ign disks/e2ed-worker-0.qcow2; do
	[[ $(stat -c %a "$b/$f") == 600 ]] || fail "$f of the bundle is not 0600: $(stat -c %a "$b/$f")"
done
jq -e '.action == "stop"' "$b/state/power.json" >/dev/null || fail "the bundle has not the stop's record"
"$bin" bundle verify e2ed
"$bin" bundle list -o json | jq -e '[.[] | [.name, .nodes, (.problem // "")]] == [["e2ed", 6, ""]]' >/dev/null ||
	fail "bundle list: $("$bin" bundle list 2>&1)"
cp -a "$b" "$work/damaged"
printf x >>"$work/damaged/disks/e2ed-worker-0.qcow2"
if "$bin" bundle verify "$work/damaged" >"$work/damaged.out" 2>&1; then fail "a damaged bundle verified"; fi
contains 'disks/e2ed-worker-0.qcow2: sha256' "$work/damaged.out" || fail "verify: $(cat "$work/damaged.out")"

restored() { # boots: every node reports its bundled marker, identity and this boot count
	local n r
	for n in "${NODES[@]}"; do
		wait_for "$TIMEOUT" "$n to boot its bundled disk" has_report "$n" $((BOOTS[$n] + 1))
		r=$(last_report "$n" $((BOOTS[$n] + 1)))
		jq -e --arg m "${MARK[$n]}" --arg b "$((BOOTS[$n] + 1))" --slurpfile p "$work/plan.json" --arg n "$n" '
			($p[0].nodes[] | select(.name == $n)) as $want
			| .marker == $m and .boots == $b and .hostname == $n and .mac == $want.mac and .ip == $want.ip
			and .api != "" and .ptr != ""' <<<"$r" >/dev/null ||
			fail "$n after restore $1: $r (bundled: ${MARK[$n]}, boot ${BOOTS[$n]})"
	done
}

step "bundle restore killed -9 mid-import: destroy removes what it made; again killed, then resumed"
"$bin" destroy cluster e2ed
# A copy of the bundle whose last disk (the last worker's) is a FIFO: the
# restore blocks opening it, the disks before it imported; a writer holding the
# FIFO open says when the restore got there.
cp -a "$b" "$work/fifo"
wdisk=$work/fifo/disks/e2ed-worker-1.qcow2
rm "$wdisk" && mkfifo "$wdisk"
killed_restore() { # the restore of the FIFO copy, killed -9 where it reads the worker's disk
	rm -f "$work/fifo.held"
	"$bin" bundle restore "$work/fifo" >"$work/rkilled.out" 2>&1 &
	local restorer=$! holder
	timeout 180 bash -c 'exec 3>"$1"; : >"$2"; sleep 180' _ "$wdisk" "$work/fifo.held" &
	holder=$!
	for _ in $(seq 900); do
		[[ -e $work/fifo.held ]] && break
		kill -0 "$restorer" 2>/dev/null || fail "bundle restore ended before the worker's disk: $(cat "$work/rkilled.out")"
		sleep 0.2
	done
	[[ -e $work/fifo.held ]] || fail "bundle restore did not reach the worker's disk within 180s: $(cat "$work/rkilled.out")"
	kill -9 "$restorer"
	wait "$restorer" 2>/dev/null || true
	kill "$holder" 2>/dev/null || true
	wait "$holder" 2>/dev/null || true
	jq -e '.complete == false' "$SHIFTLAB_HOME/clusters/e2ed/restored-from.json" >/dev/null ||
		fail "a killed restore is recorded as complete"
}
killed_restore
"$bin" status e2ed >"$work/status-killed.out" 2>&1 || true
contains 'the restore did not finish: run it again' "$work/status-killed.out" || fail "status: $(cat "$work/status-killed.out")"
"$bin" destroy cluster e2ed
[[ ! -e $SHIFTLAB_HOME/clusters/e2ed ]] || fail "destroy left $(ls -A "$SHIFTLAB_HOME/clusters/e2ed")"
for n in "${NODES[@]}"; do
	if virsh dominfo "$n" >/dev/null 2>&1; then fail "$n is defined after a killed restore's destroy"; fi
done
if virsh net-info shiftlab-e2ed >/dev/null 2>&1; then fail "the network is there after a killed restore's destroy"; fi
pool=$(jq -r .libvirt.pool "$work/plan.json")
# Left: the disks imported whole, each with its digest's marker (base images,
# shared by the next restore, removed by destroy --purge-images); no overlay.
virsh vol-list "$pool" | awk 'NR > 2 && NF { print $1 }' >"$work/vols.txt"
for v in $(grep -x 'shiftlab-base-[0-9a-f]*\.qcow2' "$work/vols.txt"); do
	grep -qxF "$v.sha256" "$work/vols.txt" || fail "$v has no completion marker: $(cat "$work/vols.txt")"
done
for n in "${NODES[@]}"; do
	vol=$(jq -r --arg n "$n" '.nodes[] | select(.name == $n) | .disks[0].volume' "$work/plan.json")
	if grep -qx "$vol" "$work/vols.txt"; then fail "$vol is left after a killed restore's destroy"; fi
done
killed_restore

step "bundle restore --start resumes it: the kubelets ask through the stand-in API"
# The stand-in API again: each node's next boot is a kubelet whose client
# certificate expired while the lab was bundled (node-bootstrapper's client
# CSR, then its serving CSR); restore --start approves both, the Nodes Ready.
/usr/bin/python3 "$repo/tests/e2e/kube-standin.py" "$work/plan.json" /var/log/libvirt/qemu \
	"$work/api3.port" "$work/api3.events" >"$work/api3.log" 2>&1 &
api=$!
on_exit 'stop_pid "$api"'
wait_for 20 "the stand-in API" test -s "$work/api3.port"
sed "s|http://127.0.0.1:[0-9]*|http://127.0.0.1:$(cat "$work/api3.port")|" "$work/kubeconfig" >"$work/kubeconfig3"
"$bin" bundle restore "$b" --start --kubeconfig "$work/kubeconfig3" --timeout $((TIMEOUT * 2)) -o json >"$work/restore1.json" ||
	fail "restore: $(cat "$work/restore1.json"; tail -20 "$work/api3.log")"
jq -e '(.imported | length) == 1 and (.shared | length) == 5 and ([.start.nodes[] | select(.action == "started") | .node] | (.[-2:] | sort) == ["e2ed-worker-0", "e2ed-worker-1"])' \
	"$work/restore1.json" >/dev/null || fail "restore: $(jq -c '[.imported, .shared, .start.nodes]' "$work/restore1.json")"
jq -e --argjson m "$members" '(.start.api.ready | sort) == $m and .start.api.not_ready == [] and (.start.api.approved | length) == 2 * ($m | length)' \
	"$work/restore1.json" >/dev/null || fail "restore's API side: $(jq -c .start.api "$work/restore1.json")"
for n in $(jq -r '.[]' <<<"$members"); do
	got=$(jq -r --arg n "$n" 'select(.node == $n) | .event + ":" + (.kind // "")' "$work/api3.events" | paste -sd' ')
	[[ $got == "boot: csr:client approved:client csr:serving approved:serving" ]] ||
		fail "$n's kubelet after restore: '$got' ($(cat "$work/api3.events"))"
done
stop_pid "$api"
"$bin" status e2ed | tee "$work/status.out"
contains "restored from bundle $b (no install recorded)" "$work/status.out" || fail "status does not say where e2ed came from"
vol=$(jq -r '.nodes[] | select(.name == "e2ed-worker-0") | .disks[0].volume' "$work/plan.json")
virsh vol-dumpxml --pool "$pool" "$vol" | contains '<path>.*/shiftlab-base-[0-9a-f]\{16\}\.qcow2</path>' ||
	fail "$vol is no overlay on its imported disk"
restored 1
if "$bin" bundle restore "$b" >"$work/again.out" 2>&1; then fail "a second copy was restored beside the first"; fi
contains 'a cluster named e2ed exists: destroy it first' "$work/again.out" || fail "restore beside: $(cat "$work/again.out")"

step "bundle restore again: fresh, the first restore's writes absent"
"$bin" destroy cluster e2ed
"$bin" bundle restore "$b" -o json >"$work/restore2.json"
jq -e '.imported == [] and (.shared | length) == 6' "$work/restore2.json" >/dev/null ||
	fail "the second restore imported again: $(jq -c '[.imported, .shared]' "$work/restore2.json")"
"$bin" start e2ed >/dev/null
restored 2
"$bin" bundle delete e2ed
[[ ! -e $b ]] || fail "bundle delete left $(ls -A "$b")"

echo "PASS $NAME"
