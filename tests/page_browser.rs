//! The HTML summary page in a real browser: rendered by headless Chromium at a desktop width
//! (1400 px) and a phone width (420 px), nothing may stick out sideways. A copy of each page
//! carries a small script that measures every element after layout and writes what overflows into
//! the DOM, which `--dump-dom` hands back; screenshots are taken of the pages themselves.
//!
//! The browser is `XLENS_CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome` on
//! `PATH`. Without one the tests print a note and pass, unless `XLENS_REQUIRE_BROWSER=1` (CI),
//! where they fail. `XLENS_BLESS=1` copies the TPU screenshots to `docs/`.

mod common;

use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xlens::faults::{Profile, Report, ScanConfig, StepSeries, scan};
use xlens::report::render;

/// Desktop and phone widths (CSS px).
const WIDTHS: [u32; 2] = [1400, 420];
/// Window height for the layout checks.
const CHECK_HEIGHT: u32 = 900;
/// Window height of the screenshots: a first screen, small enough to keep the PNGs light.
const SHOT_HEIGHT: u32 = 1400;
/// The longest a browser run may take.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// Measures the laid-out page: the document must not be wider than the viewport, no visible
/// element may end right of the body (or start left of the page), and no chart text or mark may
/// leave its chart. The result goes into the DOM
/// (`<pre id="xlens-layout">`) and, inside the harness frame, to the harness page.
const LAYOUT_CHECK: &str = r#"<script>
(function () {
  function describe(el) {
    var d = el.tagName.toLowerCase();
    if (el.id) d += '#' + el.id;
    var c = el.getAttribute('class');
    if (c) d += '.' + c.trim().split(/\s+/).join('.');
    var t = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 50);
    return t ? d + ' "' + t + '"' : d;
  }
  function check() {
    var vw = window.innerWidth, root = document.documentElement;
    var body = document.body.getBoundingClientRect();
    var limit = Math.min(vw, body.right) + 0.5;
    var offenders = [];
    if (root.scrollWidth > vw) offenders.push('document: scrollWidth ' + root.scrollWidth + ' > innerWidth ' + vw);
    var all = document.body.getElementsByTagName('*');
    for (var i = 0; i < all.length; i++) {
      var r = all[i].getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.right > limit || r.left < -0.5) {
        offenders.push(describe(all[i]) + ': ' + r.left.toFixed(1) + '..' + r.right.toFixed(1) + ' px, body ends at ' + limit.toFixed(1));
      }
      // A chart's text and marks stay inside the chart (an SVG clips what sticks out).
      var svg = all[i].ownerSVGElement;
      if (svg) {
        var b = svg.getBoundingClientRect();
        if (r.right > b.right + 0.5 || r.left < b.left - 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5) {
          offenders.push(describe(all[i]) + ': ' + r.left.toFixed(1) + '..' + r.right.toFixed(1) + ' x ' + r.top.toFixed(1) + '..' + r.bottom.toFixed(1) + ' px, outside its chart ' + b.left.toFixed(1) + '..' + b.right.toFixed(1) + ' x ' + b.top.toFixed(1) + '..' + b.bottom.toFixed(1));
        }
      }
    }
    var result = JSON.stringify({ width: vw, scrollWidth: root.scrollWidth, elements: all.length, offenders: offenders });
    var pre = document.createElement('pre');
    pre.id = 'xlens-layout';
    pre.hidden = true;
    pre.textContent = result;
    document.body.appendChild(pre);
    if (window.parent !== window) window.parent.postMessage(result, '*');
  }
  window.addEventListener('load', check);
})();
</script>"#;

/// The browser to use, `None` when there is none (and none is required).
fn browser() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("XLENS_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&paths).map(move |dir| dir.join(name)))
        .find(|p| p.is_file());
    if found.is_none() {
        let required = std::env::var("XLENS_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
        assert!(!required, "XLENS_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH");
        println!(
            "note: no Chromium found (XLENS_CHROMIUM, chromium, chromium-browser, google-chrome): page not checked"
        );
    }
    found
}

/// Runs the browser headless on `args`, returns its stdout; fails the test on a timeout or error.
fn run_browser(chromium: &Path, profile_dir: &Path, args: &[String]) -> String {
    let mut child = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=3000"])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", chromium.display()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).map(|_| out)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} ran past {BROWSER_TIMEOUT:?}", chromium.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{} {args:?}: {status}", chromium.display());
    reader.join().unwrap().unwrap()
}

