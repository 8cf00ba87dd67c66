//! Builders for readable synthetic HLO protos, and tiny fixtures, for tests, examples, fuzz seeds
//! and benchmarks.
//!
//! ```
//! use xlens_hlo::{Module, PrimitiveType, testing::{HloBuilder, shape}};
//! let mut b = HloBuilder::new("m");
//! let mut main = b.computation("main");
//! let x = main.param("x", 0, shape(PrimitiveType::F32, &[4]));
//! let y = main.op("y", "negate", shape(PrimitiveType::F32, &[4]), &[x]);
//! main.finish(y);
//! let module = Module::from_proto(b.finish("main"), 0)?;
//! assert_eq!(module.entry_cost().flops, 4);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use prost::Message;

use crate::raw;
use crate::shape::PrimitiveType;

/// An array shape with the default (row-major) layout.
pub fn shape(element_type: PrimitiveType, dims: &[i64]) -> raw::ShapeProto {
    raw::ShapeProto {
        element_type: element_type.proto_value(),
        dimensions: dims.to_vec(),
        layout: Some(raw::LayoutProto { minor_to_major: (0..dims.len() as i64).rev().collect(), ..Default::default() }),
        ..Default::default()
    }
}

/// A tuple shape.
pub fn tuple_shape(elements: Vec<raw::ShapeProto>) -> raw::ShapeProto {
    raw::ShapeProto { element_type: PrimitiveType::Tuple.proto_value(), tuple_shapes: elements, ..Default::default() }
}

/// Builds an `HloModuleProto` computation by computation, with XLA-style unique ids
/// (computation id in the high 32 bits).
#[derive(Debug, Default)]
pub struct HloBuilder {
    module: raw::HloModuleProto,
}

/// Builds one computation; [`ComputationBuilder::finish`] adds it to the module.
#[derive(Debug)]
pub struct ComputationBuilder<'a> {
    builder: &'a mut HloBuilder,
    comp: raw::HloComputationProto,
}

impl HloBuilder {
    /// A module with a name.
    pub fn new(name: &str) -> HloBuilder {
        HloBuilder { module: raw::HloModuleProto { name: name.to_owned(), ..Default::default() } }
    }

    /// Starts a computation; its id is the number of computations added before it.
    pub fn computation(&mut self, name: &str) -> ComputationBuilder<'_> {
        let id = self.module.computations.len() as i64;
        ComputationBuilder {
            builder: self,
            comp: raw::HloComputationProto { name: name.to_owned(), id, ..Default::default() },
        }
    }

    /// Mutable access to the module proto (aliasing, stack frames, ...).
    pub fn module_mut(&mut self) -> &mut raw::HloModuleProto {
        &mut self.module
    }

    /// The finished `HloProto`, with `entry` as entry computation.
    pub fn finish(mut self, entry: &str) -> raw::HloProto {
        self.module.entry_computation_name = entry.to_owned();
        if let Some(c) = self.module.computations.iter().find(|c| c.name == entry) {
            self.module.entry_computation_id = c.id;
        }
        raw::HloProto { hlo_module: Some(self.module), buffer_assignment: None }
    }
}

impl ComputationBuilder<'_> {
    /// The computation's id.
    pub fn id(&self) -> i64 {
        self.comp.id
    }

    fn push(&mut self, mut instr: raw::HloInstructionProto) -> i64 {
        let id = (self.comp.id << 32) | self.comp.instructions.len() as i64;
        instr.id = id;
        self.comp.instructions.push(instr);
        id
    }

    /// Adds a `parameter`; returns its unique id.
    pub fn param(&mut self, name: &str, number: i64, shape: raw::ShapeProto) -> i64 {
        self.push(raw::HloInstructionProto {
            name: name.to_owned(),
            opcode: "parameter".into(),
            shape: Some(Box::new(shape)),
            parameter_number: number,
            ..Default::default()
        })
    }

    /// Adds an instruction with operands (unique ids); returns its unique id.
    pub fn op(&mut self, name: &str, opcode: &str, shape: raw::ShapeProto, operands: &[i64]) -> i64 {
        self.push(raw::HloInstructionProto {
            name: name.to_owned(),
            opcode: opcode.to_owned(),
            shape: Some(Box::new(shape)),
            operand_ids: operands.to_vec(),
            ..Default::default()
        })
    }

    /// Edits an instruction added before (by unique id).
    pub fn edit(&mut self, id: i64, f: impl FnOnce(&mut raw::HloInstructionProto)) {
        if let Some(i) = self.comp.instructions.iter_mut().find(|i| i.id == id) {
            f(i);
        }
    }

    /// Sets the root and adds the computation to the module; returns the computation id.
    pub fn finish(mut self, root: i64) -> i64 {
        self.comp.root_id = root;
        let id = self.comp.id;
        self.builder.module.computations.push(self.comp);
        id
    }
}

