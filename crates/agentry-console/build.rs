//! Embeds every file under `assets/` in the crate: its bytes, a gzip copy made here once, and
//! its content type. Cargo rebuilds when anything under `assets/` changes.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("assets");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut table = String::from("pub static ASSETS: &[Asset] = &[\n");
    for (i, file) in files.iter().enumerate() {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_str()
            .expect("asset paths are UTF-8")
            .replace('\\', "/");
        let bytes = std::fs::read(file).unwrap();
        let gz = out.join(format!("asset-{i}.gz"));
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&bytes).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let content_type = content_type(&rel)
            .unwrap_or_else(|| panic!("assets/{rel}: no content type for this extension"));
        writeln!(
            table,
            "    Asset {{ path: {rel:?}, content_type: {content_type:?}, body: include_bytes!({:?}), gzip: include_bytes!({:?}) }},",
            file.display().to_string(),
            gz.display().to_string()
        )
        .unwrap();
    }
    table.push_str("];\n");
    std::fs::write(out.join("assets.rs"), table).unwrap();
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

fn content_type(path: &str) -> Option<&'static str> {
    Some(match path.rsplit_once('.')?.1 {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => return None,
    })
}
