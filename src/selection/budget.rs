//! What a search may use besides its fit context: the cores other jobs leave it, and the
//! memory shared Gram tables may take (and so which tables a search over n rows holds).

use crate::kernel::GramTable;

/// Which shared Gram tables a search over n rows uses within a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tables {
    /// Whole tables, for every model that reads one.
    pub whole: bool,
    /// Lazy tables, for the SVMs, when a whole one does not fit.
    pub lazy: bool,
}

impl Tables {
    /// The fewest columns a lazy table is worth holding: a thousand (the support
    /// vectors' columns of most fits), or a quarter of small sets.
    const LAZY_MIN_COLUMNS: usize = 1024;

    pub fn for_budget(n: usize, budget: u64) -> Tables {
        let whole = GramTable::bytes(n) <= budget;
        let lazy = !whole && GramTable::lazy_capacity(n, budget) >= Tables::LAZY_MIN_COLUMNS.min(n / 4).max(1);
        Tables { whole, lazy }
    }
}

/// What the search may use besides its fit context.
#[derive(Debug, Clone, Copy)]
pub struct Environment {
    /// Other CPU-heavy jobs running now (the search then runs its fits one at a time on
    /// one core).
    pub busy: usize,
    /// Bytes shared Gram tables may take (0: no table).
    pub table_budget: u64,
    /// The eigen path for lambda / noise sweeps (on in the service; off only to measure
    /// what it gives).
    pub eigen: bool,
}

impl Environment {
    /// Every reuse on: what the service runs.
    pub fn new(busy: usize, table_budget: u64) -> Environment {
        Environment { busy, table_budget, eigen: true }
    }
}
