//! `include/mrc.h` is what cbindgen makes of the crate today (`MRC_BLESS=1` rewrites it).

use std::path::PathBuf;

#[test]
fn the_checked_in_header_is_up_to_date() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("config");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let path = crate_dir.join("../include/mrc.h");
    if std::env::var("MRC_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write the header");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/mrc.h is stale: run `MRC_BLESS=1 cargo test -p mrc-capi --test header`"
    );
}
