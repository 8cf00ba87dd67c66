//! Hand-built modules: graph structure, the cost model's rules, categories, memory replay and
//! typed errors, each checked against numbers worked out by hand.

use prost::Message;
use xlens_hlo::raw;
use xlens_hlo::testing::{HloBuilder, shape, tuple_shape};
use xlens_hlo::{ComputationKind, ErrorKind, Module, Opcode, PrimitiveType, WarningKind};

fn f32_(dims: &[i64]) -> raw::ShapeProto {
    shape(PrimitiveType::F32, dims)
}

fn build(b: HloBuilder, entry: &str) -> Module {
    Module::from_proto(b.finish(entry), 0).unwrap()
}

fn scalar_add(b: &mut HloBuilder, name: &str) -> i64 {
    let mut c = b.computation(name);
    let x = c.param("x", 0, f32_(&[]));
    let y = c.param("y", 1, f32_(&[]));
    let s = c.op("s", "add", f32_(&[]), &[x, y]);
    c.finish(s)
}

#[test]
fn reduce_while_conditional_and_call_costs() {
    let mut b = HloBuilder::new("m");
    let add = scalar_add(&mut b, "add");
    // while body: one multiply of f32[10]; condition: one compare.
    let mut body = b.computation("body");
    let p = body.param("p", 0, f32_(&[10]));
    let m = body.op("m", "multiply", f32_(&[10]), &[p, p]);
    let body_id = body.finish(m);
    let mut cond = b.computation("cond");
    let p = cond.param("p", 0, f32_(&[10]));
    let c = cond.op("c", "compare", shape(PrimitiveType::Pred, &[]), &[p, p]);
    let cond_id = cond.finish(c);
    let mut small = b.computation("small");
    let p = small.param("p", 0, f32_(&[10]));
    let e = small.op("e", "exponential", f32_(&[10]), &[p]);
    let small_id = small.finish(e);
    let mut big = b.computation("big");
    let p = big.param("p", 0, f32_(&[10]));
    let e = big.op("e", "add", f32_(&[10]), &[p, p]);
    let e2 = big.op("e2", "add", f32_(&[10]), &[e, p]);
    let big_id = big.finish(e2);
    let mut main = b.computation("main");
    let x = main.param("x", 0, f32_(&[4, 10]));
    let zero = main.op("zero", "constant", f32_(&[]), &[]);
    let r = main.op("r", "reduce", f32_(&[10]), &[x, zero]);
    main.edit(r, |i| {
        i.dimensions = vec![0];
        i.called_computation_ids = vec![add];
    });
    let w = main.op("w", "while", f32_(&[10]), &[r]);
    main.edit(w, |i| i.called_computation_ids = vec![body_id, cond_id]);
    let pred = main.op("pred", "constant", shape(PrimitiveType::Pred, &[]), &[]);
    let cnd = main.op("cnd", "conditional", f32_(&[10]), &[pred, w, w]);
    main.edit(cnd, |i| i.called_computation_ids = vec![small_id, big_id]);
    main.finish(cnd);
    let m = build(b, "main");

    let cost = |n: &str| m.cost(m.instruction_by_name(n).unwrap().id());
    // reduce: (40 - 10) applications of a 1-flop reducer; reads 160 + 4 bytes, writes 40.
    assert_eq!((cost("r").flops, cost("r").bytes_accessed), (30, 160 + 4 + 40));
    // while: one trip of the body (10) and condition (1).
    assert_eq!(cost("w").flops, 11);
    // conditional: the costlier branch per property: 20 flops from `big`, 10 transcendentals from `small`.
    assert_eq!((cost("cnd").flops, cost("cnd").transcendentals), (20, 10));
    assert_eq!(m.entry_cost().flops, 30 + 11 + 20);
    let kinds: Vec<_> =
        ["add", "body", "cond", "small", "main"].iter().map(|n| m.computation_by_name(n).unwrap().kind()).collect();
    assert_eq!(
        kinds,
        [
            ComputationKind::Applied,
            ComputationKind::WhileBody,
            ComputationKind::WhileCondition,
            ComputationKind::Branch,
            ComputationKind::Entry
        ]
    );
    // Post order: every callee before the entry.
    let order: Vec<&str> = m.computation_post_order().iter().map(|&c| m.computation(c).name()).collect();
    assert_eq!(order.last(), Some(&"main"));
    let text = m.instruction_text(m.instruction_by_name("w").unwrap().id());
    assert_eq!(text, "w = f32[10]{0} while(r), condition=cond, body=body");
}

