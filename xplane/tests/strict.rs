//! The strict check against prost itself: for every rule (keys, wire types, packed and unpacked
//! numbers, lengths, groups, maps, the recursion limit, strings not checked for UTF-8) and for
//! random and mutated messages, `Schema::check` accepts exactly what `prost::Message::decode`
//! accepts.

use proptest::prelude::*;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet, MessageOptions};
use xlens_xplane::strict::{MessageId, RECURSION_LIMIT, Schema};

/// A message of every kind of field, recursive (`children`, the map's values).
#[derive(Clone, PartialEq, prost::Message)]
struct Node {
    #[prost(int64, tag = "1")]
    v: i64,
    #[prost(int32, repeated, tag = "2")]
    ints: Vec<i32>,
    #[prost(fixed32, repeated, tag = "3")]
    f32s: Vec<u32>,
    #[prost(double, repeated, tag = "4")]
    f64s: Vec<f64>,
    /// `string` in the schema: `bytes` here, so that prost does not check UTF-8 either.
    #[prost(bytes = "vec", tag = "5")]
    s: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    b: Vec<u8>,
    #[prost(message, repeated, tag = "7")]
    children: Vec<Node>,
    #[prost(btree_map = "int64, message", tag = "8")]
    m: std::collections::BTreeMap<i64, Node>,
    #[prost(group, optional, tag = "9")]
    g: Option<Group>,
    #[prost(sfixed64, tag = "10")]
    sf64: i64,
    #[prost(float, tag = "11")]
    f: f32,
    #[prost(bool, tag = "12")]
    flag: bool,
    #[prost(sint64, repeated, tag = "13")]
    zigzag: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Group {
    #[prost(int64, tag = "1")]
    x: i64,
    #[prost(message, optional, tag = "2")]
    node: Option<Box<Node>>,
}

fn field(name: &str, number: i32, label: Label, ty: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(label as i32),
        r#type: Some(ty as i32),
        type_name: type_name.map(Into::into),
        ..Default::default()
    }
}

/// The descriptor of `Node` and `Group` (package `t`), as protox would compile it.
fn schema() -> (Schema, MessageId) {
    schema_with(false)
}

/// The same, its strings checked for UTF-8 when `utf8`.
fn schema_with(utf8: bool) -> (Schema, MessageId) {
    use Label::{Optional, Repeated};
    let entry = DescriptorProto {
        name: Some("MEntry".into()),
        field: vec![
            field("key", 1, Optional, Type::Int64, None),
            field("value", 2, Optional, Type::Message, Some(".t.Node")),
        ],
        options: Some(MessageOptions { map_entry: Some(true), ..Default::default() }),
        ..Default::default()
    };
    let node = DescriptorProto {
        name: Some("Node".into()),
        field: vec![
            field("v", 1, Optional, Type::Int64, None),
            field("ints", 2, Repeated, Type::Int32, None),
            field("f32s", 3, Repeated, Type::Fixed32, None),
            field("f64s", 4, Repeated, Type::Double, None),
            field("s", 5, Optional, Type::String, None),
            field("b", 6, Optional, Type::Bytes, None),
            field("children", 7, Repeated, Type::Message, Some(".t.Node")),
            field("m", 8, Repeated, Type::Message, Some(".t.Node.MEntry")),
            field("g", 9, Optional, Type::Group, Some(".t.Group")),
            field("sf64", 10, Optional, Type::Sfixed64, None),
            field("f", 11, Optional, Type::Float, None),
            field("flag", 12, Optional, Type::Bool, None),
            field("zigzag", 13, Repeated, Type::Sint64, None),
        ],
        nested_type: vec![entry],
        ..Default::default()
    };
    let group = DescriptorProto {
        name: Some("Group".into()),
        field: vec![
            field("x", 1, Optional, Type::Int64, None),
            field("node", 2, Optional, Type::Message, Some(".t.Node")),
        ],
        ..Default::default()
    };
    let file = FileDescriptorProto {
        name: Some("t.proto".into()),
        package: Some("t".into()),
        message_type: vec![node, group],
        syntax: Some("proto2".into()),
        ..Default::default()
    };
    let set = FileDescriptorSet { file: vec![file] };
    let encoded = set.encode_to_vec();
    let schema =
        if utf8 { Schema::from_descriptor_set_checking_utf8(&encoded) } else { Schema::from_descriptor_set(&encoded) };
    let schema = schema.expect("schema");
    let node = schema.message("t.Node").expect("t.Node");
    (schema, node)
}

