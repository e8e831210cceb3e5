//! Buffer validation (docs/BEHAVIOUR.md §3.6), beside request validation: a buffer is
//! described once through the [`GpuRuntime`], and [`check_buffer`] vouches for the facts that
//! requests may then move bytes against.

use crate::error::Error;
use crate::request::{BufferFacts, CheckedBuffer};
use crate::runtime::GpuRuntime;
use crate::types::{DevicePtr, MemoryKind};

/// How a buffer reaches hipfile: registered once, or passed unregistered with each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferUse {
    /// `hipFileBufRegister(ptr, len)`: must be device memory, wholly inside its allocation.
    Register {
        /// The length the caller registers.
        len: u64,
    },
    /// An unregistered buffer: any memory kind is described (the backends then refuse what is
    /// not device memory), and its usable length runs to the end of its allocation.
    Unregistered,
}

/// [`inspect_buffer`], for a buffer that requests will move bytes through: the facts come
/// back as a [`CheckedBuffer`], which [`Request::validate_checked`](crate::request::Request) turns
/// into requests a backend may serve.
///
/// # Safety
///
/// The memory at `ptr` stays allocated for as long as the result, or any request validated
/// against it, is used: the runtime's answers describe the memory as it is now.
///
/// # Errors
///
/// As [`inspect_buffer`].
#[allow(unsafe_code)] // The promise that makes a `CheckedBuffer`; see `# Safety`.
pub unsafe fn check_buffer(
    runtime: &dyn GpuRuntime,
    ptr: DevicePtr,
    usage: BufferUse,
) -> Result<CheckedBuffer, Error> {
    let facts = inspect_buffer(runtime, ptr, usage)?;
    // SAFETY: the facts are the runtime's answers (an `unsafe trait` whose implementers
    // promise they are true) about memory the caller keeps allocated (this function's
    // contract); facts of non-device memory never make a request that may be served
    // (`Request::validate_checked`).
    Ok(unsafe { CheckedBuffer::new_unchecked(facts) })
}

