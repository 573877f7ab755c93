//! The catalogue: every model kind once, with its name, its task and what it can do.
//!
//! Capabilities are declared here, once, the way scikit-learn's estimator tags declare
//! them, and asked everywhere above: the service and the model search never test a
//! kind's name. A new kind is one row of [`catalogue!`]'s table: the enum, [`ModelKind::ALL`],
//! the names and [`ModelKind::entry`] all come from it, so a kind cannot be half listed.
//! What a capability promises is checked for every kind by `tests/catalogue.rs`.

use serde::{Serialize, Serializer};

/// What a kind learns from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Regression,
    Classification,
    /// No targets: inliers against outliers (one_class_svm).
    Novelty,
    /// No targets: rows mapped to components (kernel_pca).
    Transform,
}

/// Whether a kind takes `kernel: "precomputed"`, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precomputed {
    Takes,
    /// The reason, after the kind's name: "gaussian_process needs ...".
    Refused(&'static str),
}

const SELF_KERNEL: Precomputed =
    Precomputed::Refused("needs k(x, x) at a query, which a precomputed kernel does not have");
const AS_POINTS: Precomputed = Precomputed::Refused("needs rows as points, which a precomputed kernel does not have");

/// What a kind can do beyond fit and predict (or transform). Every flag is false and
/// every kernel is taken unless its row says otherwise.
///
/// A flag says what the kind can do in some form; what one fit of it can do is the
/// fitted model's to say. Appends need an exact fit (`Fitted::online`); a variational
/// `gaussian_process` has a posterior (variance, covariance, joint draws) with the
/// Gaussian likelihood only, its student_t and poisson fits a predictive variance but no
/// joint covariance (`Fitted::posterior_refused`); a variational `gp_classifier` gives
/// probabilities as the exact one does; neither variational form appends or takes
/// several outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// A 2-D y: several outputs over one kernel.
    pub several_outputs: bool,
    /// Rows appended to an exact fit (`POST /models/{id}/observations`).
    pub appends: bool,
    /// `approximation: nystrom` (and `auto`, which may resolve to it).
    pub nystrom: bool,
    /// `approximation: variational` (a stochastic variational GP; `auto` resolves to it
    /// where the kind has no nystrom form).
    pub variational: bool,
    /// Class probabilities (always, or as the kind's params ask: the svm's `probability`).
    pub probabilities: bool,
    /// A predictive variance and covariance, and joint posterior draws.
    pub posterior: bool,
    /// `transform` (and inverse) instead of predict.
    pub transform: bool,
    /// `kernel: "precomputed"`.
    pub precomputed_kernel: Precomputed,
}

impl Capabilities {
    const NONE: Capabilities = Capabilities {
        several_outputs: false,
        appends: false,
        nystrom: false,
        variational: false,
        probabilities: false,
        posterior: false,
        transform: false,
        precomputed_kernel: Precomputed::Takes,
    };
}

/// One row of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The contract's `model` name.
    pub name: &'static str,
    pub task: Task,
    pub can: Capabilities,
}

