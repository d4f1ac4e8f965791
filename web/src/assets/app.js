// alkstore dashboard: actions (buttons with data-url), the limits form, and
// live counts from the server's one sampler (/api/events). No build step.
"use strict";

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content ?? "";
const base = meta("base");

function flash(message, ok) {
  const el = document.getElementById("flash");
  el.textContent = message;
  el.className = ok ? "ok" : "bad";
}

async function post(url, body) {
  const headers = { "x-csrf-token": meta("csrf-token") };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(url, {
    method: "POST",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await res.text();
  let data = null;
  try { data = JSON.parse(text); } catch (_) { data = text; }
  if (!res.ok) throw new Error((data && data.error) || text || res.statusText);
  return data;
}

async function act(button) {
  const url = button.dataset.url;
  try {
    let question = button.dataset.confirm;
    if (button.dataset.count) {
      const dry = await post(url + "&dry_run=true");
      const n = dry.matched + (dry.truncated ? "+" : "");
      question = question.replace("{n}", n);
      if (dry.matched === 0) { flash("No jobs match.", true); return; }
    }
    if (question && !window.confirm(question)) return;
    button.disabled = true;
    const result = await post(url);
    switch (button.dataset.then) {
      case "remove":
        button.closest("tr")?.remove();
        flash(describe(result), true);
        break;
      case "login":
        window.location = base + "/login";
        break;
      default:
        window.location.reload();
    }
  } catch (e) {
    button.disabled = false;
    flash(e.message, false);
  }
}

function describe(result) {
  if (typeof result !== "object" || result === null) return "done";
  return Object.entries(result).map(([k, v]) => `${k}: ${v}`).join(", ");
}

function age(s) {
  if (s === null || s === undefined) return "—";
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function live() {
  const source = new EventSource(base + "/api/events");
  source.addEventListener("counts", (event) => {
    const byName = new Map(JSON.parse(event.data).map((q) => [q.queue, q]));
    for (const el of document.querySelectorAll("[data-q][data-f]")) {
      const q = byName.get(el.dataset.q);
      const v = q ? q[el.dataset.f] : 0;
      el.textContent = el.dataset.age ? age(v) : String(v ?? "");
    }
    document.body.dataset.updated = String(Date.now());
  });
  // A browser allows six connections to a host: close this one when the
  // page goes (a page kept for the back button keeps it open otherwise),
  // and open it again if the page comes back.
  window.addEventListener("pagehide", () => source.close(), { once: true });
}

window.addEventListener("pageshow", (event) => {
  if (event.persisted && document.body.dataset.live) live();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-url]");
  if (button) { event.preventDefault(); act(button); }
});

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (form.id !== "limits") return;
  event.preventDefault();
  const opts = {};
  for (const input of form.querySelectorAll("input[name]")) {
    opts[input.name] = input.value === "" ? null : Number(input.value);
  }
  try {
    await post(form.dataset.url, opts);
    flash("limits saved", true);
  } catch (e) {
    flash(e.message, false);
  }
});

if (document.body.dataset.live) live();
