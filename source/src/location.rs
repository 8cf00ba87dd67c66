//! Where a profile is: a local path, an HTTP(S) URL or an object-store URL.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The object-store URL schemes [`Location::parse`] recognizes.
pub const STORE_SCHEMES: [&str; 4] = ["s3", "gs", "az", "abfs"];

/// Where a profile is: a file, a run directory or a logdir, on disk or behind a URL.
///
/// Parsed from what a user types ([`Location::parse`]); [`Display`](fmt::Display) gives the
/// original string back, so messages name the location as it was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Location {
    /// A local file or directory.
    Local(PathBuf),
    /// An `http://` or `https://` URL.
    Http(String),
    /// An object-store URL (`s3://`, `gs://`, `az://`, `abfs://`).
    Store(StoreUrl),
}

/// An object-store URL: scheme, bucket (or container) and key (the object or prefix path).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreUrl {
    url: String,
    scheme: String,
    bucket: String,
    key: String,
}

impl StoreUrl {
    /// The scheme (`s3`, `gs`, `az` or `abfs`).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The bucket (or container).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The object key or prefix inside the bucket, as given (empty for the bucket itself).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The whole URL, as given.
    pub fn as_str(&self) -> &str {
        &self.url
    }
}

impl Location {
    /// Reads what a user typed: `http://…` and `https://…` are [`Location::Http`], `s3://…`,
    /// `gs://…`, `az://…` and `abfs://…` are [`Location::Store`], anything else is a local path.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("http://") || s.starts_with("https://") {
            return Location::Http(s.to_owned());
        }
        if let Some((scheme, rest)) = s.split_once("://")
            && STORE_SCHEMES.contains(&scheme)
        {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            return Location::Store(StoreUrl {
                url: s.to_owned(),
                scheme: scheme.to_owned(),
                bucket: bucket.to_owned(),
                key: key.to_owned(),
            });
        }
        Location::Local(PathBuf::from(s))
    }

    /// A path argument as a location: a path that spells a URL is parsed as one (command lines
    /// hand every argument over as a path); a path that is not UTF-8 is local.
    pub fn from_path(path: &Path) -> Location {
        match path.to_str() {
            Some(s) => Location::parse(s),
            None => Location::Local(path.to_path_buf()),
        }
    }

    /// The local path, for [`Location::Local`].
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            _ => None,
        }
    }

    /// True for a location read over the network.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Location::Local(_))
    }

    /// The location as the file name of an [`xlens_xplane::Location`] (errors name it so).
    pub(crate) fn as_file(&self) -> PathBuf {
        match self {
            Location::Local(path) => path.clone(),
            other => PathBuf::from(other.to_string()),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Http(url) => f.write_str(url),
            Location::Store(url) => f.write_str(&url.url),
        }
    }
}

impl FromStr for Location {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Location, Self::Err> {
        Ok(Location::parse(s))
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::from_path(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::from_path(path)
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::from_path(&path)
    }
}

impl From<&str> for Location {
    fn from(s: &str) -> Location {
        Location::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_back() {
        for s in
            ["runs/2026_01_01", "/abs/h.xplane.pb", "http://s/run/", "https://s/h.xplane.pb", "s3://b", "gs://b/k/"]
        {
            assert_eq!(Location::parse(s).to_string(), s);
        }
        let Location::Store(url) = Location::parse("s3://bucket/logs/run/") else { panic!("a store URL") };
        assert_eq!((url.scheme(), url.bucket(), url.key()), ("s3", "bucket", "logs/run/"));
        assert_eq!(Location::parse("ftp://x"), Location::Local(PathBuf::from("ftp://x")));
        assert!(Location::parse("http://x").is_remote());
    }
}
