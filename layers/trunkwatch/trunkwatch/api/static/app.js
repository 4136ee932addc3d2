// trunkwatch status page: every trunk's health, its grid and 30-day history (the trunks API),
// alerts and silences from the Alertmanager v2 API.
//
// Safety: alert data (job names, commit titles, authors) comes from untrusted pull requests.
// Everything is rendered with createElement/textContent, never innerHTML; links are only
// set when their scheme is http(s). The bearer token lives in sessionStorage only.
"use strict";

(function () {
  const TOKEN_KEY = "trunkwatch.token";
  const AUTHOR_KEY = "trunkwatch.createdBy";
  const REFRESH_MS = 30000;
  const OPERATORS = ["=", "!=", "=~", "!~"];
  // The labels a silence from an alert matches on (same as trunkwatch.domain.links).
  const SILENCE_LABELS = ["alertname", "repo", "branch", "job"];
  const TRUNK_LEVEL = ["TrunkBadlyBroken", "TrunkBroken", "SourceDown"];

  const main = document.getElementById("main");
  let refreshTimer = null;
  let nextNotice = "";

  // --- DOM helpers --------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "href") throw new Error("use link() for hrefs");
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // An http(s) URL as an absolute string, or null for anything else (javascript:, data:...).
  function safeUrl(value) {
    if (typeof value !== "string" || value === "") return null;
    try {
      const url = new URL(value, document.baseURI);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (_) {
      return null;
    }
  }

  // A link to an external http(s) URL; plain text when the URL is not http(s).
  function link(url, text, cls) {
    const href = safeUrl(url);
    if (href === null) return el("span", { class: cls, text });
    const a = el("a", { class: cls, text, target: "_blank", rel: "noopener noreferrer" });
    a.href = href;
    return a;
  }

  // A link inside the page (a #/ route).
  function route(hash, text, cls) {
    const a = el("a", { class: cls, text });
    a.href = "#" + hash;
    return a;
  }

  function notice(message, isError) {
    const box = document.getElementById("notice");
    box.textContent = message || "";
    box.classList.toggle("error", Boolean(isError));
    box.hidden = !message;
  }

  // --- time ---------------------------------------------------------------------------

  // The API's clock, as its answers say it (X-Trunkwatch-Time), less the browser's: a local
  // replay serves its scenario's time, and a silence made here starts at the API's now.
  let clockOffset = 0;
  let clockKnown = false;

  function noteClock(response) {
    const said = Date.parse(response.headers.get("X-Trunkwatch-Time") || "");
    if (Number.isNaN(said)) return;
    clockOffset = said - Date.now();
    clockKnown = true;
  }

  // Before a silence is timed: one read, if no answer has said the API's clock yet.
  async function learnClock() {
    if (!clockKnown) await api("GET", "api/v2/status");
  }

  function now() {
    return new Date(Date.now() + clockOffset);
  }

  function ago(iso) {
    const then = Date.parse(iso);
    if (Number.isNaN(then)) return "";
    return humanDuration(now().getTime() - then) + " ago";
  }

  function until(iso) {
    const then = Date.parse(iso);
    if (Number.isNaN(then)) return "";
    const left = then - now().getTime();
    return left > 0 ? "in " + humanDuration(left) : humanDuration(-left) + " ago";
  }

  function humanDuration(ms) {
    let s = Math.max(0, Math.round(ms / 1000));
    const d = Math.floor(s / 86400);
    s -= d * 86400;
    const h = Math.floor(s / 3600);
    s -= h * 3600;
    const m = Math.floor(s / 60);
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m";
    return s + "s";
  }

  function timeEl(iso, text) {
    const node = el("time", { datetime: iso, title: iso, text });
    return node;
  }

  // Go-style durations as the API and amtool take them: 90m, 2h, 1h30m, 1d, 1w.
  function parseDuration(text) {
    const units = { s: 1e3, m: 6e4, h: 36e5, d: 864e5, w: 6048e5 };
    const value = String(text).trim();
    if (!/^(\d+(\.\d+)?[smhdw])+$/.test(value)) return null;
    let total = 0;
    for (const [, amount, unit] of value.matchAll(/(\d+(?:\.\d+)?)([smhdw])/g)) {
      total += parseFloat(amount) * units[unit];
    }
    return total > 0 ? total : null;
  }

  // --- Alertmanager matcher filters: {name="value",name=~"regex"} ----------------------

  function quote(value) {
    return '"' + value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
  }

  function formatFilter(matchers) {
    return "{" + matchers.map((m) => m.name + m.op + quote(m.value)).join(",") + "}";
  }

  function parseFilter(text) {
    let s = String(text || "").trim();
    if (s.startsWith("{") && s.endsWith("}")) s = s.slice(1, -1);
    const matchers = [];
    let i = 0;
    const skipSpace = () => {
      while (i < s.length && /\s/.test(s[i])) i++;
    };
    while (i < s.length) {
      skipSpace();
      if (i >= s.length) break;
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(i));
      if (!name) throw new Error("expected a label name at " + JSON.stringify(s.slice(i, i + 20)));
      i += name[0].length;
      skipSpace();
      const op = /^(=~|!~|!=|=)/.exec(s.slice(i));
      if (!op) throw new Error("expected =, !=, =~ or !~ after " + name[0]);
      i += op[0].length;
      skipSpace();
      let value = "";
      if (s[i] === '"') {
        i++;
        let closed = false;
        while (i < s.length) {
          const c = s[i++];
          if (c === "\\" && i < s.length) {
            const e = s[i++];
            value += e === "n" ? "\n" : e;
          } else if (c === '"') {
            closed = true;
            break;
          } else value += c;
        }
        if (!closed) throw new Error("unterminated quoted value for " + name[0]);
      } else {
        const bare = /^[^,}]*/.exec(s.slice(i))[0];
        value = bare.trim();
        i += bare.length;
      }
      matchers.push({ name: name[0], op: op[0], value });
      skipSpace();
      if (i < s.length) {
        if (s[i] !== ",") throw new Error("expected , between matchers");
        i++;
      }
    }
    return matchers;
  }

  function silenceHash(labels) {
    const matchers = SILENCE_LABELS.filter((n) => labels[n]).map((n) => ({ name: n, op: "=", value: labels[n] }));
    return "/silences/new?filter=" + encodeURIComponent(formatFilter(matchers));
  }

  function toApiMatcher(m) {
    return { name: m.name, value: m.value, isRegex: m.op.includes("~"), isEqual: !m.op.startsWith("!") };
  }

  function fromApiMatcher(m) {
    const op = (m.isEqual === false ? "!" : "=") + (m.isRegex ? "~" : "");
    return { name: m.name, op: op === "!" ? "!=" : op, value: m.value };
  }

  // --- API calls with the bearer token ---------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  let pendingAsk = null;

  function askToken(reason) {
    // Concurrent requests refused together share one question.
    if (pendingAsk) return pendingAsk;
    const dialog = document.getElementById("token-dialog");
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    document.getElementById("token-reason").textContent = reason;
    input.value = "";
    pendingAsk = new Promise((resolve) => {
      const done = (token) => {
        form.removeEventListener("submit", onSubmit);
        cancel.removeEventListener("click", onCancel);
        dialog.removeEventListener("cancel", onCancel);
        if (dialog.open) dialog.close();
        pendingAsk = null;
        resolve(token);
      };
      const onSubmit = (event) => {
        event.preventDefault();
        const token = input.value.trim();
        input.value = "";
        done(token || null);
      };
      const onCancel = (event) => {
        event.preventDefault();
        done(null);
      };
      const cancel = document.getElementById("token-cancel");
      form.addEventListener("submit", onSubmit);
      cancel.addEventListener("click", onCancel);
      dialog.addEventListener("cancel", onCancel);
    });
    dialog.showModal();
    input.focus();
    return pendingAsk;
  }

  async function send(method, path, body) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  }

  async function api(method, path, body) {
    let response = await send(method, path, body);
    if (response.status === 401 || response.status === 403) {
      const message = await errorText(response);
      const reason =
        response.status === 401
          ? "The API needs a bearer token (" + message + ")."
          : "This token may not do that (" + message + "); give one with write scope.";
      const token = await askToken(reason);
      if (token) {
        sessionStorage.setItem(TOKEN_KEY, token);
        response = await send(method, path, body);
      }
    }
    noteClock(response);
    if (!response.ok) throw new ApiError(response.status, await errorText(response));
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  }

  async function errorText(response) {
    const text = await response.clone().text();
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed.error === "string") return parsed.error;
    } catch (_) {
      // not JSON
    }
    return text.slice(0, 300) || "HTTP " + response.status;
  }

  // --- trunks: alert groups by repo and branch ----------------------------------------

  function trunkKey(labels) {
    return (labels.repo || "(no repo)") + "@" + (labels.branch || "");
  }

  function alertOrder(a, b) {
    const rank = (x) => {
      const i = TRUNK_LEVEL.indexOf(x.labels.alertname);
      return i === -1 ? TRUNK_LEVEL.length : i;
    };
    return (
      rank(a) - rank(b) ||
      (a.labels.priority || "").localeCompare(b.labels.priority || "") ||
      (a.labels.job || "").localeCompare(b.labels.job || "")
    );
  }

  async function showTrunks() {
    const [health, groups] = await Promise.all([api("GET", "api/v2/trunks"), api("GET", "api/v2/alerts/groups")]);
    const trunks = new Map();
    for (const group of groups) {
      for (const alert of group.alerts) {
        const key = trunkKey(alert.labels);
        if (!trunks.has(key)) trunks.set(key, { labels: alert.labels, alerts: [] });
        trunks.get(key).alerts.push(alert);
      }
    }
    const page = [el("h1", { text: "Trunk health" }), renderTrunkList(health), ...renderRejected(health), el("h2", { class: "section", text: "Firing alerts" })];
    if (trunks.size === 0) {
      page.push(el("div", { class: "trunk" }, el("p", { class: "healthy", text: "No alerts are firing." })));
    }
    for (const key of [...trunks.keys()].sort()) {
      page.push(renderTrunk(trunks.get(key)));
    }
    main.replaceChildren(...page);
    document.getElementById("updated").textContent = "updated " + now().toLocaleTimeString();
  }

  // Every configured trunk, broken first (the API's order), each linking to its grid and history.
  function renderTrunkList(health) {
    const rows = health.map((t) => {
      const culprit = t.failingJobs.length ? t.failingJobs[0].culprit : null;
      return el(
        "tr",
        { class: "trunk-row " + t.health.replace(" ", "-"), "data-trunk": t.trunk },
        el("td", {}, el("span", { class: "badge health " + t.health.replace(" ", "-"), text: t.health })),
        el("td", {}, route(trunkHash(t.trunk), t.repo + " @ " + t.branch, "mono trunk-link")),
        el("td", {}, t.brokenSince ? timeEl(t.brokenSince, "broken " + ago(t.brokenSince)) : ""),
        el("td", { text: t.failingJobs.length ? t.failingJobs.length + " failing" : "" }),
        el(
          "td",
          {},
          culprit ? ["culprit ", link(culprit.url, culprit.sha.slice(0, 12), "mono"), " ", el("span", { class: "commit-title", text: culprit.title })] : "",
        ),
      );
    });
    return el(
      "table",
      { class: "trunks" },
      el("thead", {}, el("tr", {}, ["Health", "Trunk", "Since", "Jobs", "Culprit"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows),
    );
  }

  // Messages a receiver refused for good (never retried): which alert's, which receiver, when,
  // and what it answered. Nothing when none was refused.
  function renderRejected(health) {
    const rejected = health.flatMap((t) => t.rejectedNotifications.map((r) => ({ trunk: t, ...r })));
    if (!rejected.length) return [];
    rejected.sort((a, b) => b.at.localeCompare(a.at));
    const rows = rejected.map((r) =>
      el(
        "tr",
        { class: "rejected-row", "data-receiver": r.receiver, "data-fingerprint": r.fingerprint },
        el("td", {}, timeEl(r.at, ago(r.at))),
        el("td", {}, route(trunkHash(r.trunk.trunk), r.trunk.repo + " @ " + r.trunk.branch, "mono")),
        el("td", {}, el("span", { text: r.alertname }), r.job ? [" ", el("span", { class: "mono", text: r.job })] : null),
        el("td", { class: "mono", text: r.receiver }),
        el("td", { text: r.status + " (" + r.reason + ")" }),
        el("td", { class: "small", text: r.answer }),
      ),
    );
    return [
      el("h2", { class: "section", text: "Rejected notifications" }),
      el("p", { class: "small muted", text: "Messages a receiver refused for good: they were not delivered and are not retried." }),
      el(
        "table",
        { class: "rejected" },
        el("thead", {}, el("tr", {}, ["When", "Trunk", "Alert", "Receiver", "Message", "Answer"].map((h) => el("th", { text: h })))),
        el("tbody", {}, rows),
      ),
    ];
  }

  function trunkHash(id) {
    return "/trunk?id=" + encodeURIComponent(id);
  }

  // --- one trunk: its grid and its 30-day history ---------------------------------------

  const SVG = "http://www.w3.org/2000/svg";

  function svgEl(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) if (child) node.append(child);
    return node;
  }

  async function showTrunk(id) {
    const query = "?trunk=" + encodeURIComponent(id);
    const [trunks, grid, history] = await Promise.all([
      api("GET", "api/v2/trunks"),
      api("GET", "api/v2/trunks/grid" + query),
      api("GET", "api/v2/trunks/history" + query),
    ]);
    const health = trunks.find((t) => t.trunk === id);
    main.replaceChildren(
      el(
        "h1",
        {},
        el("span", { class: "mono", text: grid.repo }),
        " @ " + grid.branch + " ",
        health ? el("span", { class: "badge health " + health.health.replace(" ", "-"), text: health.health }) : null,
      ),
      el("h2", { class: "section", text: "Recent commits" }),
      renderGrid(grid),
      el("h2", { class: "section", text: "Last 30 days" }),
      renderHistory(history),
    );
    document.getElementById("updated").textContent = "updated " + now().toLocaleTimeString();
  }

  function shortJob(job) {
    const parts = job.split(" / ");
    return parts.length > 1 ? parts.slice(1).join(" / ") : job;
  }

  function renderGrid(grid) {
    if (!grid.jobs.length) {
      return el("p", { class: "grid-empty healthy", text: "No job failed on the last " + grid.commits.length + " commits." });
    }
    const head = el(
      "tr",
      {},
      el("th", { text: "Commit" }),
      grid.jobs.map((job) =>
        el("th", { class: "job" + (job.firing ? " firing" : ""), title: job.job, "data-job": job.job }, el("span", { text: shortJob(job.job) })),
      ),
    );
    const rows = grid.commits.map((commit, row) =>
      el(
        "tr",
        { class: commit.culprit ? "culprit" : null, "data-sha": commit.sha },
        el(
          "th",
          { class: "commit" },
          link(commit.url, commit.sha.slice(0, 8), "mono"),
          commit.culprit ? el("span", { class: "badge culprit-badge", text: "culprit" }) : null,
          " ",
          el("span", { class: "commit-title", title: commit.title, text: commit.title }),
        ),
        grid.jobs.map((job) => {
          const cell = job.cells[row];
          const label = cell.state === "nodata" ? "no data" : cell.state;
          const cls = "cell " + cell.state + (cell.culprit ? " culprit" : "");
          const mark = cell.culprit ? "\u25c6" : "";
          const inner = cell.url ? link(cell.url, mark, "cell-link") : el("span", { text: mark });
          inner.title = label + (cell.culprit ? " (culprit)" : "") + " \u2014 " + job.job;
          return el("td", { class: cls, "data-state": cell.state }, inner);
        }),
      ),
    );
    const legend = el(
      "p",
      { class: "legend small muted" },
      ["failure", "success", "flaky", "pending", "nodata"].map((s) => [el("span", { class: "cell swatch " + s }), s === "nodata" ? "no data" : s, " "]),
      "\u25c6 culprit",
    );
    return el("div", { class: "grid-wrap" }, el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, rows)), legend);
  }

  const PLOT = { width: 1000, height: 170, left: 44, right: 10, top: 12, bottom: 26 };

  // A bar chart of values over labelled slots; each bar carries its label and value.
  function barPlot(id, title, slots, max, unit, labelEvery) {
    const w = PLOT.width - PLOT.left - PLOT.right;
    const h = PLOT.height - PLOT.top - PLOT.bottom;
    const step = Math.min(w / Math.max(slots.length, 1), 80);
    const y = (v) => PLOT.top + h - (max ? (v / max) * h : 0);
    const svg = svgEl("svg", { id, class: "plot", viewBox: `0 0 ${PLOT.width} ${PLOT.height}`, role: "img", "aria-label": title });
    for (const tick of [0, max / 2, max]) {
      svg.append(
        svgEl("line", { class: "gridline", x1: PLOT.left, x2: PLOT.width - PLOT.right, y1: y(tick), y2: y(tick) }),
        svgEl("text", { class: "axis", x: PLOT.left - 6, y: y(tick) + 4, "text-anchor": "end", text: +tick.toFixed(1) + unit }),
      );
    }
    slots.forEach((slot, i) => {
      const x = PLOT.left + i * step;
      const bar = svgEl("rect", {
        class: "bar" + (slot.value ? "" : " zero"),
        x: x + step * 0.15,
        y: y(slot.value),
        width: step * 0.7,
        height: Math.max(PLOT.top + h - y(slot.value), 0),
        "data-label": slot.label,
        "data-value": slot.value,
      });
      bar.append(svgEl("title", { text: slot.label + ": " + slot.value + unit }));
      svg.append(bar);
      if (i % labelEvery === 0) {
        svg.append(svgEl("text", { class: "axis", x: x + step / 2, y: PLOT.height - 8, "text-anchor": "middle", text: slot.label.slice(5) }));
      }
    });
    return svg;
  }

  // Episodes on the window's time axis: one row each, from the culprit to the fix (or now).
  function episodePlot(history) {
    const since = Date.parse(history.since);
    const until = Date.parse(history.until);
    const episodes = history.episodes;
    const rowH = 18;
    const height = PLOT.top + Math.max(episodes.length, 1) * rowH + PLOT.bottom;
    const w = PLOT.width - PLOT.left - PLOT.right;
    const x = (t) => PLOT.left + ((Math.min(Math.max(t, since), until) - since) / (until - since)) * w;
    const svg = svgEl("svg", { id: "episodes-plot", class: "plot", viewBox: `0 0 ${PLOT.width} ${height}`, role: "img", "aria-label": "Episodes" });
    for (let day = 0; day <= 30; day += 5) {
      const t = since + day * 864e5;
      svg.append(
        svgEl("line", { class: "gridline", x1: x(t), x2: x(t), y1: PLOT.top, y2: height - PLOT.bottom }),
        svgEl("text", { class: "axis", x: x(t), y: height - 8, "text-anchor": day === 30 ? "end" : "middle", text: new Date(t).toISOString().slice(5, 10) }),
      );
    }
    episodes.forEach((episode, i) => {
      const start = Date.parse(episode.start);
      const end = episode.end ? Date.parse(episode.end) : until;
      const x0 = x(start);
      const width = Math.max(x(end) - x0, 3);
      const fix = episode.timeToFixSeconds === null ? "still broken" : "fixed in " + humanDuration(episode.timeToFixSeconds * 1000);
      const top = PLOT.top + i * rowH;
      const bar = svgEl("rect", {
        class: "episode" + (episode.end ? "" : " open"),
        x: x0,
        y: top + 3,
        width,
        height: rowH - 6,
        "data-start": episode.start,
      });
      bar.append(svgEl("title", { text: episode.start + " \u2192 " + (episode.end || "now") + ": " + fix + " (" + episode.jobs.map((j) => j.job).join(", ") + ")" }));
      const labelAtRight = x0 + width + 170 < PLOT.width;
      svg.append(
        bar,
        svgEl("text", {
          class: "episode-label",
          x: labelAtRight ? x0 + width + 6 : x0 - 6,
          y: top + rowH - 5,
          "text-anchor": labelAtRight ? "start" : "end",
          text: fix,
        }),
      );
    });
    if (!episodes.length) svg.append(svgEl("text", { class: "axis", x: PLOT.left + 8, y: PLOT.top + 12, text: "no episodes" }));
    return svg;
  }

  // Each fixed episode's time to fix (hours), with the median and the worst marked.
  function fixPlot(history) {
    const fixed = history.episodes.filter((e) => e.timeToFixSeconds !== null);
    const hours = (s) => +(s / 3600).toFixed(2);
    const max = Math.max(1, ...fixed.map((e) => hours(e.timeToFixSeconds)));
    const svg = barPlot(
      "fix-plot",
      "Time to fix",
      fixed.map((e) => ({ label: e.start.slice(0, 16).replace("T", " "), value: hours(e.timeToFixSeconds) })),
      max,
      "h",
      1,
    );
    const h = PLOT.height - PLOT.top - PLOT.bottom;
    const y = (v) => PLOT.top + h - (v / max) * h;
    // The median's label at the right, the worst's at the left: apart even when they are equal.
    const marks = [
      ["median", history.medianTimeToFixSeconds, PLOT.width - PLOT.right - 4, "end"],
      ["worst", history.worstTimeToFixSeconds, PLOT.left + 4, "start"],
    ];
    for (const [cls, seconds, labelX, anchor] of marks) {
      if (seconds === null) continue;
      svg.append(
        svgEl("line", { class: "mark " + cls, x1: PLOT.left, x2: PLOT.width - PLOT.right, y1: y(hours(seconds)), y2: y(hours(seconds)), "data-value": hours(seconds) }),
        svgEl("text", { class: "mark-label " + cls, x: labelX, y: y(hours(seconds)) - 4, "text-anchor": anchor, text: cls + " " + humanDuration(seconds * 1000) }),
      );
    }
    return svg;
  }

  // The breakages fixed before anyone was paged: not pages, not flakiness; newest first.
  function fixedTable(history) {
    const fixed = history.fixedBeforePage.slice().sort((a, b) => b.detectedAt.localeCompare(a.detectedAt));
    if (!fixed.length) return el("p", { class: "muted small fixed-none", text: "None in the last 30 days." });
    const rows = fixed.map((f) =>
      el(
        "tr",
        { "data-culprit": f.culprit.sha },
        el("td", {}, timeEl(f.detectedAt, f.detectedAt.slice(0, 10))),
        el(
          "td",
          {},
          el("span", { class: "mono", text: f.culprit.sha.slice(0, 12) }),
          f.culprit.pr ? " #" + f.culprit.pr : "",
          " ",
          el("span", { class: "commit-title", text: f.culprit.title || "" }),
          f.culprit.author ? [" by ", el("span", { class: "author", text: f.culprit.author })] : null,
        ),
        el("td", { text: f.failedCommits + " commits" }),
        el("td", {}, "fixed by ", el("span", { class: "mono", text: f.fix.sha.slice(0, 12) }), " after " + humanDuration(f.brokenForSeconds * 1000)),
        el("td", { title: f.jobs.join("\n"), text: f.jobs.length === 1 ? f.jobs[0] : f.jobs.length + " jobs" }),
      ),
    );
    return el(
      "table",
      { class: "fixed" },
      el("thead", {}, el("tr", {}, ["Recorded", "Culprit", "Failed", "Fix", "Jobs"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows),
    );
  }

  function renderHistory(history) {
    const days = history.hoursBrokenPerDay.map((d) => ({ label: d.day, value: d.hours }));
    const weeks = history.pagesPerWeek.map((w) => ({ label: w.week, value: w.pages }));
    const maxPages = Math.max(1, ...weeks.map((w) => w.value));
    const fixText = (s) => (s === null ? "none fixed" : humanDuration(s * 1000));
    const total = days.reduce((sum, d) => sum + d.value, 0);
    const figure = (title, note, svg) => el("figure", { class: "plot-card" }, el("figcaption", {}, el("strong", { text: title }), " ", el("span", { class: "muted small", text: note })), svg);
    return el(
      "div",
      { class: "history" },
      el(
        "p",
        { class: "summary-line" },
        "Broken " + +total.toFixed(1) + "h in " + history.episodes.length + " episode(s); time to fix: median ",
        el("strong", { class: "median-fix", text: fixText(history.medianTimeToFixSeconds) }),
        ", worst ",
        el("strong", { class: "worst-fix", text: fixText(history.worstTimeToFixSeconds) }),
        ".",
      ),
      figure("Hours broken per day", "(UTC days)", barPlot("hours-plot", "Hours broken per day", days, 24, "h", 5)),
      figure("Episodes", "(culprit commit to fix)", episodePlot(history)),
      figure("Pages per week", "(trunk-level alert starting to fire; weeks from Monday)", barPlot("pages-plot", "Pages per week", weeks, maxPages, "", 1)),
      figure("Time to fix", "(each fixed episode; median and worst)", fixPlot(history)),
      figure("Fixed before a page", "(breakages of two or more commits a pass fixed before the rule could page; not counted as pages)", fixedTable(history)),
    );
  }

  function renderTrunk(trunk) {
    const alerts = trunk.alerts.slice().sort(alertOrder);
    const firing = alerts.filter((a) => a.status.state !== "suppressed");
    const worst = firing.map((a) => a.labels.priority || "P9").sort()[0];
    const state = firing.length
      ? el("span", { class: "badge " + (worst || "broken"), text: "broken" })
      : el("span", { class: "badge state", text: "all alerts suppressed" });
    const header = el(
      "header",
      {},
      el("h2", {}, el("span", { class: "mono", text: trunk.labels.repo || "" }), " @ ", trunk.labels.branch || ""),
      state,
      el("span", {
        class: "count muted",
        text: firing.length + " firing, " + (alerts.length - firing.length) + " suppressed",
      }),
    );
    return el("section", { class: "trunk", "data-trunk": trunkKey(trunk.labels) }, header, alerts.map(renderAlert));
  }

  function renderAlert(alert) {
    const labels = alert.labels;
    const ann = alert.annotations || {};
    const status = alert.status || {};
    const suppressed = status.state === "suppressed";
    const priority = labels.priority || "";
    const head = el(
      "div",
      { class: "head" },
      el("span", { class: "badge " + priority, text: priority || "?" }),
      el("span", { class: "badge state", text: labels.alertname }),
      (status.silencedBy || []).length
        ? el("span", { class: "badge silenced", title: "silenced by " + status.silencedBy.join(", "), text: "silenced" })
        : null,
      (status.inhibitedBy || []).length
        ? el("span", {
            class: "badge inhibited",
            title: "inhibited by " + status.inhibitedBy.join(", "),
            text: "inhibited",
          })
        : null,
      ann.acknowledged_by
        ? el("span", { class: "badge acknowledged", title: "acknowledged by " + ann.acknowledged_by, text: "acknowledged" })
        : null,
      el("span", { class: "summary", text: ann.summary || labels.job || labels.alertname }),
      el("span", { class: "since muted" }, "since ", timeEl(alert.startsAt, ago(alert.startsAt))),
    );
    const details = el("dl", { class: "details" });
    const row = (term, ...value) => append(details, [el("dt", { text: term }), el("dd", {}, ...value)]);
    if (labels.job) row("job", el("span", { class: "mono", text: labels.job }));
    if (ann.culprit_sha) {
      const pr = ann.culprit_pr ? link(ann.culprit_pr_url, "#" + ann.culprit_pr) : null;
      row(
        "culprit",
        link(ann.culprit_url, ann.culprit_sha.slice(0, 12), "mono culprit-sha"),
        pr ? [" (", pr, ")"] : null,
        " ",
        el("span", { class: "commit-title", text: ann.culprit_title || "" }),
        ann.culprit_author ? [" by ", el("span", { class: "author", text: ann.culprit_author })] : null,
      );
    }
    if (ann.suspect_sha) {
      // An environmental or flaky verdict: the commit is named, not blamed.
      row(
        "suspect",
        el("span", { class: "mono", text: ann.suspect_sha.slice(0, 12) }),
        ann.suspect_pr ? " (#" + ann.suspect_pr + ")" : null,
        " ",
        el("span", { class: "commit-title", text: ann.suspect_title || "" }),
        " (not to blame)",
      );
    }
    if (ann.culprit_verdict) {
      const reason = ann.culprit_verdict_reason ? ": " + ann.culprit_verdict_reason : "";
      row("verdict", el("span", { class: "verdict", text: ann.culprit_verdict + reason }));
    }
    if (ann.culprit_range) row("range", el("span", { class: "mono", text: ann.culprit_range }));
    if (ann.culprit_authors) row("authors", el("span", { class: "author", text: ann.culprit_authors }));
    if (ann.failing_jobs) {
      const jobs = ann.failing_jobs.split("\n").filter(Boolean);
      row("failing jobs", el("ul", { class: "jobs" }, jobs.map((j) => el("li", { class: "mono", text: j }))));
    }
    if (ann.failure_lines) row("failure", el("pre", { class: "lines", text: ann.failure_lines }));
    if (labels.alertname === "SourceDown" && ann.description) row("cause", ann.description);
    if ((status.silencedBy || []).length) {
      row("silenced by", status.silencedBy.map((id) => [route("/silences", id.slice(0, 8), "mono"), " "]));
    }
    if ((status.inhibitedBy || []).length) row("inhibited by", status.inhibitedBy.join(", "));
    if (ann.acknowledged_by) {
      const at = ann.acknowledged_at || "";
      row(
        "acknowledged",
        el("span", { class: "acked-by", text: ann.acknowledged_by }),
        " ",
        timeEl(at, ago(at)),
        ann.acknowledged_note ? [": ", el("span", { class: "acked-note", text: ann.acknowledged_note })] : null,
      );
    }
    if (labels.team) row("team", labels.team);
    const links = el(
      "div",
      { class: "links" },
      alert.generatorURL ? link(alert.generatorURL, "View on HUD") : null,
      ann.runbook_url ? link(ann.runbook_url, "Runbook") : null,
      ann.dashboard_url ? link(ann.dashboard_url, "Dashboard") : null,
      route(silenceHash(labels), "Silence\u2026", "silence-link"),
    );
    const article = el(
      "article",
      { class: "alert " + (suppressed ? "suppressed " : "") + priority, "data-fingerprint": alert.fingerprint },
      head,
      details,
      links,
    );
    if (!ann.acknowledged_by) {
      links.append(
        el("button", { type: "button", class: "ack-button", text: "Acknowledge\u2026", onclick: () => openAck(article, labels) }),
      );
    }
    return article;
  }

  // Acknowledging an alert: who and a note, then POST api/v2/acks with the alert's identifying
  // labels. Stops its reminders (never its resolution) until its episode ends.
  function openAck(article, labels) {
    if (article.querySelector("form.ack")) return;
    clearTimeout(refreshTimer); // a refresh would take the form away while it is being filled
    const createdBy = el("input", { name: "ackBy", placeholder: "your name (default: the token's principal)" });
    createdBy.value = localStorage.getItem(AUTHOR_KEY) || "";
    const comment = el("input", { name: "ackNote", placeholder: "note: what you are doing about it" });
    const submit = el("button", { type: "submit", class: "primary", text: "Acknowledge" });
    const form = el(
      "form",
      { class: "ack", novalidate: true },
      createdBy,
      comment,
      submit,
      el("button", { type: "button", text: "Cancel", onclick: () => render() }),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {
        matchers: SILENCE_LABELS.filter((n) => labels[n]).map((n) => toApiMatcher({ name: n, op: "=", value: labels[n] })),
        createdBy: createdBy.value.trim(),
        comment: comment.value.trim(),
      };
      // Left out when empty: the API then records the token's principal.
      if (body.createdBy) localStorage.setItem(AUTHOR_KEY, body.createdBy);
      else delete body.createdBy;
      submit.disabled = true;
      try {
        const acked = await api("POST", "api/v2/acks", body);
        notice(acked.length ? "Acknowledged." : "Nothing to acknowledge: the alert no longer fires.");
        await render();
      } catch (err) {
        notice("Could not acknowledge: " + err.message, true);
        submit.disabled = false;
      }
    });
    article.append(form);
    comment.focus();
  }

  // --- silences -----------------------------------------------------------------------

  async function showSilences() {
    const silences = await api("GET", "api/v2/silences");
    const page = [el("h1", { text: "Silences" })];
    for (const state of ["active", "pending", "expired"]) {
      const shown = silences.filter((s) => s.status.state === state);
      page.push(el("h3", { text: state[0].toUpperCase() + state.slice(1) + " (" + shown.length + ")" }));
      if (!shown.length) {
        page.push(el("p", { class: "muted", text: "None." }));
        continue;
      }
      const table = el(
        "table",
        { class: "silences " + state },
        el(
          "thead",
          {},
          el("tr", {}, ["Matchers", "Created by", "Comment", "Starts", "Ends", ""].map((h) => el("th", { text: h }))),
        ),
        el("tbody", {}, shown.map(renderSilence)),
      );
      page.push(table);
    }
    main.replaceChildren(...page);
  }

  function renderSilence(silence) {
    const state = silence.status.state;
    const matchers = silence.matchers.map(fromApiMatcher);
    const actions = el("td", {});
    if (state !== "expired") {
      actions.append(
        el("button", {
          class: "danger expire",
          type: "button",
          text: "Expire",
          onclick: (event) => expire(silence.id, event.currentTarget),
        }),
      );
    }
    actions.append(
      " ",
      route("/silences/new?filter=" + encodeURIComponent(formatFilter(matchers)), "Recreate", "small"),
    );
    return el(
      "tr",
      { "data-silence": silence.id },
      el(
        "td",
        {},
        matchers.map((m) => el("span", { class: "matcher mono", text: m.name + m.op + quote(m.value) })),
        el("div", { class: "muted small mono", text: silence.id }),
      ),
      el("td", { text: silence.createdBy }),
      el("td", { text: silence.comment }),
      el("td", {}, timeEl(silence.startsAt, until(silence.startsAt))),
      el("td", {}, timeEl(silence.endsAt, until(silence.endsAt))),
      actions,
    );
  }

  async function expire(id, button) {
    button.disabled = true;
    try {
      await api("DELETE", "api/v2/silence/" + encodeURIComponent(id));
      notice("Silence " + id + " expired.");
      await showSilences();
    } catch (err) {
      button.disabled = false;
      notice("Could not expire the silence: " + err.message, true);
    }
  }

  // --- new silence form ---------------------------------------------------------------

  function matcherRow(m) {
    const op = el("select", { name: "op", "aria-label": "operator" }, OPERATORS.map((o) => el("option", { value: o, text: o })));
    op.value = m.op || "=";
    const name = el("input", { name: "name", placeholder: "label", "aria-label": "label name", required: true });
    name.value = m.name || "";
    const value = el("input", { name: "value", placeholder: "value", "aria-label": "value" });
    value.value = m.value || "";
    const row = el("div", { class: "matcher-row" }, name, op, value);
    row.append(el("button", { type: "button", text: "Remove", onclick: () => row.remove() }));
    return row;
  }

  function showNewSilence(params) {
    let matchers = [];
    let problem = null;
    const filter = params.get("filter");
    if (filter) {
      try {
        matchers = parseFilter(filter);
      } catch (err) {
        problem = "Could not read the filter: " + err.message;
      }
    }
    if (!matchers.length) matchers = [{ name: "", op: "=", value: "" }];
    const rows = el("div", { class: "matcher-rows" }, matchers.map(matcherRow));
    const duration = el("input", { name: "duration", required: true, placeholder: "2h" });
    duration.value = params.get("duration") || "2h";
    const createdBy = el("input", { name: "createdBy", placeholder: "your name (default: the token's principal)" });
    createdBy.value = localStorage.getItem(AUTHOR_KEY) || "";
    const comment = el("textarea", { name: "comment", required: true, placeholder: "why (link the fix or issue)" });
    const submit = el("button", { type: "submit", class: "primary", text: "Create silence" });
    const form = el(
      "form",
      { class: "silence", novalidate: true },
      el(
        "fieldset",
        {},
        el("legend", { text: "Matchers" }),
        rows,
        el("button", { type: "button", text: "Add matcher", onclick: () => rows.append(matcherRow({})) }),
      ),
      el("div", { class: "field" }, el("label", { for: "f-duration", text: "Duration" }), duration),
      el("div", { class: "field" }, el("label", { for: "f-createdBy", text: "Created by" }), createdBy),
      el("div", { class: "field" }, el("label", { for: "f-comment", text: "Comment" }), comment),
      el("div", { class: "actions" }, submit, route("/silences", "Cancel", "button")),
    );
    duration.id = "f-duration";
    createdBy.id = "f-createdBy";
    comment.id = "f-comment";
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const ms = parseDuration(duration.value);
      const wanted = [...rows.querySelectorAll(".matcher-row")].map((row) => ({
        name: row.querySelector("[name=name]").value.trim(),
        op: row.querySelector("[name=op]").value,
        value: row.querySelector("[name=value]").value,
      }));
      if (!wanted.length || wanted.some((m) => !m.name)) return notice("Every matcher needs a label name.", true);
      if (ms === null) return notice("Duration must look like 2h, 90m or 1d.", true);
      if (!comment.value.trim()) return notice("Say why in the comment.", true);
      submit.disabled = true;
      try {
        await learnClock();
      } catch (err) {
        submit.disabled = false;
        return notice("Could not reach the API: " + err.message, true);
      }
      const start = now();
      const body = {
        matchers: wanted.map(toApiMatcher),
        startsAt: start.toISOString(),
        endsAt: new Date(start.getTime() + ms).toISOString(),
        createdBy: createdBy.value.trim(),
        comment: comment.value.trim(),
      };
      // Left out when empty: the API then records the token's principal.
      if (body.createdBy) localStorage.setItem(AUTHOR_KEY, body.createdBy);
      else delete body.createdBy;
      try {
        const created = await api("POST", "api/v2/silences", body);
        nextNotice = "Silence " + created.silenceID + " created.";
        location.hash = "#/silences";
      } catch (err) {
        notice("Could not create the silence: " + err.message, true);
      } finally {
        submit.disabled = false;
      }
    });
    main.replaceChildren(el("h1", { text: "New silence" }), form);
    if (problem) notice(problem, true);
  }

  // --- routing ------------------------------------------------------------------------

  async function render() {
    clearTimeout(refreshTimer);
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split(/\?(.*)/s);
    const params = new URLSearchParams(query || "");
    const view =
      path === "/silences/new" ? "new" : path === "/silences" ? "silences" : path === "/trunk" ? "trunk" : "trunks";
    for (const a of document.querySelectorAll("[data-nav]")) {
      a.classList.toggle("current", a.dataset.nav === (view === "trunk" ? "trunks" : view));
    }
    try {
      if (view === "new") {
        showNewSilence(params);
      } else if (view === "silences") {
        await showSilences();
      } else if (view === "trunk") {
        await showTrunk(params.get("id") || "");
        refreshTimer = setTimeout(() => render().catch(() => {}), REFRESH_MS);
      } else {
        await showTrunks();
        refreshTimer = setTimeout(() => render().catch(() => {}), REFRESH_MS);
      }
    } catch (err) {
      main.replaceChildren(
        el("h1", { text: "Could not load" }),
        el("p", { class: "muted", text: err.message }),
        el("button", { type: "button", text: "Retry", onclick: () => render() }),
      );
    }
  }

  window.addEventListener("hashchange", () => {
    // A notice set just before a navigation is shown after it; others are cleared.
    notice(nextNotice);
    nextNotice = "";
    render();
  });
  render();
})();
