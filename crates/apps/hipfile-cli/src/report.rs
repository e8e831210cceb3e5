//! What `hipfile check` says about one path: the probe's facts and both backends' verdicts,
//! gathered into a [`Report`], then written as a JSON line or as a row of a table.

use hipfile::probe::{FileFacts, Unusable};
use hipfile::{
    BackendKind, Config, Decision, MemoryKind, Platform, Request, RuntimeReport, Verdict,
};
use serde_json::{Value, json};
use std::path::Path;

/// Why no request would be served whatever the backends' verdicts: what an application
/// would meet before any backend is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// No GPU runtime could be loaded: the driver cannot open.
    NoGpuRuntime,
    /// The runtime sees no GPU device (or could not say): no device memory can be allocated,
    /// and both backends move data to or from device memory. Which runtime it is decides
    /// what to do.
    NoGpuDevice(Platform),
    /// The file can never be read or written at an offset, and registering it is refused.
    UnusableFile(Unusable),
    /// A character device without file offsets (`lseek` fails with `ESPIPE`: a terminal, a
    /// pseudo-terminal's master): the library registers it, as it registers every character
    /// device, but every read or write at an offset fails there with `ESPIPE`.
    NoFileOffsets,
}

impl Blocked {
    /// What blocks every request on `file` with `runtime`, if anything, in the order an
    /// application meets it: the driver's opening, then the file's registration.
    pub fn of(runtime: &RuntimeReport, file: &FileFacts) -> Option<Blocked> {
        Blocked::by_runtime(runtime).or_else(|| file.unusable().map(Blocked::UnusableFile))
    }

    /// What blocks every request of a run on `runtime`, if anything.
    pub fn by_runtime(runtime: &RuntimeReport) -> Option<Blocked> {
        if runtime.platform == Platform::None {
            Some(Blocked::NoGpuRuntime)
        } else if runtime.devices == 0 {
            Some(Blocked::NoGpuDevice(runtime.platform))
        } else {
            None
        }
    }

    /// The stable snake_case code used in `--json`.
    pub fn code(self) -> &'static str {
        match self {
            Blocked::NoGpuRuntime => "no_gpu_runtime",
            Blocked::NoGpuDevice(_) => "no_gpu_device",
            Blocked::UnusableFile(_) => "unusable_file",
            Blocked::NoFileOffsets => "no_file_offsets",
        }
    }

    /// What is wrong and what to do, in words.
    pub fn message(self) -> String {
        match self {
            Blocked::NoGpuRuntime => format!(
                "no GPU runtime could be loaded, so the hipfile driver cannot open and no \
                 request is served on either backend (the runtime error says what was tried); \
                 install the HIP runtime, or name its library with HIPFILE_HIP_LIBRARY; {}",
                crate::runtime::no_gpu_advice(Platform::None)
            ),
            Blocked::NoGpuDevice(platform) => format!(
                "the GPU runtime reports no usable GPU device, so no request is served on \
                 either backend: both move data to or from device memory (the runtime error \
                 says what the runtime answered); {}",
                crate::runtime::no_gpu_advice(platform)
            ),
            // The library's own refusal.
            Blocked::UnusableFile(why) => hipfile::Error::UnusableFile(why).to_string(),
            Blocked::NoFileOffsets => "it is a character device without file offsets (lseek \
                                       fails with ESPIPE): the library registers it, but \
                                       every read or write at an offset fails there with \
                                       ESPIPE (Illegal seek)"
                .into(),
        }
    }

    fn to_json(self) -> Value {
        json!({"code": self.code(), "message": self.message()})
    }
}

