#![no_main]
//! See mercer::fuzzing::posterior_body; crashes found here go to fuzz/regressions/posterior_body/, which
//! tests/fuzz_regressions.rs replays on every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::posterior_body(data));
