//! The book in `docs/` builds, and nothing in it points nowhere. `hack/docs.sh` builds it with the
//! pinned mdbook into a temporary directory; then every relative link of every page must reach a
//! page of the book (and its `#fragment` an id on that page) or a file of the repository, the
//! README's links into the book must too, every repository path the book or the README names
//! (`examples/…`, `hack/…`, …) must exist, and every chapter under `docs/src` must be listed in
//! `SUMMARY.md`. mdBook itself does not fail on a broken link. And the book keeps up with the
//! code: every long flag of every `aigw` command, and every spec field of every kind, is in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use regex::Regex;

/// The book's sources, relative to the repository root.
const SRC: &str = "docs/src";

/// Top-level folders whose paths the book names as files to open or run.
const REPO_DIRS: &str = "examples|hack|tests|src|charts|crds|integrations|docs";

static HREF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"<a\s[^>]*?href="([^"]*)""#).expect("href pattern"));
static ID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"\sid="([^"]*)""#).expect("id pattern"));
static MD_LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\]\(([^)\s]+)\)").expect("markdown link pattern"));
static REPO_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:^|[^A-Za-z0-9_./-])((?:{REPO_DIRS})/[A-Za-z0-9_./-]*)([^A-Za-z0-9_./-]|$)"
    ))
    .expect("repository path pattern")
});

