//! Buffer validation (docs/BEHAVIOUR.md §3.6), beside request validation: a buffer is
//! described once through the [`GpuRuntime`], and [`check_buffer`] vouches for the facts that
//! requests may then move bytes against.
//!
//! How far a buffer reaches comes from the runtime where the runtime allocated the memory
//! (device and managed memory, and host memory it pinned or registered when it can say how
//! far), and from the caller otherwise: pageable host memory the runtime does not know cannot
//! be bounded by anyone but its owner, who vouches for the length (`check_buffer`'s
//! contract, and `DeviceBuffer::from_raw`'s above it).

use crate::config::MemoryTypes;
use crate::error::Error;
use crate::request::{BufferFacts, CheckedBuffer};
use crate::runtime::GpuRuntime;
use crate::types::{DevicePtr, MemoryKind};

/// How a buffer reaches hipfile: registered once, or passed unregistered with each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferUse {
    /// `hipFileBufRegister(ptr, len)`: memory of a kind `rule` registers
    /// ([`MemoryTypes::registers`]), wholly inside its allocation where the runtime says
    /// what that is.
    Register {
        /// The length the caller registers.
        len: u64,
        /// The driver's rule.
        rule: MemoryTypes,
    },
    /// An unregistered buffer: any memory kind is described (the backends then refuse what
    /// the driver's rule does not serve). Its usable length runs to the end of its allocation
    /// where the runtime says what that is (hipFile's rule for an unregistered pointer), and
    /// is `len` where it does not.
    Unregistered {
        /// How many bytes from the pointer the caller vouches for: all there is to go by for
        /// memory the runtime does not know. A caller with a shorter buffer than the
        /// allocation shortens the facts itself ([`CheckedBuffer::truncated`]).
        len: u64,
    },
}

/// [`inspect_buffer`], for a buffer that requests will move bytes through: the facts come
/// back as a [`CheckedBuffer`], which [`Request::validate_checked`](crate::request::Request) turns
/// into requests a backend may serve.
///
/// # Safety
///
/// The memory at `ptr` stays allocated for as long as the result, or any request validated
/// against it, is used: the runtime's answers describe the memory as it is now. Where the
/// runtime does not bound the memory (pageable host memory it does not know, host memory
/// whose allocation it cannot tell), `ptr..ptr + len` (the length in `usage`) is memory of
/// this process that the caller keeps allocated as long, readable, and writable for reads.
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
    // promise they are true) about memory the caller keeps allocated, bounded by the
    // runtime's allocation where it gave one and otherwise by the length the caller vouches
    // for (this function's contract).
    Ok(unsafe { CheckedBuffer::new_unchecked(facts) })
}

/// Validates a buffer once (docs/BEHAVIOUR.md §3.6) and describes it for scoring.
///
/// # Errors
///
/// - a null pointer, or a zero registration length: [`Error::InvalidValue`];
/// - the runtime cannot describe the pointer: [`Error::Runtime`];
/// - registering memory of a kind the rule does not register: [`Error::MemoryTypeInvalid`];
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
    let len = match usage {
        BufferUse::Register { len, rule } => {
            if len == 0 {
                return Err(Error::InvalidValue {
                    op: None,
                    what: "a buffer cannot be registered with length 0".into(),
                });
            }
            if !rule.registers(info.memory) {
                return Err(Error::MemoryTypeInvalid {
                    ptr,
                    memory: info.memory,
                    rule,
                });
            }
            if let Some((base, alloc_len)) = allocation(runtime, ptr, info.memory)? {
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
            }
            len
        }
        BufferUse::Unregistered { len } => usable_len(runtime, ptr, info.memory, len)?,
    };
    Ok(BufferFacts {
        base: ptr,
        len,
        memory: info.memory,
        device: info.device,
    })
}

