//! The launcher of a bundle built by scripts/gpu_bundle.sh (`scripts/bundle_run.sh`, copied in as `run.sh`):
//! it starts the engine with the machine's PyTorch libraries first on `LD_LIBRARY_PATH` only when that PyTorch is
//! the exact build recorded in `bundle.env`, and otherwise refuses with exit 2 before anything loads libtorch.
//! The PyTorch here is a stand-in package (`torch/version.py` and library folders) and the engine a shell script
//! that prints what it was given, so the test needs python3 and bash but no PyTorch of any version.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GIT: &str = "70d99e998b4955e0049d13a98d77ae1b14db1f45";

/// A bundle (`run.sh`, `bundle.env`, a stand-in engine) and a site-packages with a stand-in torch, in a fresh
/// folder of the temporary directory.
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str, torch_version: &str, torch_git: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("trainbench-bundle-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bundle = dir.join("bundle");
        let site = dir.join("site");
        for d in [bundle.clone(), site.join("torch/lib"), site.join("nvidia/cu13/lib"), site.join("nvidia/nccl/lib")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bundle_run.sh");
        std::fs::copy(script, bundle.join("run.sh")).unwrap();
        std::fs::write(
            bundle.join("bundle.env"),
            format!(
                "BUNDLE_TORCH_VERSION=2.11.0+cu130\nBUNDLE_TORCH_GIT={GIT}\nBUNDLE_TORCH_CUDA=13.0\nBUNDLE_TCH=0.24.0\n\
                 BUNDLE_COMMIT=abc\nBUNDLE_DIRTY_FILES=0\nBUNDLE_BUILT=2026-12-01T12:00:00Z\nBUNDLE_BUILD_S=1\n"
            ),
        )
        .unwrap();
        std::fs::write(
            bundle.join("trainbench-engine"),
            "#!/bin/sh\necho \"engine LD_LIBRARY_PATH=$LD_LIBRARY_PATH\"\necho \"engine args $*\"\n",
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(bundle.join("trainbench-engine")).status().unwrap();
        std::fs::write(site.join("torch/__init__.py"), "raise ImportError('the launcher must not import torch')\n")
            .unwrap();
        std::fs::write(
            site.join("torch/version.py"),
            format!("__version__ = '{torch_version}'\ncuda = '13.0'\ngit_version = '{torch_git}'\n"),
        )
        .unwrap();
        Self { dir }
    }

    fn run(&self, python: &str, args: &[&str]) -> Output {
        Command::new("bash")
            .arg(self.dir.join("bundle/run.sh"))
            .args(args)
            .env("TRAINBENCH_PYTHON", python)
            .env("PYTHONPATH", self.dir.join("site"))
            .env("LD_LIBRARY_PATH", "/before")
            .output()
            .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_recorded_build_starts_the_engine_with_its_libraries_first() {
    let f = Fixture::new("match", "2.11.0+cu130", GIT);
    let out = f.run("python3", &["devices", "--format", "json"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let site = f.dir.join("site");
    let want = format!(
        "engine LD_LIBRARY_PATH={}:{}:{}:/before",
        site.join("torch/lib").display(),
        site.join("nvidia/cu13/lib").display(),
        site.join("nvidia/nccl/lib").display()
    );
    assert!(stdout.contains(&want), "{stdout}");
    assert!(stdout.contains("engine args devices --format json"), "{stdout}");

    let info = f.run("python3", &["--bundle-info"]);
    let stdout = text(&info.stdout);
    assert_eq!(info.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("bundle: PyTorch 2.11.0+cu130") && stdout.contains("here:   PyTorch 2.11.0+cu130"),
        "{stdout}"
    );
    assert!(!stdout.contains("engine args"), "{stdout}");
}

#[test]
fn another_pytorch_build_is_refused_with_exit_2_before_the_engine_starts() {
    for (name, version, git) in [("version", "2.13.0+cu130", GIT), ("git", "2.11.0+cu130", "0123456789abcdef")] {
        let f = Fixture::new(name, version, git);
        let out = f.run("python3", &["devices"]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{name}: {stdout}{stderr}");
        assert!(!stdout.contains("engine"), "{name}: {stdout}");
        assert!(stderr.contains("built against PyTorch 2.11.0+cu130") && stderr.contains(version), "{name}: {stderr}");
        assert!(stderr.contains("will not start"), "{name}: {stderr}");
    }
}

#[test]
fn no_python_with_torch_is_refused_with_exit_2() {
    let f = Fixture::new("nopython", "2.11.0+cu130", GIT);
    let out = f.run("/nonexistent/python3", &["devices"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot find PyTorch through /nonexistent/python3"), "{stderr}");
    assert!(stderr.contains("needs PyTorch 2.11.0+cu130"), "{stderr}");
}
