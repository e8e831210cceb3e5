//! NVIDIA's own headers, for the tests that compare `libcufile.so.0`'s declarations with
//! them (`crates/c/hipfile-c-cufile/tests/layout.rs` and `tests/nvidia.rs`): cuFile's `cufile.h`
//! as two releases ship it, and CUDA's `cuda.h`/`cuda_runtime.h`, which NVIDIA's header and
//! its samples include; and NVML's `nvml.h`, against which `crates/base/hipfile-sys/tests/nvml.rs`
//! builds its stand-in NVML. `ci` takes each from NVIDIA's PyPI packages ([`PACKAGES`], pinned),
//! which ship them, into `<target>/nvidia-headers/<name>/include`, where the tests look. Only
//! the headers are kept; nothing of them is committed or linked. A failure to fetch them is
//! a failure of `ci`, which would otherwise fail on the tests' missing capability anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One set of headers: where it goes (`<target>/nvidia-headers/<name>/include`), the pinned
/// wheels it comes from, and the file whose presence says it is complete.
pub struct Headers {
    pub name: &'static str,
    pub requirements: &'static [&'static str],
    pub marker: &'static str,
}

/// cuFile 1.15 (CUDA 13.0's toolkit) and 1.17 (the cuFile that PyTorch's CUDA 13 wheels
/// ship, whose functions `libcufile.so.0` exports), and CUDA 13.0's runtime headers (the
/// runtime wheel has `cuda.h` and `cuda_runtime.h`; the `crt/` headers those include come
/// in the `crt` wheel since CUDA 13). Later cuFile releases grew the statistics structs
/// (1.19 added `readv`/`writev` counters at the end of `CUfileStatsLevel1_t`, moving
/// everything of levels 2 and 3); see docs/decisions/cufile-abi.md. NVML's header of
/// CUDA 13.0 declares the calls `hipfile-sys` makes to `libnvidia-ml.so.1`.
pub const PACKAGES: &[Headers] = &[
    Headers {
        name: "cufile-1.15",
        requirements: &["nvidia-cufile==1.15.1.6"],
        marker: "cufile.h",
    },
    Headers {
        name: "cufile-1.17",
        requirements: &["nvidia-cufile==1.17.1.22"],
        marker: "cufile.h",
    },
    Headers {
        name: "cuda-13.0",
        requirements: &["nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88"],
        marker: "crt/host_config.h",
    },
    Headers {
        name: "nvml-13.0",
        requirements: &["nvidia-nvml-dev==13.0.87"],
        marker: "nvml.h",
    },
];

/// The headers' directory inside NVIDIA's CUDA 13 wheels.
const IN_WHEEL: &str = "nvidia/cu13/include/";

/// Where the tests find a set of headers, under the target directory.
pub fn include_dir(target: &Path, name: &str) -> PathBuf {
    target.join("nvidia-headers").join(name).join("include")
}

/// Makes sure every set of headers is where the tests look: nothing to do for a set an
/// earlier run fetched; otherwise its wheels are downloaded with pip and every header under
/// `nvidia/cu13/include/` taken out of them.
pub fn fetch(target: &Path) -> Result<(), String> {
    for set in PACKAGES {
        let include = include_dir(target, set.name);
        if include.join(set.marker).is_file() {
            continue;
        }
        let wheels = target.join("nvidia-headers").join(set.name).join("wheels");
        let wheels_arg = crate::dist::utf8(&wheels)?;
        let include_arg = crate::dist::utf8(&include)?;
        let mut args = vec![
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            wheels_arg,
        ];
        args.extend(set.requirements);
        python(&args)?;
        // A wheel is a zip file: Python's own zipfile takes the headers out.
        let script = format!(
            "import glob, os, sys, zipfile\n\
             wheels = glob.glob(os.path.join(sys.argv[1], '*.whl'))\n\
             if len(wheels) != int(sys.argv[3]): sys.exit('expected ' + sys.argv[3] + ' wheels in ' + sys.argv[1] + ', found ' + str(wheels))\n\
             for w in wheels:\n\
             \x20   z = zipfile.ZipFile(w)\n\
             \x20   for n in z.namelist():\n\
             \x20       if n.startswith('{IN_WHEEL}') and n.endswith(('.h', '.hpp')):\n\
             \x20           out = os.path.join(sys.argv[2], n[len('{IN_WHEEL}'):])\n\
             \x20           os.makedirs(os.path.dirname(out), exist_ok=True)\n\
             \x20           open(out, 'wb').write(z.read(n))\n"
        );
        let count = set.requirements.len().to_string();
        python(&["-c", &script, wheels_arg, include_arg, &count])?;
        if !include.join(set.marker).is_file() {
            return Err(format!(
                "{} was not written",
                include.join(set.marker).display()
            ));
        }
    }
    Ok(())
}

fn python(args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: running python3 {}", args.join(" "));
    let status = Command::new("python3")
        .args(args)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("python3 {} failed ({status})", args.join(" ")))
    }
}