#[test]
fn convolution_dot_and_fusion_bytes() {
    let mut b = HloBuilder::new("m");
    // A fused slice reads only the slice; a broadcast reads the whole parameter each time.
    let mut fused = b.computation("fused");
    let p0 = fused.param("p0", 0, f32_(&[100]));
    let p1 = fused.param("p1", 1, f32_(&[10]));
    let s = fused.op("s", "slice", f32_(&[10]), &[p0]);
    let a = fused.op("a", "add", f32_(&[10]), &[s, p1]);
    let fused_id = fused.finish(a);
    let mut main = b.computation("main");
    let img = main.param("img", 0, f32_(&[2, 8, 8, 3]));
    let ker = main.param("ker", 1, f32_(&[3, 3, 3, 16]));
    let conv = main.op("conv", "convolution", f32_(&[2, 8, 8, 16]), &[img, ker]);
    main.edit(conv, |i| {
        i.convolution_dimension_numbers = Some(Box::new(raw::ConvolutionDimensionNumbers {
            input_batch_dimension: 0,
            input_feature_dimension: 3,
            input_spatial_dimensions: vec![1, 2],
            kernel_spatial_dimensions: vec![0, 1],
            kernel_input_feature_dimension: 2,
            kernel_output_feature_dimension: 3,
            output_batch_dimension: 0,
            output_feature_dimension: 3,
            output_spatial_dimensions: vec![1, 2],
        }));
        let d = raw::WindowDimension {
            size: 3,
            stride: 1,
            padding_low: 1,
            padding_high: 1,
            window_dilation: 1,
            base_dilation: 1,
            window_reversal: false,
        };
        i.window = Some(Box::new(raw::Window { dimensions: vec![d, d] }));
    });
    let big = main.param("big", 2, f32_(&[100]));
    let small = main.param("small", 3, f32_(&[10]));
    let f = main.op("f", "fusion", f32_(&[10]), &[big, small]);
    main.edit(f, |i| {
        i.fusion_kind = "kLoop".into();
        i.called_computation_ids = vec![fused_id];
    });
    let lhs = main.param("lhs", 4, f32_(&[5, 6, 7]));
    let rhs = main.param("rhs", 5, f32_(&[5, 7, 9]));
    let dot = main.op("dot", "dot", f32_(&[5, 6, 9]), &[lhs, rhs]);
    main.edit(dot, |i| {
        i.dot_dimension_numbers = Some(Box::new(raw::DotDimensionNumbers {
            lhs_contracting_dimensions: vec![2],
            rhs_contracting_dimensions: vec![1],
            lhs_batch_dimensions: vec![0],
            rhs_batch_dimensions: vec![0],
        }))
    });
    let t =
        main.op("t", "tuple", tuple_shape(vec![f32_(&[2, 8, 8, 16]), f32_(&[10]), f32_(&[5, 6, 9])]), &[conv, f, dot]);
    main.finish(t);
    let m = build(b, "main");
    let cost = |n: &str| m.cost(m.instruction_by_name(n).unwrap().id());
    // 3x3 window with padding 1 over 8 positions: 8*3 - 2 = 22 valid pairs per spatial dimension.
    assert_eq!(cost("conv").flops, 2 * 3 * 16 * 2 * 22 * 22);
    assert_eq!(cost("dot").flops, 2 * (5 * 6 * 9) * 7);
    // Fusion: writes 40 bytes, reads 40 of the 400-byte parameter (sliced) and all 40 of the other.
    assert_eq!(cost("f").bytes_accessed, 40 + 40 + 40);
    assert_eq!(cost("f").flops, 10);
    assert_eq!(cost("t").bytes_accessed, 24, "a tuple writes its 3-pointer index table");
    assert_eq!(m.xla_category(m.instruction_by_name("f").unwrap().id()), "fusion", "slice is not elementwise");
    let fusions = m.fusions();
    assert_eq!((fusions.len(), fusions[0].ops.as_slice()), (1, &[Opcode::Add, Opcode::Slice][..]));
}

