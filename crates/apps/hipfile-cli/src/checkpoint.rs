//! `hipfile checkpoint`: writes the benchmark checkpoint of docs/PERF.md (or a scaled copy
//! for tests) as real safetensors files: one model, split into `--shards` files between
//! tensors. The header is the `safetensors` crate's own serialization of its `Metadata`,
//! and the tensors' bytes are streamed from a fast PRNG, so the memory used does not grow
//! with the checkpoint. Nothing is written before the whole checkpoint is known to fit.

use crate::failure::Failure;
use clap::Args;
use hipfile_safetensors::Dtype;
use hipfile_safetensors::safetensors::tensor::{Metadata, TensorInfo};
use serde_json::json;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The checkpoint was written.
pub const EXIT_WRITTEN: u8 = 0;
/// A file could not be created or written.
pub const EXIT_FAILED: u8 = 1;

/// Bytes generated and written at a time.
const WRITE_CHUNK: usize = 8 << 20;

/// Write the benchmark safetensors checkpoint
#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Write the benchmark safetensors checkpoint

Writes one model as --shards safetensors files into --out,
model-0000I-of-0000N.safetensors, and the index model.safetensors.index.json that Hugging
Face loaders read. The model is that of docs/PERF.md: four stages, each one 300 MiB tensor
(an embedding, 38400 x 4096) followed by a quarter of the --layers layers, each layer q
(2048 x 4096), k and v (512 x 4096 each), o (4096 x 2048), gate and up (5120 x 2048
each), down (2048 x 5120) and one norm (4096), all bf16: with the defaults (80 layers, 4
shards, one stage a shard) 9.65 GB, 644 tensors. Layers are numbered across the model
(model.layers.{i}.self_attn.q_proj.weight, ...). --shards splits the same model into that
many files of about equal size, cut between tensors: the tensors and their bytes are the
same whatever the number of shards. --scale multiplies the first dimension of every matrix
(at least 1 row), for small copies. The bytes are pseudo-random (from --seed and each
tensor's place in the model), so that no file system compresses or deduplicates them.

Before writing, the command says how many bytes it will write, and refuses (exit status 2,
nothing written) a checkpoint larger than the free space of --out's file system, or more
shards than the model has tensors. Existing files are not overwritten: the command fails
instead.",
    after_long_help = "Exit status: 0 when every file was written; 1 when a file exists or \
                       could not be created or written; 2 on bad arguments, more shards than \
                       tensors, or a checkpoint larger than the free space."
)]
pub struct CheckpointArgs {
    /// The directory to write into (created if needed)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Files to split the model into, 1 to 1000 (at most one per tensor)
    #[arg(
        long,
        value_name = "N",
        default_value = "4",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000)
    )]
    pub shards: usize,
    /// Layers of the model in all, 0 to 10000
    #[arg(
        long,
        value_name = "N",
        default_value = "80",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10000)
    )]
    pub layers: usize,
    /// Multiplies the first dimension of every matrix: above 0, at most 16
    #[arg(long, value_name = "F", default_value = "1", value_parser = scale)]
    pub scale: f64,
    /// Seed of the pseudo-random bytes
    #[arg(long, value_name = "N", default_value = "0")]
    pub seed: u64,
    /// Print one JSON object: files, tensors, bytes
    #[arg(long)]
    pub json: bool,
}

fn scale(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 16.0 => Ok(f),
        _ => Err(format!("{text:?} is not a number above 0 and at most 16")),
    }
}

/// The model's stages: each starts with an embedding-sized tensor.
pub const STAGES: usize = 4;

/// The model's tensors, name and shape, in file order: [`STAGES`] stages, each one
/// embedding-sized tensor followed by its share of the `layers` layers (stage `s` has layers
/// `s * layers / 4` up to `(s + 1) * layers / 4`).
pub fn model_tensors(layers: usize, scale: f64) -> Vec<(String, Vec<usize>)> {
    let rows = |r: usize| ((r as f64 * scale).round() as usize).max(1);
    let mut out = Vec::with_capacity(STAGES * (1 + layers / STAGES + 1) * 8);
    for stage in 0..STAGES {
        out.push((
            format!("model.stage_{stage}.embed_tokens.weight"),
            vec![rows(38400), 4096],
        ));
        for l in stage * layers / STAGES..(stage + 1) * layers / STAGES {
            let p = format!("model.layers.{l}");
            out.extend([
                (
                    format!("{p}.self_attn.q_proj.weight"),
                    vec![rows(2048), 4096],
                ),
                (
                    format!("{p}.self_attn.k_proj.weight"),
                    vec![rows(512), 4096],
                ),
                (
                    format!("{p}.self_attn.v_proj.weight"),
                    vec![rows(512), 4096],
                ),
                (
                    format!("{p}.self_attn.o_proj.weight"),
                    vec![rows(4096), 2048],
                ),
                (format!("{p}.mlp.gate_proj.weight"), vec![rows(5120), 2048]),
                (format!("{p}.mlp.up_proj.weight"), vec![rows(5120), 2048]),
                (format!("{p}.mlp.down_proj.weight"), vec![rows(2048), 5120]),
                (format!("{p}.input_layernorm.weight"), vec![4096]),
            ]);
        }
    }
    out
}

