// The agentmesh explorer: a page over this node's own API. Everything an
// agent or a peer wrote reaches the page through textContent, never as
// markup (and the Content Security Policy allows no inline script).
"use strict";

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Replaces `parent`'s children (arrays flattened, empty parts left out). */
function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false));
}

function badge(text, cls) {
  return el("span", { class: "badge " + (cls || "") }, text);
}

function when(unix) {
  if (!unix) return "never";
  return new Date(unix * 1000).toISOString().replace(".000Z", "Z");
}

async function api(method, path, body, headers) {
  const init = { method, headers: Object.assign({ accept: "application/json" }, headers || {}) };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!response.ok) {
    const message = json && json.error ? json.error.message : response.status + " " + response.statusText;
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return { json, headers: response.headers };
}

function showError(e) {
  const p = $("error");
  p.textContent = e ? String(e.message || e) : "";
  p.hidden = !e;
}

function page(name) {
  for (const id of ["search-page", "agent-page", "peers-page", "crawl-page"]) {
    $(id).hidden = id !== name + "-page";
  }
  showError(null);
}

function trustBadges(trust) {
  const out = [badge(trust.level, "level-" + trust.level)];
  const e = trust.evidence || {};
  for (const flag of ["dnssec", "fingerprint", "challenge", "mutual_peer"]) {
    if (e[flag]) out.push(badge(flag.replace("_", " ")));
  }
  // What an untrusted signer claims: shown apart, never as the level.
  if (trust.claimed) {
    out.push(badge("claims " + trust.claimed.level + " (unproven)", "claimed"));
  }
  return out;
}

function claimText(trust) {
  const c = trust.claimed;
  if (!c) return "nothing beyond what this node counts";
  const flags = ["dnssec", "fingerprint", "challenge", "mutual_peer"].filter((f) => c.evidence && c.evidence[f]);
  return c.level + (flags.length ? " (" + flags.join(", ") + ")" : "") + ", claimed by " + c.by.slice(0, 20) +
    "…, a signer this node does not trust; not proven here, not counted";
}

function sourceText(s) {
  if (s.source === "mesh" && s.trust.attested_by && s.trust.attested_by.length) {
    return "mesh, attested by " + s.trust.attested_by.map((f) => f.slice(0, 20) + "…").join(", ");
  }
  return s.source === "crawl" ? "crawled by this node" : s.source === "local" ? "registered here" : s.source;
}

// --- search ---------------------------------------------------------------

function readForm() {
  const q = $("q").value.trim();
  const filters = {};
  const capability = $("capability").value.trim();
  const language = $("language").value.trim();
  const tag = $("tag").value.trim();
  const minTrust = $("min-trust").value;
  if (capability) filters.capabilities = [capability];
  if (language) filters.supported_languages = [language];
  if (tag) filters.tags = [tag];
  if (minTrust) filters.min_trust = minTrust;
  const body = { filters, top: 20, scope: $("scope").value };
  if (q) body.query = q;
  return body;
}

function resultItem(s) {
  const link = el("a", { href: "#/agent/" + encodeURIComponent(s.id), class: "title" }, s.name || s.id);
  const meta = [
    ...trustBadges(s.trust),
    s.score !== undefined ? badge("score " + s.score.toFixed(3)) : null,
    badge(s.source_format),
    s.status ? badge(s.status, s.status === "online" ? "fresh" : "stale") : null,
    s.freshness ? badge(s.freshness.state, s.freshness.state) : null,
  ];
  return el("li", { "data-id": s.id },
    link,
    el("div", { class: "mono" }, s.id),
    el("div", {}, s.description),
    el("div", {}, meta),
    el("div", { class: "muted" }, sourceText(s)),
  );
}

async function search(event) {
  if (event) event.preventDefault();
  const body = readForm();
  const status = $("search-status");
  status.textContent = "Searching…";
  $("results").replaceChildren();
  try {
    const { json, headers } = await api("POST", "/agents/search", body);
    const items = json || [];
    const asked = headers.get("x-agentmesh-peers-asked");
    const answered = headers.get("x-agentmesh-peers-answered");
    const elapsed = headers.get("x-agentmesh-elapsed-ms");
    let text = items.length + (items.length === 1 ? " agent" : " agents");
    if (asked !== null) text += " · asked " + asked + " peers, " + (answered || 0) + " answered";
    if (elapsed !== null) text += " · " + elapsed + " ms";
    status.textContent = text;
    $("results").replaceChildren(...items.map(resultItem));
  } catch (e) {
    status.textContent = "";
    showError(e);
  }
}

// --- agent ------------------------------------------------------------------

function table(rows) {
  return el("table", {}, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v)))));
}

