"""The web page at `/` in headless Chromium, against a mercer the caller started.

    scripts/install_browser_tools.sh
    MERCER_BIND=127.0.0.1:18097 MERCER_DATA_DIR= target/release/mercer &
    ~/.cache/mercer-browser-venv/bin/python scripts/browser_test.py http://127.0.0.1:18097 \
        --screenshots docs/screenshots
    # and once more against a mercer started with MERCER_API_KEYS=secret-token:
    ~/.cache/mercer-browser-venv/bin/python scripts/browser_test.py http://127.0.0.1:18098 --token secret-token

That is how CI runs it: the install script, then the release binary started in the
background (memory only), then this script once without and once with API keys, the
server killed after each run. The script starts no server itself.

Steps (each prints one PASS/FAIL line; the exit status is 1 when any failed):
 1. trains over the API (urllib): a 1-D GP "gp-sine", a 2-D SVM "svm-blobs" (labels red and
    blue), a kernel_ridge "krr-3d" on 3 features, and a model named <img src=x onerror=alert(1)>;
    then appends two rows to gp-sine (an online update: version 2);
 2. opens the page: all four rows listed, the hostile name shown literally as text, no alert
    open, no <img> in the table or the details, the page served with a Content-Security-Policy;
 3. gp-sine: a band plot whose band path has at least 100 points along each edge, a mean of
    at least 100, the 32 training points (30 fitted, 2 appended) and version 2 among its
    facts (gp.png);
 4. svm-blobs: decision regions of at least two classes and ringed support vectors (classifier.png);
 5. krr-3d: predicted against actual (scatter.png);
 5b. trains over the API a GP "gp-two-outputs" on a 2-D y (sin x, 10 + 5 cos x) and opens it:
    a band plot of its 25 points with the note that output 0 of 2 is shown (multi_output.png);
 5c. trains over the API two variational GPs and opens them: "svgp-counts" (poisson, 1-D
    counts), a band plot of its 80 points with its 8 inducing points marked along the axis;
    "svgp-three" (softmax, three classes in 2-D), regions of all three classes with its 12
    inducing points ringed and named so in the legend (variational.png);
 5d. sets an alias over the API (PUT /aliases/champion: 90 to gp-sine, 10 to the hostile-named
    model) and refreshes: the aliases table lists it with its generation, both routes in order
    (each model's short id and name, the hostile one as text) with weights 90% and 10%, no
    shadow and who set it; a click on a route's model opens that model (aliases.png);
 6. trains over the API an SVM "svm-search" on two noisy blobs with a 3 x 4 grid search over
    /params/c and /kernel/gamma, then opens it: a search table of 12 candidates sorted by mean
    score, the best (training.search.best_index, its values those of best_values) first and
    marked, and a heat map of 12 cells with one outlined best cell (search.png);
 6b. a bayes search (10 candidates, 4 random first) over the API, opened: its mean scores in
    evaluation order as 10 points with a best-so-far step line (search_order.png);
 6c. a study over the API ("branin", 12 trials, one failed, one pending), opened from the
    studies table: its told values against trial number (10 points, 1 failed mark), the best
    so far as a step line that never rises (minimised), and 12 rows in its trials table, the
    best marked (study.png);
 6d. a study with two objectives over the API (10 trials told, one infeasible), opened: the
    trials in objective space with the Pareto front as a staircase through as many marked
    points as the study's `pareto` lists, the infeasible one marked apart, the front's rows
    starred and the hypervolume among its facts (study_front.png);
 7. trains from the page's CSV form and waits for the new model, ready and plotted (train.png);
 8. no SEVERE entry in the browser console;
 9. with --token (the server has MERCER_API_KEYS): the page asks for the token before anything
    lists (9a, right after opening the page), and at the end no URL the page requested carries
    the token, which travelled in Authorization headers only and is in no console line or
    localStorage (9b). The 401s before the token was entered are the only console errors allowed.
"""

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

XSS_NAME = "<img src=x onerror=alert(1)>"
WAIT = 60  # seconds for any one condition
POINT = r"[ML]\s*-?[\d.]+\s*,\s*-?[\d.]+"  # one point of an SVG path

failures = []
passes = []


def step(label, fn, *args):
    """Runs one step; prints PASS or FAIL with the reason; returns fn's value or None."""
    try:
        out = fn(*args)
        passes.append(label)
        print(f"PASS {label}", flush=True)
        return out
    except Exception as err:  # noqa: BLE001 - every failure is reported, then counted
        failures.append(label)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"FAIL {label}: {type(err).__name__}: {reason}", flush=True)
        if os.environ.get("BROWSER_TEST_TRACE"):
            traceback.print_exc()
        return None


def check(cond, message):
    if not cond:
        raise AssertionError(message)


class Api:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, dict(r.headers), json.loads(r.read() or b"null")
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{method} {path}: {err.code} {err.read()[:300]!r}") from None

    def train(self, body):
        status, _, model = self.call("POST", "/models", body)
        check(status == 201 and model["status"] == "ready", f"fit {body.get('name')!r}: {status} {model.get('status')}")
        return model


