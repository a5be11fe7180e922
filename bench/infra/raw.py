#!/usr/bin/env python3
"""The "raw libvirt calls" baseline of bench/infra/run.sh.

    raw.py capture CLUSTER DIR   after `shiftlab create infra`: save what shiftlab
                                 made (pool, network, volumes, Ignition bytes,
                                 domain XML) into DIR/manifest.json
    raw.py create DIR [--cold IMAGE]  recreate it with the minimal sequence of libvirt
                                 calls, one connection, strictly sequential;
                                 prints the seconds the calls took
    raw.py destroy DIR [--cold]  remove it again (--cold: also base image + pool)
    raw.py running PREFIX        print how many domains named PREFIX* are running

The objects are shiftlab's own rendered XML (same names, same MACs, same paths), so
the only difference from `shiftlab create infra` is what shiftlab does around the
calls (spec/plan/Ignition rendering, preflight, ledger, sha256 of the base image,
lookups that make it idempotent) and its parallelism.
"""
import json
import os
import sys
import time
import xml.etree.ElementTree as ET

import libvirt

URI = os.environ.get("LIBVIRT_DEFAULT_URI", "qemu:///system")


def conn():
    return libvirt.open(URI)


def capture(cluster, out):
    c = conn()
    doms = sorted(
        (d for d in c.listAllDomains() if d.name().startswith(cluster + "-")),
        key=lambda d: d.name(),
    )
    if not doms:
        sys.exit(f"no domains of {cluster}")
    m = {"domains": [], "volumes": [], "ignition": []}
    net = c.networkLookupByName("shiftlab-" + cluster)
    m["network"] = net.XMLDesc(libvirt.VIR_NETWORK_XML_INACTIVE)
    m["network_name"] = net.name()
    os.makedirs(os.path.join(out, "ign"), exist_ok=True)
    base = None
    for d in doms:
        x = d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        m["domains"].append({"name": d.name(), "xml": x})
        root = ET.fromstring(x)
        for src in root.findall("./devices/disk/source"):
            if src.get("volume"):
                v = c.storagePoolLookupByName(src.get("pool")).storageVolLookupByName(src.get("volume"))
            elif src.get("file"):
                v = c.storageVolLookupByPath(src.get("file"))
            else:
                continue
            vx = ET.fromstring(v.XMLDesc(0))
            back = vx.find("./backingStore/path")
            m["volumes"].append(
                {
                    "name": v.name(),
                    "capacity": int(vx.find("capacity").text),
                    "format": vx.find("./target/format").get("type"),
                    "backing": back.text if back is not None else None,
                }
            )
            if back is not None:
                base = back.text
            pool = v.storagePoolLookupByVolume()
        for e in root.findall("./sysinfo[@type='fwcfg']/entry"):
            path = e.get("file")
            v = c.storageVolLookupByPath(path)
            dst = os.path.join(out, "ign", v.name())
            with open(path, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
            m["ignition"].append({"name": v.name(), "file": dst})
    m["pool"] = pool.XMLDesc(libvirt.VIR_STORAGE_XML_INACTIVE)
    m["pool_name"] = pool.name()
    bv = c.storageVolLookupByPath(base)
    m["base"] = {"name": bv.name(), "path": base}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(m, f)
    print(f"captured {len(doms)} domains, {len(m['volumes'])} disks, {len(m['ignition'])} Ignition volumes")


def raw_vol(name, size):
    return (
        f"<volume type='file'><name>{name}</name><capacity unit='bytes'>{size}</capacity>"
        "<target><format type='raw'/><permissions><mode>0600</mode></permissions></target></volume>"
    )


def qcow2_vol(name, size, backing):
    b = f"<backingStore><path>{backing}</path><format type='qcow2'/></backingStore>" if backing else ""
    return (
        f"<volume type='file'><name>{name}</name><capacity unit='bytes'>{size}</capacity>"
        f"<allocation unit='bytes'>0</allocation><target><format type='qcow2'/></target>{b}</volume>"
    )


def upload(c, vol, data):
    st = c.newStream(0)
    vol.upload(st, 0, len(data), 0)
    off = 0
    while off < len(data):
        n = st.send(data[off : off + (1 << 20)])
        off += n
    st.finish()


def create(d, cold, image, parallel=False):
    m = json.load(open(os.path.join(d, "manifest.json")))
    ign = {}
    for i in m["ignition"]:
        with open(i["file"], "rb") as f:
            ign[i["name"]] = f.read()
    base_bytes = open(image, "rb").read() if cold else None
    phases = {}
    mark = [time.monotonic()]

    def phase(name):
        # seconds spent since the previous mark, added to this phase
        t = time.monotonic()
        phases[name] = phases.get(name, 0.0) + t - mark[0]
        mark[0] = t

    t0 = mark[0]
    c = conn()
    phase("connect")
    if cold:
        # pool: define, build, start; base image: create, upload (one volume, qcow2
        # bytes streamed into it — the minimum; shiftlab uploads then clones).
        p = c.storagePoolDefineXML(m["pool"], 0)
        p.build(0)
        p.create(0)
        phase("pool")
        bv = p.createXML(raw_vol(m["base"]["name"], len(base_bytes)), 0)
        upload(c, bv, base_bytes)
        phase("base")
    else:
        p = c.storagePoolLookupByName(m["pool_name"])
    n = c.networkDefineXML(m["network"])
    phase("net-define")
    n.create()
    phase("net-start")
    for v in m["volumes"]:
        if v["backing"]:
            p.createXML(qcow2_vol(v["name"], v["capacity"], v["backing"]), 0)
    phase("overlays")
    for name, data in ign.items():
        v = p.createXML(raw_vol(name, len(data)), 0)
        upload(c, v, data)
    phase("ignition")
    doms = [c.defineXML(x["xml"]) for x in m["domains"]]
    phase("dom-define")
    if parallel:
        # the same bound as shiftlab (src/libvirt/parallel.rs): 4 calls in
        # flight, below libvirtd's max_client_requests (5); libvirt-python
        # releases the GIL during each call
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(lambda dom: dom.create(), doms))
    else:
        for dom in doms:
            dom.create()
    phase("dom-start")
    dt = time.monotonic() - t0
    if os.environ.get("RAW_PHASES"):
        with open(os.environ["RAW_PHASES"], "a") as f:
            f.write(json.dumps({"n": len(doms), "cold": cold, "parallel": parallel, "total": dt, **phases}) + "\n")
    print(f"{dt:.3f}")


