// The DeepSeekEyes web console: one ES module, no dependencies, no build step.
// Every string that came from a model, an image, a page or an MCP server is put on the page
// with textContent (el() below never parses HTML); there is no innerHTML anywhere.

const API = "/console/api";
let csrf = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A view's nodes into main; absent parts (null, false) are left out, never written as text.
function put(main, ...nodes) {
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

function say(text, bad = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = bad ? "status bad" : "status";
}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  if (method !== "GET") {
    headers["content-type"] = "application/json";
    if (csrf) headers["x-csrf-token"] = csrf;
  }
  const answer = await fetch(API + path, {
    method, headers, credentials: "same-origin",
    body: method === "GET" ? undefined : JSON.stringify(body || {}),
  });
  let data = null;
  try { data = await answer.json(); } catch { data = null; }
  if (!answer.ok) {
    const error = (data && data.error) || {};
    const failure = new Error(`${error.code || answer.status}: ${error.message || "failed"}`);
    failure.code = error.code;
    throw failure;
  }
  return data;
}

function when(ts) {
  if (ts === null || ts === undefined) return "-";
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19);
}

function table(headers, rows, caption) {
  // A table wider than the screen scrolls: the keyboard must reach it too.
  return el("div", { class: "table-wrap", tabindex: "0", role: "region",
    "aria-label": caption || headers.join(", ") },
    el("table", {},
      caption ? el("caption", { class: "visually-hidden", text: caption }) : null,
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, rows)));
}

function expandable(text, truncated, limit = 400) {
  const whole = String(text || "");
  if (whole.length <= limit) {
    return el("pre", { text: whole + (truncated ? " … (cut at the server's bound)" : "") });
  }
  const shown = el("pre", { text: whole.slice(0, limit) + " …" });
  const button = el("button", { class: "secondary", type: "button", "aria-expanded": "false",
    text: `Show all ${whole.length} characters` });
  button.addEventListener("click", () => {
    const open = button.getAttribute("aria-expanded") === "true";
    shown.textContent = open ? whole.slice(0, limit) + " …" : whole;
    button.setAttribute("aria-expanded", open ? "false" : "true");
    button.textContent = open ? `Show all ${whole.length} characters` : "Show less";
  });
  return el("div", {}, shown, button);
}

// ---- conversations ----------------------------------------------------------------------

async function viewConversations(main, params) {
  const query = params.get("q") || "";
  const offset = Number(params.get("offset") || 0) || 0;
  const form = el("form", { class: "search", role: "search" });
  const input = el("input", { type: "search", id: "q", name: "q", value: query,
    "aria-label": "Search conversations" });
  form.append(el("label", { for: "q", text: "Search" }), input,
    el("button", { type: "submit", text: "Search" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = "#conversations?q=" + encodeURIComponent(input.value);
  });
  // One page of rows: the server pages the list, however many sessions there are.
  const data = await api(`/conversations?q=${encodeURIComponent(query)}&offset=${offset}`);
  const rows = data.conversations.map((c) => el("tr", {},
    el("td", {}, el("a", { href: "#conversation/" + encodeURIComponent(c.id),
      text: c.preview || "(no user message)" }),
      c.forked_from ? el("span", { class: "muted", text: ` · fork of ${c.forked_from}` }) : null),
    el("td", { text: c.model || "-" }),
    el("td", { text: c.client, title: `source ${c.source || "-"}, scope ${c.scope}` }),
    el("td", { text: c.path || "-" }),
    el("td", { text: String(c.turns) }),
    el("td", { text: when(c.last_at) })));
  const page = (to) => "#conversations?" + new URLSearchParams({ q: query, offset: String(to) });
  const pager = el("nav", { class: "actions pager", "aria-label": "Pages of conversations" },
    offset > 0 ? el("a", { href: page(Math.max(0, offset - data.limit)), text: "← Newer", rel: "prev" }) : null,
    el("span", { class: "muted", text: rows.length ? `${offset + 1}–${offset + rows.length}` : "" }),
    data.next_offset !== null ? el("a", { href: page(data.next_offset), text: "Older →", rel: "next" }) : null);
  put(main, el("h2", { text: "Conversations" }), form,
    rows.length ? table(["Preview", "Model", "Client", "Path", "Turns", "Last activity"], rows,
      "Conversations, most recently active first")
      : el("p", { text: query ? `No conversation holds “${query}”.` : "No conversations yet." }),
    pager);
}

const LAYERS = ["ocr", "regions", "objects"];
// Drawn in this order: text boxes last, on top of the regions that hold them.
const DRAWN = ["regions", "objects", "ocr"];

function drawBoxes(stage, tip, record) {
  const boxes = [];
  for (const layer of DRAWN) {
    for (const [index, item] of ((record && record[layer]) || []).entries()) {
      const box = item && item.bbox;
      if (!Array.isArray(box) || box.length !== 4) continue;
      const words = item.text || item.label || item.name || item.kind || layer;
      const confidence = typeof item.confidence === "number" ? item.confidence.toFixed(2) : "-";
      const label = `${layer} ${index + 1}: ${words} (confidence ${confidence})`;
      const node = el("button", { type: "button", class: "box " + layer, "data-layer": layer,
        "aria-label": label, "aria-describedby": tip.id });
      node.style.left = (box[0] * 100) + "%";
      node.style.top = (box[1] * 100) + "%";
      node.style.width = (box[2] * 100) + "%";
      node.style.height = (box[3] * 100) + "%";
      const show = () => {
        tip.textContent = label;
        tip.style.left = (box[0] * 100) + "%";
        tip.style.top = Math.min(95, (box[1] + box[3]) * 100) + "%";
        tip.hidden = false;
      };
      const hide = () => { tip.hidden = true; };
      node.addEventListener("mouseenter", show);
      node.addEventListener("focus", show);
      node.addEventListener("mouseleave", hide);
      node.addEventListener("blur", hide);
      stage.append(node);
      boxes.push(node);
    }
  }
  return boxes;
}

function layerToggles(image, boxes) {
  return el("fieldset", { class: "layers" },
    el("legend", { text: "Evidence layers" }),
    LAYERS.map((layer) => {
      const id = `layer-${layer}-${image.sha256.slice(0, 12)}`;
      const count = boxes.filter((b) => b.dataset.layer === layer).length;
      const box = el("input", { type: "checkbox", id, checked: true, "data-layer": layer });
      box.addEventListener("change", () => {
        for (const b of boxes) if (b.dataset.layer === layer) b.classList.toggle("hidden", !box.checked);
      });
      return el("span", {}, box, el("label", { for: id, text: ` ${layer} (${count})` }));
    }));
}

function provenancePanel(found) {
  const attempts = (found.attempts || []).map((a) => el("tr", {},
    el("td", { text: a.route || "-" }), el("td", { text: a.phase }), el("td", { text: a.outcome + (a.code ? ` ${a.code}` : "") }),
    el("td", { text: a.latency_ms === null || a.latency_ms === undefined ? "-" : `${a.latency_ms} ms` }),
    el("td", { text: a.cache ? "hit" : "-" })));
  const badge = el("span", { class: "badge " + (found.verified ? "ok" : "bad"),
    text: found.verified ? "verified" : "not verified" });
  const steps = found.steps.map((s) => {
    const what = s.step === "usage" ? Object.entries(s.usage).map(([k, v]) => `${k} ${v}`).join(", ")
      : s.step === "upstream request" ? `${s.model || "-"} ${s.category || ""} sha256:${(s.request_sha256 || "").slice(0, 12)}`
      : s.step === "attempt" ? `${s.phase} ${s.outcome}${s.route ? " via " + s.route : ""}`
      : s.step === "evidence" ? `sha256:${(s.record_sha256 || "").slice(0, 12)}`
      : s.step === "image" ? `sha256:${(s.sha256 || "").slice(0, 12)}` : "";
    return el("li", {}, el("span", { class: "step", text: s.step }), ` ${what} `,
      el("span", { class: "badge " + (s.verified ? "ok" : "bad"),
        text: s.verified ? `verified (entry ${s.seq})` : "not verified" }));
  });
  return [
    el("h4", { text: "Attempts " }, badge),
    attempts.length ? table(["Route", "Phase", "Outcome", "Latency", "Cache"], attempts,
      "Vision attempts for this image") : el("p", { class: "muted", text: "No attempts recorded." }),
    el("details", { class: "provenance" },
      el("summary", { text: `Provenance: ${found.steps.length} links, ${found.verified ? "each verified against the audit chain" : "not all verified"}` }),
      el("ol", {}, steps)),
  ];
}

// Overlays load as their image comes on screen: a conversation of fifty images paints its
// first turn at once and asks for each image's evidence only when it is looked at.
const watcher = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (!entry.isIntersecting) continue;
    watcher.unobserve(entry.target);
    entry.target.dispatchEvent(new Event("visible"));
  }
}, { rootMargin: "200px" }) : null;

