//! Gives the shared library the soname programs link against and `dlopen`, `libcufile.so.0`,
//! NVIDIA's cuFile's.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcufile.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
