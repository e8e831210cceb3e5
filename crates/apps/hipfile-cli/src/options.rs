//! The value parsers the commands share: byte counts (the library's one grammar,
//! [`hipfile::parse_size`]), the direction and the kind of memory. clap calls them; each
//! refusal says why, and clap adds which option it was.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use hipfile::{MemoryKind, Op};

/// The grammar, for refusals and help texts.
pub const SIZE_GRAMMAR: &str = "a whole number, optionally followed by K, KB, KiB, M, MB, MiB, \
                                G, GB, GiB, T, TB or TiB (each a power of 1024)";

/// A byte count, as the environment's sizes are read.
pub fn bytes(text: &str) -> Result<u64, String> {
    hipfile::parse_size(text)
        .map_err(|why| format!("{text:?} is not a number of bytes ({why}); use {SIZE_GRAMMAR}"))
}

/// `--op read|write`.
pub fn op() -> impl TypedValueParser<Value = Op> {
    PossibleValuesParser::new([Op::Read.as_str(), Op::Write.as_str()]).map(|s| {
        if s == Op::Write.as_str() {
            Op::Write
        } else {
            Op::Read
        }
    })
}

/// `--memory device|host|managed`.
pub fn memory() -> impl TypedValueParser<Value = MemoryKind> {
    PossibleValuesParser::new(["device", "host", "managed"]).map(|s| match s.as_str() {
        "host" => MemoryKind::Host,
        "managed" => MemoryKind::Managed,
        _ => MemoryKind::Device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_is_the_librarys_grammar_with_a_reason() {
        assert_eq!(bytes("4MB"), Ok(4_194_304));
        assert_eq!(bytes("4MiB"), Ok(4_194_304));
        assert_eq!(bytes("64K"), Ok(65536));
        let e = bytes("1.5M").unwrap_err();
        assert!(
            e.contains("\"1.5M\"") && e.contains("unknown suffix"),
            "{e}"
        );
        let e = bytes("").unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

    proptest::proptest! {
        /// The command line and the environment read every text alike.
        #[test]
        fn the_command_line_and_the_environment_agree(
            text in "[ ]?[0-9]{0,21}(k|K|kb|KiB|M|mb|MiB|G|GB|gib|T|tb|TiB|x|\\.5)?[ ]?",
        ) {
            let (config, _) = hipfile::ConfigBuilder::new().build_with(|name| {
                (name == "HIPFILE_STAGING_MEMORY").then(|| text.clone())
            });
            match bytes(&text) {
                Ok(n) if (4096..=(64 << 30)).contains(&n) => {
                    proptest::prop_assert_eq!(config.fallback.staging_memory, n);
                }
                Ok(_) => {}
                Err(_) => proptest::prop_assert_eq!(
                    config.fallback.staging_memory,
                    hipfile::core::FallbackKnobs::DEFAULT_STAGING_MEMORY
                ),
            }
        }
    }
}
