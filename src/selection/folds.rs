//! Which rows each cross-validation fold holds out: scikit-learn's `KFold` and
//! `StratifiedKFold` assignments (without shuffling, the same rows scikit-learn picks, so
//! that every fold score can be reproduced there), a seeded shuffle, explicit fold
//! numbers (`PredefinedSplit`) and leave-one-out.

use crate::optimize::SplitMix64;

/// The held-out rows of every fold, each list ascending; a fold's training rows are
/// the others, ascending (as scikit-learn yields them).
#[derive(Debug, Clone, PartialEq)]
pub struct Folds {
    n: usize,
    test: Vec<Vec<usize>>,
}

impl Folds {
    /// `KFold(k)`: contiguous blocks in row order, the first n mod k one row larger. With
    /// `shuffle`, the rows are permuted with `seed` first.
    pub fn kfold(n: usize, k: usize, shuffle: Option<u64>) -> Folds {
        let mut order: Vec<usize> = (0..n).collect();
        if let Some(seed) = shuffle {
            permute(&mut order, seed);
        }
        let mut test = Vec::with_capacity(k);
        let mut start = 0;
        for f in 0..k {
            let size = n / k + usize::from(f < n % k);
            let mut rows = order[start..start + size].to_vec();
            rows.sort_unstable();
            test.push(rows);
            start += size;
        }
        Folds { n, test }
    }

    /// `StratifiedKFold(k)`: scikit-learn's assignment (`_make_test_folds`). Classes are
    /// numbered by first appearance; the sorted codes are dealt round robin to the folds,
    /// which fixes how many rows of each class each fold gets; each class's rows, in row
    /// order, then take their fold numbers in blocks (shuffled within the class with
    /// `shuffle`). `y` holds each row's class index.
    pub fn stratified(y: &[usize], k: usize, shuffle: Option<u64>) -> Folds {
        let n = y.len();
        let classes = y.iter().max().map_or(0, |m| m + 1);
        // Codes by first appearance.
        let mut code = vec![usize::MAX; classes];
        let mut next = 0;
        for &c in y {
            if code[c] == usize::MAX {
                code[c] = next;
                next += 1;
            }
        }
        let encoded: Vec<usize> = y.iter().map(|&c| code[c]).collect();
        let mut sorted = encoded.clone();
        sorted.sort_unstable();
        // allocation[f][c]: rows of class c in fold f.
        let mut allocation = vec![vec![0usize; next]; k];
        for (i, &c) in sorted.iter().enumerate() {
            allocation[i % k][c] += 1;
        }
        let mut rng = shuffle.map(SplitMix64::new);
        let mut fold_of = vec![0usize; n];
        for c in 0..next {
            let mut numbers: Vec<usize> =
                allocation.iter().enumerate().flat_map(|(f, per_class)| std::iter::repeat_n(f, per_class[c])).collect();
            if let Some(rng) = rng.as_mut() {
                shuffle_with(&mut numbers, rng);
            }
            let rows = (0..n).filter(|&i| encoded[i] == c);
            for (row, f) in rows.zip(numbers) {
                fold_of[row] = f;
            }
        }
        Folds::from_assignment(&fold_of, k)
    }

    /// Explicit fold numbers 0..k-1, one per row (`PredefinedSplit`).
    pub fn from_assignment(fold_of: &[usize], k: usize) -> Folds {
        let mut test = vec![Vec::new(); k];
        for (row, &f) in fold_of.iter().enumerate() {
            test[f].push(row);
        }
        Folds { n: fold_of.len(), test }
    }

    /// n folds of one row each.
    pub fn leave_one_out(n: usize) -> Folds {
        Folds { n, test: (0..n).map(|i| vec![i]).collect() }
    }

    pub fn k(&self) -> usize {
        self.test.len()
    }

    pub fn n(&self) -> usize {
        self.n
    }

    pub fn test(&self, fold: usize) -> &[usize] {
        &self.test[fold]
    }

    /// The rows fold `fold` trains on, ascending.
    pub fn train(&self, fold: usize) -> Vec<usize> {
        let mut held = vec![false; self.n];
        for &i in &self.test[fold] {
            held[i] = true;
        }
        (0..self.n).filter(|&i| !held[i]).collect()
    }
}

