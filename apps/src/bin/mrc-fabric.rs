//! `mrc-fabric`: fabric plans, uSID paths, Linux SRv6 configuration, frame decoding.
fn main() {
    println!("mrc-fabric");
}
