//! The `search` object of a training body, read and checked on its own (what does not
//! depend on the rows): the space of candidate values per pointer, the method, the folds
//! asked for and the scoring. Errors point into the body (`/search/...`): the form of
//! the JSON is a 400, a value out of range a 422.

use super::pointer::Pointer;
use super::scoring::Scoring;
use crate::optimize::SplitMix64;
use crate::spec::{json_type_name, pointer_token, FieldError, ObjectReader};
use serde_json::Value;

/// How candidates are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Grid,
    Random,
    Halving,
    /// Bayesian optimisation of the mean score (`bayes`).
    Bayes,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Grid => "grid",
            Method::Random => "random",
            Method::Halving => "halving",
            Method::Bayes => "bayes",
        }
    }
}

/// `cv`: k folds, or leave-one-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cv {
    KFold(usize),
    Loo,
}

/// The values one pointer takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Axis {
    /// Listed values, any JSON the field takes.
    List(Vec<Value>),
    /// `grid` (linear) or `log_grid`: numpy's linspace / geomspace, computed on demand.
    Grid { log: bool, lo: f64, hi: f64, count: u64 },
    /// `random` only: a value drawn per candidate.
    Draw(Draw),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Draw {
    LogUniform(f64, f64),
    Uniform(f64, f64),
    /// Inclusive.
    IntUniform(i64, i64),
}

impl Axis {
    /// How many values it lists; None for draws.
    pub fn size(&self) -> Option<u64> {
        match self {
            Axis::List(v) => Some(v.len() as u64),
            Axis::Grid { count, .. } => Some(*count),
            Axis::Draw(_) => None,
        }
    }

    /// Value i of a list or grid (numpy's formulas: linspace y_i = lo + i (hi - lo) /
    /// (count - 1) with the last set to hi; geomspace 10^linspace(log10 lo, log10 hi)
    /// with both ends set to lo and hi).
    pub fn value(&self, i: u64) -> Value {
        match self {
            Axis::List(v) => v[i as usize].clone(),
            Axis::Grid { log, lo, hi, count } => {
                let last = count - 1;
                let x = if i == 0 {
                    *lo
                } else if i == last {
                    *hi
                } else if *log {
                    let (a, b) = (lo.log10(), hi.log10());
                    10f64.powf(i as f64 * ((b - a) / last as f64) + a)
                } else {
                    i as f64 * ((hi - lo) / last as f64) + lo
                };
                number(x)
            }
            Axis::Draw(_) => unreachable!("draws have no listed values"),
        }
    }

    /// The values to check before anything runs: every listed value, or for very long
    /// grids and for draws their two ends (a grid is monotone between them).
    pub fn probes(&self) -> Vec<Value> {
        match self {
            Axis::List(v) => v.clone(),
            Axis::Grid { count, .. } if *count <= 100_000 => (0..*count).map(|i| self.value(i)).collect(),
            Axis::Grid { count, .. } => vec![self.value(0), self.value(count - 1)],
            Axis::Draw(Draw::LogUniform(lo, hi) | Draw::Uniform(lo, hi)) => vec![number(*lo), number(*hi)],
            Axis::Draw(Draw::IntUniform(lo, hi)) => vec![Value::from(*lo), Value::from(*hi)],
        }
    }

    /// A value drawn for one random candidate.
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> Value {
        match self {
            Axis::Draw(Draw::LogUniform(lo, hi)) => number(rng.uniform(lo.ln(), hi.ln()).exp().clamp(*lo, *hi)),
            Axis::Draw(Draw::Uniform(lo, hi)) => number(rng.uniform(*lo, *hi)),
            Axis::Draw(Draw::IntUniform(lo, hi)) => {
                let span = (*hi as i128 - *lo as i128 + 1) as u128;
                Value::from((*lo as i128 + (rng.next_u64() as u128 % span) as i128) as i64)
            }
            _ => {
                let size = self.size().expect("a list or grid");
                self.value(rng.next_u64() % size)
            }
        }
    }
}

/// Coordinates a Bayesian optimisation's unit cube may have (each value of a list or grid
/// is one): beyond, the model would spend its evaluations learning the encoding.
pub const MAX_WIDTH: u64 = 256;

/// The unit-cube width of these axes (`bayes::Space`'s encoding), without expanding them
/// (a grid's count may be huge); `Err(width)` above [`MAX_WIDTH`].
pub fn check_width<'a>(axes: impl IntoIterator<Item = &'a Axis>) -> Result<u64, u64> {
    let width = axes.into_iter().fold(0u64, |acc, a| {
        let w = match a.size() {
            Some(1) => 0,
            Some(n) => n,
            None => 1,
        };
        acc.saturating_add(w)
    });
    if width > MAX_WIDTH {
        Err(width)
    } else {
        Ok(width)
    }
}

