//! Hostile and broken inputs: every one is a typed error or a module, never a panic, and the
//! work stays bounded.

use prost::Message;
use xlens_hlo::raw;
use xlens_hlo::testing::{HloBuilder, shape, tiny_module_bytes};
use xlens_hlo::{ErrorKind, Module, PrimitiveType, limits, modules_from_space};
use xlens_xplane::{Space, SpaceBuilder, names};

fn real_proto() -> Vec<u8> {
    let session = xlens_source::open_session(&xlens_source::Location::from(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/real/sharded_donation"),
    ))
    .unwrap();
    let (entries, _) = xlens_hlo::hlo_protos(session.hosts()[0].space());
    entries.iter().find(|e| e.name == "jit_train_step(8)").unwrap().bytes.to_vec()
}

#[test]
fn every_truncation_of_a_real_proto_is_an_error_or_a_module() {
    let bytes = real_proto();
    let mut errors = 0;
    // Every prefix length near the start and end, and a stride through the middle.
    let lengths = (0..512).chain((512..bytes.len()).step_by(97)).chain(bytes.len() - 64..bytes.len());
    for len in lengths {
        match Module::decode(bytes[..len].to_vec().into()) {
            Ok(m) => {
                // A prefix that decodes is a consistent (smaller) module.
                assert!(m.topological_order().count() == m.instructions().len());
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors > 500, "{errors} truncations rejected");
    assert!(Module::decode(bytes.into()).is_ok());
}

#[test]
fn limits_reject_absurd_shapes_and_groups() {
    let mut b = HloBuilder::new("m");
    let mut main = b.computation("main");
    let dims: Vec<i64> = vec![1; limits::MAX_RANK as usize + 1];
    let x = main.param("x", 0, shape(PrimitiveType::F32, &dims));
    main.finish(x);
    let err = Module::decode(b.finish("main").encode_to_vec().into()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { limit: limits::Limit::Rank, .. }), "{err}");

    // An iota device list claiming 2^40 devices is not expanded; the module still builds.
    let mut b = HloBuilder::new("m");
    let mut main = b.computation("main");
    let x = main.param("x", 0, shape(PrimitiveType::F32, &[4]));
    let ar = main.op("ar", "all-reduce", shape(PrimitiveType::F32, &[4]), &[x]);
    main.edit(ar, |i| {
        i.replica_group_list = Some(raw::hlo_instruction_proto::ReplicaGroupList::IotaCollectiveDeviceList(
            raw::IotaReplicaGroupListProto {
                num_replica_groups: 1 << 20,
                num_devices_per_group: 1 << 20,
                ..Default::default()
            },
        ))
    });
    main.finish(ar);
    let m = Module::decode(b.finish("main").encode_to_vec().into()).unwrap();
    assert_eq!(m.collectives()[0].encoding, xlens_hlo::GroupEncoding::Invalid);
    assert!(m.warnings().iter().any(|w| matches!(w.kind, xlens_hlo::WarningKind::InvalidReplicaGroups(_))));
}

#[test]
fn deep_call_chains_are_limited_not_overflowed() {
    // computation k calls computation k-1 through a `call`, deeper than the limit.
    let depth = limits::MAX_CALL_DEPTH as usize + 5;
    let mut b = HloBuilder::new("deep");
    let mut prev: Option<i64> = None;
    for k in 0..depth {
        let mut c = b.computation(&format!("c{k}"));
        let x = c.param("x", 0, shape(PrimitiveType::F32, &[]));
        let root = match prev {
            None => x,
            Some(callee) => {
                let call = c.op(&format!("call{k}"), "call", shape(PrimitiveType::F32, &[]), &[x]);
                c.edit(call, |i| i.called_computation_ids = vec![callee]);
                call
            }
        };
        prev = Some(c.finish(root));
    }
    let err = Module::decode(b.finish(&format!("c{}", depth - 1)).encode_to_vec().into()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { limit: limits::Limit::CallDepth, .. }), "{err}");
}

