//! The operator console's static files (`assets/`), embedded in the binary with a gzip copy of
//! each, so the console works offline and needs nothing but the server.
//!
//! This crate knows no web framework: `agentry-http` serves [`index`] at `/console` and every
//! view below it (the console routes in the browser), and each [`Asset`] at
//! `/console/assets/<path>`. The console itself talks only to agentry's public HTTP API.

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// Its path under `assets/`, with `/` separators (`console.js`, `views/approvals.js`).
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
    /// The same bytes, gzip-compressed at build time.
    pub gzip: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The file at `path` under `assets/`, if there is one.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// The page every console view is served with (`index.html`): it loads the script, which
/// renders the view the URL names.
pub fn index() -> &'static Asset {
    asset("index.html").expect("assets/index.html is embedded")
}

/// The whole console's weight as a browser downloads it (gzip), in bytes.
pub fn gzipped_size() -> usize {
    ASSETS.iter().map(|a| a.gzip.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_script_are_embedded() {
        assert!(index().content_type.starts_with("text/html"));
        let html = std::str::from_utf8(index().body).unwrap();
        assert!(
            html.contains("/console/assets/"),
            "index.html loads its assets by absolute path"
        );
    }

    #[test]
    fn gzip_copies_decode_to_the_files() {
        for a in ASSETS {
            assert!(!a.gzip.is_empty(), "{}", a.path);
            assert_eq!(&a.gzip[..2], &[0x1f, 0x8b], "{} is gzip", a.path);
        }
    }

    /// The budget: the whole console weighs at most 300 KB gzipped.
    #[test]
    fn the_console_weighs_at_most_300_kb_gzipped() {
        assert!(gzipped_size() <= 300 * 1024, "{} bytes", gzipped_size());
    }
}
