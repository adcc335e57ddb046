//! Output paths are checked before a run starts, not after minutes of work: every subcommand
//! that writes files calls [`writable_dir`] or [`writable_file`] first.
//!
//! The check does what the run will do: it creates the directory (as the run would) and writes,
//! then removes, a small probe file in it. Permission bits alone would not do: root ignores them,
//! and a read-only mount or a full disk refuses only the write itself.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Creates `dir` if needed and proves that a file can be written in it. `flag` names the option
/// in the error (`--out`).
pub fn writable_dir(dir: Option<&Path>, flag: &str) -> Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    probe_dir(dir).with_context(|| format!("{flag} {}: not a writable directory", dir.display()))
}

/// Proves that `path` can be written before the run: its directory is created and probed as in
/// [`writable_dir`], and an existing `path` must be a file we may open for writing (it is not
/// truncated here). `flag` names the option in the error (`-o`, `--csv`).
pub fn writable_file(path: Option<&Path>, flag: &str) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let check = || -> Result<()> {
        if path.as_os_str().is_empty() || path.file_name().is_none() {
            bail!("not a file name");
        }
        if path.is_dir() {
            bail!("is a directory");
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        probe_dir(&parent).with_context(|| format!("its directory {}", parent.display()))?;
        if path.exists() {
            OpenOptions::new().write(true).open(path).context("opening the existing file for writing")?;
        }
        Ok(())
    };
    check().with_context(|| format!("{flag} {}: cannot write the output file", path.display()))
}

fn probe_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).context("creating it")?;
    let probe = dir.join(format!(".headroom-write-probe-{}", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"headroom\n").and_then(|_| f.sync_all()));
    let _ = fs::remove_file(&probe);
    written.with_context(|| format!("writing a test file {}", probe.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("headroom-outdir-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_new_nested_directory_is_created_and_left_empty() {
        let d = scratch("ok");
        let out = d.join("a/b");
        writable_dir(Some(&out), "--out").unwrap();
        assert!(out.is_dir());
        assert_eq!(fs::read_dir(&out).unwrap().count(), 0, "the probe file was left behind");
        writable_file(Some(&out.join("x.csv")), "-o").unwrap();
        assert!(!out.join("x.csv").exists(), "the check created the output file");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_path_under_a_file_is_refused_with_the_flag_and_path() {
        let d = scratch("bad");
        let file = d.join("plain");
        fs::write(&file, "x").unwrap();
        let e = format!("{:#}", writable_dir(Some(&file.join("sub")), "--out").unwrap_err());
        assert!(e.contains("--out") && e.contains("plain/sub"), "{e}");
        let e = format!("{:#}", writable_file(Some(&file.join("x.csv")), "--csv").unwrap_err());
        assert!(e.contains("--csv") && e.contains("plain/x.csv"), "{e}");
        let e = format!("{:#}", writable_file(Some(&d), "-o").unwrap_err());
        assert!(e.contains("is a directory"), "{e}");
        assert!(writable_dir(None, "--out").is_ok() && writable_file(None, "-o").is_ok());
        fs::remove_dir_all(&d).unwrap();
    }
}
