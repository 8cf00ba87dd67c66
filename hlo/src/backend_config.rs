//! The one field the cost model reads of a cuBLAS GEMM's JSON backend config (XLA's
//! `GpuBackendConfig`): `gemm_backend_config.dot_dimension_numbers.lhs_contracting_dimensions`.
//!
//! The config is read in one pass with serde visitors that keep nothing but that list: building
//! a `serde_json::Value` of the whole config (an ordered map per object, a string per field) took
//! 40 % of the GPU cost pass on a real H200 capture. The answer is what reading it into a
//! `Value` and looking the path up gives, for every input: the unit tests compare the two on
//! hand-written and generated configs (malformed, duplicated keys, escaped keys, deep nesting).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The contracting dimensions of a cuBLAS GEMM's left operand, from its backend config (none
/// for an empty config, whose defaults XLA prices as well). `None` when XLA's cost analysis
/// cannot read the config, which then prices the GEMM at nothing: bytes that are not JSON, a
/// top level that is not an object, a list that is not a list of integers (or of integers
/// written as strings, as proto3 JSON writes 64-bit ones), or a config naming
/// `wait_on_operation_queues`, a field of older XLA releases that the one in XProf 2.24 no
/// longer defines (its JSON reader rejects unknown fields: XProf prices such GEMMs, from older
/// captures and this project's synthetic profiles, at zero FLOPs and bytes).
pub(crate) fn gemm_lhs_contracting(config: &[u8]) -> Option<Vec<i64>> {
    if config.iter().all(u8::is_ascii_whitespace) {
        return Some(Vec::new());
    }
    let mut de = serde_json::Deserializer::from_slice(config);
    let top = Node { level: Level::Top }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    match top {
        Found::Top { retired_field: false, lhs } => lhs.unwrap_or(Some(Vec::new())),
        _ => None,
    }
}

/// Where a value sits on the path to the list.
#[derive(Clone, Copy)]
enum Level {
    /// The whole config.
    Top,
    /// `gemm_backend_config`.
    Gemm,
    /// `dot_dimension_numbers`.
    DotDims,
    /// `lhs_contracting_dimensions`.
    List,
    /// One element of the list.
    Element,
    /// Anything else: read (so that malformed or too deeply nested JSON still fails) and dropped.
    Skip,
}

/// What was found in one value. For the objects on the path, `lhs` is the list's value when the
/// path below reaches it (`None` when it does not); the last of repeated keys wins, as in a map.
enum Found {
    /// The top level was an object.
    Top { retired_field: bool, lhs: Option<Option<Vec<i64>>> },
    /// An object on the path (or, for a value that is not an object, `lhs: None`).
    Path { lhs: Option<Option<Vec<i64>>> },
    /// The list: its integers, or `None` when it is not a list of integers.
    List(Option<Vec<i64>>),
    /// A list element as an integer, if it is one.
    Element(Option<i64>),
    /// Anything that is not an object at the top level, or a skipped value.
    Nothing,
}

struct Node {
    level: Level,
}

impl<'de> DeserializeSeed<'de> for Node {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Found, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Node {
    /// What a value that is not an object, a list or a string amounts to at this level.
    fn scalar(&self, as_integer: Option<i64>) -> Found {
        match self.level {
            Level::Top | Level::Skip => Found::Nothing,
            Level::Gemm | Level::DotDims => Found::Path { lhs: None },
            Level::List => Found::List(None),
            Level::Element => Found::Element(as_integer),
        }
    }
}

/// An object key, compared once it is unescaped.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = KeyName;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<KeyName, D::Error> {
        deserializer.deserialize_str(self)
    }
}

enum KeyName {
    RetiredField,
    Gemm,
    DotDims,
    List,
    Other,
}

impl<'de> Visitor<'de> for Key {
    type Value = KeyName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<KeyName, E> {
        Ok(match key {
            "wait_on_operation_queues" => KeyName::RetiredField,
            "gemm_backend_config" => KeyName::Gemm,
            "dot_dimension_numbers" => KeyName::DotDims,
            "lhs_contracting_dimensions" => KeyName::List,
            _ => KeyName::Other,
        })
    }
}

