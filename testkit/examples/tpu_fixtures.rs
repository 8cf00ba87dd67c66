//! Writes the TPU-shaped signature sessions and their clean twins:
//! `cargo run -p xlens-testkit --example tpu_fixtures -- NAME OUTDIR` writes `OUTDIR/host*.xplane.pb`
//! and `OUTDIR/ground_truth.json`; with `all` as NAME, every session to `OUTDIR/<name>/`.

use std::path::Path;
use std::process::ExitCode;

use xlens_testkit::{TPU_SESSIONS, write_tpu_session};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, out] = args.as_slice() else {
        eprintln!("usage: tpu_fixtures NAME|all OUTDIR   (names: {})", TPU_SESSIONS.join(", "));
        return ExitCode::from(2);
    };
    let jobs: Vec<(&str, std::path::PathBuf)> = if name == "all" {
        TPU_SESSIONS.iter().map(|n| (*n, Path::new(out).join(n))).collect()
    } else {
        vec![(name.as_str(), Path::new(out).to_path_buf())]
    };
    for (name, dir) in jobs {
        match write_tpu_session(name, &dir) {
            Ok(paths) => {
                for path in paths {
                    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    println!("{name}: {} ({size} bytes)", path.display());
                }
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
