"""Ironic's sequence through the real sushy client, plus bad requests.

Usage: bmc-sushy.py URL USER PASSWORD CA_FILE SYSTEM_UUID [ISO_URL]
Virtual media steps run when ISO_URL is given (needs a libvirt with
storage upload, i.e. a real libvirtd, not test:///default).
"""
import json
import sys

import requests
import sushy

url, user, password, ca, uuid = sys.argv[1:6]
iso = sys.argv[6] if len(sys.argv) > 6 else None
failures = []
passed = 0


def check(name, cond):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(name)
        print(f"FAIL {name}")


root = sushy.Sushy(url, username=user, password=password, verify=ca)
system = root.get_system(f"/redfish/v1/Systems/{uuid}")
check("system id", system.identity == uuid)

system.reset_system(sushy.RESET_FORCE_OFF)
system.refresh()
check("force off", system.power_state == sushy.POWER_STATE_OFF)

if iso:
    for vm in system.virtual_media.get_members():
        vm.eject_media()
    manager = system.managers[0]
    cd = manager.virtual_media.get_member(f"/redfish/v1/Managers/{uuid}/VirtualMedia/Cd")
    cd.insert_media(iso, inserted=True, write_protected=True)
    cd.refresh()
    check("inserted", cd.inserted and cd.image == iso)

system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE,
                               mode=sushy.BOOT_SOURCE_MODE_UEFI)
system.refresh()
check("boot once armed", system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE)
check("boot mode uefi", system.boot.mode == sushy.BOOT_SOURCE_MODE_UEFI)

system.reset_system(sushy.RESET_ON)
system.refresh()
check("power on", system.power_state == sushy.POWER_STATE_ON)
check("once consumed", system.boot.enabled != sushy.BOOT_SOURCE_ENABLED_ONCE)

if iso:
    for vm in system.virtual_media.get_members():
        vm.eject_media()
        vm.refresh()
        check("ejected", not vm.inserted)
system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_HDD, enabled=sushy.BOOT_SOURCE_ENABLED_CONTINUOUS)
system.reset_system(sushy.RESET_FORCE_RESTART)
system.refresh()
check("hdd continuous", system.boot.target == sushy.BOOT_SOURCE_TARGET_HDD
      and system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_CONTINUOUS)
check("restarted on", system.power_state == sushy.POWER_STATE_ON)

# Bad requests: status codes and Redfish error bodies.
s = requests.Session()
s.verify = ca
auth = (user, password)
sysurl = f"{url}/redfish/v1/Systems/{uuid}"
reset = f"{sysurl}/Actions/ComputerSystem.Reset"
insert = f"{url}/redfish/v1/Managers/{uuid}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
J = {"Content-Type": "application/json"}
cases = [
    ("unknown system", "GET", f"{url}/redfish/v1/Systems/nope", auth, {}, None, 404),
    ("unknown ResetType", "POST", reset, auth, J, '{"ResetType":"Explode"}', 400),
    ("malformed json", "POST", reset, auth, J, '{"ResetType":', 400),
    ("wrong content type", "POST", reset, auth, {"Content-Type": "text/plain"}, '{"ResetType":"On"}', 415),
    ("missing auth", "GET", sysurl, None, {}, None, 401),
    ("wrong password", "GET", sysurl, (user, password + "x"), {}, None, 401),
    ("oversized body", "POST", reset, auth, J, json.dumps({"ResetType": "On", "x": "y" * 200000}), 413),
    ("bad image scheme", "POST", insert, auth, J, '{"Image":"file:///etc/passwd"}', 400),
]
for name, method, u, a, headers, body, want in cases:
    r = s.request(method, u, auth=a, headers=headers, data=body, allow_redirects=False, verify=ca)
    ok = r.status_code == want
    try:
        ok = ok and "@Message.ExtendedInfo" in r.json()["error"]
    except Exception:
        ok = False
    check(f"{name} -> {want} (got {r.status_code})", ok)
r = s.get(f"{url}/redfish/v1/Systems/{uuid}", auth=auth, verify=ca)
check("still serving", r.status_code == 200)

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
