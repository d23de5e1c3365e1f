//! The workspace's files as a graph: file -> file for each path one names in another, resolved
//! to the file of the deepest module the path names (`x.rs` or `x/mod.rs`; a name defined or
//! re-exported in a `mod.rs` points at that `mod.rs`). Code under `#[cfg(test)]` is left out,
//! as `farm-studio look` leaves it out, and so is `mod x;` (a declaration, not an import).
//! Checked against `farm-studio look --around FILE` on every file: the same arrows.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::rust_source::{self, PathRef};

/// One source file: where it is, which crate and module it is, its code without tests.
pub struct SourceFile {
    /// The path from the root, with `/`.
    pub path: String,
    krate: usize,
    module: Vec<String>,
    /// The names `use` brings in that are modules: alias -> (crate, module path).
    aliases: BTreeMap<String, (usize, Vec<String>)>,
    refs: Vec<PathRef>,
}

/// A crate of the workspace: the name other crates call it by and its modules' files.
struct Crate {
    name: String,
    modules: BTreeMap<Vec<String>, usize>,
}

/// One path in `from` that resolves to a module in `to` (a file index each).
#[derive(Debug, Clone)]
pub struct Import {
    pub from: usize,
    pub to: usize,
    /// The name taken from `to` (the segment after the module), or the module's own name.
    pub name: String,
    pub line: usize,
    /// The path as written, `::`-joined.
    pub written: String,
}

pub struct Graph {
    pub files: Vec<SourceFile>,
    pub imports: Vec<Import>,
}

/// The `.rs` files under `dir`, sorted, as paths relative to `dir`.
pub fn rust_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(
                    p.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    out.sort();
    out
}

/// The crates' source folders, relative to `root`: the root package's `src/` (named by no one)
/// and `crates/NAME/src` (named `NAME`, dashes as underscores).
pub fn crate_sources(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if root.join("src").is_dir() {
        out.push((String::new(), "src".to_string()));
    }
    let mut members: Vec<_> = fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    members.sort_by_key(|e| e.file_name());
    for member in members {
        if member.path().join("src").is_dir() {
            let name = member.file_name().to_string_lossy().replace('-', "_");
            out.push((
                name.clone(),
                format!("crates/{}/src", member.file_name().to_string_lossy()),
            ));
        }
    }
    out
}

/// `a/b.rs` -> `[a, b]`; `a/mod.rs` -> `[a]`; `lib.rs`, `main.rs` -> `[]`.
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod")
        || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main"))
    {
        parts.pop();
    }
    parts
}

impl Graph {
    pub fn read(root: &Path) -> Graph {
        let (mut files, mut crates) = (Vec::new(), Vec::new());
        for (krate, (name, src)) in crate_sources(root).into_iter().enumerate() {
            let sources: Vec<(String, String)> = rust_files(&root.join(&src))
                .into_iter()
                .map(|relative| {
                    let text =
                        fs::read_to_string(root.join(&src).join(&relative)).unwrap_or_default();
                    (relative, rust_source::without_comments_and_strings(&text))
                })
                .collect();
            let test_only: Vec<Vec<String>> = sources
                .iter()
                .flat_map(|(relative, code)| {
                    let module = module_of(relative);
                    rust_source::test_module_files(code)
                        .into_iter()
                        .map(move |name| [module.clone(), vec![name]].concat())
                })
                .collect();
            let mut modules = BTreeMap::new();
            for (relative, code) in sources {
                let module = module_of(&relative);
                modules.insert(module.clone(), files.len());
                // A file that only tests compile (`#[cfg(test)] mod tests;`) imports nothing.
                let tested = test_only.iter().any(|t| module.starts_with(t));
                let code = rust_source::without_test_modules(&code);
                let refs = if tested {
                    Vec::new()
                } else {
                    rust_source::paths(&code)
                };
                files.push(SourceFile {
                    path: format!("{src}/{relative}"),
                    krate,
                    module,
                    aliases: BTreeMap::new(),
                    refs,
                });
            }
            crates.push(Crate { name, modules });
        }
        let mut graph = Graph {
            files,
            imports: Vec::new(),
        };
        // Two rounds: a crate root's aliases (`use transformer::{corpus, ...}` in main.rs) are
        // what every other file of that crate reaches through `crate::corpus`.
        for _ in 0..2 {
            for f in 0..graph.files.len() {
                let aliases = graph.module_aliases(&crates, f);
                graph.files[f].aliases = aliases;
            }
        }
        for f in 0..graph.files.len() {
            for r in &graph.files[f].refs {
                if let Some((to, name)) = graph.resolve(&crates, f, r) {
                    if to != f {
                        graph.imports.push(Import {
                            from: f,
                            to,
                            name,
                            line: r.line,
                            written: r.segments.join("::"),
                        });
                    }
                }
            }
        }
        graph
    }

