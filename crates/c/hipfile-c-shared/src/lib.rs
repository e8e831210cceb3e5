//! The FFI layer both of hipfile's C libraries share, their one implementation: hipFile's C
//! ABI (`libhipfile.so.0`, crate `hipfile-c-hipfile`) and cuFile's (`libcufile.so.0`, crate
//! `hipfile-c-cufile`), all three in `crates/c/`. Each
//! function here has hipFile's C signature (`include/hipfile.h` of `hipfile-c-hipfile` declares
//! them, with hipFile 0.5's names, values and layouts) and is `extern "C"`, but none is
//! exported by this crate: the two libraries are thin `#[unsafe(no_mangle)]` wrappers over
//! these functions, differing only in names and in the few layouts that differ (cuFile's
//! driver properties, its version number and its error struct's second member).
//!
//! This crate translates and validates, and nothing else: every byte moves through the
//! `hipfile` facade (imported as `facade`), so the C and Rust APIs cannot drift apart. It
//! keeps hipFile's conventions at the boundary: the driver's use count, implicit opening on
//! the first registration, opaque file handles, buffer registrations keyed by pointer, and
//! the `hipFileError_t` / negative-`ssize_t` returns (docs/decisions/c-abi.md lists where the
//! project's contract, docs/BEHAVIOUR.md, answers otherwise). Which memory the calls accept
//! is the memory rule of the drivers it opens, hipFile's (device memory only) unless the
//! library linking it chose another ([`choose_memory_types`]; `libcufile.so.0` chooses
//! cuFile's).
//!
//! Every function the header declares is here, the stream-ordered ones
//! (`hipFileReadAsync`, `hipFileWriteAsync`, `hipFileStreamRegister`,
//! `hipFileStreamDeregister`) included: those queue the facade's stream-ordered requests
//! (`FileHandle::order_on_stream`), whose handles the state keeps until they end.
//! What it does not do: move bytes itself, decide which backend serves, keep state beyond
//! hipFile's registries (files, buffers, streams, batches), or export symbols (a
//! `#[no_mangle]` here would be exported by both libraries).
//!
//! Only the two C libraries depend on this crate. Each links its own copy, with its own
//! registries: a process that loads both has two independent use counts.
//!
//! Its modules import one another in one direction only (docs/ARCHITECTURE.md draws the
//! ladder): `types`, `panic`; `codes`, `settings`; `state`; the C functions over the state
//! (`api`, `params`, `props`, `stats`, `extra`); `batch` and `ordered` over `api`.
//!
//! # Safety
//!
//! Every function is `unsafe extern "C"` where it takes pointers (the caller vouches for
//! them, as C's contract says), runs its body inside one panic boundary ([`panic::boundary`]),
//! checks every pointer for NULL before touching it, and never dereferences a handle it was
//! given: a handle is looked up in the registry by address first. Errors are values, never
//! panics.

// The header's names, used as they are (constants in patterns too).
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]

mod api;
mod batch;
pub mod codes;
mod extra;
mod ordered;
pub mod panic;
mod params;
mod props;
mod settings;
mod state;
mod stats;
pub mod types;

pub use api::*;
pub use batch::*;
pub use extra::*;
/// The memory rules a library chooses from ([`choose_memory_types`]).
pub use facade::MemoryTypes;
/// The direction of a stream-ordered request, for [`order_async`].
pub use facade::Op;
/// Where cuFile's configuration file is (`CUFILE_ENV_PATH_JSON`, else `/etc/cufile.json`),
/// for `libcufile.so.0`, which alone reads it; and whether the variable named it.
pub use facade::core::config::cufile_json_path;
/// Messages on stderr, each written whole (one `write(2)` per line).
pub use facade::core::diag;
/// The most one read or write call moves (the kernel's `MAX_RW_COUNT`, `0x7ffff000`).
pub use facade::core::request::MAX_IO_SIZE;
pub use ordered::*;
pub use params::*;
pub use props::*;
pub use settings::*;
pub use state::{FILE_INVALID, set_config_file_source};
pub use stats::*;
