// weir's web console: a client of weir's HTTP API, signed in with a session
// cookie. Everything it shows is written as text nodes, never as markup.
"use strict";

let session = null; // {admin, tenant, csrf, idle_seconds}
let timer = null; // the current page's live refresh

const main = () => document.getElementById("main");

// An element: attributes from `props` (functions for `on…` listeners), then children (text or nodes).
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = session ? session.csrf : "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let answer = null;
  try { answer = text ? JSON.parse(text) : null; } catch (_) { answer = null; }
  if (!response.ok) {
    const message = (answer && answer.error) || `${response.status} ${response.statusText}`;
    if (response.status === 401 && path !== "/console/session") { session = null; signIn(message); }
    throw new ApiError(response.status, message);
  }
  return answer;
}

const enc = encodeURIComponent;
const size = (bytes) => (bytes < 1024 ? `${bytes} B` : bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`);
const when = (ms) => (ms === null || ms === undefined ? "–" : new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z"));
const say = (text) => { document.getElementById("status").textContent = text; };

function setPage(title, ...content) {
  document.title = `${title} · weir`;
  main().replaceChildren(el("h1", {}, title), ...content);
}

function failure(e) {
  if (e instanceof ApiError && e.status === 401) return;
  main().append(el("p", { class: "error", role: "alert" }, e.message));
}

// Fetches with `fetch_` now and every `seconds` while the page stays, and
// shows what it got with `show`, only when it changed (so focus and
// selection stay where they are between changes).
function live(seconds, fetch_, show) {
  let last = null;
  const run = () => fetch_().then((got) => {
    const now = JSON.stringify(got);
    if (now !== last) {
      last = now;
      // What the reader opened stays open.
      const open = new Set(Array.from(main().querySelectorAll("details[open] > summary"), (s) => s.textContent));
      show(got);
      main().querySelectorAll("details > summary").forEach((s) => { if (open.has(s.textContent)) s.parentElement.open = true; });
    }
    say(`updated ${new Date().toLocaleTimeString()}`);
  }).catch(failure);
  run();
  timer = setInterval(run, seconds * 1000);
}

// A table, in a region that scrolls sideways on a narrow screen (and so
// takes the keyboard's focus, to scroll it with the arrow keys).
function table(headings, rows, caption) {
  const label = caption || `table of ${headings.filter(Boolean).slice(0, 3).join(", ")}`;
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": label }, el("table", {},
    caption ? el("caption", { class: "muted" }, caption) : null,
    el("thead", {}, el("tr", {}, headings.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows)));
}

function facts(pairs) {
  return el("dl", {}, pairs.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v === null ? "–" : v)]));
}

function confirmAnd(label, question, action, danger) {
  return el("button", {
    type: "button", class: danger ? "danger" : null,
    onclick: async (event) => {
      if (!window.confirm(question)) return;
      event.target.disabled = true;
      try { await action(); } catch (e) { failure(e); } finally { event.target.disabled = false; }
    },
  }, label);
}

// ---- sign-in ----

function signIn(reason) {
  clearInterval(timer);
  document.getElementById("nav").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("who").textContent = "";
  const input = el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, "aria-describedby": "token-help" });
  const message = el("p", { class: "error", role: "alert", id: "sign-in-error" }, reason || "");
  const form = el("form", {
    class: "sign-in",
    onsubmit: async (event) => {
      event.preventDefault();
      const token = input.value;
      input.value = ""; // the token is not kept in the page
      try {
        session = await api("POST", "/console/session", { token });
        signedIn();
      } catch (e) { message.textContent = e.message; input.focus(); }
    },
  },
  el("label", { for: "token" }, "Token"), input,
  el("p", { id: "token-help", class: "muted" }, "A tenant's token (weir tenant create gives one) or the admin token. It is exchanged for a session and not stored in the page."),
  el("button", { type: "submit" }, "Sign in"), message);
  setPage("Sign in", form);
  input.focus();
}

function signedIn() {
  document.getElementById("nav").hidden = session.admin;
  document.getElementById("sign-out").hidden = false;
  document.getElementById("who").textContent = session.admin ? "admin" : `tenant ${session.tenant}`;
  route();
}

async function signOut() {
  try { await api("DELETE", "/console/session"); } catch (_) { /* ended already */ }
  session = null;
  history.replaceState(null, "", "#/"); // no hashchange: the page is drawn once, here
  signIn("Signed out.");
}

// ---- publishers ----

function stateCell(p) {
  return el("td", {}, el("span", { class: `state-${p.state}` }, p.state), p.condition ? el("div", { class: "muted" }, p.condition) : null);
}

function publishers() {
  const body = el("div", {});
  setPage("Publishers", body);
  live(2, () => api("GET", "/v1/publishers"), (list) => {
    if (list.length === 0) {
      body.replaceChildren(el("p", {}, "No publishers yet: register one with ", el("code", {}, "weir publisher register"), "."));
      return;
    }
    body.replaceChildren(table(["Publisher", "State", "Lag", "Messages/s", "Rows committed, last 15 min", "Last batch", "Table", "Plugin"], list.map((p) =>
      el("tr", {},
        el("td", {}, el("a", { href: `#/publishers/${enc(p.collection)}/${enc(p.name)}` }, `${p.collection}/${p.name}`)),
        stateCell(p),
        el("td", { class: "num", title: "messages behind, summed over the nodes holding its partitions" }, p.lag === null || p.lag === undefined ? "–" : p.lag),
        el("td", { class: "num", title: "messages its committed batches took in over the last 5 minutes, per second" }, p.messages_per_s),
        el("td", {}, activity(p.activity)),
        el("td", {}, p.last_batch ? `${when(p.last_batch.started_at_ms)} ${p.last_batch.status}` : "none yet"),
        el("td", {}, el("a", { href: `#/tables/${p.output_table.split("/").map(enc).join("/")}` }, p.output_table)),
        el("td", {}, el("code", { title: p.plugin }, p.plugin.slice(0, 19))))), `${list.length} publishers`));
  });
}