#[test]
fn categories_follow_to_category() {
    let mut b = HloBuilder::new("m");
    let mut fused = b.computation("fused");
    let p = fused.param("p", 0, f32_(&[4]));
    let n = fused.op("n", "negate", f32_(&[4]), &[p]);
    let fused_id = fused.finish(n);
    let mut main = b.computation("main");
    let x = main.param("x", 0, f32_(&[2, 2]));
    let t = main.op("t", "transpose", f32_(&[2, 2]), &[x]);
    main.edit(t, |i| i.dimensions = vec![1, 0]);
    let r = main.op("r", "reshape", f32_(&[4]), &[t]);
    let f = main.op("f", "fusion", f32_(&[4]), &[r]);
    main.edit(f, |i| {
        i.fusion_kind = "kLoop".into();
        i.called_computation_ids = vec![fused_id];
    });
    let e = main.op("e", "add", f32_(&[4]), &[f, f]);
    let c = main.op("c", "convert", shape(PrimitiveType::Bf16, &[4]), &[e]);
    let bc = main.op("bc", "broadcast", f32_(&[3, 4]), &[e]);
    main.edit(bc, |i| i.dimensions = vec![1]);
    let z = main.op("z", "frobnicate", f32_(&[4]), &[c]);
    let t2 = main.op("t2", "tuple", tuple_shape(vec![f32_(&[3, 4]), f32_(&[4])]), &[bc, z]);
    main.finish(t2);
    let m = build(b, "main");
    let cat = |n: &str| m.xla_category(m.instruction_by_name(n).unwrap().id()).to_owned();
    assert_eq!(cat("t"), "data formatting");
    assert_eq!(cat("r"), "data formatting");
    assert_eq!(cat("f"), "non-fusion elementwise", "a fusion of elementwise ops is elementwise, as in XLA");
    assert_eq!(cat("e"), "non-fusion elementwise");
    assert_eq!(cat("c"), "non-fusion elementwise");
    assert_eq!(cat("bc"), "broadcast");
    assert_eq!(cat("z"), "frobnicate");
    assert_eq!(m.instruction_by_name("z").unwrap().opcode(), Opcode::Other);
    assert!(m.warnings().iter().any(|w| w.kind == WarningKind::UnknownOpcode("frobnicate".into())));
    assert_eq!(m.instructions_in_category("data formatting").count(), 2);
    assert_eq!(
        m.instruction_text(m.instruction_by_name("bc").unwrap().id()),
        "bc = f32[3,4]{1,0} broadcast(e), dimensions={1}"
    );
    // A transpose between row-major layouts moves its data: 16 bytes read, 16 written.
    assert_eq!(m.cost(m.instruction_by_name("t").unwrap().id()).bytes_accessed, 32);
}

