//! Placeholder: this crate is being written.
