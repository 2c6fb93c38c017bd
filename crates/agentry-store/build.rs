//! Rebuild when a migration is added or changed: `sqlx::migrate!` embeds the files at compile
//! time, and cargo does not otherwise know it reads them.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
