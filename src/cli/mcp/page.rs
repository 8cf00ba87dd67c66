//! Results an agent can take in: at most [`MAX_RESULT_BYTES`] of JSON.
//!
//! A document that fits is returned whole, exactly as the CLI's `--json` prints it (compact).
//! One that does not is paged: every list (JSON array, at any depth) longer than `limit` is cut
//! to its rows `offset..offset + limit`, the lists inside the rows kept are paged the same way,
//! and the document gains `"truncated": true` and a `"page"` object that says how to ask for the
//! next page (the same call with `offset` = `page.next_offset`, `limit` = `page.limit`) and which
//! lists were cut (`page.lists`: JSON pointer and total rows). Without a `limit` the largest one
//! whose page fits is taken; the top rows come first because the documents list their rows in
//! order of importance (time, severity).

use serde_json::{Map, Value};

/// The largest result a tool returns, in bytes of JSON.
pub(crate) const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The page a caller asks for: `offset` rows skipped in every paged list, at most `limit` kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PageRequest {
    /// Rows skipped.
    pub(crate) offset: usize,
    /// Rows kept; `None`: as many as fit.
    pub(crate) limit: Option<usize>,
}

/// `doc` as the JSON text a tool returns: whole when it fits and no page was asked for, else the
/// page asked for (or the largest that fits); an error when not even one row a list fits.
pub(crate) fn page(doc: &Value, request: PageRequest) -> Result<String, String> {
    let mut whole_bytes = None;
    if request == PageRequest::default() {
        let whole = serde_json::to_string(doc).map_err(|e| e.to_string())?;
        if whole.len() <= MAX_RESULT_BYTES {
            return Ok(whole);
        }
        whole_bytes = Some(whole.len());
    }
    let mut limit = match request.limit {
        Some(0) => return Err("limit must be at least 1".to_owned()),
        Some(limit) => limit,
        // The share of the rows that the room allows, as a first try: the lists are most of a
        // large document, so this page is about the largest that fits.
        None => {
            let longest = longest_list(doc).max(1);
            whole_bytes.map_or(longest, |bytes| (longest * MAX_RESULT_BYTES / bytes.max(1)).clamp(1, longest))
        }
    };
    loop {
        let text = serde_json::to_string(&cut(doc, request.offset, limit)).map_err(|e| e.to_string())?;
        if text.len() <= MAX_RESULT_BYTES {
            return Ok(text);
        }
        if limit == 1 {
            return Err(format!(
                "the result is larger than {} KiB even at one row a list: narrow the question",
                MAX_RESULT_BYTES / 1024
            ));
        }
        // Halving finds a fitting page in a few tries; the page is then at least half as long
        // as the longest that fits.
        limit /= 2;
    }
}

/// The page `offset..offset + limit` of every list longer than `limit` in `doc`, with the
/// `truncated` flag and the `page` object (a document that is not an object is put under
/// `"result"`).
pub(crate) fn cut(doc: &Value, offset: usize, limit: usize) -> Value {
    let mut lists = Vec::new();
    let body = cut_at(doc, offset, limit, &mut String::new(), &mut lists);
    let more = lists.iter().any(|(_, total)| offset.saturating_add(limit) < *total);
    let truncated = offset > 0 || more;
    let mut map = match body {
        Value::Object(map) => map,
        other => Map::from_iter([("result".to_owned(), other)]),
    };
    map.insert("truncated".to_owned(), Value::Bool(truncated));
    let lists: Vec<Value> =
        lists.into_iter().map(|(path, total)| serde_json::json!({ "path": path, "total": total })).collect();
    map.insert(
        "page".to_owned(),
        serde_json::json!({
            "offset": offset,
            "limit": limit,
            "next_offset": more.then(|| offset.saturating_add(limit)),
            "lists": lists,
        }),
    );
    Value::Object(map)
}

fn cut_at(value: &Value, offset: usize, limit: usize, path: &mut String, lists: &mut Vec<(String, usize)>) -> Value {
    match value {
        Value::Array(rows) => {
            let (first, kept) = if rows.len() > limit {
                lists.push((path.clone(), rows.len()));
                let first = offset.min(rows.len());
                (first, &rows[first..offset.saturating_add(limit).min(rows.len())])
            } else {
                (0, &rows[..])
            };
            let at = path.len();
            let rows = kept
                .iter()
                .enumerate()
                .map(|(i, row)| {
                    path.push_str(&format!("/{}", first + i));
                    let row = cut_at(row, offset, limit, path, lists);
                    path.truncate(at);
                    row
                })
                .collect();
            Value::Array(rows)
        }
        Value::Object(map) => {
            let at = path.len();
            let map = map
                .iter()
                .map(|(key, v)| {
                    // JSON pointer escapes (RFC 6901).
                    path.push('/');
                    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    let v = cut_at(v, offset, limit, path, lists);
                    path.truncate(at);
                    (key.clone(), v)
                })
                .collect();
            Value::Object(map)
        }
        other => other.clone(),
    }
}