def train_models(api):
    rng = random.Random(7)
    xs = [6 * i / 29 for i in range(30)]
    gp = api.train({
        "model": "gaussian_process", "name": "gp-sine", "params": {"noise": 0.01},
        "x": [[x] for x in xs], "y": [math.sin(x) + rng.gauss(0, 0.1) for x in xs],
    })
    blobs_x, blobs_y = [], []
    for label, (cx, cy) in (("red", (-1.2, -1.0)), ("blue", (1.2, 1.0))):
        for _ in range(40):
            blobs_x.append([cx + rng.gauss(0, 0.8), cy + rng.gauss(0, 0.8)])
            blobs_y.append(label)
    svm = api.train({"model": "svm", "name": "svm-blobs", "kernel": {"type": "rbf", "length_scale": 1.0},
                     "x": blobs_x, "y": blobs_y})
    rows = [[rng.uniform(-2, 2) for _ in range(3)] for _ in range(60)]
    krr = api.train({"model": "kernel_ridge", "name": "krr-3d", "params": {"lambda": 0.1},
                     "x": rows, "y": [a + 2 * b - c + math.sin(2 * a) for a, b, c in rows]})
    xss = api.train({"model": "kernel_ridge", "name": XSS_NAME, "x": [[0.0], [1.0], [2.0]], "y": [0.0, 1.0, 0.5]})
    check(svm["n_support"] >= 1, "the svm keeps no support vectors")
    # Two rows appended online: the page must plot 32 points and show version 2.
    status, _, grown = api.call("POST", f"/models/{gp['id']}/observations", {"x": [[6.3], [6.6]], "y": [0.02, 0.31]})
    check(status == 200 and grown["version"] == 2 and grown["n_train"] == 32, f"append: {status} {grown}")
    return {"gp": gp["id"], "svm": svm["id"], "krr": krr["id"], "xss": xss["id"]}


def start_browser():
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait(driver, cond, what, timeout=WAIT):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(cond)
    except Exception:
        message = driver.find_element(By.CSS_SELECTOR, "[data-testid=message]").text
        raise AssertionError(f"timed out waiting for {what} (message area: {message!r})") from None


def row(driver, model_id):
    return driver.find_element(By.CSS_SELECTOR, f'tr[data-testid=model-row][data-id="{model_id}"]')


def open_page(driver, url):
    driver.get(url)
    wait(driver, lambda d: d.execute_script("return document.readyState") == "complete", "the page to load")


def token_form_then_list(driver, url, token, ids):
    open_page(driver, url)
    form = driver.find_element(By.CSS_SELECTOR, "[data-testid=token-form]")
    wait(driver, lambda d: form.is_displayed(), "the token form")
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-testid=model-row]"), "models listed without a token")
    field = driver.find_element(By.CSS_SELECTOR, "[data-testid=token]")
    field.send_keys("not-the-token")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: form.is_displayed() and "not accepted" in d.find_element(By.CSS_SELECTOR, "[data-testid=message]").text,
         "the token form again after a wrong token")
    field.send_keys(token)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: all(row(d, i) for i in ids.values()), "the models after the token")
    check(not form.is_displayed(), "the token form is still shown")


def list_page(driver, url, ids, token_mode):
    if not token_mode:
        open_page(driver, url)
    wait(driver, lambda d: all(row(d, i) for i in ids.values()), "all four models in the table")
    names = {k: row(driver, i).find_element(By.CSS_SELECTOR, "td.name").get_attribute("textContent") for k, i in ids.items()}
    check(names == {"gp": "gp-sine", "svm": "svm-blobs", "krr": "krr-3d", "xss": XSS_NAME}, f"names as listed: {names}")
    check(XSS_NAME in row(driver, ids["xss"]).get_attribute("textContent"), "the hostile name is not shown literally")
    row(driver, ids["xss"]).click()
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=details] h2").get_attribute("textContent") == XSS_NAME,
         "the hostile model's details")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=details] svg[data-testid=plot]"), "its plot")
    try:
        alert = driver.switch_to.alert
        text = alert.text
        alert.dismiss()
        raise AssertionError(f"an alert is open: {text!r}")
    except NoAlertPresentException:
        pass
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-testid=models] img"), "an <img> element in the models table")
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-testid=details] img"), "an <img> element in the details")
    with urllib.request.urlopen(url.rstrip("/") + "/", timeout=30) as r:
        csp = r.headers.get("Content-Security-Policy", "")
    check("script-src 'self'" in csp and "unsafe-inline" not in csp, f"Content-Security-Policy of /: {csp!r}")


def select_model(driver, model_id, name, kind):
    row(driver, model_id).click()
    sel = f"[data-testid=details] svg[data-testid=plot][data-kind={kind}]"

    def shown(d):
        title = d.find_element(By.CSS_SELECTOR, "[data-testid=details] h2").get_attribute("textContent")
        return title == name and d.find_elements(By.CSS_SELECTOR, sel)

    wait(driver, shown, f"a {kind} plot of {name}")
    return driver.find_element(By.CSS_SELECTOR, sel)