/// The checker's verdict and prost's, on `bytes` as a `Node`.
fn verdicts(schema: &Schema, node: MessageId, bytes: &[u8]) -> (bool, bool) {
    (schema.check(bytes, node).is_ok(), Node::decode(bytes).is_ok())
}

fn assert_agree(schema: &Schema, node: MessageId, bytes: &[u8], expected: bool, what: &str) {
    let (strict, prost) = verdicts(schema, node, bytes);
    assert_eq!(prost, expected, "{what}: prost on {bytes:02x?}");
    assert_eq!(strict, prost, "{what}: the check on {bytes:02x?}: {:?}", schema.check(bytes, node));
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        if v < 0x80 {
            out.push(v as u8);
            return out;
        }
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
}

fn key(field: u64, wire: u64) -> Vec<u8> {
    varint(field << 3 | wire)
}

fn len_field(field: u64, body: &[u8]) -> Vec<u8> {
    [key(field, 2), varint(body.len() as u64), body.to_vec()].concat()
}

#[test]
fn keys() {
    let (schema, node) = schema();
    assert_agree(&schema, node, &[], true, "empty");
    assert_agree(&schema, node, &[0x08, 0x01], true, "field 1 varint");
    assert_agree(&schema, node, &[0x00, 0x01], false, "tag 0");
    assert_agree(&schema, node, &[0x06, 0x01], false, "tag 0, wire 6");
    assert_agree(&schema, node, &[0x0e, 0x01], false, "wire type 6");
    assert_agree(&schema, node, &[0x0f, 0x01], false, "wire type 7");
    assert_agree(&schema, node, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x01], false, "tag 2^29-1, wire 7");
    // The largest tag (2^29 - 1), unknown varint: skipped.
    assert_agree(&schema, node, &[0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01], true, "largest tag");
    // A key over u32::MAX.
    assert_agree(&schema, node, &[0x80, 0x80, 0x80, 0x80, 0x10, 0x01], false, "key over u32");
    assert_agree(&schema, node, &[0x88], false, "key cut short");
    // Over-long but valid keys: 0x08 in ten bytes.
    assert_agree(&schema, node, &[0x88, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x05], true, "long key");
}

#[test]
fn varints() {
    let (schema, node) = schema();
    let ten = |last: u8| [vec![0x08], vec![0xff; 9], vec![last]].concat();
    assert_agree(&schema, node, &ten(0x01), true, "ten bytes, last 1");
    assert_agree(&schema, node, &ten(0x02), false, "ten bytes, last 2");
    assert_agree(&schema, node, &ten(0x7f), false, "ten bytes, last 0x7f");
    assert_agree(&schema, node, &[vec![0x08], vec![0x80; 10], vec![0x00]].concat(), false, "eleven bytes");
    assert_agree(&schema, node, &[0x08, 0x80], false, "cut short");
    // The same for an unknown field.
    assert_agree(&schema, node, &[vec![0x70], vec![0xff; 9], vec![0x02]].concat(), false, "unknown, 2");
    assert_agree(&schema, node, &[vec![0x70], vec![0xff; 9], vec![0x01]].concat(), true, "unknown, 1");
}

