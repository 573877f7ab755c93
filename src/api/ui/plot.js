// Plots of a fitted model, drawn as hand-written SVG. The plots (a 1-D fit with its band,
// 2-D decision regions, predicted against actual, a kernel PCA's embedding, a search's heat
// map) need only axes, paths, rectangles and circles, which the few helpers below draw; a
// charting library would be far larger than this file, and the page's Content-Security-
// Policy loads scripts from this origin only. Colours come from classes in style.css (no
// style attributes: the CSP forbids them); every label is set with textContent, never
// parsed as markup.

const NS = "http://www.w3.org/2000/svg";
const W = 640;
const H = 420;
const M = { left: 58, right: 18, top: 34, bottom: 42 };

// An SVG element with attributes, appended to parent when given.
export function svgEl(name, attrs = {}, parent = null) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

function text(parent, x, y, str, cls) {
  const t = svgEl("text", { x, y, class: cls }, parent);
  t.textContent = str;
  return t;
}

// [lo, hi] of finite values, widened by frac of the span on each side (1 when the span is 0).
export function paddedRange(values, frac = 0.1) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (Number.isFinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (lo === Infinity) return [-1, 1];
  const pad = hi > lo ? (hi - lo) * frac : 1;
  return [lo - pad, hi + pad];
}

function linear(d0, d1, r0, r1) {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  return (v) => r0 + (v - d0) * k;
}

// About `count` round tick values within [lo, hi].
function ticks(lo, hi, count = 6) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  let step = 10 ** Math.floor(Math.log10(span / count));
  const err = span / count / step;
  if (err >= 5) step *= 10;
  else if (err >= 2) step *= 5;
  else if (err >= 1.5) step *= 2;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

const fmt = (v) => String(Number(v.toPrecision(4)));
const f2 = (v) => v.toFixed(2);

// The root <svg> with axes; returns it and the data-to-pixel scales. Ticks are round values
// unless xTicks/yTicks give [position, label] pairs (a null label: a tick mark alone).
function frame(kind, [x0, x1], [y0, y1], xLabel, yLabel, title, { xTicks, yTicks } = {}) {
  const svg = svgEl("svg", {
    viewBox: `0 0 ${W} ${H}`,
    class: "plot",
    role: "img",
    "data-testid": "plot",
    "data-kind": kind,
  });
  svgEl("title", {}, svg).textContent = title;
  const sx = linear(x0, x1, M.left, W - M.right);
  const sy = linear(y0, y1, H - M.bottom, M.top);
  const axes = svgEl("g", { class: "axes" }, svg);
  svgEl("rect", { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom, class: "frame" }, axes);
  const round = (lo, hi) => ticks(lo, hi).map((t) => [t, fmt(t)]);
  for (const [t, label] of xTicks ?? round(x0, x1)) {
    svgEl("line", { x1: f2(sx(t)), x2: f2(sx(t)), y1: H - M.bottom, y2: H - M.bottom + 5 }, axes);
    if (label !== null) text(axes, f2(sx(t)), H - M.bottom + 18, label, "tick x");
  }
  for (const [t, label] of yTicks ?? round(y0, y1)) {
    svgEl("line", { x1: M.left - 5, x2: M.left, y1: f2(sy(t)), y2: f2(sy(t)) }, axes);
    if (label !== null) text(axes, M.left - 8, f2(sy(t)), label, "tick y");
  }
  text(axes, (M.left + W - M.right) / 2, H - 6, xLabel, "label x");
  text(axes, 14, (M.top + H - M.bottom) / 2, yLabel, "label y").setAttribute("transform", `rotate(-90 14 ${(M.top + H - M.bottom) / 2})`);
  return { svg, sx, sy };
}

// One row of swatches and labels above the plot area.
function legend(svg, entries) {
  const g = svgEl("g", { class: "legend", transform: `translate(${M.left} 8)` }, svg);
  let x = 0;
  for (const [label, cls] of entries) {
    const short = label.length > 24 ? label.slice(0, 23) + "…" : label;
    svgEl("rect", { x, y: 3, width: 12, height: 10, class: `swatch ${cls}` }, g);
    const t = text(g, x + 17, 12, short, "legend-text");
    svgEl("title", {}, t).textContent = label;
    x += 30 + 6.5 * short.length;
    if (x > W - M.left - M.right - 60) break;
  }
}

function pathOf(xs, ys, sx, sy) {
  return xs.map((x, i) => `${i ? "L" : "M"}${f2(sx(x))},${f2(sy(ys[i]))}`).join("");
}

