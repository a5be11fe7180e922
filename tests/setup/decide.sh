#!/usr/bin/env bash
# scripts/setup's install decisions on recorded `apt-cache policy` output: the
# machines CI and newcomers use differ in what they carry (backports' qemu-utils).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/setup-decide.sh
rec=tests/setup/apt-cache
failed=0
check() { # name fixture expected-args...
  local name=$1 fixture=$2 got want
  shift 2
  got=$(qemu_pin_args <"$rec/$fixture" | paste -sd' ')
  want="$*"
  if [[ $got == "$want" ]]; then
    echo "ok: $name"
  else
    echo "FAILED: $name: got [$got], want [$want]"
    failed=1
  fi
}

# Recorded on a fresh CI-image machine: qemu-utils 10.0 from backports, no qemu-system.
check "backports qemu-utils is downgraded to Debian 12's, with qemu-system-x86 matching" \
  backports-qemu-utils.txt \
  --allow-downgrades qemu-utils=1:7.2+dfsg-7+deb12u18+b3 qemu-system-x86=1:7.2+dfsg-7+deb12u18+b3
# Recorded after scripts/setup ran on that machine: both from Debian 12.
check "matching Debian 12 builds are left alone" bookworm-installed.txt
# A plain Debian 12 machine with no QEMU (the recorded lists, nothing installed).
check "a machine without QEMU installs Debian 12's as is" bookworm-none.txt
# Both from backports with backports in the sources (a deliberate choice): they match.
check "matching backports builds are left alone" backports-both.txt

# The parser itself, on the recorded file.
v=$(bookworm_version qemu-utils <"$rec/backports-qemu-utils.txt")
[[ $v == 1:7.2+dfsg-7+deb12u18+b3 ]] || { echo "FAILED: bookworm_version qemu-utils: $v"; failed=1; }
i=$(apt_policy_field qemu-system-x86 Installed <"$rec/backports-qemu-utils.txt")
[[ -z $i ]] || { echo "FAILED: qemu-system-x86 is not installed, got $i"; failed=1; }

# No lists (apt-get update never ran): a clear failure, not a silent no-pin.
if out=$(printf 'qemu-utils:\n  Installed: 1:10.0.2+ds-2+deb13u1~bpo12+1\n  Candidate: 1:10.0.2+ds-2+deb13u1~bpo12+1\n  Version table:\n *** 1:10.0.2+ds-2+deb13u1~bpo12+1 100\n        100 /var/lib/dpkg/status\n' | qemu_pin_args 2>&1); then
  echo "FAILED: no bookworm version must fail, got [$out]"; failed=1
else
  echo "ok: no Debian 12 version in the lists is an error ($out)"
fi

# The Ironic venv of the BMC suites: built once per version, only for --tests.
plan() { # name tests version pip-show-output expected
  local got
  got=$(ironic_venv_plan "$2" "$3" <<<"$4")
  if [[ $got == "$5" ]]; then echo "ok: ironic venv: $1"; else echo "FAILED: ironic venv: $1: got $got, want $5"; failed=1; fi
}
shown=$'Name: ironic\nVersion: 39.0.0\nSummary: OpenStack Bare Metal Provisioning'
plan "without --tests nothing is built" 0 39.0.0 "" skip
plan "without --tests a stale venv is left alone" 0 40.0.0 "$shown" skip
plan "no venv yet: built" 1 39.0.0 "" build
plan "the cached venv holds that version: kept" 1 39.0.0 "$shown" keep
plan "another version cached: built anew" 1 40.0.0 "$shown" build
plan "a venv without Ironic in it: built" 1 39.0.0 $'WARNING: Package(s) not found: ironic' build