#[test]
fn wire_types_of_declared_fields() {
    let (schema, node) = schema();
    // Field 1 (int64) as fixed64, length-delimited, fixed32, group.
    assert_agree(&schema, node, &[0x09, 0, 0, 0, 0, 0, 0, 0, 0], false, "int64 as fixed64");
    assert_agree(&schema, node, &[0x0a, 0x00], false, "int64 as len");
    assert_agree(&schema, node, &[0x0d, 0, 0, 0, 0], false, "int64 as fixed32");
    assert_agree(&schema, node, &[0x0b, 0x0c], false, "int64 as a group");
    assert_agree(&schema, node, &[0x0c], false, "int64 as an end group");
    // Strings, bytes and messages want length-delimited.
    assert_agree(&schema, node, &[0x28, 0x01], false, "string as varint");
    assert_agree(&schema, node, &[0x30, 0x01], false, "bytes as varint");
    assert_agree(&schema, node, &[0x38, 0x01], false, "message as varint");
    // Fixed scalars.
    assert_agree(&schema, node, &[0x51, 1, 2, 3, 4, 5, 6, 7, 8], true, "sfixed64");
    assert_agree(&schema, node, &[0x55, 1, 2, 3, 4], false, "sfixed64 as fixed32");
    assert_agree(&schema, node, &[0x5d, 1, 2, 3, 4], true, "float");
    assert_agree(&schema, node, &[0x5d, 1, 2, 3], false, "float cut short");
    assert_agree(&schema, node, &[0x59, 1, 2, 3, 4, 5, 6, 7, 8], false, "float as fixed64");
    assert_agree(&schema, node, &[0x60, 0x05], true, "bool of 5");
    // A non-repeated scalar does not take a packed occurrence.
    assert_agree(&schema, node, &[0x0a, 0x01, 0x01], false, "int64 packed");
    assert_agree(&schema, node, &[0x5a, 0x04, 1, 2, 3, 4], false, "float packed");
}

#[test]
fn packed_and_unpacked_repeated_numbers() {
    let (schema, node) = schema();
    assert_agree(&schema, node, &[0x10, 0x01, 0x10, 0x02], true, "int32 unpacked");
    assert_agree(&schema, node, &[0x12, 0x03, 0x01, 0x96, 0x01], true, "int32 packed");
    assert_agree(&schema, node, &[0x12, 0x00], true, "int32 packed, empty");
    assert_agree(&schema, node, &[0x12, 0x02, 0x01, 0x96], false, "int32 packed, last varint cut");
    assert_agree(&schema, node, &[0x12, 0x02, 0x01, 0x96, 0x01], false, "packed varint past its length");
    assert_agree(&schema, node, &[0x15, 1, 2, 3, 4], false, "int32 as fixed32");
    assert_agree(&schema, node, &[0x1d, 1, 2, 3, 4, 0x1a, 0x08, 1, 2, 3, 4, 5, 6, 7, 8], true, "fixed32 both ways");
    assert_agree(&schema, node, &[0x1a, 0x05, 1, 2, 3, 4, 5], false, "fixed32 packed, 5 bytes");
    assert_agree(&schema, node, &[0x1a, 0x05, 1, 2, 3, 4, 5, 6, 7, 8], false, "fixed32 packed, 5 of 8 bytes");
    assert_agree(&schema, node, &[0x18, 0x01], false, "fixed32 as varint");
    assert_agree(&schema, node, &[0x21, 1, 2, 3, 4, 5, 6, 7, 8], true, "double");
    assert_agree(&schema, node, &[0x22, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8], true, "double packed");
    assert_agree(&schema, node, &[0x22, 0x04, 1, 2, 3, 4], false, "double packed, 4 bytes");
    assert_agree(&schema, node, &[0x6a, 0x02, 0x03, 0x04], true, "sint64 packed");
}

#[test]
fn lengths() {
    let (schema, node) = schema();
    assert_agree(&schema, node, &[0x2a, 0x02, b'h', b'i'], true, "string");
    assert_agree(&schema, node, &[0x2a, 0x03, b'h', b'i'], false, "string past the end");
    assert_agree(&schema, node, &[0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f], false, "huge length");
    assert_agree(&schema, node, &[0x2a], false, "no length");
    // A nested message whose field runs past the message's end (but not the buffer's).
    assert_agree(&schema, node, &[0x3a, 0x02, 0x08, 0x96, 0x01], false, "varint past the message");
    assert_agree(&schema, node, &[0x3a, 0x03, 0x2a, 0x02, b'a', b'b'], false, "string past the message");
    assert_agree(&schema, node, &[0x3a, 0x03, 0x08, 0x96, 0x01], true, "nested");
    // Unknown fields of every wire type, and cut short.
    assert_agree(&schema, node, &[0x72, 0x01, 0xff], true, "unknown len");
    assert_agree(&schema, node, &[0x72, 0x02, 0xff], false, "unknown len past the end");
    assert_agree(&schema, node, &[0x71, 1, 2, 3, 4, 5, 6, 7, 8], true, "unknown fixed64");
    assert_agree(&schema, node, &[0x71, 1, 2, 3, 4, 5, 6, 7], false, "unknown fixed64 cut");
    assert_agree(&schema, node, &[0x75, 1, 2, 3, 4], true, "unknown fixed32");
    assert_agree(&schema, node, &[0x75, 1, 2, 3], false, "unknown fixed32 cut");
}

