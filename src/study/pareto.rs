//! Several objectives: which trials are non-dominated, the hypervolume they dominate, and
//! the random scalarisation (ParEGO) that turns them into the one value a suggestion
//! models.
//!
//! Everything here is oriented "greater is better" (a minimised objective negated), so
//! that a reference point is a lower corner and a point dominates another when it is at
//! least as large in every objective and larger in one.

use crate::optimize::SplitMix64;

/// The weight of the sum in the augmented Chebyshev scalarisation (Knowles 2006's rho).
const RHO: f64 = 0.05;

/// Whether `a` dominates `b`.
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x >= y) && a.iter().zip(b).any(|(x, y)| x > y)
}

/// Indices of the non-dominated points, in their order (equal points all kept). In
/// lexicographically descending order a point can be dominated only by one before it,
/// and then by one of the front found so far: O(n log n + n f) for a front of f.
pub fn front(points: &[Vec<f64>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        let first_difference = points[b].iter().zip(&points[a]).map(|(x, y)| x.total_cmp(y)).find(|o| o.is_ne());
        first_difference.unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        if !kept.iter().any(|&k| dominates(&points[k], &points[i])) {
            kept.push(i);
        }
    }
    kept.sort_unstable();
    kept
}

/// Front points and objectives beyond which the exact hypervolume is not computed:
/// slicing costs about f^(m-1) log f, and a study may hold 100,000 trials.
const EXACT_WORK: f64 = 1e8;
/// Seeded draws of the estimate beyond EXACT_WORK (a relative error of about 0.2%).
const DRAWS: usize = 1 << 18;

/// The volume between `reference` (a lower corner) and the union of the boxes the points
/// dominate; points not above the reference in every objective add nothing. Exact, by
/// slicing along the last objective (two objectives: the staircase), while f^(m-1) for f
/// front points and m objectives stays below 1e8; beyond, a seeded Monte Carlo estimate
/// over the box from the reference to the front's best values.
pub fn hypervolume(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let above: Vec<Vec<f64>> = points.iter().filter(|p| p.iter().zip(reference).all(|(x, r)| x > r)).cloned().collect();
    let kept: Vec<Vec<f64>> = front(&above).into_iter().map(|i| above[i].clone()).collect();
    let m = reference.len();
    if m > 2 && (kept.len() as f64).powi(m as i32 - 1) > EXACT_WORK {
        return estimate(&kept, reference);
    }
    slice(kept, reference)
}

/// The fraction of DRAWS uniform points of the box [reference, best] that some point
/// dominates, times the box's volume.
fn estimate(points: &[Vec<f64>], reference: &[f64]) -> f64 {
    let m = reference.len();
    let best: Vec<f64> = (0..m).map(|j| points.iter().map(|p| p[j]).fold(f64::NEG_INFINITY, f64::max)).collect();
    let volume: f64 = best.iter().zip(reference).map(|(b, r)| b - r).product();
    let mut rng = SplitMix64::new(0x4856_0001);
    let mut x = vec![0.0; m];
    let mut inside = 0usize;
    for _ in 0..DRAWS {
        for (j, v) in x.iter_mut().enumerate() {
            *v = rng.uniform(reference[j], best[j]);
        }
        inside += usize::from(points.iter().any(|p| p.iter().zip(&x).all(|(a, b)| a >= b)));
    }
    volume * inside as f64 / DRAWS as f64
}

fn slice(mut points: Vec<Vec<f64>>, reference: &[f64]) -> f64 {
    let m = reference.len();
    if points.is_empty() {
        return 0.0;
    }
    if m == 1 {
        return points.iter().map(|p| p[0]).fold(f64::NEG_INFINITY, f64::max) - reference[0];
    }
    if m == 2 {
        // The staircase: highest first objective first, each point adding the strip
        // above the highest second objective so far.
        points.sort_by(|a, b| b[0].total_cmp(&a[0]));
        let (mut total, mut floor) = (0.0, reference[1]);
        for p in &points {
            if p[1] > floor {
                total += (p[0] - reference[0]) * (p[1] - floor);
                floor = p[1];
            }
        }
        return total;
    }
    // Highest last coordinate first: the slab between consecutive levels is covered by
    // the points at or above it, projected onto the first m - 1 objectives.
    points.sort_by(|a, b| b[m - 1].total_cmp(&a[m - 1]));
    let mut total = 0.0;
    for i in 0..points.len() {
        let below = points.get(i + 1).map_or(reference[m - 1], |p| p[m - 1]);
        let depth = points[i][m - 1] - below;
        if depth > 0.0 {
            let projected: Vec<Vec<f64>> = points[..=i].iter().map(|p| p[..m - 1].to_vec()).collect();
            let kept: Vec<Vec<f64>> = front(&projected).into_iter().map(|j| projected[j].clone()).collect();
            total += depth * slice(kept, &reference[..m - 1]);
        }
    }
    total
}

/// A reference point derived from the points: their worst value in each objective,
/// pushed out by a tenth of the objective's range (by 1 where the range is 0).
pub fn derived_reference(points: &[Vec<f64>], m: usize) -> Vec<f64> {
    (0..m)
        .map(|j| {
            let lo = points.iter().map(|p| p[j]).fold(f64::INFINITY, f64::min);
            let hi = points.iter().map(|p| p[j]).fold(f64::NEG_INFINITY, f64::max);
            let margin = if hi > lo { 0.1 * (hi - lo) } else { 1.0 };
            lo - margin
        })
        .collect()
}

/// Weights drawn uniformly from the simplex (Dirichlet(1, ..., 1)).
pub fn weights(m: usize, rng: &mut SplitMix64) -> Vec<f64> {
    let raw: Vec<f64> = (0..m).map(|_| -(1.0 - rng.uniform(0.0, 1.0)).ln()).collect();
    let total: f64 = raw.iter().sum();
    raw.iter().map(|w| w / total).collect()
}