#[test]
fn a_bad_module_in_a_profile_is_a_warning_and_the_others_load() {
    let good = tiny_module_bytes();
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, names::plane::HOST_METADATA);
        let hlo = plane.stat_metadata(names::stat::HLO_PROTO);
        let legacy = plane.stat_metadata(names::stat::HLO_PROTO_LEGACY);
        let pid = plane.stat_metadata(names::stat::PROGRAM_ID);
        let bad = plane.event_metadata("jit_bad(3)");
        plane.metadata_stat(bad, hlo, &[0x0a, 0xff, 0xff][..]);
        plane.metadata_stat(bad, pid, 3u64);
        // Legacy spelling, no program_id stat: the id comes from the name.
        let old = plane.event_metadata("jit_f(9)");
        plane.metadata_stat(old, legacy, good.as_slice());
        let new = plane.event_metadata("jit_f(2)");
        plane.metadata_stat(new, hlo, good.as_slice());
        plane.metadata_stat(new, pid, 2u64);
        // Metadata without a proto is not a module.
        plane.event_metadata("something else");
    }
    let space = Space::parse(b.finish().into()).unwrap();
    let (modules, warnings) = modules_from_space(&space);
    let names: Vec<String> = modules.iter().map(|m| m.display_name()).collect();
    assert_eq!(names, ["jit_f(2)", "jit_f(9)"]);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].location.module.as_deref(), Some("jit_bad(3)"));
    let (entries, _) = xlens_hlo::hlo_protos(&space);
    assert_eq!(
        entries.iter().map(|e| (e.program_id, e.legacy)).collect::<Vec<_>>(),
        [(2, false), (3, false), (9, true)]
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut state = 0x1234_5678_9abc_def0u64;
    for _ in 0..3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 200) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|i| {
                let x = state.wrapping_mul(i as u64 + 1).rotate_left(i as u32 % 64);
                x as u8
            })
            .collect();
        let _ = Module::decode(bytes.into());
    }
    // A structurally valid proto with absurd values everywhere.
    let mut p = raw::HloProto::decode(tiny_module_bytes().as_slice()).unwrap();
    for c in &mut p.hlo_module.as_mut().unwrap().computations {
        for i in &mut c.instructions {
            i.tuple_index = i64::MIN;
            i.parameter_number = i64::MAX;
            i.window = Some(Box::new(raw::Window {
                dimensions: vec![raw::WindowDimension {
                    size: i64::MAX,
                    stride: 0,
                    padding_low: i64::MIN,
                    ..Default::default()
                }],
            }));
            i.fft_length = vec![i64::MAX, -1];
            if let Some(s) = i.shape.as_mut() {
                s.dimensions = s.dimensions.iter().map(|_| i64::MAX).collect();
            }
        }
    }
    let m = Module::decode(p.encode_to_vec().into()).unwrap();
    for i in m.instructions() {
        let _ = (m.cost(i.id()), m.instruction_text(i.id()), i.shape().tpu_padded_bytes(), m.source(i.id()));
    }
}

/// `proto` encoded with the instruction named `target` given a `sharding` field (40) that does
/// not decode: a key cut short.
fn with_bad_sharding(proto: raw::HloProto, target: &str) -> Vec<u8> {
    let module = proto.hlo_module.unwrap();
    let computations = module
        .computations
        .iter()
        .map(|c| {
            let instructions = c
                .instructions
                .iter()
                .map(|i| {
                    let mut bytes = i.encode_to_vec();
                    if i.name == target {
                        bytes.extend([0xc2, 0x02, 0x01, 0xff]);
                    }
                    bytes.into()
                })
                .collect();
            raw::HloComputationProtoEncoded {
                name: c.name.clone(),
                instructions,
                id: c.id,
                root_id: c.root_id,
                is_fusion_computation: c.is_fusion_computation,
                execution_thread: c.execution_thread.clone(),
            }
            .encode_to_vec()
            .into()
        })
        .collect();
    let encoded = raw::HloModuleProtoEncoded {
        name: module.name,
        entry_computation_name: module.entry_computation_name,
        computations,
        id: module.id,
        entry_computation_id: module.entry_computation_id,
        ..Default::default()
    };
    raw::HloProtoEncoded { hlo_module: Some(encoded), buffer_assignment: None }.encode_to_vec()
}

/// A malformed field the model does not read (an elementwise op's sharding) fails the decode
/// all the same, as prost's decode of the proto fails (issue 40 case 1: a module read as if the
/// field were absent gave a verdict on bytes prost rejects); the error names the instruction's
/// message and the field's offset.
#[test]
fn a_malformed_field_the_model_does_not_read_fails_the_decode() {
    let build = |op: &str| {
        let mut b = HloBuilder::new("m");
        let mut main = b.computation("main");
        let x = main.param("x", 0, shape(PrimitiveType::F32, &[4]));
        let y = main.op("y", op, shape(PrimitiveType::F32, &[4]), &[x]);
        main.finish(y);
        b.finish("main")
    };
    for op in ["negate", "all-reduce"] {
        let bytes = with_bad_sharding(build(op), "y");
        assert!(raw::HloProto::decode(bytes.as_slice()).is_err(), "prost rejects it");
        let err = Module::decode(bytes.into()).unwrap_err();
        match err.kind() {
            ErrorKind::Malformed { path, .. } => {
                assert!(path.starts_with("HloProto.hlo_module.computations[0].instructions[1]"), "{op}: {path}");
            }
            // The collective's groups are read from the whole proto, whose decode fails first.
            ErrorKind::Decode(_) => assert_eq!(op, "all-reduce", "{err}"),
            _ => panic!("{op}: {err}"),
        }
        assert!(err.is_decode(), "{err}");
    }
}
