// clawsmith web: renders every page from the JSON API under /api/. No framework, no build step.
// Text from the store is only ever inserted as text (textContent), never as HTML.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
// Every page and the API live under this instance's secret prefix (`/s/<hex>/`); no URL the page
// builds leaves it.
const base = document.querySelector('meta[name="base-path"]').content;
const main = document.getElementById("main");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// replaceChildren without the holes (null, false) conditional children leave.
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child !== undefined && child !== null && child !== false));
  return node;
}

async function api(path, options) {
  const init = { credentials: "same-origin", headers: {} };
  if (options && options.body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.headers["X-CSRF-Token"] = csrf;
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(base + path.replace(/^\//, ""), init);
  const data = await response.json();
  if (!response.ok && !(options && options.accept && options.accept.includes(response.status))) {
    const error = new Error((data.error && data.error.message) || response.statusText);
    error.code = data.error && data.error.code;
    throw error;
  }
  return data;
}

const enc = encodeURIComponent;
const time = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "");
const duration = (ms) => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`);

function crumbs(...items) {
  const nav = document.getElementById("crumbs");
  fill(nav, ...items.map(([label, href]) => (href ? el("a", { href }, label) : el("span", {}, label))));
}

function failure(error) {
  fill(main, el("p", { class: "error", id: "failure" }, `${error.code || "error"}: ${error.message}`));
}

// ---- sessions ----

// Where an undo from this server writes, or why undo is off: every page says it.
function undoNote(undo) {
  return undo.workspace
    ? el("p", { class: "muted small", id: "undo-workspace" }, "Undo writes only in ", el("span", { class: "mono" }, undo.workspace), ".")
    : el("p", { class: "muted small", id: "undo-workspace" }, undo.off);
}

async function sessionsPage() {
  crumbs(["sessions"]);
  const server = await api("/api/server");
  const search = el("input", { id: "search", type: "search", placeholder: "search sessions by request, id or workspace", autofocus: true });
  const table = el("tbody", { id: "sessions" });
  const load = async () => {
    const data = await api(`/api/sessions?q=${enc(search.value)}`);
    fill(table, 
      ...data.sessions.map((s) =>
        el("tr", { class: "session", "data-id": s.id },
          el("td", {},
            el("a", { href: `${base}sessions/${enc(s.id)}`, class: `title${s.title ? "" : " mono"}`, "data-source": s.titleSource }, s.title || s.id),
            s.title ? el("div", { class: "muted small mono session-id" }, s.id) : null),
          el("td", { class: "mono small workspace" }, s.workspaceRoot),
          el("td", { class: "small counts" }, `${s.turns} turn${s.turns === 1 ? "" : "s"} · ${s.changes} change${s.changes === 1 ? "" : "s"}`),
          el("td", { class: "muted small activity" }, time(s.lastActivityMs)),
          el("td", { class: "links" },
            s.parentId ? el("span", { class: "fork" }, "fork of ", el("a", { href: `${base}sessions/${enc(s.parentId)}`, class: "mono" }, s.parentId)) : null,
            s.children.length ? el("span", { class: "children" }, "forks: ", ...s.children.map((c) => el("a", { href: `${base}sessions/${enc(c)}`, class: "mono" }, c))) : null))),
    );
    if (!data.sessions.length) table.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no sessions")));
  };
  let timer;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 150); });
  fill(main, 
    el("h1", {}, "Sessions"),
    el("p", { class: "muted" }, "Newest first, each named by its first request (or first tool call). Forks link to their parent and children."),
    undoNote(server.undo),
    search,
    el("table", { class: "list" }, el("thead", {}, el("tr", {}, el("th", {}, "session"), el("th", {}, "workspace"), el("th", {}, "turns · changes"), el("th", {}, "last activity (UTC)"), el("th", {}, "family"))), table),
  );
  await load();
}

// ---- timeline ----

function badge(text, kind) {
  return el("span", { class: `badge ${kind || text}` }, text);
}

function diffBlock(text) {
  return el("pre", { class: "diff" },
    ...text.split("\n").map((line) => {
      let kind = "ctx";
      if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
      else if (line.startsWith("@@")) kind = "hunk";
      else if (line.startsWith("+")) kind = "add";
      else if (line.startsWith("-")) kind = "del";
      return el("span", { class: `line ${kind}` }, line + "\n");
    }));
}

function fieldsTable(fields) {
  if (!fields || !fields.length) return null;
  return el("dl", { class: "fields" }, ...fields.flatMap((f) => [el("dt", {}, f.label), el("dd", { class: "mono" }, f.value)]));
}

function artifactViewer(sessionId, artifactId) {
  const box = el("div", { class: "artifact-view" });
  const text = el("pre", { class: "artifact-text" });
  const status = el("span", { class: "muted small artifact-status" });
  let mode = "bytes";
  let position = 0;
  const show = async (start) => {
    const query = mode === "bytes" ? `offset=${start}&length=4096` : `line=${start}&lines=50`;
    const page = await api(`/api/sessions/${enc(sessionId)}/artifacts/${enc(artifactId)}?${query}`);
    position = start;
    text.textContent = page.text;
    status.textContent = mode === "bytes"
      ? `bytes ${page.offset}–${page.end} of ${page.totalBytes}`
      : `lines ${page.line}–${page.lastLine} of ${page.totalLines}`;
    next.disabled = mode === "bytes" ? page.nextOffset == null : page.nextLine == null;
    next.onclick = () => show(mode === "bytes" ? page.nextOffset : page.nextLine);
    prev.disabled = mode === "bytes" ? start === 0 : start <= 1;
    prev.onclick = () => show(mode === "bytes" ? Math.max(0, start - 4096) : Math.max(1, start - 50));
  };
  const prev = el("button", { class: "small-button" }, "◀ previous");
  const next = el("button", { class: "small-button artifact-next" }, "next ▶");
  const toggle = el("button", { class: "small-button artifact-mode", onclick: () => { mode = mode === "bytes" ? "lines" : "bytes"; toggle.textContent = mode === "bytes" ? "page by lines" : "page by bytes"; show(mode === "bytes" ? 0 : 1); } }, "page by lines");
  box.append(el("div", { class: "toolbar" }, prev, next, toggle, status), text);
  show(position);
  return box;
}

// Output too large for the model's context is an artifact: shown a page at a time, on request.
function artifactButton(sessionId, artifact) {
  const button = el("button", { class: "small-button artifact-open" }, `open artifact ${artifact.artifactId} (${artifact.bytes} bytes${artifact.lines != null ? `, ${artifact.lines} lines` : ""})`);
  button.addEventListener("click", () => button.replaceWith(artifactViewer(sessionId, artifact.artifactId)));
  return el("div", { class: "artifact" }, button);
}

function renderDisplay(sessionId, display) {
  const body = display.body || "";
  switch (display.kind) {
    case "command":
      return el("div", { class: "display display-command" },
        display.title ? el("div", { class: "command-line mono" }, "$ ", display.title) : null,
        fieldsTable(display.fields),
        body ? el("pre", { class: "output" }, body) : null);
    case "search":
      return el("div", { class: "display display-search" },
        display.title ? el("div", { class: "muted" }, display.title) : null,
        el("ul", { class: "hits" }, ...body.split("\n").filter((l) => l).map((line) => {
          const match = /^([^:]+):(\d+):(.*)$/.exec(line);
          return match
            ? el("li", { class: "hit" }, el("span", { class: "hit-path" }, match[1]), el("span", { class: "hit-line" }, `:${match[2]}`), el("span", { class: "hit-text" }, match[3]))
            : el("li", { class: "hit" }, el("span", { class: "hit-path" }, line));
        })),
        fieldsTable(display.fields));
    case "diff":
      return el("div", { class: "display display-diff" },
        display.title ? el("div", { class: "mono" }, display.title) : null,
        fieldsTable(display.fields), diffBlock(body));
    case "artifact":
      return el("div", { class: "display display-artifact" },
        display.title ? el("div", {}, display.title) : null,
        fieldsTable(display.fields));
    case "json": {
      let pretty = body;
      try { pretty = JSON.stringify(JSON.parse(body), null, 2); } catch (_) { /* shown as stored */ }
      return el("div", { class: "display display-json" }, display.title ? el("div", {}, display.title) : null, fieldsTable(display.fields), el("pre", { class: "json" }, pretty));
    }
    default:
      return el("div", { class: "display display-text" },
        display.title ? el("div", {}, display.title) : null,
        fieldsTable(display.fields),
        body ? el("pre", { class: "output" }, body) : null);
  }
}

class Timeline {
  constructor(sessionId, list) {
    this.sessionId = sessionId;
    this.list = list;
    this.cards = new Map();
    this.started = new Map();
    this.turn = list;
  }

  add(event) {
    switch (event.type) {
      case "turn.started": {
        const section = el("section", { class: "turn", "data-turn": event.turnId },
          el("h3", {}, "Turn ", el("a", { href: `${base}sessions/${enc(this.sessionId)}/turns/${enc(event.turnId)}`, class: "mono" }, event.turnId), el("span", { class: "muted small" }, `  #${event.sequence} · ${time(event.timestampMs)}`)));
        this.list.append(section);
        this.turn = section;
        break;
      }
      case "model.request":
        this.turn.append(el("div", { class: "card request", "data-seq": event.sequence },
          el("div", { class: "card-head" }, badge("model request", "request"), el("span", { class: "mono small" }, event.requestId), el("span", { class: "muted small" }, `${event.toolNames.length} tools shown`)),
          event.composition.activatedTools.length ? el("div", { class: "small" }, "activated: ", event.composition.activatedTools.join(", ")) : null,
          el("details", { class: "evidence" }, el("summary", {}, "evidence"),
            el("dl", { class: "fields" }, el("dt", {}, "schema sha256"), el("dd", { class: "mono" }, event.toolSchemaSha256), el("dt", {}, "tools"), el("dd", { class: "mono" }, event.toolNames.join(", "))))));
        break;
      case "tool.started": {
        this.started.set(event.toolCallId, event);
        const card = el("div", { class: "card tool running", "data-call": event.toolCallId, "data-seq": event.sequence },
          el("div", { class: "card-head" }, el("strong", { class: "tool-name" }, event.toolName), badge("running", "running"), badge(`risk ${event.risk}`, "risk"), event.summary ? el("span", { class: "muted small summary" }, event.summary) : null));
        this.cards.set(event.toolCallId, card);
        this.turn.append(card);
        break;
      }
      case "tool.completed": {
        const started = this.started.get(event.toolCallId);
        let card = this.cards.get(event.toolCallId);
        if (!card) {
          card = el("div", { class: "card tool", "data-call": event.toolCallId });
          this.turn.append(card);
        }
        const result = event.result;
        const status = result.status;
        card.className = `card tool status-${status}`;
        card.dataset.status = status;
        card.dataset.seq = event.sequence;
        if (result.display) card.dataset.kind = result.display.kind;
        fill(card, 
          el("div", { class: "card-head" },
            el("strong", { class: "tool-name" }, event.toolName),
            badge(status, `status-${status}`),
            result.code ? el("span", { class: "badge code", "data-code": result.code }, result.code) : null,
            started ? badge(`risk ${started.risk}`, "risk") : null,
            started ? el("span", { class: "muted small duration" }, duration(event.timestampMs - started.timestampMs)) : null,
            el("span", { class: "muted small mono" }, event.toolCallId)),
          status !== "success" ? el("div", { class: "refusal" }, el("strong", {}, status === "denied" || status === "blocked" ? "refused: " : `${status}: `), event.output) : null,
          result.display ? renderDisplay(this.sessionId, result.display) : (status === "success" ? el("pre", { class: "output" }, event.output) : null),
          result.artifact ? artifactButton(this.sessionId, result.artifact) : null);
        break;
      }
      case "turn.completed":
        this.turn.append(el("div", { class: "turn-end muted small" }, `turn completed · ${event.toolCalls} tool call(s)`));
        this.turn = this.list;
        break;
      default:
        this.turn.append(el("div", { class: "muted small" }, `#${event.sequence} ${event.type}`));
    }
  }
}

