//! hipfile's messages on stderr, each written whole: the text and its newline go to the
//! descriptor in one `write(2)`, so that the lines of processes and threads sharing a stderr
//! (fio's jobs, a launcher's workers) never interleave within a line. `eprintln!` does not
//! promise that: stderr is unbuffered, and each formatted piece is a `write` of its own.
//!
//! Every message the libraries and the facade write goes through [`line()`].

use std::io::{self, Write};

/// Writes `text` and a newline to stderr in one write (two only if the kernel takes the line
/// in part, which a pipe or terminal does not do below `PIPE_BUF`, 4096 bytes). A failure to
/// write is ignored, as `eprintln!`'s panic is not wanted in a library.
pub fn line(text: &str) {
    let _ = write_line(&mut io::stderr().lock(), text);
}

/// Writes `text` and a newline to `out` as one buffer: formatted first, then one
/// `write_all`.
///
/// # Errors
///
/// `out`'s error.
pub fn write_line(out: &mut impl Write, text: &str) -> io::Result<()> {
    let mut whole = String::with_capacity(text.len() + 1);
    whole.push_str(text);
    whole.push('\n');
    out.write_all(whole.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each `write` call it gets.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_one_write_with_its_newline() {
        let mut out = Calls::default();
        let path = "/etc/cufile.json";
        write_line(
            &mut out,
            &format!("hipfile: warning: {path}: 19 keys do not apply"),
        )
        .unwrap();
        assert_eq!(
            out.0,
            [b"hipfile: warning: /etc/cufile.json: 19 keys do not apply\n".to_vec()]
        );
    }
}