// 1-D regression: training points, the mean over a grid and, when std is given, a ±2 sd band;
// `inducing` (x positions: a nystrom or variational fit's inducing points) are marked along
// the bottom. A one-class SVM draws its decision function the same way: yLabel and
// meanLabel name the curve, and `baseline` (a y value) draws a dashed line there (its boundary, 0).
export function bandPlot({ xs, ys, grid, mean, std, inducing = [], yLabel = "y", meanLabel = "mean", title = "fit over x", baseline = null }) {
  const lower = std ? mean.map((m, i) => m - 2 * std[i]) : mean;
  const upper = std ? mean.map((m, i) => m + 2 * std[i]) : mean;
  const yr = paddedRange([...ys, ...lower, ...upper, ...(baseline === null ? [] : [baseline])], 0.05);
  const { svg, sx, sy } = frame("band", [grid[0], grid[grid.length - 1]], yr, "x", yLabel, title);
  if (std) {
    const back = grid.slice().reverse();
    const d = pathOf(grid, upper, sx, sy) + pathOf(back, lower.slice().reverse(), sx, sy).replace(/^M/, "L") + "Z";
    svgEl("path", { d, class: "band", "data-testid": "band" }, svg);
  }
  if (baseline !== null) {
    const y = f2(sy(baseline));
    svgEl("line", { x1: f2(sx(grid[0])), y1: y, x2: f2(sx(grid[grid.length - 1])), y2: y, class: "diagonal baseline" }, svg);
  }
  svgEl("path", { d: pathOf(grid, mean, sx, sy), class: "mean" }, svg);
  xs.forEach((x, i) => svgEl("circle", { cx: f2(sx(x)), cy: f2(sy(ys[i])), r: 3.5, class: "point" }, svg));
  const bottom = sy(yr[0]);
  for (const z of inducing.filter((v) => v >= grid[0] && v <= grid[grid.length - 1])) {
    const x = sx(z);
    svgEl("path", { d: `M${f2(x)},${f2(bottom - 9)}L${f2(x - 4)},${f2(bottom - 1)}L${f2(x + 4)},${f2(bottom - 1)}Z`, class: "inducing" }, svg);
  }
  legend(svg, [
    ["training points", "point"], [meanLabel, "mean"], ...(std ? [["mean ± 2 sd", "band"]] : []),
    ...(inducing.length ? [["inducing points", "inducing"]] : []),
  ]);
  return svg;
}

// Class label -> colour class (cls-0 ... cls-9, cycling), in the order of `classes`.
export function classColours(classes) {
  const map = new Map();
  classes.forEach((c, i) => map.set(String(c), `cls-${i % 10}`));
  return (label) => map.get(String(label)) || "cls-x";
}

// 2-D classification: the predicted class over an nx x ny grid of cells, training points
// coloured by label, the points the model keeps ringed. `name` gives a class its legend
// text (a one-class SVM's 1 and -1: "inlier", "outlier").
export function regionsPlot({ xr, yr, nx, ny, predicted, classes, points, labels, support, supportName = "support", name = String }) {
  const { svg, sx, sy } = frame("regions", xr, yr, "x₁", "x₂", "decision regions");
  const colour = classColours(classes);
  const cw = (xr[1] - xr[0]) / nx;
  const ch = (yr[1] - yr[0]) / ny;
  const cells = svgEl("g", { class: "regions" }, svg);
  for (let j = 0; j < ny; j++) {
    for (let i = 0; i < nx; i++) {
      const label = predicted[j * nx + i];
      const x = sx(xr[0] + i * cw);
      const y = sy(yr[0] + (j + 1) * ch);
      svgEl("rect", {
        x: f2(x), y: f2(y), width: f2(sx(xr[0] + (i + 1) * cw) - x + 0.3), height: f2(sy(yr[0] + j * ch) - y + 0.3),
        class: `region ${colour(label)}`, "data-class": String(label),
      }, cells);
    }
  }
  for (const [a, b] of support || []) svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(b)), r: 7, class: "support" }, svg);
  points.forEach(([a, b], i) => {
    svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(b)), r: 4, class: `point ${colour(labels[i])}`, "data-class": String(labels[i]) }, svg);
  });
  legend(svg, [...classes.map((c) => [name(c), colour(c)]), ...(support && support.length ? [[supportName, "support"]] : [])]);
  return svg;
}

// Labels in the contract's class order: numbers ascending, else strings by code point.
export function sortedLabels(labels) {
  const distinct = [...new Map(labels.map((l) => [String(l), l])).values()];
  const numeric = distinct.every((l) => typeof l === "number");
  return distinct.sort((a, b) => (numeric ? a - b : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0));
}

