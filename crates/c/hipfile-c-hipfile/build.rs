//! Gives the shared library the soname programs link against, `libhipfile.so.0`, so that a
//! program linked with `-lhipfile` keeps working across compatible releases.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhipfile.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