def screenshot(driver, shots, name):
    if shots:
        driver.save_screenshot(os.path.join(shots, name))


def gp_band(driver, ids, shots):
    svg = select_model(driver, ids["gp"], "gp-sine", "band")
    d = svg.find_element(By.CSS_SELECTOR, "path.band[data-testid=band]").get_attribute("d") or ""
    band = len(re.findall(POINT, d))
    check(band >= 200, f"the band path has {band} points: fewer than 100 along each edge")
    mean = len(re.findall(POINT, svg.find_element(By.CSS_SELECTOR, "path.mean").get_attribute("d") or ""))
    check(mean >= 100, f"the mean path has {mean} points")
    n = len(svg.find_elements(By.CSS_SELECTOR, "circle.point"))
    check(n == 32, f"{n} training points drawn, 32 expected (30 fitted, 2 appended)")
    facts = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] dl.facts").get_attribute("textContent")
    check("version2" in facts.replace(" ", ""), f"the details do not show version 2: {facts!r}")
    screenshot(driver, shots, "gp.png")


def svm_regions(driver, ids, shots):
    svg = select_model(driver, ids["svm"], "svm-blobs", "regions")
    classes = driver.execute_script(
        "return [...new Set([...arguments[0].querySelectorAll('.region')].map(r => r.getAttribute('data-class')))]", svg)
    check(len(classes) >= 2, f"regions of {classes}")
    check(set(classes) <= {"red", "blue"}, f"unexpected region classes {classes}")
    supports = len(svg.find_elements(By.CSS_SELECTOR, ".support"))
    check(supports >= 1, "no support vector ringed")
    screenshot(driver, shots, "classifier.png")


def krr_scatter(driver, ids, shots):
    svg = select_model(driver, ids["krr"], "krr-3d", "scatter")
    n = len(svg.find_elements(By.CSS_SELECTOR, "circle.point"))
    check(n == 60, f"{n} points in the scatter, 60 expected")
    check(svg.find_elements(By.CSS_SELECTOR, ".diagonal"), "no diagonal")
    screenshot(driver, shots, "scatter.png")


def multi_output_band(driver, api, shots):
    xs = [6 * i / 24 for i in range(25)]
    model = api.train({
        "model": "gaussian_process", "name": "gp-two-outputs", "params": {"noise": 0.01, "normalize_y": True},
        "x": [[x] for x in xs], "y": [[math.sin(x), 10 + 5 * math.cos(x)] for x in xs],
    })
    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: row(d, model["id"]), "gp-two-outputs in the models table")
    svg = select_model(driver, model["id"], "gp-two-outputs", "band")
    n = len(svg.find_elements(By.CSS_SELECTOR, "circle.point"))
    check(n == 25, f"{n} training points drawn, 25 expected")
    notes = [e.get_attribute("textContent") for e in driver.find_elements(By.CSS_SELECTOR, "[data-testid=details] .outputs-note")]
    check(notes == ["This model has 2 outputs; the plot shows output 0."], f"the outputs note: {notes}")
    screenshot(driver, shots, "multi_output.png")


def alias_list(driver, api, ids, shots):
    # Both routes regression on one feature, as an alias's routes must be.
    status, headers, alias = api.call("PUT", "/aliases/champion", {
        "routes": [{"model": ids["gp"], "weight": 90}, {"model": ids["xss"], "weight": 10}]})
    check(status in (200, 201), f"PUT /aliases/champion: {status}")
    routes = [(r["model"], r["weight"]) for r in alias["routes"]]
    check(alias["name"] == "champion" and routes == [(ids["gp"], 90), (ids["xss"], 10)] and alias["shadow"] is None,
          f"the alias as set: {alias}")
    etag = {k.lower(): v for k, v in headers.items()}.get("etag")
    check(etag == f'"{alias["generation"]}"', f"ETag {etag!r} for generation {alias['generation']}")
    driver.find_element(By.ID, "refresh").click()

    def listed(d):
        got = d.execute_script("""
            const tr = document.querySelector('[data-testid=aliases] tr[data-testid=alias-row][data-name="champion"]');
            if (!tr) return null;
            return {
              name: tr.children[0].textContent, generation: tr.children[1].textContent,
              routes: [...tr.querySelectorAll('[data-testid=alias-route]')].map((li) => ({
                model: li.getAttribute('data-model'), weight: li.getAttribute('data-weight'), text: li.textContent,
                link: (li.querySelector('button.model-link') || {}).textContent || ''})),
              shadow: tr.querySelector('[data-testid=alias-shadow]').textContent,
              updated: tr.children[4].textContent,
              shown: tr.offsetParent !== null,
            };""")
        # the row as set now (a rerun against the same server lists the old routes until the refresh)
        return got if got and [r["model"] for r in got["routes"]] == [ids["gp"], ids["xss"]] else None

    shown = wait(driver, listed, "champion in the aliases table with both routes")
    check(shown["shown"], "the aliases table is hidden")
    check(shown["name"] == "champion" and shown["generation"] == str(alias["generation"]),
          f"name {shown['name']!r}, generation {shown['generation']!r}; {alias['generation']} expected")
    gp, xss = shown["routes"]
    check([gp["weight"], xss["weight"]] == ["90", "10"], f"weights {gp['weight']}, {xss['weight']}")
    check(gp["text"].strip().endswith("90%") and xss["text"].strip().endswith("10%"), f"routes {gp['text']!r}, {xss['text']!r}")
    check(gp["link"] == f"{ids['gp'][:8]} gp-sine", f"the first route's model: {gp['link']!r}")
    check(xss["link"] == f"{ids['xss'][:8]} {XSS_NAME}", f"the second route's model: {xss['link']!r}")
    check(shown["shadow"] == "—", f"shadow {shown['shadow']!r}; none set")
    if alias.get("updated_by"):
        check(f"by {alias['updated_by']}" in shown["updated"], f"updated {shown['updated']!r}; by {alias['updated_by']} expected")
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-testid=aliases] img"), "an <img> element in the aliases table")
    link = f'[data-testid=aliases] tr[data-name="champion"] [data-testid=alias-route][data-model="{ids["gp"]}"] button.model-link'
    driver.find_element(By.CSS_SELECTOR, link).click()
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=details] h2").get_attribute("textContent") == "gp-sine"
         and "selected" in (row(d, ids["gp"]).get_attribute("class") or "")
         and "selected" in (d.find_element(By.CSS_SELECTOR, link).get_attribute("class") or ""),
         "gp-sine opened from the alias, selected in both tables")
    table = driver.find_element(By.CSS_SELECTOR, "[data-testid=aliases]")
    driver.execute_async_script(
        "arguments[0].scrollIntoView(); window.scrollBy(0, -40); requestAnimationFrame(() => requestAnimationFrame(arguments[1]))", table)
    screenshot(driver, shots, "aliases.png")
    driver.execute_script("window.scrollTo(0, 0)")


