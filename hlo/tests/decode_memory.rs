//! Memory follows the bytes of a module, not the counts of its records: crafted protos of many
//! empty instructions stop with a typed error before they are allocated, a module within its
//! budget costs no more than it was charged, and real modules stay far below their budget.
//!
//! A counting global allocator (this test binary's own) measures the peak heap of each decode;
//! the tests of this file take turns (one lock), so that their allocations do not mix.

use std::sync::Mutex;
use xlens_testkit::alloc::CountingAlloc;

use xlens_hlo::limits::{COMPUTATION_COST, INSTRUCTION_COST, module_budget};
use xlens_hlo::{ErrorKind, Module};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc::new();

/// One test at a time: the counters are global to the binary (each test takes its turn for all
/// its allocations, the input's included).
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The peak heap `f` adds to what was live when it started (with what it returns), and its
/// result.
fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let (out, peak) = ALLOCATOR.peak_of(f);
    (peak, out)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(number: u64, payload: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// An `HloModuleProto` whose one computation holds `n` instructions, each encoded as
/// `instruction(i)` (empty instructions are two bytes each: the field key and a zero length), its
/// root the one of id `n`.
fn hlo_module(n: usize, instruction: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut comp = Vec::new();
    len_field(1, b"main", &mut comp);
    for i in 0..n {
        len_field(2, &instruction(i), &mut comp);
    }
    varint(6 << 3, &mut comp);
    varint(n as u64, &mut comp);
    let mut module = Vec::new();
    len_field(1, b"m", &mut module);
    len_field(3, &comp, &mut module);
    module
}

/// An `HloProto` holding [`hlo_module`].
fn hlo_proto(n: usize, instruction: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut proto = Vec::new();
    len_field(1, &hlo_module(n, instruction), &mut proto);
    proto
}

/// An instruction that builds: a parameter with a name, a number and a unique id (about 20
/// bytes, the least a real instruction holds).
fn parameter(i: usize) -> Vec<u8> {
    let mut out = Vec::new();
    len_field(1, format!("p.{i}").as_bytes(), &mut out);
    len_field(2, b"parameter", &mut out);
    varint(9 << 3, &mut out);
    varint(i as u64, &mut out);
    varint(35 << 3, &mut out);
    varint(i as u64 + 1, &mut out);
    out
}

/// Decodes a proto of `n` empty instructions: the census refuses it before anything of it is
/// allocated, with the typed error naming the module; the peak heap stays under four times the
/// input plus a small fixed margin (the bound; the figure is printed).
fn empty_instructions_are_refused(n: usize) {
    let _turn = turn();
    let bytes = hlo_proto(n, |_| Vec::new());
    let len = bytes.len();
    let (peak, result) = peak_of(|| Module::decode(bytes.into()));
    println!("{n} empty instructions: {len} bytes of proto, peak heap {peak} bytes");
    let err = result.expect_err("over its budget");
    assert!(matches!(err.kind(), ErrorKind::MemoryBudget { .. }), "{err}");
    assert_eq!(err.location().module.as_deref(), Some("m"), "{err}");
    assert!(err.to_string().contains("budget"), "{err}");
    assert!(peak <= 4 * len + (1 << 20), "{peak} bytes of heap for {len} bytes of proto");
}

#[test]
fn a_million_empty_instructions_are_refused_before_allocating() {
    empty_instructions_are_refused(1_000_000);
}

#[test]
fn four_million_empty_instructions_are_refused_before_allocating() {
    empty_instructions_are_refused(4_000_000);
}

#[test]
fn a_bare_module_of_empty_instructions_is_refused_too() {
    let _turn = turn();
    let module = hlo_module(1_000_000, |_| Vec::new());
    let (peak, result) = peak_of(|| Module::decode(module.into()));
    let err = result.expect_err("over its budget");
    assert!(matches!(err.kind(), ErrorKind::MemoryBudget { .. }), "{err}");
    assert!(peak < 1 << 20, "{peak}");
}

#[test]
fn a_module_within_its_budget_costs_no_more_than_it_was_charged() {
    let _turn = turn();
    // As many of the smallest instructions as the budget's margin allows, and some more bytes.
    for n in [1_000usize, 60_000] {
        let bytes = hlo_proto(n, parameter);
        let len = bytes.len();
        let (peak, result) = peak_of(|| Module::decode(bytes.into()));
        let module = result.unwrap_or_else(|e| panic!("{n} parameters: {e}"));
        assert_eq!(module.instructions().len(), n);
        drop(module);
        let charged = COMPUTATION_COST + n as u64 * INSTRUCTION_COST;
        println!("{n} parameters: {len} bytes of proto, peak heap {peak} bytes, charged {charged}");
        // The charge covers what the build allocates but the strings (a few bytes each here) and
        // the rayon pool's first use.
        assert!(peak as u64 <= charged + 2 * len as u64 + (256 << 10), "{peak} > {charged} charged");
        assert!(peak as u64 <= module_budget(len));
    }
}

#[test]
fn a_module_of_many_small_instructions_over_its_budget_is_refused() {
    let _turn = turn();
    // A million 20-byte instructions: 20 MB that would take 700 MB.
    let bytes = hlo_proto(1_000_000, parameter);
    let len = bytes.len();
    let (peak, result) = peak_of(|| Module::decode(bytes.into()));
    let err = result.expect_err("over its budget");
    let ErrorKind::MemoryBudget { needed, budget, encoded_bytes } = *err.kind() else { panic!("{err}") };
    assert_eq!((encoded_bytes, budget), (len as u64, module_budget(len)));
    assert!(needed > budget);
    assert!(peak < 1 << 20, "{peak}");
}

/// Every module of the profiles in `testdata/` decodes, in well under its budget: at most 8
/// bytes of heap per byte of proto, plus 1 MiB for the fixed costs of tiny modules.
#[test]
fn real_modules_stay_far_below_their_budget() {
    let _turn = turn();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let mut files = Vec::new();
    for group in ["h200", "corpus", "real", "tpu", "gpu", "field"] {
        let Ok(dirs) = std::fs::read_dir(root.join(group)) else { continue };
        for dir in dirs.flatten() {
            let Ok(entries) = std::fs::read_dir(dir.path()) else { continue };
            files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".xplane.pb")));
        }
    }
    files.sort();
    let mut modules = 0;
    for file in files {
        let Ok(space) = xlens_xplane::Space::parse(std::fs::read(&file).unwrap().into()) else { continue };
        let (entries, _) = xlens_hlo::hlo_protos(&space);
        for entry in entries {
            let len = entry.bytes.len();
            let (peak, result) = peak_of(|| Module::decode(entry.bytes.clone()));
            let module = result.unwrap_or_else(|e| panic!("{} {}: {e}", file.display(), entry.name));
            drop(module);
            let ratio = peak as f64 / len as f64;
            if len > 200_000 {
                println!(
                    "{} {}: {len} bytes of proto, peak heap {peak} bytes ({ratio:.2} per byte)",
                    file.display(),
                    entry.name
                );
            }
            assert!(peak <= 8 * len + (1 << 20), "{} {}: {peak} bytes for {len}", file.display(), entry.name);
            modules += 1;
        }
    }
    assert!(modules > 20, "{modules} modules");
}