def destroy(d, cold):
    m = json.load(open(os.path.join(d, "manifest.json")))
    c = conn()
    for x in m["domains"]:
        try:
            dom = c.lookupByName(x["name"])
        except libvirt.libvirtError:
            continue
        if dom.isActive():
            dom.destroy()
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    try:
        n = c.networkLookupByName(m["network_name"])
        if n.isActive():
            n.destroy()
        n.undefine()
    except libvirt.libvirtError:
        pass
    try:
        p = c.storagePoolLookupByName(m["pool_name"])
    except libvirt.libvirtError:
        return
    p.refresh(0)
    names = [v["name"] for v in m["volumes"] if v["backing"]] + [i["name"] for i in m["ignition"]]
    if cold:
        names.append(m["base"]["name"])
    for name in names:
        try:
            p.storageVolLookupByName(name).delete(0)
        except libvirt.libvirtError:
            pass
    if cold:
        p.destroy()
        p.delete(0)
        p.undefine()


def running(prefix):
    c = conn()
    print(sum(1 for d in c.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
              if d.name().startswith(prefix) and d.state()[0] == libvirt.VIR_DOMAIN_RUNNING))


def main(a):
    if len(a) >= 3 and a[0] == "capture":
        capture(a[1], a[2])
    elif len(a) >= 2 and a[0] == "create":
        create(a[1], "--cold" in a, a[a.index("--cold") + 1] if "--cold" in a else None,
               "--parallel" in a)
    elif len(a) >= 2 and a[0] == "destroy":
        destroy(a[1], "--cold" in a)
    elif len(a) == 2 and a[0] == "running":
        running(a[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
