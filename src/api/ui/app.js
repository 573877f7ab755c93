// The page: the models, aliases, datasets and studies lists, a model's details with a plot of its
// fit, a study's trials plotted in order, and a form that uploads a CSV and trains on it. Everything that came from a user (names,
// metadata, labels, kernels) is rendered as text: no innerHTML anywhere.

import { api, ApiError, getToken, setToken } from "./api.js";
import { bandPlot, confusionTable, embeddingPlot, frontPlot, heatMap, paddedRange, progressPlot, regionsPlot, scatterPlot, sortedLabels } from "./plot.js";

// The model kinds and what each can do come from the server (GET /models/kinds): the page
// keeps no list of kinds, so a new kind needs no change here. Models without targets
// (`targets: false`, tasks novelty and transform) take every CSV column as a feature
// unless the form names a target column, which the fit leaves out and the server keeps
// only as labels of the plot sample (they colour a kernel PCA's embedding). "precomputed" is left out of KERNELS: its rows are
// kernel values, which a CSV of features is not; the kernel JSON field still takes it.
const DEFAULT_MODEL = "gaussian_process";
const KERNELS = [
  "rbf", "linear", "polynomial", "laplacian", "exponential", "matern", "rational_quadratic",
  "periodic", "sigmoid", "inverse_multiquadric", "spectrum", "subsequence", "set", "generative", "fisher",
];
const BUSY = new Set(["queued", "training"]);
const GRID_1D = 200;
const GRID_2D = 60;
const SEARCH_ROWS = 50; // candidates listed before "… N more"
const EIGENVALUES_SHOWN = 10; // a kernel PCA's eigenvalues listed before "… N more"
const LABEL_CLASSES_MAX = 10; // more distinct labels than colours: points drawn plain

const $ = (id) => document.getElementById(id);
const state = { models: [], selected: null, shownStatus: null, seq: 0, timer: null, kinds: null };

// The catalogue's rows by name, asked once (again after a failure, as after a token).
async function kinds() {
  if (!state.kinds) {
    state.kinds = api("GET", "/models/kinds")
      .then((k) => new Map(k.kinds.map((row) => [row.name, row])))
      .catch((err) => {
        state.kinds = null;
        throw err;
      });
  }
  return state.kinds;
}

// What a kind can do; a kind this server does not list can do nothing beyond predict.
async function can(model) {
  return (await kinds()).get(model) || {};
}

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
const stamp = (t) => String(t ?? "").replace("T", " ").replace(/\.\d+/, "");

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

// A search candidate's value, compact: numbers to 4 significant digits, kernels by their
// label, other objects as JSON; the full value goes in the cell's title when that differs.
function compact(v) {
  if (v === undefined) return "";
  if (typeof v === "number") return Number.isFinite(v) ? String(Number(v.toPrecision(4))) : String(v);
  if (v && typeof v === "object") return !Array.isArray(v) && typeof v.type === "string" ? kernelLabel(v) : JSON.stringify(v);
  return String(v);
}

const full = (v) => (v !== null && typeof v === "object" ? JSON.stringify(v) : String(v));
const score = (v) => (typeof v === "number" ? compact(v) : "—");
const isScore = (v) => typeof v === "number" && Number.isFinite(v);

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
      h("td", {}, stamp(d.created_at)),
    ));
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 5, class: "hint" }, "No datasets yet.")));
  $("datasets").tBodies[0].replaceChildren(...rows);
}

function renderStudies(studies) {
  const rows = studies.map((st) => {
    const tr = h("tr", { "data-testid": "study-row", "data-id": st.id, tabindex: 0, class: st.id === state.selected ? "selected" : null },
      h("td", { class: "name", title: st.id }, st.name || String(st.id).slice(0, 8)),
      h("td", {}, st.objectives ? st.objectives.map((o) => `${o.name}: ${o.direction}`).join(", ") : st.direction),
      h("td", { class: "num" }, Array.isArray(st.trials) ? st.trials.length : 0),
      h("td", { class: "num" }, st.n_complete ?? 0),
      h("td", { class: "num" }, st.best ? compact(st.best.value) : st.pareto ? `front of ${st.pareto.length}` : "—"),
    );
    tr.addEventListener("click", () => showStudy(st.id));
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        showStudy(st.id);
      }
    });
    return tr;
  });
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 5, class: "hint" }, "No studies yet.")));
  $("studies").tBodies[0].replaceChildren(...rows);
}

