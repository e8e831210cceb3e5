//! The crate's one asynchronous runtime, started with the first remote call: its threads
//! run the ranged GETs and copy each body into its staging buffer.

use crate::error::RemoteError;
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

/// Threads of the runtime: enough to copy bodies at memory speed, never more than 8.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get().clamp(2, 8))
}

fn runtime() -> Result<&'static Runtime, RemoteError> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads())
                .thread_name("hipfile-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| RemoteError::Runtime(format!("cannot start the remote reads' runtime: {e}")))
}

/// The runtime's handle, to spawn the GETs of an asynchronous read on from any executor.
pub(crate) fn handle() -> Result<tokio::runtime::Handle, RemoteError> {
    Ok(runtime()?.handle().clone())
}

/// Runs `future` to completion on the calling thread, with the runtime's threads serving
/// what it spawns.
///
/// # Errors
///
/// [`RemoteError::Runtime`] when the caller is itself on an asynchronous runtime's thread
/// (blocking there could stall that runtime; call from `spawn_blocking`), or the runtime
/// cannot start.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, RemoteError> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(RemoteError::Runtime(
            "a blocking remote call was made on an asynchronous runtime's thread: make it \
             from tokio::task::spawn_blocking (or a thread of your own)"
                .into(),
        ));
    }
    Ok(runtime()?.block_on(future))
}