/// How many bytes from `ptr`, memory of `kind`, an unregistered buffer may use: to the end
/// of its allocation where the runtime says what the allocation is (device and managed
/// memory always; host memory when the runtime can tell); `len` where it does not (pageable
/// memory, the caller's word).
///
/// # Errors
///
/// [`Error::Runtime`] when the runtime cannot give the allocation of memory it allocated;
/// [`Error::PointerRange`] when `ptr` lies outside the allocation it gives.
pub fn usable_len(
    runtime: &dyn GpuRuntime,
    ptr: DevicePtr,
    kind: MemoryKind,
    len: u64,
) -> Result<u64, Error> {
    let Some((base, alloc_len)) = allocation(runtime, ptr, kind)? else {
        return Ok(len);
    };
    let alloc_end = base.0.saturating_add(alloc_len);
    if ptr < base || ptr.0 >= alloc_end {
        return Err(Error::PointerRange {
            ptr,
            len: 1,
            base,
            alloc_len,
        });
    }
    Ok(alloc_end - ptr.0)
}

/// The allocation the runtime gives for `ptr`, memory of `kind`: required for the memory it
/// allocates (device, managed), asked for host memory (which runtimes track when they pinned
/// or registered it, though not every runtime answers for it), and not asked for memory the
/// runtime does not know, which nothing but its owner can bound.
fn allocation(
    runtime: &dyn GpuRuntime,
    ptr: DevicePtr,
    kind: MemoryKind,
) -> Result<Option<(DevicePtr, u64)>, Error> {
    match kind {
        MemoryKind::Device | MemoryKind::Managed | MemoryKind::Unified => {
            runtime.address_range(ptr).map(Some).map_err(Error::Runtime)
        }
        MemoryKind::Host => Ok(runtime.address_range(ptr).ok()),
        MemoryKind::Unregistered | MemoryKind::Array => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::MockGpuRuntime;
    use crate::runtime::{PointerInfo, RuntimeError};
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
                rule: MemoryTypes::HipFile,
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
            BufferUse::Register {
                len: 1 << 20,
                rule: MemoryTypes::HipFile,
            },
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
            inspect_buffer(&rt, DevicePtr(0), BufferUse::Unregistered { len: 1 }),
            Err(Error::InvalidValue { .. })
        ));
        let rt = device_runtime(10);
        assert!(matches!(
            inspect_buffer(&rt, DevicePtr(BASE), register(0, MemoryTypes::CuFile)),
            Err(Error::InvalidValue { .. })
        ));
    }

    fn register(len: u64, rule: MemoryTypes) -> BufferUse {
        BufferUse::Register { len, rule }
    }

    /// A runtime that says `memory` of every pointer, with allocations of `range` (`None`:
    /// it cannot say, as for memory it does not know).
    fn runtime_of(memory: MemoryKind, range: Option<(u64, u64)>) -> MockGpuRuntime {
        let mut rt = MockGpuRuntime::new();
        rt.expect_pointer_info()
            .returning(move |_| Ok(PointerInfo { memory, device: -2 }));
        rt.expect_address_range().returning(move |_| {
            range
                .map(|(base, len)| (DevicePtr(base), len))
                .ok_or_else(|| RuntimeError::new("hipMemGetAddressRange", 500, "not found"))
        });
        rt
    }

    #[test]
    fn hipfiles_rule_registers_device_memory_only() {
        for memory in [
            MemoryKind::Host,
            MemoryKind::Managed,
            MemoryKind::Unregistered,
        ] {
            let mut rt = MockGpuRuntime::new();
            rt.expect_pointer_info()
                .returning(move |_| Ok(PointerInfo { memory, device: -2 }));
            rt.expect_address_range().never();
            let e = inspect_buffer(&rt, DevicePtr(BASE), register(64, MemoryTypes::HipFile))
                .unwrap_err();
            assert!(
                matches!(e, Error::MemoryTypeInvalid { memory: m, .. } if m == memory),
                "{e:?}"
            );
            assert_eq!(
                e.code(),
                crate::ErrorCode::HipFile(crate::HipFileCode::HipMemoryTypeInvalid)
            );
            assert!(e.to_string().contains("only GPU device memory"), "{e}");
        }
    }

    #[test]
    fn cufiles_rule_registers_host_memory_but_not_managed_memory() {
        // Pinned host memory, inside its allocation as the runtime gives it.
        let rt = runtime_of(MemoryKind::Host, Some((BASE, 8192)));
        let b = inspect_buffer(&rt, DevicePtr(BASE), register(8192, MemoryTypes::CuFile)).unwrap();
        assert_eq!((b.len, b.memory), (8192, MemoryKind::Host));
        let e =
            inspect_buffer(&rt, DevicePtr(BASE), register(8193, MemoryTypes::CuFile)).unwrap_err();
        assert!(matches!(e, Error::PointerRange { .. }), "{e:?}");
        // Host memory whose allocation the runtime cannot give, and pageable memory: the
        // caller's length.
        let rt = runtime_of(MemoryKind::Host, None);
        let b =
            inspect_buffer(&rt, DevicePtr(BASE), register(1 << 30, MemoryTypes::CuFile)).unwrap();
        assert_eq!(b.len, 1 << 30);
        let mut rt = runtime_of(MemoryKind::Unregistered, None);
        rt.checkpoint();
        rt.expect_pointer_info().returning(|_| {
            Ok(PointerInfo {
                memory: MemoryKind::Unregistered,
                device: -2,
            })
        });
        rt.expect_address_range().never();
        let b = inspect_buffer(&rt, DevicePtr(BASE), register(100, MemoryTypes::CuFile)).unwrap();
        assert_eq!((b.len, b.memory), (100, MemoryKind::Unregistered));
        // Managed memory (and ROCm 5's Unified) and arrays: refused with the reason.
        for memory in [MemoryKind::Managed, MemoryKind::Unified, MemoryKind::Array] {
            let rt = runtime_of(memory, Some((BASE, 8192)));
            let e = inspect_buffer(&rt, DevicePtr(BASE), register(64, MemoryTypes::CuFile))
                .unwrap_err();
            assert!(
                matches!(e, Error::MemoryTypeInvalid { memory: m, rule: MemoryTypes::CuFile, .. } if m == memory),
                "{e:?}"
            );
        }
        let rt = runtime_of(MemoryKind::Managed, Some((BASE, 8192)));
        let e =
            inspect_buffer(&rt, DevicePtr(BASE), register(64, MemoryTypes::CuFile)).unwrap_err();
        assert!(
            e.to_string()
                .contains("pass it to reads and writes unregistered"),
            "{e}"
        );
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
        let b = inspect_buffer(
            &rt,
            DevicePtr(BASE + 100),
            BufferUse::Unregistered { len: 4096 },
        )
        .unwrap();
        assert_eq!(b.len, (1 << 20) - 100);
    }

    #[test]
    fn unregistered_memory_is_bounded_by_the_runtime_where_it_can_and_the_caller_elsewhere() {
        // Managed and pinned memory: to the end of the allocation the runtime gives.
        for memory in [MemoryKind::Managed, MemoryKind::Host] {
            let rt = runtime_of(memory, Some((BASE, 8192)));
            let b = inspect_buffer(
                &rt,
                DevicePtr(BASE + 4096),
                BufferUse::Unregistered { len: u64::MAX },
            )
            .unwrap();
            assert_eq!((b.len, b.memory), (4096, memory));
            let e = inspect_buffer(
                &rt,
                DevicePtr(BASE + 8192),
                BufferUse::Unregistered { len: 1 },
            )
            .unwrap_err();
            assert!(matches!(e, Error::PointerRange { .. }), "{e:?}");
        }
        // Managed memory is the runtime's: without its allocation there is no buffer.
        let rt = runtime_of(MemoryKind::Managed, None);
        let e =
            inspect_buffer(&rt, DevicePtr(BASE), BufferUse::Unregistered { len: 10 }).unwrap_err();
        assert!(matches!(e, Error::Runtime(_)), "{e:?}");
        // Pageable memory, and pinned memory the runtime cannot bound: the caller's length.
        for memory in [MemoryKind::Unregistered, MemoryKind::Host] {
            let rt = runtime_of(memory, None);
            let b = inspect_buffer(&rt, DevicePtr(0x1000), BufferUse::Unregistered { len: 77 })
                .unwrap();
            assert_eq!((b.len, b.memory), (77, memory));
        }
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
        let e =
            inspect_buffer(&rt, DevicePtr(0x1000), BufferUse::Unregistered { len: 1 }).unwrap_err();
        assert_eq!(
            e.code(),
            crate::ErrorCode::HipFile(crate::HipFileCode::HipDriverError)
        );
        assert!(e.to_string().contains("hipPointerGetAttributes"), "{e}");
    }
}
