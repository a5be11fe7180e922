# Install decisions of scripts/setup, as pure functions of recorded command output,
# so that tests/setup/decide.sh can check them on inputs from machines we do not have.
# Sourced by scripts/setup; no side effects. Every function reads its input whole
# (awk, never a grep that quits at its first match): under pipefail an early-exiting reader kills the writer with
# SIGPIPE and turns a match into a failure.

# apt_policy_versions PKG < `apt-cache policy PKG...`
# One line per version of PKG in the version table: "VERSION<TAB>SOURCE" for each
# source that serves it (e.g. "1:7.2+dfsg-7+deb12u18+b3	http://deb.debian.org/debian bookworm/main amd64 Packages").
apt_policy_versions() {
  awk -v pkg="$1" '
    /^[^ ]/ { inpkg = ($0 == pkg ":"); next }
    !inpkg { next }
    /^ (\*\*\*|   ) [^ ]+ -?[0-9]+$/ { ver = $(NF - 1); next }
    /^        +-?[0-9]+ / && ver != "" { src = $0; sub(/^ +-?[0-9]+ /, "", src); print ver "\t" src }
  '
}

# apt_policy_field PKG FIELD < `apt-cache policy PKG...`: FIELD is Installed or Candidate;
# prints nothing for "(none)".
apt_policy_field() {
  awk -v pkg="$1" -v field="$2" '
    /^[^ ]/ { inpkg = ($0 == pkg ":"); next }
    inpkg && $1 == field ":" && $2 != "(none)" { print $2 }
  '
}

# bookworm_version PKG < `apt-cache policy PKG...`: the newest version of PKG that a
# Debian 12 suite (bookworm, -updates, -security; not backports) serves.
bookworm_version() {
  apt_policy_versions "$1" |
    awk -F'\t' '$2 ~ / bookworm(-updates|-security)?\/[a-z-]+ / { print $1; exit }'
}

# qemu_pin_args < `apt-cache policy qemu-utils qemu-system-x86`
# qemu-utils and qemu-system-x86 must come from one QEMU build: backports'
# qemu-utils (10.x) declares `Breaks: qemu-system-common (<< 1:8.0+dfsg-5~)`, so
# Debian 12's qemu-system-x86 cannot be installed beside it. Prints the extra
# apt-get install arguments, one per line: none when the two already match (or
# neither is installed from elsewhere), else both packages pinned to Debian 12's
# version, with --allow-downgrades.
qemu_pin_args() {
  local policy utils_inst sys_inst sys_want utils_want
  policy=$(cat)
  utils_inst=$(apt_policy_field qemu-utils Installed <<<"$policy")
  sys_inst=$(apt_policy_field qemu-system-x86 Installed <<<"$policy")
  sys_want=$(bookworm_version qemu-system-x86 <<<"$policy")
  utils_want=$(bookworm_version qemu-utils <<<"$policy")
  # Both installed from one build already: nothing to change.
  if [[ -n $utils_inst && $utils_inst == "$sys_inst" ]]; then
    return 0
  fi
  # Nothing installed, or qemu-utils already Debian 12's: a plain install matches.
  if [[ -z $utils_inst && -z $sys_inst ]] || [[ -n $utils_inst && $utils_inst == "$utils_want" && -z $sys_inst ]]; then
    return 0
  fi
  if [[ -z $sys_want || -z $utils_want ]]; then
    echo "setup: no Debian 12 (bookworm) version of qemu-utils/qemu-system-x86 in apt's lists; run apt-get update" >&2
    return 1
  fi
  printf '%s\n' --allow-downgrades "qemu-utils=$utils_want" "qemu-system-x86=$sys_want"
}

# ironic_venv_plan TESTS VERSION < `VENV/bin/pip show ironic` (empty when there is
# no venv): what to do with the cached venv of PyPI's Ironic the BMC suites drive
# (tests/e2e/ironic-lib.sh). Prints "skip" without --tests (TESTS is not 1),
# "keep" when the venv holds Ironic VERSION, else "build".
ironic_venv_plan() {
  local tests=$1 want=$2 have
  have=$(awk -F': *' '$1 == "Version" { print $2 }')
  if [[ $tests != 1 ]]; then
    echo skip
  elif [[ -n $have && $have == "$want" ]]; then
    echo keep
  else
    echo build
  fi
}

