// The console's calls to the gateway's API, made with the operator's key (kept in this tab's sessionStorage only).
// Server-sent events are read through fetch, because EventSource cannot send a key header.

const KEY = "gateway-console-key";

export const gatewayKey = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const error = body && body.error;
    super(error && error.message ? String(error.message) : `HTTP ${status}`);
    this.status = status;
    this.param = error && error.param ? String(error.param) : null;
    this.body = body;
  }
}

export function withKey(extra = {}) {
  const headers = new Headers(extra);
  const key = gatewayKey.get();
  if (key) headers.set("x-gateway-api-key", key);
  return headers;
}

export async function call(path, { method = "GET", body, headers, signal } = {}) {
  return fetch(path, { method, body, headers: withKey(headers), signal, cache: "no-store", credentials: "omit" });
}

export async function readJson(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { error: { message: text.slice(0, 300) || `HTTP ${response.status}` } };
  }
}

export async function getJson(path, options) {
  const response = await call(path, options);
  const data = await readJson(response);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// Read a server-sent-event stream; onEvent(event, data, id) for each event. Resolves when the stream ends.
export async function readEvents(path, onEvent, signal, onOpen) {
  const response = await call(path, { signal, headers: { accept: "text/event-stream" } });
  if (!response.ok) throw new ApiError(response.status, await readJson(response));
  if (onOpen) onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
        else if (field === "id") id = text;
      }
      if (data.length) onEvent(event, data.join("\n"), id);
    }
  }
}
