//! What the launcher that started this process says about it ([`LauncherEnv`]): torchrun's, Slurm's, Open MPI's
//! and MPICH's variables (world size, rank, local rank, ranks on this machine), trainbench's own launcher's mark,
//! and NCCL's rendezvous address. Read from the environment once per process, in [`LauncherEnv::get`]; nothing
//! else in trainbench reads a launcher variable.

use std::sync::OnceLock;

/// The launcher variables that carry a world size, in the order they are trusted, with who sets each.
const WORLD_SIZE_VARIABLES: &[(&str, &str)] = &[
    ("WORLD_SIZE", "torchrun"),
    ("SLURM_NTASKS", "srun"),
    ("OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"),
    ("PMI_SIZE", "mpiexec (MPICH)"),
];

/// The launcher variables that carry this process's rank, in the same order.
const RANK_VARIABLES: &[&str] = &["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];

/// The launcher variables that carry this process's rank among the ranks on its machine.
const LOCAL_RANK_VARIABLES: &[&str] = &["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"];

/// The launcher variables that say how many ranks run on this machine, in the order they are trusted.
const LOCAL_SIZE_VARIABLES: &[&str] =
    &["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"];

/// Set by trainbench's own launcher on the ranks it starts (the NCCL path), naming it as the launcher.
pub const OWN_LAUNCHER_VARIABLE: &str = "TRAINBENCH_LAUNCHER";

/// What this process's launcher told it, read once ([`LauncherEnv::get`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LauncherEnv {
    /// Who started this process as a rank, and the world size it promised (the first variable of
    /// torchrun, Slurm, Open MPI, MPICH that holds a number).
    pub world: Option<(&'static str, usize)>,
    /// This process's rank as its launcher numbered it.
    pub rank: Option<usize>,
    /// This process's rank among those on its machine (0 without a launcher).
    pub local_rank: usize,
    /// How many ranks run on this machine, when the launcher says (a count of 0 is taken as unknown).
    pub local_size: Option<usize>,
    /// trainbench's own launcher started this rank (the NCCL path of `trainbench run`).
    pub own_launcher: bool,
    /// NCCL's rendezvous: `MASTER_ADDR` and `MASTER_PORT` as set (neither empty).
    pub master: (Option<String>, Option<String>),
}

impl LauncherEnv {
    /// This process's launcher, read from the environment the first time it is asked for.
    pub fn get() -> &'static LauncherEnv {
        static READ: OnceLock<LauncherEnv> = OnceLock::new();
        READ.get_or_init(|| LauncherEnv::from_vars(|name| std::env::var(name).ok()))
    }

    /// The launcher described by `var` (a variable's value by name; `None` when unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> LauncherEnv {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
        let text = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        LauncherEnv {
            world: WORLD_SIZE_VARIABLES.iter().find_map(|(name, who)| number(name).map(|n| (*who, n))),
            rank: RANK_VARIABLES.iter().find_map(|name| number(name)),
            local_rank: LOCAL_RANK_VARIABLES.iter().find_map(|name| number(name)).unwrap_or(0),
            local_size: LOCAL_SIZE_VARIABLES.iter().find_map(|name| number(name)).filter(|&n| n > 0),
            own_launcher: text(OWN_LAUNCHER_VARIABLE).is_some(),
            master: (text("MASTER_ADDR"), text("MASTER_PORT")),
        }
    }

    /// An external launcher started this process as one of several ranks: who, and how many.
    pub fn external_ranks(&self) -> Option<(&'static str, usize)> {
        self.world.filter(|(_, n)| *n > 1)
    }

    /// This process is a rank other than 0 of a group of several (rank 0 writes and prints results).
    pub fn is_secondary_rank(&self) -> bool {
        self.external_ranks().is_some() && self.rank.is_some_and(|r| r != 0)
    }

    /// Who started this rank, as results record it: trainbench's own launcher when it did, else the launcher
    /// the variables name, else `fallback`.
    pub fn launcher_name(&self, fallback: &'static str) -> &'static str {
        match (self.own_launcher, self.world) {
            (true, _) => "trainbench run",
            (false, Some((who, _))) => who,
            (false, None) => fallback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> LauncherEnv {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LauncherEnv::from_vars(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn no_launcher_is_one_process() {
        let e = env(&[]);
        assert_eq!(e, LauncherEnv::default());
        assert_eq!((e.external_ranks(), e.is_secondary_rank(), e.launcher_name("unknown")), (None, false, "unknown"));
    }

    #[test]
    fn the_first_variable_that_holds_a_number_wins() {
        let e = env(&[("WORLD_SIZE", "x"), ("SLURM_NTASKS", " 4 "), ("OMPI_COMM_WORLD_SIZE", "2"), ("PMI_RANK", "3")]);
        assert_eq!(e.world, Some(("srun", 4)));
        assert_eq!(e.rank, Some(3));
        assert!(e.is_secondary_rank());
        assert_eq!(e.launcher_name("unknown"), "srun");
        let e = env(&[("WORLD_SIZE", "1"), ("RANK", "1")]);
        assert_eq!((e.external_ranks(), e.is_secondary_rank()), (None, false), "a world of one is no group");
    }

    #[test]
    fn local_counts_own_launcher_and_rendezvous() {
        let e = env(&[
            ("LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "0"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("TRAINBENCH_LAUNCHER", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", " "),
        ]);
        assert_eq!(e.local_rank, 1);
        assert_eq!(e.local_size, None, "the first count found decides, and 0 means unknown");
        assert_eq!(e.launcher_name("unknown"), "trainbench run");
        assert_eq!(e.master, (Some("127.0.0.1".into()), None));
    }
}
