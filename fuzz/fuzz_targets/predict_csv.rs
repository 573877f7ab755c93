#![no_main]
//! See mercer::fuzzing::predict_csv; crashes found here go to fuzz/regressions/predict_csv/, which
//! tests/fuzz_regressions.rs replays on every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::predict_csv(data));