/// A float as JSON (finite by construction).
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// A checked `search` object.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpec {
    /// Sorted by pointer (code point order), as candidates vary.
    pub axes: Vec<(Pointer, Axis)>,
    pub method: Method,
    pub candidates: u64,
    pub cv: Cv,
    /// Explicit fold numbers, one per row (checked against the rows later).
    pub folds: Option<Vec<u64>>,
    pub shuffle: bool,
    pub seed: u64,
    /// None: the task's default.
    pub scoring: Option<Scoring>,
    /// `bayes`: the seeded random settings evaluated before the model takes over.
    pub initial: u64,
}

impl SearchSpec {
    /// Reads the body's `search` (pointer `/search`).
    pub fn from_json(v: &Value) -> Result<SearchSpec, FieldError> {
        let mut obj = ObjectReader::new(v, "/search")?;
        let method = match obj.str("method")? {
            None | Some("grid") => Method::Grid,
            Some("random") => Method::Random,
            Some("halving") => Method::Halving,
            Some("bayes") => Method::Bayes,
            Some(other) => {
                return Err(FieldError::invalid(
                    "/search/method",
                    format!("unknown method `{other}`; expected grid, random, halving or bayes"),
                ))
            }
        };
        let axes = match obj.take("space") {
            None => return Err(FieldError::shape("/search/space", "missing field `space`")),
            Some(space) => read_space(space, method)?,
        };
        let candidates = obj.u64("candidates")?.unwrap_or(10);
        if candidates == 0 {
            return Err(FieldError::invalid("/search/candidates", "must be at least 1"));
        }
        let cv = match obj.take("cv") {
            None => Cv::KFold(5),
            Some(Value::String(s)) if s == "loo" => Cv::Loo,
            Some(Value::String(s)) => {
                return Err(FieldError::invalid(
                    "/search/cv",
                    format!("`{s}` is neither a number of folds nor \"loo\""),
                ))
            }
            Some(v) => {
                let k = crate::spec::as_u64(v, "/search/cv")?;
                if k < 2 {
                    return Err(FieldError::invalid("/search/cv", "needs at least 2 folds"));
                }
                Cv::KFold(usize::try_from(k).unwrap_or(usize::MAX))
            }
        };
        let folds = match obj.take("folds") {
            None => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| crate::spec::as_u64(f, &format!("/search/folds/{i}")))
                    .collect::<Result<Vec<u64>, _>>()?,
            ),
            Some(other) => {
                return Err(FieldError::shape(
                    "/search/folds",
                    format!("expected a list of fold numbers, found {}", json_type_name(other)),
                ))
            }
        };
        let shuffle = obj.bool("shuffle")?.unwrap_or(false);
        let seed = obj.u64("seed")?.unwrap_or(0);
        let scoring = match obj.str("scoring")? {
            None => None,
            Some(name) => Some(Scoring::from_name(name).ok_or_else(|| {
                let names: Vec<_> = Scoring::ALL.iter().map(|s| s.name()).collect();
                FieldError::invalid("/search/scoring", format!("unknown scoring `{name}`; one of {}", names.join(", ")))
            })?),
        };
        let initial = obj.u64("initial")?;
        obj.finish()?;
        if method == Method::Bayes {
            if let Err(width) = check_width(axes.iter().map(|(_, a)| a)) {
                return Err(FieldError::invalid(
                    "/search/space",
                    format!(
                        "a bayes space is at most {} coordinates (a number range is one, each value of a list or grid one); this one has {width}",
                        MAX_WIDTH
                    ),
                ));
            }
        }
        let initial = match (method, initial) {
            (Method::Bayes, None) => candidates.min((2 * axes.len() as u64).max(5)),
            (Method::Bayes, Some(i)) if i == 0 || i > candidates => {
                return Err(FieldError::invalid(
                    "/search/initial",
                    format!("must be from 1 to candidates ({candidates}); got {i}"),
                ))
            }
            (Method::Bayes, Some(i)) => i,
            (_, Some(_)) => {
                return Err(FieldError::invalid("/search/initial", "applies to method \"bayes\" only"));
            }
            (_, None) => 0,
        };
        Ok(SearchSpec { axes, method, candidates, cv, folds, shuffle, seed, scoring, initial })
    }

    /// The number of grid combinations (saturating); None when an axis draws.
    pub fn grid_size(&self) -> Option<u128> {
        self.axes.iter().try_fold(1u128, |acc, (_, a)| a.size().map(|s| acc.saturating_mul(s as u128)))
    }

    /// How many candidates the method evaluates (in its first round, for halving).
    pub fn n_candidates(&self) -> u128 {
        match (self.method, self.grid_size()) {
            (Method::Random | Method::Bayes, Some(g)) => g.min(self.candidates as u128),
            (Method::Random | Method::Bayes, None) => self.candidates as u128,
            (_, g) => g.expect("grid and halving have no draws"),
        }
    }

    /// The candidates' values, each in pointer order (for `bayes`, its initial random
    /// settings: exactly `random`'s with `candidates: initial`). Call only once
    /// `n_candidates` is known to be small.
    pub fn expand(&self) -> Vec<Vec<Value>> {
        let n = self.n_candidates() as u64;
        match self.method {
            Method::Grid | Method::Halving => (0..n).map(|c| self.grid_point(c)).collect(),
            Method::Bayes => SearchSpec { method: Method::Random, candidates: self.initial, ..self.clone() }.expand(),
            Method::Random => {
                let mut rng = SplitMix64::new(self.seed);
                match self.grid_size() {
                    // Every axis lists its values: distinct grid points, drawn without
                    // replacement (as scikit-learn's ParameterSampler).
                    Some(size) => {
                        let size = size as u64;
                        let mut seen = std::collections::HashSet::new();
                        let mut out = Vec::with_capacity(n as usize);
                        if size <= 4 * n {
                            // Dense: a partial Fisher-Yates over the grid's indices.
                            let mut idx: Vec<u64> = (0..size).collect();
                            for i in 0..n as usize {
                                let j = i + (rng.next_u64() % (size - i as u64)) as usize;
                                idx.swap(i, j);
                                out.push(self.grid_point(idx[i]));
                            }
                        } else {
                            while (out.len() as u64) < n {
                                let c = rng.next_u64() % size;
                                if seen.insert(c) {
                                    out.push(self.grid_point(c));
                                }
                            }
                        }
                        out
                    }
                    None => (0..n).map(|_| self.axes.iter().map(|(_, a)| a.draw(&mut rng)).collect()).collect(),
                }
            }
        }
    }

    /// Grid point c: the first axis varies slowest.
    fn grid_point(&self, mut c: u64) -> Vec<Value> {
        let mut out = vec![Value::Null; self.axes.len()];
        for (slot, (_, axis)) in out.iter_mut().zip(&self.axes).rev() {
            let size = axis.size().expect("a grid axis");
            *slot = axis.value(c % size);
            c /= size;
        }
        out
    }

    /// Candidates per round: [C] for grid and random; for halving, 1 + floor(log3 C)
    /// rounds, each keeping ceil(survivors / 3) of the one before.
    pub fn rounds(&self, n_candidates: usize) -> Vec<usize> {
        let mut rounds = vec![n_candidates];
        if self.method == Method::Halving {
            let mut r = 1;
            let mut power = 3usize;
            while power <= n_candidates {
                r += 1;
                power = power.saturating_mul(3);
            }
            for _ in 1..r {
                let last = *rounds.last().expect("one round at least");
                rounds.push(last.div_ceil(3));
            }
        }
        rounds
    }
}