function operations(doc) {
  const ops = doc.operations || doc.capabilities || [];
  if (!Array.isArray(ops) || !ops.length) return null;
  return [
    el("h2", {}, Array.isArray(doc.operations) ? "Operations" : "Capabilities"),
    el("ul", {}, ops.map((op) => el("li", {},
      el("strong", {}, op.name || op.id || "?"), " ", op.description || "",
      op.input_schema || op.inputSchema || op.parameters
        ? el("pre", {}, JSON.stringify(op.input_schema || op.inputSchema || op.parameters, null, 2))
        : null,
    ))),
  ];
}

function chain(report) {
  if (!report) return el("p", { class: "muted" }, "Not crawled by this node: its level counts only what a trusted peer attested; an untrusted signer's evidence is shown as claimed.");
  const rows = report.steps.map((s) => el("tr", {},
    el("td", {}, s.step),
    el("td", {}, badge(s.outcome, "step-" + s.outcome)),
    el("td", {}, s.reason ? el("code", {}, s.reason) : ""),
    el("td", {}, s.detail),
  ));
  return el("table", { "aria-label": "Verification steps" },
    el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "outcome"), el("th", {}, "reason"), el("th", {}, "detail"))),
    el("tbody", {}, rows));
}

function livenessText(l) {
  if (!l) return "not probed";
  return l.state + " (" + l.protocol + "), checked " + when(l.checked_at) + (l.rtt_ms !== undefined && l.rtt_ms !== null ? ", " + l.rtt_ms + " ms" : "");
}

/** Other nodes' signed probe results: "checked live by node X at T",
 * a trusted peer's marked as counted for `alive_within`. */
function checkedByText(checks) {
  if (!checks || !checks.length) return "no other node";
  return checks.map((c) => c.state + " (" + c.protocol + ") by node " + c.node + ", checked " + when(c.checked_at) + ", " + c.rtt_ms + " ms" + (c.trusted ? ", trusted" : ", not trusted: shown, not counted")).join("; ");
}

/** The operations an invocation may name: an AIDIP document's
 * `operations` (or its one implied operation, ""), an A2A card's skills,
 * an ADP document's capabilities offered over chat; none for the rest
 * (an MCP server's tools are listed by the server). */
function invocable(summary, doc) {
  if (summary.source_format === "aidip") {
    if (Array.isArray(doc.operations)) {
      return doc.operations.map((op) => ({ name: op.name, schema: op.inputs, example: exampleOf(op.examples) }));
    }
    if (doc.inputs) return [{ name: "", schema: doc.inputs, example: exampleOf(doc.examples) }];
    return [];
  }
  if (summary.source_format === "a2a" && Array.isArray(doc.skills)) {
    return doc.skills.map((s) => ({ name: s.id, schema: null, example: null }));
  }
  if (summary.source_format === "adp" && Array.isArray(doc.capabilities)) {
    return doc.capabilities
      .filter((c) => Array.isArray(c.interfaces) && c.interfaces.some((i) => String(i).toLowerCase() === "chat"))
      .map((c) => ({ name: c.id, schema: null, example: null }));
  }
  if (summary.source_format === "mcp-registry") return [{ name: null, schema: null, example: null }];
  return [];
}

function exampleOf(examples) {
  return Array.isArray(examples) && examples.length && examples[0].input !== undefined ? examples[0].input : null;
}

/** The form that calls the agent through this node's gateway
 * (`POST /agents/{id}/invoke`); an invoke link
 * (`#/agent/ID?operation=...&input=...`) fills it and runs it. */
function invokeForm(id, summary, doc) {
  const ops = invocable(summary, doc);
  if (!ops.length) return null;
  const isMcp = ops.length === 1 && ops[0].name === null;
  const opField = isMcp
    ? el("input", { id: "invoke-operation", name: "operation", autocomplete: "off", placeholder: "the tool's name" })
    : el("select", { id: "invoke-operation", name: "operation" },
      ops.map((op) => el("option", { value: op.name }, op.name || "(the agent's one operation)")));
  const input = el("textarea", { id: "invoke-input", name: "input", rows: "6", spellcheck: "false" });
  const first = ops[0];
  input.value = JSON.stringify(first.example !== null && first.example !== undefined ? first.example : {}, null, 2);
  const agentToken = el("input", { id: "invoke-agent-token", name: "agent-token", type: "password", autocomplete: "off" });
  const nodeToken = el("input", { id: "invoke-node-token", name: "node-token", type: "password", autocomplete: "off" });
  const result = el("div", { id: "invoke-result", "aria-live": "polite" });
  const form = el("form", { id: "invoke-form", "aria-label": "Invoke this agent" },
    el("label", {}, "Operation", opField),
    el("label", { class: "wide" }, "Input (JSON)", input),
    el("label", {}, "Your token for the agent (optional)", agentToken),
    el("label", {}, "Your credential for this node (optional)", nodeToken),
    el("button", { type: "submit" }, "Invoke"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    invoke(id, result);
  });
  return [el("h2", {}, "Invoke through this node"), form, result];
}