def svm_search(driver, api, shots):
    rng = random.Random(23)
    x, y = [], []
    for label, (cx, cy) in (("red", (-1.0, -0.8)), ("blue", (1.0, 0.8))):
        for _ in range(40):
            x.append([cx + rng.gauss(0, 1.1), cy + rng.gauss(0, 1.1)])
            y.append(label)
    model = api.train({
        "model": "svm", "name": "svm-search", "kernel": {"type": "rbf", "gamma": 1.0}, "params": {"c": 1.0},
        "x": x, "y": y,
        "search": {"space": {"/params/c": {"log_grid": [0.1, 100, 3]}, "/kernel/gamma": {"log_grid": [0.05, 5, 4]}},
                   "cv": 5, "scoring": "accuracy"},
    })
    s = model["training"]["search"]
    cands = s["candidates"]
    check(len(cands) == 12, f"the search reports {len(cands)} candidates, 12 expected")
    # The ranking the page must show: higher mean first, failed last, earlier first among equals.
    expected = sorted(range(12), key=lambda i: (cands[i]["mean_score"] is None, -(cands[i]["mean_score"] or 0), i))
    check(expected[0] == s["best_index"], f"best_index {s['best_index']} is not the top-ranked candidate {expected[0]}")

    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: row(d, model["id"]), "svm-search in the models table")
    select_model(driver, model["id"], "svm-search", "regions")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=details] [data-testid=search-table]"), "the search table")
    shown = driver.execute_script("""
        const rows = [...document.querySelectorAll('[data-testid=details] [data-testid=search-table] tbody tr')];
        const svg = document.querySelector('[data-testid=details] svg[data-testid=heatmap]');
        return {
          rows: rows.map((r) => ({
            index: Number(r.getAttribute('data-index')), best: r.classList.contains('best'),
            mean: r.querySelector('td.mean').textContent,
            values: Object.fromEntries([...r.querySelectorAll('td.value')].map((td) => [td.getAttribute('data-pointer'), td.textContent])),
          })),
          cells: svg ? svg.querySelectorAll('rect.cell').length : -1,
          bestCells: svg ? [...svg.querySelectorAll('rect.cell.best')].map((c) => Number(c.getAttribute('data-index'))) : [],
          outlines: svg ? svg.querySelectorAll('rect.best-outline:not(.swatch)').length : -1,
          summary: (document.querySelector('[data-testid=details] [data-testid=search-summary]') || {}).textContent,
        };""")
    rows = shown["rows"]
    check(len(rows) == 12, f"{len(rows)} rows in the search table, 12 expected")
    check([r["index"] for r in rows] == expected, f"rows in order {[r['index'] for r in rows]}, expected {expected}")
    check(rows[0]["index"] == s["best_index"], f"the first row is candidate {rows[0]['index']}, best_index is {s['best_index']}")
    check([r["index"] for r in rows if r["best"]] == [s["best_index"]], "the best row is not the one row marked best")
    best_shown = rows[0]["values"]
    check(set(best_shown) == set(s["best_values"]), f"columns {sorted(best_shown)}, best_values {sorted(s['best_values'])}")
    for pointer, value in s["best_values"].items():
        check(math.isclose(float(best_shown[pointer]), value, rel_tol=5e-4),
              f"the first row shows {pointer} = {best_shown[pointer]}, best_values has {value}")
    means = [float(r["mean"].split("±")[0]) for r in rows]
    check(all(a >= b for a, b in zip(means, means[1:])), f"rows not sorted by mean: {means}")
    check("12 candidates" in (shown["summary"] or "") and "60 fold fits" in shown["summary"], f"summary: {shown['summary']!r}")
    check(shown["cells"] == 12, f"the heat map has {shown['cells']} cells, 12 expected")
    check(shown["bestCells"] == [s["best_index"]] and shown["outlines"] == 1,
          f"best cells {shown['bestCells']} with {shown['outlines']} outlines; one, candidate {s['best_index']}, expected")
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-testid=details] img"), "an <img> element in the details")
    section = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] [data-testid=search]")
    # The search section at the top of the window, a frame painted before the screenshot.
    driver.execute_async_script(
        "arguments[0].scrollIntoView(); window.scrollBy(0, -8); requestAnimationFrame(() => requestAnimationFrame(arguments[1]))", section)
    screenshot(driver, shots, "search.png")
    driver.execute_script("window.scrollTo(0, 0)")