/// `space`: pointer -> values, sorted by pointer, none a prefix of another.
fn read_space(space: &Value, method: Method) -> Result<Vec<(Pointer, Axis)>, FieldError> {
    let Value::Object(map) = space else {
        return Err(FieldError::shape(
            "/search/space",
            format!("expected an object of pointer: values, found {}", json_type_name(space)),
        ));
    };
    if map.is_empty() {
        return Err(FieldError::invalid("/search/space", "must name at least one hyperparameter"));
    }
    let mut axes = Vec::with_capacity(map.len());
    for (key, spec) in map {
        let at = format!("/search/space/{}", pointer_token(key));
        let pointer = Pointer::parse(key).ok_or_else(|| {
            FieldError::invalid(&at, format!("`{key}` is not a JSON pointer into the body's kernel or params"))
        })?;
        axes.push((pointer, read_axis(spec, method, &at)?));
    }
    axes.sort_by(|a, b| a.0.text.cmp(&b.0.text));
    for (p, _) in &axes {
        if let Some((q, _)) = axes.iter().find(|(q, _)| q != p && p.is_prefix_of(q)) {
            return Err(FieldError::invalid(
                format!("/search/space/{}", pointer_token(&p.text)),
                format!("`{}` contains `{}`, which is searched too; search one or the other", p.text, q.text),
            ));
        }
    }
    Ok(axes)
}

