//! Which files the server may read: only under its `--root` directories; and where it may
//! write: only into its `--out` directory ([`OutDir`]).
//!
//! A path is made absolute against the first root, resolved with every symlink followed
//! (`canonicalize`), and accepted only when the result lies under a root that was itself
//! canonicalized at start: `..` and symlinks that lead out are refused alike. URLs are refused
//! before anything is looked up (the server reads local files only). A directory is checked,
//! then each host file found in it, since a run directory under a root may hold a symlink to a
//! file elsewhere.

use std::path::{Path, PathBuf};

/// The directories the server reads under, canonical.
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    roots: Vec<PathBuf>,
}

impl Roots {
    /// The roots `dirs` (the working directory when empty), each canonicalized; one that does
    /// not exist or is not a directory is an error.
    pub(crate) fn new(dirs: &[PathBuf]) -> Result<Roots, String> {
        let dirs = if dirs.is_empty() { vec![PathBuf::from(".")] } else { dirs.to_vec() };
        let mut roots = Vec::with_capacity(dirs.len());
        for dir in &dirs {
            let root = dir.canonicalize().map_err(|e| format!("--root {}: {e}", dir.display()))?;
            if !root.is_dir() {
                return Err(format!("--root {}: not a directory", dir.display()));
            }
            roots.push(root);
        }
        Ok(Roots { roots })
    }

    /// The canonical path of `given`, when it names an existing file or directory under a root;
    /// else a one-line refusal that names the path as given.
    pub(crate) fn resolve(&self, given: &str) -> Result<PathBuf, String> {
        if given.trim().is_empty() {
            return Err("path is empty".to_owned());
        }
        if looks_like_url(given) {
            return Err(format!("{given:?} is a URL: this server reads local files under its --root only"));
        }
        let path = Path::new(given);
        let joined = if path.is_absolute() { path.to_path_buf() } else { self.roots[0].join(path) };
        let canonical = joined.canonicalize().map_err(|e| format!("{given:?}: {e}"))?;
        self.check(&canonical).map_err(|()| format!("{given:?} is outside the server's --root ({})", self.shown()))?;
        Ok(canonical)
    }

    /// `Ok` when `path`, resolved, lies under a root (a host file found in a checked
    /// directory); else the refusal.
    pub(crate) fn check_file(&self, path: &Path) -> Result<(), String> {
        let canonical = path.canonicalize().map_err(|e| format!("{}: {e}", path.display()))?;
        self.check(&canonical)
            .map_err(|()| format!("{} leads outside the server's --root ({})", path.display(), self.shown()))
    }

    fn check(&self, canonical: &Path) -> Result<(), ()> {
        if self.roots.iter().any(|r| canonical.starts_with(r)) { Ok(()) } else { Err(()) }
    }

