//! The two facts of a shared library's dynamic section that `cargo xtask dist` checks in what
//! it builds: the soname (`DT_SONAME`) and the libraries the dynamic linker loads with it
//! (`DT_NEEDED`), read from the file itself (ELF64, little-endian: x86-64 and AArch64 Linux).
//! Every offset is checked against the file: a malformed file is an error, never a panic.

use std::path::Path;

/// What the dynamic section says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// `DT_SONAME`, when there is one.
    pub soname: Option<String>,
    /// Every `DT_NEEDED`, in order.
    pub needed: Vec<String>,
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_SONAME: u64 = 14;

/// The dynamic section of the shared library at `path`.
///
/// # Errors
///
/// When the file cannot be read, or is not a well-formed little-endian ELF64 file with a
/// dynamic section.
pub fn read_dynamic(path: &Path) -> Result<Dynamic, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    dynamic(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The dynamic section of the ELF image `bytes`.
///
/// # Errors
///
/// When `bytes` is not a well-formed little-endian ELF64 image with a dynamic section.
pub fn dynamic(bytes: &[u8]) -> Result<Dynamic, String> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a little-endian 64-bit ELF file".into());
    }
    let phoff = u64_at(bytes, 0x20)?;
    let phentsize = u64::from(u16_at(bytes, 0x36)?);
    let phnum = u64::from(u16_at(bytes, 0x38)?);
    let mut loads = Vec::new();
    let mut dynamic_segment = None;
    for i in 0..phnum {
        let at = phoff
            .checked_add(i.checked_mul(phentsize).ok_or("program headers overflow")?)
            .ok_or("program headers overflow")?;
        let kind = u32_at(bytes, at)?;
        let offset = u64_at(bytes, at + 8)?;
        let vaddr = u64_at(bytes, at + 16)?;
        let filesz = u64_at(bytes, at + 32)?;
        match kind {
            PT_LOAD => loads.push((vaddr, offset, filesz)),
            PT_DYNAMIC => dynamic_segment = Some((offset, filesz)),
            _ => {}
        }
    }
    let (offset, size) = dynamic_segment.ok_or("no dynamic section")?;
    let mut entries = Vec::new();
    let mut at = offset;
    while at.checked_add(16).is_some_and(|end| end <= offset + size) {
        let tag = u64_at(bytes, at)?;
        if tag == DT_NULL {
            break;
        }
        entries.push((tag, u64_at(bytes, at + 8)?));
        at += 16;
    }
    let strtab = entries
        .iter()
        .find(|(tag, _)| *tag == DT_STRTAB)
        .map(|(_, vaddr)| *vaddr)
        .ok_or("the dynamic section has no string table")?;
    // DT_STRTAB is an address; the loadable segment that holds it says where it is in the file.
    let strtab = loads
        .iter()
        .find(|(vaddr, _, filesz)| (*vaddr..vaddr.saturating_add(*filesz)).contains(&strtab))
        .map(|(vaddr, offset, _)| strtab - vaddr + offset)
        .ok_or("the string table is in no loadable segment")?;
    let string = |index: u64| {
        let start = strtab
            .checked_add(index)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or("a string lies outside the file")?;
        let rest = bytes.get(start..).ok_or("a string lies outside the file")?;
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("a string is not terminated")?;
        String::from_utf8(rest[..len].to_vec()).map_err(|_| "a string is not UTF-8".to_string())
    };
    let mut out = Dynamic::default();
    for (tag, value) in entries {
        match tag {
            DT_NEEDED => out.needed.push(string(value)?),
            DT_SONAME => out.soname = Some(string(value)?),
            _ => {}
        }
    }
    Ok(out)
}

fn slice(bytes: &[u8], at: u64, len: usize) -> Result<&[u8], String> {
    usize::try_from(at)
        .ok()
        .and_then(|at| bytes.get(at..at.checked_add(len)?))
        .ok_or_else(|| format!("truncated (at byte {at})"))
}

fn u16_at(bytes: &[u8], at: u64) -> Result<u16, String> {
    let s = slice(bytes, at, 2)?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(bytes: &[u8], at: u64) -> Result<u32, String> {
    let s = slice(bytes, at, 4)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(bytes: &[u8], at: u64) -> Result<u64, String> {
    let s = slice(bytes, at, 8)?;
    let mut b = [0; 8];
    b.copy_from_slice(s);
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_needed_libraries_of_a_program() {
        // This test program is dynamically linked with the C library, and has no soname.
        let d = read_dynamic(&std::env::current_exe().unwrap()).unwrap();
        assert!(d.needed.iter().any(|n| n.starts_with("libc.so.")), "{d:?}");
        assert_eq!(d.soname, None);
    }

    #[test]
    fn refuses_what_is_not_elf_or_is_cut_short() {
        assert!(dynamic(b"#!/bin/sh\n").unwrap_err().contains("not an ELF"));
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let mut cut = exe[..64].to_vec();
        assert!(dynamic(&cut).is_err());
        cut[4] = 1;
        assert!(dynamic(&cut).unwrap_err().contains("64-bit"));
        // Every prefix is refused or read, never a panic.
        for len in [0, 5, 63, 64, 200, 4096] {
            let _ = dynamic(&exe[..len.min(exe.len())]);
        }
    }
}
