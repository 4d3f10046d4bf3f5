// Live request log: filters, a table fed by GET /v1/logs/stream (newest first), and the record a row opens.

import { ApiError, query, readEvents } from "./api.js";
import { clear, el, facts, fmt, money, statusClass } from "./dom.js";

const MAX_ROWS = 200;
const BACKLOG = 50;
const RETRY_MS = 2000;

function localInputToUnix(value) {
  if (!value) return "";
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? (ms / 1000).toFixed(3) : "";
}

function timeText(record) {
  const date = new Date((record.timestamp || 0) * 1000);
  return Number.isFinite(date.getTime()) ? date.toLocaleTimeString("en-GB", { hour12: false }) : "—";
}

function section(title, ...content) {
  return el("section", { class: "detail-section" }, el("h3", { text: title }), ...content);
}

function jsonBlock(value) {
  return el("pre", { class: "json", text: JSON.stringify(value, null, 2) });
}

function detail(record) {
  const parts = [
    el("h2", {}, "Request ", el("code", { text: record.trace_id })),
    section("Outcome", facts([
      ["status", record.status], ["endpoint", record.endpoint], ["provider", record.provider],
      ["model", record.model], ["stream", record.stream ? "yes" : "no"], ["workspace", record.workspace],
      ["time", record.time], ["error", record.error],
    ])),
    section("Latency (ms)", facts([
      ["total", record.latency_ms], ["upstream", record.upstream_latency_ms],
      ["added by the gateway", record.gateway_latency_ms], ["time to first token", record.ttft_ms],
    ])),
    section("Tokens and cost", facts([
      ["prompt", record.prompt_tokens], ["completion", record.completion_tokens], ["total", record.total_tokens],
      ["usage source", record.usage_source], ["cost (USD)", money(record.cost_usd)],
    ])),
    section("Routing", facts([
      ["answering target", record.target], ["retries", record.retries], ["fallbacks", record.fallbacks],
      ["breaker opens", record.breaker_opens], ["cache", record.cache_status], ["span", record.span_name],
      ["span id", record.span_id], ["parent span id", record.parent_span_id],
    ])),
  ];
  if (record.metadata) parts.push(section("Metadata", jsonBlock(record.metadata)));
  if (record.request_headers) parts.push(section("Request headers (masked)", jsonBlock(record.request_headers)));
  if (record.request_body !== undefined) parts.push(section("Request body", jsonBlock(record.request_body)));
  if (record.response_body !== undefined) parts.push(section("Response body", jsonBlock(record.response_body)));
  parts.push(el("details", { class: "raw" }, el("summary", { text: "Whole record" }), jsonBlock(record)));
  return parts;
}

