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
    if (["UP", "RUNNING", "DONE", "OPEN"].includes(u) || u.startsWith("UP ")) cls += " ok";
    else if (["DOWN", "SHUT OFF", "CRASHED", "NOLB", "FAILED"].includes(u) || u.startsWith("DOWN")) cls += " bad";
    else if (["STARTED", "MAINT", "DRAIN", "PAUSED", "REMOVED"].includes(u) || u.startsWith("MAINT")) cls += " warn";
    return h("span", { class: cls }, t);
  }

  function fmtTime(epoch) {
    if (!epoch) return "—";
    const d = new Date(epoch * 1000);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
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

  function dnsSection(s) {
    const hd = s.services && s.services.host_dns;
    const rows = s.lab.dns.map((r) => h("tr", {}, h("td", {}, r.name), h("td", {}, r.type), h("td", {}, r.value)));
    return section("dns", "DNS records",
      hd ? h("p", { class: "sub" }, "Host DNS: ", badge(hd.configured ? "configured" : "not configured"),
        hd.mechanism ? " via " + hd.mechanism : "") : null,
      table(null, ["Name", "Type", "Value"], rows, { id: "dns-records" }));
  }

  function accessSection(s) {
    const http = s.services && s.services.http;
    return section("access", "Access",
      h("div", { class: "box" }, dl([
        ["console", h("a", { href: s.lab.console_url, rel: "noreferrer" }, s.lab.console_url)],
        ["kubeconfig", s.lab.kubeconfig ? h("code", {}, s.lab.kubeconfig) : "not written yet"],
        ["artifacts", http && http.url ? http.url : "not served"],
        ["serve", s.services ? badge(s.services.serve_running ? "running" : "not running") : "not serving this cluster yet"],
      ])));
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
      labPicture(s), backendsSection(s), timelineSection(s), dnsSection(s), accessSection(s), consolesSection(s),
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