/// The table: `Kind = "name", Task { capability: value, ... };`, one row per kind.
macro_rules! catalogue {
    ($($(#[$doc:meta])* $kind:ident = $name:literal, $task:ident { $($cap:ident: $value:expr),* $(,)? };)*) => {
        /// The model names of the contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ModelKind {
            $($(#[$doc])* $kind,)*
        }

        impl ModelKind {
            /// Every kind, in the catalogue's order.
            pub const ALL: [ModelKind; [$($name),*].len()] = [$(ModelKind::$kind),*];

            /// This kind's row.
            pub const fn entry(self) -> &'static Entry {
                match self {
                    $(ModelKind::$kind => &Entry {
                        name: $name,
                        task: Task::$task,
                        can: Capabilities { $($cap: $value,)* ..Capabilities::NONE },
                    },)*
                }
            }
        }
    };
}

catalogue! {
    KernelRidge = "kernel_ridge", Regression { several_outputs: true, appends: true, nystrom: true };
    GaussianProcess = "gaussian_process", Regression {
        several_outputs: true,
        appends: true,
        nystrom: true,
        variational: true,
        posterior: true,
        precomputed_kernel: SELF_KERNEL,
    };
    GpClassifier = "gp_classifier", Classification {
        variational: true,
        probabilities: true,
        precomputed_kernel: SELF_KERNEL,
    };
    /// C-SVC.
    Svm = "svm", Classification { nystrom: true, probabilities: true };
    KernelPerceptron = "kernel_perceptron", Classification {};
    KernelLogistic = "kernel_logistic", Classification { nystrom: true, probabilities: true };
    NadarayaWatson = "nadaraya_watson", Regression { precomputed_kernel: AS_POINTS };
    RbfNetwork = "rbf_network", Regression { precomputed_kernel: AS_POINTS };
    /// epsilon-SVR.
    Svr = "svr", Regression {};
    NuSvr = "nu_svr", Regression {};
    /// nu-SVC.
    NuSvm = "nu_svm", Classification { probabilities: true };
    OneClassSvm = "one_class_svm", Novelty {};
    KernelPca = "kernel_pca", Transform { transform: true };
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    pub fn from_name(name: &str) -> Option<ModelKind> {
        ModelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn task(self) -> Task {
        self.entry().task
    }

    /// What this kind can do.
    pub fn can(self) -> &'static Capabilities {
        &self.entry().can
    }

    /// The names of the kinds with a capability, in the catalogue's order, as a phrase
    /// ("kernel_ridge and gaussian_process"), for messages that say who can.
    pub fn names_that(can: impl Fn(&Capabilities) -> bool) -> String {
        let names: Vec<&str> = ModelKind::ALL.into_iter().filter(|k| can(k.can())).map(ModelKind::name).collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        }
    }
}

/// A kind's row as `GET /models/kinds` serves it, so that the page and the CLI ask the
/// server what a kind can do instead of keeping a list of names of their own.
#[derive(Debug, Clone, Serialize)]
pub struct KindRow {
    pub name: &'static str,
    pub task: Task,
    /// Whether a fit takes `y` (regression and classification; novelty and transform do not).
    pub targets: bool,
    pub several_outputs: bool,
    pub appends: bool,
    pub nystrom: bool,
    pub variational: bool,
    pub probabilities: bool,
    pub posterior: bool,
    pub transform: bool,
    pub precomputed_kernel: bool,
    /// Why `kernel: "precomputed"` is refused, where it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precomputed_kernel_refused: Option<&'static str>,
}

impl ModelKind {
    /// This kind's row as served.
    pub fn row(self) -> KindRow {
        let Entry { name, task, can } = *self.entry();
        // Every capability named, so that a new one cannot be left off the wire.
        let Capabilities {
            several_outputs,
            appends,
            nystrom,
            variational,
            probabilities,
            posterior,
            transform,
            precomputed_kernel,
        } = can;
        let refused = match precomputed_kernel {
            Precomputed::Takes => None,
            Precomputed::Refused(why) => Some(why),
        };
        KindRow {
            name,
            task,
            targets: matches!(task, Task::Regression | Task::Classification),
            several_outputs,
            appends,
            nystrom,
            variational,
            probabilities,
            posterior,
            transform,
            precomputed_kernel: refused.is_none(),
            precomputed_kernel_refused: refused,
        }
    }
}

impl Serialize for ModelKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_in_order_and_found_by_its_name() {
        for (i, kind) in ModelKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "ALL follows the enum");
            assert_eq!(ModelKind::from_name(kind.name()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
        assert_eq!(ModelKind::names_that(|c| c.appends), "kernel_ridge and gaussian_process");
        assert_eq!(ModelKind::names_that(|c| c.transform), "kernel_pca");
    }
}