async function invoke(id, result) {
  let input;
  try {
    input = JSON.parse($("invoke-input").value || "null");
  } catch (e) {
    fill(result, el("p", { class: "error" }, "The input is not JSON: " + e.message));
    return;
  }
  const body = { input };
  const op = $("invoke-operation").value;
  if (op) body.operation = op;
  const headers = {};
  if ($("invoke-agent-token").value) headers["agent-authorization"] = "Bearer " + $("invoke-agent-token").value;
  if ($("invoke-node-token").value) headers.authorization = "Bearer " + $("invoke-node-token").value;
  fill(result, el("p", { class: "muted" }, "Calling…"));
  try {
    const { json, headers: answered } = await api("POST", "/agents/" + encodeURIComponent(id) + "/invoke", body, headers);
    const invalid = answered.get("x-agentmesh-output-invalid");
    fill(result,
      el("p", { class: "invoke-ok" }, "Answered in " + (answered.get("x-agentmesh-elapsed-ms") || "?") + " ms"),
      invalid ? el("p", { class: "error" }, "The answer does not match the operation's output schema: " + invalid) : null,
      el("pre", { id: "invoke-output" }, JSON.stringify(json, null, 2)));
  } catch (e) {
    fill(result, el("p", { class: "error", id: "invoke-error" }, (e.status ? e.status + ": " : "") + e.message));
  }
}

async function showAgent(id, query) {
  page("agent");
  $("agent-name").textContent = id;
  $("agent-id").textContent = id;
  const body = $("agent-body");
  fill(body, el("p", { class: "muted" }, "Loading…"));
  try {
    const [{ json: summary }, { json: doc }] = await Promise.all([
      api("GET", "/agents/" + encodeURIComponent(id) + "/summary"),
      api("GET", "/agents/" + encodeURIComponent(id)),
    ]);
    let report = null;
    if (id.startsWith("agent:")) {
      try { report = (await api("GET", "/crawl/" + encodeURIComponent(id.slice(6)))).json; } catch (_) { report = null; }
    }
    let suspension = null;
    try { suspension = (await api("GET", "/agents/" + encodeURIComponent(id) + "/suspension")).json; } catch (_) { suspension = null; }
    $("agent-name").textContent = summary.name || id;
    const f = summary.freshness;
    const r = summary.record;
    const schedule = report && report.schedule;
    fill(body,
      el("p", {}, summary.description),
      el("div", {}, trustBadges(summary.trust)),
      suspension && suspension.suspended ? el("p", { class: "error" }, "Suspended on this node since " + when(suspension.since) + ": " + suspension.reason) : null,
      el("h2", {}, "At a glance"),
      table([
        ["source", sourceText(summary)],
        ["format", summary.source_format],
        ["endpoint", summary.endpoint || "none"],
        ["capabilities", (summary.capabilities || []).join(", ")],
        ["status", summary.status || "not declared"],
        ["freshness", f ? f.state + ", checked " + when(f.checked_at) + ", next " + when(f.next_check_at) : "not tracked here"],
        ["endpoint answered", f && f.endpoint_ok !== undefined ? (f.endpoint_ok ? "yes" : "no") + (f.seen_at ? ", last seen " + when(f.seen_at) : "") : "not probed"],
        ["liveness", livenessText(summary.liveness)],
        ["checked by", checkedByText(summary.checked_by)],
        ["record", r ? "seq " + r.seq + ", signed " + when(r.issued_at) + ", valid until " + when(r.expires_at) : "none"],
        ["signed by", r ? r.signer : "none"],
        ["reasons", (summary.trust.reasons || []).join(", ") || "none"],
        ["claimed", claimText(summary.trust)],
      ]),
      el("h2", {}, "Verification chain"),
      chain(report),
      schedule ? el("p", { class: "muted" }, "Next visit " + when(schedule.next_at) + "; failures in a row: " + schedule.failures) : null,
      operations(doc),
      invokeForm(id, summary, doc),
      el("h2", {}, "Document"),
      el("pre", {}, JSON.stringify(doc, null, 2)),
    );
    $("main").focus();
    // An invoke link fills the form and runs it.
    const params = new URLSearchParams(query || "");
    if ($("invoke-form") && (params.has("operation") || params.has("input"))) {
      if (params.has("operation")) $("invoke-operation").value = params.get("operation");
      if (params.has("input")) $("invoke-input").value = params.get("input");
      await invoke(id, $("invoke-result"));
    }
  } catch (e) {
    fill(body);
    showError(e);
  }
}

