// The browser client of gemini-split: speaks the native protocol
// (docs/protocol.md) over a WebSocket on the page's own origin, signed in by
// the cookie pairing set (docs/web.md). Everything that comes from the
// model, tools, files, session names or other clients is rendered inert:
// text nodes, or markdown-it with html off, links vetted, images as links.

const PROTOCOL_VERSION = "1.6";
const CLIENT = "gemini-split-web/0.1";
const MAX_LINES = 2000;        // lines of one message rendered before "show more"
const TOOL_OUTPUT_CHARS = 20000; // tool output kept per call (the tail)
const DIFF_LINES = 40;         // lines of an approval's diff before "show all"

const $ = (id) => document.getElementById(id);

// The page token pairing gave this browser: kept in this origin's own
// storage (not sent to other ports of the host, as the cookie is) and
// presented with the cookie on every request (docs/web.md).
const PAGE_KEY = "gemini-split-page";
function pageToken() {
  try { return localStorage.getItem(PAGE_KEY) || ""; } catch { return ""; }
}
function signedHeaders(extra = {}) {
  return { "X-GS-Page": pageToken(), ...extra };
}
let idCounter = 0;
const newId = () => `w-${Date.now().toString(36)}-${++idCounter}`;

// --- making text inert and visible -----------------------------------------

// Control characters (escape codes included) and bidi overrides shown as
// visible symbols instead of acting on the display.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f\u0080-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
export function visible(text) {
  return String(text ?? "").replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code); // ␛ for ESC …
    if (code === 0x7f) return "\u2421";
    return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
  });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = visible(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(typeof c === "string" ? visible(c) : c);
  return node;
}

let md = null;
function markdown() {
  if (md) return md;
  if (!window.markdownit) return null;
  md = window.markdownit({
    html: false,
    linkify: true,
    breaks: true, // a newline in the answer is a new line, as in the terminal
    highlight(code, lang) {
      const hljs = window.hljs;
      if (!hljs) return "";
      try {
        if (lang && hljs.getLanguage(lang)) return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
        return hljs.highlightAuto(code).value;
      } catch { return ""; }
    },
  });
  // Only links written as links (https://…), not file names like math.py.
  md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });
  // Images never load by themselves: shown as a link to click.
  md.renderer.rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const src = token.attrGet("src") || "";
    const alt = self.renderInlineAsText(token.children || [], options, env);
    return `<a class="image-link" href="${md.utils.escapeHtml(src)}" rel="noopener noreferrer nofollow" target="_blank">[image: ${md.utils.escapeHtml(alt || src)}]</a>`;
  };
  const defaultLinkOpen = md.renderer.rules.link_open || ((t, i, o, e, s) => s.renderToken(t, i, o));
  md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
    tokens[idx].attrSet("target", "_blank");
    return defaultLinkOpen(tokens, idx, options, env, self);
  };
  return md;
}

// Renders markdown into node, at most `limit` lines, with a "show more".
function renderMarkdown(node, text, limit = MAX_LINES) {
  const lines = text.split("\n");
  const shown = lines.length > limit ? lines.slice(0, limit).join("\n") : text;
  const m = markdown();
  if (m) node.innerHTML = m.render(visible(shown));
  else node.textContent = visible(shown);
  if (lines.length > limit) {
    const more = el("button", { type: "button", class: "more" }, `Show more (${lines.length - limit} more lines)`);
    more.addEventListener("click", () => renderMarkdown(node, text, limit + MAX_LINES));
    node.append(more);
  }
}

// --- notifications ------------------------------------------------------------

function notify(title, body) {
  if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
  try { new Notification(visible(title), { body: visible(body).slice(0, 200), tag: "gemini-split" }); } catch { /* not allowed here */ }
}

function setUpNotifyButton() {
  const button = $("notify");
  if (!("Notification" in window) || Notification.permission !== "default") return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    await Notification.requestPermission();
    button.hidden = true;
  });
}

// --- the connection -------------------------------------------------------------

// One WebSocket speaking the protocol; reconnects by itself (as
// client/reconnect.py does) with the session's resume token and the last
// seq seen, so each event is shown once.
class Connection {
  constructor({ sessionId = null, tools = null, onEvent, onStatus, onFatal }) {
    this.sessionId = sessionId;
    this.tools = tools;
    this.resumeToken = null;
    this.lastSeq = null;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onFatal = onFatal;
    this.pending = new Map();
    this.closed = false;
    this.delay = 500;
    this.ready = null;
    this.open();
  }

