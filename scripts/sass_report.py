"""Summarise `cuobjdump --dump-sass` output per kernel: 16-byte global accesses, local-memory use.

    python scripts/sass_report.py sass.txt

For each kernel: counts of LDG.E.128 / STG.E.128 (16-byte global loads / stores), all LDG/STG,
LDGSTS (cp.async: global -> shared without registers, the multistage kernels' loads), LDS.128,
LDL/STL (local memory: a spilled or dynamically indexed register array), and the matrix
instructions: HMMA (mma.sync) and HGMMA (Hopper wgmma). Kernels with local-memory accesses are
flagged. The multistage SGEMM (sgemm_multistage_kernel) should show LDGSTS and LDS.128, and no
LDL/STL.
"""

import re
import subprocess
import sys
from collections import OrderedDict

# Column -> the SASS opcodes it counts (modifiers such as .E, .EF or .CONSTANT may sit between
# the opcode and the width).
PATTERNS = {
    "LDG.128": re.compile(r"\bLDG\.E\.[A-Z.]*128\b|\bLDG\.E\.128\b"),
    "STG.128": re.compile(r"\bSTG\.E\.[A-Z.]*128\b|\bSTG\.E\.128\b"),
    "LDG": re.compile(r"\bLDG\b|\bLDG\."),
    "STG": re.compile(r"\bSTG\b|\bSTG\."),
    "LDGSTS": re.compile(r"\bLDGSTS\b|\bLDGSTS\."),
    "LDS.128": re.compile(r"\bLDS\.128\b|\bLDS\.[A-Z.]*128\b"),
    "LDL/STL": re.compile(r"\b(LDL|STL)\b|\b(LDL|STL)\."),
    "HMMA": re.compile(r"\bHMMA\."),
    "HGMMA": re.compile(r"\bHGMMA\."),
}


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        return out.splitlines()
    except OSError:
        return names


def main(path):
    kernels = OrderedDict()
    current = None
    for line in open(path, errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = m.group(1)
            kernels[current] = dict.fromkeys(PATTERNS, 0)
            continue
        if current is None:
            continue
        for column, pattern in PATTERNS.items():
            if pattern.search(line):
                kernels[current][column] += 1
    names = demangle(list(kernels))
    print(
        f"{'LDG.128':>7} {'STG.128':>7} {'LDG':>5} {'STG':>5} {'LDGSTS':>6} {'LDS.128':>7} {'LDL/STL':>7} "
        f"{'HMMA':>5} {'HGMMA':>5}  kernel"
    )
    for k, name in zip(kernels.values(), names):
        flag = "  <-- local memory" if k["LDL/STL"] else ""
        short = re.sub(r"\(.*", "", name.replace("(anonymous namespace)::", ""))[:110]
        print(
            f"{k['LDG.128']:>7} {k['STG.128']:>7} {k['LDG']:>5} {k['STG']:>5} {k['LDGSTS']:>6} "
            f"{k['LDS.128']:>7} {k['LDL/STL']:>7} {k['HMMA']:>5} {k['HGMMA']:>5}  {short}{flag}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
