//! Parameter sweeps: run one scenario many times with one key changed (`[sweep]` in the file or
//! `headroom sim sweep --key K --values ...`), e.g. throughput against maximum window (BECC Fig. 2).
//!
//! The key is a dotted path into the scenario: `tcp.max_window` sets `max_window` on every
//! `[[tcp]]` entry; `link.1.queue` sets `queue` on the second `[[link]]` only.

use crate::scenario::{Scenario, ScenarioError};
use crate::world::{Report, World};

/// Returns `src` with `key` set to `value`, as a scenario.
pub fn with_value(src: &str, origin: &str, key: &str, value: &toml::Value) -> Result<Scenario, ScenarioError> {
    let mut doc: toml::Table =
        toml::from_str(src).map_err(|e| ScenarioError(format!("{origin}: {}", e.to_string().trim_end())))?;
    doc.remove("sweep");
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError(format!("sweep key `{key}` is not a dotted path such as tcp.max_window")));
    }
    let mut root = toml::Value::Table(doc);
    set_path(&mut root, &parts, value).map_err(|m| ScenarioError(format!("sweep key `{key}`: {m}")))?;
    let text = toml::to_string(&root).map_err(|e| ScenarioError(format!("sweep: {e}")))?;
    Scenario::parse(&text, &format!("{origin} [{key} = {value}]"))
}

fn set_path(v: &mut toml::Value, parts: &[&str], value: &toml::Value) -> Result<(), String> {
    let Some((head, rest)) = parts.split_first() else {
        *v = value.clone();
        return Ok(());
    };
    match v {
        toml::Value::Table(t) if rest.is_empty() => {
            t.insert(head.to_string(), value.clone());
            Ok(())
        }
        toml::Value::Table(t) => {
            let child = t.get_mut(*head).ok_or_else(|| format!("no `{head}` in the scenario"))?;
            set_path(child, rest, value)
        }
        toml::Value::Array(items) => match head.parse::<usize>() {
            Ok(i) => {
                let n = items.len();
                let item = items.get_mut(i).ok_or_else(|| format!("index {i} out of range ({n} entries)"))?;
                set_path(item, rest, value)
            }
            // A name after an array applies to every entry.
            Err(_) => items.iter_mut().try_for_each(|item| set_path(item, parts, value)),
        },
        _ => Err(format!("`{head}` is inside a plain value")),
    }
}

/// One point of a sweep.
pub struct SweepPoint {
    pub value: toml::Value,
    pub report: Report,
}

/// The sweep's scenarios, one per value, in order: each is the file with `key` set to the value
/// in the parsed TOML document, then deserialized and validated in full (a bad value fails as it
/// would in the file). Callers that change more (an experiment swapping the controller) edit the
/// typed [`Scenario`] they get back.
pub fn scenarios(
    src: &str,
    origin: &str,
    key: &str,
    values: &[toml::Value],
) -> Result<Vec<(toml::Value, Scenario)>, ScenarioError> {
    values.iter().map(|v| Ok((v.clone(), with_value(src, origin, key, v)?))).collect()
}

/// Runs the sweep: one run per value, in order.
pub fn run(
    src: &str,
    origin: &str,
    key: &str,
    values: &[toml::Value],
    seed: Option<u64>,
) -> Result<Vec<SweepPoint>, ScenarioError> {
    let mut out = Vec::new();
    for (value, sc) in scenarios(src, origin, key, values)? {
        let mut w = World::new(&sc, seed).map_err(ScenarioError)?;
        w.run();
        out.push(SweepPoint { value, report: w.report() });
    }
    Ok(out)
}

/// The value as a label (strings without quotes).
pub fn label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