  url() {
    return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/?page=${encodeURIComponent(pageToken())}`;
  }

  open() {
    this.onStatus("connecting…");
    let resolveReady;
    this.ready = new Promise((r) => { resolveReady = r; });
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      const hello = {
        type: "hello", id: newId(), timestamp: Date.now(), protocol_version: PROTOCOL_VERSION,
        client: CLIENT, capabilities: ["tool_approvals", "tool_deltas", "ask_user"], label: "browser",
      };
      if (this.sessionId) {
        hello.session_id = this.sessionId;
        if (this.resumeToken) hello.resume_token = this.resumeToken;
        if (this.lastSeq != null) hello.last_seq = this.lastSeq;
      } else if (this.tools) {
        hello.tools = this.tools;
      }
      ws.send(JSON.stringify(hello));
    });
    ws.addEventListener("message", (e) => {
      let msg;
      try { msg = JSON.parse(e.data); } catch { return; }
      if (msg.type === "connected") {
        admitted = true;
        this.sessionId = msg.session_id;
        this.resumeToken = msg.resume_token || this.resumeToken;
        this.delay = 500;
        this.onStatus("");
        resolveReady(msg);
      }
      if (msg.type === "error" && msg.fatal) {
        // A server going down is not the end of the session: reconnect.
        if (msg.code === "shutting_down" || msg.code === "overloaded") { this.onStatus("server restarting…"); return; }
        this.closed = true;
        this.onFatal(msg);
        ws.close();
        return;
      }
      const reply = msg.in_reply_to && this.pending.get(msg.in_reply_to);
      if (reply) { this.pending.delete(msg.in_reply_to); reply(msg); }
      if (typeof msg.seq === "number") {
        if (this.lastSeq != null && msg.seq <= this.lastSeq) return; // seen already
        this.lastSeq = msg.seq;
      }
      this.onEvent(msg);
    });
    let admitted = false;
    ws.addEventListener("close", (e) => {
      if (this.closed) return;
      if (!admitted) {
        // Refused before the handshake: signed out (revoked, expired) or the
        // server is down; /api/me tells which.
        fetch("/api/me", { credentials: "same-origin", headers: signedHeaders() }).then((r) => {
          if (r.status === 401 && !this.closed) {
            this.closed = true;
            this.onFatal({ code: "signed_out", message: "This browser is signed out: pair it again with gemini-split pair." });
          }
        }).catch(() => {});
      }
      if (e.code === 1008 || e.code === 4401 || e.code === 4403) {
        this.onFatal({ code: "unauthorized", message: "The server refused this browser: pair it again with gemini-split pair." });
        return;
      }
      this.onStatus("reconnecting…");
      setTimeout(() => this.open(), this.delay);
      this.delay = Math.min(this.delay * 2, 5000);
    });
  }

  send(msg) {
    const full = { id: newId(), timestamp: Date.now(), ...msg };
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(full));
    return full.id;
  }

  request(msg, timeout = 10000) {
    return new Promise((resolve, reject) => {
      const id = this.send(msg);
      this.pending.set(id, resolve);
      setTimeout(() => { if (this.pending.delete(id)) reject(new Error("no answer")); }, timeout);
    });
  }

  close() {
    this.closed = true;
    this.ws.close();
  }
}

// --- the session view -------------------------------------------------------------

class SessionView {
  constructor(conn) {
    this.conn = conn;
    this.log = $("log");
    this.log.replaceChildren();
    $("approvals").replaceChildren();
    this.turns = new Map();     // request_id -> turn element
    this.streams = new Map();   // `${request}/${agent}/${kind}` -> {node, text}
    this.tools = new Map();     // call_id -> {node, status, output, text}
    this.agents = new Map();    // `${request}/${agent}` -> body element
    this.approvals = new Map(); // call_id -> card
    this.clients = [];          // who is attached: {label, role}
    this.me = null;             // this page's label (connected.label)
    this.active = null;
    this.dirty = new Set();
    this.frame = 0;
    // Following the answer: while the reader is at the bottom, each frame
    // that adds output keeps the view there; scrolling up stops it (and
    // "Jump to latest" shows when more arrives), scrolling back down, the
    // button or sending a prompt starts it again.
    this.following = true;
    this.seenHeight = 0;
    this.lastY = window.scrollY;
    $("jump").hidden = true;
  }

  // The window scrolled (the reader, or our own follow): back at the bottom
  // it follows again; moved up by the reader it stops.
  scrolled() {
    // Only the reader moves the view up: our own follow (whose event may
    // come after more output was added below) and growth never do.
    const y = window.scrollY;
    if (y < this.lastY - 2) this.following = false;
    if (distanceFromBottom() <= FOLLOW_SLACK) this.following = true;
    this.lastY = y;
    if (this.following) $("jump").hidden = true;
  }

  // Back to the newest output, and follow it from there.
  follow() {
    this.following = true;
    $("jump").hidden = true;
    window.scrollTo(0, document.documentElement.scrollHeight);
  }

  setActive(requestId) {
    this.active = requestId;
    $("cancel").disabled = !requestId;
    document.body.classList.toggle("busy", !!requestId);
  }

  turn(requestId, prompt, client) {
    const key = requestId || "-";
    let turn = this.turns.get(key);
    if (!turn) {
      turn = el("article", { class: "turn" });
      if (prompt != null) {
        const who = client ? el("span", { class: "from" }, this.named(client)) : null;
        turn.append(el("div", { class: "user" }, who, el("div", { class: "prompt-text" }, prompt)));
      }
      turn.body = el("div", { class: "answer" });
      turn.append(turn.body);
      this.turns.set(key, turn);
      this.log.append(turn);
    }
    return turn;
  }

  container(ev) {
    const turn = this.turn(ev.request_id);
    if (!ev.agent_id) return turn.body;
    const key = `${ev.request_id}/${ev.agent_id}`;
    let body = this.agents.get(key);
    if (!body) {
      const block = el("details", { class: "agent", open: "" }, el("summary", {}, `Sub-agent ${ev.agent_id}`));
      body = el("div", { class: "agent-body" });
      block.append(body);
      block.summaryNode = block.firstChild;
      body.block = block;
      turn.body.append(block);
      this.agents.set(key, body);
    }
    return body;
  }

  stream(ev, kind) {
    const parent = this.container(ev);
    const key = `${ev.request_id}/${ev.agent_id || 0}/${kind}`;
    let s = this.streams.get(key);
    // A new block after anything else (a tool call) was appended.
    if (!s || s.node.parentNode !== parent || parent.lastChild !== s.holder) {
      const node = el("div", { class: kind === "text" ? "md" : "thought-text" });
      let holder = node;
      if (kind === "thinking") {
        holder = el("details", { class: "thinking" }, el("summary", {}, "Thinking"), node);
      }
      parent.append(holder);
      s = { node, holder, text: "", kind };
      this.streams.set(key, s);
    }
    s.text += ev.content || "";
    this.dirty.add(s);
    this.schedule();
  }

  // One frame renders what changed since the last, then follows it (or
  // offers "Jump to latest" when the reader has scrolled away).
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      for (const s of this.dirty) {
        if (s.kind === "text") renderMarkdown(s.node, s.text);
        else s.node.textContent = visible(s.text.split("\n").slice(0, MAX_LINES).join("\n"));
      }
      this.dirty.clear();
      const height = document.documentElement.scrollHeight;
      const grew = height > this.seenHeight;
      this.seenHeight = height;
      if (this.following) {
        if (distanceFromBottom() > 0) window.scrollTo(0, height);
      } else if (grew) {
        $("jump").hidden = false;
      }
    });
  }

  tool(ev) {
    let t = this.tools.get(ev.call_id);
    if (!t) {
      const status = el("span", { class: "tool-status" }, "running");
      const name = el("span", { class: "tool-name" }, ev.tool || "tool");
      const args = el("code", { class: "tool-args" }, summarizeArgs(ev.parameters));
      const out = el("pre", { class: "tool-output" });
      const node = el("details", { class: "tool" }, el("summary", {}, status, " ", name, " ", args), out);
      this.container(ev).append(node);
      t = { node, status, out, output: "" };
      this.tools.set(ev.call_id, t);
    }
    return t;
  }

  setToolOutput(t, text) {
    t.output = text.length > TOOL_OUTPUT_CHARS ? text.slice(-TOOL_OUTPUT_CHARS) : text;
    const lines = t.output.split("\n");
    const shown = lines.length > 200 ? `… ${lines.length - 200} earlier lines not shown\n` + lines.slice(-200).join("\n") : t.output;
    t.out.textContent = visible(shown);
  }

  approval(ev) {
    if (this.approvals.has(ev.call_id)) return;
    if (ev.questions && ev.questions.length) {
      const card = ev.tool === "exit_plan_mode" ? this.planCard(ev) : this.questionsCard(ev);
      this.approvals.set(ev.call_id, card);
      $("approvals").append(card);
      if (!ev.replayed) notify("gemini-split: your answer is needed", ev.tool === "exit_plan_mode" ? "A plan waits for your approval" : ev.description ?? "");
      card.querySelector("input")?.focus({ preventScroll: true }); // never a yes by a stray Enter
      return;
    }
    const card = el("section", { class: "approval", role: "alertdialog", "aria-label": `Approve ${ev.tool}?` });
    const agent = ev.agent_id ? ` (sub-agent ${ev.agent_id})` : "";
    card.append(el("h3", {}, `Allow ${ev.tool}${agent}?`));
    if (ev.reason) card.append(el("p", { class: "reason" }, ev.reason));
    if (ev.command != null) {
      card.append(el("pre", { class: "command" }, ev.command));
      if (ev.cwd) card.append(el("p", { class: "cwd" }, `in ${ev.cwd}`));
    } else {
      const text = ev.description || JSON.stringify(ev.parameters ?? {}, null, 2);
      const pre = el("pre", { class: "diff" });
      const lines = text.split("\n");
      const draw = (all) => {
        pre.replaceChildren();
        for (const line of all ? lines : lines.slice(0, DIFF_LINES)) {
          const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
          pre.append(el("span", { class: cls }, line + "\n"));
        }
      };
      draw(false);
      card.append(pre);
      if (lines.length > DIFF_LINES) {
        const all = el("button", { type: "button", class: "more" }, `Show all ${lines.length} lines`);
        all.addEventListener("click", () => { draw(true); all.remove(); });
        card.append(all);
      }
    }
    if (ev.executes_later) card.append(el("p", { class: "warn" }, "This file runs code later."));
    const decide = (decision, message) => {
      const msg = { type: "tool_decision", call_id: ev.call_id, decision };
      if (decision !== "deny") msg.parameters_hash = ev.parameters_hash;
      if (message) msg.message = message;
      this.conn.send(msg);
      for (const b of card.querySelectorAll("button,input")) b.disabled = true;
    };
    const buttons = el("div", { class: "choices" });
    buttons.append(el("button", { type: "button", class: "yes", onclick: () => decide("approve") }, "Yes, once"));
    if (ev.always_scope) {
      buttons.append(el("button", { type: "button", onclick: () => decide("approve_always") }, `Yes, for this session (${ev.always_scope})`));
    }
    buttons.append(el("button", { type: "button", class: "no", onclick: () => decide("deny") }, "No"));
    const tell = el("input", { type: "text", placeholder: "Tell the model what to do instead", "aria-label": "Tell the model what to do instead" });
    const tellButton = el("button", { type: "button", onclick: () => decide("deny", tell.value || "No") }, "No, and tell the model");
    tell.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); tellButton.click(); } });
    card.append(buttons, el("div", { class: "tell" }, tell, tellButton));
    this.approvals.set(ev.call_id, card);
    $("approvals").append(card);
    if (!ev.replayed) notify("gemini-split: approval needed", `${ev.tool}: ${ev.command ?? ev.description ?? ""}`);
    card.querySelector("button.yes").focus({ preventScroll: true });
  }

  // Answers a question that carries questions (ask_user, a plan): the
  // answers by question index, or a dismissal (a deny).
  answer(ev, card, answers) {
    const msg = answers ? { type: "tool_decision", call_id: ev.call_id, decision: "approve", parameters_hash: ev.parameters_hash, answers }
      : { type: "tool_decision", call_id: ev.call_id, decision: "deny" };
    this.conn.send(msg);
    for (const b of card.querySelectorAll("button,input")) b.disabled = true;
  }

  // gemini-cli's plan approval: the plan (markdown, inert), its two
  // approvals, and feedback that keeps the model planning.
  planCard(ev) {
    const q = ev.questions[0];
    const name = String(ev.parameters?.plan_path ?? "").split("/").pop() || "plan";
    const card = el("section", { class: "approval plan", role: "alertdialog", "aria-label": "Approve the plan?" });
    card.append(el("h3", {}, `Plan: ${name}`));
    const body = el("div", { class: "md plan-body" });
    renderMarkdown(body, ev.description || "");
    card.append(body);
    const buttons = el("div", { class: "choices" });
    for (const option of q.options || []) {
      buttons.append(el("button", { type: "button", class: "yes", title: option.description || "",
                                    onclick: () => this.answer(ev, card, { 0: option.label }) }, option.label));
    }
    const feedback = el("input", { type: "text", placeholder: q.placeholder || "Type your feedback...",
                                   "aria-label": "Your feedback on the plan" });
    const keep = el("button", { type: "button", class: "no", onclick: () => this.answer(ev, card, { 0: feedback.value }) },
                    "No, keep planning");
    feedback.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); keep.click(); } });
    const dismiss = el("button", { type: "button", onclick: () => this.answer(ev, card, null) }, "Dismiss");
    card.append(buttons, el("div", { class: "tell" }, feedback, keep, dismiss));
    return card;
  }

  // The model's ask_user questions: a choice (one, or several), yes/no or
  // a typed answer each, and "Other" for a typed one; Dismiss answers none.
  questionsCard(ev) {
    const card = el("section", { class: "approval questions", role: "alertdialog", "aria-label": "The model asks" });
    const read = [];
    ev.questions.forEach((q, i) => {
      const box = el("fieldset", { class: "question" }, el("legend", {}, q.header || `Question ${i + 1}`),
                     el("p", {}, q.question || ""));
      const labels = q.type === "yesno" ? ["Yes", "No"] : q.type === "text" ? [] : (q.options || []).map((o) => o.label);
      const inputs = labels.map((label, j) => {
        const input = el("input", { type: q.multi_select ? "checkbox" : "radio", name: `${ev.call_id}-${i}`, value: label });
        box.append(el("label", { class: "option", title: (q.options || [])[j]?.description || "" }, input, ` ${label}`));
        return input;
      });
      const typed = el("input", { type: "text", placeholder: q.placeholder || (labels.length ? "Other: type an answer" : "Your answer"),
                                  "aria-label": `${q.header || "Question"}: ${labels.length ? "other answer" : "answer"}` });
      box.append(typed);
      card.append(box);
      read.push(() => [...inputs.filter((x) => x.checked).map((x) => x.value), ...(typed.value.trim() ? [typed.value.trim()] : [])].join(", "));
    });
    const send = el("button", { type: "button", class: "yes", onclick: () => {
      const answers = {};
      read.forEach((f, i) => { const a = f(); if (a) answers[i] = a; });
      this.answer(ev, card, answers);
    } }, "Answer");
    const dismiss = el("button", { type: "button", class: "no", onclick: () => this.answer(ev, card, null) }, "Dismiss");
    card.append(el("div", { class: "choices" }, send, dismiss));
    return card;
  }

  decided(ev) {
    const card = this.approvals.get(ev.call_id);
    if (card) { card.remove(); this.approvals.delete(ev.call_id); }
    const t = this.tools.get(ev.call_id);
    const edited = ev.modified ? ", with their changes to the edit" : "";
    const note = el("p", { class: "decided" }, `${ev.decision} by ${this.named(ev.by) || "?"}${edited}`);
    (t ? t.node : this.container(ev)).append(note);
  }

  handle(ev) {
    this.apply(ev);
    this.schedule(); // whatever it added is followed in the next frame
  }

  apply(ev) {
    switch (ev.type) {
      case "connected":
        this.me = ev.label || null;
        this.sessionId = ev.session_id;
        $("title").textContent = visible(this.title || ev.session_id);
        $("title").title = visible(ev.session_id);
        this.showAttached(ev.attached || []);
        this.setActive(ev.active_request_id || null);
        break;
      case "clients_changed":
        this.clientsChanged(ev);
        break;
      case "request_started":
        if (!this.title && ev.prompt) { this.title = ev.prompt.split("\n")[0].slice(0, 80); $("title").textContent = visible(this.title); }
        this.turn(ev.request_id, ev.prompt ?? "", ev.client);
        this.setActive(ev.request_id);
        break;
      case "text_delta": this.stream(ev, "text"); break;
      case "thinking_delta": this.stream(ev, "thinking"); break;
      case "tool_execution_request": {
        const t = this.tool({ ...ev, call_id: ev.id });
        if (!t.node.querySelector(".note")) t.node.append(el("p", { class: "note" }, "run by the terminal client that started this turn"));
        break;
      }
      case "tool_awaiting_approval":
        this.tool(ev).status.textContent = "awaiting approval";
        if (!ev.replayed || ev.seq == null) this.approval(ev);
        break;
      case "tool_decided": this.decided(ev); break;
      case "tool_started": this.tool(ev).status.textContent = "running"; break;
      case "tool_delta": { const t = this.tool(ev); this.setToolOutput(t, t.output + (ev.content || "")); break; }
      case "tool_completed": {
        const t = this.tool(ev);
        t.status.textContent = "done";
        t.node.classList.add("ok");
        const r = ev.result;
        const text = typeof r === "string" ? r : r && typeof r === "object" && (r.stdout != null || r.output != null)
          ? [r.output, r.stdout, r.stderr].filter(Boolean).join("\n") : JSON.stringify(r, null, 2);
        this.setToolOutput(t, text || "");
        break;
      }
      case "tool_error": {
        const t = this.tool(ev);
        t.status.textContent = "error";
        t.node.classList.add("failed");
        this.setToolOutput(t, `${ev.error?.code || "error"}: ${ev.error?.message || ""}`);
        break;
      }
      case "tool_call_answered": {
        const t = this.tools.get(ev.call_id);
        if (t) t.status.textContent = "done";
        break;
      }
      case "agent_started": {
        const body = this.container(ev);
        body.block.summaryNode.textContent = visible(`Sub-agent ${ev.name} (${ev.agent_id})`);
        if (ev.task) body.append(el("p", { class: "task" }, ev.task));
        break;
      }
      case "agent_finished": {
        const body = this.container(ev);
        body.append(el("p", { class: "agent-end" }, `${ev.outcome}: ${ev.summary || ""}`));
        body.block.open = false;
        break;
      }
      case "retrying":
        this.container(ev).append(el("p", { class: "note" }, `retrying (attempt ${ev.attempt}): ${ev.error || ""}`));
        break;
      case "compressed":
        this.log.append(el("p", { class: "note" }, "The conversation was compressed."));
        break;
      case "approval_mode_changed":
        this.log.append(el("p", { class: "note mode" }, `Approval mode: ${ev.mode}${ev.by ? ` (by ${ev.by})` : ""}`));
        break;
      case "rewound":
        this.log.append(el("p", { class: "note" }, `Rewound by ${this.named(ev.by) || "?"} to before “${ev.prompt || ""}”.`));
        break;
      case "finished":
        this.endTurn(ev, ev.reason === "cancelled" ? "cancelled" : "done");
        break;
      case "error":
        if (ev.request_id) this.endTurn(ev, `error: ${ev.message || ev.code}`);
        else if (ev.code === "replay_unavailable") this.log.append(el("p", { class: "note" }, "Some earlier events are no longer kept."));
        else if (ev.code === "tools_away") this.log.append(el("p", { class: "warn" }, `${ev.message || ""} (Cancel stops it.)`));
        else this.log.append(el("p", { class: "error-line" }, `${ev.code}: ${ev.message || ""}`));
        break;
      default: break;
    }
  }

  endTurn(ev, text) {
    const turn = this.turn(ev.request_id);
    if (!turn.querySelector(":scope > .end")) turn.append(el("p", { class: "end" }, text));
    for (const [id, card] of this.approvals) {
      card.remove();
      this.approvals.delete(id);
    }
    if (this.active === ev.request_id || !ev.request_id) this.setActive(null);
    if (!ev.replayed) notify("gemini-split: turn ended", text);
  }

  // How this page names a client: "you" for itself (connected.label, which
  // the server keeps unique among the session's clients), else its label.
  named(label) {
    return label && label === this.me ? "you" : label || "";
  }

  // Who is attached: connected's list, kept up to date by clients_changed.
  showAttached(list) {
    this.clients = list.map((c) => ({ label: c.label, role: c.role }));
    this.drawAttached(this.clients.length);
  }

  clientsChanged(ev) {
    if (!ev.replayed) { // connected said who is attached now
      const c = ev.client || {};
      const i = this.clients.findIndex((o) => o.label === c.label);
      if (ev.change === "joined" && i < 0) this.clients.push({ label: c.label, role: c.role });
      else if (ev.change === "left" && i >= 0) this.clients.splice(i, 1);
    }
    this.drawAttached(ev.clients);
  }

  // "2 attached: you, laptop (watching)", as the session list says it.
  drawAttached(n) {
    const names = this.clients.map((c) => this.named(c.label) + (c.role === "observer" ? " (watching)" : ""));
    $("attached").textContent = visible(`${n} attached${names.length ? ": " + names.join(", ") : ""}`);
  }
}

// Pixels from the bottom that still count as "at the bottom".
const FOLLOW_SLACK = 80;

function distanceFromBottom() {
  return document.documentElement.scrollHeight - (window.scrollY + window.innerHeight);
}

function summarizeArgs(params) {
  if (!params || typeof params !== "object") return "";
  const s = params.command ?? params.file_path ?? params.path ?? params.pattern ?? JSON.stringify(params);
  const line = String(s).split("\n")[0];
  return line.length > 120 ? line.slice(0, 119) + "…" : line;
}

// --- the app -------------------------------------------------------------------------

const state = { me: null, conn: null, view: null, lobby: null };

function show(id) {
  for (const s of ["signin", "sessions", "session"]) $(s).hidden = s !== id;
  $("back").hidden = id !== "session";
  document.body.classList.toggle("in-session", id === "session");
  if (id !== "session") $("title").textContent = "gemini-split";
}

function setStatus(text) { $("status").textContent = text; }

function signedOut(title, text) {
  $("signin-title").textContent = title;
  $("signin-text").textContent = text;
  show("signin");
}

function ago(ms) {
  if (!ms) return "";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleString();
}

async function listSessions() {
  show("sessions");
  setStatus("loading…");
  // A connection of its own, closed when the list is in; sessions that have
  // never been prompted (this one included) are not listed.
  const lobby = new Connection({
    onEvent() {}, onStatus: setStatus,
    onFatal: (e) => signedOut(e.code === "signed_out" ? "Signed out" : "Cannot connect", `${e.code}: ${e.message || ""}`),
  });
  state.lobby = lobby;
  try {
    const connected = await lobby.ready;
    const reply = await lobby.request({ type: "list_sessions" });
    const ul = $("session-list");
    ul.replaceChildren();
    const sessions = (reply.sessions || []).filter((s) => s.id !== connected.session_id);
    $("no-sessions").hidden = sessions.length > 0;
    for (const s of sessions) {
      const open = el("button", { type: "button", class: "session-open", onclick: () => openSession(s.id, null, s.title) },
        el("span", { class: "session-title" }, s.title || "(no prompt yet)"),
        s.project ? el("span", { class: "session-project", title: s.project }, projectName(s.project)) : null,
        el("span", { class: "session-meta" }, `${ago(s.updated)} · ${s.turns} turn${s.turns === 1 ? "" : "s"}${s.running ? " · running" : ""} · ${s.id}`),
        s.clients ? el("span", { class: "session-clients" }, attachedText(s)) : null);
      ul.append(el("li", {}, open));
    }
    setStatus("");
  } catch (e) {
    setStatus(`could not list sessions: ${e.message}`);
  } finally {
    lobby.close();
  }
}

// The project a session was started in, as its last directory name
// ("~/src/app" → "app"); the whole path is the element's title.
function projectName(path) {
  const parts = String(path).split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : String(path);
}

// "2 attached: laptop, browser" (the server names at most a few, 1.5).
function attachedText(s) {
  const names = (s.attached || []).map((c) => c.label + (c.role === "observer" ? " (watching)" : ""));
  const more = s.clients - names.length;
  return `${s.clients} attached${names.length ? ": " + names.join(", ") : ""}${more > 0 ? ` and ${more} more` : ""}`;
}

function openSession(sessionId, tools = null, title = "") {
  if (state.conn) state.conn.close();
  show("session");
  let view = null;
  const conn = new Connection({
    sessionId, tools,
    onEvent: (ev) => view.handle(ev),
    onStatus: setStatus,
    onFatal: (e) => {
      setStatus("");
      if (e.code === "signed_out") { signedOut("Signed out", e.message); return; }
      $("log").append(el("p", { class: "error-line" }, `${e.code}: ${e.message || ""}`));
    },
  });
  view = new SessionView(conn);
  view.title = title;
  state.conn = conn;
  state.view = view;
  $("prompt").focus();
}

function sendPrompt() {
  const box = $("prompt");
  const prompt = box.value;
  if (!prompt.trim() || !state.conn) return;
  state.conn.send({ type: "generate_content_request", prompt });
  box.value = "";
  state.view?.follow(); // one's own prompt: show its answer as it comes
}

function wire() {
  $("prompt-form").addEventListener("submit", (e) => { e.preventDefault(); sendPrompt(); });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendPrompt(); }
  });
  $("cancel").addEventListener("click", () => {
    if (state.conn && state.view?.active) state.conn.send({ type: "cancel", request_id: state.view.active });
  });
  $("back").addEventListener("click", () => { if (state.conn) state.conn.close(); state.conn = null; listSessions(); });
  $("refresh").addEventListener("click", () => listSessions());
  $("jump").addEventListener("click", () => state.view?.follow());
  window.addEventListener("scroll", () => state.view?.scrolled(), { passive: true });
  $("new-session").addEventListener("click", () => openSession(null, state.me?.server_tools ? "server" : null));
  $("logout").addEventListener("click", async () => {
    if (state.conn) state.conn.close();
    state.conn = null;
    try {
      await fetch("/api/logout", { method: "POST", headers: signedHeaders({ "Content-Type": "application/json" }),
                                   body: "{}", credentials: "same-origin" });
    } catch { /* signed out locally all the same */ }
    try { localStorage.removeItem(PAGE_KEY); } catch { /* nothing kept */ }
    $("logout").hidden = true;
    $("who").textContent = "";
    signedOut("Signed out", "This browser is signed out. Run gemini-split pair to sign it in again.");
  });
  setUpNotifyButton();
}

async function pair() {
  const code = decodeURIComponent(location.hash.slice(1));
  history.replaceState(null, "", "/pair"); // the code leaves the address bar
  if (!code) return signedOut("No pairing code", "Open the whole link gemini-split pair printed.");
  let response;
  try {
    response = await fetch("/api/pair", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
      credentials: "same-origin",
    });
  } catch (e) {
    return signedOut("Pairing failed", `The server did not answer: ${e.message}`);
  }
  if (response.ok) {
    let page = "";
    try { page = (await response.json()).page || ""; } catch { /* not JSON */ }
    try { localStorage.setItem(PAGE_KEY, page); } catch {
      return signedOut("Pairing failed", "This browser does not let the page keep its sign-in (site storage is off).");
    }
    location.replace("/");
    return;
  }
  let error = "unknown";
  try { error = (await response.json()).error || error; } catch { /* not JSON */ }
  const why = {
    expired: "This pairing link has expired (links are valid for 10 minutes).",
    used: "This pairing link was already used: a link signs in one browser once.",
    unknown: "This pairing link is not valid.",
  }[error] || `The server refused the link (${error}).`;
  signedOut("Pairing refused", `${why} Run gemini-split pair again for a new one.`);
}

async function main() {
  wire();
  if (location.pathname === "/pair") return pair();
  let response;
  try { response = await fetch("/api/me", { credentials: "same-origin", headers: signedHeaders() }); } catch { response = null; }
  if (!response || !response.ok) {
    return signedOut("Not signed in", "Run gemini-split pair in a terminal and open the link it prints in this browser.");
  }
  state.me = await response.json();
  $("logout").hidden = false;
  $("who").textContent = visible(`${state.me.user || ""}${state.me.server ? " @ " + state.me.server : ""}`);
  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  if (wanted) openSession(wanted);
  else listSessions();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
