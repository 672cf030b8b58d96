"""Turn `ncu --csv --metrics ...` output into a Markdown table (one row per profiled kernel launch).

    python scripts/ncu_table.py ncu_transpose.log "transpose ladder, 8192x8192 fp32" >> results.md

Shared-memory bank conflicts show twice: as ncu's conflict counter and as wavefronts against
instructions (a conflict-free warp access is one wavefront per instruction).
"""

import csv
import re
import sys

COLUMNS = [
    ("smem ld instr", "smsp__sass_inst_executed_op_shared_ld.sum"),
    ("smem ld wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
    ("ld bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    ("smem st instr", "smsp__sass_inst_executed_op_shared_st.sum"),
    ("smem st wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
    ("st bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    ("DRAM % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("time (ns)", "gpu__time_duration.sum"),
]


def main(path, title, name_filter="cudasteps"):
    launches = {}
    for row in csv.reader(open(path, errors="replace")):
        if len(row) < 15 or not row[0].isdigit():
            continue
        name = re.sub(r"\(.*", "", row[4].replace("(anonymous namespace)", "").replace("<unnamed>", ""))
        name = name.replace("void ", "").replace("cudasteps::::", "cudasteps::")
        launches.setdefault((int(row[0]), name), {})[row[12]] = row[14]
    print(f"\n### ncu counters: {title}\n")
    print("| launch | kernel | " + " | ".join(c for c, _ in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for (launch, name), metrics in sorted(launches.items()):
        if name_filter not in name and "transpose" not in name:
            continue
        print(f"| {launch} | `{name}` | " + " | ".join(metrics.get(m, "") for _, m in COLUMNS) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
