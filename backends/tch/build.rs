//! Build script of trainbench-tch: compiles the C++ shim against the libtorch torch-sys linked, and embeds an
//! rpath to libtorch's directory so binaries, tests and examples run without LD_LIBRARY_PATH.
//!
//! It re-exports the libtorch directory as `DEP_TRAINBENCH_TCH_LIBTORCH_LIB` (this package declares
//! `links = "trainbench_tch"`) so the root crate's build script can embed the same rpath in `trainbench`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.cpp");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
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
        .file("shim/shim.cpp");
    build.compile("trainbench_tch_shim");
    // dlopen/dlsym for the CUDA driver queries (part of libc since glibc 2.34, libdl before).
    println!("cargo:rustc-link-lib=dl");
    let has_torch_cuda = lib.join("libtorch_cuda.so").exists();

    let lib_s = lib.display();
    // Binaries, tests and examples of this package find libtorch (and, through libtorch's own RPATH, the
    // CUDA libraries of the wheel) without LD_LIBRARY_PATH.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_s}");
    if has_torch_cuda {
        // Keep libtorch_cuda loaded even though Rust code references none of its symbols: its static
        // initialisers register the CUDA backend (rustc links with --as-needed by default).
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
    println!("cargo:libtorch_lib={lib_s}");
    println!("cargo:torch_cuda={}", u8::from(has_torch_cuda));
    println!("cargo:rustc-env=TRAINBENCH_TCH_LIBTORCH_LIB={lib_s}");
}