function overlay(conversationId, image) {
  const stage = el("div", { class: "stage" });
  const img = el("img", { src: `${API}/images/${image.sha256}`, loading: "lazy",
    alt: `image ${image.sha256.slice(0, 12)}, ${image.width}×${image.height}`,
    width: image.width, height: image.height });
  stage.append(img);
  const tip = el("div", { class: "tip", role: "tooltip", id: "tip-" + image.sha256.slice(0, 16),
    hidden: true });
  stage.append(tip);
  const left = el("div", {}, stage);
  const side = el("div", { class: "attempts", "aria-busy": "true" },
    el("p", { class: "muted", text: image.turn_id ? "Evidence loads when the image is on screen…" : "No evidence was acquired for this image." }));
  const figure = el("figure", { class: "image-block", "data-sha256": image.sha256 }, left,
    el("div", {}, side, el("figcaption", { class: "muted mono", text: `sha256:${image.sha256}` })));
  if (image.turn_id) {
    const load = async () => {
      try {
        const found = await api(`/conversations/${encodeURIComponent(conversationId)}/images/${image.sha256}/provenance`);
        const boxes = drawBoxes(stage, tip, found.evidence && found.evidence.record);
        left.append(layerToggles(image, boxes));
        side.replaceChildren(...provenancePanel(found));
      } catch (error) {
        side.replaceChildren(el("p", { class: "bad", text: error.message }));
      }
      side.removeAttribute("aria-busy");
      figure.dataset.loaded = "true";
    };
    figure.addEventListener("visible", load, { once: true });
    if (watcher) watcher.observe(figure); else load();
  }
  return figure;
}

function forkTree(data) {
  if (!data.tree || data.tree.length < 2) return null;
  const items = data.tree.map((node) => el("li", { style: null, class: "depth-" + Math.min(node.depth, 6) },
    node.current ? el("strong", { class: "mono", text: node.id, "aria-current": "page" })
      : el("a", { class: "mono", href: "#conversation/" + encodeURIComponent(node.id), text: node.id }),
    node.parent ? el("span", { class: "muted", text: ` forked from ${node.parent} after message ${node.at}` }) : el("span", { class: "muted", text: " (root)" })));
  return el("section", { "aria-label": "Fork tree" }, el("h3", { text: "Fork tree" }), el("ul", { class: "tree" }, items));
}

async function viewConversation(main, id) {
  const data = await api("/conversations/" + encodeURIComponent(id));
  const out = [el("p", {}, el("a", { href: "#conversations", text: "← All conversations" })),
    el("h2", { text: "Conversation " }, el("span", { class: "mono", text: data.id })),
    el("p", { class: "muted", text: `client ${data.client} · path ${data.path || "-"} · scope ${data.scope}` +
      (data.fork ? ` · fork of ${data.fork.parent} at ${data.fork.at}` : "") }),
    forkTree(data)];
  for (const message of data.messages) {
    const block = el("section", { class: "msg", "aria-label": `${message.role} message ${message.seq}` },
      el("div", {}, el("span", { class: "role", text: message.role }),
        el("span", { class: "muted", text: ` · ${when(message.ts)}` +
          (message.superseded ? " · superseded" : "") +
          (message.tool_call_id ? ` · result of ${message.tool_call_id}` : "") })));
    for (const part of message.parts) {
      if (part.type === "image") {
        const image = data.images[part.sha256];
        block.append(image && image.stored ? overlay(data.id, image)
          : el("p", { class: "muted", text: `[image sha256:${part.sha256.slice(0, 12)} not stored]` }));
      } else {
        block.append(expandable(part.text, part.truncated));
      }
    }
    for (const call of message.calls) {
      block.append(el("details", {},
        el("summary", { text: `tool call ${call.name}` + (call.internal ? " (runtime)" : "") }),
        expandable(call.arguments.text, call.arguments.truncated)));
    }
    out.push(block);
  }
  const turns = data.turns.map((t) => el("tr", {},
    el("td", { class: "mono", text: t.id }), el("td", { text: t.model || "-" }),
    el("td", { text: t.path }), el("td", { text: t.outcome + (t.code ? ` ${t.code}` : "") }),
    el("td", { text: `${t.seconds} s` }),
    el("td", { text: t.usage ? JSON.stringify(t.usage) : "-" }),
    el("td", {}, (t.looks || []).length ? el("ul", { class: "looks" }, t.looks.map((l) => el("li", {
      text: `${l.image}` + (l.region ? ` region [${l.region.map((v) => Number(v).toFixed(2)).join(", ")}]` : "") +
        (l.code ? `: failed ${l.code}` : ` via ${l.route || "-"}${l.cached ? " (cache)" : ""}`) })))
      : el("span", { class: "muted", text: "-" }))));
  out.push(el("h3", { text: "Turns" }),
    turns.length ? table(["Turn", "Model", "Path", "Outcome", "Time", "Usage", "Look rereads"], turns, "Turns")
      : el("p", { class: "muted", text: "No turns." }));
  const screensAt = el("section", { id: "screens", "aria-label": "Screens" });
  out.push(screensAt);
  put(main, ...out);
  // After the first paint: the conversation's browser and desktop screens, if any.
  api(`/conversations/${encodeURIComponent(data.id)}/screens`)
    .then((found) => put(screensAt, ...screensView(found)))
    .catch((error) => put(screensAt, el("p", { class: "bad", text: error.message })));
}

function reportView(report) {
  const title = `Report ${report.schema || ""} (${report.tool || "-"}, ${when(report.ts)})`;
  if (report.unreadable) {
    return [el("h4", { text: title }), el("p", { class: "muted mono", text: `sha256:${report.sha256}: ${report.unreadable}` })];
  }
  const summary = report.summary || {};
  const asserted = summary.assertions || {};
  const steps = report.steps.map((s) => el("tr", {},
    el("td", { text: String(s.index) }), el("td", { class: "mono", text: s.tool }),
    el("td", {}, el("code", { text: JSON.stringify(s.arguments || {}) })),
    el("td", { class: "mono", text: `${s.state_before || "-"} → ${s.state_after || "-"}` }),
    el("td", { text: (s.outcome || "-") + (s.code ? ` ${s.code}` : "") }),
    el("td", { class: "mono", text: s.url || "-" }),
    el("td", { text: s.duration_ms === null || s.duration_ms === undefined ? "-" : `${s.duration_ms} ms` })));
  const checks = report.assertions.map((a) => el("tr", {},
    el("td", { text: String(a.step) }), el("td", { text: a.kind }),
    el("td", { text: a.expected }), el("td", { text: a.actual }),
    el("td", { text: a.passed === null ? "for the model to judge" : a.passed ? "passed" : "failed" })));
  return [el("h4", { text: title }),
    el("p", { class: "muted", text: `${summary.steps ?? report.steps.length} steps, ${summary.states ?? "-"} states, ` +
      `assertions ${asserted.passed ?? 0} passed / ${asserted.failed ?? 0} failed, ` +
      `${(report.timing || {}).in_steps_ms ?? "-"} ms in steps` +
      (report.more_steps ? ` (${report.more_steps} more steps not shown)` : "") }),
    table(["Step", "Tool", "Arguments", "State", "Outcome", "URL", "Took"], steps, `report steps, ${report.sha256.slice(0, 12)}`),
    checks.length ? table(["Step", "Assertion", "Expected", "Actual", "Verdict"], checks, `report assertions, ${report.sha256.slice(0, 12)}`) : null];
}

