//! A fault-injecting HTTP proxy on loopback: forwards each request to the server unchanged
//! (but for `Connection: close`, which no signature covers), or answers it with a fault the
//! test chose: an error status, a delay, or a body cut short.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Forward it.
    Pass,
    /// Answer with this status and an empty body, without asking the server.
    Status(u16),
    /// Wait, then forward it.
    Delay(Duration),
    /// Forward it, and send back the answer with its body cut to this many bytes, its
    /// `Content-Length` and `Content-Range` saying so: a well-formed, shorter answer.
    Shorten(usize),
    /// Act as a server whose ETags are weak: the answer's `ETag` becomes `W/"..."`, and a
    /// request whose `If-Match` names a weak tag gets 412, as RFC 9110's strong comparison
    /// of `If-Match` says.
    WeakEtag,
}

/// The request line's method and the request's number (from 0) in the proxy's life.
pub type Rule = dyn Fn(&str, usize) -> Fault + Send + Sync;

/// A proxy in front of `127.0.0.1:upstream`; it stops accepting on drop.
pub struct Proxy {
    /// The port it listens on.
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// Requests seen, by method.
    pub seen: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Starts a proxy to `upstream` that applies `rule` to each request.
    pub fn start(
        upstream: u16,
        rule: impl Fn(&str, usize) -> Fault + Send + Sync + 'static,
    ) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let rule: Arc<Rule> = Arc::new(rule);
        let count = Arc::new(AtomicUsize::new(0));
        {
            let stop = Arc::clone(&stop);
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let rule = Arc::clone(&rule);
                    let count = Arc::clone(&count);
                    let seen = Arc::clone(&seen);
                    std::thread::spawn(move || {
                        let _ = serve(client, upstream, &*rule, &count, &seen);
                    });
                }
            });
        }
        Proxy { port, stop, seen }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The methods of the requests seen so far.
    pub fn methods(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves the requests of one client connection, one at a time.
fn serve(
    client: TcpStream,
    upstream: u16,
    rule: &Rule,
    count: &AtomicUsize,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    loop {
        let Some((head, body)) = read_request(&mut reader)? else {
            return Ok(());
        };
        let method = head.split(' ').next().unwrap_or_default().to_owned();
        seen.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(method.clone());
        let n = count.fetch_add(1, Ordering::SeqCst);
        let fault = rule(&method, n);
        if let Fault::Status(code) = fault {
            let answer = format!(
                "HTTP/1.1 {code} Injected\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
            );
            client.write_all(answer.as_bytes())?;
            continue;
        }
        if fault == Fault::WeakEtag
            && header(&head, "if-match").is_some_and(|tag| tag.starts_with("W/"))
        {
            client.write_all(
                b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
            )?;
            continue;
        }
        if let Fault::Delay(d) = fault {
            std::thread::sleep(d);
        }
        let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
        server.write_all(close_connection(&head).as_bytes())?;
        server.write_all(&body)?;
        let mut answer = Vec::new();
        server.read_to_end(&mut answer)?;
        let answer = match fault {
            Fault::Shorten(n) => shorten(&answer, n),
            Fault::WeakEtag => weaken(&answer),
            _ => keep_alive(&answer),
        };
        client.write_all(&answer)?;
    }
}

/// Reads one request: its head (up to the blank line) and its body (`Content-Length`).
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let len = header(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    Ok(Some((head, body)))
}

/// The value of header `name` in `head`.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `head` asking the server to close the connection after its answer, so that the answer
/// ends where the connection does.
fn close_connection(head: &str) -> String {
    let mut out: String = head
        .trim_end_matches("\r\n")
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Splits an answer into its head's lines and its body.
fn split(answer: &[u8]) -> (Vec<String>, &[u8]) {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
    let body = answer.get(end + 4..).unwrap_or_default();
    (head.split("\r\n").map(str::to_owned).collect(), body)
}

fn join(lines: &[String], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// The server's answer, with the connection kept open towards the client.
fn keep_alive(answer: &[u8]) -> Vec<u8> {
    let (lines, body) = split(answer);
    let lines: Vec<String> = lines
        .into_iter()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    join(&lines, body)
}

/// The server's answer with its body cut to `n` bytes, and headers that agree.
fn shorten(answer: &[u8], n: usize) -> Vec<u8> {
    let (lines, body) = split(answer);
    let body = &body[..n.min(body.len())];
    let lines: Vec<String> = lines
        .into_iter()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| {
            let lower = l.to_ascii_lowercase();
            if lower.starts_with("content-length:") {
                format!("Content-Length: {}", body.len())
            } else if lower.starts_with("content-range:") {
                // bytes A-B/TOTAL -> bytes A-(A+n-1)/TOTAL
                let value = l.split_once(':').map_or("", |(_, v)| v.trim());
                let spec = value.trim_start_matches("bytes ");
                let (range, total) = spec.split_once('/').unwrap_or((spec, "*"));
                let start: usize = range
                    .split('-')
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                format!(
                    "Content-Range: bytes {start}-{}/{total}",
                    start + body.len().max(1) - 1
                )
            } else {
                l
            }
        })
        .collect();
    join(&lines, body)
}

/// The server's answer with its `ETag` made weak.
fn weaken(answer: &[u8]) -> Vec<u8> {
    let (lines, body) = split(answer);
    let lines: Vec<String> = lines
        .into_iter()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .map(|l| match l.split_once(':') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("etag") => {
                format!("ETag: W/{}", v.trim())
            }
            _ => l,
        })
        .collect();
    join(&lines, body)
}
