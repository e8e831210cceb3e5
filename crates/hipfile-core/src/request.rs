//! Requests and their validation (docs/BEHAVIOUR.md §3): what is checked before any backend scores.

use crate::error::Error;
use crate::types::DevicePtr;
pub use crate::types::{MemoryKind, Op};

/// The most one call transfers: the kernel's `MAX_RW_COUNT`. Larger sizes are clamped to it
/// and the call returns the (short) count actually moved, as `read(2)` does.
pub const MAX_IO_SIZE: u64 = 0x7fff_f000;

/// What is known about the GPU buffer of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFacts {
    /// The buffer's base address as the caller passed it (not necessarily the start of its
    /// allocation).
    pub base: DevicePtr,
    /// Bytes usable from `base` (the registered length, or up to the end of the allocation
    /// for an unregistered buffer).
    pub len: u64,
    /// The kind of memory.
    pub memory: MemoryKind,
    /// The device the memory belongs to (as the runtime reports it; negative for host memory).
    pub device: i32,
}

/// A request as the caller made it, before validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Read or write.
    pub op: Op,
    /// Bytes to move.
    pub size: u64,
    /// Byte offset in the file.
    pub file_offset: u64,
    /// Byte offset into the buffer.
    pub buffer_offset: u64,
}

/// A request that passed validation: the range inside the buffer and
/// the file, size clamped to [`MAX_IO_SIZE`]. Only [`Request::validate`] and
/// [`Request::validate_checked`] make one, so a backend can trust its range.
///
/// A request validated against described facts ([`Request::validate`]) can be scored but
/// not served: only one validated against a [`CheckedBuffer`] ([`ValidRequest::is_checked`])
/// lies inside memory the runtime vouched for, and the backends refuse to move bytes for any
/// other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidRequest {
    op: Op,
    size: u64,
    requested_size: u64,
    file_offset: u64,
    buffer_offset: u64,
    address: DevicePtr,
    memory: MemoryKind,
    checked: bool,
}

impl ValidRequest {
    /// Read or write.
    pub fn op(&self) -> Op {
        self.op
    }

    /// Bytes this call moves at most (the requested size clamped to [`MAX_IO_SIZE`]).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The size the caller asked for.
    pub fn requested_size(&self) -> u64 {
        self.requested_size
    }

    /// Byte offset in the file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// Byte offset into the buffer.
    pub fn buffer_offset(&self) -> u64 {
        self.buffer_offset
    }

    /// The device address the transfer starts at: `base + buffer_offset`.
    pub fn address(&self) -> DevicePtr {
        self.address
    }

    /// The kind of memory of the buffer it was validated against: with
    /// [`is_checked`](Self::is_checked), what `address..address + size` is, which a backend
    /// goes by to reach it (never by the [`Submission`](crate::Submission)'s facts, which
    /// anyone can write).
    pub fn memory(&self) -> MemoryKind {
        self.memory
    }

    /// Whether the request was validated against a [`CheckedBuffer`], so that
    /// `address..address + size` is live memory of the buffer's kind, bounded by the runtime
    /// or, where the runtime cannot bound it, by its owner, and bytes may be moved.
    pub fn is_checked(&self) -> bool {
        self.checked
    }

    /// Whether the request meets `file`'s direct-I/O alignment (offset, size and memory
    /// address), as hipFile's statistics count it: a file without a direct descriptor never
    /// does.
    pub fn meets_direct_alignment(&self, file: &hipfile_probe::FileFacts) -> bool {
        let (offset, mem) = (
            u64::from(file.dio_offset_align()),
            u64::from(file.dio_mem_align()),
        );
        offset != 0
            && mem != 0
            && self.file_offset.is_multiple_of(offset)
            && self.size.is_multiple_of(offset)
            && self.address.0.is_multiple_of(mem)
    }
}

/// Buffer facts that came from the runtime (`hipfile_core::buffer::check_buffer`) for
/// memory whose owner keeps it allocated while they are used, and vouches for its length
/// where the runtime cannot bound it: the only facts that a request may move bytes against.
/// Made only by that `unsafe` function, so safe code cannot make one up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedBuffer(BufferFacts);

impl CheckedBuffer {
    /// Wraps facts the caller vouches for.
    ///
    /// # Safety
    ///
    /// `facts.base..facts.base + facts.len` is memory of the kind `facts.memory` says: device
    /// or managed memory of the runtime that will serve requests validated against the
    /// result, or host memory of this process, readable and writable; and it stays allocated
    /// for as long as the result, or any request validated against it, is used.
    #[allow(unsafe_code)] // Declares the promise; there is no unsafe operation here.
    pub unsafe fn new_unchecked(facts: BufferFacts) -> CheckedBuffer {
        CheckedBuffer(facts)
    }

    /// The facts.
    pub fn facts(&self) -> &BufferFacts {
        &self.0
    }

    /// The same buffer, no longer than `len` bytes (shrinking keeps the promise).
    pub fn truncated(self, len: u64) -> CheckedBuffer {
        CheckedBuffer(BufferFacts {
            len: self.0.len.min(len),
            ..self.0
        })
    }
}

