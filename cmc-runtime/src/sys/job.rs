//! Whether this process is one of the processes of a job a launcher
//! started (`mpirun`, Slurm's `srun`), and which: read by the modules
//! that act differently there (coverage profiles, the stop signals, the
//! search across processes).

/// This process's rank in the job of its launcher (`mpirun`, Slurm's
/// `srun`), if a launcher started it as one of several.
pub(crate) fn job_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}
