#!/usr/bin/env bash
# Benchmark: shiftlab's Redfish BMC vs sushy-emulator (sushy-tools 2.2.0) on
# the same libvirt domain, and against the limit (examples/bmc_limit.rs: a
# minimal hyper server returning a body of the same size), in one run, inside the hermetic sandbox (a private
# libvirtd with a tiny TCG QEMU domain). Prints a Markdown table with ratios;
# never fails on a timing. See docs/benchmarks.md ("Redfish BMC").
#
#   sudo bench/bmc/run.sh            # as root; ~2-4 minutes
#
# Knobs (environment): BENCH_SEQ / BENCH_CONC (shiftlab's request counts for
# 1 and 16 clients; sushy gets 1/20 of them), BENCH_SECONDS (time limit of
# each load run), BENCH_ROUNDS (power rounds), BENCH_VENV, BENCH_SHIFTLAB (a
# prebuilt shiftlab binary instead of cargo build --release).
# Needs: scripts/setup's packages, apache2-utils (ab; installed if missing),
# and pip access for sushy-tools + libvirt-python (built against libvirt-dev).
NAME=bench-bmc
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../tests/e2e/lib.sh"
venv=${BENCH_VENV:-${TMPDIR:-/tmp}/shiftlab-bench-venv}
bin=${BENCH_SHIFTLAB:-${CARGO_TARGET_DIR:-$repo/target}/release/shiftlab}
limit=${CARGO_TARGET_DIR:-$repo/target}/release/examples/bmc_limit

if [ "${1:-}" != __inside ]; then
  [ "$(id -u)" -eq 0 ] || { echo "run as root (sandbox namespaces)" >&2; exit 2; }
  py_venv "$venv" 'ssl, sushy_tools, libvirt' sushy-tools==2.2.0 libvirt-python==9.0.0
  command -v ab >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends apache2-utils >/dev/null
  [ -n "${BENCH_SHIFTLAB:-}" ] || (cd "$repo" && cargo build -q --release --bin shiftlab)
  (cd "$repo" && cargo build -q --release --example bmc_limit)
  sandbox=$repo/scripts/sandbox
  echo "# shiftlab $(git -C "$repo" rev-parse --short HEAD) vs sushy-tools $("$venv/bin/pip" show sushy-tools | sed -n 's/^Version: //p')," \
    "libvirt $(virsh -v 2>/dev/null || true), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
  exec timeout -k 30 900 "$sandbox" run -- "$0" __inside
fi

# ---- inside the sandbox
work=$(mktemp -d)
on_exit 'rm -rf "$work"'
tiny_domain bench-bmc-0 # lib.sh: 128 MiB, TCG, an empty CD-ROM
"$venv/bin/python" "$here/bench.py" --shiftlab "$bin" --limit "$limit" --sushy "$venv/bin/sushy-emulator" \
  --work "$work/run" --domain bench-bmc-0
