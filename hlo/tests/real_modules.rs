//! Every HLO module of every committed real profile (`testdata/corpus`, `testdata/real`), checked
//! against references produced independently of this crate: the optimized HLO text JAX printed
//! for the same program, XLA's `cost_analysis()` / `memory_analysis()`, XProf 2.24.2's CLI output
//! and the capturing scripts themselves.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use xlens_hlo::{AliasKind, GroupEncoding, Module, Opcode};

fn rel(a: f64, b: f64) -> f64 {
    if a == b { 0.0 } else { (a - b).abs() / b.abs().max(1.0) }
}

/// Every text fixture with the profile module it was printed for.
fn text_modules() -> Vec<(std::path::PathBuf, HloText, Module)> {
    let mut out = Vec::new();
    for dir in profile_dirs() {
        let mut modules = modules(&dir);
        for text in hlo_texts(&dir) {
            let i = modules
                .iter()
                .position(|m| m.name() == text.module_name() && m.entry_computation_layout() == text.entry_layout())
                .unwrap_or_else(|| panic!("{}: no profile module matches {}", dir.display(), text.path.display()));
            // Two texts can name the same program only if they were identical; each gets its module.
            let module = modules.remove(i);
            out.push((dir.clone(), text, module));
        }
    }
    out
}

#[test]
fn opcode_counts_and_names_match_the_optimized_hlo_text() {
    let all = text_modules();
    assert_eq!(all.len(), 36, "text fixtures: 7 in testdata/corpus, 29 in testdata/real");
    for (dir, text, module) in &all {
        let ours: BTreeMap<String, usize> =
            module.opcode_counts().into_iter().map(|(o, n)| (o.to_owned(), n)).collect();
        assert_eq!(ours, text.opcode_counts(), "{} {}", dir.display(), text.function);
        let text_names: BTreeSet<String> = text.instructions().into_iter().map(|(n, _, _)| n).collect();
        let our_names: BTreeSet<String> = module.instructions().iter().map(|i| i.name().to_owned()).collect();
        assert_eq!(our_names, text_names, "{} {}", dir.display(), text.function);
        for (name, opcode, _) in text.instructions() {
            assert_eq!(module.instruction_by_name(&name).unwrap().opcode_name(), opcode, "{name}");
        }
    }
    // A concrete anchor: the sharded donation module (counts from its ground truth).
    let (_, _, m) = all.iter().find(|(d, _, _)| d.ends_with("real/sharded_donation")).unwrap();
    assert_eq!((m.instructions().len(), m.computations().len(), m.entry().instructions().len()), (313, 57, 83));
    assert_eq!(m.entry().name(), "main.22_spmd");
    assert_eq!(m.instructions_with_opcode(Opcode::Parameter).count(), 124);
}

#[test]
fn entry_costs_agree_with_xla_cost_analysis() {
    let mut checked = 0;
    for (dir, text, module) in text_modules() {
        let reference = xla_reference(&dir, &text.function).expect("cost_analysis stored with the fixture");
        let cost = module.entry_cost();
        let what = format!("{} {}", dir.display(), text.function);
        // The issue asks for 5%; the model is in fact within 0.01% on every fixture.
        assert!(rel(cost.flops as f64, reference.flops) < 0.05, "{what}: flops {} vs {}", cost.flops, reference.flops);
        assert!(rel(cost.flops as f64, reference.flops) < 1e-4, "{what}: flops {} vs {}", cost.flops, reference.flops);
        assert!(rel(cost.transcendentals as f64, reference.transcendentals) < 1e-4, "{what}: transcendentals");
        assert!(rel(cost.bytes_accessed as f64, reference.bytes_accessed) < 1e-4, "{what}: bytes accessed");
        checked += 1;
    }
    assert_eq!(checked, 36);
    // Concrete numbers: sharded_donation's XLA cost_analysis is 37289996 flops, 27066648 bytes.
    let dir = testdata().join("real/sharded_donation");
    let m = modules(&dir).into_iter().find(|m| m.display_name() == "jit_train_step(8)").unwrap();
    assert_eq!(m.entry_cost().bytes_accessed, 27_066_648);
    assert!(rel(m.entry_cost().flops as f64, 37_289_996.0) < 1e-6);
}

