//! The HTML page's device-memory and GPU-kernel sections (issue 42, item 3) show the figures of
//! `xlens memory --json` and `xlens kernels --json` on the same profile: an H200 capture (both
//! sections), a TPU capture and a CPU capture (memory only), and a profile without HLO (the
//! section says so instead of showing zeros). `tests/consistency.rs` holds every figure of both
//! sections to the documents on a dozen profiles; this test checks that the sections are there
//! and not empty where the documents are not, so that a parser finding nothing cannot pass.
//! `XLENS_PAGE_DIR` keeps each page there for a look.

mod common;

use serde_json::Value;
use xlens::report::render;
use xlens::{ScanRequest, scan_path};

const MIB: f64 = (1u64 << 20) as f64;

/// The page of the profile at `testdata/<rel>`, kept under `XLENS_PAGE_DIR` when it is set.
fn page(rel: &str) -> String {
    let dir = common::root().join("testdata").join(rel);
    let report = scan_path(&ScanRequest::new(&dir)).unwrap_or_else(|e| panic!("{rel}: {e}")).report;
    let html = render::html(&report);
    if let Some(out) = std::env::var_os("XLENS_PAGE_DIR") {
        let out = std::path::PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join(format!("{}.html", rel.replace('/', "__"))), &html).unwrap();
    }
    html
}

/// The page's section under `<h2 id="{id}">`, up to the next `<h2`.
fn section<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    let at = html.find(&format!("<h2 id=\"{id}\">"))?;
    let end = html[at + 3..].find("<h2").map_or(html.len(), |e| at + 3 + e);
    Some(&html[at..end])
}

/// The body rows of the first card table of `html`.
fn first_table_rows(html: &str) -> Vec<&str> {
    let Some(table) = html.split("<table class=\"cards\">").nth(1) else { return Vec::new() };
    let table = table.split("</table>").next().unwrap_or("");
    table.split("<tr").skip(2).collect()
}

/// The profile's `memory --json`.
fn memory(rel: &str) -> Value {
    let dir = common::root().join("testdata").join(rel);
    xlens::memory::memory_document(&xlens::memory::program_memory(&dir).unwrap(), None)
}

/// The profile's `kernels --json`.
fn kernels(rel: &str) -> Value {
    xlens::documents::kernels(&common::root().join("testdata").join(rel), None).unwrap()
}

/// The memory section lists `memory --json`'s largest programs with their totals, and the
/// largest program's largest buffers.
fn memory_section_matches(rel: &str, html: &str) {
    let doc = memory(rel);
    let sec = section(html, "memory").unwrap_or_else(|| panic!("{rel}: no memory section"));
    let modules = doc["modules"].as_array().unwrap();
    assert!(!modules.is_empty(), "{rel}: the profile should have programs with a buffer assignment");
    let count = doc["summary"]["total_modules"].as_u64().unwrap();
    assert!(sec.contains(&format!("{count} program(s) with a buffer assignment")), "{rel}: {sec}");
    let rows = first_table_rows(sec);
    assert_eq!(rows.len(), modules.len().min(8), "{rel}: {sec}");
    for (row, m) in rows.iter().zip(modules) {
        let name = m["module_name"].as_str().unwrap();
        let total = m["total_hbm_bytes"].as_u64().unwrap() as f64 / MIB;
        assert!(row.contains(&format!("<code>{name}</code>")), "{rel}: {name} in {row}");
        assert!(row.contains(&format!("data-label=\"Allocated (MiB)\">{total:.3}</td>")), "{rel}: {total} in {row}");
    }
    let first = &modules[0];
    let buffers = sec.split("<h3 id=\"memory-1\">").nth(1).unwrap_or_else(|| panic!("{rel}: no buffer table"));
    let buffer_rows = first_table_rows(buffers);
    let want = first["top_buffers"].as_array().unwrap();
    assert_eq!(buffer_rows.len(), want.len().min(10), "{rel}");
    for (row, b) in buffer_rows.iter().zip(want) {
        let size = b["size_bytes"].as_u64().unwrap() as f64 / MIB;
        assert!(row.contains(&format!("data-label=\"Size (MiB)\">{size:.3}</td>")), "{rel}: {size} in {row}");
    }
}

