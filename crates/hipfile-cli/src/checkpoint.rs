//! `hipfile checkpoint`: writes the benchmark checkpoint of docs/PERF.md (or a scaled copy
//! for tests) as real safetensors files: the header is the `safetensors` crate's own
//! serialization of its `Metadata`, and the tensors' bytes are streamed from a fast PRNG, so
//! the memory used does not grow with the checkpoint.

use crate::Failure;
use clap::Args;
use hipfile_safetensors::Dtype;
use hipfile_safetensors::safetensors::tensor::{Metadata, TensorInfo};
use serde_json::json;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
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

Writes --shards safetensors files into --out, model-0000I-of-0000N.safetensors, and the
index model.safetensors.index.json that Hugging Face loaders read. Each shard holds the
checkpoint of docs/PERF.md: one 300 MiB tensor (an embedding, 38400 x 4096), then --layers
layers of q (2048 x 4096), k and v (512 x 4096 each), o (4096 x 2048), gate and up
(5120 x 2048 each), down (2048 x 5120) and one norm (4096), all bf16: 4 shards of 20
layers are 9.65 GB, 644 tensors. Layers are numbered across shards
(model.layers.{i}.self_attn.q_proj.weight, ...). --scale multiplies the first dimension
of every matrix (at least 1 row), for small copies. The bytes are pseudo-random (from
--seed), so that no file system compresses or deduplicates them.

Existing files are not overwritten: the command fails instead.",
    after_long_help = "Exit status: 0 when every file was written; 1 when a file could not be \
                       created or written; 2 on bad arguments."
)]
pub struct CheckpointArgs {
    /// The directory to write into (created if needed)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Shards, 1 to 1000
    #[arg(
        long,
        value_name = "N",
        default_value = "4",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000)
    )]
    pub shards: usize,
    /// Layers per shard, 0 to 10000
    #[arg(
        long,
        value_name = "N",
        default_value = "20",
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

/// The tensors of shard `shard`: name and shape, in file order.
pub fn shard_tensors(shard: usize, layers: usize, scale: f64) -> Vec<(String, Vec<usize>)> {
    let rows = |r: usize| ((r as f64 * scale).round() as usize).max(1);
    let mut out = vec![(
        format!("model.shard_{shard}.embed_tokens.weight"),
        vec![rows(38400), 4096],
    )];
    for l in shard * layers..(shard + 1) * layers {
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
    out
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

/// Writes one shard to `path`, which must not exist.
fn write_shard(path: &Path, header: &[u8], data_len: u64, seed: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let mut w = BufWriter::with_capacity(WRITE_CHUNK, file);
    w.write_all(header)?;
    let mut rng = Rng(seed);
    let mut buf = vec![0u8; WRITE_CHUNK];
    let mut left = data_len;
    while left > 0 {
        let n = left.min(WRITE_CHUNK as u64) as usize;
        rng.fill(&mut buf[..n]);
        w.write_all(&buf[..n])?;
        left -= n as u64;
    }
    w.flush()?;
    w.get_ref().sync_all()
}

/// Runs `hipfile checkpoint`.
pub fn run(args: &CheckpointArgs) -> Result<u8, Failure> {
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| failed(format!("cannot create {}: {e}", args.out.display())))?;
    let n = args.shards;
    let mut plans = Vec::with_capacity(n);
    for s in 0..n {
        let tensors = shard_tensors(s, args.layers, args.scale);
        let (head, data_len) = header(&tensors).map_err(|e| failed(format!("shard {s}: {e}")))?;
        let name = format!("model-{:05}-of-{n:05}.safetensors", s + 1);
        plans.push((args.out.join(&name), name, tensors, head, data_len));
    }
    // One thread per shard (a few at a time): the PRNG keeps up with a disk from one core
    // each, not from one for all.
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(8);
    for group in plans.chunks(threads) {
        let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = group
                .iter()
                .enumerate()
                .map(|(i, (path, _, _, head, len))| {
                    let seed = args.seed ^ (i as u64 + 1).wrapping_mul(0x5851_f42d_4c95_7f2d);
                    scope.spawn(move || write_shard(path, head, *len, seed))
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
        for ((path, ..), r) in group.iter().zip(results) {
            r.map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    let mut weight_map = serde_json::Map::new();
    let (mut tensors, mut bytes) = (0usize, 0u64);
    for (_, name, list, head, len) in &plans {
        for (t, _) in list {
            weight_map.insert(t.clone(), json!(name));
        }
        tensors += list.len();
        bytes += head.len() as u64 + len;
    }
    let data_bytes: u64 = plans.iter().map(|p| p.4).sum();
    let index = json!({"metadata": {"total_size": data_bytes}, "weight_map": weight_map});
    let index_path = args.out.join("model.safetensors.index.json");
    let write_index = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&index_path)?;
        writeln!(f, "{index:#}")?;
        File::sync_all(&f)
    };
    write_index().map_err(|e| failed(format!("cannot write {}: {e}", index_path.display())))?;
    let files: Vec<String> = plans.iter().map(|p| p.0.display().to_string()).collect();
    let text = if args.json {
        json!({"files": files, "tensors": tensors, "bytes": bytes}).to_string()
    } else {
        format!(
            "wrote {} shards, {tensors} tensors, {bytes} bytes:\n{}",
            n,
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

    #[test]
    fn the_full_checkpoint_has_the_shapes_of_perf_md() {
        let (mut tensors, mut bytes) = (0, 0u64);
        for s in 0..4 {
            let t = shard_tensors(s, 20, 1.0);
            let (_, len) = header(&t).unwrap();
            assert_eq!(
                len,
                (300 << 20) + 20 * ((16 + 4 + 4 + 16 + 3 * 20) << 20) + 20 * 8192
            );
            tensors += t.len();
            bytes += len;
        }
        assert_eq!(tensors, 644);
        assert_eq!(bytes / 10_000_000, 964); // 9.65 GB
    }

    #[test]
    fn the_header_is_what_the_safetensors_crate_reads() {
        let t = shard_tensors(1, 2, 0.001);
        let (head, len) = header(&t).unwrap();
        let mut file = head.clone();
        file.resize(head.len() + len as usize, 7);
        let st = hipfile_safetensors::safetensors::SafeTensors::deserialize(&file).unwrap();
        assert_eq!(st.len(), t.len());
        let q = st.tensor("model.layers.2.self_attn.q_proj.weight").unwrap();
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
    }
}
