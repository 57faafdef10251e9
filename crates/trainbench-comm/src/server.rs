//! A parameter server's side of the protocol: hold a shard of the weights (whole tensors, balanced by size)
//! and its optimizer state, and every step sum the workers' gradients, apply the mean, and send the shard back.

use std::time::Instant;

use trainbench_graph::graph::Graph;
use trainbench_graph::init::initial_values;
use trainbench_graph::training::OptimizerSpec;

use crate::communicator::{CommError, Communicator};
use crate::layout::Layout;
use crate::optim::HostOptimizer;
use crate::ps::{TAG_PULL, TAG_PUSH};

/// What one server did in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerReport {
    /// Steps served.
    pub steps: u64,
    /// Elements of weights it held.
    pub elements: u64,
    /// Bytes of gradients received from all workers.
    pub bytes_received: u64,
    /// Bytes of weights sent to all workers.
    pub bytes_sent: u64,
    /// Seconds spent applying updates (the rest is waiting and moving data).
    pub update_s: f64,
}

/// Serve until the workers agree to stop. `comm` holds `workers + servers` ranks; this is rank
/// `workers + s`. The shard starts from the same initial values (`seed`) every backend starts from.
pub fn serve(
    comm: &mut dyn Communicator,
    graph: &Graph,
    seed: u64,
    optimizer: &OptimizerSpec,
    servers: usize,
) -> Result<ServerReport, CommError> {
    let servers = servers.max(1);
    let workers = comm.size().saturating_sub(servers);
    let s = comm.rank().checked_sub(workers).filter(|&s| s < servers && workers > 0).ok_or_else(|| CommError {
        engine: comm.engine().name,
        message: format!("rank {} of {} is not a parameter server of this run", comm.rank(), comm.size()),
    })?;
    let layout = Layout::of(graph);
    let owners = layout.shard_owners(servers);
    let shard = layout.shard(&owners, s);
    let mut weights: Vec<f32> = Vec::new();
    for &i in &shard {
        weights.extend(initial_values(&layout.decls[i], seed));
    }
    let n = weights.len();
    let mut opt = HostOptimizer::new(optimizer);
    let mut sum = vec![0.0f32; n];
    let mut buf = vec![0.0f32; n + 2];
    let mut report = ServerReport { elements: n as u64, ..ServerReport::default() };
    loop {
        sum.iter_mut().for_each(|x| *x = 0.0);
        let (mut stop, mut interrupted) = (false, false);
        for w in 0..workers {
            comm.recv(w, TAG_PUSH, &mut buf)?;
            sum.iter_mut().zip(&buf[..n]).for_each(|(a, b)| *a += b);
            stop |= buf[n] > 0.0;
            interrupted |= buf[n + 1] > 0.0;
            report.bytes_received += 4 * n as u64;
        }
        let t = Instant::now();
        let inv = 1.0 / workers as f32;
        sum.iter_mut().for_each(|x| *x *= inv);
        opt.step(&mut weights, &sum);
        report.update_s += t.elapsed().as_secs_f64();
        buf[..n].copy_from_slice(&weights);
        buf[n] = f32::from(u8::from(stop));
        buf[n + 1] = f32::from(u8::from(interrupted));
        for w in 0..workers {
            comm.send(w, TAG_PULL, &buf)?;
            report.bytes_sent += 4 * n as u64;
        }
        report.steps += 1;
        if stop || interrupted {
            return Ok(report);
        }
    }
}