function filterForm(onApply) {
  const field = (label, input) => el("label", {}, el("span", { text: label }), input);
  const status = el("select", { name: "status", id: "filter-status" },
    el("option", { value: "", text: "any" }), el("option", { value: "2xx", text: "2xx" }),
    el("option", { value: "4xx", text: "4xx" }), el("option", { value: "5xx", text: "5xx" }));
  const provider = el("input", { name: "provider", id: "filter-provider", placeholder: "any", spellcheck: "false" });
  const model = el("input", { name: "model", id: "filter-model", placeholder: "any", spellcheck: "false" });
  const trace = el("input", { name: "trace_id", id: "filter-trace", placeholder: "any", spellcheck: "false" });
  const from = el("input", { name: "from", id: "filter-from", type: "datetime-local", step: "1" });
  const to = el("input", { name: "to", id: "filter-to", type: "datetime-local", step: "1" });
  const form = el("form", { class: "filters", id: "log-filters" },
    field("Status", status), field("Provider", provider), field("Model", model), field("Trace id", trace),
    field("From", from), field("To", to), el("button", { type: "submit", text: "Apply" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    onApply({
      status: status.value, provider: provider.value.trim(), model: model.value.trim(),
      trace_id: trace.value.trim(), from: localInputToUnix(from.value), to: localInputToUnix(to.value),
    });
  });
  return form;
}

function mount(root) {
  const state = { filters: {}, rows: new Map(), selected: null, skipped: 0, controller: null, stopped: false };
  const live = el("span", { class: "live", id: "live-state", text: "connecting" });
  const skipped = el("span", { class: "skipped", id: "skipped" });
  const body = el("tbody", { id: "log-rows" });
  const table = el("table", { class: "log-table" },
    el("thead", {}, el("tr", {}, ["Time", "Status", "Provider", "Model", "Latency ms", "Added ms", "Tokens",
                                  "Cost $", "Trace id"].map((h) => el("th", { text: h })))), body);
  const panel = el("aside", { class: "detail", id: "log-detail" },
    el("p", { class: "hint", text: "Open a row to see its record." }));
  const error = el("p", { class: "error", id: "log-error", role: "alert" });

  function select(id) {
    state.selected = id;
    for (const tr of body.children) tr.classList.toggle("selected", tr.dataset.id === id);
    const record = state.rows.get(id);
    if (record) panel.replaceChildren(...detail(record));
    // under the table (a narrow window): bring the record into sight
    if (panel.getBoundingClientRect().top > window.innerHeight) panel.scrollIntoView({ block: "nearest" });
  }

  function row(record) {
    return el("tr", { class: statusClass(record.status), dataset: { id: record.id, trace: record.trace_id },
                      on: { click: () => select(record.id) } },
      el("td", { text: timeText(record) }), el("td", { class: "status", text: fmt(record.status) }),
      el("td", { text: fmt(record.provider) }), el("td", { class: "model", text: fmt(record.model) }),
      el("td", { class: "num", text: fmt(record.latency_ms) }),
      el("td", { class: "num", text: fmt(record.gateway_latency_ms, 2) }),
      el("td", { class: "num", text: fmt(record.total_tokens) }),
      el("td", { class: "num", text: money(record.cost_usd) }),
      el("td", { class: "trace" }, el("code", { text: record.trace_id })));
  }

  function add(record) {
    if (!record || record.id === undefined || state.rows.has(record.id)) return;
    state.rows.set(record.id, record);
    // ids grow with time: keep the table newest first
    let before = null;
    for (const tr of body.children) {
      if (Number(tr.dataset.id) < Number(record.id)) { before = tr; break; }
    }
    body.insertBefore(row(record), before);
    while (body.children.length > MAX_ROWS) {
      const last = body.lastElementChild;
      state.rows.delete(last.dataset.id);
      last.remove();
    }
  }

  function onEvent(event, data) {
    if (event === "log") add(JSON.parse(data));
    else if (event === "skipped") {
      state.skipped += JSON.parse(data).skipped || 0;
      skipped.textContent = `${state.skipped} records skipped (the console fell behind)`;
    }
  }

  async function run() {
    const controller = new AbortController();
    state.controller = controller;
    const path = "v1/logs/stream" + query({ ...state.filters, backlog: BACKLOG });
    while (!controller.signal.aborted) {
      live.textContent = "connecting";
      try {
        await readEvents(path, onEvent, controller.signal, () => {
          live.textContent = "live";
          live.className = "live on";
          error.textContent = "";
        });
        live.textContent = "reconnecting";
      } catch (err) {
        if (controller.signal.aborted) return;
        live.className = "live";
        if (err instanceof ApiError) {
          error.textContent = err.param ? `${err.message} (${err.param})` : err.message;
          live.textContent = "stopped";
          if (err.status === 400 || err.status === 401 || err.status === 403) return;
        } else live.textContent = "reconnecting";
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  function apply(filters) {
    if (state.controller) state.controller.abort();
    state.filters = filters;
    state.rows.clear();
    state.skipped = 0;
    skipped.textContent = "";
    clear(body);
    run();
  }

  // the table's own scroll box is a named region a keyboard can focus and scroll sideways with the arrow keys
  const wrap = el("div", { class: "table-wrap", role: "region", "aria-label": "Requests", tabindex: 0 }, table);
  root.append(el("section", { class: "logs-page" },
    el("div", { class: "toolbar" }, filterForm(apply), live, skipped), error,
    el("div", { class: "split" }, wrap, panel)));
  apply({});
  return () => {
    if (state.controller) state.controller.abort();
  };
}

export const page = { id: "logs", title: "Live log", mount };
