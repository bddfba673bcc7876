"use strict";
// tinyacp view: the page's one script. Everything it shows comes from the JSON data elements and reaches the page
// as text nodes (textContent, createTextNode) or as numeric SVG attributes: no markup is ever made from data, no
// element gets a URL, and the Content-Security-Policy forbids any connection besides.
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const PAGE = 500;
  const data = JSON.parse(document.getElementById("data").textContent);
  const turns = data.turns;
  const COMPARE = data.kind === "compare";
  const batches = data.batches || [];
  turns.forEach(function (turn, index) {
    turn.i = index;
    const words = [turn.id, turn.agent, turn.stop, turn.err, turn.prompt, turn.session];
    (turn.outs || []).forEach(function (o) { if (o) words.push(o.err, o.stop, o.agent); });
    turn.hay = words.join("\n").toLowerCase();
  });
  // The row's name in the address: its id (a batch's item, whatever its attempts; a compared item), or for a
  // journal's turns, its journal and place.
  const named = {};
  turns.forEach(function (turn) {
    let key = turn.id;
    while (Object.prototype.hasOwnProperty.call(named, key)) key += "~";
    turn.key = key;
    named[key] = turn;
  });
  const state = { key: COMPARE ? "differs" : null, dir: 1, text: "", agent: "", outcome: "", limit: PAGE, open: null };

  function el(tag, props) {
    const node = document.createElement(tag);
    if (props) {
      for (const name of Object.keys(props)) {
        if (name === "text") node.textContent = props.text;
        else if (name === "cls") node.className = props.cls;
        else node.setAttribute(name, props[name]);
      }
    }
    for (let k = 2; k < arguments.length; k++) add(node, arguments[k]);
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) child.forEach(function (c) { add(node, c); });
    else if (typeof child === "object") node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const name of Object.keys(attrs || {})) {
      if (name === "text") node.textContent = attrs.text;
      else node.setAttribute(name, String(attrs[name]));
    }
    return node;
  }

  // One formatter and one collator for the page: making one per call cost most of a redraw of the table.
  const WHOLE = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const COLLATOR = new Intl.Collator("en");
  function num(value) { return typeof value === "number" ? WHOLE.format(value) : ""; }
  function secs(value) { return typeof value === "number" ? value.toFixed(2) : ""; }
  function cost(amount, currency) {
    return typeof amount === "number" ? (amount.toFixed(4) + " " + (currency || "")).trim() : "";
  }
  function at(ms) { return typeof ms === "number" ? "+" + (ms / 1000).toFixed(3) + " s" : ""; }

  // ------------------------------------------------------------------------------------------------------------
  // Header and notes.

  const app = document.getElementById("app");
  const ok = turns.filter(function (t) { return t.ok; }).length;
  const attempts = turns.reduce(function (n, t) { return n + (t.attempts || 1); }, 0);
  const UNIT = data.kind === "journals" || data.kind === "journal" ? "turn" : "item";
  function plural(n, word) { return num(n) + " " + word + (n === 1 ? "" : "s"); }
  let counts;
  if (COMPARE) {
    const differ = turns.filter(function (t) { return t.differs; }).length;
    counts = plural(turns.length, "item") + " in " + batches.length + " batches, " + num(differ) +
      (differ === 1 ? " differs" : " differ") + " in outcome";
  } else {
    counts = plural(turns.length, UNIT) + " (" + num(ok) + " ok, " + num(turns.length - ok) + " failed)" +
      (attempts > turns.length ? " · " + plural(attempts, "attempt") + " (the latest decides)" : "");
  }
  app.appendChild(el("header", null,
    el("h1", null, "tinyacp view: ", el("span", { cls: "data" }, data.title)),
    el("p", { cls: "meta", id: "counts" }, counts),
    el("p", { cls: "meta" }, "made " + data.made + " by tinyacp " + data.version + " · each transcript kept up to " +
      num(data.maxTurnBytes) + " bytes")));
  if (data.notes.length) {
    app.appendChild(el("details", { cls: "notes", id: "notes" },
      el("summary", null, "What could not be read (" + data.notes.length + ")"),
      el("ul", null, data.notes.map(function (n) { return el("li", { cls: "data" }, n); }))));
  }

  // ------------------------------------------------------------------------------------------------------------
  // Overview: a table per agent and two small charts, each value written beside its bar.

  function overview() {
    const agents = data.overview.agents;
    const head = ["agent", "turns", "ok", "failed", "median s", "p90 s", "tokens", "cost"];
    const table = el("table", { cls: "agents", id: "agents" },
      el("thead", null, el("tr", null, head.map(function (h) { return el("th", { scope: "col" }, h); }))),
      el("tbody", null, agents.map(function (a) {
        const costs = Object.keys(a.cost).map(function (c) { return cost(a.cost[c], c); }).join(", ");
        return el("tr", null, el("th", { scope: "row", cls: "data" }, a.agent), el("td", null, num(a.turns)),
          el("td", null, num(a.ok)), el("td", null, num(a.failed)), el("td", null, secs(a.median)),
          el("td", null, secs(a.p90)), el("td", null, num(a.tokens)), el("td", null, costs));
      })));
    const charts = el("div", { cls: "charts" });
    agents.forEach(function (a) { charts.appendChild(histogram(a, data.overview.binWidth)); });
    const costChart = costs(agents);
    if (costChart) charts.appendChild(costChart);
    return el("section", { id: "overview" }, el("h2", null, "Agents"), table, charts);
  }

  // Batches compared: per batch, its totals over the items (each item's latest attempt), one row beside another.
  function batchTotals() {
    const head = ["batch", "items", "ok", "failed", "missing", "ok rate", "median s", "tokens", "cost"];
    const table = el("table", { cls: "agents", id: "batches" },
      el("thead", null, el("tr", null, head.map(function (h) { return el("th", { scope: "col" }, h); }))),
      el("tbody", null, batches.map(function (b) {
        const t = b.totals;
        const costs = Object.keys(t.cost).map(function (c) { return cost(t.cost[c], c); }).join(", ");
        return el("tr", null, el("th", { scope: "row", cls: "data" }, b.name), el("td", null, num(t.items)),
          el("td", null, num(t.ok)), el("td", null, num(t.failed)), el("td", null, num(t.missing)),
          el("td", null, typeof t.okRate === "number" ? (t.okRate * 100).toFixed(1) + " %" : ""),
          el("td", null, secs(t.median)), el("td", null, num(t.tokens)), el("td", null, costs));
      })));
    const where = el("ul", { cls: "sub" }, batches.map(function (b) {
      return el("li", { cls: "data" }, b.name + ": " + b.path);
    }));
    return el("section", { id: "overview" }, el("h2", null, "Batches"), table, where);
  }

  function histogram(agent, width) {
    const w = 260, h = 96, base = 72, bins = agent.bins, top = Math.max.apply(null, bins) || 1;
    const bar = (w - 20) / bins.length;
    const label = "Durations of " + agent.agent + "'s turns: " + bins.map(function (n, k) {
      return n + " from " + (k * width).toFixed(1) + " s";
    }).join(", ");
    const chart = svg("svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img", "aria-label": label });
    chart.appendChild(svg("title", { text: label }));
    bins.forEach(function (n, k) {
      const height = Math.round((n / top) * 50);
      const x = 10 + k * bar;
      chart.appendChild(svg("rect", { x: x + 1, y: base - height, width: bar - 2, height: height, class: "bar" }));
      if (n) chart.appendChild(svg("text", { x: x + bar / 2, y: base - height - 3, class: "count", text: String(n) }));
    });
    chart.appendChild(svg("line", { x1: 10, x2: w - 10, y1: base, y2: base, class: "axis" }));
    chart.appendChild(svg("text", { x: 10, y: base + 14, class: "tick start", text: "0 s" }));
    chart.appendChild(svg("text", { x: w - 10, y: base + 14, class: "tick end", text: (width * bins.length).toFixed(1) + " s" }));
    chart.appendChild(svg("text", { x: w / 2, y: h - 2, class: "name", text: agent.agent + ": duration" }));
    return el("figure", { cls: "chart" }, chart);
  }

  function costs(agents) {
    const rows = [];
    agents.forEach(function (a) {
      Object.keys(a.cost).forEach(function (c) { rows.push({ agent: a.agent, currency: c, amount: a.cost[c] }); });
    });
    if (!rows.length) return null;
    const w = 360, line = 22, h = rows.length * line + 24;
    const top = Math.max.apply(null, rows.map(function (r) { return r.amount; })) || 1;
    const label = "Cost per agent: " + rows.map(function (r) { return r.agent + " " + cost(r.amount, r.currency); }).join(", ");
    const chart = svg("svg", { viewBox: "0 0 " + w + " " + h, width: w, height: h, role: "img", "aria-label": label });
    chart.appendChild(svg("title", { text: label }));
    rows.forEach(function (r, k) {
      const y = 4 + k * line, length = Math.max(1, Math.round((r.amount / top) * 150));
      chart.appendChild(svg("text", { x: 0, y: y + 14, class: "label", text: r.agent.slice(0, 18) }));
      chart.appendChild(svg("rect", { x: 120, y: y + 3, width: length, height: 14, class: "bar" }));
      chart.appendChild(svg("text", { x: 124 + length, y: y + 14, class: "label", text: cost(r.amount, r.currency) }));
    });
    chart.appendChild(svg("text", { x: w / 2, y: h - 4, class: "name", text: "cost per agent" }));
    return el("figure", { cls: "chart" }, chart);
  }

  // ------------------------------------------------------------------------------------------------------------
  // The turns: sortable on every column, filtered by text, agent and outcome.

  // Each column: its key, its name, "num" or "text", its width, what a cell shows, and what it sorts by (null goes
  // last). Which columns depends on the page: a batch's items, one's own runs, or batches compared.
  function field(key) { return function (t) { return t[key] === undefined ? null : t[key]; }; }
  function plain(key) { return function (t) { return t[key] === null || t[key] === undefined ? "" : String(t[key]); }; }
  function figure(key) { return function (t) { return num(t[key]); }; }
  function column(key, label, kind, width, text, sort) {
    return { key: key, label: label, kind: kind, width: width, text: text || plain(key), sort: sort || field(key) };
  }
  const OUTCOME = column("ok", "outcome", "text outcome", "7%", function (t) { return t.ok ? "ok" : "failed"; },
    function (t) { return t.ok ? 1 : 0; });
  const ERROR = column("err", "error", "text err", UNIT === "turn" ? "11%" : "14%");
  const FIGURES = [
    column("secs", "seconds", "num", "", function (t) { return secs(t.secs); }),
    column("tools", "tool calls", "num", "", figure("tools")),
    column("allow", "allowed", "num", "", figure("allow")),
    column("reject", "rejected", "num", "", figure("reject")),
    column("tokens", "tokens", "num", "", figure("tokens")),
    column("cost", "cost", "num", "9.5%", function (t) { return cost(t.cost, t.cur); }),
  ];
  function when(ms) {
    if (typeof ms !== "number") return "";
    const d = new Date(ms), two = function (n) { return String(n).padStart(2, "0"); };
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " + two(d.getHours()) + ":" +
      two(d.getMinutes()) + ":" + two(d.getSeconds());
  }
  function outcomeOf(o) {
    if (!o) return "—";
    return (o.ok ? "ok" : "failed") + (typeof o.secs === "number" ? " · " + secs(o.secs) + " s" : "") +
      (o.attempts > 1 ? " · " + o.attempts + " tries" : "") + (o.err ? " · " + o.err : "");
  }
  let COLUMNS;
  if (COMPARE) {
    COLUMNS = [column("id", "item", "text data", "14%"),
      column("differs", "differs", "text", "6%", function (t) { return t.differs ? "differs" : ""; },
        function (t) { return t.differs ? 0 : 1; })];
    batches.forEach(function (b, k) {
      COLUMNS.push(column("b" + k, b.name, "text outcome", "", function (t) { return outcomeOf(t.outs[k]); },
        function (t) { const o = t.outs[k]; return o ? (o.ok ? 1 : 0) : null; }));
    });
  } else if (UNIT === "turn") {
    COLUMNS = [column("started", "started", "text", "13%", function (t) { return when(t.started); }),
      column("agent", "agent", "text", "8%"), column("session", "session", "text data", "7%"),
      column("prompt", "prompt", "text data", "13%"), OUTCOME, ERROR].concat(FIGURES);
  } else {
    COLUMNS = [column("id", "item", "text data", "9%"),
      column("attempts", "tries", "num", "4%", function (t) { return num(t.attempts || 1); },
        function (t) { return t.attempts || 1; }),
      column("agent", "agent", "text", "7%"), OUTCOME, ERROR, column("stop", "stop reason", "text", "7%"),
      column("subs", "sub\u00adagents", "num", "", figure("subs"))].concat(FIGURES);
  }
  const SORTS = {};
  COLUMNS.forEach(function (c) { SORTS[c.key] = c.sort; });
  function value(turn, key) { return SORTS[key] ? SORTS[key](turn) : null; }
  function compare(a, b) {
    const key = state.key, x = value(a, key), y = value(b, key);
    if (x === y) return a.i - b.i;
    if (x === null) return 1;  // what a turn lacks goes last, whichever the direction
    if (y === null) return -1;
    const order = typeof x === "number" && typeof y === "number" ? x - y : COLLATOR.compare(String(x), String(y));
    return order ? order * state.dir : a.i - b.i;  // ties keep the file's order, whichever the direction
  }

  const filterText = el("input", { type: "search", id: "filter", placeholder: "filter: id, agent, error, prompt…",
    "aria-label": "filter the " + UNIT + "s by text" });
  const agentNames = COMPARE ? [] : data.overview.agents.map(function (a) { return a.agent; });
  const filterAgent = el("select", { id: "agent-filter", "aria-label": "only the " + UNIT + "s of this agent" },
    el("option", { value: "" }, "every agent"),
    agentNames.map(function (name) { const o = el("option", null, name); o.value = name; return o; }));
  const filterOutcome = COMPARE
    ? el("select", { id: "outcome-filter", "aria-label": "only the items whose outcome differs, or is the same" },
      el("option", { value: "" }, "every item"), el("option", { value: "differs" }, "differs"),
      el("option", { value: "same" }, "same outcome"))
    : el("select", { id: "outcome-filter", "aria-label": "only ok or failed " + UNIT + "s" },
      el("option", { value: "" }, "ok and failed"), el("option", { value: "ok" }, "ok"),
      el("option", { value: "failed" }, "failed"));
  if (COMPARE) filterAgent.hidden = true;  // each batch is its own column: the agent is in its name
  const counter = el("span", { id: "count", "aria-live": "polite" });
  const heads = COLUMNS.map(function (c) {
    const button = el("button", { type: "button", "data-key": c.key }, c.label);
    button.addEventListener("click", function () {
      state.dir = state.key === c.key ? -state.dir : 1;
      state.key = c.key;
      draw();
    });
    const th = el("th", { scope: "col", "data-key": c.key, cls: c.kind.split(" ")[0] }, button);
    if (c.width) th.style.width = c.width;  // the CSSOM, which the policy allows (a style attribute it would not)
    return th;
  });
  const body = el("tbody");
  const more = el("button", { type: "button", id: "more" }, "show more");
  more.addEventListener("click", function () { state.limit += PAGE; draw(); });
  const detail = el("section", { id: "turn", hidden: "" });

  function matching() {
    const text = state.text.toLowerCase();
    return turns.filter(function (t) {
      if (state.agent && t.agent !== state.agent) return false;
      if (state.outcome === "ok" && !t.ok) return false;
      if (state.outcome === "failed" && t.ok) return false;
      if (state.outcome === "differs" && !t.differs) return false;
      if (state.outcome === "same" && t.differs) return false;
      return !text || t.hay.indexOf(text) >= 0;
    });
  }

  function row(turn) {
    const tr = el("tr", { tabindex: "0", "data-i": String(turn.i), "data-id": turn.id,
      cls: COMPARE ? (turn.differs ? "differs" : "same") : (turn.ok ? "ok" : "failed") },
      COLUMNS.map(function (c, k) {
        const text = c.text(turn);
        const td = el("td", { cls: c.kind }, text);
        if (c.kind.indexOf("outcome") >= 0) {
          const o = COMPARE ? turn.outs[k - 2] : turn;
          td.classList.add(!o ? "missing" : (o.ok ? "ok" : "failed"));
        }
        if (text.length > 24) td.title = text;  // cut by the column's width: the whole on hover
        return td;
      }));
    if (turn.i === state.open) tr.setAttribute("aria-selected", "true");
    return tr;
  }

  function draw() {
    let shown = matching();
    if (state.key) shown = shown.slice().sort(compare);
    heads.forEach(function (th) {
      const key = th.getAttribute("data-key");
      th.setAttribute("aria-sort", key === state.key ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    const fragment = document.createDocumentFragment();
    shown.slice(0, state.limit).forEach(function (t) { fragment.appendChild(row(t)); });
    body.replaceChildren(fragment);
    counter.textContent = Math.min(shown.length, state.limit) + " of " + shown.length + " matching " + UNIT +
      "s shown (" + turns.length + " in all)";
    more.hidden = shown.length <= state.limit;
  }

  let pending = null;
  filterText.addEventListener("input", function () {
    clearTimeout(pending);
    pending = setTimeout(function () { state.text = filterText.value; state.limit = PAGE; draw(); }, 80);
  });
  filterAgent.addEventListener("change", function () { state.agent = filterAgent.value; state.limit = PAGE; draw(); });
  filterOutcome.addEventListener("change", function () {
    state.outcome = filterOutcome.value; state.limit = PAGE; draw();
  });
  function pick(event) {
    const tr = event.target.closest("tr[data-i]");
    if (tr) open(Number(tr.getAttribute("data-i")));
  }
  body.addEventListener("click", pick);
  body.addEventListener("keydown", function (event) { if (event.key === "Enter") pick(event); });

  // ------------------------------------------------------------------------------------------------------------
  // One turn, rendered when it is opened from its own data element.

  function pre(text, cls) { return el("pre", { cls: "data" + (cls ? " " + cls : "") }, text === undefined ? "" : text); }
  function line(label, time) {
    return el("div", { cls: "when" }, el("span", { cls: "time" }, at(time)), " ", el("strong", null, label));
  }

  function diffLines(oldText, newText) {
    // The common head and tail, then what went and what came: enough to read an edit, and linear in its size.
    const a = (oldText || "").split("\n"), b = (newText || "").split("\n");
    let head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head++;
    let tail = 0;
    while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
    const out = el("pre", { cls: "data diff" });
    const context = 3;
    if (head > context) out.appendChild(el("span", { cls: "skip" }, "@@ " + (head - context) + " lines unchanged\n"));
    a.slice(Math.max(0, head - context), head).forEach(function (l) { out.appendChild(el("span", null, "  " + l + "\n")); });
    a.slice(head, a.length - tail).forEach(function (l) { out.appendChild(el("del", null, "- " + l + "\n")); });
    b.slice(head, b.length - tail).forEach(function (l) { out.appendChild(el("ins", null, "+ " + l + "\n")); });
    a.slice(a.length - tail, Math.min(a.length, a.length - tail + context)).forEach(function (l) {
      out.appendChild(el("span", null, "  " + l + "\n"));
    });
    if (tail > context) out.appendChild(el("span", { cls: "skip" }, "@@ " + (tail - context) + " lines unchanged\n"));
    return out;
  }

  function toolContent(item) {
    if (item.type === "diff") {
      return el("div", { cls: "content" }, el("div", { cls: "path data" }, "diff of " + (item.path || "?") +
        (item.old === undefined || item.old === "" ? " (a new file)" : "")), diffLines(item.old, item.new));
    }
    if (item.type === "terminal") return el("div", { cls: "content" }, "terminal ", el("code", { cls: "data" }, item.x));
    return pre(item.x);
  }

  function decision(d) {
    if (!d) return el("div", { cls: "decision" }, "no decision recorded");
    const what = d.allowed ? "allowed" : (d.outcome === "cancelled" ? "cancelled" : "rejected");
    const option = d.option ? " (option " + d.option + (d.optionName ? " “" + d.optionName + "”" : "") +
      (d.optionKind ? ", " + d.optionKind : "") + ")" : "";
    return el("div", { cls: "decision " + what },
      el("span", { cls: "time" }, at(d.dt)), " → ", el("strong", null, what), option,
      " · decided by ", el("strong", { cls: "data" }, d.by || "?"), d.reason ? ": " : "",
      d.reason ? el("span", { cls: "data" }, d.reason) : null);
  }

  function forced(e) {
    return e.forced ? el("span", { cls: "note forced" }, " · sent with force=True: the agent did not advertise it") : null;
  }
  function states(list) {
    return (list || []).map(function (s) { return s[0] + " " + at(s[1]); }).join(" → ");
  }
  function planEntries(entries) {
    return el("ul", { cls: "plan" }, (entries || []).map(function (p) {
      return el("li", { cls: "data" }, "[" + (p[1] || "?") + "] " + p[0] + (p[2] ? " (" + p[2] + ")" : ""));
    }));
  }
  // The names of the turn's child sessions, to say who a message between sessions is from and to.
  let childNames = {};
  function collectChildren(events) {
    events.forEach(function (e) {
      if (e.k !== "child") return;
      childNames[e.sid] = e.title || "";
      collectChildren(e.events || []);
    });
  }
  function sessionName(sid) {
    if (!sid) return "?";
    return childNames[sid] ? sid + " (" + childNames[sid] + ")" : sid;
  }
  function eventList(list) {
    const out = el("ol", { cls: "events" });
    list.forEach(function (e) {
      const render = RENDER[e.k] || RENDER.other;
      out.appendChild(el("li", { cls: "event k-" + e.k }, render(e)));
    });
    return out;
  }

  const RENDER = {
    prompt: function (e) {
      return [line("prompt", e.t), pre(e.x),
        e.redacted ? el("p", { cls: "note" }, e.redacted + " secret value(s) not stored: shown as <secret>") : null,
        forced(e)];
    },
    msg: function (e) { return [line("agent", e.t), pre(e.x, "message")]; },
    user: function (e) { return [line("user (replayed)", e.t), pre(e.x)]; },
    thought: function (e) {
      return el("details", { cls: "thought" },
        el("summary", null, el("span", { cls: "time" }, at(e.t)), " thought (" + (e.x || "").length + " characters)"),
        pre(e.x));
    },
    tool: function (e) {
      const title = [e.name, e.kind ? "[" + e.kind + "]" : null, e.title].filter(Boolean).join(" ");
      return el("div", { cls: "tool status-" + (e.status || "pending") },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ", el("strong", null, "tool call "),
          el("span", { cls: "data" }, title || e.id), " · ", el("strong", { cls: "status" }, e.status || "pending"),
          el("span", { cls: "time" }, " (" + e.n + " update" + (e.n === 1 ? "" : "s") + ", last " + at(e.end) + ")")),
        el("div", { cls: "sub data" }, "id " + e.id),
        e.where ? el("div", { cls: "sub data" }, "locations: " + e.where.join(", ")) : null,
        e.input ? el("details", null, el("summary", null, "input"), pre(e.input)) : null,
        (e.replaced || []).map(function (r) {
          return el("div", { cls: "replaced" }, el("div", { cls: "sub" }, "content " + at(r.t) + ", replaced " +
            at(r.until) + " by a later update:"), (r.content || []).map(toolContent));
        }),
        e.replacedMore ? el("div", { cls: "sub" }, e.replacedMore + " more replaced contents, not kept") : null,
        e.replaced ? el("div", { cls: "sub" }, "content now" + (e.ct !== undefined ? " (since " + at(e.ct) + ")" : "") + ":") : null,
        (e.content || []).map(toolContent));
    },
    perm: function (e) {
      return el("div", { cls: "perm" },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ", el("strong", null, "permission asked: "),
          el("span", { cls: "data" }, e.title || e.tool || "?"), e.kind ? " [" + e.kind + "]" : "",
          e.name ? [" · tool ", el("span", { cls: "data" }, e.name)] : null),
        e.content ? [el("div", { cls: "sub" }, "what was asked to approve:"), e.content.map(toolContent)] : null,
        decision(e.decision));
    },
    child: function (e) {
      const head = el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ",
        el("strong", null, e.unannounced ? "session (not announced as a subagent) " : "subagent "),
        el("span", { cls: "data" }, e.title || e.sid), e.state ? " · " : "",
        e.state ? el("strong", { cls: "data status" }, e.state) : null);
      return el("section", { cls: "child" }, head,
        el("div", { cls: "sub data" }, "session " + e.sid + (e.owner ? ", a child of " + e.owner : "")),
        e.description ? el("div", { cls: "data" }, e.description) : null,
        e.states && e.states.length > 1 ? el("div", { cls: "sub data" }, states(e.states)) : null,
        (e.events || []).length ? eventList(e.events) : el("div", { cls: "sub" }, "nothing of its own in the journal"));
    },
    compaction: function (e) {
      return el("div", { cls: "compaction" },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ", el("strong", null, "compaction "),
          el("span", { cls: "data" }, e.id || "?"), " · ", el("strong", { cls: "data" }, e.status || "?")),
        e.states ? el("div", { cls: "sub data" }, states(e.states)) : null,
        e.x ? [el("div", { cls: "sub" }, "summary"), pre(e.x)] : null,
        e.error ? el("div", { cls: "error data" }, e.error) : null);
    },
    planop: function (e) {
      const what = e.removed !== undefined ? " · removed " + at(e.removed) : "";
      return el("div", { cls: "planop" },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ", el("strong", null, "plan "),
          el("span", { cls: "data" }, e.id || "?"),
          el("span", { cls: "time" }, " (" + e.n + " update" + (e.n === 1 ? "" : "s") + ", last " + at(e.end) + ")"),
          what),
        e.entries ? planEntries(e.entries) : null,
        e.uri ? el("div", { cls: "data" }, "in the file " + e.uri) : null,
        e.x ? pre(e.x) : null);
    },
    smsg: function (e) {
      return el("div", { cls: "smsg" }, line("message " + sessionName(e.from) + " → " + sessionName(e.to), e.t),
        pre(e.x));
    },
    ask: function (e) {
      const a = e.answer;
      const answer = a ? el("div", { cls: "decision " + (a.action === "accept" ? "allowed" : "rejected") },
        el("span", { cls: "time" }, at(a.dt)), " → ", el("strong", { cls: "data" }, a.action || "?"),
        " · decided by ", el("strong", { cls: "data" }, a.by || "(not recorded)"),
        a.content ? pre(a.content) : null) : el("div", { cls: "decision" }, "no answer recorded");
      return el("div", { cls: "ask" },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ",
          el("strong", null, "question (" + (e.mode || "?") + ")"), e.tool ? " for tool call " + e.tool : ""),
        pre(e.x),
        e.url ? el("div", null, "URL (not opened): ", el("code", { cls: "data" }, e.url)) : null,
        e.fields ? el("ul", { cls: "fields" }, e.fields.map(function (f) {
          return el("li", { cls: "data" }, f[0] + " (" + (f[1] || "?") + (f[3] ? ", required" : "") + ")" +
            (f[2] ? ": " + f[2] : ""));
        })) : null,
        answer);
    },
    served: function (e) {
      // A file or terminal request of the agent's that the client served (or refused), with who decided it.
      const file = e.m.indexOf("fs/") === 0;
      let what;
      if (e.m === "fs/read_text_file") {
        what = ["file read ", el("span", { cls: "data" }, e.path || "?"),
          typeof e.line === "number" ? " from line " + num(e.line) : "",
          typeof e.limit === "number" ? ", " + num(e.limit) + " lines at most" : ""];
      } else if (e.m === "fs/write_text_file") {
        what = ["file written ", el("span", { cls: "data" }, e.path || "?")];
      } else {
        what = ["terminal ", el("code", { cls: "data" }, e.cmd || "?"), e.cwd ? [" in ", el("span", { cls: "data" }, e.cwd)] : ""];
      }
      const answers = (e.answers || []).map(function (a) {
        return el("div", { cls: "decision " + (a.error ? "rejected" : "allowed") }, el("span", { cls: "time" }, at(a.dt)),
          " → ", el("strong", null, a.error ? "refused" : "served"), a.m && !file ? " " + a.m : "",
          a.error ? [": ", el("span", { cls: "data" }, a.error)] : "",
          a.by ? [" · decided by ", el("strong", { cls: "data" }, a.by)] : "");  // a terminal's later steps: none
      });
      const d = e.decision;
      const decided = d ? el("div", { cls: "decision " + (d.allowed ? "allowed" : "rejected") },
        el("span", { cls: "time" }, at(d.dt)), " → ", el("strong", null, d.allowed ? "allowed" : "refused"),
        " · decided by ", el("strong", { cls: "data" }, d.by || "(not recorded)"),
        d.reason ? [": ", el("span", { cls: "data" }, d.reason)] : "",
        d.resolved && d.resolved !== e.path ? el("div", { cls: "sub data" }, "resolved to " + d.resolved) : null,
        d.line ? el("div", { cls: "sub data" }, "command line " + d.line) : null,
        d.prior ? el("div", { cls: "sub data" }, d.prior.exists ? "the file before: " + num(d.prior.size) + " bytes" +
          (d.prior.sha256 ? ", sha256 " + d.prior.sha256 : "") : "the file did not exist before") : null) : null;
      const exit = e.exit ? (e.exit[1] ? "ended by signal " + e.exit[1] : "exit status " + (e.exit[0] === null ? "?" : e.exit[0])) : "";
      return el("div", { cls: "served" + (file ? " file" : " terminal") },
        el("div", { cls: "when" }, el("span", { cls: "time" }, at(e.t)), " ", el("strong", null, what[0]), what.slice(1),
          exit ? [" · ", el("strong", { cls: "exit" }, exit)] : ""),
        e.env ? el("div", { cls: "sub data" }, "environment: " + e.env.join(", ")) : null,
        e.tid ? el("div", { cls: "sub data" }, "terminal id " + e.tid) : null,
        e.steps ? el("div", { cls: "sub" }, e.steps.map(function (s) { return s[0] + " " + at(s[1]); }).join(" → ")) : null,
        e.x !== undefined ? el("details", null, el("summary", null, (e.m === "fs/write_text_file" ? "content written" : "content read") +
          (typeof e.size === "number" ? " (" + num(e.size) + " bytes)" : "")), pre(e.x)) : null,
        e.out !== undefined ? [el("div", { cls: "sub" }, "output" + (e.outCut ? " (its tail)" : "")), pre(e.out)] : null,
        decided,
        answers.length ? answers : el("div", { cls: "decision" }, "no answer recorded"));
    },
    notice: function (e) {
      return el("div", { cls: "notice" }, line("notice (" + (e.severity || "info") + ")", e.t),
        el("div", { cls: "data" }, e.title || ""), e.x ? pre(e.x) : null);
    },
    plan: function (e) { return [line("plan", e.t), planEntries(e.entries)]; },
    usage: function (e) {
      const parts = [];
      if (typeof e.used === "number") parts.push("context " + num(e.used) + (typeof e.size === "number" ? " of " + num(e.size) : ""));
      if (typeof e.cost === "number") parts.push("cost so far " + cost(e.cost, e.cur));
      return el("div", { cls: "small" }, el("span", { cls: "time" }, at(e.t)), " usage: " + parts.join(", "));
    },
    result: function (e) {
      const usage = Object.keys(e.usage || {}).map(function (k) { return k + " " + num(e.usage[k]); }).join(", ");
      return el("div", { cls: "result" }, el("span", { cls: "time" }, at(e.t)), " ",
        el("strong", null, "stop reason: "), el("span", { cls: "data" }, e.stop || "?"), usage ? " · " + usage : "");
    },
    error: function (e) {
      return el("div", { cls: "error" }, line("error answer" + (e.m ? " to " + e.m : ""), e.t), pre(e.x),
        e.data ? pre(e.data) : null);
    },
    call: function (e) {
      return el("div", { cls: "small" }, el("span", { cls: "time" }, at(e.t)), " " + (e.m || "") + " ",
        el("span", { cls: "data" }, e.x || ""), forced(e));
    },
    cancel: function (e) { return el("div", { cls: "small" }, el("span", { cls: "time" }, at(e.t)), " cancel sent"); },
    agentline: function (e) {
      return el("div", { cls: "odd" }, line("agent line: " + (e.kind || "?") + (e.m ? " " + e.m : ""), e.t),
        e.why ? el("div", { cls: "data" }, e.why) : null, e.x ? pre(e.x) : null);
    },
    update: function (e) { return el("div", { cls: "odd" }, line("update " + (e.kind || "?"), e.t), pre(e.x)); },
    bad: function (e) {
      const what = e.n ? "journal line " + e.n + " " + (e.why || "") + (e.size ? " (" + num(e.size) + " bytes)" : "") : (e.why || "");
      return el("div", { cls: "odd" }, line(what, e.t), e.x ? pre(e.x) : null);
    },
    other: function (e) { return el("div", { cls: "odd" }, line("record", e.t), pre(e.x)); },
  };

  function select(index) {
    // Only the rows that change: a redraw of the whole table would cost as much as a sort.
    body.querySelectorAll("tr[aria-selected]").forEach(function (tr) { tr.removeAttribute("aria-selected"); });
    state.open = index;
    const tr = index === null ? null : body.querySelector('tr[data-i="' + index + '"]');
    if (tr) tr.setAttribute("aria-selected", "true");
  }

  function shut() {
    detail.hidden = true;
    select(null);
    history.replaceState(null, "", location.pathname + location.search);
  }

  // One attempt's facts, error, cut and events (``turn`` its row, or an earlier attempt; ``main`` the one the ids
  // of the page name).
  function attemptView(turn, tx, main) {
    const facts = [
      ["agent", turn.agent], ["outcome", turn.ok ? "ok" : "failed"], ["stop reason", turn.stop || "none"],
      ["started", when(turn.started)], ["seconds", secs(turn.secs)], ["session", turn.session],
      ["tool calls", num(turn.tools)], ["subagents", turn.subs ? num(turn.subs) : ""],
      ["permissions", turn.allow === undefined ? "" : num(turn.allow) + " allowed, " + num(turn.reject) + " rejected"],
      ["tokens", num(turn.tokens)], ["cost", cost(turn.cost, turn.cur)],
      ["attempt", turn.attempt === undefined ? "" : String(turn.attempt) +
        (turn.attempts > 1 ? " of " + turn.attempts + " (the latest; the earlier ones are below)" : "")],
      ["trace", turn.trace],
      ["journal", (turn.journal || "") + (turn.epoch !== undefined && turn.epoch !== null ? " (epoch " + turn.epoch + ")" : "")],
    ].filter(function (f) { return f[1]; });
    const parts = [
      el("dl", { cls: "facts" }, facts.map(function (f) { return [el("dt", null, f[0]), el("dd", { cls: "data" }, f[1])]; })),
    ];
    const errorId = main ? { cls: "error", id: "turn-error" } : { cls: "error" };
    if (tx.error) {
      parts.push(el("div", errorId, el("strong", null, "error: "),
        tx.error.type ? el("span", { cls: "data" }, tx.error.type) : null, pre(tx.error.message),
        tx.error.stderr ? [el("strong", null, "the agent's stderr (tail)"), pre(tx.error.stderr, "stderr")] : null));
    } else if (turn.err) {
      parts.push(el("div", errorId, el("strong", null, "error: "), pre(turn.err)));
    }
    if (tx.cut) {
      parts.push(el("p", main ? { cls: "cut", id: "cut" } : { cls: "cut" }, "This transcript was cut at " +
        num(tx.cut.limit) + " bytes of text (--max-turn-bytes): " + num(tx.cut.bytes) + " more bytes and " +
        num(tx.cut.events) + " more events are in the journal, not in this page."));
    }
    collectChildren(tx.events || []);
    parts.push(eventList(tx.events || []));
    (tx.earlier || []).slice().reverse().forEach(function (e) {
      parts.push(el("details", { cls: "attempt" },
        el("summary", null, "earlier attempt " + (e.attempt || "?") + ": " + (e.ok ? "ok" : "failed") +
          (e.err ? " · " + e.err : "")),
        attemptView(e, e, false)));
    });
    return parts;
  }

  function open(index) {
    const turn = turns[index];
    const close = el("button", { type: "button", id: "close" }, "close");
    close.addEventListener("click", shut);
    const noun = COMPARE ? "Item " : (UNIT === "item" ? "Item " : "Turn ");
    const parts = [el("div", { cls: "bar-line" }, el("h2", null, noun, el("span", { cls: "data" }, turn.id)), close)];
    childNames = {};
    if (COMPARE) {
      // Each batch's turn one beside the other, in the order the batches were named.
      parts.push(el("div", { cls: "side" }, batches.map(function (b, k) {
        const o = turn.outs[k];
        const source = document.getElementById("tx-" + index + "-" + k);
        const tx = source ? JSON.parse(source.textContent) : { events: [] };
        return el("section", { cls: "column " + (!o ? "missing" : (o.ok ? "ok" : "failed")) },
          el("h3", { cls: "data" }, b.name),
          o ? attemptView(o, tx, false) : el("p", { cls: "sub" }, "not in this batch"));
      })));
    } else {
      const source = document.getElementById("tx-" + index);
      const tx = source ? JSON.parse(source.textContent) : { events: [] };
      parts.push(attemptView(turn, tx, true));
    }
    detail.replaceChildren.apply(detail, parts.flat());
    detail.hidden = false;
    select(index);
    // The turn in the address's fragment, so that the address, reloaded or passed on, opens it again.
    history.replaceState(null, "", "#" + encodeURIComponent(turn.key));
    detail.scrollIntoView({ block: "start" });
  }

  app.appendChild(COMPARE ? batchTotals() : overview());
  app.appendChild(el("section", { id: "turns" }, el("h2", null, UNIT === "item" ? "Items" : "Turns"),
    el("div", { cls: "filters" }, filterText, filterAgent, filterOutcome, counter),
    el("table", { cls: "turns", id: "turn-table" }, el("thead", null, el("tr", null, heads)), body), more));
  app.appendChild(detail);
  draw();
  document.addEventListener("keydown", function (event) { if (event.key === "Escape" && !detail.hidden) shut(); });
  if (location.hash.length > 1) {
    let wanted = null;
    try { wanted = decodeURIComponent(location.hash.slice(1)); } catch (error) { wanted = null; }
    // An address made when each attempt was a row of its own (``#again~2``) names its item.
    const bare = typeof wanted === "string" ? wanted.replace(/~[^~]*$/, "") : null;
    const found = Object.prototype.hasOwnProperty.call(named, wanted) ? named[wanted]
      : turns.find(function (t) { return t.id === wanted || t.id === bare; });
    if (found) open(found.i);
  }
  performance.mark("tinyacp-view-ready");
  document.body.setAttribute("data-ready", "1");
})();
