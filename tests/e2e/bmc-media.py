"""Ironic's virtual-media sequence through the real sushy client against
`shiftlab bmc` on a real libvirtd, checked through virsh.

Usage: bmc-media.py URL USER PASSWORD CA_FILE ISO_URL HTTP_LOG DOMAIN_A DOMAIN_B
DOMAIN_A takes the whole sequence; DOMAIN_B (powered off) inserts the same
image to show the pool volume is shared and reused, not downloaded again.
"""
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import sushy

url, user, password, ca, iso, http_log, dom_a, dom_b = sys.argv[1:9]
POOL = "default"
failures = []
passed = 0


def check(name, cond, detail=""):
    global passed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failures.append(name)
        print(f"FAIL {name} {detail}")


def virsh(*args):
    return subprocess.run(["virsh", "-q", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def domstate(dom):
    return virsh("domstate", dom)


def dumpxml(dom, inactive=False):
    return ET.fromstring(virsh("dumpxml", *(["--inactive"] if inactive else []), dom))


def cdroms(x):
    return [d for d in x.findall("./devices/disk") if d.get("device") == "cdrom"]


def first_boot(x):
    """The device class with the lowest boot order: cdrom, disk or interface."""
    best = None
    for d in x.find("devices"):
        b = d.find("boot")
        if b is None:
            continue
        kind = d.get("device", d.tag) if d.tag == "disk" else d.tag
        if best is None or int(b.get("order")) < best[0]:
            best = (int(b.get("order")), kind)
    return best[1] if best else None


def empty(cdrom):
    """No medium: no <source>, or one without file/pool/volume (a running
    domain keeps <source index=N/>)."""
    src = cdrom.find("source")
    return src is None or not ({"file", "pool", "volume"} & set(src.keys()))


def media_volumes():
    out = virsh("vol-list", POOL)
    return sorted(line.split()[0] for line in out.splitlines()
                  if line.split() and line.split()[0].startswith("shiftlab-media-"))


def downloads():
    """(full downloads, not-modified revalidations) of the ISO in the HTTP log."""
    lines = [ln for ln in open(http_log) if "GET /" in ln and ".iso" in ln]
    return (sum('" 200 ' in ln for ln in lines), sum('" 304 ' in ln for ln in lines))


def uuid_of(dom):
    return virsh("domuuid", dom)


root = sushy.Sushy(url, username=user, password=password, verify=ca)
a = root.get_system(f"/redfish/v1/Systems/{uuid_of(dom_a)}")
b = root.get_system(f"/redfish/v1/Systems/{uuid_of(dom_b)}")

# --- deploy: ForceOff -> eject all -> insert -> boot mode -> Cd Once -> On
a.reset_system(sushy.RESET_ON)
check("On: domstate running", domstate(dom_a) == "running", domstate(dom_a))
a.reset_system(sushy.RESET_FORCE_OFF)
check("ForceOff: domstate shut off", domstate(dom_a) == "shut off", domstate(dom_a))
for vm in a.virtual_media.get_members():
    vm.eject_media()
cd = a.virtual_media.get_member(f"{a.path}/VirtualMedia/Cd")
t0 = time.monotonic()
cd.insert_media(iso, inserted=True, write_protected=True)
print(f"     insert took {time.monotonic() - t0:.2f}s")
cd.refresh()
check("Redfish: inserted, Image is the URL", cd.inserted and cd.image == iso, f"{cd.inserted} {cd.image}")
vols = media_volumes()
check("one media volume in the pool", len(vols) == 1, vols)
vol = vols[0] if vols else None
check("first insert downloads once", downloads() == (1, 0), downloads())

a.set_system_boot_options(mode=sushy.BOOT_SOURCE_MODE_BIOS)
a.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
a.refresh()
check("Redfish: Cd Once armed", a.boot.target == sushy.BOOT_SOURCE_TARGET_CD
      and a.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE, f"{a.boot.target} {a.boot.enabled}")
check("Redfish: boot mode Legacy", a.boot.mode == sushy.BOOT_SOURCE_MODE_BIOS, a.boot.mode)
x = dumpxml(dom_a, inactive=True)
check("definition: cdrom first while Once is armed", first_boot(x) == "cdrom", first_boot(x))

a.reset_system(sushy.RESET_ON)
check("On: domstate running", domstate(dom_a) == "running", domstate(dom_a))
live = dumpxml(dom_a)
cds = cdroms(live)
src = cds[0].find("source") if cds else None
check("running domain: cdrom holds the pool volume",
      src is not None and src.get("pool") == POOL and src.get("volume") == vol,
      ET.tostring(cds[0]).decode() if cds else "no cdrom")
check("running domain: cdrom is read-only", bool(cds) and cds[0].find("readonly") is not None)
check("running domain: booted cdrom first", first_boot(live) == "cdrom", first_boot(live))
check("running domain: no firmware=efi (Legacy)", live.find("os").get("firmware") != "efi")
x = dumpxml(dom_a, inactive=True)
check("definition: Once consumed, disk first again", first_boot(x) == "disk", first_boot(x))
a.refresh()
check("Redfish: Once consumed", a.boot.enabled != sushy.BOOT_SOURCE_ENABLED_ONCE, a.boot.enabled)

# --- the same image in a second domain: the cached volume, no second download
for vm in b.virtual_media.get_members():
    vm.eject_media()
cd_b = b.virtual_media.get_member(f"{b.path}/VirtualMedia/Cd")
t0 = time.monotonic()
cd_b.insert_media(iso, inserted=True, write_protected=True)
print(f"     cached insert took {time.monotonic() - t0:.2f}s")
check("re-insert: no second download (HTTP 304)", downloads() == (1, 1), downloads())
check("re-insert: still one media volume", media_volumes() == [vol], media_volumes())
src_b = cdroms(dumpxml(dom_b, inactive=True))[0].find("source")
check("re-insert: second domain uses the same volume",
      src_b is not None and src_b.get("volume") == vol)
cd_b.eject_media()
check("eject from B: volume kept (A still uses it)", media_volumes() == [vol], media_volumes())

# --- the next start boots from disk: Once was consumed
a.reset_system(sushy.RESET_FORCE_OFF)
check("ForceOff: domstate shut off", domstate(dom_a) == "shut off", domstate(dom_a))
a.reset_system(sushy.RESET_ON)
check("On again: domstate running", domstate(dom_a) == "running", domstate(dom_a))
check("next start: disk first (Once consumed)", first_boot(dumpxml(dom_a)) == "disk",
      first_boot(dumpxml(dom_a)))

# --- after deployment: eject all -> Hdd Continuous -> ForceRestart
for vm in a.virtual_media.get_members():
    vm.eject_media()
    vm.refresh()
    check("Redfish: ejected", not vm.inserted and not vm.image, f"{vm.inserted} {vm.image}")
check("eject: volume removed from the pool", media_volumes() == [], media_volumes())
for state, x in (("running", dumpxml(dom_a)), ("defined", dumpxml(dom_a, inactive=True))):
    cds = cdroms(x)
    check(f"eject: {state} cdrom drive kept and empty",
          len(cds) == 1 and empty(cds[0]), ET.tostring(cds[0]).decode() if cds else "")
a.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_HDD, enabled=sushy.BOOT_SOURCE_ENABLED_CONTINUOUS)
a.reset_system(sushy.RESET_FORCE_RESTART)
check("ForceRestart: domstate running", domstate(dom_a) == "running", domstate(dom_a))
a.refresh()
check("Redfish: Hdd Continuous", a.boot.target == sushy.BOOT_SOURCE_TARGET_HDD
      and a.boot.enabled == sushy.BOOT_SOURCE_ENABLED_CONTINUOUS, f"{a.boot.target} {a.boot.enabled}")
check("restarted domain: disk first", first_boot(dumpxml(dom_a)) == "disk")
a.reset_system(sushy.RESET_FORCE_OFF)
check("ForceOff: domstate shut off", domstate(dom_a) == "shut off", domstate(dom_a))

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