// --- peers and crawl ---------------------------------------------------------

async function showPeers() {
  page("peers");
  const body = $("peers-body");
  fill(body, el("p", { class: "muted" }, "Loading…"));
  try {
    const { json } = await api("GET", "/peers");
    const peers = json.peers || [];
    const refused = json.records && json.records.refused ? json.records.refused : {};
    const witness = json.witness;
    const caught = witness ? witness.equivocated || [] : [];
    fill(body,
      el("p", {}, peers.length + " connected peers; records accepted from peers: " + (json.records ? JSON.stringify(json.records.accepted) : "0")),
      el("table", { "aria-label": "Connected peers" },
        el("thead", {}, el("tr", {}, el("th", {}, "peer"), el("th", {}, "addresses"), el("th", {}, "provides"), el("th", {}, "version"), el("th", {}, "log"))),
        el("tbody", {}, peers.map((p) => el("tr", {},
          el("td", { class: "mono" }, p.peer_id),
          el("td", { class: "mono" }, (p.addrs || []).join(" ")),
          el("td", {}, (p.provides || []).join(", ") || "–"),
          el("td", {}, p.agent_version || "–"),
          el("td", {}, caught.includes(p.peer_id) ? badge("equivocated", "level-unverified") : "–"),
        )))),
      el("h2", {}, "Records refused, by reason"),
      table(Object.entries(refused).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : String(v)])),
      witnessed(witness, caught),
    );
  } catch (e) {
    fill(body);
    showError(e);
  }
}

// What this node's witness did with its peers' log checkpoints, and the
// peers it caught showing two histories (docs/protocol.md#witnessing).
function witnessed(witness, caught) {
  if (!witness) return null;
  const c = witness.counts || {};
  return [
    el("h2", {}, "Witnessed logs"),
    table([
      ["checkpoints received", String(c.checkpoints || 0)],
      ["cosigned", String(c.cosigned || 0)],
      ["not proven by their log", String(c.unproven || 0)],
      ["cosignatures received", String(c.cosignatures_received || 0)],
      ["records repaired from logs", String(c.repaired || 0)],
    ]),
    caught.length
      ? el("div", { class: "equivocations" },
        el("p", { class: "error" }, caught.length + " peer(s) caught signing two histories of their log; the proofs, which anyone can check offline, are at ",
          el("a", { href: "/log/equivocations" }, "/log/equivocations"), ":"),
        el("ul", {}, caught.map((id) => el("li", { class: "mono", "data-equivocated": id }, id))))
      : el("p", { class: "muted" }, "No peer caught equivocating."),
  ];
}

async function showCrawl() {
  page("crawl");
  const body = $("crawl-body");
  try {
    const { json } = await api("GET", "/health");
    const c = json.crawl;
    if (!c) {
      fill(body, el("p", {}, "This node does not crawl."));
      return;
    }
    const s = c.schedule;
    fill(body, table([
      ["jobs waiting", String(c.jobs_waiting)],
      ["queue room", String(c.capacity)],
      ["domains scheduled", s ? String(s.domains) : "recrawl off"],
      ["due now", s ? String(s.due) : "–"],
      ["next visit", s ? when(s.next_at) : "–"],
      ["records by trust", JSON.stringify(json.records_by_trust || {})],
    ]), el("p", { class: "muted" }, "A domain's latest report and schedule are on its agent's page (agent:DOMAIN)."));
  } catch (e) {
    showError(e);
  }
}

// --- routing -------------------------------------------------------------------

function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const hash = decodeURIComponent(path);
  if (hash.startsWith("agent/")) return showAgent(hash.slice(6), query);
  if (hash === "peers") return showPeers();
  if (hash === "crawl") return showCrawl();
  page("search");
  // A search link (#/search?q=...&capability=...&scope=local) fills the
  // form and runs it.
  if (query) {
    const params = new URLSearchParams(query);
    const fields = { q: "q", capability: "capability", language: "language", tag: "tag", min_trust: "min-trust", scope: "scope" };
    for (const [param, id] of Object.entries(fields)) {
      if (params.has(param)) $(id).value = params.get(param);
    }
    return search();
  }
  return undefined;
}

async function node() {
  try {
    const { json } = await api("GET", "/health");
    $("node").textContent = "node " + json.peer_id.slice(0, 16) + "… · " + json.records + " records · " + json.peers + " peers · v" + json.version;
  } catch (_) {
    $("node").textContent = "";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", search);
  window.addEventListener("hashchange", route);
  route();
  node();
});