// The rows of the models and studies tables, and the aliases' model links, of `id` marked.
function markSelected(id) {
  const marked = [...$("models").tBodies[0].rows, ...$("studies").tBodies[0].rows, ...$("aliases").querySelectorAll(".model-link")];
  for (const e of marked) e.classList.toggle("selected", e.dataset.id === id);
}

// ---- aliases -------------------------------------------------------------------------

// GET /aliases, never thrown: {aliases} or {err}. Its errors stay in the aliases table:
// a server older than aliases answers 404 (the section stays hidden), a token the server
// refuses for it 401 or 403; a token refused everywhere is asked for by the other lists.
function fetchAliases() {
  return api("GET", "/aliases").then(
    (a) => ({ aliases: a && Array.isArray(a.aliases) ? a.aliases : [] }),
    (err) => ({ err }),
  );
}

// A weight as a percentage: 90 -> "90%", 12.5 -> "12.5%".
const percent = (w) => `${typeof w === "number" ? String(Number(w.toFixed(2))) : String(w ?? "?")}%`;

// A model an alias routes to or shadows: its id's short form and its name when the models
// list has it; a click selects it as its row in the models table does.
function modelLink(id) {
  const m = state.models.find((x) => x.id === id);
  const b = h("button", { type: "button", class: id === state.selected ? "model-link selected" : "model-link", "data-id": id, title: id },
    h("code", {}, String(id).slice(0, 8)), m && m.name ? ` ${m.name}` : null);
  b.addEventListener("click", () => showDetails(id));
  return b;
}

function renderAliases({ aliases, err }) {
  const block = $("aliases-block");
  if (err && err.status === 404) {
    block.classList.add("hidden"); // a server without aliases
    return;
  }
  block.classList.remove("hidden");
  let rows;
  if (err) {
    const detail = err.problem && err.problem.detail ? `: ${err.problem.detail}` : "";
    const text = err.status === 401 || err.status === 403
      ? `This token may not list aliases (${err.status}${detail}).`
      : `The aliases could not be listed: ${(err.problem && err.problem.title) || err.message}${err.status ? ` (${err.status})` : ""}${detail}.`;
    rows = [h("tr", {}, h("td", { colspan: 5, class: "hint", "data-testid": "aliases-error" }, text))];
  } else {
    rows = aliases.map((a) => h("tr", { "data-testid": "alias-row", "data-name": a.name },
      h("td", { class: "name" }, a.name),
      h("td", { class: "num" }, a.generation ?? ""),
      h("td", {}, h("ul", { class: "routes" }, ...(Array.isArray(a.routes) ? a.routes : []).map((r) =>
        h("li", { "data-testid": "alias-route", "data-model": r.model, "data-weight": r.weight },
          modelLink(r.model), " ", h("span", { class: "weight" }, percent(r.weight)))))),
      h("td", { "data-testid": "alias-shadow" }, a.shadow ? modelLink(a.shadow) : h("span", { class: "hint" }, "—")),
      h("td", { title: a.updated_at ?? null }, stamp(a.updated_at), a.updated_by ? h("span", { class: "by" }, `by ${a.updated_by}`) : null),
    ));
    if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 5, class: "hint" }, "No aliases yet.")));
  }
  $("aliases").tBodies[0].replaceChildren(...rows);
}