    /// The roots, comma-separated, for messages.
    fn shown(&self) -> String {
        self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// The one directory the server may write into (`--out`), canonical; `None` when it was started
/// without one, and then writes nothing.
///
/// A tool names what it writes by a relative path of plain components (`page.html`,
/// `reports/run1.html`): an absolute path, `..`, a URL, or a directory under `--out` that leads
/// out through a symlink is refused. The file is written to a new temporary file beside its
/// target (created exclusively, so no symlink is followed) and renamed over the target (which
/// replaces a symlink there instead of writing through it).
#[derive(Debug, Clone, Default)]
pub(crate) struct OutDir {
    dir: Option<PathBuf>,
}

impl OutDir {
    /// The directory `dir` (created if missing) made canonical; no directory when `None`.
    pub(crate) fn new(dir: Option<&Path>) -> Result<OutDir, String> {
        let Some(dir) = dir else { return Ok(OutDir::default()) };
        std::fs::create_dir_all(dir).map_err(|e| format!("--out {}: {e}", dir.display()))?;
        let canonical = dir.canonicalize().map_err(|e| format!("--out {}: {e}", dir.display()))?;
        if !canonical.is_dir() {
            return Err(format!("--out {}: not a directory", dir.display()));
        }
        Ok(OutDir { dir: Some(canonical) })
    }

    /// Writes `bytes` to `name` under the directory (its `what` for messages): the path written,
    /// or a one-line refusal.
    pub(crate) fn write(&self, what: &str, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
        let target = self.target(what, name)?;
        let parent = target.parent().unwrap_or(&target).to_path_buf();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temp = parent.join(format!(".xlens-{}-{n}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
            .and_then(|()| std::fs::rename(&temp, &target));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(format!("writing {name:?} into --out: {e}"));
        }
        Ok(target)
    }

    /// Where `name` lands under the directory, its parent directories made (each checked to lie
    /// under it first); refused when there is no directory or `name` would leave it.
    fn target(&self, what: &str, name: &str) -> Result<PathBuf, String> {
        let Some(dir) = &self.dir else {
            return Err(format!("this server writes nothing: start it with --out DIR to write {what}"));
        };
        if looks_like_url(name) {
            return Err(format!("{what} {name:?} is a URL: give a file name under the server's --out"));
        }
        let path = Path::new(name);
        let plain = path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if name.trim().is_empty() || !plain {
            return Err(format!(
                "{what} {name:?} must be a relative path of plain names under the server's --out ({}), without .. or a leading /",
                dir.display()
            ));
        }
        let target = dir.join(path);
        let parent = target.parent().unwrap_or(dir);
        // The deepest directory that exists must lie under --out once resolved (a symlink under
        // --out may lead elsewhere); the rest is made inside it.
        let mut existing = parent.to_path_buf();
        while !existing.exists() {
            existing = existing.parent().map_or_else(|| dir.clone(), Path::to_path_buf);
        }
        let resolved = existing.canonicalize().map_err(|e| format!("{what} {name:?}: {e}"))?;
        if !resolved.starts_with(dir) || !resolved.is_dir() {
            return Err(format!("{what} {name:?} leads outside the server's --out ({})", dir.display()));
        }
        std::fs::create_dir_all(parent).map_err(|e| format!("{what} {name:?}: {e}"))?;
        if target.is_dir() {
            return Err(format!("{what} {name:?} is a directory under the server's --out"));
        }
        Ok(target)
    }
}

/// `scheme://…`, or a scheme that names a remote or URL source without the slashes (`s3:b/k`,
/// `file:/etc`). A file name with a colon elsewhere (`host:1.xplane.pb`) is a path.
fn looks_like_url(s: &str) -> bool {
    const SCHEMES: [&str; 9] = ["file:", "http:", "https:", "s3:", "gs:", "gcs:", "az:", "abfs:", "hdfs:"];
    s.contains("://")
        || SCHEMES.iter().any(|scheme| s.get(..scheme.len()).is_some_and(|p| p.eq_ignore_ascii_case(scheme)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory with `inside/profile.xplane.pb`, `outside/secret.xplane.pb`, and under
    /// `inside` a symlink to each of the other side's file and directory.
    fn tree(name: &str) -> PathBuf {
        let base = std::env::temp_dir().join(format!("xlens-mcp-guard-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("inside/run")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("inside/run/profile.xplane.pb"), b"x").unwrap();
        std::fs::write(base.join("outside/secret.xplane.pb"), b"x").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("outside/secret.xplane.pb"), base.join("inside/escape.xplane.pb"))
                .unwrap();
            std::os::unix::fs::symlink(base.join("outside"), base.join("inside/escape_dir")).unwrap();
            std::os::unix::fs::symlink(base.join("inside/run"), base.join("inside/alias")).unwrap();
        }
        base
    }

    #[test]
    fn paths_under_the_root_resolve_and_others_are_refused() {
        let base = tree("paths");
        let roots = Roots::new(&[base.join("inside")]).unwrap();
        let inside = base.join("inside").canonicalize().unwrap();
        assert_eq!(roots.resolve("run/profile.xplane.pb").unwrap(), inside.join("run/profile.xplane.pb"));
        assert_eq!(roots.resolve(inside.join("run").to_str().unwrap()).unwrap(), inside.join("run"));
        let outside = base.join("outside/secret.xplane.pb");
        assert!(roots.resolve(outside.to_str().unwrap()).unwrap_err().contains("outside the server's --root"));
        assert!(roots.resolve("../outside/secret.xplane.pb").unwrap_err().contains("outside"));
        assert!(roots.resolve("/etc/passwd").unwrap_err().contains("outside"));
        assert!(roots.resolve("missing.xplane.pb").unwrap_err().contains("missing.xplane.pb"));
        assert!(roots.resolve("").is_err());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_that_lead_out_are_refused_and_those_that_stay_in_resolve() {
        let base = tree("symlinks");
        let roots = Roots::new(&[base.join("inside")]).unwrap();
        assert!(roots.resolve("escape.xplane.pb").unwrap_err().contains("outside"));
        assert!(roots.resolve("escape_dir").unwrap_err().contains("outside"));
        assert!(roots.resolve("escape_dir/secret.xplane.pb").unwrap_err().contains("outside"));
        let inside = base.join("inside").canonicalize().unwrap();
        assert_eq!(roots.resolve("alias").unwrap(), inside.join("run"));
        // A host file found in a checked directory is checked on its own.
        assert!(roots.check_file(&inside.join("escape.xplane.pb")).is_err());
        assert!(roots.check_file(&inside.join("run/profile.xplane.pb")).is_ok());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn urls_are_refused_before_any_lookup() {
        let base = tree("urls");
        let roots = Roots::new(&[base.join("inside")]).unwrap();
        for url in ["https://example.com/p.xplane.pb", "s3://bucket/key", "gs://b/k", "file:///etc/passwd", "http:x"] {
            assert!(roots.resolve(url).unwrap_err().contains("is a URL"), "{url}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn writes_land_in_the_out_directory_only() {
        let base = tree("out");
        let none = OutDir::new(None).unwrap();
        assert!(none.write("the page", "page.html", b"x").unwrap_err().contains("start it with --out"));
        let out = OutDir::new(Some(&base.join("inside/out"))).unwrap();
        let written = out.write("the page", "reports/page.html", b"<html>").unwrap();
        let inside = base.join("inside/out").canonicalize().unwrap();
        assert_eq!(written, inside.join("reports/page.html"));
        assert_eq!(std::fs::read(&written).unwrap(), b"<html>");
        // Written again: replaced, and no temporary file left behind.
        out.write("the page", "reports/page.html", b"<html>2").unwrap();
        assert_eq!(std::fs::read_dir(inside.join("reports")).unwrap().count(), 1);
        for bad in ["../escape.html", "/etc/passwd", "a/../../b.html", "", "https://x/y.html", "."] {
            let e = out.write("the page", bad, b"x").unwrap_err();
            assert!(!e.contains('\n'), "{e}");
            assert!(!base.join("inside/escape.html").exists(), "{bad}");
        }
        assert!(out.write("the page", "reports", b"x").unwrap_err().contains("is a directory"));
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_under_out_do_not_lead_writes_out() {
        let base = tree("out-symlinks");
        let out_dir = base.join("inside/out");
        let out = OutDir::new(Some(&out_dir)).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), out_dir.join("away")).unwrap();
        assert!(out.write("the page", "away/page.html", b"x").unwrap_err().contains("leads outside"));
        assert!(out.write("the page", "away/new/page.html", b"x").unwrap_err().contains("leads outside"));
        assert!(!base.join("outside/page.html").exists() && !base.join("outside/new").exists());
        // A symlink at the target is replaced, not written through.
        std::os::unix::fs::symlink(base.join("outside/secret.xplane.pb"), out_dir.join("page.html")).unwrap();
        out.write("the page", "page.html", b"page").unwrap();
        assert_eq!(std::fs::read(base.join("outside/secret.xplane.pb")).unwrap(), b"x");
        assert!(!std::fs::symlink_metadata(out_dir.join("page.html")).unwrap().file_type().is_symlink());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_root_must_be_a_directory() {
        let base = tree("roots");
        assert!(Roots::new(&[base.join("inside/run/profile.xplane.pb")]).is_err());
        assert!(Roots::new(&[base.join("nowhere")]).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