/// What is the same for every path of one run: the configuration, the runtime, the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// `HIPFILE_ALLOW_COMPAT_MODE` as settled.
    pub allow_compat_mode: bool,
    /// `HIPFILE_FORCE_COMPAT_MODE` as settled.
    pub force_compat_mode: bool,
    /// `HIPFILE_UNSUPPORTED_FILE_SYSTEMS` as settled.
    pub unsupported_file_systems: bool,
    /// The fallback's knobs as settled (shown in the human header).
    pub fallback: hipfile::core::config::FallbackKnobs,
    /// The runtime as found.
    pub runtime: RuntimeReport,
    /// The request asked about.
    pub request: Request,
    /// The buffer's kind of memory.
    pub memory: MemoryKind,
}

impl Context {
    /// The context of a run.
    pub fn new(
        config: &Config,
        runtime: RuntimeReport,
        request: Request,
        memory: MemoryKind,
    ) -> Self {
        Context {
            allow_compat_mode: config.allow_compat_mode,
            force_compat_mode: config.force_compat_mode,
            unsupported_file_systems: config.unsupported_file_systems,
            fallback: config.fallback_knobs(),
            runtime,
            request,
            memory,
        }
    }

    fn config_json(&self) -> Value {
        json!({
            "allow_compat_mode": self.allow_compat_mode,
            "force_compat_mode": self.force_compat_mode,
            "unsupported_file_systems": self.unsupported_file_systems,
        })
    }

    fn runtime_json(&self) -> Value {
        let r = &self.runtime;
        json!({
            "platform": r.platform.as_str(),
            "library": r.library.as_ref().map(|p| p.to_string_lossy()),
            "version": r.version,
            "amd_file_io": r.amd_file_io,
            "devices": r.devices,
            "error": r.error,
        })
    }

    fn request_json(&self) -> Value {
        let q = &self.request;
        json!({
            "op": q.op.as_str(),
            "size": q.size,
            "file_offset": q.file_offset,
            "buffer_offset": q.buffer_offset,
            "memory": self.memory.as_str(),
        })
    }

    /// The runtime's error after the table, if there is one: a `runtime error:` line, then each
    /// line of the message on its own, indented (a loader's message names every path tried
    /// and a hint, one to a line). Each line ends in a newline.
    pub fn runtime_error(&self) -> String {
        let Some(error) = &self.runtime.error else {
            return String::new();
        };
        let mut out = String::from("runtime error:\n");
        for line in error.lines() {
            out.push_str("    ");
            out.push_str(&printable(line));
            out.push('\n');
        }
        out
    }

    /// The one line above the table: runtime, configuration and request.
    pub fn header(&self) -> String {
        let r = &self.runtime;
        let mut runtime = r.platform.as_str().to_owned();
        if let Some(v) = &r.version {
            runtime.push(' ');
            runtime.push_str(v);
        }
        if let Some(lib) = &r.library {
            runtime.push_str(&format!(" ({})", lib.display()));
            // Only a loaded runtime can count devices.
            match r.devices {
                1 => runtime.push_str(", 1 device"),
                n => runtime.push_str(&format!(", {n} devices")),
            }
        }
        runtime.push_str(if r.amd_file_io {
            ", AMD file I/O"
        } else {
            ", no AMD file I/O"
        });
        let q = &self.request;
        let k = &self.fallback;
        format!(
            "runtime: {runtime}; config: allow_compat_mode={} force_compat_mode={} \
             unsupported_file_systems={}; fallback: io_threads={} task_size={} \
             staging_memory={} small_io_threshold={} cold_direct_reads={}; request: {} {} bytes \
             at file offset {}, \
             {} memory at buffer offset {}",
            self.allow_compat_mode,
            self.force_compat_mode,
            self.unsupported_file_systems,
            k.io_threads,
            k.task_size,
            k.staging_memory,
            k.small_io_threshold,
            k.cold_direct_reads,
            q.op,
            q.size,
            q.file_offset,
            self.memory.as_str(),
            q.buffer_offset,
        )
    }
}

/// One backend's verdict, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Score {
    /// The eagerness score: the accepted score, or -1.
    pub score: i32,
    /// The codes of every reason it refuses for, in the backend's order; empty when it
    /// accepts.
    pub rejected_because: Vec<&'static str>,
}