// A study: its definition, its values and best so far against trial number, its trials.
async function showStudy(id) {
  const seq = ++state.seq;
  state.selected = id;
  markSelected(id);
  try {
    const st = await api("GET", `/studies/${encodeURIComponent(id)}`);
    if (seq !== state.seq) return;
    const trials = Array.isArray(st.trials) ? st.trials : [];
    const facts = h("dl", { class: "facts" });
    const fact = (k, v) => v !== null && v !== undefined && v !== "" && facts.append(h("dt", {}, k), h("dd", {}, v));
    fact("id", st.id);
    const objectives = st.objectives ?? null;
    fact(objectives ? "objectives" : "direction", objectives ? objectives.map((o) => `${o.name} (${o.direction})`).join(", ") : st.direction);
    const constraints = Array.isArray(st.constraints) ? st.constraints : [];
    if (constraints.length) fact("constraints", constraints.map((c) => `${c.name} ≤ ${compact(c.max)}`).join(", "));
    if (st.pruner && st.pruner.type !== "none") fact("pruner", Object.entries(st.pruner).map(([k, v]) => (k === "type" ? v : `${k} ${v}`)).join(", "));
    fact("trials", `${trials.length} (${st.n_complete ?? 0} complete${st.n_pruned ? `, ${st.n_pruned} pruned` : ""})`);
    fact("initial", st.initial);
    fact("seed", st.seed);
    if (st.best) fact("best", `${compact(st.best.value)} at trial ${st.best.id}`);
    if (objectives) {
      fact("Pareto front", `${(st.pareto ?? []).length} trials`);
      fact("hypervolume", `${compact(st.hypervolume)}${st.reference ? ` against ${objectives.map((o) => compact(st.reference[o.name])).join(", ")}${st.reference_derived ? " (derived)" : ""}` : ""}`);
    }
    fact("created", st.created_at);
    let plot;
    if (objectives && objectives.length === 2) {
      // Two objectives: the trials in objective space, and the front.
      const names = objectives.map((o) => o.name);
      const pair = (t) => names.map((n) => t.results?.[n]);
      const complete = trials.filter((t) => t.state === "complete");
      plot = complete.length
        ? frontPlot({
          points: complete.filter((t) => t.feasible !== false).map(pair),
          infeasible: complete.filter((t) => t.feasible === false).map(pair),
          front: (st.pareto ?? []).map(pair),
          names,
          minimize: objectives.map((o) => o.direction !== "maximize"),
          reference: st.reference ? names.map((n) => st.reference[n]) : null,
        })
        : h("p", { class: "hint" }, "No trial told yet.");
    } else if (objectives) {
      plot = h("p", { class: "hint" }, `${objectives.length} objectives: the front is listed below (trials marked ★).`);
    } else {
      // Complete feasible trials by id; failed, pruned and infeasible ones as gaps on the
      // axis; pending ones not yet.
      const done = trials.filter((t) => t.state !== "pending");
      const values = done.map((t) => (t.state === "complete" && t.feasible !== false ? t.value : null));
      plot = done.length
        ? progressPlot({ values, minimize: st.direction !== "maximize", xLabel: "trial (told, in order)", yLabel: "value" })
        : h("p", { class: "hint" }, "No trial told yet.");
    }
    const names = Object.keys(st.space ?? {}).sort();
    const resultNames = [...(objectives ?? []).map((o) => o.name), ...constraints.map((c) => c.name)];
    const onFront = new Set((st.pareto ?? []).map((t) => t.id));
    const head = h("tr", {}, h("th", { class: "num" }, "trial"), h("th", {}, "state"),
      ...(objectives ? [] : [h("th", { class: "num" }, "value")]),
      ...resultNames.map((n) => h("th", { class: "num" }, n)),
      ...names.map((n) => h("th", {}, n)));
    const rows = trials.map((t) => h("tr", { "data-testid": "trial-row", "data-id": t.id, class: (st.best && st.best.id === t.id) || onFront.has(t.id) ? "best" : null },
      h("td", { class: "num" }, onFront.has(t.id) ? `★ ${t.id}` : t.id),
      h("td", {}, t.feasible === false ? "infeasible" : t.state),
      ...(objectives ? [] : [h("td", { class: "num" }, t.value !== undefined ? compact(t.value) : "—")]),
      ...resultNames.map((n) => h("td", { class: "num" }, t.results && n in t.results ? compact(t.results[n]) : "—")),
      ...names.map((n) => h("td", { class: "value" }, compact(t.values?.[n]))),
    ));
    $("details").replaceChildren(
      h("h2", {}, st.name || `study ${String(st.id).slice(0, 8)}`),
      facts,
      h("div", { class: "plot-holder", "data-testid": "study-plot" }, plot),
      h("div", { class: "table-scroll" }, h("table", { class: "grid", "data-testid": "trials-table" }, h("thead", {}, head), h("tbody", {}, ...rows))),
      block("space", st.space ?? {}),
    );
  } catch (err) {
    if (seq === state.seq) showError(err);
  }
}

