//! Build script of the trainbench package: embeds libtorch's rpath in `trainbench-engine` and the tests when
//! feature `tch` is on (link arguments of a dependency's build script do not reach its dependants; the
//! `trainbench` front binary links no backend and gets none; nor does any binary when `TRAINBENCH_NO_RPATH=1`, as
//! for scripts/gpu_bundle.sh), and records the git commit as
//! `TRAINBENCH_GIT_COMMIT` (`unknown` outside a git checkout) for the environment manifest.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    // Exported by crates/trainbench-backend-tch/build.rs (links = "trainbench_backend_tch"); present only with feature `tch`.
    if let Ok(lib) = std::env::var("DEP_TRAINBENCH_BACKEND_TCH_LIBTORCH_LIB") {
        let rpath = std::env::var("TRAINBENCH_NO_RPATH").as_deref() != Ok("1");
        let mut args = if rpath { vec![format!("-Wl,-rpath,{lib}")] } else { Vec::new() };
        if std::env::var("DEP_TRAINBENCH_BACKEND_TCH_TORCH_CUDA").as_deref() == Ok("1") {
            // Keep libtorch_cuda loaded (its initialisers register CUDA) despite --as-needed.
            args.push("-Wl,--no-as-needed,-ltorch_cuda,--as-needed".into());
        }
        // The NCCL engine's object needs the CUDA runtime's directory too (present when it was built).
        if let Ok(cuda) = std::env::var("DEP_TRAINBENCH_BACKEND_TCH_CUDA_LIB") {
            args.push(format!("-Wl,-rpath,{cuda}"));
        }
        for arg in &args {
            println!("cargo:rustc-link-arg-bin=trainbench-engine={arg}");
            println!("cargo:rustc-link-arg-tests={arg}");
        }
    }
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TRAINBENCH_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TRAINBENCH_NO_RPATH");
    // Re-run when HEAD moves: HEAD itself and the branch ref it points to (paths work in worktrees too).
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
