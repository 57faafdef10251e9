//! Hardware profiles (`hardware/*.toml`): what the performance model (`crate::predict`) knows about a machine,
//! read and validated like specs (schema `schema/hardware.schema.json`, located diagnostics).
//!
//! A profile is named on the command line by a path, or by the name of a profile shipped in `hardware/`
//! (compiled into the binary, so `--hardware v100` works from any folder). The calibrated profile of the
//! machine trainbench runs on is `hardware/this-machine.toml` (written by `trainbench calibrate`), or the file
//! named by the `TRAINBENCH_HARDWARE` environment variable.

pub mod load;
pub mod load_mark;
pub mod wire;

use std::path::{Path, PathBuf};

pub use load::{ProfileValidator, hardware_schema, hardware_schema_text, looks_like_profile};
pub use wire::HardwareFile;

use crate::spec::Diagnostic;

/// The profiles shipped in `hardware/`, by name, as text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("pai-assumed", include_str!("../../hardware/pai-assumed.toml")),
    ("p100", include_str!("../../hardware/p100.toml")),
    ("v100", include_str!("../../hardware/v100.toml")),
    ("a100", include_str!("../../hardware/a100.toml")),
    ("h100", include_str!("../../hardware/h100.toml")),
    ("h200", include_str!("../../hardware/h200.toml")),
];

/// Where the calibrated profile of this machine is looked for when none is named.
pub const THIS_MACHINE: &str = "hardware/this-machine.toml";

/// The environment variable naming this machine's calibrated profile (wins over [`THIS_MACHINE`]).
pub const ENV_VAR: &str = "TRAINBENCH_HARDWARE";

/// A profile and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile.
    pub file: HardwareFile,
    /// A path, or `shipped:<name>`.
    pub origin: String,
}

impl ProfileValidator {
    /// The profile named by `arg`: an existing file, else a shipped profile of that name.
    pub fn resolve(&self, arg: &str) -> Result<Profile, Vec<Diagnostic>> {
        let path = Path::new(arg);
        if path.is_file() {
            let file = self.check_file(path, arg)?;
            return Ok(Profile { file, origin: arg.to_string() });
        }
        match SHIPPED.iter().find(|(name, _)| *name == arg) {
            Some((name, text)) => {
                let file = self.check_bytes(&format!("hardware/{name}.toml"), text.as_bytes())?;
                Ok(Profile { file, origin: format!("shipped:{name}") })
            }
            None => {
                let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
                Err(vec![
                    Diagnostic::error(arg, "no such hardware profile file, nor a shipped profile of this name")
                        .expected(format!("a path to a profile, or one of {}", names.join(", ")))
                        .hint("write one with `trainbench calibrate --out hardware/this-machine.toml`"),
                ])
            }
        }
    }

    /// Every shipped profile, parsed (a shipped profile that does not validate is a bug caught by the tests).
    pub fn shipped(&self) -> Vec<Profile> {
        SHIPPED
            .iter()
            .filter_map(|(name, text)| {
                let file = self.check_bytes(&format!("hardware/{name}.toml"), text.as_bytes()).ok()?;
                Some(Profile { file, origin: format!("shipped:{name}") })
            })
            .collect()
    }

    /// This machine's calibrated profile: `$TRAINBENCH_HARDWARE`, else [`THIS_MACHINE`] under `dir`; `Ok(None)`
    /// when neither exists.
    pub fn this_machine(&self, dir: &Path) -> Result<Option<Profile>, Vec<Diagnostic>> {
        let path = match std::env::var_os(ENV_VAR) {
            Some(p) => PathBuf::from(p),
            None => dir.join(THIS_MACHINE),
        };
        if !path.is_file() {
            return Ok(None);
        }
        let display = path.display().to_string();
        let file = self.check_file(&path, &display)?;
        Ok(Some(Profile { file, origin: display }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "mod_tests.rs"]
mod tests;
