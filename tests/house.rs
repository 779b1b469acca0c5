//! The house has no import circles (docs/STYLE.md, issue "One owner per rule"): inside each
//! crate, no top-level module imports another that imports it back, directly or through
//! others. Read from the sources (`crate::name` paths outside comments and test modules), so a
//! new circle fails here with the modules and the names that tie it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules are checked (source roots, from the workspace root).
const CRATES: &[&str] = &[
    "transport/src",
    "srv6/src",
    "sim/src",
    "nic/src",
    "dpdk-bindings/src",
    "apps/src",
    "coll/src",
    "capi/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`qp` for `qp/conn.rs`), none for the crate root
/// and binaries.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_string())
}

/// The modules `source` names as `crate::name`, outside comments and `#[cfg(test)]` code.
fn imports(source: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `use crate::{a, b}` names several.
            if name.is_empty() && tail.starts_with('{') {
                let group = tail[1..].split('}').next().unwrap_or("");
                for part in group.split(',') {
                    let n = part.trim().split("::").next().unwrap_or("").trim();
                    if !n.is_empty() {
                        out.insert(n.to_string());
                    }
                }
            } else if !name.is_empty() {
                out.insert(name);
            }
            rest = tail;
        }
    }
    out
}

/// A circle through `start`, if any (depth-first search over `edges`).
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut c = path[i..].to_vec();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

fn module_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(root, &file) else {
            continue;
        };
        let source = std::fs::read_to_string(&file).expect("a source file");
        let targets = edges.entry(module.clone()).or_default();
        targets.extend(imports(&source).into_iter().filter(|t| *t != module));
    }
    edges
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut circles = Vec::new();
    for krate in CRATES {
        let root = workspace.join(krate);
        let edges = module_graph(&root);
        assert!(edges.len() >= 2, "{krate}: no modules read");
        if let Some(c) = circle(&edges) {
            circles.push(format!("{krate}: {}", c.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn the_reader_finds_a_circle_and_the_names_behind_it() {
    let a =
        imports("use crate::b::X;\nuse crate::{c, d::Y};\n// crate::e\nfn f() { crate::g::h() }");
    let names: Vec<&str> = a.iter().map(String::as_str).collect();
    assert_eq!(names, ["b", "c", "d", "g"]);
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circle(&edges).map(|c| c.len()), Some(4));
    edges.get_mut("c").map(BTreeSet::clear);
    assert_eq!(circle(&edges), None);
}
