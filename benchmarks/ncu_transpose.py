"""Run each transpose ladder kernel once on 8192x8192 fp32 (after one warm-up call), for ncu.

    ncu --clock-control none --metrics \
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
        dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python benchmarks/ncu_transpose.py

Kernel names in the report: transpose_naive_row_kernel, transpose_naive_col_kernel,
transpose_smem_kernel, transpose_padded_kernel, transpose_final_kernel (twice: ladder 'final' and
cudasteps.transpose). Each is profiled twice (warm-up, then the measured call); read the second.
"""

import cudasteps
import torch


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((8192, 8192), generator=g, device="cuda")
    for variant in cudasteps.ladder.variants("transpose"):
        cudasteps.ladder.run("transpose", variant, x)  # warm-up
        cudasteps.ladder.run("transpose", variant, x)
    cudasteps.transpose(x)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