/// ParEGO's augmented Chebyshev scalarisation of each point, "greater is better": every
/// objective is rescaled to its distance from the best value seen, 0 at the best and 1
/// at the worst, and a point scores -(max_j w_j c_j + rho sum_j w_j c_j).
pub fn scalarised(points: &[Vec<f64>], weights: &[f64]) -> Vec<f64> {
    let m = weights.len();
    let hi: Vec<f64> = (0..m).map(|j| points.iter().map(|p| p[j]).fold(f64::NEG_INFINITY, f64::max)).collect();
    let lo: Vec<f64> = (0..m).map(|j| points.iter().map(|p| p[j]).fold(f64::INFINITY, f64::min)).collect();
    points
        .iter()
        .map(|p| {
            let c: Vec<f64> = (0..m)
                .map(|j| if hi[j] > lo[j] { weights[j] * (hi[j] - p[j]) / (hi[j] - lo[j]) } else { 0.0 })
                .collect();
            -(c.iter().copied().fold(0.0, f64::max) + RHO * c.iter().sum::<f64>())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_keeps_the_non_dominated_points() {
        let p = vec![vec![1.0, 5.0], vec![2.0, 4.0], vec![1.5, 3.0], vec![3.0, 1.0], vec![3.0, 1.0], vec![0.0, 0.0]];
        assert_eq!(front(&p), vec![0, 1, 3, 4]);
        // Against the definition, on random points in 3 objectives (with ties).
        let mut rng = SplitMix64::new(2);
        let q: Vec<Vec<f64>> = (0..300).map(|_| (0..3).map(|_| rng.uniform(0.0, 4.0).round()).collect()).collect();
        let naive: Vec<usize> = (0..q.len()).filter(|&i| !q.iter().any(|o| dominates(o, &q[i]))).collect();
        assert_eq!(front(&q), naive);
        assert!(dominates(&[2.0, 4.0], &[1.5, 3.0]));
        assert!(!dominates(&[3.0, 1.0], &[3.0, 1.0]));
    }

    /// Boxes counted by hand, and against a Monte Carlo estimate in 3 and 4 objectives.
    #[test]
    fn hypervolumes_match_their_boxes_and_a_monte_carlo_count() {
        // Two objectives, reference (0, 0): boxes 1x5, 2x4, 3x1 overlap in a staircase:
        // 3*1 + 2*(4-1) + 1*(5-4) = 3 + 6 + 1 = 10.
        let p = vec![vec![1.0, 5.0], vec![2.0, 4.0], vec![3.0, 1.0], vec![-1.0, 9.0]];
        assert!((hypervolume(&p, &[0.0, 0.0]) - 10.0).abs() < 1e-12);
        assert_eq!(hypervolume(&[], &[0.0, 0.0]), 0.0);
        // The staircase against a fine grid's count, and the estimate against the exact value.
        let mut rng = SplitMix64::new(11);
        let two: Vec<Vec<f64>> = (0..40).map(|_| vec![rng.uniform(0.0, 1.0), rng.uniform(0.0, 1.0)]).collect();
        let n = 2000;
        let mut hits = 0;
        for i in 0..n {
            for j in 0..n {
                let (x, y) = ((i as f64 + 0.5) / n as f64, (j as f64 + 0.5) / n as f64);
                hits += usize::from(two.iter().any(|p| p[0] >= x && p[1] >= y));
            }
        }
        let by_grid = hits as f64 / (n * n) as f64;
        assert!((hypervolume(&two, &[0.0, 0.0]) - by_grid).abs() < 2e-3);
        let four: Vec<Vec<f64>> = (0..30).map(|_| (0..4).map(|_| rng.uniform(0.0, 1.0)).collect()).collect();
        let kept: Vec<Vec<f64>> = front(&four).into_iter().map(|i| four[i].clone()).collect();
        let (exact, guess) = (slice(kept.clone(), &[0.0; 4]), estimate(&kept, &[0.0; 4]));
        assert!((exact - guess).abs() < 0.01 * exact, "{exact} against {guess}");
        for m in [3usize, 4] {
            let mut rng = SplitMix64::new(m as u64);
            let pts: Vec<Vec<f64>> = (0..12).map(|_| (0..m).map(|_| rng.uniform(0.0, 1.0)).collect()).collect();
            let exact = hypervolume(&pts, &vec![0.0; m]);
            let draws = 200_000;
            let inside = (0..draws)
                .filter(|_| {
                    let x: Vec<f64> = (0..m).map(|_| rng.uniform(0.0, 1.0)).collect();
                    pts.iter().any(|p| p.iter().zip(&x).all(|(a, b)| a >= b))
                })
                .count();
            let estimate = inside as f64 / draws as f64;
            assert!((exact - estimate).abs() < 0.01, "{m} objectives: {exact} against {estimate}");
        }
    }

    #[test]
    fn scalarisations_rank_the_best_trade_off_first_and_weights_sum_to_one() {
        let mut rng = SplitMix64::new(1);
        let w = weights(3, &mut rng);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12 && w.iter().all(|&x| x > 0.0));
        let p = vec![vec![0.0, 10.0], vec![10.0, 0.0], vec![6.0, 6.0], vec![1.0, 1.0]];
        let s = scalarised(&p, &[0.5, 0.5]);
        assert_eq!(crate::estimator::first_max(s.iter().copied()), 2, "{s:?}");
        assert!(s[3] < s[2]);
        let r = derived_reference(&p, 2);
        assert_eq!(r, vec![-1.0, -1.0]);
    }
}
