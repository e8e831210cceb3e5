//! The numeric codes a C caller sees (docs/BEHAVIOUR.md §4): hipFile's operation codes and
//! the errno-or-hipFile pair. Both the public error and the backends' errors map to them, so they
//! sit below both and import nothing from the crate.
//!
//! [`TABLE`] is the one list of the codes' numbers and texts: for each number, hipFile's name
//! and text (`hipfile.h`, `hipFileGetOpErrorString`) and cuFile's (`cufile.h`,
//! `cufileop_status_error`). Everything else is made from it: [`HipFileCode`], the C names
//! of both headers ([`hipfile_h`], [`cufile_h`]) and the texts the C libraries hand out. The
//! texts are upstream's, word for word: hipFile's are those of its `hipFileGetOpErrorString`,
//! cuFile's those of NVIDIA's header; the C libraries' tests compare them with both.

use std::ffi::CStr;

/// One number of [`TABLE`]: its name and text in each header that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The number (0 for success, hipFile's and cuFile's codes from 5001).
    pub value: i32,
    /// `hipfile.h`'s name and hipFile's text, where hipFile has the number.
    pub hipfile: Option<Entry>,
    /// `cufile.h`'s name and NVIDIA's text, where cuFile has the number.
    pub cufile: Option<Entry>,
}

/// A code's name in one header and the text that library gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The C name (`hipFileInvalidValue`, `CU_FILE_INVALID_VALUE`).
    pub name: &'static str,
    /// The text (what `hipFileGetOpErrorString` returns, or cuFile's
    /// `cufileop_status_error`).
    pub text: &'static CStr,
}

/// `hipFileGetOpErrorString`'s text for a number that is not one of hipFile's codes.
pub const HIPFILE_UNKNOWN: &CStr = c"Unknown hipFile error";
/// `cufileop_status_error`'s text for a number that is not one of cuFile's codes.
pub const CUFILE_UNKNOWN: &CStr = c"unknown cufile error";

/// `text`, which ends in its one NUL, as a C string. Run at compile time only ([`TABLE`] is
/// a constant), where a text that holds a NUL of its own fails the build.
const fn c_text(text: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(text.as_bytes()) {
        Ok(text) => text,
        Err(_) => panic!("a code's text holds a NUL"),
    }
}

/// `Some(entry)`, or `None` for a header that lacks the number.
macro_rules! entry {
    () => {
        None
    };
    ($name:ident $text:literal) => {
        Some(Entry {
            name: stringify!($name),
            text: c_text(concat!($text, "\0")),
        })
    };
}

/// Makes everything from the rows: each is a number, the [`HipFileCode`] variant of a
/// hipFile error, then `hipfile NAME TEXT` and `cufile NAME TEXT` for the headers that have
/// the number.
macro_rules! codes {
    ($(
        $value:literal $($variant:ident)?:
            $(hipfile $hname:ident $htext:literal)?
            $(cufile $cname:ident $ctext:literal)?;
    )*) => {
        /// Every code, by number.
        pub const TABLE: &[Row] = &[$(
            Row {
                value: $value,
                hipfile: entry!($($hname $htext)?),
                cufile: entry!($($cname $ctext)?),
            },
        )*];

        /// hipFile's operation error codes (`hipFileOpError_t`, base 5000; 5021 and 5032
        /// unused): the numbers of [`TABLE`] that are hipFile's errors.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(missing_docs)] // The names are upstream's; `describe` gives each one's meaning.
        #[non_exhaustive]
        pub enum HipFileCode {
            $($($variant = $value,)?)*
        }

        /// `hipfile.h`'s names for the codes (`hipFileOpError_t`), spelt as in C.
        #[allow(non_upper_case_globals)]
        pub mod hipfile_h {
            $($(
                #[doc = concat!("`", stringify!($hname), "`: \"", $htext, "\"")]
                pub const $hname: i32 = $value;
            )?)*
        }

        /// `cufile.h`'s names for the codes (`CUfileOpError`), spelt as in C.
        pub mod cufile_h {
            $($(
                #[doc = concat!("`", stringify!($cname), "`: \"", $ctext, "\"")]
                pub const $cname: i32 = $value;
            )?)*
        }
    };
}