function screensView(found) {
  const kinds = Object.entries(found.screens);
  const reports = (found.reports || []).flatMap(reportView);
  if (!kinds.length && !found.observation && !reports.length) return [];
  const out = [el("h3", { text: "Screens" })];
  for (const [kind, screen] of kinds) {
    const steps = screen.steps.map((s) => el("tr", {},
      el("td", { text: when(s.ts) }), el("td", { class: "mono", text: s.action }),
      el("td", { text: (s.outcome || "-") + (s.code ? ` ${s.code}` : "") }),
      el("td", { class: "mono", text: `${s.state_before || "-"} → ${s.state_after || "-"}` }),
      el("td", { class: "mono", text: s.where || "-" }),
      el("td", { text: s.ms === null || s.ms === undefined ? "-" : `${s.ms} ms` }),
      el("td", {}, el("span", { class: "badge " + (s.verified ? "ok" : "bad"),
        text: s.verified ? `verified (entry ${s.seq})` : "not verified" }))));
    out.push(el("h4", { text: `${kind === "browser" ? "Browser" : "Desktop"}: state ` },
      el("span", { class: "mono", text: screen.state_id || "-" })),
    el("p", { class: "muted mono", text: screen.where || "" }),
    screen.screenshot ? el("img", { class: "screenshot", src: `${API}/images/${screen.screenshot.sha256}`,
      loading: "lazy", width: screen.screenshot.width, height: screen.screenshot.height,
      alt: `latest ${kind} screenshot, ${screen.screenshot.width}×${screen.screenshot.height}` })
      : el("p", { class: "muted", text: "No stored screenshot." }),
    table(["Time", "Action", "Outcome", "State", "Where", "Took", "Chain"], steps, `${kind} steps, newest first`));
  }
  if (found.observation) {
    out.push(el("h4", { text: `Latest observation (${found.observation.tool})` }),
      ...found.observation.parts.map((p) => expandable(p.text, p.truncated)));
  }
  out.push(...reports);
  return out;
}

// ---- approvals --------------------------------------------------------------------------

async function viewApprovals(main) {
  const data = await api("/approvals");
  const title = el("h2", { text: "Approvals" });
  if (!data.running) {
    put(main, title, el("p", { text: "No gateway runs here: approvals need the running gateway (deepseek-eyes serve), with the terminal among its tool sources for plans, or ask-first MCP tools." }));
    return;
  }
  const rows = data.plans.map((plan) => {
    const expired = plan.state === "expired";
    const decision = plan.decision || {};
    const act = (verdict) => async () => {
      try {
        await api(`/approvals/${encodeURIComponent(plan.session_id)}/${encodeURIComponent(plan.plan_id)}/${verdict}`,
          { method: "POST" });
        say(`${verdict === "approve" ? "Approved" : "Denied"} ${plan.plan_id}`);
      } catch (error) { say(error.message, true); }
      route();
    };
    return el("tr", {},
      el("td", {}, el("code", { text: JSON.stringify(plan.argv_visible || plan.argv) })),
      el("td", { class: "mono", text: plan.cwd || "-" }),
      el("td", { text: (decision.reasons || []).join("; ") || "-" }),
      el("td", { text: decision.risk || "-" }),
      el("td", { text: decision.mode || "-" }),
      el("td", {}, plan.conversation
        ? el("a", { class: "mono", href: "#conversation/" + encodeURIComponent(plan.conversation), text: plan.conversation })
        : el("span", { class: "mono", text: plan.owner || plan.session_id }),
        el("div", { class: "muted mono", text: plan.turn_id ? `turn ${plan.turn_id}` : `terminal ${plan.session_id}` })),
      el("td", { text: `${Math.round(plan.age_s)} s`, title: `asked ${when(plan.created_at)}` }),
      el("td", {}, expired ? el("span", { class: "badge bad",
        text: `expired: its session ${plan.ended || "ended"}` + (plan.ended_at ? ` at ${when(plan.ended_at)}` : "") })
        : el("div", { class: "actions" },
          el("button", { type: "button", text: "Approve", "aria-label": `Approve ${plan.plan_id}`, onclick: act("approve") }),
          el("button", { type: "button", class: "danger", text: "Deny", "aria-label": `Deny ${plan.plan_id}`, onclick: act("deny") }))));
  });
  // Ask-first MCP calls: every string here came from the model or a server, so each goes
  // in as text (el's text is textContent), never as markup.
  const askRows = (data.asks || []).map((ask) => {
    const act = (verdict) => async () => {
      try {
        await api(`/asks/${encodeURIComponent(ask.ask_id)}/${verdict}`, { method: "POST" });
        say(`${verdict === "approve" ? "Approved" : "Denied"} ${ask.server}/${ask.tool}`);
      } catch (error) { say(error.message, true); }
      route();
    };
    return el("tr", { "data-ask": ask.ask_id },
      el("td", { class: "mono", text: ask.server }),
      el("td", { class: "mono", text: ask.tool }),
      el("td", {}, ask.arguments === null ? el("span", { class: "muted", text: "(kept only as a hash)" })
        : el("code", { text: ask.arguments })),
      el("td", {}, ask.session_id
        ? el("a", { class: "mono", href: "#conversation/" + encodeURIComponent(ask.session_id), text: ask.session_id })
        : el("span", { class: "muted", text: "-" })),
      el("td", { text: `${Math.round(ask.age_s)} s`, title: `asked ${when(ask.created_at)}` + (ask.replica ? ` on ${ask.replica}` : "") }),
      el("td", {}, ask.state !== "waiting"
        ? el("span", { class: ask.state === "approved" ? "badge" : "badge bad", title: ask.reason || null,
          text: ask.state + (ask.by ? ` by ${ask.by}` : "") + (ask.reason ? `: ${ask.reason}` : "") })
        : el("div", { class: "actions" },
          el("button", { type: "button", text: "Approve", "aria-label": `Approve ${ask.tool} call ${ask.ask_id}`, onclick: act("approve") }),
          el("button", { type: "button", class: "danger", text: "Deny", "aria-label": `Deny ${ask.tool} call ${ask.ask_id}`, onclick: act("deny") }))));
  });
  put(main, title,
    el("p", {}, el("button", { type: "button", class: "secondary", text: "Refresh", onclick: () => route() }),
      el("span", { class: "muted", text: " Refreshes by itself every two seconds while open." })),
    rows.length ? table(["Command", "Directory", "Why approval", "Risk", "Mode", "Asked by", "Age", "Decision"], rows,
      "Plans waiting for a person") : el("p", { text: data.terminal ? "Nothing waits for approval." : "No terminal runs here: no plan can wait." }),
    el("h3", { text: "Ask-first MCP calls" }),
    askRows.length ? table(["Server", "Tool", "Arguments", "Session", "Age", "Decision"], askRows,
      "MCP tool calls waiting for a person") : el("p", { text: "No MCP call waits for approval." }));
  watchApprovals(approvalsShape(data));
}