/// The bytes of a bf16 tensor of `shape`.
fn tensor_len(shape: &[usize]) -> u64 {
    (shape.iter().product::<usize>() * Dtype::BF16.bitsize() / 8) as u64
}

/// Cuts tensors of `lens` bytes, in order, into `shards` runs of about equal bytes, each of
/// at least one tensor: shard `k` ends at the first tensor boundary at or past `(k + 1) /
/// shards` of the bytes (so four equal stages in four shards are one stage each).
///
/// # Errors
///
/// More shards than tensors, in words.
pub fn split(lens: &[u64], shards: usize) -> Result<Vec<Range<usize>>, String> {
    let n = lens.len();
    if shards == 0 || shards > n {
        return Err(format!(
            "the model has {n} tensors, so it can be split into 1 to {n} shards, not --shards \
             {shards}; give fewer shards, or more --layers"
        ));
    }
    let total: u128 = lens.iter().map(|&l| u128::from(l)).sum();
    let mut ends = Vec::with_capacity(n + 1);
    let mut sum = 0u128;
    ends.push(0u128);
    for &l in lens {
        sum += u128::from(l);
        ends.push(sum);
    }
    let mut out = Vec::with_capacity(shards);
    let mut start = 0;
    for k in 0..shards {
        let end = if k + 1 == shards {
            n
        } else {
            // Leave at least one tensor for each shard after this one.
            let last = n - (shards - k - 1);
            let target = (k as u128 + 1) * total;
            (start + 1..=last)
                .find(|&e| ends[e] * shards as u128 >= target)
                .unwrap_or(last)
        };
        out.push(start..end);
        start = end;
    }
    Ok(out)
}

/// The header bytes of a shard of `tensors` (bf16, in that order): the crate's `Metadata`
/// as JSON, padded with spaces to a multiple of 8 as the crate's writer does; and the data
/// section's length.
pub fn header(tensors: &[(String, Vec<usize>)]) -> Result<(Vec<u8>, u64), String> {
    let mut offset = 0usize;
    let infos = tensors
        .iter()
        .map(|(name, shape)| {
            let len = shape.iter().product::<usize>() * Dtype::BF16.bitsize() / 8;
            let info = TensorInfo {
                dtype: Dtype::BF16,
                shape: shape.clone(),
                data_offsets: (offset, offset + len),
            };
            offset += len;
            (name.clone(), info)
        })
        .collect();
    let metadata = Metadata::new(None, infos).map_err(|e| e.to_string())?;
    let mut json = serde_json::to_string(&metadata).map_err(|e| e.to_string())?;
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    Ok((out, offset as u64))
}

/// splitmix64: fast, and good enough that the bytes do not compress.
struct Rng(u64);

impl Rng {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// The seed of tensor `t` of the model (its place in file order): the same tensor has the
/// same bytes whichever shard it is written in.
fn tensor_seed(seed: u64, t: usize) -> u64 {
    seed ^ (t as u64 + 1).wrapping_mul(0x5851_f42d_4c95_7f2d)
}

/// Writes one shard to `path`, which must not exist: the header, then the bytes of each
/// tensor (`lens`, the first being tensor `first` of the model).
fn write_shard(
    path: &Path,
    header: &[u8],
    lens: &[u64],
    first: usize,
    seed: u64,
) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let mut w = BufWriter::with_capacity(WRITE_CHUNK, file);
    w.write_all(header)?;
    let mut buf = vec![0u8; WRITE_CHUNK];
    for (i, &len) in lens.iter().enumerate() {
        let mut rng = Rng(tensor_seed(seed, first + i));
        let mut left = len;
        while left > 0 {
            let n = left.min(WRITE_CHUNK as u64) as usize;
            rng.fill(&mut buf[..n]);
            w.write_all(&buf[..n])?;
            left -= n as u64;
        }
    }
    w.flush()?;
    w.get_ref().sync_all()
}

