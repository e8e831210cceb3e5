//! Views of device memory: a range of a [`DeviceBuffer`] that a request reads into or
//! writes from, its length the request's size.
//!
//! [`DeviceBuf`] is memory a write may read (a buffer, or a view made with
//! [`DeviceBuffer::slice`]); [`DeviceBufMut`] is memory a read may fill, reached only through
//! `&mut` (a buffer, or a view made with [`DeviceBuffer::slice_mut`]), so that safe code
//! cannot read device memory while a request writes it. Memory allocated by another library
//! comes in through [`DeviceBuffer::from_raw`], whose buffer is a view like any other.

use crate::api::buffer::DeviceBuffer;
use crate::api::driver::Driver;
use hipfile_core::{DevicePtr, Error, Op};
use std::marker::PhantomData;
use std::ops::{Bound, Range, RangeBounds};
use std::time::Duration;

mod sealed {
    pub trait Sealed {}
}

/// Device memory that a write may read from: a [`DeviceBuffer`] or a [`DeviceSlice`] /
/// [`DeviceSliceMut`] of one. Sealed: hipfile validates and registers memory through the
/// buffer a view belongs to.
pub trait DeviceBuf: sealed::Sealed {
    /// The buffer the memory belongs to, and the byte range of it.
    #[doc(hidden)]
    fn parts(&self) -> (&DeviceBuffer, Range<usize>);

    /// The device address of the first byte.
    fn device_ptr(&self) -> DevicePtr {
        let (buffer, range) = self.parts();
        DevicePtr(buffer.ptr().0 + range.start as u64)
    }

    /// The length in bytes.
    fn byte_len(&self) -> usize {
        self.parts().1.len()
    }
}

impl Driver {
    /// Counts a read into `dst` that a reader outside the engine served from object storage
    /// (`hipfile-remote`'s reads do), so that [`Driver::stats`] and `hipfile stats` count
    /// every byte the process read: as a read (count, bytes, time, size asked for: `dst`'s
    /// length), as a read of the device `dst` belongs to, and in
    /// [`StatsSnapshot::remote_bytes`](crate::StatsSnapshot::remote_bytes). `bytes` is what
    /// the read returned, `None` for a read that failed (counted as a failed read); `took`
    /// its time. Nothing is counted at `HIPFILE_STATS_LEVEL` 0.
    pub fn count_remote_read(&self, dst: &impl DeviceBuf, bytes: Option<u64>, took: Duration) {
        if !self.counting() {
            return;
        }
        let (buffer, range) = dst.parts();
        let device = buffer.memory().device_now();
        match bytes {
            Some(n) => self.count_remote(device.unwrap_or(-1), n, range.len() as u64, took),
            None => self.count_failed(Op::Read, device),
        }
    }
}

/// Device memory that a read may fill: a [`DeviceBuffer`] or a [`DeviceSliceMut`] of one,
/// reached through `&mut`.
pub trait DeviceBufMut: DeviceBuf {}

/// A range of a [`DeviceBuffer`] that writes may read from ([`DeviceBuffer::slice`]).
#[derive(Debug, Clone, Copy)]
pub struct DeviceSlice<'a> {
    buffer: &'a DeviceBuffer,
    start: usize,
    end: usize,
}

/// A range of a [`DeviceBuffer`] that reads may fill ([`DeviceBuffer::slice_mut`]).
///
/// Made only from a `&mut` borrow of the buffer, or by splitting such a view into disjoint
/// parts ([`split_at`](Self::split_at), [`chunks`](Self::chunks)), so no other view of its
/// bytes exists while it lives.
#[derive(Debug)]
pub struct DeviceSliceMut<'a> {
    buffer: &'a DeviceBuffer,
    start: usize,
    end: usize,
    /// The view stands for a `&'a mut` borrow of its range.
    _exclusive: PhantomData<&'a mut DeviceBuffer>,
}

/// `range` of `0..len` as a plain range, or an error that says what is wrong.
pub(crate) fn bounds(range: impl RangeBounds<usize>, len: usize) -> Result<Range<usize>, Error> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(start), Some(end)) if start <= end && end <= len => Ok(start..end),
        _ => Err(Error::InvalidValue {
            op: None,
            what: format!(
                "the range {:?}..{:?} is not inside a view of {len} bytes",
                range.start_bound(),
                range.end_bound()
            ),
        }),
    }
}

impl DeviceBuffer {
    /// The bytes of `range` (of this buffer), for writes to read from.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `range` is not inside the buffer.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_>, Error> {
        let r = bounds(range, self.len())?;
        Ok(DeviceSlice {
            buffer: self,
            start: r.start,
            end: r.end,
        })
    }

    /// The bytes of `range` (of this buffer), for reads to fill.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
    /// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
    /// # let path = std::env::temp_dir().join(format!("hipfile-doc-slice-{}", std::process::id()));
    /// # std::fs::write(&path, b"header..payload")?;
    /// let driver = hipfile::Driver::open()?;
    /// let fh = driver.register_file(&std::fs::File::open(&path)?)?;
    /// let mut buf = driver.alloc(64)?;
    /// // The file's bytes 8.. into the buffer's bytes 32..39: a view is what a request fills.
    /// fh.read_exact_at(&mut buf.slice_mut(32..39)?, 8)?;
    /// let mut payload = [0u8; 7];
    /// buf.slice(32..39)?.copy_to_host(&mut payload)?;
    /// assert_eq!(&payload, b"payload");
    /// // A range outside the buffer is an error, not a panic.
    /// assert!(buf.slice_mut(60..70).is_err());
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `range` is not inside the buffer.
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceSliceMut<'_>, Error> {
        let r = bounds(range, self.len())?;
        Ok(DeviceSliceMut {
            buffer: self,
            start: r.start,
            end: r.end,
            _exclusive: PhantomData,
        })
    }
}