#[test]
fn strings_are_not_checked_for_utf8() {
    let (schema, node) = schema();
    let bytes = [0x2a, 0x02, 0xff, 0xfe];
    assert!(schema.check(&bytes, node).is_ok());
    // As prost decodes the same bytes with a `string` field: it alone refuses them.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Text {
        #[prost(string, tag = "5")]
        s: String,
    }
    assert!(Text::decode(&bytes[..]).is_err());
    assert!(Text::decode(&[0x2a, 0x02, b'o', b'k'][..]).is_ok());
    // A schema that checks them (the HLO messages') refuses what prost refuses, nested too.
    let (checking, node) = schema_with(true);
    for (bytes, ok) in [
        (vec![0x2a, 0x02, 0xff, 0xfe], false),
        (vec![0x2a, 0x02, b'o', b'k'], true),
        (len_field(7, &[0x2a, 0x02, 0xc3, 0x28]), false),
        (len_field(7, &[0x2a, 0x02, 0xc3, 0xa9]), true),
        (vec![0x32, 0x02, 0xff, 0xfe], true),
    ] {
        assert_eq!(checking.check(&bytes, node).is_ok(), ok, "{bytes:02x?}");
    }
}

#[test]
fn groups() {
    let (schema, node) = schema();
    // The declared group, field 9: start 0x4b, end 0x4c.
    assert_agree(&schema, node, &[0x4b, 0x08, 0x01, 0x4c], true, "group");
    assert_agree(&schema, node, &[0x4b, 0x4c], true, "empty group");
    assert_agree(&schema, node, &[0x4b, 0x08, 0x01], false, "group without end");
    assert_agree(&schema, node, &[0x4b, 0x08, 0x01, 0x54], false, "group ended by field 10");
    assert_agree(&schema, node, &[0x4a, 0x00], false, "group as len");
    assert_agree(&schema, node, &[0x4b, 0x0a, 0x00, 0x4c], false, "group's int64 as len");
    assert_agree(&schema, node, &[0x4b, 0x12, 0x02, 0x08, 0x01, 0x4c], true, "group with a message");
    // Unknown groups, nested, and their ends.
    assert_agree(&schema, node, &[0x73, 0x08, 0x01, 0x74], true, "unknown group");
    assert_agree(&schema, node, &[0x73, 0x7b, 0x7c, 0x74], true, "nested unknown groups");
    assert_agree(&schema, node, &[0x73, 0x7b, 0x74, 0x7c], false, "crossed ends");
    assert_agree(&schema, node, &[0x73, 0x08, 0x01], false, "unknown group without end");
    assert_agree(&schema, node, &[0x74], false, "an end group of no group");
    assert_agree(&schema, node, &[0x3a, 0x01, 0x74], false, "an end group in a nested message");
    assert_agree(&schema, node, &[0x73, 0x0f, 0x74], false, "wire type 7 in a group");
    // A group whose end lies past its message's end.
    assert_agree(&schema, node, &[0x3a, 0x01, 0x73, 0x74], false, "group end past the message");
}

#[test]
fn maps_are_entries() {
    let (schema, node) = schema();
    let entry = [0x08, 0x07, 0x12, 0x02, 0x08, 0x01];
    assert_agree(&schema, node, &len_field(8, &entry), true, "map entry");
    assert_agree(&schema, node, &len_field(8, &[0x12, 0x02, 0x08, 0x96]), false, "map value cut");
    assert_agree(&schema, node, &len_field(8, &[0x0a, 0x00]), false, "map key as len");
    assert_agree(&schema, node, &len_field(8, &[0x1a, 0x00]), true, "map entry with an unknown field");
    for wire in [0, 1, 3, 4, 5] {
        let bytes = [key(8, wire), vec![entry.len() as u8], entry.to_vec()].concat();
        assert_agree(&schema, node, &bytes, false, &format!("map field of wire type {wire}"));
    }
}

