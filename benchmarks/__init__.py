"""cudasteps benchmark suite: `python -m benchmarks [--ops copy,transpose] [--quick]`."""