#[test]
fn topological_order_fixes_an_out_of_order_proto_and_users_are_unique() {
    let mut b = HloBuilder::new("m");
    let mut main = b.computation("main");
    let x = main.param("x", 0, f32_(&[4]));
    let a = main.op("a", "add", f32_(&[4]), &[x, x]);
    let n = main.op("n", "negate", f32_(&[4]), &[a]);
    main.finish(n);
    let mut proto = b.finish("main");
    // Put the root first and the parameter last.
    proto.hlo_module.as_mut().unwrap().computations[0].instructions.reverse();
    let m = Module::from_proto(proto, 0).unwrap();
    let names: Vec<&str> = m.entry().topological_order().iter().map(|&i| m.instruction(i).name()).collect();
    assert_eq!(names, ["x", "a", "n"]);
    let x = m.instruction_by_name("x").unwrap();
    assert_eq!(x.users().len(), 1, "add uses x twice but is one user");
    assert_eq!(m.instruction_by_name("a").unwrap().operands().len(), 2);
    assert!(m.is_root(m.instruction_by_name("n").unwrap().id()));
    assert_eq!(m.neighborhood(x.id(), 2).len(), 3);
}

proptest::proptest! {
    /// Any DAG in any proto order: the order is the one that always takes the ready instruction
    /// earliest in the proto (so a proto already in dependency order keeps it).
    #[test]
    fn topological_order_is_the_earliest_ready_first_order(
        edges in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..3), 1..12),
        shuffle in proptest::prelude::any::<bool>(),
        seed in proptest::prelude::any::<u64>(),
    ) {
        let mut b = HloBuilder::new("m");
        let mut main = b.computation("main");
        let mut ids = vec![main.param("p0", 0, f32_(&[4]))];
        let mut preds: Vec<Vec<usize>> = vec![Vec::new()];
        for (i, ops) in edges.iter().enumerate() {
            let ops: Vec<usize> = ops.iter().map(|ix| ix.index(ids.len())).collect();
            let operand_ids: Vec<i64> = ops.iter().map(|&o| ids[o]).collect();
            ids.push(main.op(&format!("n{i}"), "add", f32_(&[4]), &operand_ids));
            preds.push(ops);
        }
        main.finish(*ids.last().unwrap());
        let mut proto = b.finish("main");
        // The proto's order: as built, or a permutation of it.
        let n = ids.len();
        let mut perm: Vec<usize> = (0..n).collect();
        if shuffle {
            let mut x = seed | 1;
            for i in (1..n).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                perm.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
        let comp = &mut proto.hlo_module.as_mut().unwrap().computations[0];
        let built = std::mem::take(&mut comp.instructions);
        comp.instructions = perm.iter().map(|&i| built[i].clone()).collect();
        let m = Module::from_proto(proto, 0).unwrap();
        // The reference: repeatedly take the earliest proto position whose operands are out.
        let mut done = vec![false; n];
        let mut expected = Vec::new();
        while expected.len() < n {
            let next = (0..n).find(|&pos| !done[perm[pos]] && preds[perm[pos]].iter().all(|&o| done[o])).unwrap();
            done[perm[next]] = true;
            expected.push(if perm[next] == 0 { "p0".to_owned() } else { format!("n{}", perm[next] - 1) });
        }
        let names: Vec<&str> = m.entry().topological_order().iter().map(|&i| m.instruction(i).name()).collect();
        proptest::prop_assert_eq!(names, expected);
    }
}

fn error_of(proto: raw::HloProto) -> ErrorKind {
    match Module::decode(proto.encode_to_vec().into()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            assert!(e.location().module.is_some(), "{e}");
            match e.kind() {
                ErrorKind::DanglingId { what, id } => ErrorKind::DanglingId { what, id: *id },
                ErrorKind::DuplicateId { what, id } => ErrorKind::DuplicateId { what, id: *id },
                ErrorKind::Cycle => ErrorKind::Cycle,
                ErrorKind::CallCycle => ErrorKind::CallCycle,
                ErrorKind::NoEntry(s) => ErrorKind::NoEntry(s.clone()),
                ErrorKind::InvalidShape(s) => ErrorKind::InvalidShape(s.clone()),
                other => panic!("unexpected {other}"),
            }
        }
    }
}

fn two_op_module() -> raw::HloProto {
    let mut b = HloBuilder::new("m");
    let mut main = b.computation("main");
    let x = main.param("x", 0, f32_(&[4]));
    let n = main.op("n", "negate", f32_(&[4]), &[x]);
    main.finish(n);
    b.finish("main")
}