/// Validates a buffer once (docs/BEHAVIOUR.md §3.6) and describes it for scoring.
///
/// # Errors
///
/// - a null pointer, or a zero registration length: [`Error::InvalidValue`];
/// - the runtime cannot describe the pointer: [`Error::Runtime`];
/// - registering memory that is not device memory: [`Error::MemoryTypeInvalid`];
/// - a range that leaves its allocation: [`Error::PointerRange`].
pub fn inspect_buffer(
    runtime: &dyn GpuRuntime,
    ptr: DevicePtr,
    usage: BufferUse,
) -> Result<BufferFacts, Error> {
    if ptr.is_null() {
        return Err(Error::InvalidValue {
            op: None,
            what: "the buffer pointer is null".into(),
        });
    }
    let info = runtime.pointer_info(ptr).map_err(Error::Runtime)?;
    match usage {
        BufferUse::Register { len } => {
            if len == 0 {
                return Err(Error::InvalidValue {
                    op: None,
                    what: "a buffer cannot be registered with length 0".into(),
                });
            }
            if info.memory != MemoryKind::Device {
                return Err(Error::MemoryTypeInvalid {
                    ptr,
                    memory: info.memory,
                });
            }
            let (base, alloc_len) = runtime.address_range(ptr).map_err(Error::Runtime)?;
            let alloc_end = base.0.saturating_add(alloc_len);
            let end = ptr.0.checked_add(len);
            if ptr < base || end.is_none_or(|e| e > alloc_end) {
                return Err(Error::PointerRange {
                    ptr,
                    len,
                    base,
                    alloc_len,
                });
            }
            Ok(BufferFacts {
                base: ptr,
                len,
                memory: info.memory,
                device: info.device,
            })
        }
        BufferUse::Unregistered => {
            let len = if info.memory == MemoryKind::Device {
                let (base, alloc_len) = runtime.address_range(ptr).map_err(Error::Runtime)?;
                let alloc_end = base.0.saturating_add(alloc_len);
                if ptr < base || ptr.0 >= alloc_end {
                    return Err(Error::PointerRange {
                        ptr,
                        len: 1,
                        base,
                        alloc_len,
                    });
                }
                alloc_end - ptr.0
            } else {
                // Nothing can be served from it; its length only matters for validation,
                // which must not refuse before the backends give their reasons.
                u64::MAX
            };
            Ok(BufferFacts {
                base: ptr,
                len,
                memory: info.memory,
                device: info.device,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{MockGpuRuntime, PointerInfo, RuntimeError};
    use mockall::predicate::eq;

    const BASE: u64 = 0x7f00_0000_0000;

    fn device_runtime(alloc_len: u64) -> MockGpuRuntime {
        let mut rt = MockGpuRuntime::new();
        rt.expect_pointer_info().returning(|_| {
            Ok(PointerInfo {
                memory: MemoryKind::Device,
                device: 1,
            })
        });
        rt.expect_address_range()
            .returning(move |_| Ok((DevicePtr(BASE), alloc_len)));
        rt
    }

    #[test]
    fn registers_a_device_range_inside_its_allocation() {
        let rt = device_runtime(1 << 20);
        let b = inspect_buffer(
            &rt,
            DevicePtr(BASE + 4096),
            BufferUse::Register {
                len: (1 << 20) - 4096,
            },
        )
        .unwrap();
        assert_eq!(
            (b.base, b.len, b.memory, b.device),
            (
                DevicePtr(BASE + 4096),
                (1 << 20) - 4096,
                MemoryKind::Device,
                1
            )
        );
    }

    #[test]
    fn refuses_a_range_past_the_allocation() {
        let rt = device_runtime(1 << 20);
        let e = inspect_buffer(
            &rt,
            DevicePtr(BASE + 4096),
            BufferUse::Register { len: 1 << 20 },
        )
        .unwrap_err();
        assert!(matches!(e, Error::PointerRange { .. }), "{e:?}");
        assert_eq!(
            e.code(),
            crate::ErrorCode::HipFile(crate::HipFileCode::HipPointerRangeError)
        );
    }

    #[test]
    fn refuses_null_and_zero_length() {
        let rt = MockGpuRuntime::new();
        assert!(matches!(
            inspect_buffer(&rt, DevicePtr(0), BufferUse::Unregistered),
            Err(Error::InvalidValue { .. })
        ));
        let rt = device_runtime(10);
        assert!(matches!(
            inspect_buffer(&rt, DevicePtr(BASE), BufferUse::Register { len: 0 }),
            Err(Error::InvalidValue { .. })
        ));
    }

    #[test]
    fn refuses_to_register_host_memory() {
        for memory in [
            MemoryKind::Host,
            MemoryKind::Managed,
            MemoryKind::Unregistered,
        ] {
            let mut rt = MockGpuRuntime::new();
            rt.expect_pointer_info()
                .returning(move |_| Ok(PointerInfo { memory, device: -2 }));
            rt.expect_address_range().never();
            let e =
                inspect_buffer(&rt, DevicePtr(BASE), BufferUse::Register { len: 64 }).unwrap_err();
            assert!(
                matches!(e, Error::MemoryTypeInvalid { memory: m, .. } if m == memory),
                "{e:?}"
            );
        }
    }

    #[test]
    fn an_unregistered_interior_pointer_runs_to_the_end_of_its_allocation() {
        let mut rt = device_runtime(1 << 20);
        rt.checkpoint();
        rt.expect_pointer_info()
            .with(eq(DevicePtr(BASE + 100)))
            .returning(|_| {
                Ok(PointerInfo {
                    memory: MemoryKind::Device,
                    device: 0,
                })
            });
        rt.expect_address_range()
            .returning(|_| Ok((DevicePtr(BASE), 1 << 20)));
        let b = inspect_buffer(&rt, DevicePtr(BASE + 100), BufferUse::Unregistered).unwrap();
        assert_eq!(b.len, (1 << 20) - 100);
    }

    #[test]
    fn an_unregistered_host_buffer_is_described_not_refused() {
        let mut rt = MockGpuRuntime::new();
        rt.expect_pointer_info().returning(|_| {
            Ok(PointerInfo {
                memory: MemoryKind::Unregistered,
                device: -2,
            })
        });
        let b = inspect_buffer(&rt, DevicePtr(0x1000), BufferUse::Unregistered).unwrap();
        assert_eq!(b.memory, MemoryKind::Unregistered);
    }

    #[test]
    fn runtime_failures_are_reported() {
        let mut rt = MockGpuRuntime::new();
        rt.expect_pointer_info().returning(|_| {
            Err(RuntimeError::new(
                "hipPointerGetAttributes",
                1,
                "invalid argument",
            ))
        });
        let e = inspect_buffer(&rt, DevicePtr(0x1000), BufferUse::Unregistered).unwrap_err();
        assert_eq!(
            e.code(),
            crate::ErrorCode::HipFile(crate::HipFileCode::HipDriverError)
        );
        assert!(e.to_string().contains("hipPointerGetAttributes"), "{e}");
    }
}