/// `depth` messages nested in `children`, the innermost holding `inner`.
fn nested(depth: usize, inner: &[u8]) -> Vec<u8> {
    let mut bytes = inner.to_vec();
    for _ in 0..depth {
        bytes = len_field(7, &bytes);
    }
    bytes
}

#[test]
fn the_recursion_limit_is_prosts() {
    let (schema, node) = schema();
    let limit = RECURSION_LIMIT as usize;
    assert_agree(&schema, node, &nested(limit, &[]), true, "100 nested");
    assert_agree(&schema, node, &nested(limit + 1, &[]), false, "101 nested");
    // A known scalar at the deepest level is read; an unknown field there is not skipped.
    assert_agree(&schema, node, &nested(limit, &[0x08, 0x01]), true, "a scalar 100 deep");
    assert_agree(&schema, node, &nested(limit, &[0x70, 0x01]), false, "an unknown field 100 deep");
    assert_agree(&schema, node, &nested(limit - 1, &[0x70, 0x01]), true, "an unknown field 99 deep");
    assert_agree(&schema, node, &nested(limit, &[0x2a, 0x00]), true, "a string 100 deep");
    // Groups count as levels, declared or not.
    assert_agree(&schema, node, &nested(limit - 1, &[0x4b, 0x4c]), true, "a group 99 deep");
    assert_agree(&schema, node, &nested(limit, &[0x4b, 0x4c]), false, "a group 100 deep");
    assert_agree(&schema, node, &nested(limit - 1, &[0x73, 0x7b, 0x7c, 0x74]), false, "unknown groups 99 deep");
    assert_agree(&schema, node, &nested(limit - 2, &[0x73, 0x7b, 0x7c, 0x74]), true, "unknown groups 98 deep");
    // Map entries too.
    let map = |depth: usize| {
        let mut bytes = Vec::new();
        for _ in 0..depth {
            bytes = len_field(8, &len_field(2, &bytes));
        }
        bytes
    };
    assert_agree(&schema, node, &map(50), true, "50 map levels (100 messages)");
    assert_agree(&schema, node, &[map(50), vec![]].concat(), true, "50 map levels again");
    let deeper = len_field(7, &map(50));
    assert_agree(&schema, node, &deeper, false, "101 messages through maps");
}

#[test]
fn faults_name_the_message_and_the_occurrence() {
    let (schema, node) = schema();
    // children[1].children[0] holds a field of wire type 7.
    let bad = len_field(7, &[0x0f]);
    let bytes = [len_field(7, &[]), len_field(1 << 4 | 1, &[]), len_field(7, &bad)].concat();
    let fault = schema.check(&bytes, node).unwrap_err();
    assert_eq!(fault.path, "Node.children[1].children[0]");
    assert_eq!(fault.offset, bytes.len() - 1);
    assert!(fault.span.contains(&fault.offset) && fault.span.end == bytes.len(), "{fault:?}");
}