const byNewest = (a, b) => String(b.created_at ?? "").localeCompare(String(a.created_at ?? ""));

async function refresh() {
  clearTimeout(state.timer);
  state.timer = null;
  try {
    const aliases = fetchAliases(); // alongside the lists, its failures its own
    const [m, d, st] = await Promise.all([api("GET", "/models"), api("GET", "/datasets"), api("GET", "/studies"), fillModels()]);
    state.models = m.models.slice().sort(byNewest);
    renderModels();
    renderAliases(await aliases); // after the models: its routes name them
    renderDatasets(d.datasets.slice().sort(byNewest));
    renderStudies(st.studies.slice().sort(byNewest));
    const current = state.models.find((x) => x.id === state.selected);
    if (current && (current.status !== state.shownStatus || BUSY.has(current.status))) showDetails(current.id);
    if (state.models.some((x) => BUSY.has(x.status))) state.timer = setTimeout(refresh, 1000);
  } catch (err) {
    showError(err);
  }
}

// ---- details -------------------------------------------------------------------------

// A running fit's progress in a line: "search: 12 / 60 fold fits", or its phase.
function progressLine(p) {
  if (!p || typeof p !== "object") return null;
  if (p.phase === "search") return `search: ${p.iteration ?? 0} / ${p.total ?? "?"} fold fits`;
  return p.phase ? `${p.phase}${p.iteration ? `: iteration ${p.iteration}` : ""}` : null;
}

// The candidates' indexes by rank: higher mean first, no mean last, earlier first among
// equals (the contract's tie rule). Halving picks its best among the candidates of its last
// round, whose means are on the most rows: later rounds rank first there.
function searchOrder(s) {
  const c = s.candidates;
  const halving = s.method === "halving";
  return c.map((_, i) => i).sort((a, b) => {
    if (halving && (c[a].round ?? 0) !== (c[b].round ?? 0)) return (c[b].round ?? 0) - (c[a].round ?? 0);
    const ma = c[a].mean_score;
    const mb = c[b].mean_score;
    if (isScore(ma) !== isScore(mb)) return isScore(ma) ? -1 : 1;
    if (isScore(ma) && ma !== mb) return mb - ma;
    return a - b;
  });
}

// A pointer as text that may wrap before each "/": "/kernel", <wbr>, "/gamma".
const pointerBreaks = (p) => p.split(/(?=\/)/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));

// Every pointer the candidates set, in sorted order.
const searchPointers = (s) => [...new Set(s.candidates.flatMap((c) => Object.keys(c.values ?? {})))].sort();

// A heat map's cells when the search has two pointers, numeric in every candidate, whose
// values form a full grid (every pair of their distinct values exactly once); else null.
function searchGrid(s, pointers) {
  if (pointers.length !== 2 || s.candidates.length < 2) return null;
  const [px, py] = pointers;
  const pairs = new Set();
  for (const c of s.candidates) {
    const x = c.values?.[px];
    const y = c.values?.[py];
    if (!Number.isFinite(x) || !Number.isFinite(y)) return null;
    pairs.add(`${x} ${y}`);
  }
  const xs = new Set(s.candidates.map((c) => c.values[px]));
  const ys = new Set(s.candidates.map((c) => c.values[py]));
  if (pairs.size !== s.candidates.length || xs.size * ys.size !== pairs.size) return null;
  const last = Math.max(...s.candidates.map((c) => c.round ?? 0));
  return s.candidates.map((c, i) => ({
    index: i,
    x: c.values[px],
    y: c.values[py],
    mean: isScore(c.mean_score) ? c.mean_score : null,
    best: i === s.best_index,
    faded: s.method === "halving" && (c.round ?? 0) < last,
    label: `${px} = ${compact(c.values[px])}, ${py} = ${compact(c.values[py])}: ${
      isScore(c.mean_score) ? `mean ${s.scoring} ${score(c.mean_score)} ± ${score(c.std_score)}` : "failed"}${
      s.method === "halving" ? ` (round ${c.round ?? 0})` : ""}`,
  }));
}