#[test]
fn structural_errors_are_typed_with_locations() {
    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].instructions[1].operand_ids = vec![99];
    assert!(matches!(error_of(p), ErrorKind::DanglingId { what: "operand id", id: 99 }));

    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].instructions[1].id = 0;
    assert!(matches!(error_of(p), ErrorKind::DuplicateId { what: "instruction", id: 0 }));

    let mut p = two_op_module();
    let c = &mut p.hlo_module.as_mut().unwrap().computations[0];
    c.instructions[0].opcode = "negate".into();
    c.instructions[0].operand_ids = vec![1];
    assert!(matches!(error_of(p), ErrorKind::Cycle));

    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].instructions[1].called_computation_ids = vec![0];
    assert!(matches!(error_of(p), ErrorKind::CallCycle));

    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].root_id = 7;
    assert!(matches!(error_of(p), ErrorKind::DanglingId { what: "root id", id: 7 }));

    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().entry_computation_name = "nope".into();
    p.hlo_module.as_mut().unwrap().entry_computation_id = 5;
    assert!(matches!(error_of(p), ErrorKind::NoEntry(_)));

    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].instructions[1].shape.as_mut().unwrap().dimensions = vec![-3];
    assert!(matches!(error_of(p), ErrorKind::InvalidShape(_)));

    // A bare HloModuleProto decodes as well.
    let bare = two_op_module().hlo_module.unwrap().encode_to_vec();
    assert_eq!(Module::decode(bare.into()).unwrap().instructions().len(), 2);
    // Bytes that are not a module.
    assert!(Module::decode(vec![0xff, 0xff, 0xff].into()).unwrap_err().is_decode());
    assert!(Module::decode(Vec::new().into()).unwrap_err().is_decode());
    assert!(Module::decode(raw::HloProto::default().encode_to_vec().into()).is_err());
}

#[test]
fn duplicate_names_warn_and_the_first_wins() {
    let mut p = two_op_module();
    p.hlo_module.as_mut().unwrap().computations[0].instructions[1].name = "x".into();
    let m = Module::from_proto(p, 0).unwrap();
    assert_eq!(m.instruction_by_name("x").unwrap().opcode(), Opcode::Parameter);
    assert!(m.warnings().iter().any(|w| w.kind == WarningKind::DuplicateName("x".into())));
}

fn buffer(id: i64, size: i64, instr: i64) -> raw::LogicalBufferProto {
    raw::LogicalBufferProto {
        id,
        size,
        color: 0,
        defined_at: Some(raw::logical_buffer_proto::Location { instruction_id: instr, ..Default::default() }),
    }
}

fn event(kind: i32, buffer_id: i64, share: i64) -> raw::heap_simulator_trace::Event {
    raw::heap_simulator_trace::Event { kind, buffer_id, share_with_canonical_id: share, ..Default::default() }
}