/// A random field: a key of a field number mostly declared and a wire type mostly right, and a
/// value that mostly fits (messages nested, lengths right).
fn arb_field(depth: u32) -> BoxedStrategy<Vec<u8>> {
    let number = prop_oneof![8 => 1u64..=13, 1 => 14u64..=20, 1 => Just(0u64), 1 => Just(1u64 << 28)];
    let leaf = (number.clone(), 0u64..8, proptest::collection::vec(any::<u8>(), 0..12), any::<u64>())
        .prop_map(|(n, wire, bytes, v)| {
            let value = match wire {
                0 => varint(v >> (v % 64)),
                1 => bytes.iter().copied().chain(std::iter::repeat(0)).take(8).collect(),
                2 => [varint(bytes.len() as u64), bytes].concat(),
                5 => bytes.iter().copied().chain(std::iter::repeat(0)).take(4).collect(),
                _ => bytes.into_iter().take(2).collect(),
            };
            [key(n, wire), value].concat()
        })
        .boxed();
    if depth == 0 {
        return leaf;
    }
    let message = (number.clone(), proptest::collection::vec(arb_field(depth - 1), 0..4))
        .prop_map(|(n, fields)| len_field(n, &fields.concat()));
    let group = (number, proptest::collection::vec(arb_field(depth - 1), 0..3), prop::bool::weighted(0.9)).prop_map(
        |(n, fields, ended)| {
            let end = if ended { key(n, 4) } else { key(n % 13 + 1, 4) };
            [key(n, 3), fields.concat(), end].concat()
        },
    );
    prop_oneof![3 => leaf, 2 => message, 1 => group].boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random messages: the check and prost agree on each.
    #[test]
    fn random_messages_are_judged_as_prost_judges_them(fields in proptest::collection::vec(arb_field(3), 0..6)) {
        let (schema, node) = schema();
        let bytes = fields.concat();
        let (strict, prost) = verdicts(&schema, node, &bytes);
        prop_assert_eq!(strict, prost, "{:02x?}: {:?}", bytes, schema.check(&bytes, node));
    }

    /// Valid messages mutated (a byte changed, inserted or removed, the end cut): the check and
    /// prost agree on each.
    #[test]
    fn mutated_messages_are_judged_as_prost_judges_them(
        fields in proptest::collection::vec(arb_field(3), 1..6),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        how in 0..4u8,
    ) {
        let (schema, node) = schema();
        let mut bytes = fields.concat();
        let i = at.index(bytes.len());
        match how {
            0 => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            2 => { bytes.remove(i); }
            _ => bytes.truncate(i),
        }
        let (strict, prost) = verdicts(&schema, node, &bytes);
        prop_assert_eq!(strict, prost, "{:02x?}: {:?}", bytes, schema.check(&bytes, node));
    }
}

/// The XSpace schema on real captures: each is valid, and each one-byte change inside a
/// sample of its fields is judged as prost judges it (strings aside: prost checks their UTF-8).
#[test]
fn xspace_mutations_are_judged_as_prost_judges_them() {
    use xlens_xplane::raw;
    let schema = Schema::xspace();
    let space = schema.message("tensorflow.profiler.XSpace").expect("XSpace");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let bytes = std::fs::read(root.join("tpu/tpu_basic/host0.xplane.pb")).expect("capture");
    assert!(schema.check(&bytes, space).is_ok());
    assert!(raw::XSpace::decode(&bytes[..]).is_ok());
    let mut agreed = 0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..400 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut mutant = bytes.clone();
        let at = (rng % mutant.len() as u64) as usize;
        mutant[at] = (rng >> 32) as u8;
        let strict = schema.check(&mutant, space).is_ok();
        match raw::XSpace::decode(&mutant[..]) {
            Ok(_) => assert!(strict, "byte {at}: prost accepts, the check refuses: {:?}", schema.check(&mutant, space)),
            Err(e) if e.to_string().contains("UTF-8") => {}
            Err(e) => assert!(!strict, "byte {at}: prost refuses ({e}), the check accepts"),
        }
        agreed += 1;
    }
    assert!(agreed > 300);
}

/// The check's speed on a file named by `XLENS_STRICT_FILE` (by hand, in a release build:
/// `XLENS_STRICT_FILE=… cargo test --release -p xlens-xplane --test strict -- --ignored speed`).
#[test]
#[ignore = "a measurement, by hand"]
fn speed() {
    let Some(file) = std::env::var_os("XLENS_STRICT_FILE") else { return };
    let bytes = std::fs::read(&file).expect("file");
    let schema = Schema::xspace();
    let space = schema.message("tensorflow.profiler.XSpace").expect("XSpace");
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let ok = schema.check(&bytes, space).is_ok();
        let s = start.elapsed().as_secs_f64();
        eprintln!("whole file, one thread: {ok} in {:.3} s, {:.2} GB/s", s, bytes.len() as f64 / s / 1e9);
    }
    let parsed = xlens_xplane::Space::parse(bytes.clone().into()).expect("space");
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let again = xlens_xplane::Space::parse(bytes.clone().into()).expect("space");
        let parse = start.elapsed().as_secs_f64();
        let start = std::time::Instant::now();
        again.check_structure();
        let s = start.elapsed().as_secs_f64();
        eprintln!("parse {parse:.3} s; check_structure {s:.3} s ({} errors)", again.decode_errors().errors.len());
    }
    drop(parsed);
}
