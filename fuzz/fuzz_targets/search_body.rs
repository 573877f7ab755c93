#![no_main]
//! See mercer::fuzzing::search_body; crashes found here go to
//! fuzz/regressions/search_body/, which tests/fuzz_regressions.rs replays on every
//! `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::search_body(data));
