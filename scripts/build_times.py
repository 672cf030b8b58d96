"""Per-file compile times of the last build, from ninja's logs, so that the next person can see
where a build's time goes.

    python scripts/build_times.py [BUILD_DIR] [--top N]

BUILD_DIR defaults to build/ (setup.py's object directories: build/temp for the portable sources,
build/temp_sm90a for the Hopper room, compiled side by side). Prints each object's compile time,
slowest first, then the wall time from the first compile's start to the last one's end, the sum
of all compile times, and what the sum over the wall time says about parallelism.

ninja records each command's start and end in milliseconds since that ninja run began, and the
output's modification time in nanoseconds since the epoch; the latter puts the runs of the two
ninja files on one clock. Only the newest run of each object counts: the build is timed as it last
happened, a cold build after `make clean`, an incremental one after an edit.
"""

import argparse
import os
import sys


def read_log(path: str) -> dict:
    """{object: (start_s, end_s)} on the epoch clock, the last entry of each object."""
    entries = {}
    with open(path) as f:
        if not f.readline().startswith("# ninja log"):
            raise SystemExit(f"{path}: not a ninja log")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            start_ms, end_ms, mtime, output = int(fields[0]), int(fields[1]), int(fields[2]), fields[3]
            end = mtime / 1e9
            entries[output] = (end - (end_ms - start_ms) / 1000.0, end)
    return entries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--top", type=int, default=0, help="print only the N slowest objects")
    args = parser.parse_args()
    logs = []
    for root, dirs, files in os.walk(args.build_dir):
        # scripts/prebuild.sh's builds against other torch releases (build/prebuild-<version>) are
        # builds of their own, not units of this one.
        dirs[:] = [d for d in dirs if not d.startswith("prebuild-")]
        if ".ninja_log" in files:
            logs.append(os.path.join(root, ".ninja_log"))
    if not logs:
        print(f"no .ninja_log under {args.build_dir}: build first (make build)", file=sys.stderr)
        return 1
    entries = {}
    for log in sorted(logs):
        entries.update(read_log(log))
    rows = sorted(((end - start, obj) for obj, (start, end) in entries.items()), reverse=True)
    base = os.path.abspath(args.build_dir)
    shown = rows[: args.top] if args.top else rows
    print(f"{'seconds':>8}  object")
    for seconds, obj in shown:
        print(f"{seconds:8.1f}  {os.path.relpath(obj, base) if obj.startswith(base) else obj}")
    wall = max(e for _, e in entries.values()) - min(s for s, _ in entries.values())
    total = sum(s for s, _ in rows)
    print(f"\n{len(rows)} objects; compile wall time {wall:.0f} s, sum of compile times {total:.0f} s, "
          f"{total / wall:.1f} compilers busy on average; slowest {rows[0][0]:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
