//! Cross-crate tests of hipfile live in `tests/`; this crate has no library code and nothing
//! depends on it.