// The queue, asked again every two seconds while the view is open; redrawn only when a
// plan or a call came, went or changed state (a redraw would move the keyboard's focus).
let approvalsTimer = null;
function approvalsShape(data) {
  return JSON.stringify([(data.plans || []).map((p) => [p.plan_id, p.state]),
    (data.asks || []).map((a) => [a.ask_id, a.state])]);
}
function watchApprovals(shape) {
  clearTimeout(approvalsTimer);
  approvalsTimer = setTimeout(async () => {
    if (document.body.dataset.view !== "approvals") return;
    try {
      const data = await api("/approvals");
      if (document.body.dataset.view !== "approvals") return;
      if (approvalsShape(data) !== shape) { await route(); return; }
    } catch { /* the next look tries again */ }
    watchApprovals(shape);
  }, 2000);
}

// ---- MCP --------------------------------------------------------------------------------

async function viewMcp(main) {
  const data = await api("/mcp");
  const out = [el("h2", { text: "MCP servers" })];
  if (!data.running) out.push(el("p", { class: "muted", text: "The gateway does not run here: servers are shown from the settings file, without live status." }));
  if (!data.servers.length) out.push(el("p", { text: "No MCP server is configured." }));
  for (const server of data.servers) {
    const edit = (list, op, selector) => async () => {
      try {
        await api(`/mcp/${encodeURIComponent(server.id)}/tools`, { method: "POST", body: { list, op, selector } });
        say(`${server.id}: ${list} ${op === "add" ? "+=" : "-="} ${selector}`);
      } catch (error) { say(error.message, true); }
      route();
    };
    const rows = server.tools.map((tool) => el("tr", {},
      el("td", { class: "mono", text: tool.name }),
      el("td", { text: tool.risk }),
      el("td", { class: tool.offered ? "ok" : "", text: tool.offered ? "offered" : `not offered: ${tool.why}` }),
      el("td", {}, el("div", { class: "actions" },
        server.allow.includes(tool.name)
          ? el("button", { type: "button", class: "secondary", text: "Disallow", "aria-label": `Disallow ${tool.name}`, onclick: edit("allow", "remove", tool.name) })
          : el("button", { type: "button", text: "Allow", "aria-label": `Allow ${tool.name}`, onclick: edit("allow", "add", tool.name) }),
        server.deny.includes(tool.name)
          ? el("button", { type: "button", class: "secondary", text: "Undeny", "aria-label": `Undeny ${tool.name}`, onclick: edit("deny", "remove", tool.name) })
          : el("button", { type: "button", class: "danger", text: "Deny", "aria-label": `Deny ${tool.name}`, onclick: edit("deny", "add", tool.name) }),
        server.ask.includes(tool.name)
          ? el("button", { type: "button", class: "secondary", text: "Stop asking", "aria-label": `Stop asking first for ${tool.name}`, onclick: edit("ask", "remove", tool.name) })
          : tool.ask
            ? el("span", { class: "muted", text: "asks first (by a selector)" })
            : el("button", { type: "button", class: "secondary", text: "Ask first", "aria-label": `Ask first for ${tool.name}`, onclick: edit("ask", "add", tool.name) }))),
      el("td", { class: "muted", text: tool.description.slice(0, 200) })));
    const act = (path, body, done) => async () => {
      try {
        const answer = await api(`/mcp/${encodeURIComponent(server.id)}/${path}`, { method: "POST", body });
        say(done(answer));
      } catch (error) { say(error.message, true); }
      route();
    };
    const controls = el("div", { class: "actions" },
      el("button", { type: "button", class: "secondary", text: server.enabled ? "Disable" : "Enable",
        "aria-label": `${server.enabled ? "Disable" : "Enable"} ${server.id}`,
        onclick: act("enabled", { enabled: !server.enabled }, () => `${server.id}: ${server.enabled ? "disabled" : "enabled"}`) }),
      data.running ? el("button", { type: "button", class: "secondary", text: "Probe", "aria-label": `Probe ${server.id}`,
        onclick: act("probe", {}, (a) => `${server.id}: probe ok in ${a.probe.latency_ms} ms, ${a.probe.tools.length} tool(s)`) }) : null,
      data.running ? el("button", { type: "button", class: "secondary", text: "Restart", "aria-label": `Restart ${server.id}`,
        onclick: act("restart", {}, (a) => `${server.id}: restarted, ${a.after.status}`) }) : null,
      server.signs_in ? el("button", { type: "button", text: "Sign in", "aria-label": `Sign in to ${server.id}`,
        onclick: () => signIn(server.id) }) : null,
      data.editable ? removeControl(server.id) : null);
    out.push(el("section", { "aria-label": `server ${server.id}` },
      el("h3", {}, el("span", { class: "mono", text: server.id }),
        el("span", { class: "muted", text: ` · ${server.transport} · ${server.enabled ? "enabled" : "disabled"} · ` }),
        el("span", { class: server.status === "ready" ? "ok" : "bad", "data-status-for": server.id,
          text: server.status || "not running here" })),
      controls,
      server.planes ? el("p", { class: "muted", "data-planes-for": server.id,
        text: `tools ${server.planes.tools || "-"} · content ${server.planes.content || "-"}` +
          (server.latency_ms !== null && server.latency_ms !== undefined ? ` · connected in ${server.latency_ms} ms` : "") }) : null,
      server.last_error ? el("p", { class: "bad", text: `last error: ${server.last_error}` + (server.error ? ` (${server.error})` : "") }) : null,
      server.signs_in ? el("p", { class: "muted", "data-signin-for": server.id, text: signinText(server) }) : null,
      el("p", { text: `allow: ${server.allow.join(", ") || "(nothing)"} · deny: ${server.deny.join(", ") || "(nothing)"} · ask first: ${server.ask.join(", ") || "(nothing)"} · risk policy: ${server.risk_policy}` }),
      rows.length ? table(["Tool", "Risk", "Offered", "Allow / deny / ask first", "Description"], rows, `Tools of ${server.id}`)
        : el("p", { class: "muted", text: "No tools discovered (the server is not connected here)." })));
  }
  // Every gateway replica's own connections, as each last wrote them (this page's
  // replica is the live status above).
  const replicaRows = (data.replicas || []).map((r) => el("tr", { "data-replica": r.replica },
    el("td", { class: "mono", text: r.replica + (r.this ? " (this one)" : "") }),
    el("td", { class: "mono", text: r.server }),
    el("td", {}, el("span", { class: r.stale ? "badge bad" : (r.status === "ready" ? "badge" : "badge bad"),
      text: r.stale ? `stale (${r.status || "-"})` : (r.status || "-") })),
    el("td", { text: r.latency_ms === null ? "-" : `${Math.round(r.latency_ms)} ms` }),
    el("td", { class: "mono", text: r.last_error || "-" }),
    el("td", { text: when(r.ts) })));
  if (replicaRows.length) out.push(el("h3", { text: "On every replica" }),
    table(["Replica", "Server", "Status", "Latency", "Last error", "Written"], replicaRows,
      "MCP servers' status on every gateway replica"));
  if (data.editable) out.push(registerForm(), importForm());
  put(main, ...out);
  if (data.running) watchStatus();
}

function signinText(server) {
  const held = server.oauth ? `sign-in: ${server.oauth.status}` +
    (server.oauth.expires_at ? `, token until ${when(server.oauth.expires_at)}` : "") : "sign-in: none held here";
  const job = server.signin;
  if (!job) return held;
  if (job.state === "failed") return `${held} · last sign-in failed: ${job.error ? job.error.code : "-"}`;
  return `${held} · console sign-in ${job.state}` + (job.status ? ` (server ${job.status})` : "");
}

