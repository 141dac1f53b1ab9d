// Legio's cockpit: sign-in from the URL's fragment, actions with the CSRF token, the live
// feed (server-sent events). Everything others wrote is put in as text, never as HTML.
"use strict";
(function () {
  const hash = new URLSearchParams(location.hash.slice(1));
  const theme = hash.get("tgWebAppThemeParams");
  if (theme) sessionStorage.setItem("tgTheme", theme);
  try {
    const params = JSON.parse(sessionStorage.getItem("tgTheme") || "{}");
    for (const [key, value] of Object.entries(params)) {
      if (/^[a-z_]+$/.test(key) && /^#[0-9a-fA-F]{3,8}$/.test(String(value))) {
        document.documentElement.style.setProperty("--tg-theme-" + key.replace(/_/g, "-"), value);
      }
    }
  } catch (e) { /* no theme: the fallbacks */ }

  const initData = hash.get("tgWebAppData");
  const link = hash.get("login");
  if (initData || link) {
    history.replaceState(null, "", location.pathname + location.search); // no secret kept
    fetch("/auth", {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify(initData ? {initData: initData} : {link: link}),
    }).then((r) => {
      if (r.ok) { location.reload(); return; }
      const p = document.getElementById("signin");
      if (p) p.textContent = "Not allowed: this cockpit is Caesar's. Open it again from Telegram, or ask `legio cockpit` for a new link.";
    });
    return;
  }
  if (document.body.classList.contains("signin")) return;

  const csrf = document.querySelector('meta[name="csrf"]').content;
  function toast(text) {
    let t = document.getElementById("toast");
    if (!t) { t = document.createElement("div"); t.id = "toast"; document.body.append(t); }
    t.textContent = text;
    setTimeout(() => { t.textContent = ""; }, 4000);
  }
  function post(url, button) {
    button.disabled = true;
    fetch(url, {method: "POST", credentials: "same-origin", headers: {"X-CSRF-Token": csrf}})
      .then((r) => r.json().then((body) => {
        if (!r.ok) { toast(body.error || "Refused."); return; }
        if (body.stopped !== undefined) toast(body.stopped ? "Stopped." : "Nothing to stop.");
        else if (body.ask) { if (confirm(body.ask)) post(body.again, button); return; }
        else if (body.preview) { showPreview(body); return; }
        else if (body.said) toast(body.said);
        const ask = button.closest(".ask"); if (ask) ask.remove();
        const job = button.closest(".job"); if (job) job.remove();
      }))
      .catch(() => toast("No answer from Legio."))
      .finally(() => { button.disabled = false; });
  }
  function showPreview(body) {
    const place = document.getElementById("preview");
    place.textContent = "";
    const el = document.createElement("article");
    el.innerHTML = '<h2>What will be posted</h2><p class="note where"></p><h3>Title</h3>' +
      '<pre class="title"></pre><h3>Body</h3><pre class="body"></pre><p class="buttons">' +
      '<button class="post">🚀 Post this pull request</button><button class="cancel">✖ Cancel</button></p>';
    el.querySelector(".where").textContent = body.preview.where + " · " + body.preview.commit;
    el.querySelector(".title").textContent = body.preview.title;
    el.querySelector(".body").textContent = body.preview.body;
    el.querySelector(".post").dataset.post = body.post;
    el.querySelector(".cancel").addEventListener("click", () => { place.textContent = ""; toast("✖ Not published."); });
    place.append(el);
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-post]");
    if (!button || button.disabled) return;
    if (button.dataset.confirm && !confirm(button.dataset.confirm)) return;
    post(button.dataset.post, button);
  });

  function since(el) {
    const s = Number(el.dataset.since);
    if (!s) return;
    const d = Math.max(0, Math.floor(Date.now() / 1000 - s));
    el.textContent = d < 60 ? d + " s" : d < 3600 ? Math.floor(d / 60) + " min " + (d % 60) + " s"
      : Math.floor(d / 3600) + " h " + Math.floor((d % 3600) / 60) + " min";
  }
  setInterval(() => document.querySelectorAll("[data-since]").forEach(since), 1000);

  const asks = document.getElementById("asks");
  if (!asks) return;
  const agents = document.getElementById("agents");
  function card(name) {
    let el = document.getElementById("agent-" + name);
    if (el) return el;
    el = document.createElement("article");
    el.id = "agent-" + name; el.className = "agent idle";
    el.innerHTML = '<header><h2></h2><span class="kind">idle</span><span class="for"></span>' +
      '<button class="stop danger">Stop</button></header><p class="doing"></p><pre class="stream"></pre>';
    el.querySelector("h2").textContent = name;
    el.querySelector(".stop").dataset.post = "/stop/" + encodeURIComponent(name);
    agents.append(el);
    return el;
  }
  function status(s) {
    const el = card(s.agent);
    el.className = "agent " + s.kind;
    el.querySelector(".kind").textContent = s.kind;
    const f = el.querySelector(".for"); f.dataset.since = s.since || ""; since(f);
    if (s.kind === "idle") f.textContent = "";
    const doing = el.querySelector(".doing");
    doing.textContent = "";
    if (s.project) doing.append("#" + s.project + " ");
    if (s.tool) {
      const b = document.createElement("b"); b.className = "tool"; b.textContent = s.tool;
      const c = document.createElement("code"); c.className = "target"; c.textContent = (s.target || "").slice(0, 200);
      doing.append(b, " ", c);
    }
    if (s.note) doing.append(" · " + s.note);
  }
  const handlers = {
    status: status,
    stream: (d) => {
      const pre = card(d.agent).querySelector(".stream");
      if (d.text !== undefined) pre.textContent = d.text; else pre.textContent += d.append;
      const el = card(d.agent);
      if (el.classList.contains("idle")) status({agent: d.agent, kind: "writing", since: Date.now() / 1000});
    },
    reply: (d) => {
      status({agent: d.agent, kind: "idle"});
      card(d.agent).querySelector(".stream").textContent = d.text;
    },
    ask: (a) => {
      if (document.getElementById("ask-" + a.id)) return;
      const el = document.createElement("article");
      el.className = "ask"; el.id = "ask-" + a.id;
      el.innerHTML = '<h2></h2><pre class="target"></pre><p class="note"></p><p class="buttons">' +
        '<button data-choice="once">Allow once</button><button data-choice="always">Always</button>' +
        '<button class="danger" data-choice="deny">Deny</button></p>';
      el.querySelector("h2").textContent = "🔐 " + a.agent + " asks: " + a.tool;
      el.querySelector(".target").textContent = a.target;
      el.querySelector(".note").textContent = a.why;
      el.querySelectorAll("[data-choice]").forEach((b) => { b.dataset.post = "/ask/" + a.id + "/" + b.dataset.choice; });
      asks.append(el);
    },
    asked: (a) => { const el = document.getElementById("ask-" + a.id); if (el) el.remove(); },
    notice: (n) => toast(n.text),
    reload: () => location.reload(),
  };
  let last = asks.dataset.live;
  function connect() {
    const source = new EventSource("/events?after=" + encodeURIComponent(last));
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (event) => {
        if (event.lastEventId) last = event.lastEventId;
        handle(JSON.parse(event.data || "{}"));
      });
    }
    source.onerror = () => {
      source.close();
      fetch(location.pathname, {method: "HEAD", credentials: "same-origin"})
        .then((r) => { if (r.status === 401) location.reload(); else setTimeout(connect, 2000); })
        .catch(() => setTimeout(connect, 5000)); // Legio away (a restart): try again
    };
  }
  connect();
  document.body.dataset.live = "connected";
})();
