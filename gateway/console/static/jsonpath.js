// Where a JSON path, as the gateway names it (`targets[1].retry.attempts`, `config` for the whole config), sits in
// a JSON text: a small JSON parser that records the character range of every value and object member.

class SyntaxFault extends Error {
  constructor(message, position) {
    super(message);
    this.position = position;
  }
}

export function parsePositions(text) {
  let i = 0;
  const ws = () => { while (i < text.length && " \t\r\n".includes(text[i])) i++; };
  const fail = (what) => { throw new SyntaxFault(what, Math.min(i, text.length)); };

  function string() {
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) fail("unterminated string");
    i++;
    try {
      return { start, end: i, key: JSON.parse(text.slice(start, i)) };
    } catch {
      i = start;
      return fail("invalid string");
    }
  }

  function value() {
    ws();
    const start = i;
    const c = text[i];
    if (c === "{") {
      i++;
      const members = [];
      ws();
      if (text[i] === "}") { i++; return { type: "object", start, end: i, members }; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const key = string();
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        const node = value();
        members.push({ key: key.key, start: key.start, end: node.end, node });
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return { type: "object", start, end: i, members }; }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const items = [];
      ws();
      if (text[i] === "]") { i++; return { type: "array", start, end: i, items }; }
      for (;;) {
        items.push(value());
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return { type: "array", start, end: i, items }; }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') { const s = string(); return { type: "string", start, end: s.end }; }
    const literal = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 64));
    if (!literal) fail("unexpected character");
    i += literal[0].length;
    return { type: "scalar", start, end: i };
  }

  const root = value();
  ws();
  if (i < text.length) fail("unexpected text after the JSON value");
  return root;
}

// {start, end, found} of the deepest part of `path` present in the text (found: the whole path was there).
export function locate(root, path) {
  let node = root;
  let range = { start: root.start, end: root.end };
  let rest = path === "config" ? "" : path.replace(/^config(?=[.[])/, "").replace(/^\./, "");
  while (rest) {
    if (node.type === "array") {
      const m = /^\[(\d+)\]/.exec(rest);
      const item = m && node.items[Number(m[1])];
      if (!item) return { ...range, found: false };
      node = item;
      range = { start: item.start, end: item.end };
      rest = rest.slice(m[0].length).replace(/^\./, "");
      continue;
    }
    if (node.type !== "object") return { ...range, found: false };
    // keys may hold dots (condition queries: "metadata.user"): take the longest key the path continues with
    let best = null;
    for (const member of node.members) {
      const k = member.key;
      const continues = rest === k || rest.startsWith(`${k}.`) || rest.startsWith(`${k}[`);
      if (continues && (!best || k.length > best.key.length)) best = member;
    }
    if (!best) return { ...range, found: false };
    rest = rest.slice(best.key.length).replace(/^\./, "");
    node = best.node;
    range = rest ? { start: best.node.start, end: best.node.end } : { start: best.start, end: best.end };
  }
  return { ...range, found: true };
}

export { SyntaxFault };
