//! Every TOML example in the docs parses: README.md, docs/*.md and the module doc of
//! crates/sim/src/scenario.rs.
//!
//! A fenced block's info string says what it is:
//! - ```` ```toml ```` a whole simulator scenario (`headroom sim run`), parsed and validated;
//! - ```` ```toml,testbed ```` a whole testbed scenario (`headroom testbed run`);
//! - ```` ```toml,fragment ```` part of a file: only its TOML syntax is checked.

use std::path::{Path, PathBuf};

struct Example {
    origin: String,
    info: String,
    text: String,
}

/// The fenced blocks whose info string starts with `toml`, from markdown text.
fn toml_blocks(markdown: &str, file: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let t = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    let info = info.trim();
                    if info == "toml" || info.starts_with("toml,") {
                        open = Some((i + 1, info.to_string(), String::new()));
                    } else if !info.is_empty() || t == "```" {
                        // some other block: skip to its end
                        open = Some((i + 1, String::new(), String::new()));
                    }
                }
            }
            Some((start, info, text)) => {
                if t == "```" {
                    if !info.is_empty() {
                        out.push(Example {
                            origin: format!("{file}:{start}"),
                            info: std::mem::take(info),
                            text: std::mem::take(text),
                        });
                    }
                    open = None;
                } else {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: unclosed code block");
    out
}

/// The module doc (`//!` lines) of a Rust file as markdown.
fn module_doc(src: &str) -> String {
    src.lines()
        .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
        .map(|l| l.strip_prefix("//! ").or_else(|| l.strip_prefix("//!")).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn all_examples() -> Vec<Example> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        out.extend(toml_blocks(&text, &f.strip_prefix(&root).unwrap().display().to_string()));
    }
    let rs = "crates/sim/src/scenario.rs";
    let src = std::fs::read_to_string(root.join(rs)).unwrap();
    out.extend(toml_blocks(&module_doc(&src), rs));
    out
}

#[test]
fn every_toml_example_in_the_docs_parses() {
    let examples = all_examples();
    assert!(
        examples.iter().any(|e| e.origin.starts_with("crates/sim/src/scenario.rs")),
        "the scenario module doc's example was not found"
    );
    let mut failures = Vec::new();
    for e in &examples {
        let r: Result<(), String> = match e.info.as_str() {
            "toml" => headroom_sim::Scenario::parse(&e.text, &e.origin).map(|_| ()).map_err(|x| x.to_string()),
            "toml,testbed" => {
                headroom_testbed::Scenario::parse(&e.text, &e.origin).map(|_| ()).map_err(|x| format!("{x:#}"))
            }
            "toml,fragment" => toml::from_str::<toml::Table>(&e.text).map(|_| ()).map_err(|x| x.to_string()),
            other => Err(format!("unknown info string `{other}` (use toml, toml,testbed or toml,fragment)")),
        };
        if let Err(msg) = r {
            failures.push(format!("{} ({}): {msg}", e.origin, e.info));
        }
    }
    assert!(failures.is_empty(), "TOML examples in the docs that do not parse:\n{}", failures.join("\n"));
}

#[test]
fn the_extractor_finds_blocks_and_skips_other_languages() {
    let md = "text\n```sh\n[not = toml\n```\n```toml\na = 1\n```\n  ```toml,fragment\nb = 2\n  ```\n```\nplain\n```\n";
    let got = toml_blocks(md, "x.md");
    let seen: Vec<(&str, &str, &str)> =
        got.iter().map(|e| (e.origin.as_str(), e.info.as_str(), e.text.as_str())).collect();
    assert_eq!(seen, vec![("x.md:5", "toml", "a = 1\n"), ("x.md:8", "toml,fragment", "b = 2\n")]);
    let doc = module_doc("//! Title\n//!\n//! ```toml\n//! c = 3\n//! ```\n\nuse x;\n//! not doc\n");
    assert_eq!(doc, "Title\n\n```toml\nc = 3\n```\n");
}
