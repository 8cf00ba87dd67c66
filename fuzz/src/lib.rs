//! Fuzz bodies for xlens, as library functions.
//!
//! Each module exposes `run(&[u8])`, called by a thin libFuzzer target in `fuzz_targets/` and by
//! seeded smoke tests here, so `cargo test` exercises the same code on stable. A body panics only
//! when an invariant breaks (a panic inside the decoder is a bug).

pub mod decode_hlo;
pub mod decode_xspace;

/// A small deterministic generator (xorshift64*) for seeded smoke tests.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Mutates `input` in place the way a fuzzer would: flips, overwrites, inserts, deletes, truncates.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        if input.is_empty() {
            input.push(rng.next_u64() as u8);
            continue;
        }
        let at = rng.below(input.len());
        match rng.below(6) {
            0 => input[at] ^= 1 << rng.below(8),
            1 => input[at] = rng.next_u64() as u8,
            2 => input.insert(at, rng.next_u64() as u8),
            3 => {
                input.remove(at);
            }
            4 => input.truncate(at),
            _ => {
                // A varint-looking run of continuation bytes (hostile lengths).
                let n = 1 + rng.below(10);
                for i in 0..n.min(input.len() - at) {
                    input[at + i] = 0xff;
                }
            }
        }
    }
}
