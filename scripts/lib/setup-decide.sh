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