def progress_shown(driver, holder):
    """The points and the best-so-far path of the progress plot in `holder` (a testid)."""
    return driver.execute_script("""
        const svg = document.querySelector(`[data-testid=details] [data-testid=${arguments[0]}] svg[data-kind=progress]`);
        if (!svg) return null;
        const path = svg.querySelector('path[data-testid=best-so-far]');
        return {
          points: svg.querySelectorAll('circle.point:not(.failed)').length,
          failed: svg.querySelectorAll('circle.point.failed').length,
          best: path ? path.getAttribute('d') : null,
        };""", holder)


def bayes_search(driver, api, shots):
    rng = random.Random(29)
    x, y = [], []
    for i in range(60):
        a, r = rng.uniform(0, 2 * math.pi), rng.uniform(0, 2)
        x.append([r * math.cos(a), r * math.sin(a)])
        y.append("in" if r < 1 else "out")
    model = api.train({
        "model": "svm", "name": "svm-bayes", "x": x, "y": y,
        "search": {"method": "bayes", "candidates": 10, "initial": 4, "cv": 3,
                   "space": {"/params/c": {"log_uniform": [0.01, 100]}, "/kernel/gamma": {"log_uniform": [0.01, 10]}}},
    })
    s = model["training"]["search"]
    check(s["method"] == "bayes" and len(s["candidates"]) == 10, f"the search: {s['method']}, {len(s['candidates'])} candidates")
    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: row(d, model["id"]), "svm-bayes in the models table")
    select_model(driver, model["id"], "svm-bayes", "regions")
    shown = wait(driver, lambda d: progress_shown(d, "search-order"), "the evaluation-order plot")
    check(shown["points"] == 10, f"{shown['points']} points in evaluation order, 10 expected")
    check(shown["best"] and len(re.findall(POINT, shown["best"])) >= 10, f"best-so-far path: {shown['best']!r}")
    holder = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] [data-testid=search-order]")
    driver.execute_async_script(
        "arguments[0].scrollIntoView(); window.scrollBy(0, -8); requestAnimationFrame(() => requestAnimationFrame(arguments[1]))", holder)
    screenshot(driver, shots, "search_order.png")
    driver.execute_script("window.scrollTo(0, 0)")


