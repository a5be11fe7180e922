#!/usr/bin/env bash
# tests/e2e/base-import.sh IMAGE — the base image import in the sandbox: the
# image is written once into a volume declared qcow2, its sha256 (computed
# while uploading) lands in the completion marker, and a partial upload (the
# base volume without its marker, holding half the image) is never used: the
# next `create infra` replaces it with the whole image. A UPI rehearsal: its
# nodes boot from overlays of the base (ISO and IPI nodes import none), and the
# cluster is destroyed between steps, so no overlay holds an old base. The same
# image at a second path is found by content (not imported twice); an image of
# the same size with other content is not. The bytes go straight into the
# volume's file when shiftlab sees the file libvirt manages, through libvirt's
# upload stream when it does not (here: shiftlab in a mount namespace of its
# own, with a decoy file at the volume's path) or when told to.
set -euo pipefail
NAME=base-import
. "$(dirname "$0")/lib.sh"
e2e_sandbox "$@"
e2e_workdir base-import
destroy_on_exit bi
f=$(cluster_file bi 192.168.197.0/24 "method: upi" "image: $IMAGE" "ctlplanes: 3" "workers: 0")

step "first import: one volume declared qcow2, content and sha256 exact, written as a file"
SHIFTLAB_LOG=info "$bin" create infra -f "$f" 2>"$work/c1.err" | tee "$work/c1.out"
grep -q 'base image imported.*route="\?file' "$work/c1.err" || fail "not written into the volume's file: $(cat "$work/c1.err")"
line=$(grep '^created base image ' "$work/c1.out") || fail "no base image was created"
base=$(awk '{print $4}' <<<"$line")
[[ $base == shiftlab-base-*.qcow2 ]] || fail "unexpected base volume name $base"
want=$(sha256sum "$IMAGE" | cut -d' ' -f1)
grep -q "(sha256 $want)" <<<"$line" || fail "the reported sha256 is not the image's: $line"
pool=$(virsh pool-list --name | awk 'NF {print $1; exit}')
[[ -n $pool ]] || fail "no pool"
# Captured, not piped into grep -q: under pipefail grep's early exit makes
# virsh die of SIGPIPE and the pipeline false.
vxml=$(virsh vol-dumpxml "$base" --pool "$pool")
grep -q "<format type='qcow2'/>" <<<"$vxml" || fail "the base volume is not declared qcow2: $vxml"
virsh -q vol-download "$base" "$work/got.qcow2" --pool "$pool"
cmp -s "$IMAGE" "$work/got.qcow2" || fail "the base volume's content is not the image"
virsh -q vol-download "$base.sha256" "$work/marker" --pool "$pool"
[[ $(cat "$work/marker") == "$want" ]] || fail "the marker does not hold the image's sha256"
vols=$(virsh vol-list "$pool")
if grep -q '\.part\b' <<<"$vols"; then fail "an upload volume was left"; fi

step "a second run reuses the complete base"
"$bin" create infra -f "$f" | tee "$work/c2.out"
if grep -q '^created base image' "$work/c2.out"; then fail "a complete base image was imported again"; fi

step "a partial upload (no marker, half the image) is never taken for complete"
"$bin" destroy cluster bi >/dev/null
virsh -q vol-delete "$base.sha256" --pool "$pool"
virsh -q vol-delete "$base" --pool "$pool"
size=$(stat -c %s "$IMAGE")
head -c $((size / 2)) "$IMAGE" >"$work/half"
virsh -q vol-create-as "$pool" "$base" "$size" --format qcow2 >/dev/null
virsh -q vol-upload "$base" "$work/half" --pool "$pool"
SHIFTLAB_IMPORT=stream SHIFTLAB_LOG=info "$bin" create infra -f "$f" 2>"$work/c3.err" | tee "$work/c3.out"
grep -q "^created base image $base from .*(sha256 $want)" "$work/c3.out" || fail "the partial base image was used"
grep -q 'base image imported.*route="\?stream' "$work/c3.err" || fail "SHIFTLAB_IMPORT=stream did not take the stream: $(cat "$work/c3.err")"
virsh -q vol-download "$base" "$work/got3.qcow2" --pool "$pool"
cmp -s "$IMAGE" "$work/got3.qcow2" || fail "the re-imported base volume is not the image"

step "a marker without its volume is not a base image either"
"$bin" destroy cluster bi >/dev/null
virsh -q vol-delete "$base" --pool "$pool"
"$bin" create infra -f "$f" | tee "$work/c4.out"
grep -q "^created base image $base " "$work/c4.out" || fail "the base image was not imported again"