/// The page with the layout check, and a harness page that shows it in a frame exactly `width`
/// px wide: headless Chromium does not make windows narrower than 500 px, a frame can be.
fn write_check_pages(dir: &Path, name: &str, html: &str, width: u32) -> PathBuf {
    let checked = html.replacen("</body>", &format!("{LAYOUT_CHECK}</body>"), 1);
    assert_ne!(checked, html, "{name}: the page has no </body>");
    std::fs::write(dir.join(format!("{name}.check.html")), checked).unwrap();
    let harness = dir.join(format!("{name}.harness{width}.html"));
    std::fs::write(
        &harness,
        format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0;overflow:hidden\">\
             <iframe src=\"{name}.check.html\" style=\"display:block;border:0;width:{width}px;height:{}px\"></iframe>\
             <pre id=\"xlens-layout\"></pre><script>addEventListener('message', function (e) {{\
             document.getElementById('xlens-layout').textContent = e.data; }});</script></body></html>",
            CHECK_HEIGHT - 20
        ),
    )
    .unwrap();
    harness
}

/// The layout result in a dumped DOM.
fn layout_result(dom: &str) -> serde_json::Value {
    let start = dom.find("<pre id=\"xlens-layout\">").map(|i| i + "<pre id=\"xlens-layout\">".len());
    let text = start.and_then(|s| dom[s..].find("</pre>").map(|e| &dom[s..s + e])).unwrap_or_default();
    let text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("no layout result in the dumped DOM ({e}): {dom:.2000}"))
}

/// Checks one page at every width: the frame is as wide as asked and nothing overflows.
fn check_layout(chromium: &Path, dir: &Path, name: &str, html: &str) {
    for width in WIDTHS {
        let harness = write_check_pages(dir, name, html, width);
        let dom = run_browser(
            chromium,
            &dir.join(format!("profile-{name}-{width}")),
            &[format!("--window-size={width},{CHECK_HEIGHT}"), "--dump-dom".into(), file_url(&harness)],
        );
        let result = layout_result(&dom);
        assert_eq!(result["width"], width, "{name}: the page was laid out {} px wide, not {width}", result["width"]);
        assert!(
            result["elements"].as_u64().unwrap_or(0) > 50,
            "{name} at {width} px: the page did not render: {result}"
        );
        let offenders: Vec<&str> = result["offenders"].as_array().unwrap().iter().filter_map(|o| o.as_str()).collect();
        assert!(
            offenders.is_empty(),
            "{name} at {width} px: {} element(s) stick out (pages in {}):\n  {}",
            offenders.len(),
            dir.display(),
            offenders.iter().take(40).copied().collect::<Vec<_>>().join("\n  ")
        );
    }
}

