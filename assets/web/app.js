// shiftlab serve's web page: renders /api/clusters and /api/clusters/NAME,
// kept live by /api/clusters/NAME/events (server-sent events), polling when
// those are unavailable. Every value goes into the DOM as text, never as markup.
"use strict";

(function () {
  const main = document.getElementById("main");
  const crumb = document.getElementById("crumb");
  const connection = document.getElementById("connection");
  const announcer = document.getElementById("announce");
  const POLL_MS = 2000;

  // h("tag", {attr: value}, child, ...): an element; strings become text nodes.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function table(caption, headers, rows, attrs) {
    return h("div", { class: "table-wrap" },
      h("table", attrs || {},
        caption ? h("caption", {}, caption) : null,
        h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows)));
  }

  function badge(text) {
    const t = String(text || "unknown");
    const u = t.toUpperCase();
    let cls = "badge";
    if (["UP", "RUNNING", "DONE", "OPEN", "READY", "AVAILABLE"].includes(u) || u.startsWith("UP ")) cls += " ok";
    else if (["DOWN", "SHUT OFF", "CRASHED", "NOLB", "FAILED", "NOT READY", "DEGRADED", "FAILING", "UNREACHABLE"].includes(u) || u.startsWith("DOWN")) cls += " bad";
    else if (["STARTED", "MAINT", "DRAIN", "PAUSED", "REMOVED", "PROGRESSING", "PENDING", "UNKNOWN"].includes(u) || u.startsWith("MAINT")) cls += " warn";
    return h("span", { class: cls }, t);
  }

  // A time as its absolute UTC date and its age: "2026-11-25 10:00:00 UTC (5 min ago)".
  function fmtTime(epoch) {
    if (!epoch) return "—";
    const d = new Date(epoch * 1000);
    if (isNaN(d.getTime())) return "—";
    const utc = d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    return utc + " (" + fmtAge(Date.now() / 1000 - epoch) + ")";
  }

  // An RFC 3339 time from the cluster's API, as fmtTime shows it.
  function fmtDate(rfc3339) {
    if (!rfc3339) return "—";
    return fmtTime(Date.parse(rfc3339) / 1000);
  }

  function fmtAge(s) {
    if (s < 0) return "in the future";
    if (s < 60) return Math.floor(s) + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 172800) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min ago";
    return Math.floor(s / 86400) + " d ago";
  }

  function fmtDuration(s) {
    if (s === null || s === undefined || s < 0) return "—";
    const m = Math.floor(s / 60), r = Math.round(s % 60);
    if (m >= 60) return Math.floor(m / 60) + " h " + (m % 60) + " min";
    return m ? m + " min " + r + " s" : r + " s";
  }

  function setConnection(text) { connection.textContent = text; }

  function announce(lines) {
    if (!lines.length) return;
    announcer.textContent = lines.join(". ") + ".";
  }

  // ---- overview --------------------------------------------------------

  function renderOverview(data) {
    const rows = data.clusters.map((c) => {
      const p = c.install;
      const progress = p
        ? h("span", {},
            h("progress", { max: p.total || 1, value: p.done, "aria-label": "targets done of " + c.cluster }),
            " " + p.done + "/" + p.total + (p.running ? " · running " + p.running : ""))
        : "not started";
      return h("tr", { "data-cluster": c.cluster },
        h("th", { scope: "row" }, h("a", { href: "/clusters/" + encodeURIComponent(c.cluster) }, c.cluster)),
        h("td", {}, c.method),
        h("td", {}, [c.distribution, c.version].filter(Boolean).join(" ")),
        h("td", { class: "num" }, c.nodes_running + "/" + c.nodes_total),
        h("td", {}, progress),
        h("td", { class: "hide-narrow" }, c.error || ""));
    });
    const content = [
      h("h1", {}, "Clusters on this host"),
      data.clusters.length
        ? table(null, ["Cluster", "Method", "Version", "Nodes up", "Install", "Note"], rows, { id: "clusters" })
        : h("p", {}, "No cluster yet: shiftlab create infra -f FILE."),
    ];
    main.replaceChildren(...content);
  }

  // ---- cluster ---------------------------------------------------------

  let previous = null;
  const openConsoles = new Set();

  function changes(prev, cur) {
    if (!prev) return [];
    const out = [];
    const nodeState = (s) => Object.fromEntries(s.nodes.map((n) => [n.name, n.state]));
    const a = nodeState(prev), b = nodeState(cur);
    for (const [n, st] of Object.entries(b)) if (a[n] && a[n] !== st) out.push(n + " is now " + st);
    const backends = (s) => {
      const m = {};
      const lb = s.services && s.services.load_balancer;
      if (lb) for (const f of lb.frontends) for (const be of f.backends) m[f.name + " " + be.node] = be.status;
      return m;
    };
    const c = backends(prev), d = backends(cur);
    for (const [k, st] of Object.entries(d)) if (c[k] && c[k] !== st) out.push("backend " + k + " is now " + st);
    const targets = (s) => Object.fromEntries(((s.install && s.install.targets) || []).map((t) => [t.target, t.status]));
    const e = targets(prev), f = targets(cur);
    for (const [t, st] of Object.entries(f)) if (e[t] && e[t] !== st) out.push("target " + t + " " + st);
    return out;
  }

  function section(id, title, ...body) {
    return h("section", { id: id, "aria-labelledby": id + "-h" }, h("h2", { id: id + "-h" }, title), body);
  }

  function dl(pairs) {
    return h("dl", {}, pairs.filter((p) => p[1] !== undefined && p[1] !== null && p[1] !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }

  function labPicture(s) {
    const lab = s.lab;
    const lb = s.services && s.services.load_balancer;
    const boxes = [
      h("div", { class: "box", id: "network" },
        h("h3", {}, "Network"),
        dl([
          ["name", s.network || lab.network.name],
          ["state", badge(s.network_active ? "active" : "inactive")],
          ["mode", lab.network.mode],
          ["cidr", lab.network.cidr],
          ["gateway", lab.network.gateway],
          ["bridge", lab.network.bridge],
        ])),
      h("div", { class: "box", id: "lb" },
        h("h3", {}, "Load balancer"),
        lb
          ? dl([
              ["haproxy", badge(lb.running ? "running" : "stopped")],
              ["api VIP", lab.api_vip],
              ["ingress VIP", lab.ingress_vip],
              ["bootstrap", lb.bootstrap_removed ? "removed" : "in rotation"],
              ["checks", "every " + lab.health_check.inter_s + " s, down after " + lab.health_check.fall],
            ])
          : h("p", {}, s.services ? "none in this plan" : "not served yet")),
      h("div", { class: "box", id: "bmc" },
        h("h3", {}, "BMC"),
        lab.bmc ? dl([["endpoint", lab.bmc.endpoint], ["user", lab.bmc.username]]) : h("p", {}, "none (method " + lab.method + ")")),
    ];
    const roles = {};
    for (const n of s.nodes) (roles[n.role] = roles[n.role] || []).push(n);
    const order = ["bootstrap", "ctlplane", "master", "worker"];
    const roleNames = Object.keys(roles).sort((a, b) => (order.indexOf(a) + 99) % 99 - (order.indexOf(b) + 99) % 99);
    const roleBoxes = roleNames.map((role) =>
      h("div", { class: "box", "data-role": role },
        h("h3", {}, role + " (" + roles[role].length + ")"),
        h("ul", { class: "nodes" }, roles[role].map((n) => {
          const mismatch = n.leased_ip && n.planned_ip && n.leased_ip !== n.planned_ip;
          return h("li", { class: "node", "data-node": n.name, "data-state": n.state },
            h("div", { class: "name" }, h("span", {}, n.name), badge(n.state)),
            h("div", { class: "addr" + (mismatch ? " mismatch" : "") },
              "planned " + (n.planned_ip || "—") + " · leased " + (n.leased_ip || "—")),
            h("div", { class: "addr" }, n.mac || ""));
        }))));
    return section("lab", "The lab",
      h("div", { class: "lab" }, boxes),
      h("div", { class: "roles" }, roleBoxes));
  }

  function backendsSection(s) {
    const lb = s.services && s.services.load_balancer;
    if (!s.services) return section("backends", "Load balancer backends", h("p", {}, "Not served yet: serve takes the cluster up once infra has written its plan."));
    if (!lb) return section("backends", "Load balancer backends", h("p", {}, "No load balancer in this plan."));
    const rows = [];
    for (const f of lb.frontends) {
      for (const b of f.backends) {
        rows.push(h("tr", { "data-backend": f.name + "/" + b.node, "data-status": b.status },
          h("td", {}, f.name),
          h("td", { class: "hide-narrow" }, f.bind),
          h("th", { scope: "row" }, b.node + (b.bootstrap ? " (bootstrap)" : "")),
          h("td", { class: "hide-narrow" }, b.address),
          h("td", { class: "status" }, badge(b.status)),
          h("td", {}, b.check || "—")));
      }
    }
    return section("backends", "Load balancer backends",
      table("Health of each backend, as HAProxy checks it", ["Frontend", "Listen", "Backend", "Address", "Status", "Check"], rows));
  }

  function timelineSection(s) {
    const i = s.install;
    if (!i) return section("timeline", "Install", h("p", {}, "No install target has run yet."));
    const now = Date.now() / 1000;
    const starts = i.targets.map((t) => t.started || t.at).filter(Boolean);
    const t0 = starts.length ? Math.min(...starts) : now;
    const ends = i.targets.map((t) => t.finished || (t.status === "started" ? now : t.at)).filter(Boolean);
    const span = Math.max(1, (ends.length ? Math.max(...ends) : now) - t0);
    const running = i.targets.find((t) => t.status === "started");
    const rows = i.targets.map((t) => {
      const start = t.started;
      const end = t.finished || (t.status === "started" ? now : null);
      const dur = start && end ? end - start : null;
      const bar = h("div", { class: "bar", "aria-hidden": "true" });
      if (start) {
        const span_ = h("span", {});
        span_.style.left = (100 * (start - t0) / span).toFixed(2) + "%";
        span_.style.width = (100 * Math.max(0, (end || start) - start) / span).toFixed(2) + "%";
        bar.append(span_);
      }
      return h("tr", { "data-target": t.target, "data-state": t.status, "aria-current": t.status === "started" ? "step" : null },
        h("th", { scope: "row" }, t.target),
        h("td", {}, badge(t.status)),
        h("td", { class: "num" }, fmtTime(start || (t.status !== "pending" ? t.at : null))),
        h("td", { class: "num" }, fmtDuration(dur)),
        h("td", { class: "hide-narrow" }, bar),
        h("td", { class: "hide-narrow note" }, t.note || ""));
    });
    const flow = i.flow ? "flow " + i.flow : "flow not recorded";
    return section("timeline", "Install",
      h("p", { class: "sub", id: "running-now" },
        running ? ["Running now: ", h("strong", {}, running.target)] :
          (i.targets.every((t) => t.status === "done") ? "Every target is done." : "Nothing is running.")),
      table("Targets (" + flow + ")", ["Target", "State", "Started", "Duration", "Timeline", "Note"], rows, { id: "targets" }));
  }

  let ptrOpen = false;

  function dnsSection(s) {
    const hd = s.services && s.services.host_dns;
    const row = (r) => h("tr", {}, h("td", {}, r.name), h("td", {}, r.type), h("td", {}, r.value));
    const ptr = s.lab.dns.filter((r) => r.type === "PTR");
    // The PTR records mirror the A records: collapsed, kept open across updates.
    const more = ptr.length ? h("details", { id: "dns-ptr-details", open: ptrOpen },
      h("summary", {}, ptr.length + " PTR records"),
      table(null, ["Name", "Type", "Value"], ptr.map(row), { id: "dns-ptr" })) : null;
    if (more) more.addEventListener("toggle", () => { ptrOpen = more.open; });
    return section("dns", "DNS records",
      hd ? h("p", { class: "sub" }, "Host DNS: ", badge(hd.configured ? "configured" : "not configured"),
        hd.mechanism ? " via " + hd.mechanism : "") : null,
      table(null, ["Name", "Type", "Value"], s.lab.dns.filter((r) => r.type !== "PTR").map(row), { id: "dns-records" }),
      more);
  }

  // A command to copy: a read-only field and a button.
  function copyable(id, text, label) {
    const input = h("input", { id: id, type: "text", readonly: true, class: "copy", "aria-label": label, spellcheck: "false" });
    input.value = text;
    const button = h("button", { type: "button", "aria-label": "Copy: " + label }, "Copy");
    button.addEventListener("click", async () => {
      input.select();
      try {
        if (navigator.clipboard && window.isSecureContext) await navigator.clipboard.writeText(text);
        else document.execCommand("copy");
        button.textContent = "Copied";
      } catch (e) {
        button.textContent = "Select and copy";
      }
    });
    return h("span", { class: "copyable" }, input, button);
  }

  function condText(c) {
    if (!c) return "";
    return [c.reason, c.message].filter(Boolean).join(": ");
  }

  function healthSection(s) {
    const p = s.health || { state: "no_kubeconfig" };
    const title = "Cluster health";
    if (p.state === "no_kubeconfig") {
      return section("health", title, h("p", { class: "sub", id: "health-state" }, "No admin kubeconfig yet: the installer writes it (create manifests)."));
    }
    if (p.state === "checking") {
      return section("health", title, h("p", { class: "sub", id: "health-state" }, "Asking the API…"));
    }
    if (p.state === "unreachable") {
      return section("health", title, h("p", { class: "problem", id: "health-state" }, "API not reachable: " + p.reason));
    }
    const v = p.version;
    const cv = v ? h("div", { class: "box", id: "cluster-version" },
      h("h3", {}, "ClusterVersion"),
      dl([
        ["desired", v.desired || "—"],
        ["available", v.available ? [badge(v.available.status === "True" ? "available" : "not available"), " since " + fmtDate(v.available.since)] : "—"],
        ["progressing", v.progressing ? [badge(v.progressing.status === "True" ? "progressing" : "no"), " " + (v.progressing.message || "")] : "—"],
        ["failing", v.failing && v.failing.status === "True" ? [badge("failing"), " " + condText(v.failing)] : "no"],
        ["last completed", v.completed ? v.completed + " at " + fmtDate(v.completed_at) : "none yet"],
      ])) : h("p", { class: "sub", id: "cluster-version" }, "No ClusterVersion: not an OpenShift API.");
    const ops = p.operators.map((o) => h("tr", { "data-operator": o.name, "data-degraded": o.degraded ? "True" : "False", "data-progressing": o.progressing ? "True" : "False" },
      h("th", { scope: "row" }, o.name),
      h("td", {}, o.degraded ? badge("degraded") : null, o.progressing ? badge("progressing") : null),
      h("td", { class: "num" }, fmtDate((o.degraded || o.progressing).since)),
      h("td", { class: "note" }, [condText(o.degraded), condText(o.progressing)].filter(Boolean).join(" · "))));
    const opsPart = ops.length
      ? table("Degraded or progressing operators (" + ops.length + " of " + p.operators_total + ")", ["Operator", "State", "Since", "Message"], ops, { id: "operators" })
      : h("p", { class: "sub", id: "operators" }, p.operators_total ? "All " + p.operators_total + " cluster operators are settled (none degraded or progressing)." : "No ClusterOperators listed.");
    const nodes = p.nodes.map((n) => {
      const ready = n.ready ? n.ready.status : "Unknown";
      return h("tr", { "data-health-node": n.name, "data-ready": ready },
        h("th", { scope: "row" }, n.name),
        h("td", {}, n.roles.join(", ") || "—"),
        h("td", {}, badge(ready === "True" ? "ready" : ready === "False" ? "not ready" : "unknown")),
        h("td", { class: "num" }, fmtDate(n.ready && n.ready.since)),
        h("td", { class: "hide-narrow note" }, n.ready && n.ready.status !== "True" ? condText(n.ready) : ""));
    });
    const csrs = p.pending_csrs.map((c) => h("tr", { "data-csr": c.name },
      h("th", { scope: "row" }, c.name),
      h("td", {}, c.requestor),
      h("td", { class: "hide-narrow" }, c.signer),
      h("td", { class: "num" }, fmtDate(c.created))));
    return section("health", title,
      h("p", { class: "sub", id: "health-state" }, "As the API reports it (oc get clusterversion,co,nodes,csr)."),
      cv, opsPart,
      table("Nodes", ["Node", "Roles", "Ready", "Since", "Why"], nodes, { id: "health-nodes" }),
      csrs.length
        ? table("Pending certificate signing requests (oc adm certificate approve NAME)", ["CSR", "Requestor", "Signer", "Created"], csrs, { id: "pending-csrs" })
        : h("p", { class: "sub", id: "pending-csrs" }, "No pending CSR."));
  }

  function accessSection(s) {
    const http = s.services && s.services.http;
    return section("access", "Access",
      h("div", { class: "box" }, dl([
        ["console", h("a", { href: s.lab.console_url, rel: "noreferrer" }, s.lab.console_url)],
        ["kubeconfig", s.lab.kubeconfig ? h("code", {}, s.lab.kubeconfig) : "not written yet"],
        ["shell", s.lab.kubeconfig_export ? copyable("kubeconfig-export", s.lab.kubeconfig_export, "export KUBECONFIG line") : null],
        ["oc login", copyable("oc-login", s.lab.oc_login, "oc login command (asks for the user's password)")],
        ["artifacts", http && http.url ? http.url : "not served"],
        ["serve", s.services ? badge(s.services.serve_running ? "running" : "not running") : "not serving this cluster yet"],
      ])));
  }

  function fmtBytes(n) {
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if (n < 1024) return n + " B";
    let v = n / 1024, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return v.toFixed(1) + " " + units[u];
  }

  // The lab's storage (planned, and as the API lists it) and its users: names
  // and roles only, never a password (the JSON carries none).
  function storageSection(s) {
    const st = s.storage;
    const classRow = (src) => (c) => h("tr", { "data-storage-class": c.name, "data-source": src },
      h("th", { scope: "row" }, c.name),
      h("td", {}, c.provisioner),
      h("td", {}, c.default ? badge("default") : ""),
      h("td", {}, src));
    const api = s.health && s.health.state === "ok" ? s.health.storage_classes || [] : [];
    const rows = (st ? st.storage_classes.map(classRow("plan")) : []).concat(api.map(classRow("API")));
    const e = st && st.export;
    const u = e && e.usage;
    const users = (s.users || []).map((x) => h("tr", { "data-user": x.name, "data-admin": x.admin ? "true" : "false" },
      h("th", { scope: "row" }, x.name),
      h("td", {}, x.admin ? badge("cluster-admin") : "")));
    return section("storage", "Storage and users",
      h("p", { class: "sub", id: "storage-kind" }, st ? "storage: " + st.kind : "No storage in this plan (storage: none)."),
      rows.length ? table("StorageClasses", ["Name", "Provisioner", "Default", "From"], rows, { id: "storage-classes" }) : null,
      e ? h("div", { class: "box", id: "nfs-export" }, h("h3", {}, "NFS export"), dl([
        ["export", h("code", {}, e.server + ":" + e.path)],
        ["clients", e.clients],
        ["server", badge(e.server_running ? "up" : "down")],
        ["directory", h("code", {}, e.directory)],
        ["used", u ? fmtBytes(u.used_bytes) + (u.used_complete ? "" : " or more") : "not made yet"],
        ["free", u ? fmtBytes(u.free_bytes) + " of " + fmtBytes(u.total_bytes) : null],
      ])) : null,
      st && st.post_install ? copyable("lvms-apply", st.post_install, "after install-complete, create the LVMCluster") : null,
      users.length ? table("Users (passwords in their files, never shown here)", ["User", "Role"], users, { id: "users" }) : null);
  }

  function consolesSection(s) {
    if (s.consoles_withheld) {
      return section("consoles", "Console logs",
        h("p", { class: "sub", id: "consoles-withheld" },
          "Shown only on a page with a token (serve --web-token-file): any local user can open a loopback page."));
    }
    return section("consoles", "Console logs",
      s.consoles.map((c) => {
        const d = h("details", { "data-console": c.node, open: openConsoles.has(c.node) },
          h("summary", {}, c.node + (c.path ? "" : " (no log)")),
          h("pre", { class: "console", tabindex: "0", "aria-label": "console of " + c.node },
            c.lines.length ? c.lines.join("\n") : "(empty)"));
        d.addEventListener("toggle", () => { if (d.open) openConsoles.add(c.node); else openConsoles.delete(c.node); });
        return d;
      }));
  }

  function renderCluster(s) {
    const running = s.nodes.filter((n) => n.state === "running").length;
    const content = [
      h("h1", {}, s.cluster),
      h("p", { class: "sub" }, s.lab.distribution + " " + s.lab.version + " · method " + s.lab.method + " · " +
        s.lab.cluster_domain + " · " + running + "/" + s.nodes.length + " nodes running"),
      healthSection(s), labPicture(s), backendsSection(s), timelineSection(s), dnsSection(s), accessSection(s), storageSection(s), consolesSection(s),
    ];
    const y = window.scrollY;
    main.replaceChildren(...content);
    window.scrollTo(0, y);
    announce(changes(previous, s));
    previous = s;
    document.body.dataset.updated = String(Date.now());
  }

  function renderProblem(msg) {
    const p = h("p", { class: "problem", role: "alert" }, msg);
    if (main.firstChild && main.firstChild.classList && main.firstChild.classList.contains("problem")) main.firstChild.replaceWith(p);
    else main.prepend(p);
  }

  // ---- data ------------------------------------------------------------

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    const body = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  function poll(url, render) {
    const tick = async () => {
      try {
        render(await getJSON(url));
        setConnection("Updated " + new Date().toLocaleTimeString() + " (polling)");
      } catch (e) {
        renderProblem(e.message);
        setConnection("Not updating: " + e.message);
      }
      setTimeout(tick, POLL_MS);
    };
    tick();
  }

  function live(name) {
    const url = "/api/clusters/" + encodeURIComponent(name);
    if (!window.EventSource) return poll(url, renderCluster);
    const es = new EventSource(url + "/events");
    let failures = 0;
    es.addEventListener("cluster", (ev) => {
      failures = 0;
      renderCluster(JSON.parse(ev.data));
      setConnection("Live · updated " + new Date().toLocaleTimeString());
    });
    es.addEventListener("problem", (ev) => {
      const m = JSON.parse(ev.data).error;
      renderProblem(m);
      setConnection("Live · " + m);
    });
    es.onerror = () => {
      failures += 1;
      setConnection("Reconnecting…");
      if (failures >= 3) {
        es.close();
        poll(url, renderCluster);
      }
    };
  }

  const m = location.pathname.match(/^\/clusters\/([^/]+)$/);
  if (m) {
    const name = decodeURIComponent(m[1]);
    document.title = name + " · shiftlab";
    crumb.hidden = false;
    crumb.replaceChildren(h("a", { href: location.pathname, "aria-current": "page" }, name));
    live(name);
  } else {
    document.title = "Clusters · shiftlab";
    poll("/api/clusters", renderOverview);
  }
})();