// Points in the plane (a kernel PCA's first two components of the training sample),
// coloured by their labels when `labels` is given (null entries: drawn plain, "no label").
export function embeddingPlot({ points, labels, xLabel, yLabel }) {
  const xr = paddedRange(points.map((p) => p[0]), 0.05);
  const yr = paddedRange(points.map((p) => p[1]), 0.05);
  const { svg, sx, sy } = frame("embedding", xr, yr, xLabel, yLabel, "the training sample's first two components");
  const known = (l) => l !== null && l !== undefined;
  const classes = labels ? sortedLabels(labels.filter(known)) : [];
  const colour = classColours(classes);
  const dots = svgEl("g", { class: "embedding" }, svg);
  points.forEach(([a, b], i) => {
    const label = labels ? labels[i] : null;
    const attrs = { cx: f2(sx(a)), cy: f2(sy(b)), r: 3.5, class: known(label) ? `point ${colour(label)}` : "point" };
    if (known(label)) attrs["data-class"] = String(label);
    const dot = svgEl("circle", attrs, dots);
    if (known(label)) svgEl("title", {}, dot).textContent = String(label);
  });
  const unlabelled = labels ? labels.some((l) => !known(l)) : false;
  legend(svg, classes.length
    ? [...classes.map((c) => [String(c), colour(c)]), ...(unlabelled ? [["no label", "point"]] : [])]
    : [["training rows", "point"]]);
  return svg;
}

// Regression on anything else: predicted against actual, with the diagonal.
export function scatterPlot({ actual, predicted }) {
  const r = paddedRange([...actual, ...predicted], 0.05);
  const { svg, sx, sy } = frame("scatter", r, r, "actual", "predicted", "predicted against actual");
  svgEl("line", { x1: f2(sx(r[0])), y1: f2(sy(r[0])), x2: f2(sx(r[1])), y2: f2(sy(r[1])), class: "diagonal" }, svg);
  actual.forEach((a, i) => svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(predicted[i])), r: 3.5, class: "point" }, svg));
  return svg;
}

// Values in the order they were evaluated (a study's trials, a search's candidates): one
// point each (null: a failed evaluation, marked on the axis), and the best so far as a
// step line ("best" is the lowest when `minimize`, else the highest).
export function progressPlot({ values, minimize = false, xLabel = "trial", yLabel = "value", title = "values in order, and the best so far" }) {
  const n = values.length;
  const finite = values.filter(Number.isFinite);
  const xr = [-0.5, Math.max(n, 1) - 0.5];
  const yr = paddedRange(finite, 0.08);
  const { svg, sx, sy } = frame("progress", xr, yr, xLabel, yLabel, title);
  legend(svg, [[yLabel, "point-swatch"], ["best so far", "best-swatch"]]);
  let best = null;
  const bx = [];
  const by = [];
  values.forEach((v, i) => {
    if (Number.isFinite(v)) {
      svgEl("circle", { cx: f2(sx(i)), cy: f2(sy(v)), r: 3.5, class: "point", "data-index": i }, svg);
      if (best === null || (minimize ? v < best : v > best)) best = v;
    } else {
      svgEl("circle", { cx: f2(sx(i)), cy: f2(sy(yr[0])), r: 3, class: "point failed", "data-index": i }, svg);
    }
    if (best !== null) {
      bx.push(i);
      by.push(best);
    }
  });
  if (bx.length) {
    // A step line: flat until the next improvement.
    const d = bx.map((x, k) => (k ? `L${f2(sx(x))},${f2(sy(by[k - 1]))}L${f2(sx(x))},${f2(sy(by[k]))}` : `M${f2(sx(x))},${f2(sy(by[0]))}`)).join("");
    svgEl("path", { d, class: "best-line", "data-testid": "best-so-far" }, svg);
  }
  return svg;
}