/// A tiny module `jit_f`: `dot.1 = dot(p0: f32[8,4], p1: f32[4,16])` feeding a loop fusion
/// `fusion.2` (`exponential` + `add`), whose tuple is the root. `dot.1` maps to
/// `/home/me/train.py:12` (function `loss`) through the stack-frame index.
pub fn tiny_module() -> raw::HloProto {
    let f32_ = |dims: &[i64]| shape(PrimitiveType::F32, dims);
    let mut b = HloBuilder::new("jit_f");
    let mut fused = b.computation("fused_computation");
    let p = fused.param("param_0", 0, f32_(&[8, 16]));
    let e = fused.op("exponential.0", "exponential", f32_(&[8, 16]), &[p]);
    let a = fused.op("add.0", "add", f32_(&[8, 16]), &[e, p]);
    let fused_id = fused.finish(a);
    let mut main = b.computation("main.5");
    let p0 = main.param("p0", 0, f32_(&[8, 4]));
    let p1 = main.param("p1", 1, f32_(&[4, 16]));
    let dot = main.op("dot.1", "dot", f32_(&[8, 16]), &[p0, p1]);
    main.edit(dot, |i| {
        i.dot_dimension_numbers = Some(Box::new(raw::DotDimensionNumbers {
            lhs_contracting_dimensions: vec![1],
            rhs_contracting_dimensions: vec![0],
            ..Default::default()
        }));
        i.metadata =
            Some(raw::OpMetadata { op_name: "jit(f)/dot_general".into(), stack_frame_id: 2, ..Default::default() });
    });
    let fusion = main.op("fusion.2", "fusion", f32_(&[8, 16]), &[dot]);
    main.edit(fusion, |i| {
        i.fusion_kind = "kLoop".into();
        i.called_computation_ids = vec![fused_id];
    });
    let t = main.op("tuple.3", "tuple", tuple_shape(vec![f32_(&[8, 16])]), &[fusion]);
    main.finish(t);
    b.module_mut().stack_frame_index = Some(raw::StackFrameIndexProto {
        file_names: vec!["/home/me/train.py".into()],
        function_names: vec!["<module>".into(), "loss".into()],
        file_locations: vec![
            raw::stack_frame_index_proto::FileLocation {
                file_name_id: 1,
                function_name_id: 1,
                line: 30,
                ..Default::default()
            },
            raw::stack_frame_index_proto::FileLocation {
                file_name_id: 1,
                function_name_id: 2,
                line: 12,
                ..Default::default()
            },
        ],
        stack_frames: vec![
            raw::stack_frame_index_proto::StackFrame { file_location_id: 1, parent_frame_id: 0 },
            raw::stack_frame_index_proto::StackFrame { file_location_id: 2, parent_frame_id: 1 },
        ],
    });
    b.finish("main.5")
}

/// [`tiny_module`], serialized.
pub fn tiny_module_bytes() -> Vec<u8> {
    tiny_module().encode_to_vec()
}

/// An XSpace whose `/host:metadata` plane holds [`tiny_module`] as `jit_f(7)` (program id 7).
pub fn tiny_profile_bytes() -> Vec<u8> {
    let proto = tiny_module_bytes();
    let mut b = xlens_xplane::SpaceBuilder::default();
    {
        let mut plane = b.plane(1, xlens_xplane::names::plane::HOST_METADATA);
        let hlo = plane.stat_metadata(xlens_xplane::names::stat::HLO_PROTO);
        let pid = plane.stat_metadata(xlens_xplane::names::stat::PROGRAM_ID);
        let m = plane.event_metadata("jit_f(7)");
        plane.metadata_stat(m, hlo, proto.as_slice());
        plane.metadata_stat(m, pid, 7u64);
    }
    b.finish()
}
