// The page: the models and datasets lists, a model's details with a plot of its fit, and
// a form that uploads a CSV and trains on it. Everything that came from a user (names,
// metadata, labels, kernels) is rendered as text: no innerHTML anywhere.

import { api, ApiError, getToken, setToken } from "./api.js";
import { bandPlot, confusionTable, paddedRange, regionsPlot, scatterPlot } from "./plot.js";

const MODELS = [
  "gaussian_process", "kernel_ridge", "svm", "gp_classifier",
  "kernel_perceptron", "kernel_logistic", "nadaraya_watson", "rbf_network",
];
const KERNELS = [
  "rbf", "linear", "polynomial", "laplacian", "exponential", "matern", "rational_quadratic",
  "periodic", "sigmoid", "inverse_multiquadric", "spectrum", "subsequence", "set", "generative", "fisher",
];
const BUSY = new Set(["queued", "training"]);
const GRID_1D = 200;
const GRID_2D = 60;

const $ = (id) => document.getElementById(id);
const state = { models: [], selected: null, shownStatus: null, seq: 0, timer: null };

// A DOM element: h("td", {class: "num"}, "text", child...). Strings become text nodes.
function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

const json = (v) => JSON.stringify(v, null, 2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const modelUrl = (id, rest = "") => `/models/${encodeURIComponent(id)}${rest}`;
const displayName = (m) => (m.name ? m.name : String(m.id).slice(0, 8));

// "product(constant, rbf)" for a kernel object.
export function kernelLabel(k) {
  if (!k || typeof k !== "object") return "";
  if (Array.isArray(k.kernels)) return `${k.type}(${k.kernels.map(kernelLabel).join(", ")})`;
  if (k.kernel) return `${k.type}(${kernelLabel(k.kernel)})`;
  return String(k.type ?? "?");
}

function formatMs(ms) {
  if (typeof ms !== "number") return "";
  return ms >= 100 ? ms.toFixed(0) : ms.toPrecision(3);
}

// ---- messages and errors -------------------------------------------------------------

function say(text, kind = "info") {
  const m = $("message");
  m.className = `message ${kind}`;
  m.replaceChildren(text);
}

// A problem object as text: title (status): detail, then one line per pointer.
function problemNodes(p, status) {
  const head = h("div", {}, h("strong", {}, `${p.title || "Error"}${status ? ` (${status})` : ""}`));
  if (p.detail) head.append(`: ${p.detail}`);
  const out = [head];
  if (Array.isArray(p.errors) && p.errors.length) {
    out.push(h("ul", { class: "pointers" }, ...p.errors.map((e) => h("li", {}, h("code", {}, e.pointer ?? ""), ` ${e.message ?? ""}`))));
  }
  return out;
}

function showError(err) {
  if (err instanceof ApiError && err.status === 401) {
    askToken();
    return;
  }
  const m = $("message");
  m.className = "message error";
  if (err instanceof ApiError) m.replaceChildren(...problemNodes(err.problem, err.status));
  else m.replaceChildren(String((err && err.message) || err));
}

// ---- token ---------------------------------------------------------------------------

function askToken() {
  const hadToken = Boolean(getToken());
  setToken(null);
  $("token-form").classList.remove("hidden");
  say(hadToken ? "The token was not accepted: enter another." : "This server needs an API token.", "error");
  $("token").focus();
}

function onToken(ev) {
  ev.preventDefault();
  const input = $("token");
  const value = input.value.trim();
  input.value = "";
  if (!value) return;
  setToken(value);
  $("token-form").classList.add("hidden");
  say("");
  refresh();
}

// ---- lists ---------------------------------------------------------------------------

function renderModels() {
  const rows = state.models.map((m) => {
    const tr = h("tr", { "data-testid": "model-row", "data-id": m.id, tabindex: 0, class: m.id === state.selected ? "selected" : null },
      h("td", { class: "name", title: m.id }, displayName(m)),
      h("td", {}, h("span", { class: `status status-${m.status}` }, m.status)),
      h("td", {}, m.model),
      h("td", { class: "kernel" }, kernelLabel(m.kernel)),
      h("td", { class: "num" }, m.n_train ?? ""),
      h("td", { class: "num" }, formatMs(m.training && m.training.duration_ms)),
    );
    tr.addEventListener("click", () => showDetails(m.id));
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        showDetails(m.id);
      }
    });
    return tr;
  });
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 6, class: "hint" }, "No models yet.")));
  $("models").tBodies[0].replaceChildren(...rows);
}

