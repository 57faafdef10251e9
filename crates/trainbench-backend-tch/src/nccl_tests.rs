//! The NCCL engine without a GPU or without the engine built: clear refusals, never a crash.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;

fn at(rank: usize, world: usize, device: usize) -> Rendezvous {
    Rendezvous {
        master_addr: "127.0.0.1".into(),
        master_port: 29500,
        rank,
        world,
        device,
        timeout: Duration::from_secs(5),
    }
}

#[test]
fn opening_without_a_gpu_or_the_engine_is_a_clear_error_not_a_crash() {
    if tch::Cuda::device_count() > 0 {
        return; // A GPU machine opens for real (scripts/gpu_check.sh).
    }
    let e = NcclComm::open(&at(0, 1, 0)).err().unwrap();
    assert_eq!(e.engine, "nccl");
    match not_built() {
        Some(why) => assert_eq!(e.message, why),
        None => {
            assert!(e.message.contains("no CUDA device"), "{e}");
            assert!(e.message.contains("mpirun"), "says what to do instead: {e}");
        }
    }
    let why = refusal().unwrap();
    assert!(why.contains("CUDA device") || why.contains("no NCCL engine"), "{why}");
}

#[test]
fn a_rank_outside_the_world_is_refused_before_anything_opens() {
    for (rank, world) in [(1, 1), (0, 0), (5, 2)] {
        let e = NcclComm::open(&at(rank, world, 0)).err().unwrap();
        if not_built().is_none() {
            assert!(e.message.contains("no such rank"), "{e}");
        }
    }
}

#[test]
fn a_cuda_libtorch_with_the_header_wheels_builds_the_engine() {
    // scripts/env.sh sets up PyTorch's CUDA wheel and the header wheels the engine compiles against: with
    // them, build.rs must not have skipped it (it says why in the build log when it does).
    let cuda_libtorch = std::path::Path::new(env!("TRAINBENCH_TCH_LIBTORCH_LIB")).join("libtorch_cuda.so").exists();
    if cuda_libtorch {
        assert_eq!(not_built(), None, "run scripts/env.sh to install the header wheels");
        assert!(version().unwrap().starts_with("NCCL 2."));
    } else {
        assert!(not_built().unwrap().contains("no CUDA"));
    }
}