// Removing asks first, in the page: the button shows a confirmation beside it, which takes
// the focus; only its own button sends the request (with the id, as the API wants).
function removeControl(id) {
  const holder = el("span", { class: "confirm" });
  const ask = el("button", { type: "button", class: "danger", text: "Remove", "aria-label": `Remove ${id}`,
    "aria-expanded": "false" });
  ask.addEventListener("click", () => {
    ask.setAttribute("aria-expanded", "true");
    const yes = el("button", { type: "button", class: "danger", text: `Yes, remove ${id}`, onclick: async () => {
      try {
        await api(`/mcp/${encodeURIComponent(id)}/remove`, { method: "POST", body: { confirm: id } });
        say(`${id}: removed`);
      } catch (error) { say(error.message, true); }
      route();
    } });
    const no = el("button", { type: "button", class: "secondary", text: "Keep it", onclick: () => {
      holder.replaceChildren();
      ask.setAttribute("aria-expanded", "false");
      ask.focus();
    } });
    holder.replaceChildren(el("span", { role: "alert", text: ` Remove ${id} from the settings file? ` }), yes, no);
    yes.focus();
  });
  return el("span", {}, ask, holder);
}

// Sign-in: the server's authorization URL comes back from the console's API; it opens in a
// new window (and stays as a link, in case the window was blocked); the redirect ends at the
// gateway's loopback listener, and this page asks how it went until it is over.
async function signIn(id) {
  say(`Signing in to ${id}…`);
  let job;
  try {
    job = await api(`/mcp/${encodeURIComponent(id)}/signin`, { method: "POST", body: {} });
  } catch (error) { say(error.message, true); return; }
  const shown = document.querySelector(`[data-signin-for="${CSS.escape(id)}"]`);
  if (job.url && /^https?:\/\//i.test(job.url)) {  // a web address only, never javascript:
    const link = el("a", { href: job.url, target: "_blank", rel: "noopener noreferrer",
      text: `Open the sign-in page of ${id}` });
    if (shown) shown.replaceChildren(`Sign in at the server's page: `, link, el("span", { class: "mono", text: ` ${job.url}` }));
    window.open(job.url, "_blank", "noopener");
  }
  while (job.state === "waiting") {
    await new Promise((done) => setTimeout(done, 1000));
    try {
      job = await api(`/mcp/${encodeURIComponent(id)}/signin`);
    } catch (error) { say(error.message, true); return; }
  }
  if (job.state === "signed in") say(`${id}: signed in` + (job.status ? `, ${job.status}` : ""));
  else say(`${id}: sign-in failed: ${job.error ? `${job.error.code}: ${job.error.message}` : "-"}`, true);
  if (document.body.dataset.view === "mcp") route();
}

// Live status: the manager's watch stream (what `mcp watch` prints) as server-sent events,
// open while this view is; only the status words change (focus and forms stay as they are).
let statusStream = null;
function stopStatus() {
  if (statusStream) { statusStream.close(); statusStream = null; }
}
function watchStatus() {
  stopStatus();
  statusStream = new EventSource(API + "/mcp/events");
  statusStream.addEventListener("status", (message) => {
    if (document.body.dataset.view !== "mcp") { stopStatus(); return; }
    const server = JSON.parse(message.data);
    const words = server.status || "not running here";
    const node = document.querySelector(`[data-status-for="${CSS.escape(server.id)}"]`);
    if (node && node.textContent !== words) {
      node.textContent = words;
      node.className = server.status === "ready" ? "ok" : "bad";
    }
    const planes = document.querySelector(`[data-planes-for="${CSS.escape(server.id)}"]`);
    if (planes) {
      planes.textContent = `tools ${server.tools_status || "-"} · content ${server.content_status || "-"}` +
        (server.latency_ms !== null && server.latency_ms !== undefined ? ` · connected in ${server.latency_ms} ms` : "");
    }
  });
}

function field(id, label, control, hint) {
  return el("p", { class: "field" }, el("label", { for: id, text: label }), control,
    hint ? el("span", { class: "muted hint", id: id + "-hint", text: hint }) : null);
}

function lines(value) {
  return value.split("\n").map((l) => l.trim()).filter(Boolean);
}