#[test]
fn gpu_page_shows_memory_and_kernels_of_the_documents() {
    let rel = "h200/h200_bf16_graphs";
    let html = page(rel);
    memory_section_matches(rel, &html);
    let doc = kernels(rel);
    let sec = section(&html, "kernels").expect("a GPU page has a kernel section");
    let want = doc["kernels"].as_array().unwrap();
    assert!(!want.is_empty());
    let rows = first_table_rows(sec);
    assert_eq!(rows.len(), want.len().min(15), "{sec}");
    for (row, k) in rows.iter().zip(want) {
        let name = k["kernel_name"].as_str().unwrap();
        assert!(
            row.contains(&format!(
                "title=\"{}\"",
                name.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
            )),
            "{name} in {row}"
        );
        let launches = k["occurrences"].as_u64().unwrap();
        assert!(row.contains(&format!("data-label=\"Launches\">{launches}</td>")), "{launches} in {row}");
        let share = k["share_pct"].as_f64().unwrap();
        assert!(row.contains(&format!("data-label=\"% of kernel time\">{share:.1}</td>")), "{share} in {row}");
    }
    let kernel_ms = doc["kernel_time_us"].as_f64().unwrap() / 1e3;
    assert!(sec.contains(&format!("kernel time {kernel_ms:.3} ms")), "{sec}");
}

#[test]
fn tpu_and_cpu_pages_show_memory_and_no_kernels() {
    for rel in ["field/tpu_v6e_host_offload", "corpus/host_callback"] {
        let html = page(rel);
        memory_section_matches(rel, &html);
        assert!(section(&html, "kernels").is_none(), "{rel}: a kernel section off GPUs");
    }
}

#[test]
fn a_page_without_hlo_says_so() {
    let rel = "tpu/tpu_basic";
    let html = page(rel);
    let sec = section(&html, "memory").unwrap();
    assert_eq!(memory(rel)["summary"]["total_modules"], 0);
    assert!(!sec.contains("<table") && !sec.contains("0.000"), "{sec}");
    assert!(sec.contains("No HLO programs in this profile") || sec.contains("carries a buffer assignment"), "{sec}");
}

/// The kernel statistics are read only for a page: `xlens scan --html FILE` and `--format html`
/// draw the kernel section as the library's page does, and a scan without a page (text, JSON)
/// says the same as one with it while its report leaves the kernel charts empty.
#[test]
fn kernels_are_read_for_pages_only() {
    let dir = common::root().join("testdata/h200/h200_bf16_graphs");
    let with = scan_path(&ScanRequest::new(&dir)).unwrap().report;
    let mut request = ScanRequest::new(&dir);
    request.config.no_page = true;
    let without = scan_path(&request).unwrap().report;
    assert!(!with.charts.kernels.is_empty());
    assert!(without.charts.kernels.is_empty());
    assert_eq!(render::json(&with), render::json(&without));
    assert_eq!(render::text(&with), render::text(&without));

    let out = std::env::temp_dir().join(format!("xlens-page-kernels-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("page.html");
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let dir_arg = dir.display().to_string();
    run(&["scan", &dir_arg, "-q", "--html", &file.display().to_string()]);
    let stdout_page = run(&["scan", &dir_arg, "-q", "--format", "html"]);
    let library_page = render::html(&with);
    let kernel_section = section(&library_page, "kernels").unwrap();
    for page in [std::fs::read_to_string(&file).unwrap(), stdout_page] {
        assert_eq!(section(&page, "kernels"), Some(kernel_section));
    }
    std::fs::remove_dir_all(&out).unwrap();
}