async function sessionPage(id) {
  crumbs(["sessions", base], [id]);
  const data = await api(`/api/sessions/${enc(id)}`);
  const s = data.session;
  const list = el("div", { id: "timeline" });
  const timeline = new Timeline(id, list);
  const more = el("button", { id: "more", hidden: true }, "load more events");
  const counter = el("span", { class: "muted small", id: "counter" });
  let after = 0;
  let loaded = 0;
  let source = null;
  const startLive = () => {
    if (source) return;
    source = new EventSource(`${base}api/sessions/${enc(id)}/live?after=${after}`);
    document.getElementById("live").hidden = false;
    source.addEventListener("events", (message) => {
      const page = JSON.parse(message.data);
      for (const event of page.events) if (event.sequence > after) { timeline.add(event); loaded++; }
      after = Math.max(after, page.nextAfter);
      counter.textContent = `${loaded} of ${Math.max(after, data.lastSequence)} events`;
    });
  };
  const loadPage = async () => {
    const page = await api(`/api/sessions/${enc(id)}/events?after=${after}&limit=200`);
    page.events.forEach((event) => timeline.add(event));
    loaded += page.events.length;
    after = page.nextAfter;
    more.hidden = !page.more;
    counter.textContent = `${loaded} of ${Math.max(after, data.lastSequence)} events`;
    // Live updates follow the end of the history: they start once the last page is shown.
    if (!page.more) startLive();
  };
  more.addEventListener("click", loadPage);
  // What undos took out of the history: kept, marked undone, below the live timeline.
  const undone = data.undone.map((stretch) => {
    const list = el("div", { class: "undone-events" });
    const kept = new Timeline(id, list);
    stretch.events.forEach((event) => kept.add(event));
    return el("details", { class: "undone-stretch" },
      el("summary", {}, badge("undone", "undone"), ` undo ${stretch.scope} of turn `,
        el("span", { class: "mono" }, stretch.turnId), ` and later, ${time(stretch.undoneAtMs)} · `,
        `${stretch.messages.length} message(s), ${stretch.events.length} event(s)`),
      list);
  });
  fill(main, 
    el("h1", {}, "Session ", el("span", { class: "mono" }, s.id)),
    el("div", { class: "meta" },
      el("span", {}, "workspace ", el("span", { class: "mono" }, s.workspaceRoot)),
      el("span", {}, "started ", time(s.createdAtMs)),
      s.parentId ? el("span", { class: "fork" }, "fork of ", el("a", { href: `${base}sessions/${enc(s.parentId)}`, class: "mono" }, s.parentId)) : null,
      s.children.length ? el("span", { class: "children" }, "forks: ", ...s.children.map((c) => el("a", { href: `${base}sessions/${enc(c)}`, class: "mono" }, c))) : null),
    data.undoAvailable ? undoNote(data.undo) : el("p", { class: "muted small", id: "undo-workspace" }, data.undoRefusal),
    el("div", { class: "columns" },
      el("div", { class: "col-main" }, el("h2", {}, "Timeline ", counter), list, more,
        undone.length ? el("section", { id: "undone" }, el("h2", {}, "Undone"), ...undone) : null),
      el("aside", { class: "col-side" },
        el("h2", {}, "Checkpoints"),
        data.checkpoints.length
          ? el("ul", { class: "checkpoints" }, ...data.checkpoints.map((c) => el("li", { class: c.filesUndone || c.sessionUndone ? "undone" : "" },
              el("a", { href: `${base}sessions/${enc(id)}/turns/${enc(c.turnId)}`, class: "mono" }, c.turnId),
              el("div", { class: "muted small" }, `${time(c.createdAtMs)} · ${c.state} · ${c.fileCount} file(s)`))))
          : el("p", { class: "muted" }, "no checkpoints"),
        data.todos.length ? el("h2", {}, "Todos") : null,
        data.todos.length ? el("ul", { class: "todos" }, ...data.todos.map((t) => el("li", { class: `todo ${t.status}` }, t.content))) : null)),
  );
  await loadPage();
}

