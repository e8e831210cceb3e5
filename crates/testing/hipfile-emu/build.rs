//! Gives the emulated runtime the soname of a real HIP runtime, `libamdhip64.so.7` (the
//! emulated version is ROCm 7.2 by default), so that a program linked against it and hipfile,
//! which looks the runtime up by soname, share one loaded instance (see the crate
//! documentation).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libamdhip64.so.7");
    println!("cargo:rerun-if-changed=build.rs");
}
