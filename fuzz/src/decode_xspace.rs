//! Fuzz body for the XSpace decoder.
//!
//! Invariants: decoding never panics; when everything decodes, the decoded content re-encodes to
//! bytes that decode to the same content (a stable round trip).

use bytes::Bytes;
use prost::Message;
use xlens_xplane::{Space, inventory, validate};

/// Decodes `data`, walks every event and stat, and checks the round trip when it decodes.
pub fn run(data: &[u8]) {
    let Ok(space) = Space::parse(Bytes::copy_from_slice(data)) else {
        return;
    };
    let _ = validate(&space);
    let _ = inventory(&space);
    for plane in space.planes() {
        let _ = plane.kind();
        for stat in plane.stats().flatten() {
            let _ = (stat.name(), stat.value());
        }
        for line in plane.lines() {
            let mut count = 0;
            for event in line.events(plane) {
                let Ok(event) = event else { break };
                count += 1;
                let _ = (event.name(), event.display_name(), event.start(), event.end());
                for stat in event.stats().chain(event.metadata_stats()).flatten() {
                    let _ = (stat.name(), stat.value());
                }
            }
            assert!(count <= line.event_count(), "iterated more events than counted");
        }
    }
    let Ok(first) = space.to_raw() else {
        return;
    };
    let encoded = first.encode_to_vec();
    let again = Space::parse(Bytes::from(encoded.clone()));
    let again = match again {
        Ok(space) => space,
        // An XSpace with nothing in it encodes to zero bytes, which is not a profile.
        Err(_) if encoded.is_empty() => return,
        Err(e) => panic!("re-encoded space does not decode: {e}"),
    };
    let second = again.to_raw().expect("re-encoded events decode");
    // Compare encodings, not structs: NaN doubles are equal bit for bit but not by `==`.
    assert_eq!(second.encode_to_vec(), encoded, "round trip is not stable");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rng, mutate};

    fn seeds() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/corpus");
        let mut out = Vec::new();
        for name in ["data_formatting_baseline", "clean"] {
            out.push(std::fs::read(dir.join(name).join("vm.xplane.pb")).expect("seed trace"));
        }
        out
    }

    #[test]
    fn smoke_real_traces_decode_and_round_trip() {
        for seed in seeds() {
            run(&seed);
        }
    }

    #[test]
    fn smoke_mutated_real_traces() {
        let seeds = seeds();
        let mut rng = Rng::new(0x5eed);
        for i in 0..300 {
            let mut input = seeds[i % seeds.len()].clone();
            // Keep inputs small so the smoke test stays fast: a window of the trace.
            let start = rng.below(input.len());
            let len = 64 + rng.below(4096);
            input = input[start..(start + len).min(input.len())].to_vec();
            mutate(&mut rng, &mut input);
            run(&input);
        }
    }

    #[test]
    fn smoke_random_bytes() {
        let mut rng = Rng::new(42);
        for _ in 0..2000 {
            let len = rng.below(256);
            let input: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            run(&input);
        }
    }
}