def study_page(driver, api, shots):
    def branin(v):
        b, c = 5.1 / (4 * math.pi ** 2), 5 / math.pi
        return (v["x2"] - b * v["x1"] ** 2 + c * v["x1"] - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(v["x1"]) + 10

    status, _, study = api.call("POST", "/studies", {"name": "branin", "space": {"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}}, "initial": 5})
    check(status == 201, f"create: {status}")
    sid = study["id"]
    told = []
    for i in range(12):
        _, _, out = api.call("POST", f"/studies/{sid}/suggest", {"count": 1})
        t = out["trials"][0]
        if i == 11:
            break  # left pending
        body = {"state": "failed"} if i == 3 else {"value": branin(t["values"])}
        api.call("POST", f"/studies/{sid}/trials/{t['id']}", body)
        if i != 3:
            told.append(branin(t["values"]))
    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-testid=study-row][data-id="{sid}"]'), "branin in the studies table")
    driver.find_element(By.CSS_SELECTOR, f'tr[data-testid=study-row][data-id="{sid}"]').click()
    shown = wait(driver, lambda d: progress_shown(d, "study-plot"), "the study's plot")
    check(shown["points"] == 10 and shown["failed"] == 1, f"{shown['points']} told points and {shown['failed']} failed, 10 and 1 expected")
    ys = [float(m.split(",")[1]) for m in re.findall(POINT, shown["best"] or "")]
    # Minimised: the best so far never rises, so its y in pixels never decreases.
    check(ys and all(b >= a - 1e-6 for a, b in zip(ys, ys[1:])), f"best-so-far path rises: {shown['best']!r}")
    rows = driver.execute_script("""
        return [...document.querySelectorAll('[data-testid=details] [data-testid=trials-table] tbody tr')].map((r) => ({
          id: Number(r.getAttribute('data-id')), best: r.classList.contains('best'), state: r.children[1].textContent }));""")
    check(len(rows) == 12, f"{len(rows)} trial rows, 12 expected")
    best_id = min(range(len(told)), key=lambda k: told[k])
    best_trial = best_id if best_id < 3 else best_id + 1
    check([r["id"] for r in rows if r["best"]] == [best_trial], f"best rows {[r['id'] for r in rows if r['best']]}, trial {best_trial} expected")
    check([r["state"] for r in rows].count("pending") == 1 and [r["state"] for r in rows].count("failed") == 1, f"states {[r['state'] for r in rows]}")
    screenshot(driver, shots, "study.png")
    api.call("DELETE", f"/studies/{sid}")


def study_front_page(driver, api, shots):
    body = {"name": "two-objectives", "space": {"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}},
            "objectives": [{"name": "cost", "direction": "minimize"}, {"name": "loss", "direction": "minimize"}],
            "constraints": [{"name": "c", "max": 0.9}], "initial": 4}
    status, _, study = api.call("POST", "/studies", body)
    check(status == 201, f"create: {status}")
    sid = study["id"]
    for i in range(10):
        _, _, out = api.call("POST", f"/studies/{sid}/suggest", {"count": 1})
        t = out["trials"][0]
        x, y = t["values"]["x"], t["values"]["y"]
        c = 1.0 if i == 2 else 0.0
        api.call("POST", f"/studies/{sid}/trials/{t['id']}", {"values": {"cost": x, "loss": 1 - math.sqrt(x) + y, "c": c}})
    _, _, got = api.call("GET", f"/studies/{sid}")
    front = len(got["pareto"])
    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-testid=study-row][data-id="{sid}"]'), "the study in the studies table")
    driver.find_element(By.CSS_SELECTOR, f'tr[data-testid=study-row][data-id="{sid}"]').click()
    shown = wait(driver, lambda d: d.execute_script("""
        const svg = document.querySelector('[data-testid=details] [data-testid=study-plot] svg[data-kind=front]');
        if (!svg) return null;
        return {front: svg.querySelectorAll('[data-testid=front-point]').length,
                stairs: svg.querySelectorAll('[data-testid=pareto-front]').length,
                infeasible: svg.querySelectorAll('circle.failed').length,
                starred: [...document.querySelectorAll('[data-testid=details] [data-testid=trial-row]')].filter((r) => r.children[0].textContent.startsWith('★')).length,
                facts: document.querySelector('[data-testid=details] dl').textContent};"""), "the front plot")
    check(front >= 1 and shown["front"] == front and shown["stairs"] == 1, f"{shown['front']} front points drawn, {front} in the study's pareto")
    check(shown["infeasible"] == 1, f"{shown['infeasible']} infeasible marks, 1 expected")
    check(shown["starred"] == front, f"{shown['starred']} starred rows, {front} expected")
    check("hypervolume" in shown["facts"] and "(derived)" in shown["facts"], f"facts: {shown['facts']!r}")
    screenshot(driver, shots, "study_front.png")
    api.call("DELETE", f"/studies/{sid}")


def train_csv(driver, header, rows, model, target="", params=""):
    """Trains `model` through the page's form on a CSV of `rows`; waits for the model's plot
    and returns the model's name (the page names it after the file)."""
    fd, path = tempfile.mkstemp(prefix="mercer-ui-", suffix=".csv")
    name = os.path.basename(path)[: -len(".csv")]
    with os.fdopen(fd, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(v if isinstance(v, str) else f"{v:.5f}" for v in r) + "\n")
    try:
        driver.execute_script("window.scrollTo(0, 0)")
        form = driver.find_element(By.CSS_SELECTOR, "[data-testid=train-form]")
        form.find_element(By.CSS_SELECTOR, "[data-testid=csv-file]").send_keys(path)
        for testid, value in (("target", target), ("params", params)):
            field = form.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]")
            field.clear()
            if value:
                field.send_keys(value)
        # The form's kinds come from GET /models/kinds (the page keeps no list of its own).
        option = f'[data-testid=model] option[value="{model}"]'
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, option), f"{model} offered by the form (from GET /models/kinds)")
        Select(form.find_element(By.CSS_SELECTOR, "[data-testid=model]")).select_by_value(model)
        form.find_element(By.CSS_SELECTOR, "[data-testid=train-submit]").click()

        def ready_row(d):
            for tr in d.find_elements(By.CSS_SELECTOR, "tr[data-testid=model-row]"):
                if tr.find_element(By.CSS_SELECTOR, "td.name").get_attribute("textContent") == name:
                    return "ready" in tr.find_element(By.CSS_SELECTOR, ".status").get_attribute("textContent")
            return False

        wait(driver, ready_row, f"a ready row named {name}")
        wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=details] h2").get_attribute("textContent") == name
             and d.find_elements(By.CSS_SELECTOR, "[data-testid=details] [data-testid=plot]"), "the new model's plot")
        message = driver.find_element(By.CSS_SELECTOR, "[data-testid=message]")
        check("error" not in (message.get_attribute("class") or ""), f"error shown: {message.text!r}")
        return name
    finally:
        os.unlink(path)