pub(crate) fn read_axis(spec: &Value, method: Method, at: &str) -> Result<Axis, FieldError> {
    let forms = "a list of values, or one of log_grid, grid, log_uniform, uniform, int_uniform";
    match spec {
        Value::Array(values) if values.is_empty() => Err(FieldError::invalid(at, "the list of values is empty")),
        Value::Array(values) => Ok(Axis::List(values.clone())),
        Value::Object(map) if map.len() == 1 => {
            let (form, arg) = map.iter().next().expect("one entry");
            let at = format!("{at}/{}", pointer_token(form));
            let numbers = |len: usize| -> Result<Vec<f64>, FieldError> {
                match arg {
                    Value::Array(items) if items.len() == len => {
                        items.iter().enumerate().map(|(i, v)| crate::spec::as_f64(v, &format!("{at}/{i}"))).collect()
                    }
                    _ => Err(FieldError::shape(&at, format!("expected a list of {len} numbers"))),
                }
            };
            match form.as_str() {
                "log_grid" | "grid" => {
                    let v = numbers(3)?;
                    let log = form == "log_grid";
                    let count = crate::spec::as_u64(&arg[2], &format!("{at}/2"))?;
                    if count == 0 {
                        return Err(FieldError::invalid(format!("{at}/2"), "the count must be at least 1"));
                    }
                    if log && (v[0] <= 0.0 || v[1] <= 0.0) {
                        return Err(FieldError::invalid(&at, "log_grid needs lo > 0 and hi > 0"));
                    }
                    Ok(Axis::Grid { log, lo: v[0], hi: v[1], count })
                }
                "log_uniform" | "uniform" | "int_uniform" => {
                    if !matches!(method, Method::Random | Method::Bayes) {
                        return Err(FieldError::invalid(
                            &at,
                            format!("{form} draws values, which only methods \"random\" and \"bayes\" do"),
                        ));
                    }
                    let v = numbers(2)?;
                    match form.as_str() {
                        "int_uniform" => {
                            let int = |x: f64, i: usize| {
                                if x.fract() == 0.0 && x.abs() <= 2f64.powi(53) {
                                    Ok(x as i64)
                                } else {
                                    Err(FieldError::invalid(format!("{at}/{i}"), "must be an integer"))
                                }
                            };
                            let (lo, hi) = (int(v[0], 0)?, int(v[1], 1)?);
                            if lo > hi {
                                return Err(FieldError::invalid(&at, "needs lo <= hi"));
                            }
                            Ok(Axis::Draw(Draw::IntUniform(lo, hi)))
                        }
                        _ => {
                            if v[0] >= v[1] {
                                return Err(FieldError::invalid(&at, "needs lo < hi"));
                            }
                            if form == "log_uniform" {
                                if v[0] <= 0.0 {
                                    return Err(FieldError::invalid(&at, "log_uniform needs lo > 0"));
                                }
                                Ok(Axis::Draw(Draw::LogUniform(v[0], v[1])))
                            } else {
                                Ok(Axis::Draw(Draw::Uniform(v[0], v[1])))
                            }
                        }
                    }
                }
                other => Err(FieldError::shape(&at, format!("unknown form `{other}`; {forms}"))),
            }
        }
        _ => Err(FieldError::shape(at, format!("expected {forms}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> SearchSpec {
        SearchSpec::from_json(&v).unwrap()
    }

    fn err(v: Value) -> (crate::spec::ErrorKind, String) {
        let e = SearchSpec::from_json(&v).unwrap_err();
        (e.kind, e.pointer)
    }

    /// numpy 2.4's geomspace(0.03125, 32768, 11), as it prints it (bit for bit: numpy
    /// computes 10^(log10 lo + i step) and sets both ends), and linspace(0, 1, 5).
    #[test]
    fn grids_are_numpys() {
        let s =
            spec(json!({"space": {"/params/c": {"log_grid": [0.03125, 32768, 11]}, "/params/x": {"grid": [0, 1, 5]}}}));
        let c: Vec<f64> = (0..11).map(|i| s.axes[0].1.value(i).as_f64().unwrap()).collect();
        let want = [
            0.03125,
            0.12499999999999999,
            0.49999999999999994,
            1.9999999999999993,
            7.999999999999999,
            32.00000000000001,
            127.99999999999986,
            511.99999999999955,
            2047.9999999999989,
            8191.999999999997,
            32768.0,
        ];
        assert_eq!(c, want);
        let x: Vec<f64> = (0..5).map(|i| s.axes[1].1.value(i).as_f64().unwrap()).collect();
        assert_eq!(x, [0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn grid_order_is_by_pointer_the_first_slowest() {
        let s = spec(json!({"space": {"/params/c": [1, 2], "/kernel/gamma": [10, 20, 30]}}));
        assert_eq!(s.axes[0].0.text, "/kernel/gamma");
        let c = s.expand();
        assert_eq!(c.len(), 6);
        assert_eq!(c[0], vec![json!(10), json!(1)]);
        assert_eq!(c[1], vec![json!(10), json!(2)]);
        assert_eq!(c[5], vec![json!(30), json!(2)]);
    }

    #[test]
    fn random_over_lists_draws_distinct_points_and_draws_are_in_range() {
        let s = spec(json!({"method": "random", "candidates": 5, "seed": 3,
                            "space": {"/params/c": [1, 2, 3], "/kernel/gamma": [1, 2]}}));
        let c = s.expand();
        assert_eq!(c.len(), 5);
        for i in 0..c.len() {
            for j in 0..i {
                assert_ne!(c[i], c[j]);
            }
        }
        let all = spec(json!({"method": "random", "candidates": 50, "space": {"/params/c": [1, 2]}}));
        assert_eq!(all.expand().len(), 2, "at most the grid's size");
        let d = spec(json!({"method": "random", "candidates": 200, "seed": 1, "space": {
            "/params/c": {"log_uniform": [1e-3, 1e3]}, "/params/k": {"int_uniform": [2, 4]},
            "/params/u": {"uniform": [-1, 1]}}}));
        let c = d.expand();
        assert_eq!(c.len(), 200);
        let mut ks = std::collections::BTreeSet::new();
        for v in &c {
            assert!((1e-3..=1e3).contains(&v[0].as_f64().unwrap()));
            ks.insert(v[1].as_i64().unwrap());
            assert!((-1.0..1.0).contains(&v[2].as_f64().unwrap()));
        }
        assert_eq!(ks.into_iter().collect::<Vec<_>>(), vec![2, 3, 4], "inclusive ends");
        assert_eq!(d.expand(), c, "seeded");
    }

    #[test]
    fn halving_rounds_follow_the_contract() {
        let s = spec(json!({"method": "halving", "space": {"/params/c": [1]}}));
        assert_eq!(s.rounds(1), vec![1]);
        assert_eq!(s.rounds(2), vec![2]);
        assert_eq!(s.rounds(3), vec![3, 1]);
        assert_eq!(s.rounds(10), vec![10, 4, 2]);
        assert_eq!(s.rounds(27), vec![27, 9, 3, 1]);
        assert_eq!(spec(json!({"space": {"/params/c": [1]}})).rounds(27), vec![27]);
    }

    #[test]
    fn bad_searches_name_their_place() {
        use crate::spec::ErrorKind::{Invalid, Shape};
        assert_eq!(err(json!({})), (Shape, "/search/space".into()));
        assert_eq!(err(json!({"space": {}})), (Invalid, "/search/space".into()));
        assert_eq!(err(json!({"space": {"/x/c": [1]}})), (Invalid, "/search/space/~1x~1c".into()));
        assert_eq!(err(json!({"space": {"/params/c": []}})), (Invalid, "/search/space/~1params~1c".into()));
        assert_eq!(err(json!({"space": {"/params/c": 3}})), (Shape, "/search/space/~1params~1c".into()));
        assert_eq!(
            err(json!({"space": {"/params/c": {"log_grid": [0, 1, 3]}}})),
            (Invalid, "/search/space/~1params~1c/log_grid".into())
        );
        assert_eq!(
            err(json!({"space": {"/params/c": {"uniform": [0, 1]}}})),
            (Invalid, "/search/space/~1params~1c/uniform".into())
        );
        assert_eq!(
            err(json!({"space": {"/kernel": [{"type": "rbf"}], "/kernel/gamma": [1]}})),
            (Invalid, "/search/space/~1kernel".into())
        );
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "cv": 1})), (Invalid, "/search/cv".into()));
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "cv": "all"})), (Invalid, "/search/cv".into()));
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "cv": true})), (Shape, "/search/cv".into()));
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "scoring": "f1"})), (Invalid, "/search/scoring".into()));
        assert_eq!(
            err(json!({"space": {"/params/c": [1]}, "method": "annealing"})),
            (Invalid, "/search/method".into())
        );
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "folds": [0, -1]})), (Shape, "/search/folds/1".into()));
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "extra": 1})), (Shape, "/search/extra".into()));
        assert_eq!(err(json!({"space": {"/params/c": [1]}, "candidates": 0})), (Invalid, "/search/candidates".into()));
    }
}
