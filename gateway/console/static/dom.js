// Building DOM nodes: every value becomes text (text nodes, textContent, attributes), never parsed as HTML.

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name === "on") for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "value") node.value = value;
    else if (name === "href" && /^#[\w/-]*$/.test(value)) node.setAttribute("href", value);  // same-page links only
    else if (/^on/i.test(name) || name === "style" || name === "href" || name === "src") {
      throw new Error(`el(): ${name} is not set this way`);
    } else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, ...children);
  return node;
}

export function append(node, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

// "12.3" for numbers, "—" for missing values.
export function fmt(value, digits = 1) {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return "—";
    return Number.isInteger(value) ? value.toLocaleString("en") : value.toFixed(digits);
  }
  return String(value);
}

export function money(value) {
  if (typeof value !== "number") return "—";
  return value === 0 ? "0" : value < 0.01 ? value.toPrecision(2) : value.toFixed(4);
}

export function statusClass(status) {
  const n = Number(status);
  return n >= 500 ? "s5" : n >= 400 ? "s4" : n >= 300 ? "s3" : n >= 200 ? "s2" : "s0";
}

// A definition list of [label, value] pairs, values as text.
export function facts(pairs) {
  const list = el("dl", { class: "facts" });
  for (const [label, value] of pairs) list.append(el("dt", { text: label }), el("dd", { text: fmt(value, 3) }));
  return list;
}
