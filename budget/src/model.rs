//! Transformer shapes: parameter counts, activation memory and KV cache size.
//!
//! Activations follow Korthikanti et al., "Reducing Activation Recomputation in Large
//! Transformer Models" (2022), counted tensor by tensor so that grouped-query attention, gated
//! MLPs and other widths fit, and without dropout masks (modern LLM training uses no dropout).
//! For the classic shape (kv heads = heads, ffn = 4·hidden, GeLU MLP) one layer saves
//! `16·s·b·h` elements plus `a·s²·b` for the softmax output: `34·s·b·h + 5·a·s²·b` bytes in the
//! paper is this plus `2·s·b·h + 3·a·s²·b` bytes of dropout masks and outputs.

use std::fmt;
use std::str::FromStr;

use crate::dtype::{DType, unknown};
use crate::error::{Error, ErrorKind, Result, add, mul, positive, product};

/// Shape of a decoder-only transformer.
///
/// ```
/// use xlens_budget::Transformer;
/// let llama = Transformer::llama2_7b();
/// assert_eq!(llama.params()?, 6_738_415_616); // Llama-2-7B, untied embeddings
/// assert_eq!(Transformer::llama2_70b().params()?, 68_976_648_192);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transformer {
    /// Decoder layers.
    pub layers: u64,
    /// Model width (`d_model`).
    pub hidden: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads: `heads` for multi-head attention, fewer for GQA, 1 for MQA.
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// MLP intermediate width.
    pub ffn: u64,
    /// Gated MLP (SwiGLU/GeGLU: three matrices) instead of two.
    pub gated_mlp: bool,
    /// Vocabulary size; 0 leaves out embeddings and logits.
    pub vocab: u64,
}

/// The attention cache shape: what a KV cache holds per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KvShape {
    /// Layers.
    pub layers: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
}

impl KvShape {
    /// A KV cache shape; every dimension must be at least 1.
    pub fn new(layers: u64, kv_heads: u64, head_dim: u64) -> Result<KvShape> {
        Ok(KvShape {
            layers: positive("layers", layers)?,
            kv_heads: positive("kv_heads", kv_heads)?,
            head_dim: positive("head_dim", head_dim)?,
        })
    }

    /// KV cache bytes: `2 · layers · kv_heads · head_dim · seq · batch · dtype bytes`.
    ///
    /// ```
    /// use xlens_budget::{DType, KvShape};
    /// // Llama-2-7B, 4096 tokens, one sequence, bf16: exactly 2 GiB.
    /// assert_eq!(KvShape::new(32, 32, 128)?.bytes(4096, 1, DType::Bf16)?, 2 << 30);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes(&self, seq: u64, batch: u64, dtype: DType) -> Result<u64> {
        positive("seq", seq)?;
        positive("batch", batch)?;
        product("KV cache size", &[2, self.layers, self.kv_heads, self.head_dim, seq, batch, dtype.bytes()])
    }
}

/// What the backward pass recomputes instead of saving (JAX `jax.checkpoint` policies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Remat {
    /// Save every activation the backward pass needs.
    #[default]
    None,
    /// Save only each layer's input; recompute the layer during its backward pass (one layer's
    /// activations live at a time).
    Full,
    /// `jax.checkpoint_policies.dots_saveable`: save matmul outputs, recompute elementwise ops.
    DotsSaveable,
}

impl Remat {
    /// `"none"`, `"full"`, `"dots-saveable"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Remat::None => "none",
            Remat::Full => "full",
            Remat::DotsSaveable => "dots-saveable",
        }
    }
}

impl FromStr for Remat {
    type Err = Error;

    /// Parses `none`, `full`, `dots-saveable`/`dots`.
    fn from_str(s: &str) -> Result<Remat> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "none" | "nothing-saveable-off" => Remat::None,
            "full" | "nothing-saveable" => Remat::Full,
            "dots-saveable" | "dots" => Remat::DotsSaveable,
            _ => return Err(unknown("remat policy", s, "none, full, dots-saveable")),
        })
    }
}

impl fmt::Display for Remat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How attention is computed, which decides whether the `s × s` scores are saved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Attention {
    /// Scores materialised: the softmax output (`heads × s × s` per sequence) is saved.
    #[default]
    Materialized,
    /// Flash / splash attention: only the f32 log-sum-exp per query and head is saved.
    Flash,
}