// Bars for `values`, oldest first, each with its title; `label` says what they are.
function bars(values, titles, label, size) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", size === "small" ? "chart small" : "chart");
  svg.setAttribute("viewBox", "0 0 400 90");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const most = Math.max(1, ...values);
  const width = 400 / Math.max(values.length, 1);
  values.forEach((value, i) => {
    const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    const height = Math.max((value / most) * 86, value > 0 ? 2 : 0);
    bar.setAttribute("x", String(i * width + 1));
    bar.setAttribute("width", String(Math.max(width - 2, 1)));
    bar.setAttribute("y", String(88 - height));
    bar.setAttribute("height", String(height));
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = titles[i];
    bar.append(title);
    svg.append(bar);
  });
  return svg;
}

// A publisher's rows committed a minute at a time over the last minutes.
function activity(a) {
  const minute = (i) => new Date(a.since_ms + i * a.minute_ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const rows = a.rows.reduce((x, y) => x + y, 0);
  const messages = a.messages.reduce((x, y) => x + y, 0);
  return bars(a.rows, a.rows.map((r, i) => `${minute(i)}: ${r} rows committed, ${a.messages[i]} messages taken in`),
    `${rows} rows committed and ${messages} messages taken in over the last ${a.rows.length} minutes`, "small");
}

// Rows committed per batch over the last batches, oldest first, as bars.
function chart(executions) {
  const done = executions.filter((e) => e.status === "committed").reverse();
  const most = Math.max(1, ...done.map((e) => e.rows_out));
  return bars(done.map((e) => e.rows_out), done.map((e) => `#${e.id} at ${when(e.started_at_ms)}: ${e.rows_out} rows`),
    `rows committed by the last ${done.length} batches, at most ${most}`);
}

// What the plugin logged during a batch, folded.
function pluginLog(log) {
  const lines = (log && log.lines) || [];
  if (lines.length === 0) return "";
  return el("details", {}, el("summary", {}, `${lines.length} lines`),
    el("pre", {}, lines.map((l) => `${String(l.level).toLowerCase()} ${String(l.source).toLowerCase()} ${l.message}`).join("\n")));
}

function workerText(w) {
  if (w.state === "consuming") return w.partitions && w.partitions.length ? `consuming (partitions ${w.partitions.join(", ")})` : "consuming (joining the consumer group)";
  if (w.state === "failed") return `failed: ${w.error}`;
  return w.state;
}

function publisher(collection, name) {
  const base = `/v1/collections/${enc(collection)}/publishers/${enc(name)}`;
  const summary = el("div", {});
  const runs = el("div", {});
  const actions = el("div", { class: "actions" },
    confirmAnd("Pause", `Pause ${collection}/${name}? Its open batch is committed first.`, async () => { await api("POST", `${base}/pause`); say("paused"); }),
    confirmAnd("Resume", `Resume ${collection}/${name}?`, async () => { await api("POST", `${base}/resume`); say("resumed"); }),
    confirmAnd("Delete", `Delete publisher ${collection}/${name}? Its table stays.`, async () => { await api("DELETE", base); location.hash = "#/"; }, true),
    el("a", { href: `#/dead-letters/${enc(collection)}/${enc(name)}` }, "Dead letters"));
  const about = el("div", {});
  setPage(`${collection}/${name}`, actions, summary, about, el("h2", {}, "Batches"), runs);
  aboutPublisher(base, collection, about);
  live(3, () => Promise.all([api("GET", base), api("GET", `${base}/executions?limit=50`)]), ([s, executions]) => {
    const trouble = [];
    if (s.retrying) trouble.push(`retrying a batch: attempt ${s.retrying.attempt} of ${s.retrying.of} failed: ${s.retrying.error}`);
    if (s.broker_refused) trouble.push(`brokers refuse this worker since ${when(s.broker_refused.since_ms)}: ${s.broker_refused.error}`);
    if (s.broker_unreachable) trouble.push(`brokers unreachable since ${when(s.broker_unreachable.since_ms)}: ${s.broker_unreachable.error}`);
    if (s.schema_registry && s.schema_registry.waiting) trouble.push(`waiting for the registry: ${s.schema_registry.waiting}`);
    if (s.table_log) trouble.push(`Delta log behind: ${s.table_log.unlogged} committed versions not in it yet`);
    summary.replaceChildren(facts([
      ["worker", el("span", { class: `state-${s.worker.state}` }, workerText(s.worker))],
      ...trouble.map((t) => ["trouble", el("span", { class: "error" }, t)]),
      ["lag", s.lag === null ? `unknown: ${s.lag_error}` : `${s.lag} messages`],
      ["topic", `${s.topic} (${s.data_format})`],
      ["output table", el("a", { href: `#/tables/${s.output_table.split("/").map(enc).join("/")}` }, s.output_table)],
      ["rollover", `${s.time_window_seconds} s, ${s.size_rollover_bytes === null ? "no size limit" : `${s.size_rollover_bytes >> 20} MiB`}, ${s.messages_rollover === null ? "no message count" : `${s.messages_rollover} messages`} (first wins; ceiling ${s.flush_ceiling_seconds} s)`],
      ["nodes", (s.nodes || []).map((n) => `${n.node}: ${(n.partitions || []).join(", ")}`).join("; ") || null],
    ]), el("details", {}, el("summary", {}, "Declaration"), el("pre", { class: "declaration" }, s.declaration)),
    el("h2", {}, "Rows committed, last batches"), chart(executions));
    runs.replaceChildren(executions.length === 0 ? el("p", {}, "No batches yet.") :
      table(["#", "Status", "Rollover", "Started", "Rows in", "Rows out", "Dead letters", "Version", "ms (plugin / commit)", "Error", "Plugin log"], executions.map((e) =>
        el("tr", {},
          el("td", {}, String(e.id)), el("td", {}, e.status), el("td", {}, e.rollover_reason), el("td", {}, when(e.started_at_ms)),
          el("td", { class: "num" }, e.rows_in), el("td", { class: "num" }, e.rows_out), el("td", { class: "num" }, e.dead_letters),
          el("td", {}, e.table_version === null ? "–" : e.table_version),
          el("td", { class: "num" }, `${Math.round(e.timings_ms.publish)} / ${Math.round(e.timings_ms.commit)}`),
          el("td", {}, e.error || ""), el("td", {}, pluginLog(e.plugin_log))))));
  });
}

// What a publisher runs and reads from: its plugin's module and its
// collection's connection (which the API gives with every secret redacted).
async function aboutPublisher(base, collection, into) {
  try {
    const [s, c, modules] = await Promise.all([api("GET", base), api("GET", `/v1/collections/${enc(collection)}`), api("GET", "/v1/plugins")]);
    const hex = (digest) => String(digest).replace(/^sha256:/, "");
    const m = modules.find((x) => hex(x.sha256) === hex(s.plugin)) || {};
    into.replaceChildren(el("h2", {}, "Plugin and connection"), facts([
      ["plugin", el("code", {}, s.plugin)],
      ["pushed as", (m.names || []).join(", ") || null],
      ["language", m.language || "not recorded"],
      ["world", m.contract ? `weir:publisher@${m.contract}` : "not recorded"],
      ["size", m.size === undefined ? null : `${m.size} bytes`],
      ["pushed", when(m.created_at_ms)],
      ["connection", c.connection ? el("pre", { class: "declaration" }, JSON.stringify(c.connection, null, 2)) : "none: the collection has no connection"],
    ]));
  } catch (e) {
    // Not found: the page's live part says so already.
    if (!(e instanceof ApiError && e.status === 404)) failure(e);
  }
}

// ---- dead letters ----

function bytesText(text, base64) {
  if (text !== null && text !== undefined) return el("pre", {}, text);
  if (base64 === null || base64 === undefined) return el("span", { class: "muted" }, "none");
  const bytes = atob(base64);
  const hex = Array.from(bytes, (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join(" ");
  return el("pre", { title: "not UTF-8: shown as hex" }, hex);
}

function deadLetters(collection, name, query) {
  const base = `/v1/collections/${enc(collection)}/publishers/${enc(name)}/dead-letters`;
  const reason = el("input", { id: "reason", name: "reason", type: "search", value: query.get("reason") || "" });
  const since = el("input", { id: "since", name: "since", type: "datetime-local", value: query.get("since") || "" });
  const list = el("div", {});
  const form = el("form", {
    class: "actions",
    onsubmit: (event) => {
      event.preventDefault();
      const q = new URLSearchParams();
      if (reason.value) q.set("reason", reason.value);
      if (since.value) q.set("since", since.value);
      location.hash = `#/dead-letters/${enc(collection)}/${enc(name)}?${q}`;
    },
  }, el("label", { for: "reason" }, "Reason contains", reason), el("label", { for: "since" }, "Since (UTC)", since), el("button", { type: "submit" }, "Filter"));
  setPage(`Dead letters of ${collection}/${name}`, el("p", {}, el("a", { href: `#/publishers/${enc(collection)}/${enc(name)}` }, "Back to the publisher")), form, list);
  const q = new URLSearchParams({ limit: "200" });
  if (reason.value) q.set("reason", reason.value);
  if (since.value) q.set("since_ms", String(Date.parse(`${since.value}Z`)));
  api("GET", `${base}?${q}`).then((letters) => {
    if (letters.length === 0) { list.replaceChildren(el("p", {}, "No dead letters match.")); return; }
    list.replaceChildren(table(["Partition", "Offset", "At", "Key", "Headers", "Reason", "Message"], letters.map((d) =>
      el("tr", { class: "dead-letter" },
        el("td", { class: "num" }, d.partition), el("td", { class: "num" }, d.offset), el("td", {}, when(d.timestamp_ms ?? d.at_ms)),
        el("td", {}, bytesText(d.key_text, d.key_base64)),
        el("td", {}, d.headers.map((h) => el("div", {}, `${h.key}: `, bytesText(h.value_text, h.value_base64)))),
        el("td", { class: "error" }, d.error),
        el("td", { class: "payload" }, bytesText(d.value_text, d.value_base64)))), `${letters.length} dead letters (at most 200 shown)`));
  }).catch(failure);
}

// ---- tables ----

function tables() {
  const body = el("div", {});
  setPage("Tables", body);
  api("GET", "/v1/collections").then(async (collections) => {
    const rows = [];
    for (const c of collections) {
      for (const t of await api("GET", `/v1/collections/${enc(c.name)}/tables`)) {
        rows.push(el("tr", {}, el("td", {}, el("a", { href: `#/tables/${enc(c.name)}/${enc(t.name)}` }, `${c.name}/${t.name}`))));
      }
    }
    body.replaceChildren(rows.length ? table(["Table"], rows) : el("p", {}, "No tables yet: a publisher's first commit makes its table."));
  }).catch(failure);
}

function tablePage(collection, name, query) {
  const base = `/v1/collections/${enc(collection)}/tables/${enc(name)}`;
  const about = el("div", {});
  const preview = el("div", {});
  const versions = el("div", {});
  const files = el("div", {});
  setPage(`${collection}/${name}`, about, el("h2", {}, "Preview"), preview, el("h2", {}, "Files"), files, el("h2", {}, "Versions"), versions);
  const version = query.get("version");
  const limit = Math.min(Number(query.get("limit") || "20"), 10000);
  const offset = Number(query.get("offset") || "0");
  const filesFrom = Number(query.get("files") || "0");
  const at = version ? `version=${enc(version)}&` : "";
  const shown = Number(query.get("versions") || "50");
  // This page's address with `changes` to its query.
  const link = (changes) => {
    const q = new URLSearchParams(query);
    for (const [k, v] of Object.entries(changes)) q.set(k, String(v));
    return `#/tables/${enc(collection)}/${enc(name)}?${q}`;
  };
  Promise.all([api("GET", base), api("GET", `${base}/schema?${at}`), api("GET", `${base}/versions?limit=${shown}`)]).then(async ([t, schema, list]) => {
    const location_ = t.location;
    about.replaceChildren(facts([
      ["format", t.format === "delta+iceberg" ? "Delta Lake and Apache Iceberg" : "Delta Lake"],
      ["version", String(t.version)], ["rows", String(t.rows)], ["files", `${t.files} (${size(t.bytes)})`],
      ["partition_by", t.partition_by.length ? t.partition_by.join(", ") : "not partitioned"],
      ["location", el("code", {}, location_)],
      ["DuckDB", el("pre", {}, `SELECT * FROM delta_scan('${location_}');`)],
      ["Polars", el("pre", {}, `pl.read_delta("${location_}")`)],
      ["pandas", el("pre", {}, `deltalake.DeltaTable("${location_}").to_pandas()`)],
      ["Iceberg", t.iceberg ? el("code", {}, t.iceberg.identifier) : undefined],
    ]), el("h2", {}, "Schema"), table(["Column", "Type", "Nullable"], schema.columns.map((c) => el("tr", {}, el("td", {}, c.name), el("td", {}, c.type), el("td", {}, c.nullable ? "yes" : "no")))),
    el("div", { class: "actions" }, confirmAnd("Vacuum (keep 10 versions)", `Vacuum ${collection}/${name}, keeping its last 10 versions readable? Files only older versions read are deleted.`, async () => {
      const done = await api("POST", `${base}/vacuum`, { keep_versions: 10 });
      say(`vacuumed: ${JSON.stringify(done)}`);
    }, true)));
    const [sample, held] = await Promise.all([
      api("GET", `${base}/sample?${at}offset=${offset}&limit=${limit}`),
      api("GET", `${base}/files?${at}offset=${filesFrom}&limit=100`)]);
    const columns = schema.columns.map((c) => c.name);
    const cell = (v) => (v === null || v === undefined ? "null" : typeof v === "object" ? JSON.stringify(v) : String(v));
    const last = offset + sample.rows.length;
    const pages = [
      offset > 0 ? el("a", { href: link({ offset: Math.max(offset - limit, 0) }) }, "Previous rows") : null,
      last < sample.rows_in_version ? el("a", { href: link({ offset: last }) }, "Next rows") : null,
      last < sample.rows_in_version && limit < 10000 ? el("a", { href: link({ limit: Math.min(limit * 5, 10000) }) }, "Show more rows") : null,
    ].filter(Boolean);
    preview.replaceChildren(
      el("p", { class: "muted" }, sample.rows.length === 0 ? `version ${sample.version}: no rows from ${offset} (of ${sample.rows_in_version})` : `version ${sample.version}: rows ${offset + 1} to ${last} of ${sample.rows_in_version}`),
      table(columns, sample.rows.map((r) => el("tr", {}, columns.map((c) => el("td", {}, cell(r[c])))))),
      ...(pages.length ? [el("nav", { class: "actions", "aria-label": "rows" }, pages)] : []));
    const partitioned = held.files.some((f) => Object.keys(f.partition).length > 0);
    const fileEnd = filesFrom + held.files.length;
    files.replaceChildren(
      el("p", { class: "muted" }, `version ${held.version}: ${held.count} files, ${size(held.bytes)}${held.count > held.files.length ? `; files ${filesFrom + 1} to ${fileEnd}` : ""}`),
      table(["File", "Size", "Rows", partitioned ? "Partition" : null].filter(Boolean), held.files.map((f) =>
        el("tr", {}, el("td", {}, el("code", {}, f.path)), el("td", { class: "num" }, size(f.size)), el("td", { class: "num" }, f.rows),
          partitioned ? el("td", {}, Object.entries(f.partition).map(([k, v]) => `${k}=${v === null ? "null" : v}`).join(", ")) : null))),
      ...(held.count > held.files.length ? [el("nav", { class: "actions", "aria-label": "files" },
        filesFrom > 0 ? el("a", { href: link({ files: Math.max(filesFrom - 100, 0) }) }, "Previous files") : null,
        fileEnd < held.count ? el("a", { href: link({ files: fileEnd }) }, "Next files") : null)] : []));
    versions.replaceChildren(table(["Version", "Rows", "Files", "Execution", "Committed", ""], list.slice().reverse().map((v) =>
      el("tr", {}, el("td", {}, String(v.version)), el("td", { class: "num" }, v.rows), el("td", { class: "num" }, v.files.length),
        el("td", {}, v.execution === null ? "compaction" : `#${v.execution}`), el("td", {}, when(v.created_at_ms)),
        el("td", {}, el("a", { href: `#/tables/${enc(collection)}/${enc(name)}?version=${v.version}` }, "preview"))))),
      ...(t.version > list.length ? [el("p", {}, `The last ${list.length} of ${t.version} versions. `,
        el("a", { href: `#/tables/${enc(collection)}/${enc(name)}?${version ? `version=${enc(version)}&` : ""}versions=${t.version}` }, "Show all"))] : []));
  }).catch(failure);
}

// ---- admin ----

function tokensOf(tenant) {
  const base = `/v1/tenants/${enc(tenant)}/tokens`;
  const list = el("div", {});
  const shown = el("output", { class: "new-token", "aria-live": "polite" });
  const days = el("input", { id: `expiry-${tenant}`, type: "number", min: "1", placeholder: "never", size: "6" });
  const load = () => api("GET", base).then((tokens) => {
    list.replaceChildren(table(["Token", "Created", "Last used", "Expires", "Revoked", ""], tokens.map((t) =>
      el("tr", { class: "token" }, el("td", {}, el("code", {}, t.id)), el("td", {}, when(t.created_at_ms)), el("td", {}, when(t.last_used_ms)),
        el("td", {}, when(t.expires_at_ms)), el("td", {}, when(t.revoked_at_ms)),
        el("td", {}, t.revoked_at_ms ? "" : confirmAnd("Revoke", `Revoke token ${t.id} of ${tenant}? Requests with it are refused from now on.`, async () => {
          await api("DELETE", `${base}/${enc(t.id)}`);
          await load();
        }, true))))));
  }).catch(failure);
  const create = el("form", {
    class: "actions",
    onsubmit: async (event) => {
      event.preventDefault();
      const body = days.value ? { expires_in_secs: Number(days.value) * 86400 } : {};
      try {
        const made = await api("POST", base, body);
        shown.replaceChildren(`New token for ${tenant} (shown once, copy it now): `, el("code", {}, made.token));
        await load();
      } catch (e) { failure(e); }
    },
  }, el("label", { for: `expiry-${tenant}` }, "Expires in days", days), el("button", { type: "submit" }, "New token"));
  load();
  return el("div", {}, list, create, shown);
}

function admin() {
  const body = el("div", {});
  const audit = el("div", {});
  setPage("Tenants", body, el("h2", {}, "Audit log (this node, newest first)"), audit);
  api("GET", "/v1/tenants").then((list) => {
    body.replaceChildren(list.length === 0 ? el("p", {}, "No tenants yet: weir tenant create NAME.") :
      el("div", {}, list.map((t) => el("details", { class: "tenant" },
        el("summary", {}, `${t.name}, created ${when(t.created_at_ms)}`), tokensOf(t.name)))));
  }).catch(failure);
  api("GET", "/v1/admin/audit?limit=100").then((events) => {
    audit.replaceChildren(table(["At", "Event", "Details"], events.map(({ at_ms, event, ...rest }) =>
      el("tr", {}, el("td", {}, when(at_ms)), el("td", {}, event), el("td", {}, el("code", {}, JSON.stringify(rest)))))));
  }).catch(failure);
}

// ---- routing ----

function route() {
  clearInterval(timer);
  say("");
  if (!session) { signIn(); return; }
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const query = new URLSearchParams(search || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (session.admin) { admin(); return; }
  if (parts[0] === "publishers" && parts.length === 3) publisher(parts[1], parts[2]);
  else if (parts[0] === "dead-letters" && parts.length === 3) deadLetters(parts[1], parts[2], query);
  else if (parts[0] === "tables" && parts.length === 3) tablePage(parts[1], parts[2], query);
  else if (parts[0] === "tables") tables();
  else publishers();
  main().focus();
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("sign-out").addEventListener("click", signOut);
  try { session = await api("GET", "/console/session"); signedIn(); } catch (_) { signIn(); }
});
