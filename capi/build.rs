//! lib_mrc.so carries its own name as SONAME, so a program linked against it by path (as
//! OCP's example makefile does) records `lib_mrc.so` and finds it through its rpath.

fn main() {
    println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,lib_mrc.so");
}