step "a file at the volume's path that is not libvirt's is never written: the stream is"
# shiftlab in a mount namespace of its own, where the pool directory is another
# tmpfs holding a decoy of the very name and size libvirt's new volume gets
# (only the modification time differs), as a daemon in another container would.
"$bin" destroy cluster bi >/dev/null
virsh -q vol-delete "$base.sha256" --pool "$pool"
virsh -q vol-delete "$base" --pool "$pool"
pooldir=$(virsh pool-dumpxml "$pool" | sed -n 's:.*<path>\(.*\)</path>.*:\1:p')
[[ -d $pooldir ]] || fail "no pool directory: $pooldir"
vsize=$(qemu-img info --output=json "$IMAGE" | python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')
virsh -q vol-create-as "$pool" shiftlab-probe.qcow2 "$vsize" --format qcow2 >/dev/null
hsize=$(stat -c %s "$pooldir/shiftlab-probe.qcow2")
virsh -q vol-delete shiftlab-probe.qcow2 --pool "$pool"
SHIFTLAB_LOG=info unshare -m bash -c '
	set -e
	mount -t tmpfs decoy "$1"
	truncate -s "$2" "$1/$3"
	"$4" create infra -f "$5" 2>"$6/c5.err" >"$6/c5.out"
	cmp -s "$1/$3" <(head -c "$2" /dev/zero) || { echo "the decoy was written" >&2; exit 1; }
' _ "$pooldir" "$hsize" "$base" "$bin" "$f" "$work" || fail "create infra with a decoy: $(cat "$work/c5.err")"
grep -q 'base image imported.*route="\?stream' "$work/c5.err" || fail "the decoy did not send the bytes through the stream: $(cat "$work/c5.err")"
virsh -q vol-download "$base" "$work/got5.qcow2" --pool "$pool"
cmp -s "$IMAGE" "$work/got5.qcow2" || fail "the base volume uploaded past the decoy is not the image"
virsh -q vol-download "$base.sha256" "$work/marker5" --pool "$pool"
[[ $(cat "$work/marker5") == "$want" ]] || fail "the marker does not hold the image's sha256 after the stream"

step "the same image at another path is the same base, found by its content"
cp "$IMAGE" "$work/copy.qcow2" # another path, another mtime: another name
destroy_on_exit bj
fj=$(cluster_file bj 192.168.196.0/24 "method: upi" "image: $work/copy.qcow2" "ctlplanes: 3" "workers: 0")
SHIFTLAB_LOG=info "$bin" create infra -f "$fj" 2>"$work/j1.err" | tee "$work/j1.out"
if grep -q '^created base image' "$work/j1.out"; then fail "the same image at another path was imported again"; fi
bases() { virsh vol-list "$pool" | awk '$1 ~ /^shiftlab-base-.*\.qcow2$/ {print $1}'; }
[[ $(bases) == "$base" ]] || fail "base volumes: $(bases | tr '\n' ' '), want only $base"
bpath=$(virsh vol-path "$base" --pool "$pool")
oxml=$(virsh vol-dumpxml bj-ctlplane-0.qcow2 --pool "$pool")
grep -qF -- "<path>$bpath</path>" <<<"$oxml" || fail "bj's overlay is not backed by $base: $oxml"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(not any(a[3] == sys.argv[2] for a in r.get("base_aliases", [])))' \
	"$SHIFTLAB_HOME/libvirt-host.json" "$base" || fail "no alias of $base recorded"
grep -q 'base image found by content.*how="\?hashed' "$work/j1.err" || fail "no content match logged: $(cat "$work/j1.err")"
# remembered: the second run reads the file's header only, no hashing
SHIFTLAB_LOG=info "$bin" create infra -f "$fj" 2>"$work/j2.err" | tee "$work/j2.out"
grep -q 'base image found by content.*how="\?remembered' "$work/j2.err" || fail "the second run did not use the alias: $(cat "$work/j2.err")"
if grep -q '^created base image' "$work/j2.out"; then fail "imported on the second run"; fi
# same size and virtual size, other content (a byte in the header cluster's
# unused padding): a base of its own
cp "$IMAGE" "$work/other.qcow2"
printf '\x01' | dd of="$work/other.qcow2" bs=1 seek=32768 conv=notrunc status=none
destroy_on_exit bk
fk=$(cluster_file bk 192.168.195.0/24 "method: upi" "image: $work/other.qcow2" "ctlplanes: 3" "workers: 0")
"$bin" create infra -f "$fk" | tee "$work/k1.out"
grep -q '^created base image ' "$work/k1.out" || fail "another content was taken for the same base"
[[ $(bases | wc -l) == 2 ]] || fail "base volumes: $(bases | tr '\n' ' '), want two"
"$bin" destroy cluster bj >/dev/null
"$bin" destroy cluster bk >/dev/null

step "destroy --purge-images removes the base and its marker"
"$bin" destroy cluster bi --purge-images | tee "$work/d.out"
vols=$(virsh vol-list "$pool" 2>/dev/null || true)
if grep -q shiftlab-base- <<<"$vols"; then fail "base volume or marker left"; fi
echo "PASS $NAME"
