//! Fuzz body for the XSpace decoder.
//!
//! Invariants: decoding never panics; when everything decodes, the decoded content re-encodes to
//! bytes that decode to the same content (a stable round trip); on a line whose events all decode,
//! the line index's reads (skips by time, events of a kind, stats gathered during the decode) give
//! what plain walks give.

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
            index_reads_equal_plain_walks(plane, line);
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

/// On a line whose events all decode: the indexed reads give what plain walks give.
fn index_reads_equal_plain_walks(plane: &xlens_xplane::Plane, line: &xlens_xplane::Line) {
    let Ok(all) = line.events(plane).collect::<Result<Vec<_>, _>>() else { return };
    // Every other metadata entry, and every other stat id.
    let mask = plane.metadata_mask(|m| m.id().0 % 2 == 0);
    let want: Vec<usize> = all.iter().filter(|e| mask.contains(e)).map(|e| e.index()).collect();
    let plain: Vec<usize> = line.events_where(plane, &mask).map_while(Result::ok).map(|e| e.index()).collect();
    assert_eq!(plain, want, "events_where on a line nobody indexed");
    let walked: usize =
        line.event_parts_indexing(plane, 3).into_iter().map(|run| run.map_while(Result::ok).count()).sum();
    assert_eq!(walked, all.len(), "indexing runs yield every event");
    let indexed: Vec<usize> = line.events_where(plane, &mask).map_while(Result::ok).map(|e| e.index()).collect();
    assert_eq!(indexed, want, "events_where on an indexed line");
    for from in all.iter().step_by(all.len() / 4 + 1).map(|e| e.start()) {
        let mut skipping = line.events(plane);
        skipping.skip_to(from);
        let got: Vec<usize> = skipping.map_while(Result::ok).filter(|e| e.start() >= from).map(|e| e.index()).collect();
        // In start order or not (then the skip does nothing), the same events.
        let want: Vec<usize> = all.iter().filter(|e| e.start() >= from).map(|e| e.index()).collect();
        assert_eq!(got, want, "skip_to keeps every event at or after the target");
    }
    let wanted = |id: xlens_xplane::StatMetadataId| id.0 % 2 == 1;
    let mut gathered = xlens_xplane::GatheredStats::new(wanted);
    let mut events = line.events(plane);
    while let Some(Ok(event)) = events.next_gathering(&mut gathered) {
        let walked: Vec<_> = event.stats_where(wanted).map_while(Result::ok).map(|s| s.metadata_id()).collect();
        let got: Vec<_> = gathered.stats().iter().map(|s| s.metadata_id()).collect();
        assert_eq!(got, walked, "stats gathered during the decode are the ones a walk finds");
    }
    // Runs of bare events between general reads: the same events, in order.
    let mut releasing = line.events_releasing(plane);
    let mut run = [xlens_xplane::BareEvent::default(); 5];
    let mut seen = Vec::new();
    loop {
        let n = releasing.next_bare_run(&mut run);
        seen.extend(run[..n].iter().map(|b| (b.metadata_id, b.start, b.duration)));
        if n == run.len() {
            continue;
        }
        match releasing.next() {
            Some(Ok(e)) => seen.push((e.metadata_id(), e.start(), e.duration())),
            _ => break,
        }
    }
    let want: Vec<_> = all.iter().map(|e| (e.metadata_id(), e.start(), e.duration())).collect();
    assert_eq!(seen, want, "bare runs and general reads give the events in order");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rng, mutate};

    fn seeds() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
        let mut out = Vec::new();
        // Two JAX CPU captures and a real H200 one (GPU kernels of a dozen stats each, which the
        // event walks skim).
        for name in ["corpus/data_formatting_baseline", "corpus/clean", "h200/h200_train_bf16"] {
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
