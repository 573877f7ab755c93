//! Replays every input under fuzz/regressions/<target>/ (minimised crashes the fuzzers
//! found, and fixed) and every seed under fuzz/seeds/<target>/ through the fuzz targets'
//! entry points, so a fixed crash stays fixed without a nightly toolchain.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    for dir in [root.join("regressions").join(target), root.join("seeds").join(target)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{} panics", path.display());
            count += 1;
        }
    }
    assert!(count > 0, "no inputs for {target}");
}

#[test]
fn train_body_inputs() {
    replay("train_body", mercer::fuzzing::train_body);
}

#[test]
fn posterior_body_inputs() {
    replay("posterior_body", mercer::fuzzing::posterior_body);
}

#[test]
fn predict_body_inputs() {
    replay("predict_body", mercer::fuzzing::predict_body);
}

#[test]
fn study_body_inputs() {
    replay("study_body", mercer::fuzzing::study_body);
}

#[test]
fn kernel_json_inputs() {
    replay("kernel_json", mercer::fuzzing::kernel_json);
}

#[test]
fn dataset_upload_inputs() {
    replay("dataset_upload", mercer::fuzzing::dataset_upload);
}

#[test]
fn predict_csv_inputs() {
    replay("predict_csv", mercer::fuzzing::predict_csv);
}

#[test]
fn observations_body_inputs() {
    replay("observations_body", mercer::fuzzing::observations_body);
}

#[test]
fn search_body_inputs() {
    replay("search_body", mercer::fuzzing::search_body);
}

/// The predict and posterior targets fuzz a fitted model of every kind in the catalogue.
#[test]
fn the_targets_hold_a_model_of_every_kind() {
    let served = mercer::fuzzing::model_kinds();
    for kind in mercer::estimator::ModelKind::ALL {
        assert!(served.contains(&kind), "src/fuzzing.rs fits no {} model", kind.name());
    }
}
