//! The API wing: the driver, registered files, device buffers and views of them, the types
//! an application holds.

pub(crate) mod buffer;
pub(crate) mod driver;
pub(crate) mod file;
pub(crate) mod view;