impl Score {
    fn of(verdict: Option<&Verdict>) -> Score {
        match verdict {
            Some(v) => Score {
                score: v.score(),
                rejected_because: v.reasons().iter().map(|r| r.code()).collect(),
            },
            // A backend that did not take part cannot serve the request.
            None => Score {
                score: Verdict::REJECTED,
                rejected_because: Vec::new(),
            },
        }
    }

    fn to_json(&self) -> Value {
        json!({"score": self.score, "rejected_because": self.rejected_because})
    }

    fn cell(&self) -> String {
        if self.rejected_because.is_empty() {
            self.score.to_string()
        } else {
            format!("{} {}", self.score, self.rejected_because.join(","))
        }
    }
}

/// What `hipfile check` reports about one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The path as given.
    pub path: String,
    /// `regular`, `block` or `other`.
    pub kind: &'static str,
    /// The mount type, when the filesystem is known.
    pub filesystem: Option<String>,
    /// The ext4 `data=` mode, for ext4 only.
    pub ext4_journal: Option<&'static str>,
    /// Whether the file has a usable `O_DIRECT` descriptor.
    pub o_direct: bool,
    /// Why the file can never be read or written at an offset, if so.
    pub unusable: Option<Unusable>,
    /// Direct-I/O memory alignment; 0 without direct I/O.
    pub dio_mem_align: u32,
    /// Direct-I/O offset and size alignment; 0 without direct I/O.
    pub dio_offset_align: u32,
    /// The fastpath's verdict.
    pub fastpath: Score,
    /// The fallback's verdict.
    pub fallback: Score,
    /// The backend that would serve the request, if any: none when no backend accepts it or
    /// when something blocks every request.
    pub selected: Option<&'static str>,
    /// What keeps any backend from serving, if anything.
    pub blocked: Option<Blocked>,
}

impl Report {
    /// The report on `path`, whose facts are `file`, for `decision` on `runtime`.
    pub fn new(
        path: &Path,
        file: &FileFacts,
        decision: &Decision,
        runtime: &RuntimeReport,
    ) -> Report {
        let blocked = Blocked::of(runtime, file);
        Report {
            path: path.to_string_lossy().into_owned(),
            kind: file.kind.as_str(),
            filesystem: file.fs_type().map(str::to_owned),
            ext4_journal: file.ext4_journal().map(|j| j.as_str()),
            o_direct: file.has_direct_io(),
            unusable: file.unusable(),
            dio_mem_align: file.dio_mem_align(),
            dio_offset_align: file.dio_offset_align(),
            fastpath: Score::of(decision.verdict(BackendKind::Fastpath)),
            fallback: Score::of(decision.verdict(BackendKind::Fallback)),
            selected: decision
                .selected_kind()
                .map(BackendKind::as_str)
                .filter(|_| blocked.is_none()),
            blocked,
        }
    }

    /// The report, with `blocked` as what blocks every request if nothing the application
    /// meets earlier (the runtime, the registration) does.
    pub fn blocked_at_io(mut self, blocked: Option<Blocked>) -> Report {
        if self.blocked.is_none() && blocked.is_some() {
            self.blocked = blocked;
            self.selected = None;
        }
        self
    }

    /// The report as one JSON object (no newline).
    pub fn to_json(&self, ctx: &Context) -> String {
        json!({
            "path": self.path,
            "file": {
                "kind": self.kind,
                "filesystem": self.filesystem,
                "ext4_journal": self.ext4_journal,
                "o_direct": self.o_direct,
                "dio_mem_align": self.dio_mem_align,
                "dio_offset_align": self.dio_offset_align,
                "unusable": self.unusable.map(Unusable::code),
            },
            "config": ctx.config_json(),
            "runtime": ctx.runtime_json(),
            "request": ctx.request_json(),
            "fastpath": self.fastpath.to_json(),
            "fallback": self.fallback.to_json(),
            "selected": self.selected,
            "blocked": self.blocked.map(Blocked::to_json),
        })
        .to_string()
    }

