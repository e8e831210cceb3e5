//! A real S3-compatible server for tests: `s3s-fs` (from crates.io: `cargo install --locked
//! s3s-fs@0.14.1 --features binary`) serving a fresh directory on a free loopback port, with
//! one bucket; stopped on drop.

use crate::host::has_command;
use crate::skip::Skip;
use crate::temp::TempDir;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `s3s-fs`.
#[derive(Debug)]
pub struct S3Server {
    child: Option<Child>,
    root: TempDir,
    port: u16,
}

impl S3Server {
    /// The access key of a server started with [`S3Server::start`].
    pub const KEY_ID: &'static str = "hipfile-test-key";
    /// Its secret.
    pub const SECRET: &'static str = "hipfile-test-secret";
    /// The bucket every server has.
    pub const BUCKET: &'static str = "models";

    /// Starts a server that asks for [`KEY_ID`](Self::KEY_ID) and [`SECRET`](Self::SECRET).
    ///
    /// # Errors
    ///
    /// A [`Skip`] when `s3s-fs` is not on `PATH`.
    ///
    /// # Panics
    ///
    /// When it is there but does not start listening within 20 s.
    pub fn start() -> Result<S3Server, Skip> {
        S3Server::spawn(true)
    }

    /// Starts a server that serves anonymous requests (plain HTTP GETs) too.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn anonymous() -> Result<S3Server, Skip> {
        S3Server::spawn(false)
    }

    fn spawn(keys: bool) -> Result<S3Server, Skip> {
        S3Server::spawn_with(keys, free_port)
    }

    /// Starts a server on the ports `port` gives, until one is its own.
    fn spawn_with(keys: bool, mut port: impl FnMut() -> u16) -> Result<S3Server, Skip> {
        has_command("s3s-fs").map_err(|s| {
            Skip(format!(
                "{s} (cargo install --locked s3s-fs@0.14.1 --features binary)"
            ))
        })?;
        let mut root = TempDir::new("s3");
        std::fs::create_dir(root.path().join(S3Server::BUCKET))
            .unwrap_or_else(|e| panic!("cannot create the bucket's directory: {e}"));
        // The port is free when asked, but another test may take it before the server binds
        // it: then the server exits at once, and something else answers on the port. A
        // server still running once its port answers is ours; otherwise try another port.
        for _ in 0..5 {
            let port = port();
            let mut command = Command::new("s3s-fs");
            command
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if keys {
                command.args([
                    "--access-key",
                    S3Server::KEY_ID,
                    "--secret-key",
                    S3Server::SECRET,
                ]);
            }
            let child = command
                .arg(root.path())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start s3s-fs: {e}"));
            let mut server = S3Server {
                child: Some(child),
                root,
                port,
            };
            wait_for(port);
            std::thread::sleep(Duration::from_millis(200));
            if server.running() {
                return Ok(server);
            }
            server.stop();
            root = std::mem::replace(&mut server.root, TempDir::new("s3-unused"));
        }
        panic!("s3s-fs did not keep a port of its own in 5 tries");
    }

    /// Whether the server process is still running.
    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `s3://BUCKET/key`.
    pub fn url(key: &str) -> String {
        format!("s3://{}/{key}", S3Server::BUCKET)
    }

    /// Where object `key` of the bucket lives on disk.
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.root.path().join(S3Server::BUCKET).join(key)
    }

    /// Puts `bytes` as object `key` (a file the server serves), replacing what was there at
    /// once (written aside, then renamed).
    ///
    /// # Panics
    ///
    /// When the file cannot be written.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let path = self.object_path(key);
        let aside = path.with_extension("hipfile-test-new");
        std::fs::write(&aside, bytes)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", aside.display()));
        std::fs::rename(&aside, &path)
            .unwrap_or_else(|e| panic!("cannot rename {} into place: {e}", path.display()));
    }

    /// Stops the server now (a server stopped in the middle of a test).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free port on 127.0.0.1 (free when asked; the caller binds it right after).
///
/// # Panics
///
/// When no port can be bound.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
    listener
        .local_addr()
        .unwrap_or_else(|e| panic!("no local address: {e}"))
        .port()
}

/// Waits until something accepts connections on `port` of 127.0.0.1.
///
/// # Panics
///
/// After 20 s without.
pub fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing listens on port {port} after 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::require;

    #[test]
    fn a_port_taken_before_the_server_binds_it_is_not_taken_for_the_server() {
        // Something else listens on the first port offered, as another test's listener
        // would after taking the port the server was about to bind.
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = other.local_addr().unwrap().port();
        let mut offered = vec![free_port(), taken];
        let mut server = require!(S3Server::spawn_with(false, move || offered
            .pop()
            .unwrap_or_else(free_port)));
        assert_ne!(server.port(), taken);
        assert!(server.running());
        drop(other);
    }
}
