//! exp over the lanes of the kernel maps, whose arguments are never positive (minus a
//! scaled distance, or minus alpha times a logarithm of a number >= 1).
//!
//! The arithmetic is wide's (its range reduction by ln 2 in two parts, the same
//! polynomials, 2^k built in the exponent bits), so that results are bit for bit its own
//! wherever 2^k is a normal number; what is left out is what a kernel never needs:
//! positive overflow, infinities and NaN. wide's general exp spends more than half its
//! instructions on those cases; in the kernel blocks of the conjugate-gradient solver
//! the exponential is most of the time. Below the normal range (x < -708 in double) the
//! double version hands the four lanes to wide's exp, so that results stay wide's
//! everywhere (Nadaraya-Watson tells weights that underflow to 0 from tiny ones); the
//! single version, which only the solver's blocks use, returns 0 below -87.3.

use wide::{f32x8, f64x4, i32x8, i64x4};

/// e^x for x <= 0 (four f64 lanes).
#[inline(always)]
#[allow(clippy::excessive_precision)] // wide's constants, digit for digit
pub fn exp_nonpos4(x: f64x4) -> f64x4 {
    const P: [f64; 12] = [
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362880.0,
        1.0 / 3628800.0,
        1.0 / 39916800.0,
        1.0 / 479001600.0,
        1.0 / 6227020800.0,
    ];
    let c = |i: usize| f64x4::splat(P[i]);
    if x.simd_lt(f64x4::splat(-708.0)).any() {
        return x.exp();
    }
    let r = (x * f64x4::splat(std::f64::consts::LOG2_E)).round_ties_even();
    let y = r.mul_neg_add(f64x4::splat(0.693145751953125), x);
    let y = r.mul_neg_add(f64x4::splat(1.42860682030941723212E-6), y);
    let (y2, y4) = (y * y, y * y * (y * y));
    let y8 = y4 * y4;
    let z = y8.mul_add(
        y4.mul_add(y.mul_add(c(11), c(10)), y2.mul_add(y.mul_add(c(9), c(8)), y.mul_add(c(7), c(6)))),
        y4.mul_add(y2.mul_add(y.mul_add(c(5), c(4)), y.mul_add(c(3), c(2))), y2.mul_add(y.mul_add(c(1), c(0)), y)),
    );
    let biased = r + f64x4::splat(1023.0 + 4503599627370496.0);
    let bits: i64x4 = bytemuck::cast::<f64x4, i64x4>(biased) << 52;
    (z + 1.0) * bytemuck::cast::<i64x4, f64x4>(bits)
}

/// e^x for x <= 0 (eight f32 lanes).
#[inline(always)]
#[allow(clippy::excessive_precision)] // wide's constants, digit for digit
pub fn exp_nonpos8(x: f32x8) -> f32x8 {
    const P: [f32; 6] = [1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0];
    let c = |i: usize| f32x8::splat(P[i]);
    let low = x.simd_lt(f32x8::splat(-87.3));
    let x = x.max(f32x8::splat(-87.3));
    let r = (x * f32x8::splat(std::f32::consts::LOG2_E)).round_ties_even();
    let y = r.mul_neg_add(f32x8::splat(0.693359375), x);
    let y = r.mul_neg_add(f32x8::splat(-2.12194440e-4), y);
    let (y2, y4) = (y * y, y * y * (y * y));
    let z = c(3).mul_add(y, c(2)).mul_add(y2, c(5).mul_add(y, c(4)).mul_add(y4, c(1).mul_add(y, c(0))));
    let z = z.mul_add(y2, y);
    let biased = r + f32x8::splat(127.0 + 8388608.0);
    let bits: i32x8 = bytemuck::cast::<f32x8, i32x8>(biased) << 23;
    low.select(f32x8::splat(0.0), (z + 1.0) * bytemuck::cast::<i32x8, f32x8>(bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit for bit wide's exp across the normal range, and the clamp below it.
    #[test]
    fn equals_wides_exp_on_the_normal_range() {
        let mut x = 0.0f64;
        while x > -700.0 {
            let v = f64x4::new([x, x * 0.37, x * 0.011, -x * 1e-9]);
            let v = v.min(f64x4::splat(0.0));
            assert_eq!(exp_nonpos4(v).to_array(), v.exp().to_array(), "{x}");
            let w =
                f32x8::new([(x as f32).max(-87.0), (x * 0.1) as f32, (x * 0.01) as f32, 0.0, -1e-7, -0.5, -3.0, -80.0]);
            assert_eq!(exp_nonpos8(w).to_array(), w.exp().to_array(), "{x}");
            x -= 0.731;
        }
        // Below the normal range: wide's own (subnormals, then 0) in double; 0 in single.
        for x in [-708.5, -720.0, -745.0, -800.0, -1e6] {
            let v = f64x4::new([x, -1.0, 0.0, x]);
            assert_eq!(exp_nonpos4(v).to_array(), v.exp().to_array(), "{x}");
        }
        assert_eq!(exp_nonpos8(f32x8::splat(-90.0)).to_array()[0], 0.0);
        assert_eq!(exp_nonpos8(f32x8::splat(-1e6)).to_array()[0], 0.0);
    }
}
