//! Writes a synthetic TPU host with many short steps ([`xlens_testkit::synth::many_steps`]):
//! `cargo run -p xlens-testkit --example many_steps -- STEPS OUTDIR` writes
//! `OUTDIR/host0000.xplane.pb` (300,000 steps make about 30 MB), the shape of the scale tests of
//! outputs that grow with the steps (`ops --json`).

use std::process::ExitCode;

use xlens_testkit::synth::{many_steps, tpu_profile};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [steps, out] = args.as_slice() else {
        eprintln!("usage: many_steps STEPS OUTDIR");
        return ExitCode::from(2);
    };
    let Ok(steps) = steps.parse::<u32>() else {
        eprintln!("many_steps: STEPS must be a whole number, not {steps:?}");
        return ExitCode::from(2);
    };
    let path = std::path::Path::new(out).join("host0000.xplane.pb");
    let written = std::fs::create_dir_all(out).and_then(|()| std::fs::write(&path, tpu_profile(&many_steps(steps))));
    match written {
        Ok(()) => {
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            println!("{} ({steps} steps, {size} bytes)", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("many_steps: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