/// Screenshots of the page at every width; returns their paths.
fn screenshots(chromium: &Path, dir: &Path, name: &str, html: &str) -> Vec<(u32, PathBuf)> {
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&page, html).unwrap();
    WIDTHS
        .iter()
        .map(|&width| {
            let png = dir.join(format!("{name}_{width}.png"));
            run_browser(
                chromium,
                &dir.join(format!("profile-{name}-shot-{width}")),
                &[
                    format!("--window-size={width},{SHOT_HEIGHT}"),
                    "--hide-scrollbars".into(),
                    format!("--screenshot={}", png.display()),
                    file_url(&page),
                ],
            );
            let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
            assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "{}: not a screenshot", png.display());
            (width, png)
        })
        .collect()
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn report(rel: &str) -> Report {
    let dir = root().join(rel);
    let session = xlens_testkit::open_session(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    scan(&Profile::from_session(session), &ScanConfig::default())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-page-browser-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The bundled CPU sample and a two-host TPU session (steps with their anatomy, ops, a
/// roofline) fit at both widths; their screenshots are taken (and blessed into `docs/`).
#[test]
fn sample_pages_fit_desktop_and_phone_widths() {
    let Some(chromium) = browser() else { return };
    let dir = scratch("samples");
    for (name, rel) in [("host_callback", "testdata/corpus/host_callback"), ("tpu", "testdata/tpu/tpu_straggler_host")]
    {
        let html = render::html(&report(rel));
        check_layout(&chromium, &dir, name, &html);
        let shots = screenshots(&chromium, &dir, name, &html);
        if name == "tpu" && std::env::var_os("XLENS_BLESS").is_some() {
            for (width, png) in shots {
                let docs = root().join(format!("docs/summary_page_{width}.png"));
                std::fs::copy(&png, &docs).unwrap();
                let size = std::fs::metadata(&docs).unwrap().len();
                assert!(size < 300_000, "{}: {size} bytes, keep it under 300 KB", docs.display());
            }
        }
    }
    // Module executions named by program, a memory peak with its capacity, no step markers.
    check_layout(&chromium, &dir, "v6e_offload", &render::html(&report("testdata/field/tpu_v6e_host_offload")));
    // A GPU page: its programs' memory and the kernel-statistics table.
    check_layout(&chromium, &dir, "h200", &render::html(&report("testdata/h200/h200_bf16_graphs")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A page pushed to its limits still fits: a dozen hosts with long names and thousands of steps
/// each, a kernel name of hundreds of characters (in the top ops and the kernel table), a
/// program of a long name in the memory table, a finding with a long code span.
#[test]
fn a_crowded_page_fits_desktop_and_phone_widths() {
    let Some(chromium) = browser() else { return };
    let dir = scratch("crowded");
    let mut r = report("testdata/tpu/tpu_straggler_host");
    let long_host = |i: usize| format!("tpu-vm-worker-{i:04}.europe-west4-a.c.a-rather-long-project-name.internal");
    let first = r.charts.step_series[0].clone();
    r.charts.step_series = (0..12)
        .map(|i| StepSeries {
            host: long_host(i),
            steps: (0..3000).map(|k| first.steps[k % first.steps.len()].clone()).collect(),
        })
        .collect();
    let row = r.hosts[0].clone();
    r.hosts = (0..12).map(|i| xlens::faults::HostRow { host: long_host(i), ..row.clone() }).collect();
    r.charts.top_ops[0].name = format!("void_ck_tile::kentry<{}>", "ck_tile::GemmKernel_TilePartitioner".repeat(8));
    r.charts.categories_ms[0].0 = "custom-call".repeat(12);
    if let Some(f) = r.findings.first_mut() {
        f.fix.push_str(
            " Set `--xla_tpu_enable_async_collective_fusion_fuse_all_gather_and_reduce_scatter_everywhere=true`.",
        );
    }
    // The memory and kernel sections of a GPU page, with names of hundreds of characters.
    let gpu = report("testdata/h200/h200_bf16_graphs");
    r.charts.memory = gpu.charts.memory.clone();
    r.charts.memory.programs[0].module_name = format!("jit_{}(1)", "train_step_with_a_long_name_".repeat(10));
    r.charts.kernels = gpu.charts.kernels.clone();
    r.charts.kernels[0].stats.kernels[0].kernel_name = format!("void_ck_tile::kentry<{}>", "ck_tile::Gemm".repeat(30));
    r.charts.kernels[0].stats.kernels[0].hlo_op = Some("custom-call".repeat(12));
    let html = render::html(&r);
    assert!(html.contains("steps 0 to "), "3000 steps are drawn as buckets");
    assert!(html.contains("<h2 id=\"kernels\">") && html.contains("<h2 id=\"memory\">"));
    check_layout(&chromium, &dir, "crowded", &html);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The diff's page (both step series, category deltas, the ops that moved, findings) fits at
/// both widths too.
#[test]
fn the_diff_page_fits_desktop_and_phone_widths() {
    let Some(chromium) = browser() else { return };
    let dir = scratch("diff");
    let (base, new) = (report("testdata/real/barrier_in_loop_baseline"), report("testdata/real/barrier_in_loop"));
    let d = xlens::report::diff::diff(&base, &new, &xlens::report::diff::DiffConfig::default());
    check_layout(&chromium, &dir, "diff", &xlens::report::diff::html(&d));
    let _ = std::fs::remove_dir_all(&dir);
}
