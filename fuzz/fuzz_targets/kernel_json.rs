#![no_main]
//! See mercer::fuzzing::kernel_json; crashes found here go to fuzz/regressions/kernel_json/, which
//! tests/fuzz_regressions.rs replays on every `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mercer::fuzzing::kernel_json(data));