    fn cells(&self) -> [String; 7] {
        let filesystem = match (&self.filesystem, self.ext4_journal) {
            (Some(fs), Some(j)) => format!("{fs} data={j}"),
            (Some(fs), None) => fs.clone(),
            (None, _) => "unknown".into(),
        };
        let o_direct = if self.o_direct {
            format!(
                "yes mem={} off={}",
                self.dio_mem_align, self.dio_offset_align
            )
        } else {
            "no".into()
        };
        [
            printable(&self.path),
            self.kind.into(),
            filesystem,
            o_direct,
            self.fastpath.cell(),
            self.fallback.cell(),
            match (self.selected, self.blocked) {
                (Some(backend), _) => backend.into(),
                (None, Some(why)) => format!("none ({})", why.code()),
                (None, None) => "none".into(),
            },
        ]
    }
}

const COLUMNS: [&str; 7] = [
    "PATH",
    "KIND",
    "FILESYSTEM",
    "O_DIRECT",
    "FASTPATH",
    "FALLBACK",
    "SELECTED",
];

/// The header line, an aligned table with one row per report, then what blocks every
/// request if anything does, and the runtime's error if there is one
/// ([`Context::runtime_error`]), each line ending in a newline.
pub fn table(ctx: &Context, reports: &[Report]) -> String {
    let mut rows: Vec<[String; 7]> = vec![COLUMNS.map(String::from)];
    rows.extend(reports.iter().map(Report::cells));
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = ctx.header();
    out.push('\n');
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = w - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if let Some(why) = Blocked::by_runtime(&ctx.runtime) {
        out.push_str(&format!("nothing would be served: {}\n", why.message()));
    }
    // Said of every such file, also when the runtime blocks first: both stand in the way.
    for r in reports {
        if let Some(why) = r.unusable {
            out.push_str(&format!(
                "{}: nothing would be served: {}\n",
                printable(&r.path),
                Blocked::UnusableFile(why).message()
            ));
        }
    }
    if ctx.runtime.platform == Platform::Nvidia && ctx.runtime.error.is_none() {
        out.push_str(NVIDIA_NOTE);
    }
    out.push_str(&ctx.runtime_error());
    out
}

/// What a user of an NVIDIA GPU gives up, said under every table on such a runtime.
const NVIDIA_NOTE: &str = "note: NVIDIA's runtime has no AMD file I/O, so the fallback (host \
staging) serves every request: no GPU direct storage, also for cuFile's programs run on \
hipfile's libcufile.so.0\n";

