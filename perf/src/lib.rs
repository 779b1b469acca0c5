//! mrc-rs benchmarks and experiment runners live in `benches/` and `src/bin/`.