def train_from_form(driver, shots):
    rng = random.Random(11)
    rows = []
    for _ in range(40):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        rows.append((a, b, a * a - b + rng.gauss(0, 0.05)))
    name = train_csv(driver, ["a", "b", "y"], rows, "kernel_ridge", target="y")
    ds = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "[data-testid=datasets] tbody tr")]
    check(any(r.startswith(name) for r in ds), f"the dataset {name} is not listed")
    screenshot(driver, shots, "train.png")


def kpca_embedding(driver, shots):
    # Three separated clusters in 4-D with a label column: the embedding's points coloured
    # by it, 20 per class, the two eigenvalues listed.
    rng = random.Random(5)
    centres = {"setosa": (0, 0, 0, 0), "versicolor": (4, 0, 1, 0), "virginica": (0, 4, 0, 1)}
    rows = [tuple(c + rng.gauss(0, 0.4) for c in centre) + (label,)
            for label, centre in centres.items() for _ in range(20)]
    rng.shuffle(rows)
    train_csv(driver, ["a", "b", "c", "d", "species"], rows, "kernel_pca", target="species",
              params='{"n_components": 2}')
    svg = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=details] svg[data-testid=plot][data-kind=embedding]"),
               "an embedding plot")[0]
    classes = [c.get_attribute("data-class") for c in svg.find_elements(By.CSS_SELECTOR, "g.embedding circle")]
    check(len(classes) == 60, f"{len(classes)} points, 60 expected")
    counts = {k: classes.count(k) for k in centres}
    check(counts == {k: 20 for k in centres}, f"points by class {counts}")
    ev = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] [data-testid=eigenvalues]").get_attribute("title").split(", ")
    check(len(ev) == 2 and float(ev[0]) >= float(ev[1]) > 0, f"eigenvalues {ev}")
    note = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] [data-testid=plot-note]").text
    check("species" in note, f"the note {note!r} does not name the label column")
    screenshot(driver, shots, "kpca.png")


def one_class_regions(driver, shots):
    # Two columns and no target: every column a feature, inlier and outlier regions.
    rng = random.Random(8)
    rows = [(rng.gauss(0, 1), rng.gauss(0, 1)) for _ in range(50)]
    train_csv(driver, ["u", "v"], rows, "one_class_svm", params='{"nu": 0.2}')
    svg = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=details] svg[data-testid=plot][data-kind=regions]"),
               "a regions plot")[0]
    points = [c.get_attribute("data-class") for c in svg.find_elements(By.CSS_SELECTOR, "circle[data-class]")]
    check(len(points) == 50, f"{len(points)} points, 50 expected (both columns used as features)")
    check(set(points) == {"1", "-1"}, f"point classes {set(points)}: inliers and outliers expected")
    facts = driver.find_element(By.CSS_SELECTOR, "[data-testid=details] dl.facts").get_attribute("textContent")
    check("n_features2" in facts.replace(" ", "").replace("\n", ""), f"facts {facts!r}: 2 features expected")


def console_clean(entries, token_mode):
    severe = [e for e in entries if e["level"] == "SEVERE"]
    if token_mode:  # the page's requests before the token was entered answer 401, and Chromium logs them
        severe = [e for e in severe if not (e.get("source") == "network" and "status of 401" in e["message"])]
    check(not severe, " | ".join(e["message"][:160] for e in severe[:4]))


def token_not_leaked(driver, token, console):
    urls = driver.execute_script(
        "return [location.href, ...performance.getEntries().map(e => e.name)]")
    check(not [u for u in urls if token in u], "a URL in performance.getEntries() carries the token")
    sent_with_header = 0
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") != "Network.requestWillBeSent":
            continue
        req = msg["params"]["request"]
        check(token not in req["url"], f"a request URL carries the token: {req['url'][:80]}")
        auth = {k.lower(): v for k, v in req.get("headers", {}).items()}.get("authorization", "")
        sent_with_header += auth == f"Bearer {token}"
    check(sent_with_header > 0, "no request carried the token in its Authorization header")
    check(not [e for e in console if token in e["message"]], "the token appears in the console")
    stored = driver.execute_script("return [JSON.stringify(localStorage), JSON.stringify(sessionStorage)]")
    check(token not in stored[0], "the token is in localStorage")
    check(token in stored[1], "the token is not in sessionStorage")