impl Request {
    /// hipFile's C-shaped request (docs/BEHAVIOUR.md §3.1): `i64` offsets, as `hipFileRead`
    /// and `hipFileWrite` take them. The one place where hipFile's signed offsets become this
    /// crate's `u64` ones; Rust callers build a [`Request`] directly.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] naming the offset that is negative.
    pub fn from_c(
        op: Op,
        size: u64,
        file_offset: i64,
        buffer_offset: i64,
    ) -> Result<Request, Error> {
        let invalid = |what: String| Error::InvalidValue { op: Some(op), what };
        let file_offset = u64::try_from(file_offset)
            .map_err(|_| invalid(format!("file offset {file_offset} is negative")))?;
        let buffer_offset = u64::try_from(buffer_offset)
            .map_err(|_| invalid(format!("buffer offset {buffer_offset} is negative")))?;
        Ok(Request {
            op,
            size,
            file_offset,
            buffer_offset,
        })
    }

    /// Checks the request against its buffer (docs/BEHAVIOUR.md §3.1). Violations are errors, never
    /// partial I/O. The result can be scored; to be served it must be validated against a
    /// [`CheckedBuffer`] instead ([`Request::validate_checked`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] naming what is wrong: a buffer offset at or past the end of the
    /// buffer, a size larger than what remains of the buffer, or a file range whose end does
    /// not fit in `i64` (the kernel's `loff_t`).
    pub fn validate(&self, buffer: &BufferFacts) -> Result<ValidRequest, Error> {
        self.validate_with(buffer, false)
    }

    /// [`Request::validate`] against a buffer the runtime (and, where it cannot bound the
    /// memory, its owner) vouched for: the result may be served
    /// ([`ValidRequest::is_checked`]) by a backend that accepts its kind of memory.
    ///
    /// # Errors
    ///
    /// As [`Request::validate`].
    pub fn validate_checked(&self, buffer: &CheckedBuffer) -> Result<ValidRequest, Error> {
        self.validate_with(buffer.facts(), true)
    }

    fn validate_with(&self, buffer: &BufferFacts, checked: bool) -> Result<ValidRequest, Error> {
        let invalid = |what: String| {
            Err(Error::InvalidValue {
                op: Some(self.op),
                what,
            })
        };
        let (file_offset, buffer_offset) = (self.file_offset, self.buffer_offset);
        if buffer_offset >= buffer.len {
            return invalid(format!(
                "buffer offset {buffer_offset} is not inside the buffer of {} bytes",
                buffer.len
            ));
        }
        let room = buffer.len - buffer_offset;
        if self.size > room {
            return invalid(format!(
                "size {} is larger than the {room} bytes of the buffer after offset {buffer_offset}",
                self.size
            ));
        }
        let size = self.size.min(MAX_IO_SIZE);
        if file_offset
            .checked_add(size)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return invalid(format!(
                "file range {file_offset} + {size} overflows the largest file offset"
            ));
        }
        let Some(address) = buffer.base.0.checked_add(buffer_offset) else {
            return invalid(format!(
                "buffer address {:#x} + offset {buffer_offset} overflows",
                buffer.base.0
            ));
        };
        Ok(ValidRequest {
            op: self.op,
            size,
            requested_size: self.size,
            file_offset,
            buffer_offset,
            address: DevicePtr(address),
            memory: buffer.memory,
            checked,
        })
    }
}