impl<'de> Visitor<'de> for Node {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let mut retired_field = false;
        let mut lhs = None;
        while let Some(key) = map.next_key_seed(Key)? {
            // The level of this key's value, when it is on the path from this one.
            let below = match (self.level, key) {
                (Level::Top, KeyName::RetiredField) => {
                    retired_field = true;
                    Level::Skip
                }
                (Level::Top, KeyName::Gemm) => Level::Gemm,
                (Level::Gemm, KeyName::DotDims) => Level::DotDims,
                (Level::DotDims, KeyName::List) => Level::List,
                _ => Level::Skip,
            };
            match map.next_value_seed(Node { level: below })? {
                Found::Path { lhs: found } => lhs = found,
                Found::List(list) => lhs = Some(list),
                _ => {}
            }
        }
        Ok(match self.level {
            Level::Top => Found::Top { retired_field, lhs },
            Level::Gemm | Level::DotDims => Found::Path { lhs },
            Level::List => Found::List(None),
            Level::Element => Found::Element(None),
            Level::Skip => Found::Nothing,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        if let Level::List = self.level {
            let mut out = Some(Vec::new());
            while let Some(element) = seq.next_element_seed(Node { level: Level::Element })? {
                match (&mut out, element) {
                    (Some(list), Found::Element(Some(d))) => list.push(d),
                    _ => out = None,
                }
            }
            return Ok(Found::List(out));
        }
        while seq.next_element_seed(Node { level: Level::Skip })?.is_some() {}
        Ok(self.scalar(None))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Found, E> {
        Ok(self.scalar(s.parse().ok()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Found, E> {
        Ok(self.scalar(Some(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Found, E> {
        Ok(self.scalar(i64::try_from(v).ok()))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Found, E> {
        Ok(self.scalar(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Found, E> {
        Ok(self.scalar(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Found, E> {
        Ok(self.scalar(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition: the whole config read into a `serde_json::Value`, the path looked up.
    fn by_value(config: &[u8]) -> Option<Vec<i64>> {
        if config.iter().all(u8::is_ascii_whitespace) {
            return Some(Vec::new());
        }
        let value: serde_json::Value = serde_json::from_slice(config).ok()?;
        let object = value.as_object()?;
        if object.contains_key("wait_on_operation_queues") {
            return None;
        }
        let dims = object
            .get("gemm_backend_config")
            .and_then(|g| g.get("dot_dimension_numbers"))
            .and_then(|d| d.get("lhs_contracting_dimensions"));
        match dims {
            None => Some(Vec::new()),
            Some(list) => list
                .as_array()?
                .iter()
                .map(|d| d.as_str().and_then(|s| s.parse().ok()).or_else(|| d.as_i64()))
                .collect(),
        }
    }

    #[test]
    fn hand_written_configs_read_as_their_values_do() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let cases: Vec<Vec<u8>> = [
            r#"{"operation_queue_id":"0","gemm_backend_config":{"dot_dimension_numbers":
                {"lhs_contracting_dimensions":["0"],"rhs_contracting_dimensions":["1"]}},"device_type":"X"}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1, 2]}}}"#,
            r#"{"wait_on_operation_queues":[],"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"]}},"wait_on_operation_queues":7}"#,
            "selected_algorithm: 7",
            "",
            "  \n",
            "[]",
            "3",
            "\"s\"",
            "null",
            "{}",
            r#"{"gemm_backend_config":null}"#,
            r#"{"gemm_backend_config":[{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1]}}]}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":"1"}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":{}}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1.0]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[-3, "4", " 5"]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[18446744073709551615]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["9223372036854775808"]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[[1]]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[true, null]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1]},"dot_dimension_numbers":5}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1]}},"gemm_backend_config":{}}"#,
            r#"{"gemm_backend_config":{},"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[2]}}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1],"lhs_contracting_dimensions":[3]}}}"#,
            r#"{"gemm\u005fbackend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[4]}}}"#,
            r#"{"wait_on_operation_queue\u0073":1}"#,
            r#"{"lhs_contracting_dimensions":[1],"dot_dimension_numbers":{"lhs_contracting_dimensions":[1]}}"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1]}}} x"#,
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1,]}}}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e999}"#,
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([format!(r#"{{"other":{deep}}}"#).into_bytes(), b"{\"a\":\"\xff\"}".to_vec()])
        .collect();
        for case in &cases {
            assert_eq!(gemm_lhs_contracting(case), by_value(case), "{}", String::from_utf8_lossy(case));
        }
    }

    /// JSON-like text that reaches every branch: objects keyed mostly by the next key on the
    /// path (escaped or not, repeated, out of place, the retired field), lists of integers as
    /// numbers and strings mixed with other values, and pieces that break the syntax.
    fn arb_json(level: usize, depth: u32) -> BoxedStrategy<String> {
        const PATH: [&str; 3] = ["gemm_backend_config", "dot_dimension_numbers", "lhs_contracting_dimensions"];
        let integer = prop_oneof![Just("1".to_owned()), Just("-2".to_owned()), Just("\"3\"".to_owned())];
        let leaf = prop_oneof![
            6 => integer.clone(),
            1 => Just("\"x\"".to_owned()),
            1 => Just("2.5".to_owned()),
            1 => Just("18446744073709551615".to_owned()),
            1 => Just("true".to_owned()),
            1 => Just("null".to_owned()),
            1 => Just("{}".to_owned()),
            1 => Just("[".to_owned()),
        ];
        if depth == 0 {
            return leaf.boxed();
        }
        let next = PATH.get(level).copied().unwrap_or("other");
        let key = prop_oneof![
            12 => Just(next.to_owned()),
            1 => Just(next.replacen('_', "\\u005f", 1)),
            1 => Just("wait_on_operation_queues".to_owned()),
            1 => prop::sample::select(PATH.to_vec()).prop_map(str::to_owned),
            1 => Just("other".to_owned()),
        ];
        let below = arb_json(level + 1, depth - 1);
        let element = arb_json(PATH.len() + 1, depth - 1);
        let object = prop::collection::vec((key, below), 0..4).prop_map(|entries| {
            let body: Vec<String> = entries.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        });
        let list = prop::collection::vec(prop_oneof![12 => integer, 3 => leaf.clone(), 1 => element], 0..4)
            .prop_map(|items| format!("[{}]", items.join(",")));
        if level == PATH.len() {
            prop_oneof![4 => list, 1 => leaf, 1 => object].boxed()
        } else {
            prop_oneof![10 => object, 1 => leaf, 1 => list].boxed()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        #[test]
        fn generated_configs_read_as_their_values_do(json in arb_json(0, 5), tail in prop_oneof![Just(""), Just(" "), Just("}")]) {
            let text = format!("{json}{tail}");
            prop_assert_eq!(gemm_lhs_contracting(text.as_bytes()), by_value(text.as_bytes()), "{}", text);
        }
    }
}
