//! The numeric codes a C caller sees (docs/BEHAVIOUR.md §4): hipFile's operation codes and
//! the errno-or-hipFile pair. Both the public error and the backends' errors map to them, so they
//! sit below both and import nothing from the crate.

/// hipFile's operation error codes (`hipFileOpError_t`, base 5000; 5021 and 5032 unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // The names are upstream's; `describe` gives each one's meaning.
#[non_exhaustive]
pub enum HipFileCode {
    DriverNotInitialized = 5001,
    DriverInvalidProps = 5002,
    DriverUnsupportedLimit = 5003,
    DriverVersionMismatch = 5004,
    DriverVersionReadError = 5005,
    DriverClosing = 5006,
    PlatformNotSupported = 5007,
    IONotSupported = 5008,
    DeviceNotSupported = 5009,
    DriverError = 5010,
    HipDriverError = 5011,
    HipPointerInvalid = 5012,
    HipMemoryTypeInvalid = 5013,
    HipPointerRangeError = 5014,
    HipContextMismatch = 5015,
    InvalidMappingSize = 5016,
    InvalidMappingRange = 5017,
    InvalidFileType = 5018,
    InvalidFileOpenFlag = 5019,
    DIONotSet = 5020,
    InvalidValue = 5022,
    MemoryAlreadyRegistered = 5023,
    MemoryNotRegistered = 5024,
    PermissionDenied = 5025,
    DriverAlreadyOpen = 5026,
    HandleNotRegistered = 5027,
    HandleAlreadyRegistered = 5028,
    DeviceNotFound = 5029,
    InternalError = 5030,
    GetNewFDFailed = 5031,
    DriverSetupError = 5033,
    IODisabled = 5034,
    BatchSubmitFailed = 5035,
    GPUMemoryPinningFailed = 5036,
    BatchFull = 5037,
    AsyncNotSupported = 5038,
}

impl HipFileCode {
    /// The numeric value of the C ABI.
    pub fn value(self) -> i32 {
        self as i32
    }

    /// Upstream's description of the code.
    pub fn describe(self) -> &'static str {
        use HipFileCode::*;
        match self {
            DriverNotInitialized => "GPU IO driver is not loaded",
            DriverInvalidProps => "invalid GPU IO driver property provided",
            DriverUnsupportedLimit => "GPU IO driver property value is unsupported",
            DriverVersionMismatch => "hipFile version does not match GPU IO driver version",
            DriverVersionReadError => "unable to read the GPU IO driver version",
            DriverClosing => "GPU IO driver is closing and not accepting new requests",
            PlatformNotSupported => "hipFile is not supported on the current platform",
            IONotSupported => "hipFile is not supported on the selected file",
            DeviceNotSupported => "the selected GPU does not support hipFile",
            DriverError => "GPU IO driver error",
            HipDriverError => "GPU driver error",
            HipPointerInvalid => "invalid GPU pointer",
            HipMemoryTypeInvalid => "memory type backing pointer is incompatible with hipFile",
            HipPointerRangeError => "pointer range exceeds allocated memory region",
            HipContextMismatch => "GPU driver context mismatch",
            InvalidMappingSize => "accessing memory beyond pinned memory buffer",
            InvalidMappingRange => "accessing memory beyond mapped memory region",
            InvalidFileType => "unsupported file type",
            InvalidFileOpenFlag => "unsupported file open flags",
            DIONotSet => "O_DIRECT flag not set",
            InvalidValue => "one or more arguments have an invalid value",
            MemoryAlreadyRegistered => "device pointer is already registered",
            MemoryNotRegistered => "device pointer is not registered",
            PermissionDenied => "permission error on device or file access",
            DriverAlreadyOpen => "GPU IO driver is already open",
            HandleNotRegistered => "file handle for GPU IO is not registered",
            HandleAlreadyRegistered => "file handle for GPU IO is already registered",
            DeviceNotFound => "selected device not found",
            InternalError => "internal GPU IO library error",
            GetNewFDFailed => "unable to obtain a new file descriptor",
            DriverSetupError => "GPU IO driver initialization error",
            IODisabled => "GPU IO config file prohibits GPU IO on specified file",
            BatchSubmitFailed => "failed to submit request for batch operation",
            GPUMemoryPinningFailed => "failed to allocate pinned device memory",
            BatchFull => "batch operation queue is full",
            AsyncNotSupported => "hipFile async IO is not supported",
        }
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