/// One shard to write.
struct Plan {
    path: PathBuf,
    name: String,
    /// The model's tensors it holds.
    tensors: Range<usize>,
    header: Vec<u8>,
    data_len: u64,
}

/// Bytes as gigabytes (10^9), for people.
fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// The free bytes of the file system `dir` is (or would be) on: that of its nearest
/// existing ancestor, from `statvfs` (the blocks an unprivileged user may take).
fn free_space(dir: &Path) -> Result<(u64, u64, PathBuf), String> {
    let existing = dir
        .ancestors()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    let st = rustix::fs::statvfs(existing).map_err(|e| {
        format!(
            "cannot find the free space of {}: {}",
            existing.display(),
            io::Error::from(e)
        )
    })?;
    Ok((
        st.f_bavail.saturating_mul(st.f_frsize),
        st.f_frsize.max(1),
        existing.to_path_buf(),
    ))
}

/// Runs `hipfile checkpoint`.
pub fn run(args: &CheckpointArgs) -> Result<u8, Failure> {
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    let refused = |message: String| Failure::msg(crate::failure::EXIT_USAGE, message);
    let model = model_tensors(args.layers, args.scale);
    let lens: Vec<u64> = model.iter().map(|(_, shape)| tensor_len(shape)).collect();
    let n = args.shards;
    let mut plans = Vec::with_capacity(n);
    for (s, tensors) in split(&lens, n).map_err(refused)?.into_iter().enumerate() {
        let (header, data_len) =
            header(&model[tensors.clone()]).map_err(|e| failed(format!("shard {s}: {e}")))?;
        let name = format!("model-{:05}-of-{n:05}.safetensors", s + 1);
        plans.push(Plan {
            path: args.out.join(&name),
            name,
            tensors,
            header,
            data_len,
        });
    }
    let mut weight_map = serde_json::Map::new();
    for p in &plans {
        for (t, _) in &model[p.tensors.clone()] {
            weight_map.insert(t.clone(), json!(p.name));
        }
    }
    let data_bytes: u64 = lens.iter().sum();
    let index = json!({"metadata": {"total_size": data_bytes}, "weight_map": weight_map});
    let index_text = format!("{index:#}\n");
    let index_path = args.out.join("model.safetensors.index.json");
    let file_bytes: Vec<u64> = plans
        .iter()
        .map(|p| p.header.len() as u64 + p.data_len)
        .chain([index_text.len() as u64])
        .collect();
    let bytes: u64 = file_bytes.iter().sum();

    // Nothing is written (the directory not even made) before the whole checkpoint is
    // known to fit, and to overwrite nothing.
    for path in plans.iter().map(|p| &p.path).chain([&index_path]) {
        if path.exists() {
            return Err(failed(format!(
                "cannot write {}: File exists; checkpoint never overwrites a file (give \
                 another --out)",
                path.display()
            )));
        }
    }
    let (free, block, fs) = free_space(&args.out).map_err(failed)?;
    let need: u64 = file_bytes.iter().map(|&b| b.div_ceil(block) * block).sum();
    let what = format!(
        "{n} shards, {} tensors, {bytes} bytes ({})",
        model.len(),
        gb(bytes)
    );
    if need > free {
        return Err(refused(format!(
            "the checkpoint ({what}) does not fit in {}: its file system has {free} bytes \
             ({}) free; nothing was written (--scale makes a smaller copy)",
            fs.display(),
            gb(free)
        )));
    }
    eprintln!(
        "hipfile: writing {what} into {} ({} free)",
        args.out.display(),
        gb(free)
    );
    std::fs::create_dir_all(&args.out)
        .map_err(|e| failed(format!("cannot create {}: {e}", args.out.display())))?;
    // One thread per shard (a few at a time): the PRNG keeps up with a disk from one core
    // each, not from one for all.
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(8);
    for group in plans.chunks(threads) {
        let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = group
                .iter()
                .map(|p| {
                    let lens = &lens[p.tensors.clone()];
                    scope.spawn(move || {
                        write_shard(&p.path, &p.header, lens, p.tensors.start, args.seed)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a writer thread panicked")))
                })
                .collect()
        });
        for (p, r) in group.iter().zip(results) {
            r.map_err(|e| failed(format!("cannot write {}: {e}", p.path.display())))?;
        }
    }
    let write_index = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&index_path)?;
        f.write_all(index_text.as_bytes())?;
        File::sync_all(&f)
    };
    write_index().map_err(|e| failed(format!("cannot write {}: {e}", index_path.display())))?;
    let files: Vec<String> = plans.iter().map(|p| p.path.display().to_string()).collect();
    let text = if args.json {
        json!({"files": files, "tensors": model.len(), "bytes": bytes}).to_string()
    } else {
        format!(
            "wrote {n} shards, {} tensors, {bytes} bytes:\n{}",
            model.len(),
            files.join("\n")
        )
    };
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::output(EXIT_FAILED, e))?;
    Ok(EXIT_WRITTEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default model, split into the default 4 shards, is the benchmark checkpoint of
    /// docs/PERF.md: per shard one 300 MiB tensor and 20 layers of 16 + 4 + 4 + 16 + 3 x 20
    /// MiB and an 8 KiB norm; 644 tensors, 9.65 GB.
    #[test]
    fn the_default_checkpoint_is_that_of_perf_md() {
        let model = model_tensors(80, 1.0);
        let lens: Vec<u64> = model.iter().map(|(_, s)| tensor_len(s)).collect();
        let shards = split(&lens, 4).unwrap();
        assert_eq!(shards.len(), 4);
        for (s, range) in shards.iter().enumerate() {
            assert_eq!(range.len(), 1 + 20 * 8, "shard {s}");
            let (_, len) = header(&model[range.clone()]).unwrap();
            assert_eq!(
                len,
                (300 << 20) + 20 * ((16 + 4 + 4 + 16 + 3 * 20) << 20) + 20 * 8192
            );
            assert!(model[range.start].0.ends_with("embed_tokens.weight"));
            assert_eq!(
                model[range.start + 1].0,
                format!("model.layers.{}.self_attn.q_proj.weight", 20 * s)
            );
        }
        assert_eq!(model.len(), 644);
        let bytes: u64 = lens.iter().sum();
        assert_eq!(bytes, 9_647_554_560);
    }

    /// `--layers` counts the model's layers, and each stage has its share.
    #[test]
    fn layers_are_the_models_in_all() {
        for layers in [0, 1, 2, 5, 6, 80, 81] {
            let model = model_tensors(layers, 0.01);
            assert_eq!(model.len(), STAGES + 8 * layers, "{layers}");
            let last = (layers > 0).then(|| format!("model.layers.{}.", layers - 1));
            if let Some(last) = last {
                assert!(model.iter().any(|(n, _)| n.starts_with(&last)), "{layers}");
            }
        }
    }

    /// Every split covers the tensors in order, each shard non-empty, about equal in bytes;
    /// more shards than tensors is refused.
    #[test]
    fn splits_cover_the_model_in_order() {
        let lens: Vec<u64> = model_tensors(6, 0.01)
            .iter()
            .map(|(_, s)| tensor_len(s))
            .collect();
        for shards in 1..=lens.len() {
            let split = split(&lens, shards).unwrap();
            assert_eq!(split.len(), shards);
            assert_eq!(split[0].start, 0);
            assert_eq!(split[shards - 1].end, lens.len());
            for w in split.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            assert!(split.iter().all(|r| !r.is_empty()), "{shards}: {split:?}");
        }
        let e = split(&lens, lens.len() + 1).unwrap_err();
        assert!(e.contains(&format!("{} tensors", lens.len())), "{e}");
        // Equal tensors split evenly.
        assert_eq!(split(&[5; 6], 3).unwrap(), [0..2, 2..4, 4..6]);
    }

    #[test]
    fn the_header_is_what_the_safetensors_crate_reads() {
        let t = &model_tensors(8, 0.001)[..10];
        let (head, len) = header(t).unwrap();
        let mut file = head.clone();
        file.resize(head.len() + len as usize, 7);
        let st = hipfile_safetensors::safetensors::SafeTensors::deserialize(&file).unwrap();
        assert_eq!(st.len(), t.len());
        let q = st.tensor("model.layers.0.self_attn.q_proj.weight").unwrap();
        assert_eq!(q.shape(), [2, 4096]);
        assert_eq!(q.dtype(), Dtype::BF16);
        assert_eq!(head.len() % 8, 0);
    }

    #[test]
    fn the_bytes_do_not_repeat() {
        let mut a = vec![0u8; 1 << 16];
        Rng(1).fill(&mut a);
        assert_ne!(a[..8], a[8..16]);
        let mut b = vec![0u8; 1 << 16];
        Rng(2).fill(&mut b);
        assert_ne!(a, b);
        assert_ne!(tensor_seed(0, 0), tensor_seed(0, 1));
    }
}
