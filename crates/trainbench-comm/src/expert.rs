//! Expert parallelism's groups ([`ExpertGroups`]): the world's ranks split into expert-parallel groups (the
//! ranks that shard one copy of the experts and exchange tokens with all-to-all) and replica groups (the ranks
//! holding the same experts, which sum those experts' gradients), and which experts a rank holds.
//!
//! Expert parallelism runs along the data-parallel dimension: every rank trains on its own slice of the global
//! batch and holds every non-expert weight. An expert-parallel group is `degree` consecutive ranks (rank `r` is
//! member `r % degree` of group `r / degree`), so a group stays inside a machine whenever the degree divides the
//! devices per machine; member `e` holds experts `[e * E / degree, (e + 1) * E / degree)`.

use std::ops::Range;

use crate::communicator::{CommError, Communicator};

/// The communicators of one rank of an expert-parallel run (see the module documentation).
pub struct ExpertGroups {
    /// Ranks per expert-parallel group.
    pub degree: usize,
    /// This rank's expert-parallel group (tokens exchanged with all-to-all).
    pub experts: Box<dyn Communicator>,
    /// The ranks holding the same experts as this one (their gradients summed).
    pub replicas: Box<dyn Communicator>,
    /// Every rank (each expert's count over the global batch, for the capacity and the balance loss).
    pub world: Box<dyn Communicator>,
}

impl ExpertGroups {
    /// Split `world` into expert-parallel groups of `degree` consecutive ranks and replica groups. Every rank of
    /// `world` calls it, in the same order as its other collectives. Refused when `degree` does not divide the
    /// world size.
    pub fn split(world: &mut dyn Communicator, degree: usize) -> Result<ExpertGroups, CommError> {
        let (rank, size) = (world.rank(), world.size());
        if degree == 0 || size % degree != 0 {
            return Err(CommError {
                engine: world.engine().name,
                message: format!("expert_parallel {degree} does not divide the world size {size}"),
            });
        }
        let experts = world.split(rank / degree, rank)?;
        let replicas = world.split(rank % degree, rank)?;
        let whole = world.split(0, rank)?;
        Ok(ExpertGroups { degree, experts, replicas, world: whole })
    }

    /// The experts of `total` member `member` of an expert-parallel group of `degree` holds.
    pub fn held(total: usize, degree: usize, member: usize) -> Range<usize> {
        let per = total / degree.max(1);
        member * per..(member + 1) * per
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::local::ThreadComm;

    #[test]
    fn four_ranks_at_degree_two_form_consecutive_groups_and_strided_replicas() {
        let handles: Vec<_> = ThreadComm::group(4)
            .into_iter()
            .map(|mut world| {
                std::thread::spawn(move || {
                    let me = world.rank();
                    let mut g = ExpertGroups::split(&mut world, 2).unwrap();
                    let (mut group, mut replicas, mut all) = ([0f32; 2], [0f32; 2], [0f32; 4]);
                    g.experts.all_gather(&[me as f32], &mut group).unwrap();
                    g.replicas.all_gather(&[me as f32], &mut replicas).unwrap();
                    g.world.all_gather(&[me as f32], &mut all).unwrap();
                    (me, g.experts.rank(), group, replicas, all)
                })
            })
            .collect();
        for h in handles {
            let (me, member, group, replicas, all) = h.join().unwrap();
            assert_eq!(member, me % 2);
            let first = (me / 2 * 2) as f32;
            assert_eq!(group, [first, first + 1.0], "rank {me}");
            let held = (me % 2) as f32;
            assert_eq!(replicas, [held, held + 2.0], "rank {me}");
            assert_eq!(all, [0.0, 1.0, 2.0, 3.0]);
        }
        assert_eq!(ExpertGroups::held(8, 2, 1), 4..8);
        let mut lone = ThreadComm::group(3).remove(0);
        let e = ExpertGroups::split(&mut lone, 2).err().unwrap();
        assert!(e.message.contains("expert_parallel 2 does not divide the world size 3"), "{e}");
    }
}