// Two objectives: every complete trial as a point (infeasible ones marked apart), the
// Pareto front's points joined by its staircase, and the reference point when known.
// `minimize` says, per objective, which way is better.
export function frontPlot({ points, front, names, minimize, reference = null, infeasible = [] }) {
  const all = [...points, ...infeasible, ...(reference ? [reference] : [])];
  const xr = paddedRange(all.map((p) => p[0]), 0.06);
  const yr = paddedRange(all.map((p) => p[1]), 0.06);
  const { svg, sx, sy } = frame("front", xr, yr, names[0], names[1], "the trials' objectives and their Pareto front");
  legend(svg, [["trials", "point-swatch"], ["Pareto front", "best-swatch"], ...(infeasible.length ? [["infeasible", "failed-swatch"]] : [])]);
  for (const [a, b] of points) svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(b)), r: 3.5, class: "point" }, svg);
  for (const [a, b] of infeasible) svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(b)), r: 3, class: "point failed" }, svg);
  // The staircase: sorted from the best of the first objective; between two front points
  // the line holds the first's second objective, then steps.
  const sorted = front.slice().sort((p, q) => (minimize[0] ? p[0] - q[0] : q[0] - p[0]));
  if (sorted.length) {
    const d = sorted.map(([a, b], k) => (k ? `L${f2(sx(a))},${f2(sy(sorted[k - 1][1]))}L${f2(sx(a))},${f2(sy(b))}` : `M${f2(sx(a))},${f2(sy(b))}`)).join("");
    svgEl("path", { d, class: "best-line", "data-testid": "pareto-front" }, svg);
    for (const [a, b] of sorted) svgEl("circle", { cx: f2(sx(a)), cy: f2(sy(b)), r: 4.5, class: "point front", "data-testid": "front-point" }, svg);
  }
  if (reference) {
    const r = svgEl("circle", { cx: f2(sx(reference[0])), cy: f2(sy(reference[1])), r: 4, class: "reference" }, svg);
    svgEl("title", {}, r).textContent = "hypervolume reference point";
  }
  return svg;
}

// One axis of a heat map: the distinct values in order, where they sit (log10 of them on a
// logarithmic axis: every value > 0 and max/min >= 10) and the cell edges, halfway between
// neighbours and as far beyond the ends as the nearest neighbour's half gap.
function heatAxis(values) {
  const u = [...new Set(values)].sort((a, b) => a - b);
  const log = u[0] > 0 && u[u.length - 1] / u[0] >= 10;
  const t = log ? u.map(Math.log10) : u;
  const n = t.length;
  const edges = n === 1 ? [t[0] - 0.5, t[0] + 0.5] : [t[0] - (t[1] - t[0]) / 2];
  if (n > 1) {
    for (let i = 1; i < n; i++) edges.push((t[i - 1] + t[i]) / 2);
    edges.push(t[n - 1] + (t[n - 1] - t[n - 2]) / 2);
  }
  return { log, edges, index: new Map(u.map((v, i) => [v, i])), labels: u.map(fmt), t };
}

// Tick marks at every value, labelled every k-th so that labels of about `room` pixels each
// do not overlap along `length` pixels.
function valueTicks(axis, room, length) {
  const every = Math.max(1, Math.ceil(room / (length / axis.t.length)));
  return axis.t.map((t, i) => [t, i % every === 0 ? axis.labels[i] : null]);
}

export const HEAT_BINS = 10;

