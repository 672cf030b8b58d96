"""Run the shared-memory SGEMM ladder steps and every multistage config once on 2048^3 fp32 (after
one warm-up call), for ncu's shared-memory counters.

    ncu --clock-control none --metrics \
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
        l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
        smsp__sass_inst_executed_op_shared_ld.sum \
        python benchmarks/ncu_gemm.py

The multistage kernel (sgemm_multistage_kernel) is designed for one wavefront per LDS.128 (ld
wavefronts == ld instructions, no ld bank conflicts). Its configs are built for row-major A and B
alone (other layouts are copied into it first), so they run NN. Each launch is profiled twice
(warm-up, then the measured call); read the second.
"""

import torch
from cudasteps import gemm as G


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 2048
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, generator=g, device="cuda")
    b = torch.randn(n, n, generator=g, device="cuda")
    steps = G.LADDER[G.LADDER.index("warptile") :]
    for variant in steps:
        G.run_ladder(variant, a, b)  # warm-up
        G.run_ladder(variant, a, b)
    for config in G.MULTISTAGE_CONFIGS:
        G.run_ladder(f"cfg:{config}", a, b)
        G.run_ladder(f"cfg:{config}", a, b)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