# What each mode installs and builds (scripts/setup --demo, plain, --tests).
# has_all NAME LIST WORD...: every WORD is a line of LIST; lacks_all: none is.
has_all() {
  local name=$1 list=$2 w missing=()
  shift 2
  for w in "$@"; do grep -qx -- "$w" <<<"$list" || missing+=("$w"); done
  if ((${#missing[@]} == 0)); then echo "ok: $name"; else echo "FAILED: $name: missing ${missing[*]}"; failed=1; fi
}
lacks_all() {
  local name=$1 list=$2 w present=()
  shift 2
  for w in "$@"; do ! grep -qx -- "$w" <<<"$list" || present+=("$w"); done
  if ((${#present[@]} == 0)); then echo "ok: $name"; else echo "FAILED: $name: has ${present[*]}"; failed=1; fi
}
demo=$(setup_packages demo)
full=$(setup_packages full)
# What the demo runs: the sandbox's tools (scripts/sandbox's REQUIRED), serve's
# HAProxy, the stand-in image's tools (src/image/standin), the stand-in
# installer's jq, curl and dig, the screenshot's browser and python3; to build: libvirt-dev.
sandbox_pkgs=$(sed -n 's/^\t"[^:"]*:\([^"]*\)"$/\1/p' scripts/sandbox | sort -u | grep -vx util-linux)
[[ -n $sandbox_pkgs ]] || { echo "FAILED: no REQUIRED packages read from scripts/sandbox"; failed=1; }
mapfile -t sandbox_pkgs <<<"$sandbox_pkgs"
has_all "the demo installs what scripts/sandbox requires" "$demo" "${sandbox_pkgs[@]}"
standin_pkgs=$(sed -n 's/^ *("[^"]*", "\([^"]*\)"),$/\1/p' src/image/standin/mod.rs | sort -u)
[[ -n $standin_pkgs ]] || { echo "FAILED: no tool packages read from src/image/standin/mod.rs"; failed=1; }
mapfile -t standin_pkgs <<<"$standin_pkgs"
has_all "the demo installs the stand-in image's tools" "$demo" "${standin_pkgs[@]}" busybox-static linux-image-amd64 syslinux-common
has_all "the demo installs serve's, the installer's and the screenshot's" "$demo" \
  haproxy jq curl dnsutils python3 chromium fonts-dejavu-core socat libvirt-dev pkg-config build-essential
lacks_all "the demo installs no coreos-installer build deps, ISO tools or test-only packages" "$demo" \
  libzstd-dev liblzma-dev libssl-dev genisoimage isolinux python3-venv python3-pip gnupg \
  nftables firewalld dbus-daemon
has_all "plain set-up keeps every package it had" "$full" \
  libvirt-daemon-system libvirt-clients libvirt-dev pkg-config qemu-system-x86 qemu-utils dnsmasq-base \
  haproxy busybox-static linux-image-amd64 syslinux syslinux-common isolinux mtools dosfstools genisoimage \
  iproute2 iptables dnsutils curl python3-venv python3-pip jq gpgv gnupg libzstd-dev liblzma-dev libssl-dev \
  build-essential git ca-certificates
[[ $(setup_packages tests) == "$full" ]] || { echo "FAILED: --tests installs the same base as plain set-up"; failed=1; }
has_all "the test-only packages" "$(setup_test_packages)" nftables dbus-daemon firewalld chromium fonts-dejavu-core openssl libnfs-utils isc-dhcp-client
has_all "plain set-up installs the NFS export's server" "$full" nfs-ganesha nfs-ganesha-vfs
lacks_all "the demo installs no NFS server" "$demo" nfs-ganesha nfs-ganesha-vfs
gs() { # name status systemctl expected
  local got
  got=$(ganesha_service_plan "$2" "$3")
  if [[ $got == "$4" ]]; then echo "ok: nfs-ganesha service: $1"; else echo "FAILED: nfs-ganesha service: $1: got $got, want $4"; failed=1; fi
}
gs "installed by this run on systemd: disabled" "" 1 disable
gs "removed before (config-files): disabled" "deinstall ok config-files" 1 disable
gs "the user's own: kept" "install ok installed" 1 keep
gs "no systemd: nothing to disable" "" 0 keep
if out=$(setup_packages demos 2>&1); then
  echo "FAILED: an unknown mode must fail, got [$out]"; failed=1
else
  echo "ok: an unknown mode is an error ($out)"
fi
got=$(setup_cargo_args demo | paste -sd' ')
[[ $got == "build --locked --profile $(demo_profile) --bin shiftlab" ]] &&
  echo "ok: the demo builds the shiftlab binary alone" || { echo "FAILED: demo cargo args: $got"; failed=1; }
got=$(setup_cargo_args full | paste -sd' ')
[[ $got == "build --locked --all-targets" ]] &&
  echo "ok: plain set-up builds every target" || { echo "FAILED: full cargo args: $got"; failed=1; }
[[ $(profile_dir dev) == debug && $(profile_dir release) == release ]] &&
  echo "ok: profile directories" || { echo "FAILED: profile_dir"; failed=1; }
ci() { # name mode version-output expected
  local got
  got=$(coreos_installer_plan "$2" 0.27.0 <<<"$3")
  if [[ $got == "$4" ]]; then echo "ok: coreos-installer: $1"; else echo "FAILED: coreos-installer: $1: got $got, want $4"; failed=1; fi
}
ci "the demo never builds it" demo "" skip
ci "missing: installed" full "" install
ci "that version: kept" tests "coreos-installer 0.27.0" keep
ci "another version: installed" full "coreos-installer 0.26.0" install

# The pattern this replaced: under pipefail `cmd | grep -q` (or `| head`) is false
# when cmd dies of SIGPIPE. No script of ours may use either.
lint=$(grep -rnE '\|[[:space:]]*(grep[[:space:]]+(-[a-zA-Z]*q|--quiet)|head\b)' \
  scripts tests/e2e tests/setup bench .ci | grep -v '^tests/setup/decide.sh:' || true)
if [[ -n $lint ]]; then
  echo "$lint"
  echo "FAILED: a pipe into \`grep -q\` or \`head\` (SIGPIPE under pipefail): read the whole input instead"
  failed=1
else
  echo "ok: no pipe into \`grep -q\` or \`head\` in scripts"
fi
[ "$failed" -eq 0 ]