// Each row: the number, the `HipFileCode` variant where it is one of hipFile's errors, then
// hipFile's name and its `hipFileGetOpErrorString` text, and cuFile's name and the text of
// NVIDIA's `cufileop_status_error`, where each library has the number.
codes! {
    0:
        hipfile hipFileSuccess "hipFile success"
        cufile CU_FILE_SUCCESS "cufile success";
    5001 DriverNotInitialized:
        hipfile hipFileDriverNotInitialized "GPU IO driver is not loaded"
        cufile CU_FILE_DRIVER_NOT_INITIALIZED "nvidia-fs driver is not loaded. \
            Set allow_compat_mode to true in cufile.json file to enable compatible mode";
    5002 DriverInvalidProps:
        hipfile hipFileDriverInvalidProps "Invalid GPU IO driver property provided"
        cufile CU_FILE_DRIVER_INVALID_PROPS "invalid property";
    5003 DriverUnsupportedLimit:
        hipfile hipFileDriverUnsupportedLimit "GPU IO Driver property value is unsupported"
        cufile CU_FILE_DRIVER_UNSUPPORTED_LIMIT "property range error";
    5004 DriverVersionMismatch:
        hipfile hipFileDriverVersionMismatch "hipFile version does not match GPU IO driver version"
        cufile CU_FILE_DRIVER_VERSION_MISMATCH "nvidia-fs driver version mismatch";
    5005 DriverVersionReadError:
        hipfile hipFileDriverVersionReadError "Unable to read the GPU IO driver version"
        cufile CU_FILE_DRIVER_VERSION_READ_ERROR "nvidia-fs driver version read error";
    5006 DriverClosing:
        hipfile hipFileDriverClosing "GPU IO driver is closing and not accepting new requests"
        cufile CU_FILE_DRIVER_CLOSING "driver shutdown in progress";
    5007 PlatformNotSupported:
        hipfile hipFilePlatformNotSupported "hipFile is not supported on the current platform"
        cufile CU_FILE_PLATFORM_NOT_SUPPORTED "GPUDirect Storage not supported on current platform";
    5008 IONotSupported:
        hipfile hipFileIONotSupported "hipFile is not supported on the selected file"
        cufile CU_FILE_IO_NOT_SUPPORTED "GPUDirect Storage not supported on current file";
    5009 DeviceNotSupported:
        hipfile hipFileDeviceNotSupported "The selected GPU does not support hipFile"
        cufile CU_FILE_DEVICE_NOT_SUPPORTED "GPUDirect Storage not supported on current GPU";
    5010 DriverError:
        hipfile hipFileDriverError "GPU IO driver error"
        cufile CU_FILE_NVFS_DRIVER_ERROR "nvidia-fs driver ioctl error";
    5011 HipDriverError:
        hipfile hipFileHipDriverError "GPU driver error: Inspect hip_drv_err for additional information"
        cufile CU_FILE_CUDA_DRIVER_ERROR "CUDA Driver API error";
    5012 HipPointerInvalid:
        hipfile hipFileHipPointerInvalid "Invalid GPU pointer"
        cufile CU_FILE_CUDA_POINTER_INVALID "invalid device pointer";
    5013 HipMemoryTypeInvalid:
        hipfile hipFileHipMemoryTypeInvalid "Memory type backing pointer is incompatible with hipFile"
        cufile CU_FILE_CUDA_MEMORY_TYPE_INVALID "invalid pointer memory type";
    5014 HipPointerRangeError:
        hipfile hipFileHipPointerRangeError "Pointer range exceeds allocated memory region"
        cufile CU_FILE_CUDA_POINTER_RANGE_ERROR "pointer range exceeds allocated address range";
    5015 HipContextMismatch:
        hipfile hipFileHipContextMismatch "GPU driver context mismatch"
        cufile CU_FILE_CUDA_CONTEXT_MISMATCH "cuda context mismatch";
    5016 InvalidMappingSize:
        hipfile hipFileInvalidMappingSize "Accessing memory beyond pinned memory buffer"
        cufile CU_FILE_INVALID_MAPPING_SIZE "access beyond maximum pinned size";
    5017 InvalidMappingRange:
        hipfile hipFileInvalidMappingRange "Accessing memory beyond mapped memory region"
        cufile CU_FILE_INVALID_MAPPING_RANGE "access beyond mapped size";
    5018 InvalidFileType:
        hipfile hipFileInvalidFileType "Unsupported file type"
        cufile CU_FILE_INVALID_FILE_TYPE "unsupported file type";
    5019 InvalidFileOpenFlag:
        hipfile hipFileInvalidFileOpenFlag "Unsupported file open flags"
        cufile CU_FILE_INVALID_FILE_OPEN_FLAG "unsupported file open flags";
    5020 DIONotSet:
        hipfile hipFileDIONotSet "O_DIRECT flag not set"
        cufile CU_FILE_DIO_NOT_SET "fd direct IO not set";
    5022 InvalidValue:
        hipfile hipFileInvalidValue "One or more arguments have an invalid value"
        cufile CU_FILE_INVALID_VALUE "invalid arguments";
    5023 MemoryAlreadyRegistered:
        hipfile hipFileMemoryAlreadyRegistered "Device pointer is already registered"
        cufile CU_FILE_MEMORY_ALREADY_REGISTERED "device pointer already registered";
    5024 MemoryNotRegistered:
        hipfile hipFileMemoryNotRegistered "Device pointer is not registered"
        cufile CU_FILE_MEMORY_NOT_REGISTERED "device pointer lookup failure";
    5025 PermissionDenied:
        hipfile hipFilePermissionDenied "Permission error on device or file access"
        cufile CU_FILE_PERMISSION_DENIED "driver or file access error";
    5026 DriverAlreadyOpen:
        hipfile hipFileDriverAlreadyOpen "GPU IO driver is already open"
        cufile CU_FILE_DRIVER_ALREADY_OPEN "driver is already open";
    5027 HandleNotRegistered:
        hipfile hipFileHandleNotRegistered "File handle for GPU IO is not registered"
        cufile CU_FILE_HANDLE_NOT_REGISTERED "file descriptor is not registered";
    5028 HandleAlreadyRegistered:
        hipfile hipFileHandleAlreadyRegistered "File handle for GPU IO is already registered"
        cufile CU_FILE_HANDLE_ALREADY_REGISTERED "file descriptor is already registered";
    5029 DeviceNotFound:
        hipfile hipFileDeviceNotFound "Selected device not found"
        cufile CU_FILE_DEVICE_NOT_FOUND "GPU device not found";
    5030 InternalError:
        hipfile hipFileInternalError "Internal GPU IO library error"
        cufile CU_FILE_INTERNAL_ERROR "internal error";
    5031 GetNewFDFailed:
        hipfile hipFileGetNewFDFailed "Unable to obtain a new file descriptor"
        cufile CU_FILE_GETNEWFD_FAILED "failed to obtain new file descriptor";
    5033 DriverSetupError:
        hipfile hipFileDriverSetupError "GPU IO Driver initialization error"
        cufile CU_FILE_NVFS_SETUP_ERROR "NVFS driver initialization error";
    5034 IODisabled:
        hipfile hipFileIODisabled "GPU IO config file prohibits GPU IO on specified file"
        cufile CU_FILE_IO_DISABLED "GPUDirect Storage disabled by config on current file";
    5035 BatchSubmitFailed:
        hipfile hipFileBatchSubmitFailed "Failed to submit request for batch operation"
        cufile CU_FILE_BATCH_SUBMIT_FAILED "failed to submit batch operation";
    5036 GPUMemoryPinningFailed:
        hipfile hipFileGPUMemoryPinningFailed "Failed to allocated pinned device memory"
        cufile CU_FILE_GPU_MEMORY_PINNING_FAILED "failed to allocate pinned GPU Memory";
    5037 BatchFull:
        hipfile hipFileBatchFull "Batch operation queue is full"
        cufile CU_FILE_BATCH_FULL "queue full for batch operation";
    5038 AsyncNotSupported:
        hipfile hipFileAsyncNotSupported "hipFile async IO is not supported"
        cufile CU_FILE_ASYNC_NOT_SUPPORTED "cuFile stream operation not supported";
    5039:
        hipfile hipFileIOMaxError "Internal flag to mark largest hipFile error code"
        cufile CU_FILE_INTERNAL_BATCH_SETUP_ERROR "batch setup internal error - retry later";
    5040:
        cufile CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR "batch submit internal error - retry later";
    5041:
        cufile CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR "batch get status internal error - retry later";
    5042:
        cufile CU_FILE_INTERNAL_BATCH_CANCEL_ERROR "batch cancel internal error - retry later";
    5043:
        cufile CU_FILE_NOMEM_ERROR "cufile no memory error - retry later";
    5044:
        cufile CU_FILE_IO_ERROR "cufile io error";
    5045:
        cufile CU_FILE_INTERNAL_BUF_REGISTER_ERROR "cufile buf registration error";
    5046:
        cufile CU_FILE_HASH_OPR_ERROR "cufile hash operation error";
    5047:
        cufile CU_FILE_INVALID_CONTEXT_ERROR "cufile invalid context error";
    5048:
        cufile CU_FILE_NVFS_INTERNAL_DRIVER_ERROR "nvfs internal driver error";
    5049:
        cufile CU_FILE_BATCH_NOCOMPAT_ERROR "compat mode off error";
    5050:
        cufile CU_FILE_IO_MAX_ERROR "GPUDirect Storage Max Error";
}

