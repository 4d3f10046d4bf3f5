// At a glance: GET /v1/logs/aggregates for the last 15 minutes, hour or day, as figures, uPlot charts and a table
// per provider and model; the charts show everything or one provider and model (pick it above them, or click its
// row). Refreshed while the page is open.

import { getJson, query } from "./api.js";
import { clear, el, fmt, money } from "./dom.js";

const WINDOWS = [["15m", "15 minutes"], ["1h", "hour"], ["1d", "day"]];
const REFRESH_MS = { "15m": 5000, "1h": 15000, "1d": 60000 };
const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#d97706"];

const CHARTS = [
  { id: "rps", title: "Requests per second", series: [["req/s", "requests_per_second"]] },
  { id: "latency", title: "Latency (ms)", gaps: true,
    series: [["p50", "latency_p50_ms"], ["p99", "latency_p99_ms"], ["added p50", "added_p50_ms"],
             ["added p99", "added_p99_ms"]] },
  { id: "errors", title: "Errors per slot", series: [["4xx", "errors_4xx"], ["5xx", "errors_5xx"]] },
  { id: "tokens", title: "Tokens and cost", series: [["tokens", "tokens"], ["cost $", "cost_usd", "usd"]] },
];

function card(label, value) {
  return el("div", { class: "card" }, el("div", { class: "card-value", text: value }),
            el("div", { class: "card-label", text: label }));
}

function statusText(byStatus) {
  return Object.entries(byStatus || {}).map(([status, n]) => `${status}: ${n}`).join(", ") || "—";
}

function chartOptions(spec, width) {
  const scales = { x: { time: true } };
  const axes = [{}, { size: 60 }];
  const series = [{}];
  spec.series.forEach(([label, , scale], i) => {
    series.push({ label, stroke: COLOURS[i % COLOURS.length], width: 1.5, scale: scale || "y", spanGaps: false,
                  points: { show: Boolean(spec.gaps), size: 4 } });
  });
  if (spec.series.some(([, , scale]) => scale === "usd")) {
    scales.usd = { auto: true };
    axes.push({ scale: "usd", side: 1, size: 70, grid: { show: false },
                values: (plot, ticks) => ticks.map((v) => (v === 0 ? "0" : v.toPrecision(2))) });
  }
  return { width, height: 180, scales, axes, series, legend: { live: true }, cursor: { drag: { x: false } } };
}