#[test]
fn the_book_builds_and_every_link_and_path_in_it_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("temp dir");
    let status = Command::new("bash")
        .arg(root.join("hack/docs.sh"))
        .arg("--dest-dir")
        .arg(out.path())
        .status()
        .expect("run hack/docs.sh");
    assert!(status.success(), "hack/docs.sh failed: {status}");

    let book = Book::read(out.path());
    assert!(
        book.pages.len() > 20,
        "the book has {} pages",
        book.pages.len()
    );
    let mut problems = book.broken_links(root);
    problems.extend(readme_links(root, &book));
    problems.extend(missing_repo_paths(root));
    problems.extend(chapters_outside_summary(root));
    assert!(
        problems.is_empty(),
        "{} broken references in the book:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every kind page's examples (its YAML blocks of `aigw.io` resources) pass `aigw validate`, the
/// offline check of the CRDs' schemas and rules: an example that a rule the offline check cannot
/// evaluate refuses (Kubernetes' `isSorted()` once did so for every ConfigRollout) fails here.
#[test]
fn every_kind_page_example_passes_aigw_validate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = markdown_under(&root.join(SRC).join("kinds"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut examples = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let blocks = text.split("```yaml\n").skip(1);
        let yaml = blocks.filter_map(|block| block.split("\n```").next());
        for (n, example) in yaml
            .filter(|y| y.contains("apiVersion: aigw.io/"))
            .enumerate()
        {
            let name = format!("{}-{n}.yaml", page.file_stem().unwrap().to_string_lossy());
            write(&dir.path().join(&name), example);
            examples.push(name);
        }
    }
    assert!(examples.len() >= 15, "examples found: {examples:?}");
    let failed: Vec<String> = examples
        .iter()
        .filter_map(|name| {
            let run = Command::new(env!("CARGO_BIN_EXE_aigw"))
                .args(["validate", "-f"])
                .arg(dir.path().join(name))
                .output()
                .expect("aigw validate runs");
            let said = String::from_utf8_lossy(&run.stdout) + String::from_utf8_lossy(&run.stderr);
            (!run.status.success()).then(|| format!("{name}: {said}"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "examples aigw validate refuses:\n{}",
        failed.join("\n")
    );
}

/// Every long flag of every `aigw` command (as `aigw … --help` lists them) is named somewhere in
/// the book, and every spec field of every kind (as `crds/` holds them) on that kind's page, or on
/// the Custom resources overview for the fields every kind shares.
#[test]
fn every_flag_and_spec_field_is_in_the_book() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let book = markdown_under(&root.join(SRC))
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("read chapter"))
        .collect::<Vec<_>>()
        .join("\n");
    let named: BTreeSet<&str> = LONG_FLAG.find_iter(&book).map(|m| m.as_str()).collect();
    let mut problems = Vec::new();
    for (command, flag) in cli_flags(&[]) {
        if !named.contains(flag.as_str()) {
            problems.push(format!(
                "`aigw {command}` has {flag}, which the book never names"
            ));
        }
    }
    let kinds = root.join(SRC).join("kinds");
    let overview = std::fs::read_to_string(kinds.join("README.md")).expect("read kinds overview");
    for (kind, fields) in spec_fields(&root.join("crds")) {
        let page = kinds.join(format!("{}.md", kind.to_lowercase()));
        let Ok(text) = std::fs::read_to_string(&page) else {
            problems.push(format!("kind {kind} has no page {}", relative(root, &page)));
            continue;
        };
        for field in fields {
            let mention = Regex::new(&format!(
                r"[`.]{}(?:[^A-Za-z0-9_]|$)",
                regex::escape(&field)
            ))
            .expect("field pattern");
            if !mention.is_match(&text) && !mention.is_match(&overview) {
                problems.push(format!(
                    "{kind} spec.{field} is on neither {} nor the kinds overview",
                    relative(root, &page)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "undocumented in the book:\n{}",
        problems.join("\n")
    );
}

static LONG_FLAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"--[a-z][a-z0-9-]*").expect("flag pattern"));

/// `(command path, --flag)` for every option of `aigw <path> --help`, walking the subcommands.
fn cli_flags(path: &[String]) -> Vec<(String, String)> {
    let output = Command::new(env!("CARGO_BIN_EXE_aigw"))
        .args(path)
        .arg("--help")
        .output()
        .expect("run aigw --help");
    assert!(output.status.success(), "aigw {path:?} --help failed");
    let help = String::from_utf8(output.stdout).expect("help is UTF-8");
    let option = Regex::new(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)").expect("option pattern");
    let subcommand = Regex::new(r"^  ([a-z][a-z0-9-]*)  ").expect("subcommand pattern");
    let mut flags = Vec::new();
    let mut section = "";
    for line in help.lines() {
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        match section {
            "Options:" => {
                if let Some(flag) = option.captures(line).map(|c| c[1].to_string())
                    && flag != "--help"
                    && flag != "--version"
                {
                    flags.push((path.join(" "), flag));
                }
            }
            "Commands:" => {
                if let Some(name) = subcommand.captures(line).map(|c| c[1].to_string())
                    && name != "help"
                {
                    let mut sub = path.to_vec();
                    sub.push(name);
                    flags.extend(cli_flags(&sub));
                }
            }
            _ => {}
        }
    }
    flags
}

/// Kind → the names of its top-level spec fields, from the generated CRDs.
fn spec_fields(crds: &Path) -> BTreeMap<String, Vec<String>> {
    let mut kinds = BTreeMap::new();
    for path in files_under(crds) {
        // The admission policies that bound the free-form fields live beside the CRDs.
        if path.ends_with(aigw::resources::ADMISSION_POLICIES_FILE) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read CRD");
        let crd: serde_yaml::Value = serde_yaml::from_str(&text).expect("parse CRD");
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .expect("kind")
            .to_string();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let fields = spec["properties"]
            .as_mapping()
            .expect("spec properties")
            .keys()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        kinds.insert(kind, fields);
    }
    kinds
}

/// The checker finds what it is for: a link to a missing page, a missing anchor, a link out of
/// the book to a missing repository file, and a README link to a missing anchor.
#[test]
fn broken_links_anchors_and_paths_are_reported() {
    let root = tempfile::tempdir().expect("temp dir");
    let root = root.path();
    let out = root.join("docs/book");
    write(
        &out.join("index.html"),
        r##"<main><h1 id="aigw">aigw</h1>
        <a href="kinds/config.html#status">ok</a> <a href="#aigw">ok</a>
        <a href="https://kube.rs">external</a> <a href="../../examples/config.yaml">ok</a>
        <a href="kinds/missing.html">missing page</a> <a href="kinds/config.html#nope">missing id</a>
        <a href="../../examples/gone.yaml">missing file</a></main>"##,
    );
    write(
        &out.join("kinds/config.html"),
        r#"<main><h1 id="config">Config</h1><h2 id="status">Status</h2></main>"#,
    );
    write(&root.join("examples/config.yaml"), "kind: Config\n");
    write(&root.join("docs/src/kinds/config.md"), "# Config\n");
    write(
        &root.join("README.md"),
        "[a](docs/src/kinds/config.md#status) [b](docs/src/kinds/config.md#gone) \
         [c](docs/src/kinds/other.md) [d](#local)\n",
    );

    let book = Book::read(&out);
    let mut problems = book.broken_links(root);
    problems.extend(readme_links(root, &book));
    let expected = [
        "index.html: kinds/missing.html: no such page or file in the book",
        "index.html: kinds/config.html#nope: no id \"nope\" on kinds/config.html",
        "index.html: ../../examples/gone.yaml: examples/gone.yaml does not exist",
        "README.md: docs/src/kinds/config.md#gone: no id \"gone\" on kinds/config.html",
        "README.md: docs/src/kinds/other.md: does not exist",
    ];
    assert_eq!(problems, expected, "what the checker reported");
}

#[test]
fn repository_paths_are_found_in_text() {
    let found = |text: &str| -> Vec<String> {
        REPO_PATH
            .captures_iter(text)
            .filter_map(|c| named_path(&c))
            .collect()
    };
    assert_eq!(
        found("see `examples/config.yaml`, then hack/demo.sh."),
        ["examples/config.yaml", "hack/demo.sh"]
    );
    assert_eq!(
        found("`integrations/argocd/aigw.io/<Kind>/health.lua` and /ai_gw/v2/configs"),
        Vec::<String>::new(),
        "a path with a placeholder is a pattern, and an API path is not a repository path"
    );
    assert_eq!(
        found("kubectl apply -k examples/gitops/overlays/dev"),
        ["examples/gitops/overlays/dev"]
    );
}

/// The rendered book: every page's ids and the links in its text.
struct Book {
    root: PathBuf,
    /// Output path (`kinds/config.html`) → page.
    pages: BTreeMap<String, Page>,
}

struct Page {
    ids: BTreeSet<String>,
    links: Vec<String>,
}

impl Book {
    fn read(root: &Path) -> Self {
        let mut pages = BTreeMap::new();
        for path in files_under(root) {
            let rel = relative(root, &path);
            // print.html repeats every chapter; 404.html and toc.html are mdBook's own.
            if !rel.ends_with(".html")
                || ["print.html", "404.html", "toc.html"].contains(&rel.as_str())
            {
                continue;
            }
            let html = std::fs::read_to_string(&path).expect("read page");
            let ids = ID.captures_iter(&html).map(|c| c[1].to_string()).collect();
            // The page's text only: the navigation around it is generated from SUMMARY.md.
            let text = match (html.find("<main>"), html.rfind("</main>")) {
                (Some(start), Some(end)) if start < end => &html[start..end],
                _ => html.as_str(),
            };
            let links = HREF
                .captures_iter(text)
                .map(|c| c[1].replace("&amp;", "&"))
                .collect();
            pages.insert(rel, Page { ids, links });
        }
        Book {
            root: root.to_path_buf(),
            pages,
        }
    }

    /// One line per link of a page that reaches nothing.
    fn broken_links(&self, repo: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, page) in &self.pages {
            for link in &page.links {
                if is_external(link) {
                    continue;
                }
                if let Err(problem) = self.resolve(repo, name, link) {
                    problems.push(format!("{name}: {link}: {problem}"));
                }
            }
        }
        problems
    }

    /// Checks `link` as written on page `from`: a page (and id) of the book, a file the book
    /// copied, or, for a link that leaves the book, a file of the repository (the book's output
    /// and its sources lie at the same depth, so such a link reads the same from either).
    fn resolve(&self, repo: &Path, from: &str, link: &str) -> Result<(), String> {
        let (path, fragment) = match link.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (link, None),
        };
        let dir = Path::new(from).parent().unwrap_or(Path::new(""));
        let target = if path.is_empty() {
            Some(PathBuf::from(from))
        } else {
            normalize(&dir.join(path))
        };
        let Some(mut target) = target else {
            let outside = normalize(&Path::new(SRC).join(dir).join(path))
                .ok_or_else(|| "leaves the repository".to_string())?;
            return if repo.join(&outside).exists() {
                Ok(())
            } else {
                Err(format!("{} does not exist", outside.display()))
            };
        };
        if path.ends_with('/') || self.root.join(&target).is_dir() {
            target.push("index.html");
        }
        let target = target.to_string_lossy().replace('\\', "/");
        match (self.pages.get(&target), fragment) {
            (Some(page), Some(id)) if !id.is_empty() && !page.ids.contains(id) => {
                Err(format!("no id {id:?} on {target}"))
            }
            (Some(_), _) => Ok(()),
            (None, _) if self.root.join(&target).is_file() => Ok(()),
            (None, _) => Err("no such page or file in the book".to_string()),
        }
    }

    /// The page a source file under `docs/src` becomes: `kinds/README.md` → `kinds/index.html`.
    fn page_of(&self, source: &str) -> Option<&Page> {
        let html = match source.strip_suffix("README.md") {
            Some(dir) => format!("{dir}index.html"),
            None => format!("{}.html", source.strip_suffix(".md")?),
        };
        self.pages.get(&html)
    }
}

/// The README's relative links: each file must exist, and a `#fragment` into a chapter must be
/// an id of that chapter's page.
fn readme_links(repo: &Path, book: &Book) -> Vec<String> {
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("read README.md");
    let mut problems = Vec::new();
    for capture in MD_LINK.captures_iter(&readme) {
        let link = &capture[1];
        if is_external(link) || link.starts_with('#') {
            continue;
        }
        let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
        if !repo.join(path).exists() {
            problems.push(format!("README.md: {link}: does not exist"));
            continue;
        }
        // SUMMARY.md is the book's table of contents, not a page of it.
        let Some(chapter) = path
            .strip_prefix(&format!("{SRC}/"))
            .filter(|chapter| *chapter != "SUMMARY.md")
        else {
            continue;
        };
        match book.page_of(chapter) {
            None => problems.push(format!("README.md: {link}: not a page of the book")),
            Some(page) if !fragment.is_empty() && !page.ids.contains(fragment) => {
                let html = chapter
                    .replace("README.md", "index.html")
                    .replace(".md", ".html");
                problems.push(format!("README.md: {link}: no id {fragment:?} on {html}"));
            }
            Some(_) => {}
        }
    }
    problems
}

/// Repository paths named anywhere in the book's sources or the README, code blocks included,
/// that do not exist (unless git ignores them: `docs/book/` is built, not committed).
fn missing_repo_paths(repo: &Path) -> Vec<String> {
    let mut sources = markdown_under(&repo.join(SRC));
    sources.push(repo.join("README.md"));
    let mut problems = Vec::new();
    for source in sources {
        let text = std::fs::read_to_string(&source).expect("read markdown");
        let names: BTreeSet<String> = REPO_PATH
            .captures_iter(&text)
            .filter_map(|c| named_path(&c))
            .collect();
        for name in names {
            if !repo.join(&name).exists() && !git_ignores(repo, &name) {
                let file = relative(repo, &source);
                problems.push(format!("{file}: names {name}, which does not exist"));
            }
        }
    }
    problems
}

/// The path a [`REPO_PATH`] match names, without sentence punctuation; none for a pattern with
/// a placeholder (`aigw.io/<Kind>/health.lua`, `report-{N}.json`, `*.yaml`).
fn named_path(capture: &regex::Captures<'_>) -> Option<String> {
    let after = capture.get(2).map_or("", |m| m.as_str());
    if matches!(after, "<" | "{" | "*" | "$") {
        return None;
    }
    let path = capture[1].trim_end_matches(['.', ',']);
    Some(path.to_string())
}

/// Every `.md` under `docs/src` is a chapter of SUMMARY.md: mdBook renders only those.
fn chapters_outside_summary(repo: &Path) -> Vec<String> {
    let src = repo.join(SRC);
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("read SUMMARY.md");
    let listed: BTreeSet<&str> = MD_LINK
        .captures_iter(&summary)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .collect();
    files_under(&src)
        .iter()
        .map(|path| relative(&src, path))
        .filter(|rel| rel.ends_with(".md") && rel != "SUMMARY.md" && !listed.contains(rel.as_str()))
        .map(|rel| format!("{SRC}/{rel}: not listed in {SRC}/SUMMARY.md, so never built"))
        .collect()
}

fn git_ignores(repo: &Path, path: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["check-ignore", "-q", "--no-index", path])
        .status()
        .is_ok_and(|s| s.success())
}

fn is_external(link: &str) -> bool {
    link.starts_with("//")
        || link.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        })
}

/// `a/b/../c` → `a/c`; none when the path climbs above its start.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .expect("under root")
        .to_string_lossy()
        .replace('\\', "/")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}
