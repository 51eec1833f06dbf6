//! The crate's own shape, and fixture trees that break each rule once: a
//! check that cannot fail is no check.

use super::*;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A fixture tree: each `(path, text)` written below a new `src/`.
pub(super) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// A `lib.rs` declaring every layered module, so that a fixture breaks only
/// the rule it is about.
fn full_lib() -> String {
    LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .map(|m| format!("pub mod {m};\n"))
        .collect()
}

#[test]
fn the_crate_keeps_its_layers_and_has_no_circle() {
    let found = problems(&src()).unwrap();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn imports_against_the_layers_are_caught_wherever_they_hide() {
    let lib = full_lib();
    let dir = tree(&[
        ("lib.rs", &lib),
        (
            "probe/remote.rs",
            "//! Reads `crate::agent` (only a comment).\nuse crate::cli::PlanError;\nlet url = \"http://x crate::engine\"; // crate::engine\n",
        ),
        ("util.rs", "use crate::{units, plan::{Level, Sweep}};\n"),
        // A top-level module's `super::` is the crate's root.
        ("error.rs", "use super::store::Store;\n"),
        // A module that is both `NAME.rs` and `NAME/`: both are read.
        ("measure.rs", "mod extra;\n"),
        ("measure/extra.rs", "fn f() { crate::engine::run(); }\n"),
        // Tests may drive the crate from the top; the same call outside
        // them may not.
        (
            "probe/drive.rs",
            "#[cfg(test)]\nmod tests {\n    fn t() { crate::commands::main_with_args([]); }\n}\nfn f() { crate::report::x(); }\n",
        ),
    ]);
    assert_eq!(
        problems(dir.path()).unwrap(),
        [
            "src/error.rs imports crate::store",
            "src/measure/extra.rs imports crate::engine",
            "src/probe/drive.rs imports crate::report",
            "src/probe/remote.rs imports crate::cli",
            "src/util.rs imports crate::plan",
            "src/util.rs imports crate::units",
        ]
    );
}

#[test]
fn a_module_off_the_layers_is_caught() {
    let lib = full_lib().replace("pub mod kube;\n", "") + "pub(crate) mod extra;\n";
    let dir = tree(&[("lib.rs", &lib)]);
    assert_eq!(
        problems(dir.path()).unwrap(),
        [
            "src/lib.rs declares module extra, which is on no layer of LAYERS",
            "LAYERS lists kube, which src/lib.rs does not declare",
        ]
    );
}

#[test]
fn a_circle_through_a_re_export_across_folders_is_caught() {
    let lib = full_lib();
    let dir = tree(&[
        ("lib.rs", &lib),
        ("probe/mod.rs", "pub mod cgroup;\npub mod counters;\n"),
        (
            "probe/counters/mod.rs",
            "mod sample;\npub use sample::CgroupSample;\nuse crate::probe::cgroup::CgroupCounters;\n",
        ),
        (
            "probe/counters/sample.rs",
            "pub struct CgroupSample { limit: crate::probe::cgroup::IoLimit }\n",
        ),
        (
            "probe/cgroup.rs",
            "use crate::probe::counters::CgroupSample;\npub struct CgroupCounters;\npub struct IoLimit;\n",
        ),
    ]);
    assert_eq!(
        problems(dir.path()).unwrap(),
        [
            "circle: src/probe/cgroup.rs -> src/probe/counters/sample.rs: CgroupSample; \
          src/probe/counters/sample.rs -> src/probe/cgroup.rs: IoLimit"
        ]
    );
}

#[test]
fn siblings_in_a_circle_are_caught_and_a_child_may_use_its_parent() {
    let lib = full_lib();
    let dir = tree(&[
        ("lib.rs", &lib),
        // The parent names its children; they use what it defines.
        (
            "engine/mod.rs",
            "mod closed;\nmod open;\nmod state;\nmod worker;\npub use worker::run;\npub trait Session {}\n",
        ),
        ("engine/worker.rs", "use super::{closed, open, Session};\npub fn run() {}\n"),
        ("engine/closed.rs", "use super::state::State;\n"),
        ("engine/open.rs", "use super::worker::run;\n"),
        ("engine/state.rs", "pub struct State;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
    ]);
    assert_eq!(
        problems(dir.path()).unwrap(),
        ["circle: src/engine/open.rs -> src/engine/worker.rs: run; \
          src/engine/worker.rs -> src/engine/open.rs: open"]
    );
}

#[test]
fn a_tree_that_cannot_be_read_is_an_error_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    assert!(problems(&dir.path().join("missing")).is_err());
    assert!(problems(dir.path()).is_err(), "an empty tree");
    let lib = full_lib();
    let dir = tree(&[("lib.rs", &lib), ("units.rs", "")]);
    std::fs::write(dir.path().join("util.rs"), [0xff, 0xfe, 0x00]).unwrap();
    let err = problems(dir.path()).unwrap_err();
    assert!(err.contains("util.rs"), "{err}");
}

/// docs/ARCHITECTURE.md names every folder of `src/` at any depth and
/// every top-level file, names no path that does not exist, and every
/// path of the crate it names is defined (`code_map.rs`; its own tests
/// plant each violation in a fixture).
#[test]
fn the_architecture_page_matches_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let found = super::code_map::problems(root, &doc).unwrap();
    assert!(
        found.is_empty(),
        "docs/ARCHITECTURE.md:\n{}",
        found.join("\n")
    );
}

/// The managed kinds' schemes, from their one list.
fn kinds() -> Vec<(&'static str, &'static str)> {
    crate::sut::managed::KINDS
        .iter()
        .map(|k| (k.scheme, k.knob))
        .collect()
}

#[test]
fn no_managed_kind_is_named_outside_its_own_file() {
    let found = super::kinds::kind_literals(&src(), &kinds()).unwrap();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_kind_named_by_another_file_is_caught_and_tests_and_comments_are_not() {
    let dir = tree(&[
        ("sut/managed/nginx/mod.rs", "const SCHEME: &'static str = \"nginx:managed\";\nlet x = \"nginx:managed\";\n"),
        ("sut/managed/nginx/conf.rs", "let f = \"--nginx-set\";\n"),
        ("sut/managed/pg.rs", "const SCHEME: &'static str = \"postgres:managed\";\nlet f = \"--pg-set\";\n"),
        ("workload/web.rs", "// Runs on nginx:managed.\nconst T: &str = \"nginx:managed\";\nlet f = \"--nginx-listen\";\n#[cfg(test)]\nmod tests {\n    const U: &str = \"nginx:managed\";\n}\n"),
        ("workload/tests.rs", "const V: &str = \"postgres:managed\";\n"),
        ("lab/plan.rs", "let e = format!(\"use --target {} --pg-cpus 0\", \"postgres:managed\");\n"),
    ]);
    assert_eq!(
        super::kinds::kind_literals(
            dir.path(),
            &[("postgres:managed", "pg"), ("nginx:managed", "nginx")]
        )
        .unwrap(),
        [
            "src/lab/plan.rs:1 names --pg-",
            "src/lab/plan.rs:1 names postgres:managed",
            "src/workload/web.rs:2 names nginx:managed",
            "src/workload/web.rs:3 names --nginx-",
        ]
    );
}