def variational_plots(driver, api, shots):
    rng = random.Random(11)
    xs = [8 * i / 79 for i in range(80)]
    counts = api.train({
        "model": "gaussian_process", "name": "svgp-counts",
        "params": {"approximation": "variational", "likelihood": "poisson", "inducing_points": 8, "epochs": 40,
                   "batch_size": 40},
        "x": [[x] for x in xs], "y": [float(round(math.exp(1 + math.sin(x)) + rng.uniform(-1, 1))) for x in xs],
    })
    pts = [[rng.uniform(-2, 2), rng.uniform(-2, 2)] for _ in range(150)]
    three = api.train({
        "model": "gp_classifier", "name": "svgp-three",
        "params": {"approximation": "variational", "inducing_points": 12, "epochs": 40, "batch_size": 50},
        "x": pts, "y": ["east" if a > 0.6 else ("north" if b > 0 else "south") for a, b in pts],
    })
    check(three["params"]["likelihood"] == "softmax", f"the three-class fit's likelihood: {three['params']}")
    driver.find_element(By.ID, "refresh").click()
    wait(driver, lambda d: row(d, three["id"]), "svgp-three in the models table")
    svg = select_model(driver, counts["id"], "svgp-counts", "band")
    n = len(svg.find_elements(By.CSS_SELECTOR, "circle.point"))
    check(n == 80, f"{n} training points drawn, 80 expected")
    marks = len(svg.find_elements(By.CSS_SELECTOR, "path.inducing"))
    check(marks == 8, f"{marks} inducing points marked, 8 expected")
    check(svg.find_elements(By.CSS_SELECTOR, "path.band"), "no band: the rate's sd is drawn")
    svg = select_model(driver, three["id"], "svgp-three", "regions")
    classes = driver.execute_script(
        "return [...new Set([...arguments[0].querySelectorAll('.region')].map(r => r.getAttribute('data-class')))]", svg)
    check(sorted(classes) == ["east", "north", "south"], f"regions of {classes}")
    ringed = len(svg.find_elements(By.CSS_SELECTOR, "circle.support"))
    check(ringed == 12, f"{ringed} inducing points ringed, 12 expected")
    legend = svg.find_element(By.CSS_SELECTOR, ".legend").get_attribute("textContent")
    check("inducing points" in legend, f"the legend: {legend!r}")
    screenshot(driver, shots, "variational.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="mercer's base URL, e.g. http://127.0.0.1:18097")
    parser.add_argument("--screenshots", metavar="DIR", help="write gp.png, classifier.png, scatter.png, aliases.png, search.png, train.png, kpca.png here")
    parser.add_argument("--token", help="the server runs with MERCER_API_KEYS and this is one of them")
    args = parser.parse_args()
    shots = args.screenshots
    if shots:
        os.makedirs(shots, exist_ok=True)
    url = args.url.rstrip("/") + "/"

    ids = step("1 train gp-sine, svm-blobs, krr-3d and the hostile name over the API; append 2 rows to gp-sine", train_models, Api(args.url, args.token))
    if ids is None:
        print("0 passed, 1 failed")
        return 1
    driver = start_browser()
    try:
        if args.token:
            step("9a the page asks for the token on 401, rejects a wrong one, lists with the right one",
                 token_form_then_list, driver, url, args.token, ids)
        step("2 models listed; the hostile name is literal text, no alert, no <img>, CSP served",
             list_page, driver, url, ids, bool(args.token))
        step("3 gp-sine: band plot, band and mean paths of >= 100 points, 32 training points (2 appended), version 2", gp_band, driver, ids, shots)
        step("4 svm-blobs: decision regions of >= 2 classes, support vectors ringed", svm_regions, driver, ids, shots)
        step("5 krr-3d: predicted against actual", krr_scatter, driver, ids, shots)
        step("5b a GP on two outputs: output 0 plotted as a band, and the page says so",
             multi_output_band, driver, Api(args.url, args.token), shots)
        step("5c variational GPs: a poisson band with its inducing points marked, softmax regions of 3 classes with them ringed",
             variational_plots, driver, Api(args.url, args.token), shots)
        step("5d an alias set over the API (90/10): listed with its generation, both routes and weights; a route's model opens it",
             alias_list, driver, Api(args.url, args.token), ids, shots)
        step("6 svm-search: 12 candidates ranked by mean, the best first and marked, a heat map of 12 cells with one best",
             svm_search, driver, Api(args.url, args.token), shots)
        step("6b a bayes search: its mean scores in evaluation order, 10 points and the best so far",
             bayes_search, driver, Api(args.url, args.token), shots)
        step("6c a study: told values against trial number, failures marked, best so far never rising, 12 trial rows",
             study_page, driver, Api(args.url, args.token), shots)
        step("6d a study with two objectives: its Pareto front as a staircase, the infeasible trial apart, the front's rows starred",
             study_front_page, driver, Api(args.url, args.token), shots)
        step("7 train from the CSV form: new model ready, listed and plotted", train_from_form, driver, shots)
        step("7b kernel_pca from the form with a label column: 60 embedded points coloured by species, 2 eigenvalues",
             kpca_embedding, driver, shots)
        step("7c one_class_svm from the form without a target: both columns features, inlier and outlier points",
             one_class_regions, driver, shots)
        console = driver.get_log("browser")
        step("8 browser console has no SEVERE entry", console_clean, console, bool(args.token))
        if args.token:
            step("9b the token is in no URL, no console line, no localStorage; sent as a bearer header",
                 token_not_leaked, driver, args.token, console)
        if failures and shots:
            driver.save_screenshot(os.path.join(shots, "failure.png"))
    finally:
        driver.quit()
    print(f"{len(passes)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
