// The console shell: the gateway key form, the page menu and the page router (#/logs, #/glance, #/playground).

import { ApiError, gatewayKey, getJson } from "./api.js";
import { clear, el } from "./dom.js";
import { page as glance } from "./glance.js";
import { page as logs } from "./logs.js";
import { page as playground } from "./playground.js";

// The console's pages, in menu order. Each is { id, title, mount(root) -> unmount function }. Control-plane pages
// (keys, provider slugs, saved configs, prompts, policies) join this list as modules of the same shape.
const PAGES = [logs, glance, playground];

const root = document.getElementById("page");
const nav = document.getElementById("nav");
const keyForm = document.getElementById("key-form");
const keyInput = document.getElementById("key-input");
const keyState = document.getElementById("key-state");
let unmount = null;

function current() {
  const id = location.hash.replace(/^#\/?/, "");
  return PAGES.find((p) => p.id === id) || PAGES[0];
}

// The menu is built once, as links to the pages' hash routes: a keyboard reaches them with Tab, assistive tools list
// them as links, and the browser keeps the page across back, forward and reload. Rendering a page only moves the
// current-page mark, so the link just used keeps the focus.
const links = PAGES.map((p) => el("a", { href: `#/${p.id}`, "data-page": p.id }, p.title));
nav.append(...links);

function markNav() {
  const active = current();
  PAGES.forEach((p, i) => {
    links[i].classList.toggle("active", p === active);
    if (p === active) links[i].setAttribute("aria-current", "page");
    else links[i].removeAttribute("aria-current");
  });
}

function render() {
  if (unmount) unmount();
  unmount = null;
  markNav();
  clear(root);
  if (!gatewayKey.get()) {
    root.append(el("section", { class: "empty" },
      el("h2", { text: "Enter a gateway key" }),
      el("p", { text: "The console shows what this key may read through the API: an admin key every " +
                      "workspace, any other key its own. The key stays in this browser tab only." })));
    return;
  }
  unmount = current().mount(root) || null;
}

function showKeyState(text, kind) {
  keyState.textContent = text;
  keyState.className = `key-state ${kind || ""}`;
}

async function checkKey() {
  try {
    await getJson("v1/logs?limit=1");
    showKeyState("key accepted", "ok");
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      gatewayKey.clear();
      showKeyState("key rejected", "bad");
      return false;
    }
    showKeyState(`could not check the key: ${error.message}`, "bad");
    return true;
  }
}

keyForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = keyInput.value.trim();
  keyInput.value = "";
  if (!key) return;
  gatewayKey.set(key);
  await checkKey();
  render();
});

document.getElementById("key-forget").addEventListener("click", () => {
  gatewayKey.clear();
  showKeyState("no key", "");
  render();
});

window.addEventListener("hashchange", render);
if (gatewayKey.get()) checkKey();
else showKeyState("no key", "");
render();