function renderDatasets(datasets) {
  const rows = datasets.map((d) =>
    h("tr", { "data-testid": "dataset-row", "data-id": d.id },
      h("td", { title: d.id }, d.name || String(d.id).slice(0, 8)),
      h("td", { class: "num" }, d.n_rows),
      h("td", { class: "num", title: Array.isArray(d.features) ? d.features.join(", ") : null }, d.n_features ?? "text"),
      h("td", {}, d.target ?? ""),
      h("td", {}, String(d.created_at ?? "").replace("T", " ").replace(/\.\d+/, "")),
    ));
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 5, class: "hint" }, "No datasets yet.")));
  $("datasets").tBodies[0].replaceChildren(...rows);
}

const byNewest = (a, b) => String(b.created_at ?? "").localeCompare(String(a.created_at ?? ""));

async function refresh() {
  clearTimeout(state.timer);
  state.timer = null;
  try {
    const [m, d] = await Promise.all([api("GET", "/models"), api("GET", "/datasets")]);
    state.models = m.models.slice().sort(byNewest);
    renderModels();
    renderDatasets(d.datasets.slice().sort(byNewest));
    const current = state.models.find((x) => x.id === state.selected);
    if (current && (current.status !== state.shownStatus || BUSY.has(current.status))) showDetails(current.id);
    if (state.models.some((x) => BUSY.has(x.status))) state.timer = setTimeout(refresh, 1000);
  } catch (err) {
    showError(err);
  }
}

// ---- details -------------------------------------------------------------------------

function block(title, value) {
  return h("details", { open: "" }, h("summary", {}, title), h("pre", {}, typeof value === "string" ? value : json(value)));
}

async function showDetails(id) {
  const seq = ++state.seq;
  state.selected = id;
  for (const tr of $("models").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.id === id);
  const pane = $("details");
  try {
    const m = await api("GET", modelUrl(id));
    if (seq !== state.seq) return;
    state.shownStatus = m.status;
    const facts = h("dl", { class: "facts" });
    const fact = (k, v) => v !== null && v !== undefined && v !== "" && facts.append(h("dt", {}, k), h("dd", {}, v));
    fact("id", m.id);
    fact("model", m.model);
    fact("task", m.task);
    fact("status", m.status);
    fact("kernel", kernelLabel(m.kernel));
    fact("n_train", m.n_train);
    fact("version", m.version);
    fact("n_features", m.n_features ?? (m.status === "ready" ? "strings" : null));
    fact("n_support", m.n_support);
    if (Array.isArray(m.classes)) fact("classes", m.classes.map(String).join(", "));
    fact("created", m.created_at);
    const plot = h("div", { class: "plot-holder" });
    pane.replaceChildren(
      h("h2", {}, displayName(m)),
      facts,
      plot,
      ...(m.error ? [h("div", { class: "message error" }, ...problemNodes(m.error, m.error.status))] : []),
      ...(m.progress ? [block("progress", m.progress)] : []),
      block("params", m.params ?? {}),
      block("fitted kernel", m.kernel ?? null),
      block("training report", m.training ?? {}),
      ...(m.metadata !== undefined && m.metadata !== null ? [block("metadata", m.metadata)] : []),
    );
    if (m.status !== "ready") {
      plot.append(h("p", { class: "hint" }, m.status === "failed" ? "The fit failed." : `The model is ${m.status}: the plot follows when it is ready.`));
      return;
    }
    plot.append(h("p", { class: "hint" }, "Plotting…"));
    const drawn = await drawFit(m);
    if (seq === state.seq) plot.replaceChildren(drawn);
  } catch (err) {
    if (seq === state.seq) showError(err);
  }
}

function predict(m, x, variance = false) {
  const body = { x };
  if (m.model === "gaussian_process") body.variance = variance;
  return api("POST", modelUrl(m.id, "/predict"), { json: body });
}

