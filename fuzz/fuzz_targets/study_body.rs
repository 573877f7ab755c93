#![no_main]
//! See mercer::fuzzing::study_body; crashes found here go to fuzz/regressions/study_body/, which
//! tests/fuzz_regressions.rs replays on every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::study_body(data));
