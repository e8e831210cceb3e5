//! What the machine can do for a test: root, commands on `PATH`, loop devices. Each check
//! gives a [`Skip`] saying what is missing.

use crate::skip::Skip;

/// Ok when the effective user is root (mounting and `losetup` need it).
pub fn is_root() -> Result<(), Skip> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        Ok(())
    } else {
        Err(Skip(format!(
            "needs root (effective uid is {})",
            euid.as_raw()
        )))
    }
}

/// Ok when `name` is a command found on `PATH`.
pub fn has_command(name: &str) -> Result<(), Skip> {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v \"$1\" >/dev/null 2>&1", "sh", name])
        .status()
        .map_err(|e| Skip(format!("cannot run sh to look for `{name}`: {e}")))?;
    if found.success() {
        Ok(())
    } else {
        Err(Skip(format!("needs the `{name}` command on PATH")))
    }
}

/// Ok when loop devices can be created: `/dev/loop-control` opens read-write and `losetup`
/// exists.
pub fn loop_devices() -> Result<(), Skip> {
    const CONTROL: &str = "/dev/loop-control";
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(CONTROL)
        .map_err(|e| Skip(format!("needs loop devices: cannot open {CONTROL}: {e}")))?;
    has_command("losetup")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temp::TempDir;

    #[test]
    fn has_command_finds_sh_and_not_nonsense() {
        assert_eq!(has_command("sh"), Ok(()));
        let missing = has_command("hipfile-testfs-no-such-command").unwrap_err();
        assert!(
            missing.0.contains("hipfile-testfs-no-such-command"),
            "{missing}"
        );
    }

    #[test]
    fn has_command_does_not_run_shell_code_in_the_name() {
        let dir = TempDir::new("cmd");
        let marker = dir.path().join("ran");
        let name = format!("x; touch {}", marker.display());
        assert!(has_command(&name).is_err());
        assert!(!marker.exists());
    }

    #[test]
    fn capability_checks_agree_with_the_machine() {
        assert_eq!(is_root().is_ok(), rustix::process::geteuid().is_root());
        if let Err(skip) = loop_devices() {
            assert!(
                skip.0.contains("loop") || skip.0.contains("losetup"),
                "{skip}"
            );
        }
    }
}