    /// The names that file `f`'s `use` statements bring in which are modules.
    fn module_aliases(&self, crates: &[Crate], f: usize) -> BTreeMap<String, (usize, Vec<String>)> {
        let mut out = BTreeMap::new();
        for r in self.files[f].refs.iter().filter(|r| r.in_use) {
            let (Some(alias), Some((krate, path))) = (&r.alias, self.absolute(crates, f, r)) else {
                continue;
            };
            if crates[krate].modules.contains_key(&path) {
                out.insert(alias.clone(), (krate, path));
            }
        }
        out
    }

    /// `segments` as written in file `f`, as (crate, path from that crate's root).
    fn absolute(&self, crates: &[Crate], f: usize, r: &PathRef) -> Option<(usize, Vec<String>)> {
        let file = &self.files[f];
        let (segments, module) = (
            &r.segments,
            [file.module.clone(), r.within.clone()].concat(),
        );
        let first = segments.first()?.as_str();
        let supers = segments.iter().take_while(|s| *s == "super").count();
        let (krate, base, rest) = match first {
            "crate" => (file.krate, vec![], &segments[1..]),
            "self" => (file.krate, module.clone(), &segments[1..]),
            "super" if supers <= module.len() => (
                file.krate,
                module[..module.len() - supers].to_vec(),
                &segments[supers..],
            ),
            _ if file.aliases.contains_key(first) => {
                let (krate, path) = file.aliases[first].clone();
                (krate, path, &segments[1..])
            }
            _ if crates[file.krate]
                .modules
                .contains_key(&[module.clone(), vec![first.to_string()]].concat()) =>
            {
                (file.krate, module.clone(), &segments[..])
            }
            _ => {
                let krate = crates
                    .iter()
                    .position(|c| !c.name.is_empty() && c.name == first)?;
                (krate, vec![], &segments[1..])
            }
        };
        // `crate::corpus` in a crate whose root re-exports another crate's `corpus`.
        if base.is_empty() && krate == file.krate && !rest.is_empty() {
            let root = *crates[krate].modules.get(&Vec::new())?;
            if root != f {
                if let Some((other, path)) = self.files[root].aliases.get(&rest[0]) {
                    return Some((*other, [path.clone(), rest[1..].to_vec()].concat()));
                }
            }
        }
        Some((krate, [base, rest.to_vec()].concat()))
    }

    /// The file of the deepest module that `segments` names, and the name taken from it.
    fn resolve(&self, crates: &[Crate], f: usize, r: &PathRef) -> Option<(usize, String)> {
        let (krate, path) = self.absolute(crates, f, r)?;
        let depth = (0..=path.len())
            .rev()
            .find(|&n| crates[krate].modules.contains_key(&path[..n]))?;
        let to = crates[krate].modules[&path[..depth]];
        let name = path
            .get(depth)
            .or(path.last())
            .cloned()
            .unwrap_or_else(|| crates[krate].name.clone());
        Some((to, name))
    }

    /// Whether `a` and `b` are a module and one of its own submodules (in either order): a
    /// `mod.rs` that re-exports its children (`pub use child::X`) while they take names from it
    /// (`super::Y`) is how a Rust module is built, and `farm-studio look` counts no circle there.
    fn nested(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.files[a], &self.files[b]);
        a.krate == b.krate && (a.module.starts_with(&b.module) || b.module.starts_with(&a.module))
    }

    /// The files that import each other in a loop: each strongly connected component of two or
    /// more files (Tarjan's algorithm), as sorted file indices. Imports between a module and
    /// its own submodules are not followed (see `nested`).
    pub fn circles(&self) -> Vec<Vec<usize>> {
        let mut next: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); self.files.len()];
        for i in self.imports.iter().filter(|i| !self.nested(i.from, i.to)) {
            next[i.from].insert(i.to);
        }
        let mut t = Tarjan {
            next: &next,
            index: vec![None; next.len()],
            low: vec![0; next.len()],
            ..Tarjan::default()
        };
        for v in 0..next.len() {
            if t.index[v].is_none() {
                t.visit(v);
            }
        }
        let mut out: Vec<Vec<usize>> = t.components.into_iter().filter(|c| c.len() > 1).collect();
        for c in &mut out {
            c.sort_by(|a, b| self.files[*a].path.cmp(&self.files[*b].path));
        }
        out.sort_by(|a, b| self.files[a[0]].path.cmp(&self.files[b[0]].path));
        out
    }

    /// For `from -> to`: the names `from` takes from `to`, and the lines that take them (none
    /// between a module and its submodule, which no circle follows).
    pub fn ties(&self, from: usize, to: usize) -> (BTreeSet<String>, BTreeSet<usize>) {
        let ties = self
            .imports
            .iter()
            .filter(|i| i.from == from && i.to == to && !self.nested(from, to));
        ties.fold(
            (BTreeSet::new(), BTreeSet::new()),
            |(mut names, mut lines), i| {
                names.insert(i.name.clone());
                lines.insert(i.line);
                (names, lines)
            },
        )
    }
}

#[derive(Default)]
struct Tarjan<'a> {
    next: &'a [BTreeSet<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: BTreeSet<usize>,
    counter: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on_stack.insert(v);
        for &w in self.next[v].iter() {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack.contains(&w) => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(&w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}