// The plot that fits the model's kind, from its /sample and one batch predict.
async function drawFit(m) {
  const s = await api("GET", modelUrl(m.id, "/sample"));
  if (!s.x.length) return h("p", { class: "hint" }, "No training rows to plot.");
  if (m.task === "regression" && m.n_features === 1) {
    const xs = s.x.map((r) => r[0]);
    const [lo, hi] = paddedRange(xs);
    const grid = Array.from({ length: GRID_1D }, (_, i) => lo + ((hi - lo) * i) / (GRID_1D - 1));
    const gp = m.model === "gaussian_process";
    const p = await predict(m, grid.map((v) => [v]), gp);
    return bandPlot({ xs, ys: s.y, grid, mean: p.predictions, std: gp && Array.isArray(p.std) ? p.std : null });
  }
  if (m.task === "classification" && m.n_features === 2) {
    const xr = paddedRange(s.x.map((r) => r[0]));
    const yr = paddedRange(s.x.map((r) => r[1]));
    const cells = [];
    for (let j = 0; j < GRID_2D; j++) {
      for (let i = 0; i < GRID_2D; i++) {
        cells.push([xr[0] + ((i + 0.5) * (xr[1] - xr[0])) / GRID_2D, yr[0] + ((j + 0.5) * (yr[1] - yr[0])) / GRID_2D]);
      }
    }
    const p = await predict(m, cells);
    const ringed = m.model === "svm" || m.n_support < m.n_train;
    return regionsPlot({
      xr, yr, nx: GRID_2D, ny: GRID_2D, predicted: p.predictions,
      classes: m.classes || p.classes || [], points: s.x, labels: s.y, support: ringed ? s.support : [],
    });
  }
  const p = await predict(m, s.x);
  if (m.task === "regression") return scatterPlot({ actual: s.y, predicted: p.predictions });
  return confusionTable({ classes: m.classes || p.classes || [], actual: s.y, predicted: p.predictions });
}

// ---- train from CSV ------------------------------------------------------------------

function parseOptionalJson(text, what) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${err.message}`);
  }
}

async function onTrain(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const field = (name) => form.elements.namedItem(name);
  const file = field("file").files[0];
  if (!file) {
    say("Choose a CSV file first.", "error");
    return;
  }
  let kernel;
  let params;
  try {
    kernel = parseOptionalJson(field("kernel_json").value, "Kernel JSON") ?? { type: field("kernel_type").value };
    params = parseOptionalJson(field("params").value, "Params JSON");
  } catch (err) {
    showError(err);
    return;
  }
  const name = field("name").value.trim() || file.name.replace(/\.csv$/i, "");
  const target = field("target").value.trim();
  const model = field("model").value;
  const submit = form.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    say(`Uploading ${file.name}…`);
    const query = new URLSearchParams({ name });
    if (target) query.set("target", target);
    const ds = await api("POST", `/datasets?${query}`, { body: await file.text(), type: "text/csv" });
    say(`Stored ${ds.n_rows} rows of ${ds.n_features ?? "?"} features; training ${model}…`);
    const body = { model, kernel, dataset: ds.id, name };
    if (params !== undefined) body.params = params;
    let m;
    try {
      m = await api("POST", "/models?wait=false", { json: body });
    } catch (err) {
      await api("DELETE", `/datasets/${encodeURIComponent(ds.id)}`).catch(() => {}); // the fit was refused: no orphan dataset
      throw err;
    }
    await refresh();
    while (BUSY.has(m.status)) {
      await sleep(400);
      m = await api("GET", modelUrl(m.id));
    }
    await refresh();
    if (m.status === "failed") showError(new ApiError(m.error?.status ?? 422, m.error || { title: "The fit failed" }));
    else say(`Trained ${name}.`, "ok");
    await showDetails(m.id);
  } catch (err) {
    showError(err);
  } finally {
    submit.disabled = false;
  }
}

// ---- start ---------------------------------------------------------------------------

function fillSelect(select, values, chosen) {
  select.replaceChildren(...values.map((v) => h("option", { value: v }, v)));
  select.value = chosen;
}

function start() {
  const form = $("train-form");
  fillSelect(form.elements.namedItem("model"), MODELS, "gaussian_process");
  fillSelect(form.elements.namedItem("kernel_type"), KERNELS, "rbf");
  form.addEventListener("submit", onTrain);
  $("token-form").addEventListener("submit", onToken);
  $("refresh").addEventListener("click", () => {
    say("");
    refresh();
  });
  refresh();
}

start();