function registerForm() {
  const form = el("form", { class: "panel", "aria-label": "Register a server" });
  const id = el("input", { type: "text", id: "reg-id", name: "id", required: true, autocomplete: "off" });
  const command = el("textarea", { id: "reg-command", name: "command", rows: 3, "aria-describedby": "reg-command-hint" });
  const url = el("input", { type: "text", id: "reg-url", name: "url", "aria-describedby": "reg-url-hint" });
  const env = el("textarea", { id: "reg-env", name: "env", rows: 2, "aria-describedby": "reg-env-hint" });
  const risk = el("select", { id: "reg-risk", name: "risk_policy" },
    el("option", { value: "", text: "default" }), el("option", { value: "read-only", text: "read-only" }),
    el("option", { value: "allow", text: "allow" }));
  const signs = el("input", { type: "checkbox", id: "reg-signin", name: "sign_in" });
  form.append(el("h3", { text: "Register a server" }),
    field("reg-id", "Id", id),
    field("reg-command", "Command (stdio: one argument per line)", command, "e.g. the program, then each argument"),
    field("reg-url", "Or URL (Streamable HTTP)", url, "credentials never go in the URL"),
    field("reg-env", "Environment or headers (NAME=VAR, one per line)", env,
      "the value is read from our environment variable VAR; a secret is never written"),
    field("reg-risk", "Risk policy", risk),
    el("p", {}, signs, el("label", { for: "reg-signin", text: " A person signs in to it (OAuth; HTTP only), then Sign in" })),
    el("button", { type: "submit", text: "Register" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const http = url.value.trim() !== "";
    try {
      const answer = await api("/mcp/servers", { method: "POST", body: {
        id: id.value.trim(), command: http ? [] : lines(command.value), url: http ? url.value.trim() : null,
        env: http ? [] : lines(env.value), headers: http ? lines(env.value) : [],
        risk_policy: risk.value || null, sign_in: signs.checked } });
      say(`registered ${answer.server} (${answer.transport}): nothing allowed yet`);
      route();
    } catch (error) { say(error.message, true); }
  });
  return form;
}

function importForm() {
  const form = el("form", { class: "panel", "aria-label": "Import servers" });
  const text = el("textarea", { id: "import-text", name: "text", rows: 6, "aria-describedby": "import-text-hint" });
  const replace = el("input", { type: "checkbox", id: "import-replace", name: "replace" });
  form.append(el("h3", { text: "Import a Claude, Cursor or VS Code config" }),
    field("import-text", "Config JSON", text, "mcpServers or servers; secrets only as ${VAR}"),
    el("p", {}, replace, el("label", { for: "import-replace", text: " Replace servers whose id is taken" })),
    el("button", { type: "submit", text: "Import" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const answer = await api("/mcp/import", { method: "POST", body: { text: text.value, replace: replace.checked } });
      say(`imported ${answer.imported.map((e) => e.id).join(", ") || "nothing"}` +
        (answer.refused.length ? `; refused ${answer.refused.map((r) => r.server).join(", ")}` : ""));
      route();
    } catch (error) { say(error.message, true); }
  });
  return form;
}

// ---- vision routes and the final models' sight -----------------------------------------

function verdictText(v) {
  if (!v) return "-";
  return `${v.sees ? "sees" : "does not see"} (${v.how}${v.code ? ", " + v.code : ""})` +
    (v.checked_at ? ` · checked ${when(v.checked_at)}, until ${when(v.expires_at)}` : "");
}

async function viewVision(main) {
  const data = await api("/vision");
  const out = [el("h2", { text: "Vision routes and sight" })];
  if (!data.running) out.push(el("p", { class: "muted", text: "The gateway does not run here: only what was learned is shown, and nothing can be probed." }));
  // The order of preference: each route falls back to the next. Moving one writes
  // vision.route_priority (validated like the file) and reaches the running router at once.
  const ordered = data.routes.filter((r) => r.order !== null).sort((a, b) => a.order - b.order)
    .map((r) => r.name);
  const move = (name, by) => async () => {
    const order = [...ordered];
    const at = order.indexOf(name);
    [order[at], order[at + by]] = [order[at + by], order[at]];
    let said = null;
    try {
      const answer = await api("/vision/order", { method: "POST", body: { order } });
      said = `Route order: ${answer.order.join(", ")}`;
    } catch (error) { say(error.message, true); }
    await route();  // the table first, then the word that it changed
    if (said) say(said);
    const again = document.querySelector(`[data-move="${CSS.escape(name)}:${by}"]`) ||
      document.querySelector(`[data-move^="${CSS.escape(name)}:"]`);
    if (again) again.focus();
  };
  const canMove = data.running && data.editable && ordered.length > 1;
  const routes = data.routes.map((r) => el("tr", {},
    el("td", {}, r.order === null ? "-" : String(r.order + 1),
      canMove && r.order !== null ? el("span", { class: "actions" },
        ordered.indexOf(r.name) > 0 ? el("button", { type: "button", class: "secondary", text: "↑",
          "aria-label": `Move ${r.name} up`, "data-move": `${r.name}:-1`, onclick: move(r.name, -1) }) : null,
        ordered.indexOf(r.name) < ordered.length - 1 ? el("button", { type: "button", class: "secondary", text: "↓",
          "aria-label": `Move ${r.name} down`, "data-move": `${r.name}:1`, onclick: move(r.name, 1) }) : null) : null),
    el("td", { class: "mono", text: r.name }), el("td", { text: r.kind }),
    el("td", { text: r.model || "-" }),
    el("td", { class: r.health === "healthy" ? "ok" : "", text: r.health + (r.health_code ? ` (${r.health_code})` : "") }),
    el("td", { text: r.circuit + (r.circuit_open_for_s ? ` for ${Math.round(r.circuit_open_for_s)} s` : "") }),
    el("td", { text: r.probe }), el("td", { text: r.last_code || "-" })));
  out.push(el("h3", { text: "Routes, in the order they are tried" }),
    routes.length ? table(["Order", "Route", "Kind", "Model", "Health", "Circuit", "Probe", "Last code"], routes, "Vision routes")
      : el("p", { class: "muted", text: "No route status here." }));
  if (data.running) {
    out.push(el("p", {}, el("button", { type: "button", class: "secondary", text: "Probe routes",
      onclick: async () => {
        say("Probing the routes…");
        try {
          const answer = await api("/vision/probe", { method: "POST", body: {} });
          say("Routes probed: " + answer.reports.map((r) => `${r.name} ${r.ok ? "ok" : r.code || "failed"}`).join(", "));
        } catch (error) { say(error.message, true); }
        route();
      } })));
  }
  const models = data.models.map((m) => el("tr", {},
    el("td", { class: "mono", text: m.model }),
    el("td", { text: m.in_force ? verdictText(m.in_force) : "-" }),
    el("td", { text: m.settings ? verdictText(m.settings) : "not said" }),
    el("td", { text: verdictText(m.learned) }),
    el("td", { text: m.priors ? verdictText(m.priors) : "-" }),
    el("td", {}, m.probe ? el("button", { type: "button", class: "secondary", text: "Probe again",
      "aria-label": `Probe again: ${m.model}`, onclick: async () => {
        say(`Probing ${m.model}…`);
        try {
          const answer = await api("/vision/probe", { method: "POST", body: { model: m.model } });
          say(`${m.model}: ${verdictText(answer.verdict)}`);
        } catch (error) { say(error.message, true); }
        route();
      } }) : null)));
  out.push(el("h3", { text: "What each final model sees" }),
    models.length ? table(["Model", "In force", "Settings", "Learned", "Priors", ""], models, "Final models' sight")
      : el("p", { class: "muted", text: "No final model is named in the settings." }));
  put(main, ...out);
}

// ---- audit and usage --------------------------------------------------------------------

async function viewAudit(main) {
  const data = await api("/audit");
  const result = el("p", { id: "verify-result", "aria-live": "polite" });
  const bar = el("progress", { id: "verify-progress", max: "1", value: "0", hidden: true,
    "aria-label": "Verifying the chain" });
  const count = el("span", { id: "verify-count", class: "muted" });
  const button = el("button", { type: "button", text: "Verify the chain" });
  button.addEventListener("click", async () => {
    result.textContent = "Verifying…";
    result.className = "";
    button.disabled = true;
    bar.hidden = false;
    bar.removeAttribute("value");  // indeterminate until the verifier's first count
    try {
      const report = await verifyWithProgress((done, total) => {
        bar.max = Math.max(1, total);
        bar.value = done;
        count.textContent = ` ${done} of ${total} entries checked`;
      });
      result.textContent = report.problem
        ? `Problem ${report.problem.code} at entry ${report.problem.seq}: ${report.problem.reason}`
        : `Intact: ${report.entries} entries, ${report.records_checked} records checked in ${report.seconds} s.`;
      result.className = report.problem ? "bad" : "ok";
    } catch (error) { result.textContent = error.message; result.className = "bad"; }
    button.disabled = false;
  });
  const head = data.head;
  put(main, el("h2", { text: "Audit" }), recordLookup(), auditSearch(),
    el("p", { text: head ? `Head: entry ${head.seq} (${head.kind}) at ${when(head.ts)}` : "The chain is empty." }),
    head ? el("p", { class: "mono", text: head.hash }) : null,
    el("p", { text: `${data.entries} entries, ${data.checkpoints.length} checkpoint(s) shown.` }),
    el("p", {}, button, " ", bar, count), result,
    el("p", {}, el("a", { id: "chain-export", href: `${API}/audit/chain-export`, download: "",
      text: "Export the whole chain (signed; audit verify --file checks it)" })),
    el("h3", { text: "Entries by kind" }),
    table(["Kind", "Entries"], data.kinds.map((k) => el("tr", {}, el("td", { class: "mono", text: k.kind }),
      el("td", { text: String(k.entries) }))), "Chain entries by kind"),
    el("h3", { text: "Checkpoints" }),
    data.checkpoints.length ? table(["Entry", "Hash", "Signed", "Key"], data.checkpoints.map((c) => el("tr", {},
      el("td", { text: String(c.seq) }), el("td", { class: "mono", text: c.hash.slice(0, 16) }),
      el("td", { text: when(c.ts) }), el("td", { class: "mono", text: c.key_id }))), "Signed checkpoints")
      : el("p", { class: "muted", text: "No signed checkpoint yet." }));
}

// The verifier's own progress: the answer is JSON lines, one each time it has checked a
// batch of entries ({done, total}), then the report; read as they arrive.
async function verifyWithProgress(onProgress) {
  const answer = await fetch(API + "/audit/verify", { method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json", "x-csrf-token": csrf || "" }, body: "{}" });
  if (!answer.ok) {
    let error = {};
    try { error = (await answer.json()).error || {}; } catch { /* not JSON */ }
    throw new Error(`${error.code || answer.status}: ${error.message || "failed"}`);
  }
  const reader = answer.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let report = null;
  for (;;) {
    const { value, done } = await reader.read();
    buffered += decoder.decode(value || new Uint8Array(), { stream: !done });
    let cut;
    while ((cut = buffered.indexOf("\n")) >= 0) {
      const line = JSON.parse(buffered.slice(0, cut));
      buffered = buffered.slice(cut + 1);
      if (line.error) throw new Error(`${line.error.code}: ${line.error.message}`);
      if (line.report) report = line.report;
      else onProgress(line.done, line.total);
    }
    if (done) break;
  }
  if (!report) throw new Error("the verification ended without a report");
  return report;
}

function recordLookup() {
  const form = el("form", { class: "search", "aria-label": "Find a record" });
  const input = el("input", { type: "text", id: "record-id", name: "id", autocomplete: "off",
    "aria-describedby": "record-id-hint" });
  const shown = el("pre", { class: "record mono", id: "record-shown", tabindex: "0", "aria-label": "The record", hidden: true });
  form.append(el("label", { for: "record-id", text: "Record" }), input,
    el("button", { type: "submit", text: "Show" }),
    el("span", { class: "muted hint", id: "record-id-hint", text: "a chain seq, turn, session, image, evidence or request sha256, or operation id" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const record = await api("/audit/records/" + encodeURIComponent(input.value.trim()));
      shown.textContent = JSON.stringify(record, null, 2);
      shown.hidden = false;
      say(`Record ${input.value.trim()}: ${record.kind}`);
    } catch (error) { shown.hidden = true; say(error.message, true); }
  });
  return el("section", { "aria-label": "Find a record" }, el("h3", { text: "Any record by id" }), form, shown);
}

function auditSearch() {
  const form = el("form", { class: "filters", "aria-label": "Filter MCP calls and vision attempts" });
  const kind = el("select", { id: "f-kind", name: "kind" },
    el("option", { value: "mcp", text: "MCP calls" }), el("option", { value: "vision", text: "Vision attempts" }));
  const inputs = {};
  const filters = [["server", "Server"], ["tool", "Tool"], ["route", "Route"], ["outcome", "Outcome"]].map(([name, label]) => {
    inputs[name] = el("input", { type: "text", id: "f-" + name, name, autocomplete: "off" });
    return el("span", { class: "filter" }, el("label", { for: "f-" + name, text: label }), inputs[name]);
  });
  const since = el("input", { type: "datetime-local", id: "f-since", name: "since" });
  const until = el("input", { type: "datetime-local", id: "f-until", name: "until" });
  const results = el("div", { id: "audit-results", "aria-live": "polite" });
  const exportLink = el("a", { id: "audit-export", href: `${API}/audit/export?kind=mcp`, download: "",
    text: "Export these (JSON Lines)" });
  const query = (before) => {
    const params = new URLSearchParams({ kind: kind.value });
    for (const [name, input] of Object.entries(inputs)) if (input.value.trim()) params.set(name, input.value.trim());
    if (since.value) params.set("since", String(new Date(since.value).getTime() / 1000));
    if (until.value) params.set("until", String(new Date(until.value).getTime() / 1000));
    if (before) params.set("before", String(before));
    return params;
  };
  const search = async (before) => {
    try {
      const params = query(before);
      exportLink.href = `${API}/audit/export?${query(null)}`;
      const data = await api("/audit/search?" + params);
      const mcp = data.kind === "mcp";
      const rows = data.rows.map((r) => el("tr", {},
        el("td", { text: when(r.ts) }),
        ...(mcp ? [el("td", { class: "mono", text: r.server }), el("td", { class: "mono", text: r.tool || "-" }),
          el("td", { text: r.risk || "-" })]
          : [el("td", { class: "mono", text: r.route || "-" }), el("td", { text: r.phase }),
            el("td", { class: "mono", text: r.operation_id })]),
        el("td", { text: (r.outcome || "-") + (r.code ? ` ${r.code}` : "") }),
        el("td", { text: mcp ? `${r.duration_ms} ms` : (r.latency_ms === null ? "-" : `${r.latency_ms} ms`) }),
        el("td", {}, el("span", { class: "badge " + (r.verified ? "ok" : "bad"),
          text: r.verified ? `verified (entry ${r.seq})` : "not verified" }))));
      const older = data.next_before !== null ? el("button", { type: "button", class: "secondary", text: "Older rows",
        onclick: () => search(data.next_before) }) : null;
      put(results, rows.length
        ? table(["Time", ...(mcp ? ["Server", "Tool", "Risk"] : ["Route", "Phase", "Operation"]), "Outcome", "Took", "Chain"],
          rows, mcp ? "MCP calls" : "Vision attempts")
        : el("p", { class: "muted", text: "Nothing matches." }), older);
    } catch (error) { say(error.message, true); }
  };
  form.append(el("span", { class: "filter" }, el("label", { for: "f-kind", text: "Of" }), kind), ...filters,
    el("span", { class: "filter" }, el("label", { for: "f-since", text: "Since" }), since),
    el("span", { class: "filter" }, el("label", { for: "f-until", text: "Until" }), until),
    el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (event) => { event.preventDefault(); search(null); });
  kind.addEventListener("change", () => { exportLink.href = `${API}/audit/export?${query(null)}`; });
  return el("section", { "aria-label": "MCP calls and vision attempts" },
    el("h3", { text: "MCP calls and vision attempts" }), form, el("p", {}, exportLink), results);
}

// Charts are inline SVG built node by node (createElementNS, setAttribute): no markup is
// parsed, no inline style or script, so the CSP stays strict; colours come from classes.
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

function chart(id, label, width, height, body) {
  return svg("svg", { class: "chart", id, role: "img", "aria-label": label,
    viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "xMinYMin meet" },
  svg("title", { id: id + "-title", text: label }), body);
}

const KINDS = [["exact", "exact provider usage"], ["estimated", "estimated"], ["avoided", "avoided replay"]];

function categoryChart(daily) {
  const days = [...new Set(daily.map((d) => d.day))];
  const totals = days.map((day) => {
    const out = { day };
    for (const [kind] of KINDS) {
      out[kind] = daily.filter((d) => d.day === day && d.kind === kind)
        .reduce((sum, d) => sum + (d.exact ? d.tokens : d.estimated_tokens), 0);
    }
    return out;
  });
  const peak = Math.max(1, ...totals.map((t) => t.exact + t.estimated + t.avoided));
  const width = 640, height = 200, band = (width - 40) / Math.max(1, days.length);
  const bars = [];
  totals.forEach((t, i) => {
    let y = height - 20;
    for (const [kind, name] of KINDS) {
      const h = Math.round((t[kind] / peak) * (height - 40));
      if (!h) continue;
      y -= h;
      bars.push(svg("rect", { class: "series-" + kind, x: 40 + i * band + 2, y, width: Math.max(2, band - 4), height: h },
        svg("title", { text: `${t.day}: ${t[kind]} tokens ${name}` })));
    }
  });
  const axis = [svg("line", { class: "axis", x1: 40, y1: height - 20, x2: width, y2: height - 20 }),
    svg("text", { class: "tick", x: 0, y: 14, text: String(peak) }),
    svg("text", { class: "tick", x: 40, y: height - 4, text: days[0] || "" }),
    svg("text", { class: "tick", x: width - 80, y: height - 4, text: days[days.length - 1] || "" })];
  return chart("chart-categories", `Tokens per day: ${KINDS.map(([, n]) => n).join(", ")}, stacked`,
    width, height, [...axis, ...bars]);
}

function modelChart(models) {
  const peak = Math.max(1, ...models.map((m) => m.prompt_tokens + m.completion_tokens));
  const row = 26, width = 640, height = Math.max(1, models.length) * row + 10;
  const out = [];
  models.forEach((m, i) => {
    const total = m.prompt_tokens + m.completion_tokens;
    const w = Math.max(2, Math.round((total / peak) * (width - 200)));
    const hit = Math.round((m.cache_hit_tokens / peak) * (width - 200));
    out.push(svg("text", { class: "label", x: 0, y: i * row + 18, text: m.model.slice(0, 24) }),
      svg("rect", { class: "series-exact", x: 190, y: i * row + 5, width: w, height: 16 },
        svg("title", { text: `${m.model}: ${total} tokens in ${m.calls} calls` })),
      hit ? svg("rect", { class: "series-hit", x: 190, y: i * row + 5, width: hit, height: 16 },
        svg("title", { text: `${m.model}: ${m.cache_hit_tokens} prompt tokens from the cache` })) : null);
  });
  return chart("chart-models", "Exact tokens per model, cache hits darker", width, height, out);
}

function cacheChart(cache) {
  const width = 640, height = 160, band = (width - 40) / Math.max(1, cache.length);
  const bars = cache.map((c, i) => {
    const share = c.share || 0;
    const h = Math.round(share * (height - 40));
    return svg("rect", { class: "series-hit", x: 40 + i * band + 2, y: height - 20 - h, width: Math.max(2, band - 4), height: Math.max(1, h) },
      svg("title", { text: `${c.day}: ${Math.round(share * 100)}% of ${c.prompt_tokens} prompt tokens hit the cache` }));
  });
  return chart("chart-cache", "Share of prompt tokens that hit the provider's cache, per day", width, height,
    [svg("line", { class: "axis", x1: 40, y1: height - 20, x2: width, y2: height - 20 }),
      svg("text", { class: "tick", x: 0, y: 24, text: "100%" }),
      svg("text", { class: "tick", x: 0, y: height - 22, text: "0%" }), ...bars]);
}

function legend() {
  return el("ul", { class: "legend", "aria-label": "Chart legend" },
    [...KINDS, ["hit", "cache hits"]].map(([kind, name]) => el("li", {},
      el("span", { class: "swatch series-" + kind, "aria-hidden": "true" }), ` ${name}`)));
}

async function viewUsage(main) {
  const [data, vision] = await Promise.all([api("/usage"), api("/vision").catch(() => null)]);
  const health = vision && vision.routes.length ? table(["Route", "Health", "Circuit", "Probe", "Last code"],
    vision.routes.map((r) => el("tr", {},
      el("td", { class: "mono", text: r.name }),
      el("td", { class: r.health === "healthy" ? "ok" : "", text: r.health + (r.health_code ? ` (${r.health_code})` : "") }),
      el("td", { text: r.circuit + (r.circuit_open_for_s ? ` for ${Math.round(r.circuit_open_for_s)} s` : "") }),
      el("td", { text: r.probe }), el("td", { text: r.last_code || "-" }))), "Vision routes' health")
    : el("p", { class: "muted", text: "No route status here (it comes from the running gateway)." });
  const exact = Object.entries(data.summary.exact).map(([category, t]) => el("tr", {},
    el("td", { text: category }), el("td", { text: String(t.calls) }),
    el("td", { text: String(t.prompt_tokens) }), el("td", { text: String(t.completion_tokens) }),
    el("td", { text: String(t.cache_hit_tokens) })));
  const estimated = Object.entries(data.summary.estimated).map(([category, t]) => el("tr", {},
    el("td", { text: category }), el("td", { text: String(t.events) }),
    el("td", { text: String(t.estimated_tokens) })));
  const peak = Math.max(1, ...data.daily.map((d) => d.tokens + d.estimated_tokens));
  const bars = data.daily.map((d) => {
    const bar = el("span", { class: "bar" });
    bar.style.width = Math.max(2, Math.round(200 * (d.tokens + d.estimated_tokens) / peak)) + "px";
    return el("tr", {}, el("td", { text: d.day }), el("td", { text: d.category }),
      el("td", { text: d.exact ? "exact" : "estimated" }),
      el("td", {}, bar, ` ${d.exact ? d.tokens : d.estimated_tokens}`));
  });
  put(main, el("h2", { text: "Usage" }),
    el("h3", { text: "Exact provider usage" }),
    exact.length ? table(["Category", "Calls", "Prompt", "Completion", "Cache hit"], exact, "Exact provider usage")
      : el("p", { class: "muted", text: "None." }),
    el("h3", { text: "Estimated attribution, avoided replay and counters" }),
    estimated.length ? table(["Category", "Events", "Estimated tokens"], estimated, "Estimates and counters")
      : el("p", { class: "muted", text: "None." }),
    el("h3", { text: `Last ${data.days} days by kind` }),
    data.daily.length ? el("div", {}, categoryChart(data.daily), legend()) : null,
    el("h3", { text: "Per model" }),
    data.models.length ? modelChart(data.models) : el("p", { class: "muted", text: "No exact usage yet." }),
    el("h3", { text: "Cache-hit share per day" }),
    data.cache_daily.length ? cacheChart(data.cache_daily) : el("p", { class: "muted", text: "No exact usage yet." }),
    el("h3", { text: "Vision routes' health" }), health,
    el("p", {}, "Their order, and each final model's sight: ", el("a", { href: "#vision", text: "Vision" }), "."),
    el("h3", { text: "Per day and category" }),
    bars.length ? table(["Day", "Category", "Kind", "Tokens"], bars, "Usage per day and category")
      : el("p", { class: "muted", text: `Nothing in the last ${data.days} days.` }));
}

// ---- routing and login ------------------------------------------------------------------

async function route() {
  const main = document.getElementById("main");
  const hash = location.hash.slice(1) || "conversations";
  const [name, rest] = hash.split(/[/?](.*)/s);
  const arg = name === "conversation" ? decodeURIComponent(rest || "") : rest;
  if (name !== "mcp") stopStatus();
  for (const link of document.querySelectorAll("#views a")) {
    const current = link.dataset.view === name || (name === "conversation" && link.dataset.view === "conversations");
    if (current) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  try {
    if (name === "conversation") await viewConversation(main, arg || "");
    else if (name === "approvals") await viewApprovals(main);
    else if (name === "mcp") await viewMcp(main);
    else if (name === "vision") await viewVision(main);
    else if (name === "audit") await viewAudit(main);
    else if (name === "usage") await viewUsage(main);
    else await viewConversations(main, new URLSearchParams(arg || ""));
    document.body.dataset.view = name;
    // First paint of the view (bench/console.py reads it): its DOM is in place.
    performance.mark("console:view:" + name);
  } catch (error) {
    if (error.code === "CONSOLE_LOGIN_REQUIRED") {
      put(main, el("h2", { text: "Log in" }),
        el("p", { text: "Open the one-time login link the server printed on its standard error." }),
        keyLogin());
    } else {
      put(main, el("h2", { text: "Something failed" }), el("p", { class: "bad", text: error.message }));
    }
    document.body.dataset.view = "error";
  }
}

// The gateway key logs in too, bound to its client's scope: that client's own conversations,
// none of the person's views. The key goes in the body of one same-origin POST, never a URL.
function keyLogin() {
  const form = el("form", { class: "panel", "aria-label": "Log in with the gateway key" });
  const key = el("input", { type: "password", id: "login-key", name: "key", autocomplete: "off",
    required: true, "aria-describedby": "login-key-hint" });
  form.append(el("h3", { text: "Or with the gateway key" }),
    field("login-key", "Gateway key", key, "sees only the conversations made with this key"),
    el("button", { type: "submit", text: "Log in" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const login = await api("/login", { method: "POST", body: { key: key.value } });
      key.value = "";
      csrf = login.csrf;
      await who();
      route();
    } catch (error) { say(error.message, true); }
  });
  return form;
}

// Who is signed in; a login bound to a client's scope is shown only the views it may see.
async function who() {
  const answer = await api("/whoami");
  csrf = answer.csrf || csrf;
  document.getElementById("who").textContent = `signed in as ${answer.credential}` +
    (answer.operator ? "" : ` (the gateway key: its own conversations only)`);
  for (const link of document.querySelectorAll("#views a")) {
    link.parentElement.hidden = !answer.operator && link.dataset.view !== "conversations";
  }
  return answer;
}

async function start() {
  const match = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (match) {
    history.replaceState(null, "", location.pathname + "#conversations");
    try {
      const login = await api("/login", { method: "POST", body: { code: match[1] } });
      csrf = login.csrf;
    } catch (error) { say(error.message, true); }
  }
  // Who is signed in, and the view, asked for at once: the view's GETs need no CSRF token.
  const asked = who().catch(() => { /* not signed in: the view says how */ });
  window.addEventListener("hashchange", route);
  await Promise.all([asked, route()]);
}

start();