#[test]
fn per_opcode_costs_agree_with_xprof_opcode_stats() {
    let mut checked = 0;
    for dir in profile_dirs() {
        let Some(stats) = xprof_output(&dir, "query_hlo_graph__opcode_stats") else { continue };
        let name = stats["module_name"].as_str().unwrap();
        let modules = modules(&dir);
        let module = modules.iter().find(|m| m.display_name() == name).unwrap();
        for row in stats["rows"].as_array().unwrap() {
            let opcode = row["opcode"].as_str().unwrap();
            let entry: Vec<_> = module
                .entry()
                .instructions()
                .iter()
                .filter(|&&i| module.instruction(i).opcode_name() == opcode)
                .collect();
            assert_eq!(entry.len() as u64, row["count"].as_u64().unwrap(), "{name} {opcode}");
            let flops: u64 = entry.iter().map(|&&i| module.cost(i).flops).sum();
            let bytes: u64 = entry.iter().map(|&&i| module.cost(i).bytes_accessed).sum();
            // XProf's CLI estimates these from the HLO text; dots and fusions agree within 1%.
            // Fusion bytes are left out: the CLI binds a fusion's operand i to the i-th
            // `parameter` line of its body rather than to `parameter(i)`, so fusions whose
            // parameters are listed out of order (the `bitcast_dynamic-slice_fusion`s of
            // real/replicated_activations) get another operand's bytes. Our fusion bytes are
            // XLA's own: `entry_costs_agree_with_xla_cost_analysis` holds them to XLA's
            // cost_analysis() on every capture.
            if matches!(opcode, "dot" | "fusion" | "copy" | "all-gather" | "reduce-scatter" | "collective-permute") {
                let (xf, xb) = (row["total_flops"].as_f64().unwrap(), row["total_bytes"].as_f64().unwrap());
                assert!(rel(flops as f64, xf) < 0.01, "{name} {opcode}: flops {flops} vs {xf}");
                if opcode != "fusion" {
                    assert!(rel(bytes as f64, xb) < 0.01, "{name} {opcode}: bytes {bytes} vs {xb}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "checked {checked} opcode rows");
}

#[test]
fn memory_matches_xprof_peak_allocations_and_xla_memory_analysis() {
    let mut totals = 0;
    for dir in profile_dirs() {
        let modules = modules(&dir);
        let peaks = xprof_output(&dir, "get_peak_allocations").expect("reference");
        for row in peaks["modules"].as_array().unwrap() {
            let name = row["module_name"].as_str().unwrap();
            let module = modules.iter().find(|m| m.display_name() == name).unwrap();
            let stats = module.hbm_memory_stats().unwrap().unwrap();
            let mib = stats.total_allocation_bytes as f64 / (1u64 << 20) as f64;
            let xprof = row["total_hbm_mib"].as_f64().unwrap();
            assert!(rel(mib, xprof) < 1e-12, "{name}: {mib} MiB vs XProf {xprof}");
            assert!(stats.peak_bytes() <= stats.total_allocation_bytes + stats.thread_local_bytes);
            totals += 1;
        }
    }
    assert!(totals >= 60, "{totals} modules compared with get_peak_allocations");

    let mut analyses = 0;
    for (dir, text, module) in text_modules() {
        let reference = xla_reference(&dir, &text.function).unwrap();
        let mem = reference.memory.expect("memory_analysis stored");
        let stats = module.hbm_memory_stats().unwrap().unwrap();
        let what = format!("{} {}", dir.display(), text.function);
        assert_eq!(stats.argument_bytes, mem["argument_size_in_bytes"].as_u64().unwrap(), "{what}");
        assert_eq!(stats.output_bytes, mem["output_size_in_bytes"].as_u64().unwrap(), "{what}");
        assert_eq!(stats.alias_bytes, mem["alias_size_in_bytes"].as_u64().unwrap(), "{what}");
        assert_eq!(stats.temp_bytes, mem["temp_size_in_bytes"].as_u64().unwrap(), "{what}");
        // The heap never needs more than the temporary allocation the assignment packed it into.
        assert!(stats.heap_peak_bytes <= stats.temp_bytes, "{what}");
        assert!(stats.heap_peak_unpadded_bytes <= stats.heap_peak_bytes, "{what}");
        let live: u64 = stats.peak_buffers.iter().map(|b| b.size).sum();
        assert_eq!(live, stats.heap_peak_bytes, "{what}: buffers live at the peak sum to the peak");
        analyses += 1;
    }
    assert_eq!(analyses, 36);
}

#[test]
fn sharded_donation_aliases_and_replica_groups() {
    let dir = testdata().join("real/sharded_donation");
    let modules = modules(&dir);
    let m = modules.iter().find(|m| m.display_name() == "jit_train_step(8)").unwrap();
    // input_output_alias={ {0}: (0, {}, may-alias), ... {5}: (5, {}, may-alias) }
    let aliases = m.input_output_aliases();
    assert_eq!(aliases.len(), 6);
    for (i, a) in aliases.iter().enumerate() {
        assert_eq!(
            (a.output_index.as_slice(), a.parameter, a.parameter_index.as_slice()),
            (&[i as i64][..], i as u64, &[][..])
        );
        assert_eq!(a.kind, AliasKind::MayAlias);
    }
    assert_eq!(m.aliased_params(), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(m.hbm_memory_stats().unwrap().unwrap().alias_bytes, 786_432);

    // The ground truth lists how each collective was encoded in the HloProto and its groups.
    let gt: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground_truth.json")).unwrap()).unwrap();
    let observed = gt["observed"]["collectives_hloproto"].as_array().unwrap();
    assert_eq!(observed.len(), 15);
    assert_eq!(m.collectives().len(), 15);
    for o in observed {
        let name = o["name"].as_str().unwrap();
        let instr = m.instruction_by_name(name).unwrap();
        let c = m.collectives().iter().find(|c| c.instruction == instr.id()).unwrap();
        let groups: Vec<Vec<i64>> = serde_json::from_value(o["replica_groups_proto"].clone()).unwrap();
        assert_eq!(c.replica_groups, groups, "{name}");
        assert_eq!(c.channel_id, o["channel_id"].as_i64(), "{name}");
        assert_eq!(c.opcode.as_str(), o["opcode"].as_str().unwrap());
        let encoding = match o["proto_encoding"].as_str().unwrap() {
            "collective_device_list" => GroupEncoding::List,
            "mesh_axes_replica_group_list(93)" => GroupEncoding::MeshAxes,
            other => panic!("unexpected encoding {other}"),
        };
        assert_eq!(c.encoding, encoding, "{name}");
    }
    // all-reduce.7 (GSPMD, mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}) is the mesh-axes one.
    let ar7 = m.instruction_by_name("all-reduce.7").unwrap();
    let c = m.collectives().iter().find(|c| c.instruction == ar7.id()).unwrap();
    assert_eq!((c.encoding, c.groups_text().as_str()), (GroupEncoding::MeshAxes, "{{0,2,4,6},{1,3,5,7}}"));
}

/// `key={...}` from a text instruction's attributes, with balanced braces.
fn attribute<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    let start = rest.find(&format!("{key}={{"))? + key.len() + 1;
    let mut depth = 0;
    for (i, ch) in rest[start..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&rest[start..start + i + 1]);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn collectives_match_the_text_of_every_sharded_program() {
    let mut checked = 0;
    let mut permutes = 0;
    for (dir, text, module) in text_modules() {
        for (name, opcode, rest) in text.instructions() {
            if !Opcode::from_name(&opcode).is_collective() {
                continue;
            }
            let instr = module.instruction_by_name(&name).unwrap();
            let c = module.collectives().iter().find(|c| c.instruction == instr.id()).expect("collective");
            if let Some(groups) = attribute(&rest, "replica_groups") {
                assert_eq!(c.groups_text(), groups, "{} {name}", dir.display());
            } else if rest.contains("replica_groups=mesh[") {
                assert_eq!(c.encoding, GroupEncoding::MeshAxes, "{name}");
            }
            if let Some(pairs) = attribute(&rest, "source_target_pairs") {
                assert_eq!(c.pairs_text(), pairs, "{name}");
                permutes += 1;
            }
            let channel =
                rest.split("channel_id=").nth(1).map(|s| s.split([',', ' ']).next().unwrap().parse::<i64>().unwrap());
            assert_eq!(c.channel_id, channel, "{name}");
            checked += 1;
        }
    }
    assert_eq!(checked, 72, "collectives in the five sharded programs");
    assert_eq!(permutes, 2, "sharded_collectives_baseline has two collective-permutes");
}

#[test]
fn sources_resolve_to_the_capturing_scripts() {
    let repo = testdata().join("..");
    let mut checked = 0;
    for (dir, _, module) in text_modules() {
        for instr in module.instructions() {
            let Some(src) = module.source(instr.id()) else { continue };
            let Some(rel_path) = src.file.split_once("scripts/capture/").map(|(_, p)| p) else { continue };
            let script = std::fs::read_to_string(repo.join("scripts/capture").join(rel_path)).unwrap();
            let line = script.lines().nth(src.line as usize - 1).unwrap_or_else(|| panic!("{src} is past the end"));
            let op = instr.op_name().rsplit('/').next().unwrap();
            // The JAX primitive named in the scope appears on the line that called it.
            let expected = match op {
                "all_gather" => Some("all_gather"),
                "reduce_scatter" | "psum_scatter" => Some("psum_scatter"),
                "dot_general" => Some("@"),
                _ => None,
            };
            if let Some(e) = expected {
                // Backward-pass ops of a custom_vjp point at the call site, not at the primitive.
                if instr.op_name().contains("transpose(") {
                    continue;
                }
                let matmul = e == "@" && (line.contains("dot(") || line.contains("einsum") || line.contains("matmul"));
                assert!(line.contains(e) || matmul, "{}: {} -> {src}: {line:?}", dir.display(), instr.name());
                checked += 1;
            }
            let stack = module.source_stack(instr.id());
            assert_eq!(stack.first(), Some(&src), "the innermost frame is the source line");
        }
    }
    assert!(checked >= 100, "{checked} sources checked");
    // A concrete one: sharded_donation's first all-gather is line 31 of its script.
    let m =
        modules(&testdata().join("real/sharded_donation")).into_iter().find(|m| m.name() == "jit_train_step").unwrap();
    let ag = m.instruction_by_name("all_gather.18").unwrap();
    let src = m.source(ag.id()).unwrap();
    assert!(src.file.ends_with("scripts/capture/capture_sharded_donation.py"));
    assert_eq!((src.line, src.function), (31, Some("main.<locals>.local_loss")));
    assert_eq!(m.source_stack(ag.id()).last().unwrap().function, Some("<module>"));
}

#[test]
fn every_profile_module_loads_in_program_order_with_a_complete_topological_order() {
    let mut seen = 0;
    for dir in profile_dirs() {
        let modules = modules(&dir);
        let listed = xprof_output(&dir, "list_hlo_modules").unwrap();
        let mut names: Vec<String> = modules.iter().map(Module::display_name).collect();
        names.sort();
        let mut expected: Vec<String> =
            listed["modules"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        expected.sort();
        assert_eq!(names, expected, "{}", dir.display());
        let ids: Vec<u64> = modules.iter().map(|m| m.program_id().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] <= w[1]), "sorted by program id");
        for m in &modules {
            assert!(m.warnings().is_empty(), "{}: {:?}", m.display_name(), m.warnings());
            assert!(m.display_name().ends_with(&format!("({})", m.program_id().unwrap())));
            let order: Vec<_> = m.topological_order().collect();
            assert_eq!(order.len(), m.instructions().len());
            let mut position = vec![usize::MAX; order.len()];
            for (k, id) in order.iter().enumerate() {
                assert_eq!(position[id.index()], usize::MAX, "each instruction once");
                position[id.index()] = k;
            }
            for i in m.instructions() {
                for &o in i.operands() {
                    assert!(position[o.index()] < position[i.id().index()], "{}: operand after user", i.name());
                }
                for &c in i.called_computations() {
                    for &x in m.computation(c).instructions() {
                        assert!(position[x.index()] < position[i.id().index()], "callee after caller");
                    }
                }
            }
            seen += 1;
        }
    }
    assert!(seen >= 100, "{seen} modules");
}

#[test]
fn thunks_in_the_trace_resolve_to_entry_instructions_by_name() {
    let mut checked = 0;
    for (dir, text, module) in text_modules() {
        let gt: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("ground_truth.json")).unwrap()).unwrap();
        let optimized = gt.get("optimized_hlo").unwrap_or(&gt["ground_truth"]["optimized_hlo"]);
        let thunks = optimized[&text.function]["thunk_producing_entry_instructions"].as_array().unwrap();
        for t in thunks {
            let instr = module.instruction_by_name(t.as_str().unwrap()).expect("thunk names an instruction");
            assert!(module.is_in_entry(instr.id()));
            checked += 1;
        }
    }
    assert!(checked >= 500, "{checked}");
}

#[test]
fn categories_fusions_neighborhoods_and_text_on_a_real_module() {
    let m = modules(&testdata().join("corpus/clean"))
        .into_iter()
        .find(|m| m.display_name() == "jit_train_step(36)")
        .unwrap();
    // Ground truth: 10 copies in the entry, the only data-formatting ops there.
    let entry: Vec<_> = m.entry().instructions().to_vec();
    let formatting = entry.iter().filter(|&&i| m.xla_category(i) == "data formatting").count();
    assert_eq!(formatting, 10);
    assert_eq!(entry.iter().filter(|&&i| m.xla_category(i) == "dot").count(), 8);
    let fusions = m.fusions();
    assert_eq!(fusions.len(), 109);
    for f in &fusions {
        assert!(f.body.is_fusion());
        assert_eq!(f.body.callers(), &[f.instruction.id()]);
        let cat = m.xla_category(f.instruction.id());
        let elementwise = f.ops.iter().all(|o| o.is_elementwise());
        assert_eq!(cat, if elementwise { "non-fusion elementwise" } else { "fusion" }, "{}", f.instruction.name());
    }
    // Neighborhood: a dot's operands and users at distance 1.
    let dot = m.instructions_with_opcode(Opcode::Dot).find(|d| m.is_in_entry(d.id())).unwrap();
    let near = m.neighborhood(dot.id(), 1);
    let mut expected: Vec<_> = dot.operands().iter().chain(dot.users()).copied().collect();
    expected.sort();
    expected.dedup();
    let got: Vec<_> = near.iter().filter(|(_, d)| *d == 1).map(|(i, _)| *i).collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(got_sorted, expected);
    assert_eq!(near[0], (dot.id(), 0));
    assert!(m.neighborhood(dot.id(), 3).len() > near.len());
    let line = m.instruction_text(dot.id());
    assert!(
        line.starts_with(&format!("{} = f32[", dot.name()))
            && line.contains(" dot(")
            && line.contains("lhs_contracting_dims={"),
        "{line}"
    );
}

#[test]
fn standalone_hlo_proto_files_decode_the_same() {
    let dir = testdata().join("real/sharded_donation");
    let session = xlens_source::open_session(&xlens_source::Location::from(&dir)).unwrap();
    let (entries, _) = xlens_hlo::hlo_protos(session.hosts()[0].space());
    let entry = entries.iter().find(|e| e.name == "jit_train_step(8)").unwrap();
    let tmp = std::env::temp_dir().join(format!("xlens-hlo-{}.hlo_proto.pb", std::process::id()));
    std::fs::write(&tmp, &entry.bytes).unwrap();
    let from_file = Module::open(&tmp).unwrap();
    std::fs::remove_file(&tmp).unwrap();
    let from_profile = entry.decode().unwrap();
    assert_eq!(from_file.opcode_counts(), from_profile.opcode_counts());
    assert_eq!(from_file.entry_cost(), from_profile.entry_cost());
    assert_eq!((from_file.program_id(), from_profile.program_id()), (None, Some(8)));
    assert!(!entry.legacy);
}

#[cfg(feature = "frames")]
#[test]
fn frames_of_a_real_sharded_module() {
    use polars::prelude::*;
    use xlens_hlo::frame;
    let m =
        modules(&testdata().join("real/sharded_donation")).into_iter().find(|m| m.name() == "jit_train_step").unwrap();
    let instructions = frame::instructions_frame(&[&m]).unwrap();
    assert_eq!((instructions.height(), instructions.width()), (313, 17));
    let flops: u64 = instructions.column("flops").unwrap().u64().unwrap().sum().unwrap();
    let entry_flops: u64 = m.entry().instructions().iter().map(|&i| m.cost(i).flops).sum();
    assert!(flops >= entry_flops, "fusion bodies add their own rows");
    let sources = instructions.column("source_line").unwrap().null_count();
    assert!(sources < 313 / 2, "most instructions have a source line ({sources} without)");
    let computations = frame::computations_frame(&[&m]).unwrap();
    assert_eq!(computations.height(), 57);
    let collectives = frame::collectives_frame(&[&m]).unwrap();
    assert_eq!(collectives.height(), 15);
    let groups = collectives.column("replica_groups").unwrap();
    assert_eq!(groups.str().unwrap().get(0), Some("{{0,2,4,6},{1,3,5,7}}"));
    let empty = frame::collectives_frame(&[]).unwrap();
    assert_eq!((empty.height(), empty.width()), (0, 13));
}

/// Mesh-axes groups whose mesh lists its devices as a transposed iota
/// (`device_ids=([4,2]T(1,0))`) expand to the groups the capture recorded.
#[test]
fn mesh_groups_with_an_iota_device_order_match_the_capture() {
    let dir = testdata().join("real/replicated_activations");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground_truth.json")).unwrap()).unwrap();
    let modules = modules(&dir);
    let module = modules.iter().find(|m| m.display_name() == truth["main_hlo_module"].as_str().unwrap()).unwrap();
    let mut iota_ordered = 0;
    for g in truth["observed"]["all_gathers"].as_array().unwrap() {
        let instr = module.instruction_by_name(g["name"].as_str().unwrap()).unwrap();
        let c = module.collectives().iter().find(|c| c.instruction == instr.id()).unwrap();
        let expected: Vec<Vec<i64>> = serde_json::from_value(g["replica_groups"].clone()).unwrap();
        assert_eq!(c.replica_groups, expected, "{}", g["name"]);
        iota_ordered += usize::from(g["replica_groups_text"].as_str().unwrap().contains("device_ids=("));
    }
    assert_eq!(iota_ordered, 3, "the three W1 gathers list their devices as a transposed iota");
}

/// The costs of a large computation are priced in parallel: on one worker and on four, every
/// instruction of every module (the H200 GPU captures' included, whose fusions and cuBLAS GEMMs
/// the GPU model prices) gets the same XLA cost, GPU cost and HBM bytes.
#[test]
fn costs_priced_in_parallel_equal_the_serial_ones() {
    let mut dirs = profile_dirs();
    if let Ok(entries) = std::fs::read_dir(testdata().join("h200")) {
        dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.join("vm.xplane.pb").is_file()));
    }
    let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
    let (one, four) = (pool(1), pool(4));
    let mut large = 0;
    for dir in &dirs {
        let priced = |p: &rayon::ThreadPool| {
            p.install(|| {
                modules(dir)
                    .iter()
                    .map(|m| {
                        m.prepare_gpu_costs();
                        m.instructions()
                            .iter()
                            .map(|i| (m.cost(i.id()), m.gpu_cost(i.id()), m.gpu_hbm_bytes(i.id())))
                            .collect()
                    })
                    .collect::<Vec<Vec<_>>>()
            })
        };
        assert_eq!(priced(&one), priced(&four), "{}", dir.display());
        large += modules(dir).iter().filter(|m| m.computations().iter().any(|c| c.instructions().len() >= 128)).count();
    }
    assert!(large >= 10, "only {large} modules have a computation large enough to be priced in parallel");
}
