//! A logdir served over HTTP on loopback (a small server in this test, with range requests and
//! HTML directory listings) scans with the same report as the local copy; host files are read
//! in ranged GETs; missing objects and denied access are clear errors.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serves `root` on a loopback port: files (honouring `Range: bytes=A-B` with 206), folders as
/// an HTML index, `/denied/...` as 403. Counts ranged requests.
fn serve(root: PathBuf) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let ranged = Arc::new(AtomicUsize::new(0));
    let counter = ranged.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (root, counter) = (root.clone(), counter.clone());
            std::thread::spawn(move || {
                let _ = answer(stream, &root, &counter);
            });
        }
    });
    (base, ranged)
}

fn answer(mut stream: TcpStream, root: &Path, ranged: &AtomicUsize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let target = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut range = None;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            if line.trim().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                let (a, b) = v.trim().split_once('-').unwrap();
                range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()));
            }
        }
        let path = root.join(target.trim_start_matches('/'));
        let (status, headers, body): (&str, String, Vec<u8>) = if target.starts_with("/denied/") {
            ("403 Forbidden", String::new(), b"no".to_vec())
        } else if path.is_dir() {
            let mut page = String::from("<html><body>");
            let mut names: Vec<String> = std::fs::read_dir(&path)?
                .flatten()
                .map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if e.path().is_dir() { format!("{n}/") } else { n }
                })
                .collect();
            names.sort();
            for n in names {
                page.push_str(&format!("<a href=\"{n}\">{n}</a>\n"));
            }
            ("200 OK", String::new(), page.into_bytes())
        } else if let Ok(data) = std::fs::read(&path) {
            match range {
                Some((a, b)) => {
                    ranged.fetch_add(1, Ordering::Relaxed);
                    let end = b.min(data.len() as u64 - 1);
                    let part = data[a as usize..=end as usize].to_vec();
                    ("206 Partial Content", format!("Content-Range: bytes {a}-{end}/{}\r\n", data.len()), part)
                }
                None => ("200 OK", String::new(), data),
            }
        } else {
            ("404 Not Found", String::new(), b"missing".to_vec())
        };
        write!(stream, "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{headers}\r\n", body.len())?;
        stream.write_all(&body)?;
    }
}

fn xlens(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).env("RUST_BACKTRACE", "1").output().unwrap()
}

/// A copy of a two-host session as a logdir (`plugins/profile/RUN/`).
fn logdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-http-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("plugins/profile/2026_12_03_10_00_00");
    std::fs::create_dir_all(&run).unwrap();
    for entry in std::fs::read_dir(common::root().join("testdata/tpu/tpu_straggler_host")).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".xplane.pb") {
            std::fs::copy(entry.path(), run.join(entry.file_name())).unwrap();
        }
    }
    dir
}

#[test]
fn a_logdir_over_http_scans_like_its_local_copy() {
    let dir = logdir("scan");
    let (base, ranged) = serve(dir.clone());
    let local = xlens(&["scan", &dir.display().to_string(), "--json", "-q"]);
    assert_eq!(local.status.code(), Some(0));
    for url in [format!("{base}/"), format!("{base}/plugins/profile/2026_12_03_10_00_00")] {
        let remote = xlens(&["scan", &url, "--json", "-q"]);
        assert_eq!(remote.status.code(), Some(0), "{url}: {}", String::from_utf8_lossy(&remote.stderr));
        assert_eq!(remote.stdout, local.stdout, "{url}");
    }
    assert!(ranged.load(Ordering::Relaxed) >= 4, "host files are read with range requests");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_arrive_in_ranged_chunks_and_errors_are_clear() {
    let dir = logdir("chunks");
    let (base, ranged) = serve(dir.clone());
    let rel = "plugins/profile/2026_12_03_10_00_00/host0.xplane.pb";
    let local = std::fs::read(dir.join(rel)).unwrap();
    let before = ranged.load(Ordering::Relaxed);
    let bytes = xlens::source::http::fetch_chunked(&format!("{base}/{rel}"), 64 << 10).unwrap();
    assert_eq!(&bytes[..], &local[..]);
    let chunks = ranged.load(Ordering::Relaxed) - before;
    assert_eq!(chunks as u64, (local.len() as u64).div_ceil(64 << 10), "one request per 64 KiB");
    let missing = xlens(&["scan", &format!("{base}/{rel}.nope.xplane.pb"), "-q"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("no such object (HTTP 404)") && err.lines().count() == 1, "{err}");
    let denied = xlens(&["scan", &format!("{base}/denied/h.xplane.pb"), "-q"]);
    assert!(String::from_utf8_lossy(&denied.stderr).contains("access denied (HTTP 403)"), "{denied:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