#[test]
fn heap_replay_shares_and_frees_like_the_memory_viewer() {
    let mut p = two_op_module();
    // Buffers 1..=3 live in temporary allocation 0; 10 is the parameter, 11 the output.
    let temp = raw::BufferAllocationProto {
        index: 0,
        size: 4096,
        assigned: (1..=3)
            .map(|id| raw::buffer_allocation_proto::Assigned { logical_buffer_id: id, offset: 0, size: 0 })
            .collect(),
        ..Default::default()
    };
    let param = raw::BufferAllocationProto {
        index: 1,
        size: 16,
        is_entry_computation_parameter: true,
        is_parameter_aliased_with_output: true,
        assigned: vec![raw::buffer_allocation_proto::Assigned { logical_buffer_id: 10, offset: 0, size: 16 }],
        ..Default::default()
    };
    let out = raw::BufferAllocationProto {
        index: 2,
        size: 16,
        maybe_live_out: true,
        assigned: vec![raw::buffer_allocation_proto::Assigned { logical_buffer_id: 11, offset: 0, size: 16 }],
        ..Default::default()
    };
    let tl = raw::BufferAllocationProto { index: 3, size: 4, is_thread_local: true, ..Default::default() };
    p.buffer_assignment = Some(raw::BufferAssignmentProto {
        logical_buffers: vec![
            buffer(1, 1000, 1),
            buffer(2, 500, 1),
            buffer(3, 300, 1),
            buffer(10, 16, 0),
            buffer(11, 16, 1),
        ],
        buffer_allocations: vec![temp, param, out, tl],
        heap_simulator_traces: vec![raw::HeapSimulatorTrace {
            events: vec![
                event(0, 1, 0), // +1000 → 1000
                event(2, 2, 1), // shares live memory: no growth
                event(0, 3, 0), // +300 → 1300 (peak)
                event(1, 1, 0), // one of two references
                event(1, 2, 0), // last reference: -1000 → 300
                event(2, 2, 1), // shares freed memory again: +1000 → 1300 (not above the peak)
                event(1, 2, 0),
                event(1, 3, 0),
            ],
            ..Default::default()
        }],
    });
    let m = Module::from_proto(p.clone(), 0).unwrap();
    let s = m.hbm_memory_stats().unwrap().unwrap();
    assert_eq!((s.heap_peak_bytes, s.peak_position), (1300, 2));
    let live: Vec<i64> = s.peak_buffers.iter().map(|b| b.logical_buffer_id).collect();
    assert_eq!(live, [1, 3]);
    // Unpadded: both buffers are defined by `n`, f32[4] = 16 bytes.
    assert_eq!(s.heap_peak_unpadded_bytes, 32);
    assert_eq!((s.argument_bytes, s.alias_bytes, s.output_bytes, s.temp_bytes), (16, 16, 16, 4096));
    assert_eq!((s.indefinite_bytes, s.thread_local_bytes, s.total_allocation_bytes), (36, 4, 4096 + 32));
    assert_eq!(s.peak_bytes(), 1300 + 36);

    // Freeing more often than allocating is a typed error.
    p.buffer_assignment.as_mut().unwrap().heap_simulator_traces[0].events.push(event(1, 3, 0));
    let m = Module::from_proto(p, 0).unwrap();
    assert!(matches!(m.hbm_memory_stats().unwrap_err().kind(), ErrorKind::HeapTrace(_)));
    assert!(two_module_without_assignment().hbm_memory_stats().unwrap().is_none());
}

fn two_module_without_assignment() -> Module {
    Module::from_proto(two_op_module(), 0).unwrap()
}

#[test]
fn profile_costs_pair_with_tpu_op_metadata() {
    let module = Module::decode(xlens_hlo::testing::tiny_module_bytes().into()).unwrap().with_program_id(7, "jit_f(7)");
    let mut b = xlens_xplane::SpaceBuilder::default();
    {
        let mut tpu = b.plane(1, "/device:TPU:0");
        let flops = tpu.stat_metadata("flops");
        let bytes = tpu.stat_metadata("bytes_accessed");
        let program = tpu.stat_metadata("program_id");
        let dot = tpu.event_metadata("dot.1");
        tpu.metadata_stat(dot, flops, 1024u64);
        tpu.metadata_stat(dot, bytes, 896u64);
        tpu.metadata_stat(dot, program, 7u64);
        let other = tpu.event_metadata("fusion.2");
        tpu.metadata_stat(other, flops, 5u64);
        tpu.metadata_stat(other, program, 8u64);
    }
    let space = xlens_xplane::Space::parse(b.finish().into()).unwrap();
    let checks = xlens_hlo::profile_cost_checks(&space, &module);
    assert_eq!(checks.len(), 1, "fusion.2 belongs to another program");
    let c = &checks[0];
    assert_eq!((c.profile_flops, c.profile_bytes_accessed), (Some(1024), Some(896)));
    assert_eq!((c.estimate.flops, c.estimate.bytes_accessed), (1024, 4 * (32 + 64 + 128)));
}
