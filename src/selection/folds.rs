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