/// `s` with control characters escaped, so that a path cannot break a line of the table.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile::probe::{
        AlignSource, DirectIo, Ext4Journal, FileKind, Filesystem, NoDirectReason,
    };
    use hipfile::{BufferFacts, DevicePtr, Op, Platform};
    use std::path::PathBuf;

    fn facts(
        kind: FileKind,
        fs: Option<(&str, Option<Ext4Journal>)>,
        direct: DirectIo,
    ) -> FileFacts {
        FileFacts {
            kind,
            mode: 0o100644,
            dev: (7, 0),
            rdev: (0, 0),
            size: 1 << 20,
            status_flags: 0,
            filesystem: fs.map(|(t, j)| Filesystem {
                fs_type: t.into(),
                mount_point: PathBuf::from("/mnt"),
                source: "/dev/loop0".into(),
                super_options: vec!["rw".into()],
                ext4_journal: j,
            }),
            statfs_magic: 0,
            direct,
        }
    }

    const DIRECT: DirectIo = DirectIo::Available {
        mem_align: 512,
        offset_align: 4096,
        source: AlignSource::Statx,
    };

    fn ctx(config: &Config, memory: MemoryKind) -> Context {
        // The default report is that of no runtime.
        let mut runtime = RuntimeReport::default();
        runtime.error = Some("no \"library\"\nfound".into());
        let request = Request {
            op: Op::Read,
            size: 1 << 20,
            file_offset: 0,
            buffer_offset: 0,
        };
        Context::new(config, runtime, request, memory)
    }

    /// A runtime without AMD file I/O that sees `devices` devices.
    fn loaded(devices: u32) -> RuntimeReport {
        let mut r = RuntimeReport::default();
        r.platform = Platform::Nvidia;
        r.library = Some(PathBuf::from("/usr/lib/libcudart.so"));
        r.version = Some("12.4".into());
        r.devices = devices;
        r.error = (devices == 0).then(|| "cudaGetDeviceCount failed".into());
        r
    }

    /// The report on `file` with a runtime that has a device.
    fn report(config: &Config, file: &FileFacts, memory: MemoryKind) -> Report {
        report_on(config, file, memory, &loaded(1))
    }

    fn report_on(
        config: &Config,
        file: &FileFacts,
        memory: MemoryKind,
        runtime: &RuntimeReport,
    ) -> Report {
        let c = ctx(config, memory);
        let buffer = BufferFacts {
            base: DevicePtr(0x7f00_0000_1000),
            len: 1 << 20,
            memory,
            device: 0,
        };
        let d = hipfile::explain(config, runtime.amd_file_io, file, &c.request, &buffer).unwrap();
        Report::new(Path::new("/mnt/f"), file, &d, runtime)
    }

    #[test]
    fn json_has_exactly_the_documented_keys() {
        let config = Config::default();
        let file = facts(
            FileKind::Regular,
            Some(("ext4", Some(Ext4Journal::Ordered))),
            DIRECT,
        );
        let r = report(&config, &file, MemoryKind::Device);
        let v: serde_json::Value =
            serde_json::from_str(&r.to_json(&ctx(&config, MemoryKind::Device))).unwrap();
        let keys = |v: &serde_json::Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&v),
            [
                "blocked", "config", "fallback", "fastpath", "file", "path", "request", "runtime",
                "selected"
            ]
        );
        assert_eq!(
            keys(&v["file"]),
            [
                "dio_mem_align",
                "dio_offset_align",
                "ext4_journal",
                "filesystem",
                "kind",
                "o_direct",
                "unusable"
            ]
        );
        assert_eq!(v["file"]["unusable"], serde_json::Value::Null);
        assert_eq!(
            keys(&v["config"]),
            [
                "allow_compat_mode",
                "force_compat_mode",
                "unsupported_file_systems"
            ]
        );
        assert_eq!(
            keys(&v["runtime"]),
            [
                "amd_file_io",
                "devices",
                "error",
                "library",
                "platform",
                "version"
            ]
        );
        assert_eq!(v["runtime"]["devices"], 0);
        assert_eq!(
            keys(&v["request"]),
            ["buffer_offset", "file_offset", "memory", "op", "size"]
        );
        assert_eq!(keys(&v["fastpath"]), ["rejected_because", "score"]);
        assert_eq!(v["file"]["ext4_journal"], "ordered");
        assert_eq!(v["file"]["dio_mem_align"], 512);
        assert_eq!(v["file"]["dio_offset_align"], 4096);
        assert_eq!(v["fastpath"]["score"], -1);
        assert_eq!(
            v["fastpath"]["rejected_because"],
            serde_json::json!(["runtime_lacks_amd_file_io"])
        );
        assert_eq!(v["fallback"]["score"], 1);
        assert_eq!(v["selected"], "fallback");
        assert_eq!(v["blocked"], serde_json::Value::Null);
        assert_eq!(v["runtime"]["error"], "no \"library\"\nfound");
        assert_eq!(v["runtime"]["library"], serde_json::Value::Null);
    }

    #[test]
    fn header_names_a_loaded_runtime_and_its_devices() {
        let config = Config::default();
        let mut c = ctx(&config, MemoryKind::Device);
        c.runtime.platform = Platform::Emulated;
        c.runtime.library = Some(PathBuf::from("/t/libhipfile_emu.so"));
        c.runtime.version = Some("7.2.0".into());
        c.runtime.amd_file_io = true;
        c.runtime.devices = 2;
        c.runtime.error = None;
        assert!(
            c.header().starts_with(
                "runtime: emulated 7.2.0 (/t/libhipfile_emu.so), 2 devices, AMD file I/O;"
            ),
            "{}",
            c.header()
        );
        c.runtime.devices = 1;
        assert!(c.header().contains("), 1 device, AMD"), "{}", c.header());
    }

    #[test]
    fn a_table_on_nvidia_says_the_fallback_serves_everything() {
        let config = Config::default();
        let file = facts(
            FileKind::Regular,
            Some(("ext4", Some(Ext4Journal::Ordered))),
            DIRECT,
        );
        let mut c = ctx(&config, MemoryKind::Device);
        c.runtime = loaded(1);
        let r = report_on(&config, &file, MemoryKind::Device, &c.runtime);
        assert_eq!(r.selected, Some("fallback"));
        let text = table(&c, std::slice::from_ref(&r));
        assert!(
            text.contains("note: NVIDIA's runtime has no AMD file I/O"),
            "{text}"
        );
        assert!(text.contains("libcufile.so.0"), "{text}");
        c.runtime.platform = Platform::Emulated;
        assert!(!table(&c, &[r]).contains("note:"));
    }

    #[test]
    fn no_backend_is_selected_for_host_memory() {
        let config = Config::default();
        let file = facts(
            FileKind::Other,
            None,
            DirectIo::Unavailable(NoDirectReason::NotAttempted),
        );
        let r = report(&config, &file, MemoryKind::Host);
        assert_eq!(r.selected, None);
        assert_eq!(r.fallback.rejected_because, ["buffer_not_device_memory"]);
        assert_eq!(
            (r.o_direct, r.dio_mem_align, r.dio_offset_align),
            (false, 0, 0)
        );
        let v: serde_json::Value =
            serde_json::from_str(&r.to_json(&ctx(&config, MemoryKind::Host))).unwrap();
        assert_eq!(v["selected"], serde_json::Value::Null);
        assert_eq!(v["file"]["filesystem"], serde_json::Value::Null);
        assert_eq!(v["request"]["memory"], "host");
    }

    #[test]
    fn without_a_runtime_or_a_device_nothing_is_selected_and_the_verdicts_stay() {
        let config = Config::default();
        let file = facts(
            FileKind::Regular,
            Some(("ext4", Some(Ext4Journal::Ordered))),
            DIRECT,
        );
        let served = report(&config, &file, MemoryKind::Device);
        assert_eq!((served.selected, served.blocked), (Some("fallback"), None));
        let none = ctx(&config, MemoryKind::Device).runtime;
        for (runtime, blocked, code) in [
            (none, Blocked::NoGpuRuntime, "no_gpu_runtime"),
            (
                loaded(0),
                Blocked::NoGpuDevice(Platform::Nvidia),
                "no_gpu_device",
            ),
        ] {
            let ctx = Context {
                runtime: runtime.clone(),
                ..ctx(&config, MemoryKind::Device)
            };
            let r = report_on(&config, &file, MemoryKind::Device, &runtime);
            assert_eq!((r.selected, r.blocked), (None, Some(blocked)));
            assert_eq!(
                (&r.fastpath, &r.fallback),
                (&served.fastpath, &served.fallback)
            );
            let v: serde_json::Value = serde_json::from_str(&r.to_json(&ctx)).unwrap();
            assert_eq!(v["selected"], serde_json::Value::Null);
            assert_eq!(v["blocked"]["code"], code);
            assert_eq!(v["blocked"]["message"], blocked.message());
            let text = table(&ctx, &[r]);
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines[2].ends_with(&format!("none ({code})")), "{text}");
            assert_eq!(
                lines[3],
                format!("nothing would be served: {}", blocked.message())
            );
            assert_eq!(lines[4], "runtime error:", "{text}");
        }
    }

    #[test]
    fn an_unusable_file_is_not_served_and_both_obstacles_are_said() {
        let config = Config::default();
        let mut dir = facts(
            FileKind::Other,
            Some(("ext4", Some(Ext4Journal::Ordered))),
            DirectIo::Unavailable(NoDirectReason::NotAttempted),
        );
        dir.mode = 0o040_755;
        let why = Blocked::UnusableFile(Unusable::Directory);
        let r = report(&config, &dir, MemoryKind::Device);
        assert_eq!((r.selected, r.blocked), (None, Some(why)));
        assert_eq!(
            r.fallback.score, 1,
            "the fallback's rules do not look at the file"
        );
        assert_eq!(why.code(), "unusable_file");
        assert!(
            why.message().contains("it is a directory"),
            "{}",
            why.message()
        );

        // Without a runtime the driver's opening fails first; the file's refusal is still
        // said after the table.
        let c = ctx(&config, MemoryKind::Device);
        let r = report_on(&config, &dir, MemoryKind::Device, &c.runtime);
        assert_eq!(r.blocked, Some(Blocked::NoGpuRuntime));
        let v: serde_json::Value = serde_json::from_str(&r.to_json(&c)).unwrap();
        assert_eq!(v["file"]["unusable"], "directory");
        let text = table(&c, &[r]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[3].starts_with("nothing would be served: no GPU runtime"),
            "{text}"
        );
        assert_eq!(
            lines[4],
            format!("/mnt/f: nothing would be served: {}", why.message())
        );
    }

    #[test]
    fn table_is_aligned_and_names_reasons_and_selection() {
        let config = Config::default();
        let c = ctx(&config, MemoryKind::Device);
        let a = report_on(
            &config,
            &facts(FileKind::Regular, Some(("xfs", None)), DIRECT),
            MemoryKind::Device,
            &c.runtime,
        );
        let mut b = report_on(
            &config,
            &facts(
                FileKind::Regular,
                Some(("ext4", Some(Ext4Journal::Journal))),
                DirectIo::Unavailable(NoDirectReason::AlignmentZero),
            ),
            MemoryKind::Device,
            &c.runtime,
        );
        b.path = "/a\nlong/path".into();
        let text = table(&c, &[a, b]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8, "{text}");
        assert!(
            lines[0].starts_with("runtime: none, no AMD file I/O; config: "),
            "{text}"
        );
        assert_eq!(
            lines[4],
            format!(
                "nothing would be served: {}",
                Blocked::NoGpuRuntime.message()
            )
        );
        assert_eq!(
            lines[5..],
            ["runtime error:", "    no \"library\"", "    found"],
            "{text}"
        );
        assert!(lines[0].contains("force_compat_mode=false"), "{text}");
        assert!(!lines[0].contains("devices"), "{text}");
        let col = |line: &str, name: &str| line.find(name).unwrap();
        let fast = col(lines[1], "FASTPATH");
        assert_eq!(&lines[2][fast..fast + 28], "-1 runtime_lacks_amd_file_io");
        assert_eq!(
            &lines[3][fast..fast + 67],
            "-1 runtime_lacks_amd_file_io,no_o_direct_fd,unsupported_file_system"
        );
        assert!(
            lines[2].contains("yes mem=512 off=4096")
                && lines[2].ends_with("  none (no_gpu_runtime)"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("/a\\nlong/path") && lines[3].contains("ext4 data=journal"),
            "{text}"
        );
    }
}