/// A seeded Fisher-Yates permutation of `rows`.
/// The rows of a training fold that a halving round fits on: `k` of `train` (ascending)
/// drawn at random with `seed`, as scikit-learn's HalvingGridSearchCV resamples each
/// split, rather than its first `k` (which on sorted data are one class). With `classes`
/// (each row's class index, classifiers) the draw is stratified: each class gets its
/// share of `k` (the floors of k n_c / m, the remainder to the largest fractions, ties to
/// the class seen first), at least one row of every class when `k` allows. The draws
/// of one seed are nested: a later round's rows include an earlier round's. Ascending.
pub fn subsample(train: &[usize], k: usize, seed: u64, classes: Option<&[usize]>) -> Vec<usize> {
    let m = train.len();
    if k >= m {
        return train.to_vec();
    }
    let mut rng = SplitMix64::new(seed);
    let mut out = match classes {
        None => {
            let mut order = train.to_vec();
            shuffle_with(&mut order, &mut rng);
            order.truncate(k);
            order
        }
        Some(y) => {
            // The fold's classes in order of first appearance, each with its rows.
            let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
            for &r in train {
                match groups.iter_mut().find(|(c, _)| *c == y[r]) {
                    Some((_, rows)) => rows.push(r),
                    None => groups.push((y[r], vec![r])),
                }
            }
            let exact: Vec<f64> = groups.iter().map(|(_, rows)| k as f64 * rows.len() as f64 / m as f64).collect();
            let mut take: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
            let mut by_fraction: Vec<usize> = (0..groups.len()).collect();
            by_fraction.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
            let mut left = k - take.iter().sum::<usize>();
            // Every class once if k allows (a fit needs two classes), then the fractions.
            for &g in &by_fraction {
                if left > 0 && take[g] == 0 && k >= groups.len() {
                    take[g] = 1;
                    left -= 1;
                }
            }
            for &g in by_fraction.iter().cycle().take(by_fraction.len() * 2) {
                if left > 0 && take[g] < groups[g].1.len() {
                    take[g] += 1;
                    left -= 1;
                }
            }
            // Over-assigned by the "every class once" rule: take back from the largest.
            while take.iter().sum::<usize>() > k {
                let g = (0..take.len()).max_by_key(|&g| take[g]).expect("a class");
                take[g] -= 1;
            }
            let mut out = Vec::with_capacity(k);
            for ((_, mut rows), n) in groups.into_iter().zip(take) {
                shuffle_with(&mut rows, &mut rng);
                out.extend_from_slice(&rows[..n]);
            }
            out
        }
    };
    out.sort_unstable();
    out
}

fn permute(rows: &mut [usize], seed: u64) {
    shuffle_with(rows, &mut SplitMix64::new(seed));
}

fn shuffle_with<T>(items: &mut [T], rng: &mut SplitMix64) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::subsample;

    /// Sorted two-class rows: the first rows are one class, a halving draw holds both in
    /// proportion; draws are seeded, nested across rounds and within the fold.
    #[test]
    fn halving_draws_are_seeded_stratified_and_nested() {
        let y: Vec<usize> = (0..90).map(|i| usize::from(i >= 60)).collect();
        let train: Vec<usize> = (0..90).filter(|i| i % 3 != 0).collect();
        let small = subsample(&train, 10, 7, Some(&y));
        assert_eq!(small.len(), 10);
        let ones = small.iter().filter(|&&r| y[r] == 1).count();
        assert_eq!(ones, 3, "a third of the fold is class 1: {small:?}");
        assert!(small.windows(2).all(|w| w[0] < w[1]) && small.iter().all(|r| train.contains(r)));
        assert_eq!(small, subsample(&train, 10, 7, Some(&y)), "seeded");
        assert_ne!(small, subsample(&train, 10, 8, Some(&y)), "another seed, other rows");
        let larger = subsample(&train, 30, 7, Some(&y));
        assert!(small.iter().all(|r| larger.contains(r)), "nested: {small:?} in {larger:?}");
        // Two rows: one of each class.
        let two = subsample(&train, 2, 7, Some(&y));
        assert_eq!(two.iter().map(|&r| y[r]).sum::<usize>(), 1, "{two:?}");
        // Regression: a random draw, not the first rows.
        let plain = subsample(&train, 10, 7, None);
        assert_eq!(plain.len(), 10);
        assert_ne!(plain, train[..10].to_vec());
        assert_eq!(subsample(&train, 60, 7, None), train, "every row: the fold itself");
    }

    use super::*;

    #[test]
    fn kfold_blocks_are_contiguous_the_first_ones_larger() {
        let f = Folds::kfold(10, 3, None);
        assert_eq!(f.test(0), &[0, 1, 2, 3]);
        assert_eq!(f.test(1), &[4, 5, 6]);
        assert_eq!(f.test(2), &[7, 8, 9]);
        assert_eq!(f.train(1), vec![0, 1, 2, 3, 7, 8, 9]);
        let s = Folds::kfold(10, 3, Some(7));
        let mut all: Vec<usize> = (0..3).flat_map(|i| s.test(i).to_vec()).collect();
        assert_eq!(s.test(0).len(), 4);
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>(), "a shuffle still partitions the rows");
        assert_ne!(s, f);
    }

    /// The values scikit-learn 1.9's StratifiedKFold(3).split gives for
    /// y = [1, 1, 0, 0, 1, 0, 2, 1, 0, 1] (printed by it, classes first seen in the order
    /// 1, 0, 2).
    #[test]
    fn stratified_matches_scikit_learn() {
        let y = [1, 1, 0, 0, 1, 0, 2, 1, 0, 1];
        let f = Folds::stratified(&y, 3, None);
        assert_eq!(f.test(0), &[0, 1, 2, 6]);
        assert_eq!(f.test(1), &[3, 4, 7]);
        assert_eq!(f.test(2), &[5, 8, 9]);
    }

    #[test]
    fn explicit_folds_and_leave_one_out() {
        let f = Folds::from_assignment(&[1, 0, 1, 2, 0], 3);
        assert_eq!((f.test(0), f.test(1), f.test(2)), (&[1, 4][..], &[0, 2][..], &[3][..]));
        let l = Folds::leave_one_out(3);
        assert_eq!((l.k(), l.test(2), l.train(0)), (3, &[2][..], vec![1, 2]));
    }
}
