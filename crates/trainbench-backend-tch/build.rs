//! Build script of trainbench-backend-tch: compiles the C++ shim against the libtorch torch-sys linked, and embeds an
//! rpath to libtorch's directory so binaries, tests and examples run without LD_LIBRARY_PATH (none when
//! `TRAINBENCH_NO_RPATH=1`: scripts/gpu_bundle.sh's binaries find the libraries of the machine they run on).
//!
//! It re-exports the libtorch directory as `DEP_TRAINBENCH_BACKEND_TCH_LIBTORCH_LIB` (this package declares
//! `links = "trainbench_backend_tch"`) so the root crate's build script can embed the same rpath in `trainbench`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.cpp");
    println!("cargo:rerun-if-changed=shim/diff_op.cpp");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    println!("cargo:rerun-if-env-changed=TRAINBENCH_NO_RPATH");
    let rpath = env::var("TRAINBENCH_NO_RPATH").as_deref() != Ok("1");
    // torch-sys (links = "tch") publishes its library directory to direct dependants' build scripts.
    let Some(lib) = env::var_os("DEP_TCH_LIBTORCH_LIB").map(PathBuf::from) else {
        panic!("torch-sys did not report its libtorch directory (DEP_TCH_LIBTORCH_LIB); see README: build setup");
    };
    let root = lib.parent().unwrap_or(&lib).to_path_buf();
    let includes = [root.join("include"), root.join("include/torch/csrc/api/include")];
    let abi = env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_string());

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .includes(&includes)
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .file("shim/shim.cpp")
        .file("shim/diff_op.cpp");
    build.compile("trainbench_tch_shim");
    // dlopen/dlsym for the CUDA driver queries (part of libc since glibc 2.34, libdl before).
    println!("cargo:rustc-link-lib=dl");
    let has_torch_cuda = lib.join("libtorch_cuda.so").exists();
    println!("cargo::rustc-check-cfg=cfg(trainbench_nccl)");
    let cuda_lib = if has_torch_cuda { compile_nccl(&lib, &includes, &abi) } else { None };

    let lib_s = lib.display();
    // Binaries, tests and examples of this package find libtorch (and, through libtorch's own RPATH, the
    // CUDA libraries of the wheel) without LD_LIBRARY_PATH.
    if rpath {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_s}");
    }
    if has_torch_cuda {
        // Keep libtorch_cuda loaded even though Rust code references none of its symbols: its static
        // initialisers register the CUDA backend (rustc links with --as-needed by default).
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
    println!("cargo:libtorch_lib={lib_s}");
    println!("cargo:torch_cuda={}", u8::from(has_torch_cuda));
    println!("cargo:rustc-env=TRAINBENCH_TCH_LIBTORCH_LIB={lib_s}");
    println!("cargo:rustc-env=TRAINBENCH_TCH_TCH_VERSION={}", tch_requirement());
    if let Some(cuda_lib) = cuda_lib {
        // The NCCL engine's object calls the CUDA runtime directly (inline c10 code): binaries find it here.
        if rpath {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", cuda_lib.display());
            println!("cargo:cuda_lib={}", cuda_lib.display());
        }
    }
}

/// The tch release this package asks for (`tch = "0.26"` in its manifest; scripts/gpu_bundle.sh swaps it for a
/// build against another PyTorch), recorded in results beside the libtorch version.
fn tch_requirement() -> String {
    let manifest = std::path::Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("tch = \"").and_then(|r| r.split('"').next()))
        .unwrap_or("unknown")
        .to_string()
}

/// Where the wheel keeps the headers and libraries the NCCL engine needs, beside libtorch (`torch/lib` ->
/// `site-packages/nvidia/...`), if every one is there.
struct CudaTree {
    includes: Vec<PathBuf>,
    lib: PathBuf,
}

fn cuda_tree(torch_lib: &std::path::Path) -> Result<CudaTree, String> {
    let site = torch_lib.parent().and_then(|t| t.parent()).ok_or("libtorch is not inside a Python site-packages")?;
    let cu = site.join("nvidia/cu13");
    let needed = [
        (cu.join("include/cuda_runtime_api.h"), "the CUDA runtime headers (nvidia-cuda-runtime)"),
        (cu.join("include/crt/host_config.h"), "the CUDA CRT headers (nvidia-cuda-crt, see scripts/env.sh)"),
        (cu.join("include/cccl/cuda/std/version"), "the CCCL headers (nvidia-cuda-cccl, see scripts/env.sh)"),
        (site.join("nvidia/nccl/include/nccl.h"), "nccl.h (nvidia-nccl-cu13)"),
        (cu.join("lib/libcudart.so.13"), "libcudart.so.13 (nvidia-cuda-runtime)"),
    ];
    for (path, what) in &needed {
        if !path.exists() {
            return Err(format!("{what} not found at {}", path.display()));
        }
    }
    Ok(CudaTree {
        includes: vec![cu.join("include"), cu.join("include/cccl"), site.join("nvidia/nccl/include")],
        lib: cu.join("lib"),
    })
}

/// Compile shim/nccl.cpp (c10d's ProcessGroupNCCL) when the CUDA libtorch's headers are all here, and tell Rust
/// through `cfg(trainbench_nccl)`; otherwise say why in the build log and leave the cfg off (the engine then
/// refuses to open, naming the reason). Returns the CUDA runtime's directory, which binaries need in their rpath.
fn compile_nccl(torch_lib: &std::path::Path, includes: &[PathBuf], abi: &str) -> Option<PathBuf> {
    println!("cargo:rerun-if-changed=shim/nccl.cpp");
    let tree = match cuda_tree(torch_lib) {
        Ok(t) => t,
        Err(why) => {
            // Installing the missing headers (scripts/env.sh) re-runs this script.
            if let Some(site) = torch_lib.parent().and_then(|t| t.parent()) {
                let cu = site.join("nvidia/cu13/include");
                println!("cargo:rerun-if-changed={}", if cu.exists() { cu } else { site.join("nvidia") }.display());
            }
            println!("cargo:warning=the NCCL engine is not built: {why}");
            println!("cargo:rustc-env=TRAINBENCH_TCH_NCCL_MISSING={why}");
            return None;
        }
    };
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .includes(includes)
        .includes(&tree.includes)
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .define("USE_C10D_NCCL", None)
        .file("shim/nccl.cpp")
        .compile("trainbench_tch_nccl");
    println!("cargo:rustc-link-search=native={}", tree.lib.display());
    println!("cargo:rustc-link-search=native={}", torch_lib.display());
    println!("cargo:rustc-link-lib=dylib=c10_cuda");
    println!("cargo:rustc-link-lib=dylib:+verbatim=libcudart.so.13");
    println!("cargo:rustc-cfg=trainbench_nccl");
    Some(tree.lib)
}