#[test]
fn warnings_are_kept_up_to_their_limit_and_the_rest_counted() {
    let _turn = turn();
    let bytes = hlo_proto(1_000, |i| {
        let mut out = Vec::new();
        len_field(1, format!("x.{i}").as_bytes(), &mut out);
        len_field(2, b"frobnicate", &mut out);
        varint(35 << 3, &mut out);
        varint(i as u64 + 1, &mut out);
        out
    });
    let module = Module::decode(bytes.into()).unwrap();
    let warnings = module.warnings();
    assert_eq!(warnings.len(), xlens_hlo::limits::MAX_WARNINGS_PER_MODULE + 1);
    let omitted = (1_000 - xlens_hlo::limits::MAX_WARNINGS_PER_MODULE) as u64;
    assert_eq!(warnings.last().unwrap().kind, xlens_hlo::WarningKind::WarningsOmitted(omitted));
}

#[test]
fn a_buffer_assignment_of_empty_records_is_refused_before_allocating() {
    let _turn = turn();
    // One heap-simulator trace of a million empty events beside a module that builds.
    let mut trace = Vec::new();
    for _ in 0..1_000_000 {
        len_field(1, &[], &mut trace);
    }
    let mut assignment = Vec::new();
    len_field(4, &trace, &mut assignment);
    let mut proto = Vec::new();
    len_field(1, &hlo_module(1, parameter), &mut proto);
    len_field(3, &assignment, &mut proto);
    let len = proto.len();
    let (peak, result) = peak_of(|| Module::decode(proto.into()));
    let err = result.expect_err("over its budget");
    assert!(matches!(err.kind(), ErrorKind::MemoryBudget { .. }), "{err}");
    assert!(peak <= 4 * len + (1 << 20), "{peak} bytes of heap for {len} bytes of proto");
}

#[test]
fn a_shape_of_empty_tuple_elements_is_refused_before_allocating() {
    let _turn = turn();
    // One instruction whose shape is a tuple of a million empty shapes, read by the fast path,
    // then the same behind a field the fast path leaves to prost (a group, wire type 3).
    let mut tuple = Vec::new();
    varint(2 << 3, &mut tuple);
    varint(13, &mut tuple);
    for _ in 0..1_000_000 {
        len_field(4, &[], &mut tuple);
    }
    for prost_path in [false, true] {
        let bytes = hlo_proto(1, |i| {
            let mut out = parameter(i);
            if prost_path {
                varint(99 << 3 | 3, &mut out);
                varint(99 << 3 | 4, &mut out);
            }
            len_field(3, &tuple, &mut out);
            out
        });
        let len = bytes.len();
        let (peak, result) = peak_of(|| Module::decode(bytes.into()));
        let err = result.expect_err("over its budget");
        let ErrorKind::MemoryBudget { needed, budget, .. } = *err.kind() else {
            panic!("prost path {prost_path}: {err}")
        };
        assert!(needed > budget && needed >= 1_000_000 * xlens_hlo::limits::TUPLE_ELEMENT_COST, "{err}");
        assert_eq!(err.location().computation.as_deref(), Some("main"), "{err}");
        assert!(peak <= 4 * len + (1 << 20), "prost path {prost_path}: {peak} bytes of heap for {len} bytes");
    }
}