// ---- a turn's checkpoint ----

async function turnPage(id, turn) {
  crumbs(["sessions", base], [id, `${base}sessions/${enc(id)}`], [`turn ${turn}`]);
  const [data, session] = await Promise.all([
    api(`/api/sessions/${enc(id)}/turns/${enc(turn)}`),
    api(`/api/sessions/${enc(id)}`),
  ]);
  const c = data.checkpoint;
  const files = el("tbody", { id: "files" }, ...data.files.map((f) => {
    const holder = el("td", { colspan: 5, class: "diff-holder" });
    const row = el("tr", { class: "diff-row", hidden: true }, holder);
    const button = el("button", { class: "small-button show-diff", onclick: async () => {
      if (!row.hidden) { row.hidden = true; return; }
      const diff = await api(`/api/sessions/${enc(id)}/turns/${enc(turn)}/diff?path=${enc(f.path)}`);
      const note = [diff.before, diff.after].filter((side) => side.kind !== "text").map((side) => side.kind === "binary" ? `binary, ${side.totalBytes} bytes` : side.kind === "absent" ? null : `unavailable: ${side.reason}`).filter(Boolean);
      fill(holder, diff.unified ? diffBlock(diff.unified) : el("p", { class: "muted" }, "no text diff"), ...note.map((n) => el("p", { class: "muted small" }, n)), diff.unifiedTruncated ? el("p", { class: "muted small" }, "diff truncated at 64 KiB") : null);
      row.hidden = false;
    } }, "diff");
    return [
      el("tr", { class: "file", "data-path": f.path },
        el("td", { class: "mono" }, f.path), el("td", {}, badge(f.kind, `kind-${f.kind}`)),
        el("td", { class: "small" }, f.linesAdded != null ? el("span", { class: "plus" }, `+${f.linesAdded}`) : "", " ", f.linesRemoved != null ? el("span", { class: "minus" }, `−${f.linesRemoved}`) : ""),
        el("td", { class: "small muted" }, f.origin ? `${f.origin}${f.callId ? " " + f.callId : ""}` : "file tool"),
        el("td", {}, button)),
      row,
    ];
  }).flat());
  const undoPanel = el("div", { class: "undo", id: "undo" });
  const result = el("div", { id: "undo-result" });
  const preview = async (scope) => {
    fill(result);
    const p = await api(`/api/sessions/${enc(id)}/turns/${enc(turn)}/undo-preview`, { body: { scope } });
    const confirm = el("button", { id: "undo-confirm", class: "danger", disabled: p.conflicts.length > 0 || p.alreadyUndone, onclick: async () => {
      const r = await api(`/api/sessions/${enc(id)}/turns/${enc(turn)}/undo`, { body: { scope, confirm: true }, accept: [409] });
      fill(result, r.outcome === "undone"
        ? el("div", { class: "ok", id: "undo-done" }, `Undone (${scope}): ${r.turns.length} turn(s). Restored ${r.restored.length}, removed ${r.removed.length} file(s).`)
        : r.outcome === "conflicts"
          ? el("div", { class: "error", id: "undo-refused" }, `Refused: ${r.conflicts.length} file(s) changed since; nothing was changed.`, el("ul", {}, ...r.conflicts.map((x) => el("li", { class: "conflict" }, el("span", { class: "mono" }, x.path), `: ${x.reason}`))))
          : el("div", { class: "muted", id: "undo-done" }, "Already undone; nothing changed."));
      confirm.disabled = true;
    } }, `Confirm undo (${scope})`);
    result.append(el("div", { class: "preview", id: "undo-preview", "data-conflicts": p.conflicts.length },
      el("h3", {}, `Preview: undo ${scope}`),
      p.alreadyUndone ? el("p", { class: "muted" }, "Already undone in this scope; nothing would change.") : el("p", {}, `Rewinds ${p.turns.length} turn(s): `, el("span", { class: "mono" }, p.turns.join(", "))),
      p.restore.length ? el("p", {}, "Restores: ", ...p.restore.map((x) => el("span", { class: "mono path restore" }, x))) : null,
      p.remove.length ? el("p", {}, "Removes: ", ...p.remove.map((x) => el("span", { class: "mono path remove" }, x))) : null,
      p.alreadyAsBefore.length ? el("p", {}, "Already as before (nothing to write): ", ...p.alreadyAsBefore.map((x) => el("span", { class: "mono path" }, x))) : null,
      p.conflicts.length ? el("div", { class: "error", id: "undo-conflicts" }, el("strong", {}, `${p.conflicts.length} conflict(s): the undo would be refused and change nothing.`), el("ul", {}, ...p.conflicts.map((x) => el("li", { class: "conflict" }, el("span", { class: "mono" }, x.path), `: ${x.reason}`)))) : null,
      confirm));
  };
  if (session.undoAvailable) {
    undoPanel.append(el("h2", {}, "Undo"), undoNote(session.undo), el("p", { class: "muted small" }, "Undo rewinds this turn and every later one. Preview first: files changed since are listed and nothing is touched."),
      el("div", { class: "toolbar" }, ...["files", "session", "all"].map((scope) => el("button", { id: `preview-${scope}`, onclick: () => preview(scope).catch((e) => fill(result, el("p", { class: "error" }, `${e.code}: ${e.message}`))) }, `Preview undo ${scope}`))), result);
  } else {
    undoPanel.append(el("h2", {}, "Undo"), el("p", { class: "muted", id: "undo-off" }, session.undoRefusal));
  }
  fill(main, 
    el("h1", {}, "Turn ", el("span", { class: "mono" }, turn)),
    el("div", { class: "meta" },
      el("span", {}, "session ", el("a", { href: `${base}sessions/${enc(id)}`, class: "mono" }, id)),
      el("span", {}, `started ${time(c.createdAtMs)}`),
      c.finishedAtMs ? el("span", {}, `finished ${time(c.finishedAtMs)}`) : null,
      badge(c.state, `state-${c.state}`),
      c.filesUndone ? badge("files undone", "undone") : null,
      c.sessionUndone ? badge("session undone", "undone") : null),
    el("h2", {}, `Files changed (${data.files.length})`),
    data.files.length ? el("table", { class: "list" }, el("thead", {}, el("tr", {}, el("th", {}, "path"), el("th", {}, "change"), el("th", {}, "lines"), el("th", {}, "origin"), el("th", {}, ""))), files) : el("p", { class: "muted" }, "This turn changed no files."),
    undoPanel,
  );
}

// ---- routing ----

function route() {
  const parts = location.pathname.slice(base.length).split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return sessionsPage();
  if (parts[0] === "sessions" && parts.length === 2) return sessionPage(parts[1]);
  if (parts[0] === "sessions" && parts.length === 4 && parts[2] === "turns") return turnPage(parts[1], parts[3]);
  return Promise.reject(Object.assign(new Error("no such page"), { code: "not_found" }));
}

route().catch(failure);