/// The length of the longest list in `doc`.
fn longest_list(doc: &Value) -> usize {
    match doc {
        Value::Array(rows) => rows.iter().map(longest_list).fold(rows.len(), usize::max),
        Value::Object(map) => map.values().map(longest_list).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A document of one host with `n` ops of about 100 bytes each and a few steps.
    fn ops(n: usize) -> Value {
        let ops: Vec<Value> =
            (0..n).map(|i| json!({ "name": format!("fusion.{i}"), "self_ms": i, "pad": "x".repeat(64) })).collect();
        json!({ "hosts": [{ "host": "h0", "ops": ops, "steps": [1, 2, 3] }] })
    }

    #[test]
    fn a_document_that_fits_is_returned_whole() {
        let doc = ops(10);
        let text = page(&doc, PageRequest::default()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), doc);
        assert!(!text.contains("truncated"));
    }

    #[test]
    fn a_large_document_is_cut_to_its_top_rows_with_the_next_page() {
        let doc = ops(5_000);
        assert!(serde_json::to_string(&doc).unwrap().len() > MAX_RESULT_BYTES);
        let text = page(&doc, PageRequest::default()).unwrap();
        assert!(text.len() <= MAX_RESULT_BYTES);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["truncated"], json!(true));
        let limit = v["page"]["limit"].as_u64().unwrap() as usize;
        let shown = v["hosts"][0]["ops"].as_array().unwrap();
        assert_eq!(shown.len(), limit);
        assert_eq!(shown[0]["name"], "fusion.0");
        assert_eq!(v["page"]["next_offset"], json!(limit));
        assert_eq!(v["page"]["lists"], json!([{ "path": "/hosts/0/ops", "total": 5_000 }]));
        // Short lists are whole.
        assert_eq!(v["hosts"][0]["steps"], json!([1, 2, 3]));

        // The next page starts where this one ended; the last one has no next.
        let next = page(&doc, PageRequest { offset: limit, limit: Some(limit) }).unwrap();
        let next: Value = serde_json::from_str(&next).unwrap();
        assert_eq!(next["hosts"][0]["ops"][0]["name"], format!("fusion.{limit}"));
        let last = page(&doc, PageRequest { offset: 4_990, limit: Some(limit) }).unwrap();
        let last: Value = serde_json::from_str(&last).unwrap();
        assert_eq!(last["hosts"][0]["ops"].as_array().unwrap().len(), 10);
        assert_eq!(last["page"]["next_offset"], Value::Null);
        assert_eq!(last["truncated"], json!(true));
    }

    #[test]
    fn a_limit_asked_for_is_kept_when_it_fits_and_lowered_when_it_does_not() {
        let doc = ops(5_000);
        let v: Value = serde_json::from_str(&page(&doc, PageRequest { offset: 0, limit: Some(7) }).unwrap()).unwrap();
        assert_eq!(v["hosts"][0]["ops"].as_array().unwrap().len(), 7);
        let v: Value =
            serde_json::from_str(&page(&doc, PageRequest { offset: 0, limit: Some(100_000) }).unwrap()).unwrap();
        assert!(v["page"]["limit"].as_u64().unwrap() < 5_000);
        assert!(page(&doc, PageRequest { offset: 0, limit: Some(0) }).is_err());
    }

    #[test]
    fn a_row_too_large_for_any_page_is_an_error() {
        let doc = json!({ "blob": "x".repeat(MAX_RESULT_BYTES + 1) });
        assert!(page(&doc, PageRequest::default()).unwrap_err().contains("narrow"));
    }

    #[test]
    fn a_top_level_list_is_paged_under_result() {
        let doc = Value::Array((0..20_000).map(|i| json!(i)).collect());
        let v: Value = serde_json::from_str(&page(&doc, PageRequest::default()).unwrap()).unwrap();
        assert_eq!(v["result"][0], json!(0));
        assert_eq!(v["page"]["lists"][0]["path"], json!(""));
    }
}