/// The row of `value`, where [`TABLE`] has one.
pub fn row(value: i32) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.value == value)
}

/// hipFile's text for `value` (`hipFileGetOpErrorString`'s): the code's, or
/// [`HIPFILE_UNKNOWN`] for a number that is not hipFile's.
pub fn hipfile_text(value: i32) -> &'static CStr {
    row(value)
        .and_then(|r| r.hipfile)
        .map_or(HIPFILE_UNKNOWN, |e| e.text)
}

impl HipFileCode {
    /// The numeric value of the C ABI.
    pub fn value(self) -> i32 {
        self as i32
    }

    /// Upstream's description of the code (`hipFileGetOpErrorString`'s text).
    pub fn describe(self) -> &'static str {
        // Every text of the table is ASCII.
        hipfile_text(self.value()).to_str().unwrap_or_default()
    }
}

/// What a C caller would see: an errno (with `-1` returned) or a hipFile code, plus the HIP
/// error where one caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A system error: the call returns -1 and sets `errno`.
    Errno(i32),
    /// A hipFile error code.
    HipFile(HipFileCode),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_order_and_names_each_number_once() {
        for pair in TABLE.windows(2) {
            assert!(pair[0].value < pair[1].value, "{pair:?}");
        }
        let mut names: Vec<&str> = TABLE
            .iter()
            .flat_map(|r| [r.hipfile, r.cufile])
            .flatten()
            .map(|e| e.name)
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name is used twice");
    }

    #[test]
    fn every_hipfile_error_is_a_variant_and_the_rest_are_not() {
        // 0 (success) and 5039 (the end marker) are hipFile's numbers but not errors.
        let errors: Vec<i32> = TABLE
            .iter()
            .filter(|r| r.hipfile.is_some() && r.value != 0 && r.value != 5039)
            .map(|r| r.value)
            .collect();
        assert_eq!(errors.len(), 36);
        assert_eq!(
            errors.first(),
            Some(&HipFileCode::DriverNotInitialized.value())
        );
        assert_eq!(errors.last(), Some(&HipFileCode::AsyncNotSupported.value()));
        assert!(!errors.contains(&5021) && !errors.contains(&5032));
        assert_eq!(
            hipfile_h::hipFileInvalidValue,
            HipFileCode::InvalidValue.value()
        );
        assert_eq!(
            cufile_h::CU_FILE_INVALID_VALUE,
            HipFileCode::InvalidValue.value()
        );
    }

    #[test]
    fn texts_are_upstreams_and_others_unknown() {
        assert_eq!(
            HipFileCode::InvalidValue.describe(),
            "One or more arguments have an invalid value"
        );
        assert_eq!(hipfile_text(5021), HIPFILE_UNKNOWN);
        assert_eq!(hipfile_text(5040), HIPFILE_UNKNOWN);
        assert_eq!(hipfile_text(-5022), HIPFILE_UNKNOWN);
        assert_eq!(
            row(5040).and_then(|r| r.cufile).map(|e| e.text),
            Some(c"batch submit internal error - retry later")
        );
        for r in TABLE {
            for e in [r.hipfile, r.cufile].into_iter().flatten() {
                assert!(e.text.to_str().is_ok_and(|t| t.is_ascii()), "{}", e.name);
            }
        }
    }
}
