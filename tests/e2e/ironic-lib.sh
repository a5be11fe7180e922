# Real OpenStack Ironic (PyPI's `ironic`, one process: API and conductor,
# noauth, no RPC bus, sqlite), configured as metal3's ironic-image configures
# it for OpenShift: the redfish hardware type, virtual-media and UEFI HTTP
# boot, out-of-band (redfish) inspection. Sourced by the suites after lib.sh.
#
#   ironic_venv                     $ironic_venv, or skip loudly: exit 77, which
#                                   scripts/test counts as skipped (fail under CI=true)
#   ironic_start DIR PORT [HTTP [CA]] config in DIR, API on http://127.0.0.1:PORT;
#                                   HTTP: the URL its published images are served at;
#                                   CA: what Ironic verifies image servers with;
#                                   DIR's database is kept across starts
#   ironic_api METHOD PATH [JSON]   one API call, the answer on stdout
#   ironic_wait NODE FIELD VALUE S  until the node's FIELD is VALUE (S seconds;
#                                   fails early on an "error" state)
#
# The venv: IRONIC_VENV (that one only), else scripts/setup's cache (keyed by
# the version), else /tmp/ironic-venv.
IRONIC_VERSION=39.0.0
ironic_venv=""
ironic_venv() {
	local d
	local candidates=("/var/cache/shiftlab/ironic-venv-$IRONIC_VERSION" /tmp/ironic-venv)
	[[ -z ${IRONIC_VENV:-} ]] || candidates=("$IRONIC_VENV") # given: that one only
	for d in "${candidates[@]}"; do
		if [[ -x $d/bin/ironic ]] && "$d/bin/python" -c 'import ironic' 2>/dev/null; then
			ironic_venv=$d
			return 0
		fi
	done
	if [[ ${CI:-} == true ]]; then
		fail "no Ironic $IRONIC_VERSION venv (scripts/setup --tests makes it)"
	fi
	echo "SKIP $NAME: no Ironic $IRONIC_VERSION venv; run scripts/setup --tests (or set IRONIC_VENV)" >&2
	echo "0 passed, 0 failed, 1 skipped"
	exit 77
}

ironic_url=""
ironic_pid=""
ironic_start() {
	local dir=$1 port=$2 http=${3:-http://127.0.0.1:1} ca=${4:-True}
	mkdir -p "$dir/httpboot" "$dir/locks" "$dir/tmp"
	ironic_url=http://127.0.0.1:$port
	cat >"$dir/ironic.conf" <<EOF
[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = shiftlab-test
my_ip = 127.0.0.1
debug = true
use_stderr = false
log_file = $dir/ironic.log
tempdir = $dir/tmp
webserver_verify_ca = $ca
enabled_hardware_types = redfish
enabled_bios_interfaces = no-bios,redfish
enabled_boot_interfaces = redfish-virtual-media,redfish-https
enabled_deploy_interfaces = direct,ramdisk
enabled_firmware_interfaces = no-firmware,redfish
enabled_inspect_interfaces = no-inspect,redfish
enabled_management_interfaces = redfish
enabled_network_interfaces = noop
enabled_power_interfaces = redfish
enabled_raid_interfaces = no-raid,agent,redfish
enabled_vendor_interfaces = no-vendor,redfish
default_boot_interface = redfish-virtual-media
default_inspect_interface = redfish
default_network_interface = noop
[api]
host_ip = 127.0.0.1
port = $port
api_workers = 1
[conductor]
automated_clean = false
deploy_kernel = $http/ironic-python-agent.kernel
deploy_ramdisk = $http/ironic-python-agent.initramfs
[database]
connection = sqlite:///$dir/ironic.sqlite
[deploy]
http_root = $dir/httpboot
http_url = $http
default_boot_mode = uefi
fast_track = false
[inspector]
add_ports = all
[oslo_concurrency]
lock_path = $dir/locks
[redfish]
use_swift = false
EOF
	# A restart keeps the database (its nodes), as a restarted conductor does.
	[[ -f $dir/ironic.sqlite ]] ||
		"$ironic_venv/bin/ironic-dbsync" --config-file "$dir/ironic.conf" create_schema >"$dir/dbsync.log" 2>&1 ||
		fail "ironic-dbsync: $(tail -5 "$dir/dbsync.log")"
	"$ironic_venv/bin/ironic" --config-file "$dir/ironic.conf" >"$dir/ironic.out" 2>&1 &
	ironic_pid=$!
	on_exit 'stop_pid "$ironic_pid"'
	wait_for 120 "Ironic's API" curl -sf "$ironic_url/v1"
}

ironic_api() {
	curl -s -X "$1" -H 'X-OpenStack-Ironic-API-Version: latest' -H 'Content-Type: application/json' \
		${3:+-d "$3"} "$ironic_url$2"
}

ironic_wait() {
	local node=$1 field=$2 want=$3 deadline=$((SECONDS + $4)) got
	while :; do
		got=$(ironic_api GET "/v1/nodes/$node" | jq -r ".$field")
		[[ $got == "$want" ]] && return 0
		[[ $got != *fail* && $got != error ]] ||
			fail "node $node: $field $got: $(ironic_api GET "/v1/nodes/$node" | jq -r .last_error)"
		((SECONDS < deadline)) || fail "node $node: $field still $got after $4 s (want $want)"
		sleep 1
	done
}