/// Refuses `op` when the file's descriptor was opened without the access it needs (its
/// `F_GETFL` flags, read at registration), before any backend runs: the fallback's
/// `pread`/`pwrite` would fail with `EBADF`, and the fastpath's reopen has the same mode.
///
/// # Errors
///
/// [`Error::AccessMode`]: a write on a read-only descriptor, a read on a write-only one.
pub fn check_access(file: &hipfile_probe::FileFacts, op: Op) -> Result<(), Error> {
    const ACCMODE: i32 = 0o3;
    const RDONLY: i32 = 0o0;
    const WRONLY: i32 = 0o1;
    match (file.status_flags & ACCMODE, op) {
        (RDONLY, Op::Write) => Err(Error::AccessMode {
            op,
            opened: "read-only (O_RDONLY)",
            needed: "O_WRONLY or O_RDWR",
        }),
        (WRONLY, Op::Read) => Err(Error::AccessMode {
            op,
            opened: "write-only (O_WRONLY)",
            needed: "O_RDONLY or O_RDWR",
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn buffer(len: u64) -> BufferFacts {
        BufferFacts {
            base: DevicePtr(0x7f00_0000_0000),
            len,
            memory: MemoryKind::Device,
            device: 0,
        }
    }

    fn req(size: u64, file_offset: u64, buffer_offset: u64) -> Request {
        Request {
            op: Op::Read,
            size,
            file_offset,
            buffer_offset,
        }
    }

    fn what(r: Result<ValidRequest, Error>) -> String {
        match r {
            Err(Error::InvalidValue { what, .. }) => what,
            other => panic!("expected InvalidValue, got {other:?}"),
        }
    }

    #[test]
    fn accepts_a_request_inside_the_buffer() {
        let v = req(4096, 8192, 4096).validate(&buffer(8192)).unwrap();
        assert_eq!((v.size, v.file_offset, v.buffer_offset), (4096, 8192, 4096));
        assert_eq!(v.address, DevicePtr(0x7f00_0000_1000));
    }

    #[test]
    fn only_requests_on_vouched_memory_may_be_served() {
        assert!(!req(10, 0, 0).validate(&buffer(100)).unwrap().is_checked());
        // SAFETY: the requests are only inspected, never served.
        #[allow(unsafe_code)]
        let device = unsafe { CheckedBuffer::new_unchecked(buffer(100)) };
        assert!(
            req(10, 0, 0)
                .validate_checked(&device)
                .unwrap()
                .is_checked()
        );
        let host = BufferFacts {
            memory: MemoryKind::Host,
            ..buffer(100)
        };
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let host = unsafe { CheckedBuffer::new_unchecked(host) };
        assert!(req(10, 0, 0).validate_checked(&host).unwrap().is_checked());
        let described = BufferFacts {
            memory: MemoryKind::Host,
            ..buffer(100)
        };
        assert!(!req(10, 0, 0).validate(&described).unwrap().is_checked());
    }

    #[test]
    fn size_zero_is_valid() {
        assert_eq!(req(0, 0, 0).validate(&buffer(1)).unwrap().size, 0);
    }

    fn what_c(r: Result<Request, Error>) -> String {
        match r {
            Err(Error::InvalidValue { what, op }) => {
                assert_eq!(op, Some(Op::Read));
                what
            }
            other => panic!("expected InvalidValue, got {other:?}"),
        }
    }

    #[test]
    fn the_c_shaped_request_rejects_negative_offsets() {
        assert!(what_c(Request::from_c(Op::Read, 1, -1, 0)).contains("file offset -1 is negative"));
        assert!(
            what_c(Request::from_c(Op::Read, 1, 0, -5)).contains("buffer offset -5 is negative")
        );
        assert_eq!(Request::from_c(Op::Read, 1, 2, 3).unwrap(), req(1, 2, 3));
    }

    #[test]
    fn rejects_buffer_offset_at_or_past_the_end() {
        assert!(what(req(0, 0, 10).validate(&buffer(10))).contains("not inside the buffer"));
        assert!(what(req(0, 0, 11).validate(&buffer(10))).contains("not inside the buffer"));
    }

    #[test]
    fn rejects_size_beyond_the_buffer() {
        assert!(what(req(7, 0, 4).validate(&buffer(10))).contains("larger than the 6 bytes"));
        assert!(req(6, 0, 4).validate(&buffer(10)).is_ok());
    }

    #[test]
    fn clamps_to_max_rw_count() {
        let big = 4 * MAX_IO_SIZE;
        let v = req(big, 0, 0).validate(&buffer(big)).unwrap();
        assert_eq!((v.size, v.requested_size), (MAX_IO_SIZE, big));
        let v = req(MAX_IO_SIZE, 0, 0).validate(&buffer(big)).unwrap();
        assert_eq!(v.size, MAX_IO_SIZE);
    }

    #[test]
    fn rejects_file_range_overflow() {
        let max = i64::MAX as u64;
        assert!(what(req(2, max - 1, 0).validate(&buffer(10))).contains("overflows"));
        assert!(req(1, max - 1, 0).validate(&buffer(10)).is_ok());
        assert!(what(req(0, max + 1, 0).validate(&buffer(10))).contains("overflows"));
        assert!(what(req(0, u64::MAX, 0).validate(&buffer(10))).contains("overflows"));
    }

    proptest! {
        #[test]
        fn validation_is_exactly_the_rules(size in 0u64..1 << 40, fo in any::<u64>(), bo in 0u64..1 << 40, len in 1u64..1 << 40) {
            let r = req(size, fo, bo).validate(&buffer(len));
            let ok = bo < len && size <= len - bo
                && fo.checked_add(size.min(MAX_IO_SIZE)).is_some_and(|e| e <= i64::MAX as u64);
            prop_assert_eq!(r.is_ok(), ok);
            if let Ok(v) = r {
                prop_assert_eq!(v.size, size.min(MAX_IO_SIZE));
                prop_assert!(v.buffer_offset + v.size <= len);
            }
        }

        #[test]
        fn the_c_shaped_request_is_the_rust_one_or_names_a_negative_offset(fo in any::<i64>(), bo in any::<i64>()) {
            match Request::from_c(Op::Read, 1, fo, bo) {
                Ok(r) => prop_assert_eq!(r, req(1, fo as u64, bo as u64)),
                Err(e) => {
                    let what = what_c(Err(e));
                    prop_assert!(fo < 0 || bo < 0);
                    let named = if fo < 0 { "file offset" } else { "buffer offset" };
                    prop_assert!(what.contains(named), "{} lacks {}", what, named);
                }
            }
        }
    }
}