function mount(root) {
  let window_ = sessionStorage.getItem("gateway-console-window") || "15m";
  let timer = null;
  let stopped = false;
  let asked = 0;  // the latest refresh: an answer to an earlier one (another window or focus) is dropped
  let focus = "";  // "" for everything, else JSON of [provider, model]
  const charts = new Map();
  const buttons = el("div", { class: "windows", role: "group", "aria-label": "Window" });
  const picker = el("select", { id: "glance-group", "aria-label": "Provider and model" },
                    el("option", { value: "", text: "all providers and models" }));
  picker.addEventListener("change", () => show(picker.value));
  const cards = el("div", { class: "cards", id: "glance-cards" });
  const chartGrid = el("div", { class: "charts" });
  const groupsBody = el("tbody", { id: "glance-groups" });
  const note = el("p", { class: "error", id: "glance-error", role: "alert" });
  const groups = el("table", { class: "groups" },
    el("thead", {}, el("tr", {}, ["Provider", "Model", "Requests", "Req/s", "p50 ms", "p99 ms", "Added p50",
                                  "Added p99", "Error rate", "By status", "Tokens", "Cost $"]
      .map((h) => el("th", { text: h })))), groupsBody);

  for (const spec of CHARTS) {
    const box = el("div", { class: "chart", id: `chart-${spec.id}`, dataset: { chart: spec.id, points: "0" } },
                   el("h3", { text: spec.title }));
    chartGrid.append(box);
    charts.set(spec.id, { spec, box, plot: null });
  }

  function drawCharts(report) {
    const t = report.series.t;
    for (const chart of charts.values()) {
      const data = [t, ...chart.spec.series.map(([, key]) => report.series[key])];
      const points = data.slice(1).reduce(
        (n, values) => n + values.filter((v) => typeof v === "number" && v > 0).length, 0);
      chart.box.dataset.points = String(points);
      if (typeof window.uPlot !== "function") {
        chart.box.dataset.missing = "uPlot";
        continue;
      }
      const width = Math.max(280, chart.box.clientWidth - 16);
      if (!chart.plot) chart.plot = new window.uPlot(chartOptions(chart.spec, width), data, chart.box);
      else chart.plot.setData(data);
    }
  }

  function drawCards(report) {
    const s = report.totals;
    cards.replaceChildren(
      card("requests", fmt(s.requests)), card("requests/s", fmt(s.requests_per_second, 2)),
      card("error rate", `${fmt(s.error_rate * 100, 1)}%`), card("p50 ms", fmt(s.latency_p50_ms)),
      card("p99 ms", fmt(s.latency_p99_ms)), card("added p50 ms", fmt(s.added_p50_ms, 2)),
      card("added p99 ms", fmt(s.added_p99_ms, 2)), card("tokens", fmt(s.total_tokens)),
      card("cost $", money(s.cost_usd)));
    cards.dataset.requests = String(s.requests);
  }

  function drawGroups(report) {
    clear(groupsBody);
    for (const g of report.groups) {
      const num = (text) => el("td", { class: "num", text });
      const id = JSON.stringify([g.provider, g.model]);
      groupsBody.append(el("tr", { class: id === focus ? "selected" : "", dataset: { group: id },
                                   on: { click: () => show(id === focus ? "" : id) } },
        el("td", { text: fmt(g.provider) }), el("td", { text: fmt(g.model) }),
        num(fmt(g.requests)), num(fmt(g.requests_per_second, 2)),
        num(fmt(g.latency_p50_ms)), num(fmt(g.latency_p99_ms)),
        num(fmt(g.added_p50_ms, 2)), num(fmt(g.added_p99_ms, 2)),
        num(`${fmt(g.error_rate * 100, 1)}%`), el("td", { text: statusText(g.by_status) }),
        num(fmt(g.total_tokens)), num(money(g.cost_usd))));
    }
  }

  function fillPicker(groups) {
    const known = new Set([...picker.options].map((o) => o.value));
    for (const g of groups) {
      const id = JSON.stringify([g.provider, g.model]);
      if (!known.has(id)) picker.append(el("option", { value: id, text: `${fmt(g.provider)} · ${fmt(g.model)}` }));
    }
    picker.value = focus;
  }

  function redraw() {
    for (const chart of charts.values()) {
      if (chart.plot) chart.plot.destroy();
      chart.plot = null;
    }
    refresh();
  }

  function show(id) {
    focus = id;
    redraw();
  }

  async function refresh() {
    clearTimeout(timer);
    const mine = ++asked;
    const params = { window: window_ };
    if (focus) [params.provider, params.model] = JSON.parse(focus);
    try {
      const everything = getJson(`v1/logs/aggregates${query({ window: window_ })}`);
      const [all, report] = await Promise.all([everything, focus ? getJson(`v1/logs/aggregates${query(params)}`)
                                                                 : everything]);
      if (stopped || mine !== asked) return;
      note.textContent = "";
      fillPicker(all.groups);
      drawCards(report);
      drawCharts(report);
      drawGroups(all);
      chartGrid.dataset.focus = focus;
      chartGrid.dataset.window = report.window;
    } catch (error) {
      if (stopped || mine !== asked) return;
      note.textContent = error.message;
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS[window_] || 15000);
  }

  function pick(id) {
    window_ = id;
    sessionStorage.setItem("gateway-console-window", id);
    for (const b of buttons.children) b.classList.toggle("active", b.dataset.window === id);
    redraw();
  }

  for (const [id, label] of WINDOWS) {
    buttons.append(el("button", { type: "button", dataset: { window: id }, text: `last ${label}`,
                                  on: { click: () => pick(id) } }));
  }
  root.append(el("section", { class: "glance-page" }, el("div", { class: "toolbar" }, buttons, picker), note,
                 cards, chartGrid,
                 el("h2", { text: "Per provider and model" }), el("div", { class: "table-wrap" }, groups)));
  pick(window_);
  return () => {
    stopped = true;
    clearTimeout(timer);
    for (const chart of charts.values()) if (chart.plot) chart.plot.destroy();
  };
}

export const page = { id: "glance", title: "At a glance", mount };
