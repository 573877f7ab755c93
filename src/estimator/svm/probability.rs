//! Platt scaling and pairwise coupling: LIBSVM's class probabilities from decision
//! values.

/// Pairwise probabilities are kept inside [MIN_PROB, 1 - MIN_PROB] (LIBSVM's clip).
pub(super) const MIN_PROB: f64 = 1e-7;

/// P(y = +1 | f) = 1 / (1 + exp(A f + B)) (LIBSVM's sigmoid_predict, to the bit).
pub(super) fn sigmoid_predict(f: f64, a: f64, b: f64) -> f64 {
    crate::estimator::sigmoid(-(f * a + b))
}

/// Platt's sigmoid fitted to decision values `dec` and labels `y` (+-1) by Newton's
/// method with backtracking on the regularised targets (Lin, Lin & Weng 2007).
pub(crate) fn sigmoid_train(dec: &[f64], y: &[f64]) -> (f64, f64) {
    let prior1 = y.iter().filter(|&&v| v > 0.0).count() as f64;
    let prior0 = y.len() as f64 - prior1;
    let (max_iter, min_step, sigma, eps) = (100, 1e-10, 1e-12, 1e-5);
    let hi = (prior1 + 1.0) / (prior1 + 2.0);
    let lo = 1.0 / (prior0 + 2.0);
    let t: Vec<f64> = y.iter().map(|&v| if v > 0.0 { hi } else { lo }).collect();
    let objective = |a: f64, b: f64| -> f64 {
        dec.iter()
            .zip(&t)
            .map(|(&f, &ti)| {
                let z = f * a + b;
                if z >= 0.0 {
                    ti * z + (-z).exp().ln_1p()
                } else {
                    (ti - 1.0) * z + z.exp().ln_1p()
                }
            })
            .sum()
    };
    let (mut a, mut b) = (0.0, ((prior0 + 1.0) / (prior1 + 1.0)).ln());
    let mut fval = objective(a, b);
    for _ in 0..max_iter {
        let (mut h11, mut h22, mut h21, mut g1, mut g2) = (sigma, sigma, 0.0, 0.0, 0.0);
        for (&f, &ti) in dec.iter().zip(&t) {
            let z = f * a + b;
            let (p, q) = if z >= 0.0 {
                ((-z).exp() / (1.0 + (-z).exp()), 1.0 / (1.0 + (-z).exp()))
            } else {
                (1.0 / (1.0 + z.exp()), z.exp() / (1.0 + z.exp()))
            };
            let d2 = p * q;
            h11 += f * f * d2;
            h22 += d2;
            h21 += f * d2;
            let d1 = ti - p;
            g1 += f * d1;
            g2 += d1;
        }
        if g1.abs() < eps && g2.abs() < eps {
            break;
        }
        let det = h11 * h22 - h21 * h21;
        let da = -(h22 * g1 - h21 * g2) / det;
        let db = -(-h21 * g1 + h11 * g2) / det;
        let gd = g1 * da + g2 * db;
        let mut step = 1.0;
        while step >= min_step {
            let (na, nb) = (a + step * da, b + step * db);
            let nf = objective(na, nb);
            if nf < fval + 1e-4 * step * gd {
                (a, b, fval) = (na, nb, nf);
                break;
            }
            step /= 2.0;
        }
        if step < min_step {
            break;
        }
    }
    (a, b)
}

/// Class probabilities from pairwise ones r[i][j] = P(i | i or j) (Wu, Lin & Weng 2004,
/// method 2, by LIBSVM's fixed-point iteration).
#[allow(clippy::needless_range_loop)]
pub(crate) fn pairwise_coupling(r: &[Vec<f64>]) -> Vec<f64> {
    let k = r.len();
    let mut q = vec![vec![0.0; k]; k];
    for t in 0..k {
        for j in 0..k {
            if j != t {
                q[t][t] += r[j][t] * r[j][t];
                q[t][j] = -r[j][t] * r[t][j];
            }
        }
    }
    let mut p = vec![1.0 / k as f64; k];
    let mut qp = vec![0.0; k];
    let eps = 0.005 / k as f64;
    for _ in 0..100.max(k) {
        let mut pqp = 0.0;
        for t in 0..k {
            qp[t] = (0..k).map(|j| q[t][j] * p[j]).sum();
            pqp += p[t] * qp[t];
        }
        let max_error = qp.iter().map(|v| (v - pqp).abs()).fold(0.0, f64::max);
        if max_error < eps {
            break;
        }
        for t in 0..k {
            let diff = (-qp[t] + pqp) / q[t][t];
            p[t] += diff;
            pqp = (pqp + diff * (diff * q[t][t] + 2.0 * qp[t])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[t][j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairwise probabilities made from known class probabilities are coupled back to them.
    #[test]
    fn pairwise_coupling_recovers_consistent_probabilities() {
        let p = [0.5, 0.3, 0.15, 0.05];
        let r: Vec<Vec<f64>> =
            (0..4).map(|i| (0..4).map(|j| if i == j { 0.0 } else { p[i] / (p[i] + p[j]) }).collect()).collect();
        let q = pairwise_coupling(&r);
        assert!((q.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for (a, b) in q.iter().zip(&p) {
            assert!((a - b).abs() < 1e-3, "{q:?} vs {p:?}");
        }
    }

    /// At Platt's fitted (A, B) the gradient of the regularised log loss, computed here
    /// from its definition, vanishes.
    #[test]
    fn sigmoid_train_reaches_a_stationary_point() {
        let dec: Vec<f64> = (0..200).map(|i| (i as f64 - 100.0) / 25.0).collect();
        // Labels from a noisy threshold: mostly positive for large decision values.
        let y: Vec<f64> = (0..200).map(|i| if (i * 37) % 200 < 2 * i.min(100) { 1.0 } else { -1.0 }).collect();
        let (a, b) = sigmoid_train(&dec, &y);
        assert!(a < 0.0, "larger decision values are more likely positive: A = {a}");
        let (n1, n0) = (y.iter().filter(|&&v| v > 0.0).count() as f64, y.iter().filter(|&&v| v < 0.0).count() as f64);
        let (mut ga, mut gb) = (0.0, 0.0);
        for (f, yi) in dec.iter().zip(&y) {
            let t = if *yi > 0.0 { (n1 + 1.0) / (n1 + 2.0) } else { 1.0 / (n0 + 2.0) };
            let p = 1.0 / (1.0 + (a * f + b).exp());
            ga += f * (t - p);
            gb += t - p;
        }
        assert!(ga.abs() < 1e-4 && gb.abs() < 1e-4, "gradient ({ga}, {gb})");
    }

    #[test]
    fn sigmoid_predict_is_stable_at_extremes() {
        assert_eq!(sigmoid_predict(1e6, 1.0, 0.0), 0.0);
        assert_eq!(sigmoid_predict(-1e6, 1.0, 0.0), 1.0);
        assert!((sigmoid_predict(0.0, 1.0, 0.0) - 0.5).abs() < 1e-15);
    }
}
