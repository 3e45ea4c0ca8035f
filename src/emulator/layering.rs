//! The emulator's files import each other without a cycle, and `common/` (the shared helpers:
//! errors, fields, paging, faults, ids, clock) imports no file outside it: each kind file sits on
//! `common`, and `mod.rs` with `control.rs` sit on the kinds.
//!
//! The graph is read from the source with `syn`: every `use` tree and every path written in a
//! file (`super::state::now()`), resolved from the module the file is (`crate::`, `super::`,
//! `self::`, or a child module named bare), counts as an edge to the file that defines the
//! longest module prefix of that path. Inline modules (`mod tests { … }`) belong to their file.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use syn::visit::Visit;

/// A module path from the crate root, e.g. `["emulator", "common", "errors"]`.
type ModPath = Vec<String>;

/// Every `.rs` file under `dir`, by the module path it defines (`base` for `dir/mod.rs`).
fn modules(dir: &Path, base: &ModPath) -> BTreeMap<ModPath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let mut module = base.clone();
        if path.is_dir() {
            module.push(stem);
            found.extend(modules(&path, &module));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            if stem != "mod" {
                module.push(stem);
            }
            found.insert(module, path);
        }
    }
    found
}

/// The module paths a file names, resolved; `inline` is the stack of inline modules it is in.
struct Names {
    file_module: ModPath,
    inline: Vec<String>,
    named: Vec<ModPath>,
}

impl Names {
    fn here(&self) -> ModPath {
        let mut here = self.file_module.clone();
        here.extend(self.inline.iter().cloned());
        here
    }

    /// The absolute module path of `segments` (`bare` paths are taken as relative to here).
    fn resolve(&mut self, segments: &[String]) {
        let mut path = self.here();
        let mut rest = segments;
        match segments.first().map(String::as_str) {
            Some("crate") => {
                path.clear();
                rest = &segments[1..];
            }
            Some("self") => rest = &segments[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    path.pop();
                    rest = &rest[1..];
                }
            }
            _ => {}
        }
        path.extend(rest.iter().cloned());
        self.named.push(path);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                if name.ident != "self" {
                    full.push(name.ident.to_string());
                }
                self.resolve(&full);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                if rename.ident != "self" {
                    full.push(rename.ident.to_string());
                }
                self.resolve(&full);
            }
            syn::UseTree::Glob(_) => {
                let full = prefix.clone();
                self.resolve(&full);
            }
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        self.inline.push(module.ident.to_string());
        syn::visit::visit_item_mod(self, module);
        self.inline.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.resolve(&segments);
        }
        syn::visit::visit_path(self, path);
    }
}

/// Which files each file imports (by module path), from the source under `dir` (module `base`).
fn import_graph(dir: &Path, base: &ModPath) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let files = modules(dir, base);
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let source = std::fs::read_to_string(path).unwrap();
        let parsed =
            syn::parse_file(&source).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
        let mut names = Names {
            file_module: module.clone(),
            inline: Vec::new(),
            named: Vec::new(),
        };
        names.visit_file(&parsed);
        let mut imports = BTreeSet::new();
        for named in names.named {
            // The file defining the longest prefix of the named path (a path that leaves the
            // tree under `dir` names no file here).
            let target = (base.len()..=named.len())
                .rev()
                .map(|len| named[..len].to_vec())
                .find(|prefix| files.contains_key(prefix));
            if let Some(target) = target.filter(|target| target != module) {
                imports.insert(target);
            }
        }
        graph.insert(module.clone(), imports);
    }
    graph
}

/// One import cycle, as the files around it, if there is one.
fn find_cycle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn walk(
        node: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = stack.iter().position(|n| n == node).unwrap();
                let mut cycle = stack[start..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = walk(next, graph, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| walk(node, graph, &mut marks, &mut Vec::new()))
}

fn show(module: &ModPath) -> String {
    module.join("::")
}

fn emulator_graph() -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/emulator");
    import_graph(&dir, &vec!["emulator".to_owned()])
}

#[test]
fn emulator_files_import_each_other_without_a_cycle() {
    let graph = emulator_graph();
    let module = |path: &str| path.split("::").map(str::to_owned).collect::<ModPath>();
    // The graph is read, not empty: the top module assembles the kinds, a kind sits on common.
    assert!(graph[&module("emulator")].contains(&module("emulator::control")));
    assert!(graph[&module("emulator::configs")].contains(&module("emulator::common::state")));
    if let Some(cycle) = find_cycle(&graph) {
        let shown: Vec<String> = cycle.iter().map(show).collect();
        panic!("import cycle in src/emulator: {}", shown.join(" -> "));
    }
}

#[test]
fn common_imports_no_file_outside_it() {
    let common: ModPath = vec!["emulator".to_owned(), "common".to_owned()];
    let graph = emulator_graph();
    assert!(
        graph.contains_key(&common),
        "src/emulator/common/ is missing"
    );
    let leaks: Vec<String> = graph
        .iter()
        .filter(|(module, _)| module.starts_with(&common))
        .flat_map(|(module, imports)| {
            imports
                .iter()
                .filter(|import| !import.starts_with(&common))
                .map(move |import| format!("{} imports {}", show(module), show(import)))
        })
        .collect();
    assert!(leaks.is_empty(), "common/ must be a leaf: {leaks:#?}");
}

#[test]
fn the_graph_sees_use_trees_inline_paths_and_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("mod.rs", "mod a; mod b; use a::run;");
    write(
        "a.rs",
        "use super::{b::{self, B}}; fn f() { crate::m::b::go(); }",
    );
    write(
        "b.rs",
        "pub struct B; fn g() { super::a::run(); } mod tests { use super::*; }",
    );
    let base = vec!["m".to_owned()];
    let graph = import_graph(dir.path(), &base);
    let module = |name: &str| vec!["m".to_owned(), name.to_owned()];
    assert_eq!(graph[&base], BTreeSet::from([module("a")]));
    assert_eq!(graph[&module("a")], BTreeSet::from([module("b")]));
    assert_eq!(graph[&module("b")], BTreeSet::from([module("a")]));
    let cycle = find_cycle(&graph).expect("a and b import each other");
    assert_eq!(cycle.first(), cycle.last());
    write("b.rs", "pub struct B; mod tests { use super::*; }");
    assert_eq!(find_cycle(&import_graph(dir.path(), &base)), None);
}
