//! The panic boundary: the one place where a panic is caught before it can unwind into C.
//! Every function the C libraries export runs its body through [`boundary`], in this crate
//! or in the library that exports it, and returns the error value it was given instead of
//! unwinding (docs/ARCHITECTURE.md: "every exported function runs inside one panic
//! boundary").

/// Runs `body`, turning a panic into `on_panic` so that no unwind crosses the C boundary.
pub fn boundary<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(on_panic)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_becomes_the_error_value() {
        assert_eq!(super::boundary(-5030, || panic!("a fault")), -5030);
        assert_eq!(super::boundary(-5030, || 7), 7);
    }
}