# setup_packages MODE: the Debian packages scripts/setup installs, one per line.
# MODE demo: what scripts/demo needs and nothing else (no coreos-installer build
# deps, no test-only packages); full and tests: what shiftlab and every test
# binary need to build and run (the test-only packages: setup_test_packages).
setup_packages() {
  local mode=$1
  case $mode in
  demo | full | tests) ;;
  *)
    echo "setup: mode $mode: expected demo, full or tests" >&2
    return 1
    ;;
  esac
  # building shiftlab: the virt crate links libvirt (pkg-config finds it)
  printf '%s\n' build-essential pkg-config libvirt-dev git ca-certificates curl
  # the hypervisor and the cluster network (libvirt runs dnsmasq), the load balancer
  printf '%s\n' libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils dnsmasq-base haproxy
  # scripts/sandbox (ip netns, iptables for libvirt's NAT)
  printf '%s\n' iproute2 iptables
  # the stand-in node image (src/image/standin): kernel, busybox, a FAT disk with syslinux
  printf '%s\n' busybox-static linux-image-amd64 syslinux syslinux-common mtools dosfstools
  # the stand-in installer's waits (jq, curl, dig); python3 drives the demo's
  # screenshot (scripts/lib/page-shot.py) and the tests
  printf '%s\n' jq dnsutils python3
  if [[ $mode == demo ]]; then
    # the screenshot of serve's web page (headless), readable text in it; socat
    # carries the page to the host's loopback with --keep
    printf '%s\n' chromium fonts-dejavu-core socat
    return 0
  fi
  # ISOs (single node, agent, IPI virtual media): isolinux and genisoimage
  printf '%s\n' isolinux genisoimage
  # the tests' real clients (sushy in a venv)
  printf '%s\n' python3-venv python3-pip
  # release signatures: gpgv verifies, gnupg makes test keys
  printf '%s\n' gpgv gnupg
  # building coreos-installer (live ISOs: Ignition embedding); its zstd-sys build
  # needs libzstd-dev, and it links liblzma and OpenSSL
  printf '%s\n' libzstd-dev liblzma-dev libssl-dev
  # storage: nfs: serve runs one userspace NFS-Ganesha per cluster (src/host/nfs.rs)
  printf '%s\n' nfs-ganesha nfs-ganesha-vfs
}

# setup_test_packages: what only the tests need, installed by scripts/setup --tests
# in a second apt-get install, with no service started (firewalld). The web page
# e2e (tests/e2e/web.sh) opens serve's page in Debian's headless Chromium;
# fonts-dejavu-core gives its screenshot readable text. The day-2 e2e's stand-in
# Kubernetes API makes its kubelets' CSRs with the openssl command
# (tests/e2e/kube-standin.py).
setup_test_packages() {
  printf '%s\n' nftables dbus-daemon firewalld chromium fonts-dejavu-core openssl
  # the NFS export's e2e (tests/e2e/lab-bmc.sh) writes with the userspace client
  printf '%s\n' libnfs-utils
  # the dual-stack network's e2e (tests/e2e/ipv6.sh) asks DHCPv6 with dhclient -6
  printf '%s\n' isc-dhcp-client
}

# ganesha_service_plan STATUS SYSTEMCTL: what to do with Debian's own
# nfs-ganesha service after the install. STATUS is `dpkg-query -W -f='${Status}'
# nfs-ganesha` from before it (empty when absent); SYSTEMCTL is 1 when systemctl
# runs. The package enables and starts a server on every address's port 2049,
# which would take the port from the per-cluster servers shiftlab runs: "disable"
# when this setup installed it on a systemd host, else "keep" (a server the
# user had is theirs).
ganesha_service_plan() {
  if [[ $1 != "install ok installed" && $2 == 1 ]]; then
    echo disable
  else
    echo keep
  fi
}

# setup_cargo_args MODE: the one `cargo` command scripts/setup runs. The demo
# builds the shiftlab binary alone; full and tests build every target.
setup_cargo_args() {
  if [[ $1 == demo ]]; then
    printf '%s\n' build --locked --profile "$(demo_profile)" --bin shiftlab
  else
    printf '%s\n' build --locked --all-targets
  fi
}

# demo_profile: the cargo profile scripts/demo builds and runs (its directory
# under target/: profile_dir). Debug, measured end to end from an empty target
# directory on a shared 2-core machine under load (2026-11-25, load 8-10): the
# debug build took 7 min 16 s wall (the whole scripts/demo 3 min 10 s of CPU)
# and the demo in the sandbox 83 s; the release build 23 min 45 s wall (9 min
# 33 s of CPU) and the same demo 76 s. The demo's time is the stand-ins' (TCG),
# not shiftlab's: release saves seconds there and costs minutes to build.
demo_profile() {
  echo dev
}

# profile_dir PROFILE: the directory under the target directory cargo builds PROFILE into.
profile_dir() {
  if [[ $1 == dev ]]; then echo debug; else echo "$1"; fi
}

# coreos_installer_plan MODE VERSION < `coreos-installer --version` (empty when
# missing): "skip" for the demo (it rehearses UPI: Ignition through fw_cfg, no
# ISO), "keep" when VERSION is installed, else "install".
coreos_installer_plan() {
  local mode=$1 want=$2 have
  have=$(cat)
  if [[ $mode == demo ]]; then
    echo skip
  elif [[ $have == "coreos-installer $want" ]]; then
    echo keep
  else
    echo install
  fi
}
