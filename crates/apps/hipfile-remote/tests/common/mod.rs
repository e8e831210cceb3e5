//! A real S3-compatible server (`s3s-fs`, from crates.io) on loopback for the tests, and a
//! fault-injecting proxy in front of it for what a real server will not do on demand.

#![allow(dead_code)] // Each test binary uses part of it.

pub mod proxy;

use hipfile::{Config, ConfigBuilder, Driver};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, has_command};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The access key the server is started with.
pub const KEY_ID: &str = "hipfile-test-key";
/// Its secret.
pub const SECRET: &str = "hipfile-test-secret";
/// The bucket every test server has.
pub const BUCKET: &str = "models";

/// A driver on the emulated runtime.
pub fn driver() -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config: Config = ConfigBuilder::new().hip_library(lib).build_with(|_| None).0;
    Ok(Driver::open_private(config).expect("the emulated runtime opens"))
}

/// A free port on 127.0.0.1 (free when asked; the server binds it right after).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// Waits until something accepts connections on `port`.
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

/// `s3s-fs` serving a fresh directory on loopback, with one bucket, [`BUCKET`]; stopped on
/// drop.
pub struct Server {
    child: Option<Child>,
    root: TempDir,
    /// The port it listens on.
    pub port: u16,
}

impl Server {
    /// Starts a server that asks for [`KEY_ID`] and [`SECRET`].
    pub fn start() -> Result<Server, Skip> {
        Server::spawn(true)
    }

    /// Starts a server that takes anonymous requests (plain HTTP GETs).
    pub fn anonymous() -> Result<Server, Skip> {
        Server::spawn(false)
    }

    fn spawn(keys: bool) -> Result<Server, Skip> {
        has_command("s3s-fs")
            .map_err(|s| Skip(format!("{s} (cargo install s3s-fs --features binary)")))?;
        let root = TempDir::new("s3");
        std::fs::create_dir(root.path().join(BUCKET)).expect("create the bucket");
        let port = free_port();
        let mut command = Command::new("s3s-fs");
        command
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if keys {
            command.args(["--access-key", KEY_ID, "--secret-key", SECRET]);
        }
        let child = command.arg(root.path()).spawn().expect("start s3s-fs");
        wait_for(port);
        Ok(Server {
            child: Some(child),
            root,
            port,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where object `key` of [`BUCKET`] lives on disk.
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.root.path().join(BUCKET).join(key)
    }

    /// Puts `bytes` as object `key` (a file the server serves), replacing what was there
    /// at once (written aside, then renamed).
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let path = self.object_path(key);
        let aside = path.with_extension("hipfile-test-new");
        std::fs::write(&aside, bytes).expect("write the object");
        std::fs::rename(&aside, &path).expect("rename the object into place");
    }

    /// Stops the server now.
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

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Bytes that differ from one offset to the next.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}