// A search over two numeric hyperparameters whose candidates form a full grid, like LIBSVM's
// grid.py contour: one cell per candidate (x, y) coloured by its mean score in HEAT_BINS
// steps from the lowest mean to the highest (null: grey, "failed"); the best cell outlined,
// faded cells (halving's early eliminations) drawn lighter; `label` is each cell's title.
export function heatMap({ xLabel, yLabel, scoreLabel, cells }) {
  const ax = heatAxis(cells.map((c) => c.x));
  const ay = heatAxis(cells.map((c) => c.y));
  const xr = [ax.edges[0], ax.edges[ax.edges.length - 1]];
  const yr = [ay.edges[0], ay.edges[ay.edges.length - 1]];
  const widest = (a) => Math.max(...a.labels.map((l) => l.length));
  const { svg, sx, sy } = frame("heatmap", xr, yr, `${xLabel}${ax.log ? " (log)" : ""}`, `${yLabel}${ay.log ? " (log)" : ""}`,
    `mean ${scoreLabel} over ${xLabel} and ${yLabel}`, {
      xTicks: valueTicks(ax, 6.5 * widest(ax) + 10, W - M.left - M.right),
      yTicks: valueTicks(ay, 16, H - M.top - M.bottom),
    });
  svg.setAttribute("data-testid", "heatmap");
  const means = cells.map((c) => c.mean).filter(Number.isFinite);
  const lo = means.length ? Math.min(...means) : 0;
  const hi = means.length ? Math.max(...means) : 0;
  const bin = (m) => (hi > lo ? Math.min(HEAT_BINS - 1, Math.floor(((m - lo) / (hi - lo)) * HEAT_BINS)) : HEAT_BINS >> 1);
  const g = svgEl("g", { class: "heat" }, svg);
  let outline = null;
  for (const c of cells) {
    const i = ax.index.get(c.x);
    const j = ay.index.get(c.y);
    const x = sx(ax.edges[i]);
    const y = sy(ay.edges[j + 1]);
    const w = sx(ax.edges[i + 1]) - x;
    const hgt = sy(ay.edges[j]) - y;
    const ok = Number.isFinite(c.mean);
    const b = ok ? bin(c.mean) : null;
    const cls = ["cell", ok ? `heat-${b}` : "failed", c.best ? "best" : null, c.faded ? "faded" : null].filter(Boolean).join(" ");
    const rect = svgEl("rect", {
      x: f2(x), y: f2(y), width: f2(w), height: f2(hgt), class: cls, "data-index": c.index, "data-mean": ok ? c.mean : "",
    }, g);
    svgEl("title", {}, rect).textContent = c.label;
    const value = ok ? fmt(c.mean) : "failed";
    if (w >= 6.5 * value.length + 8 && hgt >= 16) {
      const t = text(g, f2(x + w / 2), f2(y + hgt / 2), value, `cell-text ${ok && b < HEAT_BINS / 2 ? "on-dark" : "on-light"}${c.faded ? " faded" : ""}`);
      svgEl("title", {}, t).textContent = c.label;
    }
    if (c.best) outline = [x, y, w, hgt];
  }
  if (outline) {
    const [x, y, w, hgt] = outline;
    svgEl("rect", { x: f2(x + 1.5), y: f2(y + 1.5), width: f2(w - 3), height: f2(hgt - 3), class: "best-outline" }, svg);
  }
  heatLegend(svg, scoreLabel, lo, hi, cells.some((c) => !Number.isFinite(c.mean)), cells.some((c) => c.faded));
  return svg;
}

// Above the plot: "mean <score>  lo [HEAT_BINS swatches] hi", then the best outline and,
// when drawn, the failed and faded cells.
function heatLegend(svg, scoreLabel, lo, hi, failed, faded) {
  const g = svgEl("g", { class: "legend", transform: `translate(${M.left} 8)` }, svg);
  let x = 0;
  const word = (str, cls = "legend-text") => {
    text(g, x, 12, str, cls);
    x += 6.5 * str.length + 8;
  };
  word(`mean ${scoreLabel}`);
  word(fmt(lo));
  for (let b = 0; b < HEAT_BINS; b++) svgEl("rect", { x: x + 14 * b, y: 2, width: 14, height: 12, class: `swatch heat-${b}` }, g);
  x += 14 * HEAT_BINS + 6;
  word(fmt(hi));
  x += 10;
  svgEl("rect", { x: x + 1, y: 3, width: 12, height: 10, class: "swatch best-outline" }, g);
  x += 18;
  word("best");
  if (failed) {
    svgEl("rect", { x, y: 2, width: 12, height: 12, class: "swatch failed" }, g);
    x += 18;
    word("failed");
  }
  if (faded) {
    svgEl("rect", { x, y: 2, width: 12, height: 12, class: `swatch heat-${HEAT_BINS - 1} faded` }, g);
    x += 18;
    word("eliminated early");
  }
}

// Classification on anything else: counts of (actual, predicted) as an HTML table.
export function confusionTable({ classes, actual, predicted }) {
  const keys = classes.map(String);
  const index = new Map(keys.map((k, i) => [k, i]));
  const counts = keys.map(() => keys.map(() => 0));
  let right = 0;
  actual.forEach((a, i) => {
    const r = index.get(String(a));
    const c = index.get(String(predicted[i]));
    if (r !== undefined && c !== undefined) counts[r][c] += 1;
    if (String(a) === String(predicted[i])) right += 1;
  });
  const table = document.createElement("table");
  table.className = "grid confusion";
  table.dataset.testid = "plot";
  table.dataset.kind = "confusion";
  const caption = table.createCaption();
  caption.textContent = `rows: actual, columns: predicted; ${right} of ${actual.length} right`;
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  for (const k of keys) head.appendChild(document.createElement("th")).textContent = k;
  const body = table.createTBody();
  keys.forEach((k, r) => {
    const row = body.insertRow();
    row.appendChild(document.createElement("th")).textContent = k;
    counts[r].forEach((n, c) => {
      const cell = row.insertCell();
      cell.textContent = String(n);
      cell.className = n === 0 ? "num zero" : r === c ? "num hit" : "num miss";
    });
  });
  return table;
}
