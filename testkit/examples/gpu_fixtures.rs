//! Writes NVIDIA-shaped GPU fixtures: `cargo run -p xlens-testkit --example gpu_fixtures -- NAME OUTDIR`
//! writes `OUTDIR/host0.xplane.pb`; with `all` as NAME, every fixture to `OUTDIR/<name>/`.

use std::path::Path;
use std::process::ExitCode;

use xlens_testkit::{GPU_FIXTURES, write_gpu_fixture};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, out] = args.as_slice() else {
        eprintln!("usage: gpu_fixtures NAME|all OUTDIR   (names: {})", GPU_FIXTURES.join(", "));
        return ExitCode::from(2);
    };
    let jobs: Vec<(&str, std::path::PathBuf)> = if name == "all" {
        GPU_FIXTURES.iter().map(|n| (*n, Path::new(out).join(n))).collect()
    } else {
        vec![(name.as_str(), Path::new(out).to_path_buf())]
    };
    for (name, dir) in jobs {
        match write_gpu_fixture(name, &dir) {
            Ok(path) => {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                println!("{name}: {} ({size} bytes)", path.display());
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
