#![no_main]
//! See mercer::fuzzing::dataset_upload; crashes found here go to fuzz/regressions/dataset_upload/, which
//! tests/fuzz_regressions.rs replays on every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::dataset_upload(data));
