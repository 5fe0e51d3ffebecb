// DeepSeekEyes terminal console. No CDN, no inline script: served with a strict CSP.
// The console has its own credential, never the MCP token: the one-time code the server
// printed (in the link's fragment, or typed) is posted to /api/login, which answers with an
// HttpOnly cookie that script cannot read; every /api/ call carries it.
"use strict";

const state = { streams: new Map() };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}

async function api(path, method = "GET", body = undefined) {
  const response = await fetch(path, {
    method,
    headers: { "content-type": "application/json" },
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((data.error && data.error.code) || response.status);
  return data;
}

function setStatus(text) { document.getElementById("status").textContent = text; }

function renderPlan(plan) {
  const box = el("div", { class: "plan", "data-risk": plan.decision.risk, "data-plan": plan.plan_id });
  const argv = el("div", { class: "argv" });
  plan.argv_visible.forEach((arg) => argv.append(el("span", { class: "arg", textContent: arg })));
  box.append(
    el("div", {},
      el("span", { class: "badge", textContent: plan.state }),
      el("span", { class: "badge", textContent: "risk " + plan.decision.risk }),
      el("span", { class: "badge", textContent: (plan.decision.effects || []).join(", ") })),
    argv,
    el("div", { class: "reasons", textContent: plan.decision.reasons.join("; ") }),
    el("div", { textContent: "cwd " + (plan.cwd || "") }),
  );
  const actions = el("div", {});
  const act = (label, path) => {
    const button = el("button", { type: "button", textContent: label });
    button.dataset.action = label.toLowerCase();
    button.addEventListener("click", async () => {
      try { await api(path, "POST"); } catch (err) { setStatus("error " + err.message); }
      refresh();
    });
    actions.append(button);
  };
  const base = "/api/sessions/" + plan.session_id + "/plans/" + plan.plan_id;
  if (plan.state === "planned" && plan.decision.requires_approval) {
    act("Approve", base + "/approve");
    act("Deny", base + "/deny");
  }
  if (plan.state === "approved" || (plan.state === "planned" && !plan.decision.requires_approval)) {
    act("Run", base + "/execute");
  }
  if (plan.receipt_id) {
    actions.append(el("span", { class: "badge receipt", textContent: "receipt " + plan.receipt_id.slice(0, 12) }));
  }
  box.append(actions);
  return box;
}

async function follow(sessionId) {
  if (state.streams.has(sessionId)) return;
  const controller = new AbortController();
  state.streams.set(sessionId, controller);
  const output = document.getElementById("output");
  try {
    const response = await fetch("/api/sessions/" + sessionId + "/events", {
      credentials: "same-origin", signal: controller.signal,
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const line = frame.split("\n").find((l) => l.startsWith("data: "));
        if (!line) continue;
        const event = JSON.parse(line.slice(6));
        if (event.type === "output") output.textContent += event.data;
        else if (event.type === "dropped") output.textContent += "\n[" + event.count + " events dropped]\n";
        else if (event.type === "finished" || event.type === "state" || event.type === "plan") refresh();
      }
    }
  } catch (err) {
    if (err.name !== "AbortError") setStatus("stream ended: " + err.message);
  } finally {
    state.streams.delete(sessionId);
  }
}

async function refresh() {
  try {
    const data = await api("/api/sessions");
    const holder = document.getElementById("sessions");
    holder.replaceChildren();
    for (const session of data.sessions) {
      const box = el("div", { class: "session", "data-session": session.session_id },
        el("h3", { textContent: "session " + session.session_id.slice(0, 12) }));
      session.plans.slice().reverse().forEach((plan) => box.append(renderPlan(plan)));
      holder.append(box);
      follow(session.session_id);
    }
    const receipts = await api("/api/receipts");
    const list = document.getElementById("receipts");
    list.replaceChildren(...receipts.receipts.slice().reverse().map((r) =>
      el("div", { class: "receipt-row", textContent:
        r.sequence + "  " + r.status + "  exit " + r.exit_code + "  " + r.command.display + "  " + r.receipt_id })));
    setStatus("connected");
  } catch (err) {
    setStatus("error " + err.message);
  }
}

async function connect() {
  try {
    const policy = await api("/api/info");
    const who = await api("/api/whoami");
    document.getElementById("policy").textContent = JSON.stringify(policy, null, 2);
    document.getElementById("credential").textContent = who.credential;
    document.getElementById("login").hidden = true;
    document.getElementById("main").hidden = false;
    await refresh();
  } catch (err) {
    setStatus("not connected: " + err.message);
  }
}

async function login(code) {
  try {
    await api("/api/login", "POST", { code });
  } catch (err) {
    setStatus("login refused: " + err.message);
    return;
  }
  await connect();
}

document.addEventListener("DOMContentLoaded", () => {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const code = fragment.get("login");
  if (code) history.replaceState(null, "", location.pathname);  // the code leaves history
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    login(document.getElementById("code").value);
  });
  document.getElementById("refresh").addEventListener("click", refresh);
  if (code) login(code);
  else connect();  // a login cookie from earlier, if the browser holds one
});
