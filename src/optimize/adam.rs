//! Adam (Kingma & Ba 2015), maximising: the stochastic optimiser of a variational GP's
//! hyperparameters and inducing locations, where every gradient is a minibatch estimate
//! and a line search would chase noise. Coordinates may carry bounds; a step that leaves
//! them is clipped back (the hyperparameters live in log space, as in the L-BFGS-B
//! searches).

/// Adam's state over a fixed set of coordinates.
#[derive(Debug, Clone)]
pub struct Adam {
    rate: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    steps: i32,
}

impl Adam {
    /// Adam with the usual moments (0.9, 0.999) and epsilon 1e-8 over `n` coordinates.
    pub fn new(n: usize, rate: f64) -> Adam {
        Adam { rate, beta1: 0.9, beta2: 0.999, eps: 1e-8, m: vec![0.0; n], v: vec![0.0; n], steps: 0 }
    }

    /// One ascent step of `x` along `grad` (the gradient of what is maximised); entries
    /// of `bounds` (one per coordinate, or none) clip the result.
    pub fn ascend(&mut self, x: &mut [f64], grad: &[f64], bounds: Option<&[(f64, f64)]>) {
        assert_eq!(x.len(), self.m.len());
        assert_eq!(grad.len(), self.m.len());
        self.steps = self.steps.saturating_add(1);
        let (c1, c2) = (1.0 - self.beta1.powi(self.steps), 1.0 - self.beta2.powi(self.steps));
        for i in 0..x.len() {
            let g = if grad[i].is_finite() { grad[i] } else { 0.0 };
            self.m[i] = self.beta1 * self.m[i] + (1.0 - self.beta1) * g;
            self.v[i] = self.beta2 * self.v[i] + (1.0 - self.beta2) * g * g;
            let step = self.rate * (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + self.eps);
            x[i] += step;
            if let Some(b) = bounds {
                x[i] = x[i].clamp(b[i].0, b[i].1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Noisy gradients of a concave quadratic: Adam ends near its maximum, and bounds hold.
    #[test]
    fn climbs_a_noisy_quadratic_within_bounds() {
        let mut rng = super::super::SplitMix64::new(3);
        let mut x = vec![3.0, -2.0];
        let mut adam = Adam::new(2, 0.05);
        for _ in 0..3000 {
            let g = [-(x[0] - 1.0) + 0.1 * rng.normal(), -4.0 * (x[1] + 0.5) + 0.1 * rng.normal()];
            adam.ascend(&mut x, &g, None);
        }
        assert!((x[0] - 1.0).abs() < 0.05 && (x[1] + 0.5).abs() < 0.05, "{x:?}");
        let mut y = vec![0.0];
        let mut adam = Adam::new(1, 0.5);
        for _ in 0..100 {
            adam.ascend(&mut y, &[1.0], Some(&[(-1.0, 0.7)]));
        }
        assert_eq!(y[0], 0.7);
    }
}
