//! `ops --json` is written as it is serialized (issue 40 case 8): on a profile of many short
//! steps, whose document is twice the input's size, the heap the command holds is bounded by a
//! multiple of the input, and writing the document adds next to nothing to what the analyses
//! hold. Built whole in memory, the document's `serde_json::Value` took about 2.5 KB a step
//! and its text two copies more: 1.40 GB for a 60 MB profile of 300,000 steps.
//!
//! A counting global allocator measures the peak heap; this binary holds this one test only.

use std::io::Write;

use xlens::documents::{OpProfileDocument, host_op_profiles};
use xlens_testkit::alloc::CountingAlloc;
use xlens_testkit::synth::{many_steps, tpu_profile};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc::new();

/// Counts the bytes written to it and keeps none.
#[derive(Default)]
struct Counted(u64);

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn ops_json_holds_a_multiple_of_the_input_not_the_output() {
    const STEPS: u32 = 40_000;
    let dir = std::env::temp_dir().join(format!("xlens-ops-json-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = tpu_profile(&many_steps(STEPS));
    let input = profile.len();
    std::fs::write(dir.join("host0000.xplane.pb"), profile).unwrap();

    let (ops, analysis) = ALLOCATOR.peak_of(|| host_op_profiles(&dir).unwrap());
    assert_eq!(ops.hosts[0].steps.steps.len(), STEPS as usize);
    let held = ALLOCATOR.current();
    let (written, writing) = ALLOCATOR.peak_of(|| {
        let mut out = std::io::BufWriter::with_capacity(1 << 16, Counted::default());
        serde_json::to_writer_pretty(&mut out, &OpProfileDocument(&ops)).unwrap();
        out.into_inner().map_err(|e| e.into_error()).unwrap().0
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{STEPS} steps: input {input} bytes, output {written} bytes, analyses peak {analysis} bytes \
         (held {held}), writing peak {writing} bytes"
    );
    // The document outgrows the input: a copy of it would break the bounds below.
    assert!(written > 2 * input as u64, "output {written} bytes, input {input}");
    // Writing holds a buffer, and the steps' durations for their mean (`Steps::stats`: three
    // lists of 8 bytes a step and a sort's scratch), a tenth of the document at most.
    assert!(writing < (1 << 16) + 32 * STEPS as usize + (1 << 20), "writing peak {writing} bytes");
    assert!((writing as u64) < written / 10, "writing peak {writing} bytes for {written} written");
    // The analyses: the device timeline, the steps and their anatomy, a few times the input.
    let whole = analysis.max(held + writing);
    assert!(whole < 5 * input, "peak {whole} bytes for an input of {input}");
}
