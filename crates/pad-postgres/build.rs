// `sqlx::migrate!` embeds the migrations at compile time; without this, a
// migration added after the last build would not be embedded until
// something else made the crate rebuild.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
