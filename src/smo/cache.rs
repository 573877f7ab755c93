//! The SMO solver's kernel-column cache: LIBSVM's LRU of column prefixes, bounded in
//! bytes.

/// An LRU cache of column prefixes of Q, in f32 (as LIBSVM: twice the columns per byte,
/// and the solution's accuracy is set by tol, far above f32 round-off). Column i holds
/// positions 0..len(i); asking for a longer prefix extends it.
pub(super) struct ColumnCache {
    columns: Vec<Vec<f32>>,
    /// Doubly linked LRU list over column indices; index n is the sentinel.
    prev: Vec<usize>,
    next: Vec<usize>,
    /// Floats that may still be allocated.
    room: usize,
}

impl ColumnCache {
    pub(super) fn new(n: usize, bytes: usize) -> ColumnCache {
        let floats = (bytes / std::mem::size_of::<f32>()).max(2 * n);
        let mut prev = vec![0; n + 1];
        let mut next = vec![0; n + 1];
        prev[n] = n;
        next[n] = n;
        ColumnCache { columns: vec![Vec::new(); n], prev, next, room: floats }
    }

    fn sentinel(&self) -> usize {
        self.columns.len()
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        self.next[p] = n;
        self.prev[n] = p;
    }

    /// Inserts i as the most recently used.
    fn link_last(&mut self, i: usize) {
        let s = self.sentinel();
        let last = self.prev[s];
        self.next[last] = i;
        self.prev[i] = last;
        self.next[i] = s;
        self.prev[s] = i;
    }

    /// Makes column i hold at least `len` entries, computing the missing tail with
    /// `compute(start, out)` (out = entries start..len), and marks it most recent.
    pub(super) fn fill(&mut self, i: usize, len: usize, compute: impl FnOnce(usize, &mut [f32])) {
        let have = self.columns[i].len();
        if have > 0 {
            self.unlink(i);
        }
        if have < len {
            let more = len - have;
            while self.room < more {
                let s = self.sentinel();
                let victim = self.next[s];
                debug_assert_ne!(victim, s, "the cache always fits two full columns");
                self.unlink(victim);
                self.room += self.columns[victim].len();
                self.columns[victim] = Vec::new();
            }
            self.room -= more;
            let col = &mut self.columns[i];
            col.resize(len, 0.0);
            compute(have, &mut col[have..len]);
        }
        self.link_last(i);
    }

    pub(super) fn get(&self, i: usize, len: usize) -> &[f32] {
        &self.columns[i][..len]
    }

    pub(super) fn pair(&self, i: usize, j: usize, len: usize) -> (&[f32], &[f32]) {
        (&self.columns[i][..len], &self.columns[j][..len])
    }

    /// Follows a swap of positions i and j: the two columns trade places, and every cached
    /// column trades its entries i and j (a column long enough for one but not the other
    /// is dropped).
    pub(super) fn swap(&mut self, i: usize, j: usize) {
        if i == j {
            return;
        }
        for k in [i, j] {
            if !self.columns[k].is_empty() {
                self.unlink(k);
            }
        }
        self.columns.swap(i, j);
        for k in [i, j] {
            if !self.columns[k].is_empty() {
                self.link_last(k);
            }
        }
        let (lo, hi) = (i.min(j), i.max(j));
        let s = self.sentinel();
        let mut h = self.next[s];
        while h != s {
            let following = self.next[h];
            let len = self.columns[h].len();
            if len > lo {
                if len > hi {
                    self.columns[h].swap(lo, hi);
                } else {
                    self.unlink(h);
                    self.room += len;
                    self.columns[h] = Vec::new();
                }
            }
            h = following;
        }
    }
}
