//! What the kernel knows of its CPUs (arch/x86 `cpuinfo_x86`,
//! `cpu_to_node`), set when the machine is built.

pub struct CpuInfo {
    /// The NUMA node of every CPU (`cpu_to_node`).
    pub nodes: Vec<usize>,
    /// The CPUs have `clzero` (`string.clzero`): a clear plan may store with it.
    pub clzero: bool,
    /// The cores' issue width.
    pub issue_width: u64,
}

impl Default for CpuInfo {
    fn default() -> CpuInfo {
        CpuInfo {
            nodes: Vec::new(),
            clzero: false,
            issue_width: 1,
        }
    }
}