// training.search: a summary line, the heat map when the candidates form a 2-D grid, and
// the candidates by rank (the best row marked), the first SEARCH_ROWS of them.
function searchSection(s) {
  const cands = Array.isArray(s.candidates) ? s.candidates : [];
  const pointers = searchPointers({ candidates: cands });
  const halving = s.method === "halving";
  const folds = Math.max(0, ...cands.map((c) => (Array.isArray(c.fold_scores) ? c.fold_scores.length : 0)));
  const cv = s.cv === "loo" ? "leave-one-out" : `${s.cv}-fold`;
  const summary = h("p", { class: "search-summary", "data-testid": "search-summary" },
    `${s.method} search, ${cv} cross-validation scored by ${s.scoring}: ${s.n_candidates ?? cands.length} candidates, `
    + `${s.n_fits} fold fits; best mean ${s.scoring} ${score(s.best_score)} (candidate ${s.best_index}).`);
  const cells = searchGrid({ ...s, candidates: cands }, pointers);
  const plot = cells ? heatMap({ xLabel: pointers[0], yLabel: pointers[1], scoreLabel: String(s.scoring), cells }) : null;
  // Random and bayes searches: the mean scores in evaluation order and the best so far.
  const ordered = s.method === "random" || s.method === "bayes"
    ? progressPlot({ values: cands.map((c) => (isScore(c.mean_score) ? c.mean_score : null)), xLabel: "candidate (evaluation order)", yLabel: `mean ${s.scoring}`, title: "mean scores in evaluation order, and the best so far" })
    : null;
  const last = Math.max(0, ...cands.map((c) => c.round ?? 0));
  const head = h("tr", {},
    h("th", { class: "num" }, "rank"),
    ...pointers.map((p) => h("th", { class: "pointer", title: p }, ...pointerBreaks(p))),
    h("th", { class: "num" }, `mean ${s.scoring} ± sd`),
    ...Array.from({ length: folds }, (_, f) => h("th", { class: "num" }, s.cv === "loo" && folds === 1 ? "pooled LOO" : `fold ${f + 1}`)),
    h("th", { class: "num" }, "fit ms"),
    halving ? h("th", { class: "num" }, "round") : null,
  );
  const order = searchOrder({ ...s, candidates: cands });
  const rows = order.slice(0, SEARCH_ROWS).map((i, r) => {
    const c = cands[i];
    const cls = [i === s.best_index ? "best" : null, halving && (c.round ?? 0) < last ? "eliminated" : null].filter(Boolean).join(" ");
    const fs = Array.isArray(c.fold_scores) ? c.fold_scores : [];
    return h("tr", { "data-testid": "search-row", "data-index": i, class: cls || null },
      h("td", { class: "num" }, r + 1),
      ...pointers.map((p) => {
        const v = c.values?.[p];
        return h("td", { class: "value", "data-pointer": p, title: v !== undefined && full(v) !== compact(v) ? full(v) : null }, compact(v));
      }),
      h("td", { class: "num mean" }, isScore(c.mean_score) ? `${score(c.mean_score)} ± ${score(c.std_score)}` : "—"),
      ...Array.from({ length: folds }, (_, f) => h("td", { class: "num fold", title: isScore(fs[f]) ? null : "failed" }, score(fs[f]))),
      h("td", { class: "num" }, formatMs(c.fit_ms)),
      halving ? h("td", { class: "num" }, c.round ?? "") : null,
    );
  });
  const table = h("table", { class: "grid search-table", "data-testid": "search-table" }, h("thead", {}, head), h("tbody", {}, ...rows));
  return h("section", { class: "search", "data-testid": "search" },
    h("h3", {}, "Search"),
    summary,
    ...(plot ? [h("div", { class: "plot-holder" }, plot)] : []),
    ...(ordered ? [h("div", { class: "plot-holder", "data-testid": "search-order" }, ordered)] : []),
    h("div", { class: "table-scroll" }, table),
    ...(order.length > SEARCH_ROWS ? [h("p", { class: "hint", "data-testid": "search-more" }, `… ${order.length - SEARCH_ROWS} more`)] : []),
  );
}

function block(title, value) {
  return h("details", { open: "" }, h("summary", {}, title), h("pre", {}, typeof value === "string" ? value : json(value)));
}

