//! The MPI engine's all-to-all with uneven counts (MPI_Alltoallv), over the world and over a group split from
//! it: the test starts itself under `mpirun` with 3 ranks, each rank checking what it received.
#![allow(clippy::unwrap_used)]

use trainbench_comm::Communicator;
use trainbench_transport_mpi::MpiComm;

/// Rank `s` sends `(s + 1) x (r + 1)` values of `100 s + r` to rank `r`; checks what this rank received.
fn exchange(comm: &mut dyn Communicator) {
    let (me, n) = (comm.rank(), comm.size());
    let send_counts: Vec<usize> = (0..n).map(|r| (me + 1) * (r + 1)).collect();
    let recv_counts: Vec<usize> = (0..n).map(|s| (s + 1) * (me + 1)).collect();
    let send: Vec<f32> = (0..n).flat_map(|r| std::iter::repeat_n((100 * me + r) as f32, send_counts[r])).collect();
    let mut recv = vec![0f32; recv_counts.iter().sum()];
    comm.all_to_all(&send, &send_counts, &mut recv, &recv_counts).unwrap();
    let expected: Vec<f32> =
        (0..n).flat_map(|s| std::iter::repeat_n((100 * s + me) as f32, (s + 1) * (me + 1))).collect();
    assert_eq!(recv, expected, "rank {me} of {n}");
    // Counts that do not fit the buffers are refused before MPI sees them.
    let e = comm.all_to_all(&send, &send_counts[..n - 1], &mut recv, &recv_counts).unwrap_err();
    assert!(e.message.contains("send counts"), "{e}");
}

#[test]
fn all_to_all_with_uneven_counts_over_mpi() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some() {
        let mut world = MpiComm::init().unwrap();
        exchange(&mut world);
        // A group of the even ranks and one of the odd ones.
        let me = world.rank();
        let mut group = world.split(me % 2, me).unwrap();
        exchange(group.as_mut());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("mpirun")
        .args(["-n", "3", "--oversubscribe", "--bind-to", "none", "--allow-run-as-root"])
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .arg(exe)
        .args(["--exact", "all_to_all_with_uneven_counts_over_mpi", "--test-threads", "1"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("1 passed").count(), 3, "every rank ran the exchange: {text}");
}
