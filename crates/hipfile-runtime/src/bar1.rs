//! A CUDA device's BAR1 size, which only NVIDIA's NVML tells: the device's PCI bus id from
//! the CUDA runtime (`cudaDeviceGetPCIBusId`), then NVML's device of that bus id
//! (`nvmlDeviceGetHandleByPciBusId_v2`) and its BAR1 (`nvmlDeviceGetBAR1MemoryInfo`), in a
//! session of its own (`nvmlInit_v2` … `nvmlShutdown`). CUDA's ordinals and NVML's indices
//! differ (`CUDA_VISIBLE_DEVICES`, `CUDA_DEVICE_ORDER`); a bus id names the same device to
//! both.
//!
//! Whatever keeps the size from being told (no `cudaDeviceGetPCIBusId`, no NVML, NVML not
//! knowing the device or not reporting its BAR1) is [`RuntimeError::is_unsupported`], with
//! the reason; only a failure of the CUDA runtime itself (an invalid device) is another
//! error.

use hipfile_core::RuntimeError;
use hipfile_sys::{Nvml, NvmlReturn};
use std::ffi::CString;

/// What answers a BAR1 size for a PCI bus id: NVML, or a test's double.
pub(crate) trait Bar1ByBusId {
    /// The BAR1 size in bytes of the device at `bus_id`, or why it cannot be told.
    fn bar1_total(&self, bus_id: &str) -> Result<u64, String>;
}

impl<T: Bar1ByBusId> Bar1ByBusId for &T {
    fn bar1_total(&self, bus_id: &str) -> Result<u64, String> {
        (**self).bar1_total(bus_id)
    }
}

impl Bar1ByBusId for Nvml {
    fn bar1_total(&self, bus_id: &str) -> Result<u64, String> {
        let failed =
            |call: &str, e: NvmlReturn| format!("{call} failed: {} ({e})", self.error_string(e));
        let bus = CString::new(bus_id).map_err(|_| format!("the bus id {bus_id:?} holds a NUL"))?;
        let session = self.init().map_err(|e| failed("nvmlInit_v2", e))?;
        let device = session
            .device_by_pci_bus_id(&bus)
            .map_err(|e| failed("nvmlDeviceGetHandleByPciBusId_v2", e))?;
        let bar1 = session
            .bar1_memory_info(device)
            .map_err(|e| failed("nvmlDeviceGetBAR1MemoryInfo", e))?;
        Ok(bar1.bar1Total)
    }
}

/// The BAR1 size of CUDA's `device`: its bus id from `bus_id`, then the size from what
/// `source` gives (loaded when first asked for; its error says why there is none).
pub(crate) fn bar1_size<S: Bar1ByBusId>(
    device: i32,
    bus_id: impl FnOnce(i32) -> Result<String, RuntimeError>,
    source: impl FnOnce() -> Result<S, String>,
) -> Result<u64, RuntimeError> {
    const CALL: &str = "bar1_size";
    let bus = match bus_id(device) {
        Ok(bus) => bus,
        Err(e) if e.is_unsupported() => {
            return Err(RuntimeError::unsupported_because(
                CALL,
                format!(
                    "the CUDA runtime cannot name device {device}'s PCI bus id, through which \
                     NVML would be asked: {e}"
                ),
            ));
        }
        Err(e) => return Err(e),
    };
    let source = source().map_err(|why| {
        RuntimeError::unsupported_because(
            CALL,
            format!("only NVIDIA's NVML tells a BAR1 size, and it is not available: {why}"),
        )
    })?;
    source.bar1_total(&bus).map_err(|why| {
        RuntimeError::unsupported_because(
            CALL,
            format!("NVML does not tell the BAR1 size of device {device} ({bus}): {why}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile_testfs::nvml::{BAR1_BUS_ID, BAR1_BYTES, NO_BAR1_BUS_ID, nvml_standin};
    use hipfile_testfs::{TempDir, require};
    use std::cell::Cell;

    /// CUDA's ordinals as `CUDA_VISIBLE_DEVICES=1,0` would make them on a machine whose
    /// second GPU reports its BAR1 and whose first does not: ordinal 0 is the stand-in's
    /// device at `C1`, ordinal 1 the one at `C2`; ordinal 2 does not exist.
    fn visible(device: i32) -> Result<String, RuntimeError> {
        match device {
            0 => Ok(BAR1_BUS_ID.into()),
            1 => Ok(NO_BAR1_BUS_ID.into()),
            _ => Err(RuntimeError::new(
                "cudaDeviceGetPCIBusId",
                101,
                "invalid device ordinal",
            )),
        }
    }

    /// A source that knows one bus id.
    struct Known(&'static str, u64);

    impl Bar1ByBusId for Known {
        fn bar1_total(&self, bus_id: &str) -> Result<u64, String> {
            if bus_id == self.0 {
                Ok(self.1)
            } else {
                Err(format!("no device at {bus_id}"))
            }
        }
    }

    #[test]
    fn the_device_is_found_in_nvml_by_its_bus_id_not_its_ordinal() {
        let dir = TempDir::new("runtime-nvml");
        let standin = require!(nvml_standin(dir.path()));
        let nvml = Nvml::load_path(&standin.library).unwrap();
        assert_eq!(bar1_size(0, visible, || Ok(&nvml)), Ok(BAR1_BYTES));
        let e = bar1_size(1, visible, || Ok(&nvml)).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert!(e.message.contains(NO_BAR1_BUS_ID), "{e}");
        assert!(
            e.message.contains(
                "nvmlDeviceGetBAR1MemoryInfo failed: Not Supported (NVML_ERROR_NOT_SUPPORTED (3))"
            ),
            "{e}"
        );
    }

    #[test]
    fn an_invalid_device_is_the_runtimes_error_and_nvml_is_not_loaded() {
        let loaded = Cell::new(false);
        let e = bar1_size(2, visible, || {
            loaded.set(true);
            Ok(Known(BAR1_BUS_ID, 1))
        })
        .unwrap_err();
        assert!(!e.is_unsupported());
        assert_eq!((e.call, e.code), ("cudaDeviceGetPCIBusId", 101));
        assert!(!loaded.get());
    }

    #[test]
    fn whatever_keeps_the_size_from_being_told_is_unsupported_with_the_reason() {
        let no_bus_call = |_| Err(RuntimeError::unsupported("cudaDeviceGetPCIBusId"));
        let e = bar1_size(0, no_bus_call, || Ok(Known(BAR1_BUS_ID, 1))).unwrap_err();
        assert!(
            e.is_unsupported() && e.message.contains("PCI bus id"),
            "{e}"
        );

        let e = bar1_size(0, visible, || {
            Err::<Known, _>("could not load libnvidia-ml.so.1".into())
        })
        .unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert!(e.message.contains("libnvidia-ml.so.1"), "{e}");

        let e = bar1_size(0, visible, || Ok(Known("0000:01:00.0", 1))).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert!(e.message.contains("no device at 0000:C1:00.0"), "{e}");
    }
}