async function showDetails(id) {
  const seq = ++state.seq;
  state.selected = id;
  markSelected(id);
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
    if (BUSY.has(m.status)) fact("progress", progressLine(m.progress));
    fact("kernel", kernelLabel(m.kernel));
    fact("n_train", m.n_train);
    fact("version", m.version);
    fact("n_features", m.n_features ?? (m.status === "ready" ? "strings" : null));
    fact("n_support", m.n_support);
    if (Array.isArray(m.classes)) fact("classes", m.classes.map(String).join(", "));
    if (m.training && m.training.n_components !== undefined) fact("n_components", m.training.n_components);
    if (m.training && Array.isArray(m.training.eigenvalues)) {
      const ev = m.training.eigenvalues;
      facts.append(h("dt", {}, "eigenvalues"), h("dd", { "data-testid": "eigenvalues", title: ev.map(String).join(", ") },
        ev.slice(0, EIGENVALUES_SHOWN).map(compact).join(", ") + (ev.length > EIGENVALUES_SHOWN ? `, … ${ev.length - EIGENVALUES_SHOWN} more` : "")));
    }
    fact("created", m.created_at);
    const plot = h("div", { class: "plot-holder" });
    const { search, ...training } = m.training ?? {};
    pane.replaceChildren(
      h("h2", {}, displayName(m)),
      facts,
      plot,
      ...(m.error ? [h("div", { class: "message error" }, ...problemNodes(m.error, m.error.status))] : []),
      ...(search && typeof search === "object" ? [searchSection(search)] : []),
      ...(m.progress ? [block("progress", m.progress)] : []),
      block("params", m.params ?? {}),
      block("fitted kernel", m.kernel ?? null),
      block("training report", training),
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

async function predict(m, x, variance = false) {
  const body = { x };
  if ((await can(m.model)).posterior) body.variance = variance;
  return api("POST", modelUrl(m.id, "/predict"), { json: body });
}

const hint = (text) => h("p", { class: "hint" }, text);
const numericRows = (x) => x.every((r) => Array.isArray(r) && r.every((v) => typeof v === "number"));

// A 1-D grid over the padded range of xs.
function grid1d(xs) {
  const [lo, hi] = paddedRange(xs);
  return Array.from({ length: GRID_1D }, (_, i) => lo + ((hi - lo) * i) / (GRID_1D - 1));
}

// The centres of a GRID_2D x GRID_2D grid over the padded ranges of 2-D points, row by row.
function grid2d(points) {
  const xr = paddedRange(points.map((r) => r[0]));
  const yr = paddedRange(points.map((r) => r[1]));
  const cells = [];
  for (let j = 0; j < GRID_2D; j++) {
    for (let i = 0; i < GRID_2D; i++) {
      cells.push([xr[0] + ((i + 0.5) * (xr[1] - xr[0])) / GRID_2D, yr[0] + ((j + 0.5) * (yr[1] - yr[0])) / GRID_2D]);
    }
  }
  return { xr, yr, cells };
}

// A multi-output model (a 2-D y) answers a list of t numbers per row: the page plots
// output 0 (the sample's y is output 0 too) and says so.
function firstOutput(p) {
  const multi = Array.isArray(p.predictions) && Array.isArray(p.predictions[0]);
  if (!multi) return { p, t: 1 };
  const col = (v) => (Array.isArray(v) ? v.map((r) => r[0]) : v);
  return { p: { ...p, predictions: col(p.predictions), std: col(p.std) }, t: p.predictions[0].length };
}

function withOutputNote(t, plot) {
  const note = hint(`This model has ${t} outputs; the plot shows output 0.`);
  note.classList.add("outputs-note");
  const wrap = h("div", {});
  wrap.append(note, plot);
  return wrap;
}

// The plot that fits the model's kind, from its /sample and one batch predict (or
// transform).
async function drawFit(m) {
  const drawn = await drawFitOf(m);
  return drawn.t > 1 ? withOutputNote(drawn.t, drawn.plot) : drawn.plot;
}

async function drawFitOf(m) {
  const one = (plot) => ({ plot, t: 1 });
  const s = await api("GET", modelUrl(m.id, "/sample"));
  if (!s.x.length) return one(hint("No training rows to plot."));
  if (s.x.some((r) => r === null)) return one(hint("The training rows of a precomputed kernel are kernel values, not points: nothing to plot."));
  if (m.task === "transform") return one(await drawEmbedding(m, s));
  if (m.task === "novelty") return one(await drawNovelty(m, s));
  if (m.task === "regression" && m.n_features === 1) {
    const xs = s.x.map((r) => r[0]);
    const grid = grid1d(xs);
    const gp = Boolean((await can(m.model)).posterior);
    const { p, t } = firstOutput(await predict(m, grid.map((v) => [v]), gp));
    // A nystrom or variational fit predicts from its inducing points: marked on the axis.
    const inducing = m.training && m.training.inducing_points ? (s.support || []).map((r) => r[0]) : [];
    return { t, plot: bandPlot({ xs, ys: s.y, grid, mean: p.predictions, std: gp && Array.isArray(p.std) ? p.std : null, inducing }) };
  }
  if (m.task === "regression") {
    const { p, t } = firstOutput(await predict(m, s.x));
    return { t, plot: scatterPlot({ actual: s.y, predicted: p.predictions }) };
  }
  return one(await drawClassifier(m, s));
}

async function drawClassifier(m, s) {
  if (m.task === "classification" && m.n_features === 2) {
    const { xr, yr, cells } = grid2d(s.x);
    const p = await predict(m, cells);
    const ringed = m.n_support < m.n_train;
    // What is ringed: the points a fit keeps when they are fewer than its rows - an exact
    // SVM's support vectors, or the inducing points of a nystrom or variational fit
    // (which report training.inducing_points).
    const supportName = m.training && m.training.inducing_points ? "inducing points" : "support vectors";
    return regionsPlot({
      xr, yr, nx: GRID_2D, ny: GRID_2D, predicted: p.predictions,
      classes: m.classes || p.classes || [], points: s.x, labels: s.y, support: ringed ? s.support : [], supportName,
    });
  }
  const p = await predict(m, s.x);
  return confusionTable({ classes: m.classes || p.classes || [], actual: s.y, predicted: p.predictions });
}

// A one-class SVM: with 2 features, inlier (1) and outlier (-1) regions over a grid, the
// training rows coloured by their own prediction and the support vectors ringed; with 1,
// its decision function along the axis (0 the boundary); else the counts in a line.
async function drawNovelty(m, s) {
  const classes = [1, -1];
  const name = (c) => (Number(c) === 1 ? "inlier (1)" : "outlier (-1)");
  if (m.n_features === 2 && numericRows(s.x)) {
    const { xr, yr, cells } = grid2d(s.x);
    const p = await predict(m, [...cells, ...s.x]);
    return regionsPlot({
      xr, yr, nx: GRID_2D, ny: GRID_2D, predicted: p.predictions.slice(0, cells.length), classes, name,
      points: s.x, labels: p.predictions.slice(cells.length), support: s.support,
    });
  }
  if (m.n_features === 1 && numericRows(s.x)) {
    const xs = s.x.map((r) => r[0]);
    const grid = grid1d(xs);
    const p = await predict(m, [...grid.map((v) => [v]), ...s.x]);
    const df = p.decision_function;
    return bandPlot({
      xs, ys: df.slice(grid.length), grid, mean: df.slice(0, grid.length), std: null,
      yLabel: "decision function", meanLabel: "decision function (< 0: outlier)", title: "decision function over x", baseline: 0,
    });
  }
  const p = await predict(m, s.x);
  const inliers = p.predictions.filter((v) => Number(v) === 1).length;
  return h("p", { "data-testid": "plot", "data-kind": "novelty" },
    `${inliers} of the ${s.x.length} sampled training rows are inliers (1), ${s.x.length - inliers} outliers (-1).`);
}

// A kernel PCA with 2 or more components: its training sample's first two components,
// coloured by the labels of the dataset it was fitted on where they can be had.
async function drawEmbedding(m, s) {
  const ev = Array.isArray(m.training?.eigenvalues) ? m.training.eigenvalues : [];
  const k = m.training?.n_components ?? ev.length;
  if (!(k >= 2)) return hint(`${k} component${k === 1 ? "" : "s"}: no plane of components to plot.`);
  const [t, known] = await Promise.all([
    api("POST", modelUrl(m.id, "/transform"), { json: { x: s.x } }),
    sampleLabels(m, s),
  ]);
  const axis = (i) => `component ${i + 1}${typeof ev[i] === "number" ? ` (eigenvalue ${compact(ev[i])})` : ""}`;
  let labels = known.labels;
  let note = known.note;
  if (labels) {
    const distinct = sortedLabels(labels.filter((l) => l !== null && l !== undefined)).length;
    if (distinct > LABEL_CLASSES_MAX) {
      note = `Not coloured: \`${known.column}\` holds ${distinct} distinct values, more than ${LABEL_CLASSES_MAX} colours.`;
      labels = null;
    } else if (distinct === 0) {
      labels = null;
    }
  }
  const svg = embeddingPlot({ points: t.embedding.map((r) => [r[0], r[1]]), labels, xLabel: axis(0), yLabel: axis(1) });
  if (labels) note = `Coloured by \`${known.column}\`${labels.some((l) => l === null || l === undefined) ? " (rows not found in it drawn plain)" : ""}.`;
  return note ? h("div", {}, svg, h("p", { class: "hint", "data-testid": "plot-note" }, note)) : svg;
}

// The sample's labels for a model without targets: the target column of the dataset it
// was fitted on (the server keeps it with the sample, unused by the fit), or none.
async function sampleLabels(m, s) {
  if (Array.isArray(s.y) && s.y.some((v) => v !== null && v !== undefined)) {
    const ds = m.dataset ? await api("GET", `/datasets/${encodeURIComponent(m.dataset)}`).catch(() => null) : null;
    return { labels: s.y, column: (ds && ds.target) || "target" };
  }
  return { note: "Not coloured: fitted without a label column (name its column in \u201cTarget column\u201d when training here)." };
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

// A CSV of numbers (a header row, then rows) as JSON rows, every column a feature. Quoted
// fields are unquoted; a cell that is not a finite number stops with its line and column.
function csvRows(text) {
  const lines = text.split(/\r?\n/);
  const cells = (line) => line.split(",").map((c) => c.trim().replace(/^"(.*)"$/, "$1").replaceAll('""', '"'));
  const header = cells(lines[0] ?? "");
  const rows = [];
  for (let i = 1; i < lines.length; i++) {
    if (!lines[i].trim()) continue;
    const row = cells(lines[i]).map((c, j) => {
      const v = c === "" ? NaN : Number(c);
      if (!Number.isFinite(v)) throw new Error(`line ${i + 1}, column \u201c${header[j] ?? j + 1}\u201d: \u201c${c}\u201d is not a number`);
      return v;
    });
    if (row.length !== header.length) throw new Error(`line ${i + 1} has ${row.length} cells; the header has ${header.length}`);
    rows.push(row);
  }
  if (!rows.length) throw new Error("the CSV file holds no rows");
  return rows;
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
    const body = { model, kernel, name };
    if (params !== undefined) body.params = params;
    let ds = null;
    if ((await can(model)).targets === false && !target) {
      // A dataset always has a target column (the last by default), so a model without
      // targets and no named label column gets every column as rows in the body.
      body.x = csvRows(await file.text());
      say(`Read ${body.x.length} rows of ${body.x[0].length} features; training ${model}…`);
    } else {
      say(`Uploading ${file.name}…`);
      const query = new URLSearchParams({ name });
      if (target) query.set("target", target);
      ds = await api("POST", `/datasets?${query}`, { body: await file.text(), type: "text/csv" });
      say(`Stored ${ds.n_rows} rows of ${ds.n_features ?? "?"} features; training ${model}…`);
      body.dataset = ds.id;
    }
    let m;
    try {
      m = await api("POST", "/models?wait=false", { json: body });
    } catch (err) {
      if (ds) await api("DELETE", `/datasets/${encodeURIComponent(ds.id)}`).catch(() => {}); // the fit was refused: no orphan dataset
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

// The form's model choices, from the catalogue (once it answers: with keys, after a token).
async function fillModels() {
  const select = $("train-form").elements.namedItem("model");
  if (select.options.length) return;
  fillSelect(select, [...(await kinds()).keys()], DEFAULT_MODEL);
}

function start() {
  const form = $("train-form");
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
