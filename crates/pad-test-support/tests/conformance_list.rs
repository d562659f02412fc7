//! The conformance suite is a list kept by hand (`conformance_suite!` in
//! `src/conformance.rs`, ARCHITECTURE.md, "Codemap"): a test written but
//! not listed would run on no backend. This checks that every
//! `pub async fn NAME(store: Arc<dyn Store>)` is listed, and that every
//! listed name is such a function.

use std::collections::BTreeSet;

/// `src/conformance.rs` and the rule groups in `src/conformance/`, as one text.
fn source() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut src = std::fs::read_to_string(dir.join("conformance.rs")).expect("src/conformance.rs");
    let mut groups: Vec<_> = std::fs::read_dir(dir.join("conformance"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    groups.sort();
    for g in groups.into_iter().filter(|p| p.extension().is_some_and(|e| e == "rs")) {
        src.push_str(&std::fs::read_to_string(&g).expect("a rule group's file"));
    }
    src
}
const LIST_START: &str = "$crate::conformance_suite!(@each $make;";

/// The names of the suite's tests: public async functions that take the
/// store and nothing else.
fn tests_defined(src: &str) -> BTreeSet<&str> {
    src.split("pub async fn ")
        .skip(1)
        .filter_map(|rest| {
            let (name, after) = rest.split_once('(')?;
            let params: String = after.split_once('{')?.0.chars().filter(|c| !c.is_whitespace()).collect();
            let params = params.trim_end_matches(')').trim_end_matches(',');
            (params == "store:Arc<dynStore>").then_some(name.trim())
        })
        .collect()
}

/// The names `conformance_suite!` runs.
fn tests_listed(src: &str) -> BTreeSet<&str> {
    let (_, list) = src.split_once(LIST_START).expect("conformance_suite! lists its tests after `@each $make;`");
    let (list, _) = list.split_once(");").expect("the list ends with `);`");
    list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect()
}

/// What differs between the two, in words; empty when they agree.
fn differences(src: &str) -> Vec<String> {
    let (defined, listed) = (tests_defined(src), tests_listed(src));
    let mut out: Vec<String> = defined
        .difference(&listed)
        .map(|n| format!("{n} is not in conformance_suite!, so no backend runs it"))
        .collect();
    out.extend(
        listed
            .difference(&defined)
            .map(|n| format!("{n} is listed but is no `pub async fn {n}(store: Arc<dyn Store>)`")),
    );
    out
}

#[test]
fn every_conformance_test_is_listed_and_every_listed_name_is_a_test() {
    let source = source();
    assert!(tests_defined(&source).len() > 50, "the parser found too few tests: {:?}", tests_defined(&source));
    let wrong = differences(&source);
    assert!(wrong.is_empty(), "src/conformance.rs:\n{}", wrong.join("\n"));
}

/// The check itself: a test left out of the list, and a listed name with
/// no test, are both reported.
#[test]
fn an_unlisted_test_and_a_stray_name_are_reported() {
    let src = "
        macro_rules! conformance_suite {
            ($make:expr) => {
                $crate::conformance_suite!(@each $make;
                    listed,
                    gone
                );
            };
        }
        pub async fn listed(store: Arc<dyn Store>) {}
        pub async fn forgotten(
            store: Arc<dyn Store>,
        ) {}
        pub async fn helper(&self, title: &str) -> Item {}
    ";
    assert_eq!(tests_defined(src), BTreeSet::from(["listed", "forgotten"]));
    assert_eq!(
        differences(src),
        [
            "forgotten is not in conformance_suite!, so no backend runs it",
            "gone is listed but is no `pub async fn gone(store: Arc<dyn Store>)`",
        ]
    );
}