/// The activation-memory inputs besides the model shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ActivationConfig {
    /// Sequence length.
    pub seq: u64,
    /// Sequences per chip (the local micro-batch).
    pub batch: u64,
    /// Saved activation type (bf16 for mixed precision, f32 for an f32 recipe).
    pub dtype: DType,
    /// The remat policy.
    pub remat: Remat,
    /// The attention implementation.
    pub attention: Attention,
}

impl Transformer {
    /// A multi-head transformer with `head_dim = hidden / heads`, `ffn = 4·hidden`, a GeLU MLP
    /// and no vocabulary; refine with the `with_*` methods.
    pub fn new(layers: u64, hidden: u64, heads: u64) -> Result<Transformer> {
        positive("layers", layers)?;
        positive("hidden", hidden)?;
        positive("heads", heads)?;
        if !hidden.is_multiple_of(heads) {
            return Err(Error::new(ErrorKind::Shape(format!(
                "hidden {hidden} is not a multiple of heads {heads}; give head_dim explicitly"
            ))));
        }
        Ok(Transformer {
            layers,
            hidden,
            heads,
            kv_heads: heads,
            head_dim: hidden / heads,
            ffn: mul("ffn", hidden, 4)?,
            gated_mlp: false,
            vocab: 0,
        })
    }

    /// Grouped-query attention with this many key/value heads (must divide `heads`).
    pub fn with_kv_heads(mut self, kv_heads: u64) -> Result<Transformer> {
        positive("kv_heads", kv_heads)?;
        if kv_heads > self.heads || !self.heads.is_multiple_of(kv_heads) {
            return Err(Error::new(ErrorKind::Shape(format!("kv_heads {kv_heads} must divide heads {}", self.heads))));
        }
        self.kv_heads = kv_heads;
        Ok(self)
    }

    /// An explicit head width.
    pub fn with_head_dim(mut self, head_dim: u64) -> Result<Transformer> {
        self.head_dim = positive("head_dim", head_dim)?;
        Ok(self)
    }

    /// The MLP width, and whether it is gated.
    pub fn with_ffn(mut self, ffn: u64, gated: bool) -> Result<Transformer> {
        self.ffn = positive("ffn", ffn)?;
        self.gated_mlp = gated;
        Ok(self)
    }

    /// The vocabulary size (untied input embedding and output projection).
    pub fn with_vocab(mut self, vocab: u64) -> Transformer {
        self.vocab = vocab;
        self
    }

    /// Llama-2-7B: 32 layers, width 4096, 32 heads, SwiGLU 11008, vocab 32000.
    pub fn llama2_7b() -> Transformer {
        Transformer {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 32,
            head_dim: 128,
            ffn: 11008,
            gated_mlp: true,
            vocab: 32000,
        }
    }

    /// Llama-2-70B: 80 layers, width 8192, 64 heads with 8 KV heads, SwiGLU 28672, vocab 32000.
    pub fn llama2_70b() -> Transformer {
        Transformer {
            layers: 80,
            hidden: 8192,
            heads: 64,
            kv_heads: 8,
            head_dim: 128,
            ffn: 28672,
            gated_mlp: true,
            vocab: 32000,
        }
    }

    /// Llama-3-8B: 32 layers, width 4096, 32 heads with 8 KV heads, SwiGLU 14336, vocab 128256.
    pub fn llama3_8b() -> Transformer {
        Transformer {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            ffn: 14336,
            gated_mlp: true,
            vocab: 128256,
        }
    }

    /// Parameter count: attention (Q, K, V, O), MLP, two norms per layer, a final norm, and
    /// untied input and output embeddings; biases are not counted.
    pub fn params(&self) -> Result<u64> {
        const W: &str = "parameter count";
        let q = product(W, &[self.hidden, self.heads, self.head_dim])?;
        let kv = product(W, &[2, self.hidden, self.kv_heads, self.head_dim])?;
        let mlp = product(W, &[self.mlp_matrices(), self.hidden, self.ffn])?;
        let norms = mul(W, 2, self.hidden)?;
        let layer = [q, kv, mlp, norms].into_iter().try_fold(q, |acc, x| add(W, acc, x))?; // q twice: Q and O
        let layers = mul(W, layer, self.layers)?;
        let embed = product(W, &[2, self.vocab, self.hidden])?;
        add(W, add(W, layers, embed)?, self.hidden)
    }

    fn mlp_matrices(&self) -> u64 {
        if self.gated_mlp { 3 } else { 2 }
    }

