//! `xlens`: the command line over the library. `xlens scan PATH` is the main job (what the
//! `fault_scan` example runs, the same code); `runs` and `watch` summarise every run of a logdir;
//! `ops`, `hlo`, `inventory`, `kernels`, `roofline`,
//! `plan`, `audit` and `synth` run the jobs of the other examples; `completions SHELL` prints
//! completions. The arguments are declared once, in the library's `cli` module (`src/cli`).
//!
//! Exit codes: 0; 1 on an error (one line on stderr); 2 on a usage mistake (one line on stderr);
//! 3 when `scan --fail-on` trips; 4 when `diff --fail-on-regression` trips.

fn main() -> std::process::ExitCode {
    xlens::cli::main()
}