impl<'a> DeviceSlice<'a> {
    /// A narrower view: `range` of this one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `range` is not inside this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a>, Error> {
        let r = bounds(range, self.end - self.start)?;
        Ok(DeviceSlice {
            buffer: self.buffer,
            start: self.start + r.start,
            end: self.start + r.end,
        })
    }

    /// Copies the view's bytes into `out`, which must be exactly as long (a synchronous copy).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for another length; [`Error::Runtime`].
    pub fn copy_to_host(&self, out: &mut [u8]) -> Result<(), Error> {
        same_len(self.end - self.start, out.len())?;
        self.buffer.copy_to_host(self.start, out)
    }
}

impl<'a> DeviceSliceMut<'a> {
    /// A narrower view: `range` of this one, for reads to fill.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `range` is not inside this view.
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize>,
    ) -> Result<DeviceSliceMut<'_>, Error> {
        let r = bounds(range, self.end - self.start)?;
        Ok(DeviceSliceMut {
            start: self.start + r.start,
            end: self.start + r.end,
            buffer: self.buffer,
            _exclusive: PhantomData,
        })
    }

    /// The view cut in two at `mid`: bytes `..mid` and `mid..`, each a view reads may fill
    /// at the same time (for requests in flight together).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `mid` is beyond the view's length.
    pub fn split_at(self, mid: usize) -> Result<(DeviceSliceMut<'a>, DeviceSliceMut<'a>), Error> {
        let len = self.end - self.start;
        if mid > len {
            return Err(Error::InvalidValue {
                op: None,
                what: format!("cannot split a view of {len} bytes at {mid}"),
            });
        }
        let at = self.start + mid;
        let part = |start, end| DeviceSliceMut {
            buffer: self.buffer,
            start,
            end,
            _exclusive: PhantomData,
        };
        Ok((part(self.start, at), part(at, self.end)))
    }

    /// The view cut into consecutive views of `size` bytes (the last one shorter if the
    /// length is not a multiple), each a view reads may fill at the same time.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for a size of 0.
    pub fn chunks(self, size: usize) -> Result<Vec<DeviceSliceMut<'a>>, Error> {
        if size == 0 {
            return Err(Error::InvalidValue {
                op: None,
                what: "cannot cut a view into chunks of 0 bytes".into(),
            });
        }
        Ok((self.start..self.end)
            .step_by(size)
            .map(|start| DeviceSliceMut {
                buffer: self.buffer,
                start,
                end: self.end.min(start.saturating_add(size)),
                _exclusive: PhantomData,
            })
            .collect())
    }

    /// Copies the view's bytes into `out`, which must be exactly as long (a synchronous copy).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for another length; [`Error::Runtime`].
    pub fn copy_to_host(&self, out: &mut [u8]) -> Result<(), Error> {
        same_len(self.end - self.start, out.len())?;
        self.buffer.copy_to_host(self.start, out)
    }

    /// Copies `data`, which must be exactly as long as the view, into it (a synchronous copy).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for another length; [`Error::Runtime`].
    pub fn copy_from_host(&mut self, data: &[u8]) -> Result<(), Error> {
        same_len(self.end - self.start, data.len())?;
        self.buffer.memory().copy_from_host(self.start, data)
    }
}

fn same_len(view: usize, host: usize) -> Result<(), Error> {
    if view == host {
        Ok(())
    } else {
        Err(Error::InvalidValue {
            op: None,
            what: format!("a view of {view} bytes cannot be copied to or from {host} host bytes"),
        })
    }
}

impl sealed::Sealed for DeviceBuffer {}
impl sealed::Sealed for DeviceSlice<'_> {}
impl sealed::Sealed for DeviceSliceMut<'_> {}

impl DeviceBuf for DeviceBuffer {
    fn parts(&self) -> (&DeviceBuffer, Range<usize>) {
        (self, 0..self.len())
    }
}

impl DeviceBuf for DeviceSlice<'_> {
    fn parts(&self) -> (&DeviceBuffer, Range<usize>) {
        (self.buffer, self.start..self.end)
    }
}

impl DeviceBuf for DeviceSliceMut<'_> {
    fn parts(&self) -> (&DeviceBuffer, Range<usize>) {
        (self.buffer, self.start..self.end)
    }
}

impl DeviceBufMut for DeviceBuffer {}
impl DeviceBufMut for DeviceSliceMut<'_> {}

// A borrow of memory is that memory, so views and buffers can be passed by reference or,
// where a call keeps the borrow (the asynchronous calls), by value.
impl<T: DeviceBuf + ?Sized> sealed::Sealed for &T {}
impl<T: DeviceBuf + ?Sized> sealed::Sealed for &mut T {}

impl<T: DeviceBuf + ?Sized> DeviceBuf for &T {
    fn parts(&self) -> (&DeviceBuffer, Range<usize>) {
        (**self).parts()
    }
}

impl<T: DeviceBuf + ?Sized> DeviceBuf for &mut T {
    fn parts(&self) -> (&DeviceBuffer, Range<usize>) {
        (**self).parts()
    }
}

impl<T: DeviceBufMut + ?Sized> DeviceBufMut for &mut T {}