    /// Saved activation elements of one layer per token, excluding the attention scores.
    fn per_token_elements(&self, remat: Remat) -> Result<u64> {
        const W: &str = "activation size";
        let (h, f) = (self.hidden, self.ffn);
        let q = mul(W, self.heads, self.head_dim)?;
        let kv = mul(W, self.kv_heads, self.head_dim)?;
        let parts: Vec<u64> = match remat {
            // Norm inputs and outputs (4h), Q K V and the attention context, the MLP
            // intermediates (up and activation output; gate too when gated).
            Remat::None | Remat::Full => {
                vec![mul(W, 4, h)?, mul(W, 2, q)?, mul(W, 2, kv)?, mul(W, f, self.mlp_matrices())?]
            }
            // Layer input, the outputs of every matmul: Q K V, context (scores·V), output
            // projection, MLP up (and gate), MLP down.
            Remat::DotsSaveable => {
                vec![mul(W, 3, h)?, mul(W, 2, q)?, mul(W, 2, kv)?, mul(W, f, self.mlp_matrices() - 1)?]
            }
        };
        parts.into_iter().try_fold(0, |acc, x| add(W, acc, x))
    }

    /// Saved activation bytes of one layer for `cfg.batch` sequences, without remat.
    fn full_layer_bytes(&self, cfg: &ActivationConfig, remat: Remat) -> Result<u64> {
        const W: &str = "activation size";
        let tokens = mul(W, cfg.seq, cfg.batch)?;
        let elems = mul(W, self.per_token_elements(remat)?, tokens)?;
        let mut bytes = mul(W, elems, cfg.dtype.bytes())?;
        let scores = match cfg.attention {
            // The softmax output, heads × s × s per sequence (a QK^T dot output too).
            Attention::Materialized => product(W, &[self.heads, cfg.seq, tokens, cfg.dtype.bytes()])?,
            // The f32 log-sum-exp, one per head and query.
            Attention::Flash => product(W, &[self.heads, tokens, 4])?,
        };
        bytes = add(W, bytes, scores)?;
        Ok(bytes)
    }

    /// Activation bytes saved for the backward pass over `layers` layers (all layers of a
    /// pipeline stage), plus the f32 logits when the vocabulary is set.
    ///
    /// ```
    /// use xlens_budget::{ActivationConfig, Attention, DType, Remat, Transformer};
    /// // GPT-3-like layer (Korthikanti et al.): s=2048, b=1, h=12288, a=96.
    /// let gpt = Transformer::new(96, 12288, 96)?;
    /// let cfg = ActivationConfig { seq: 2048, batch: 1, dtype: DType::Bf16, remat: Remat::None, attention: Attention::Materialized };
    /// let one = gpt.activation_bytes(&cfg, 1)?;
    /// // 16·s·b·h elements of 2 bytes + a·s²·b softmax values of 2 bytes.
    /// assert_eq!(one, 32 * 2048 * 12288 + 2 * 96 * 2048 * 2048);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn activation_bytes(&self, cfg: &ActivationConfig, layers: u64) -> Result<u64> {
        const W: &str = "activation size";
        positive("seq", cfg.seq)?;
        positive("batch", cfg.batch)?;
        let tokens = mul(W, cfg.seq, cfg.batch)?;
        let stack = match cfg.remat {
            Remat::None => mul(W, self.full_layer_bytes(cfg, Remat::None)?, layers)?,
            Remat::DotsSaveable => mul(W, self.full_layer_bytes(cfg, Remat::DotsSaveable)?, layers)?,
            Remat::Full => {
                // Each layer's input, plus one layer recomputed in full during its backward pass.
                let inputs = product(W, &[self.hidden, tokens, cfg.dtype.bytes(), layers])?;
                let live = if layers > 0 { self.full_layer_bytes(cfg, Remat::None)? } else { 0 };
                add(W, inputs, live)?
            }
        };
        let logits = product(W, &[self.vocab, tokens, 4])?;
        add(W, stack, logits)
    }

    /// The KV cache shape.
    pub fn kv_shape(&self) -> KvShape {
        KvShape { layers: self.layers, kv_heads: self.kv_heads, head_dim: self.head_dim }
    }

    /// KV cache bytes; see [`KvShape::bytes`].
    ///
    /// ```
    /// use xlens_budget::{DType, Transformer};
    /// // Llama-2-70B (8 KV heads), 4096 tokens, 8 sequences, bf16: 10 GiB.
    /// assert_eq!(Transformer::llama2_70b().kv_cache_bytes(4096, 8, DType::Bf16)?, 10 << 30);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kv_cache_bytes(&self, seq: u64, batch: u64, dtype: DType) -> Result<u64> {
        self.kv_shape().bytes(seq, batch, dtype)
    }
}
