// Config playground: a config validated by the gateway as it is typed (POST /v1/configs/validate; a fault is
// highlighted at its JSON path), the routing tree it makes, and a test chat request sent through it.

import { ApiError, call, getJson, readJson } from "./api.js";
import { el, facts } from "./dom.js";
import { locate, parsePositions } from "./jsonpath.js";

const STORED = "gateway-console-config";
const EXAMPLE = JSON.stringify({
  strategy: { mode: "fallback" },
  retry: { attempts: 1 },
  targets: [
    { provider: "vendorA", api_key: "sk-...", override_params: { model: "gpt-4o-mini" } },
    { provider: "anthropic", api_key: "sk-ant-...", override_params: { model: "claude-3-5-haiku-latest" } },
  ],
}, null, 2);
const DEBOUNCE_MS = 250;

// Header values are ISO-8859-1: send the compact JSON with every other character escaped.
function headerJson(text) {
  return JSON.stringify(JSON.parse(text)).replace(/[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function randomTrace() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function settingText(setting) {
  const value = typeof setting.value === "object" ? JSON.stringify(setting.value) : String(setting.value);
  return setting.inherited ? `${value}  (inherited from ${setting.source})` : value;
}

function treeNode(node) {
  const how = [];
  if (node.strategy) how.push(`strategy: ${node.strategy}`);
  if (node.weight !== undefined) how.push(`weight ${node.weight}`);
  if (node.fallback_on) how.push(`falls back on ${node.fallback_on.join(", ")}`);
  if (node.when) how.push(`when ${node.when.join(" or ")}`);
  if (node.default) how.push("default");
  const settings = el("table", { class: "settings" }, Object.entries(node.settings).map(([name, setting]) =>
    el("tr", { class: setting.inherited ? "inherited" : "own" }, el("th", { text: name }),
       el("td", { text: settingText(setting) }))));
  const item = el("li", { dataset: { path: node.path } },
    el("div", { class: "tree-head" }, el("code", { text: node.path }),
       node.name ? el("span", { class: "tree-name", text: node.name }) : null,
       how.length ? el("span", { class: "tree-how", text: how.join(" · ") }) : null),
    settings);
  if (node.targets) item.append(el("ul", {}, node.targets.map(treeNode)));
  return item;
}

function mount(root) {
  const editor = el("textarea", { id: "config-editor", class: "editor", spellcheck: "false", "aria-label": "Config",
                                  wrap: "off" });
  const mirror = el("pre", { class: "mirror", "aria-hidden": "true" });
  const verdict = el("p", { id: "config-verdict", class: "verdict", role: "status" });
  const tree = el("ul", { id: "config-tree", class: "tree" });
  const model = el("input", { id: "try-model", value: "gpt-4o-mini", spellcheck: "false" });
  const message = el("textarea", { id: "try-message", rows: "3" });
  message.value = "Say hello.";
  const token = el("input", { id: "try-token", type: "password", autocomplete: "off",
                              placeholder: "optional: sent as Authorization: Bearer" });
  const send = el("button", { id: "try-send", type: "button", text: "Send test request" });
  const result = el("div", { id: "try-result", class: "try-result" });
  let pending = null;
  let timer = null;
  let seq = 0;

  function paint(text, range) {
    if (!range) {
      mirror.replaceChildren(text + "\n");
      return;
    }
    const start = Math.max(0, Math.min(range.start, text.length));
    const end = Math.max(start + 1, Math.min(range.end, text.length));
    mirror.replaceChildren(text.slice(0, start), el("mark", { class: "error-at", id: "error-mark",
                                                              text: text.slice(start, end) || " " }),
                           text.slice(end) + "\n");
  }

  function syncScroll() {
    mirror.scrollTop = editor.scrollTop;
    mirror.scrollLeft = editor.scrollLeft;
  }

  async function validate() {
    const text = editor.value;
    sessionStorage.setItem(STORED, text);
    const mine = ++seq;
    if (pending) pending.abort();
    pending = new AbortController();
    let positions = null;
    try {
      positions = parsePositions(text);
    } catch (fault) {
      // not JSON: the gateway says so too; the local parser knows where
      paint(text, { start: fault.position, end: fault.position + 1 });
    }
    try {
      const answer = await getJson("v1/configs/validate", { method: "POST", body: text, signal: pending.signal,
                                                              headers: { "content-type": "application/json" } });
      if (mine !== seq) return;
      verdict.className = "verdict ok";
      verdict.replaceChildren("Valid config");
      paint(text, null);
      tree.replaceChildren(treeNode(answer.tree));
    } catch (error) {
      if (mine !== seq || error.name === "AbortError") return;
      verdict.className = "verdict bad";
      tree.replaceChildren();
      if (!(error instanceof ApiError)) {
        verdict.replaceChildren(`Could not validate: ${error.message}`);
        return;
      }
      const path = error.param || "config";
      verdict.replaceChildren(el("code", { id: "error-path", text: path }), " ",
                              el("span", { text: error.message }));
      if (positions) paint(text, locate(positions, path));
    }
  }

  function schedule() {
    paint(editor.value, null);
    clearTimeout(timer);
    timer = setTimeout(validate, DEBOUNCE_MS);
  }

  async function trace(traceId) {
    const deadline = Date.now() + 6000;
    while (Date.now() < deadline) {
      const page = await getJson(`v1/logs?trace_id=${encodeURIComponent(traceId)}&limit=20`);
      if (page.data.length) return page.data;
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    return [];
  }

  async function sendTest() {
    result.replaceChildren(el("p", { text: "Sending…" }));
    let config;
    try {
      config = headerJson(editor.value);
    } catch {
      result.replaceChildren(el("p", { class: "error", text: "The config is not valid JSON." }));
      return;
    }
    const traceId = randomTrace();
    const headers = { "content-type": "application/json", "x-gateway-config": config,
                      "x-gateway-trace-id": traceId };
    if (token.value.trim()) headers.authorization = `Bearer ${token.value.trim()}`;
    const body = JSON.stringify({ model: model.value.trim(), messages: [{ role: "user", content: message.value }] });
    let response;
    try {
      response = await call("v1/chat/completions", { method: "POST", body, headers });
    } catch (error) {
      result.replaceChildren(el("p", { class: "error", text: `Request failed: ${error.message}` }));
      return;
    }
    const data = await readJson(response);
    const answer = response.ok
      ? (data.choices && data.choices[0] && data.choices[0].message ? data.choices[0].message.content : "")
      : (data.error ? data.error.message : "");
    const gatewayHeaders = [...response.headers].filter(([name]) => name.startsWith("x-gateway-"));
    result.replaceChildren(
      el("h3", {}, "Answer ", el("span", { class: `badge ${response.ok ? "ok" : "bad"}`, id: "try-status",
                                            text: String(response.status) })),
      el("pre", { class: "answer", id: "try-answer", text: String(answer ?? "") }),
      el("h3", { text: "Response headers" }),
      el("table", { class: "settings", id: "try-headers" },
         gatewayHeaders.map(([name, value]) => el("tr", {}, el("th", { text: name }), el("td", { text: value })))),
      el("h3", { text: "Trace" }), el("p", { class: "hint", id: "try-trace", text: `waiting for ${traceId}…` }));
    const records = await trace(traceId).catch(() => []);
    const traceBox = result.querySelector("#try-trace");
    if (!records.length) {
      traceBox.textContent = `no record for ${traceId} yet`;
      return;
    }
    traceBox.replaceWith(el("div", { id: "try-trace" }, records.map((r) => facts([
      ["trace id", r.trace_id], ["status", r.status], ["answering target", r.target], ["provider", r.provider],
      ["model", r.model], ["retries", r.retries], ["fallbacks", r.fallbacks], ["latency ms", r.latency_ms],
      ["upstream ms", r.upstream_latency_ms], ["added ms", r.gateway_latency_ms], ["error", r.error],
    ]))));
  }

  editor.value = sessionStorage.getItem(STORED) || EXAMPLE;
  editor.addEventListener("input", schedule);
  editor.addEventListener("scroll", syncScroll);
  send.addEventListener("click", sendTest);
  root.append(el("section", { class: "playground" },
    el("div", { class: "pane" }, el("h2", { text: "Config" }),
       el("div", { class: "editor-wrap" }, mirror, editor), verdict),
    el("div", { class: "pane" }, el("h2", { text: "Routing tree" }), tree,
       el("h2", { text: "Try it" }),
       el("label", {}, el("span", { text: "Model" }), model),
       el("label", {}, el("span", { text: "Message" }), message),
       el("label", {}, el("span", { text: "Provider token" }), token), send, result)));
  paint(editor.value, null);
  validate();
  return () => {
    clearTimeout(timer);
    if (pending) pending.abort();
  };
}

export const page = { id: "playground", title: "Config playground", mount };
