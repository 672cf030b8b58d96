"""Train a small MLP classifier with DistributedDataParallel, on torch.nn or cudasteps modules.

    torchrun --nproc-per-node 2 examples/train_ddp.py --impl cudasteps
    torchrun --nproc-per-node 4 examples/train_ddp.py --impl torch --epochs 10
    torchrun --nproc-per-node 2 examples/train_ddp.py --impl cudasteps --amp bf16

Rendezvous is env:// (torchrun sets MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK); NCCL on GPUs
(one GPU per rank, cuda:LOCAL_RANK), gloo on CPU (--device cpu, or no GPU). The data is synthetic
and generated here: Gaussian inputs labelled by a fixed random "teacher" network, identical on
every rank (same seed); a DistributedSampler (set_epoch each epoch) gives each rank its shard.
Rank 0 prints the loss per epoch and the final accuracy. At the end every rank compares its
parameters with rank 0's, bitwise; the script exits non-zero if any differ.

--step-time also prints two figures, over the epochs after the first (which pays for allocator
warm-up and kernel loading): `step_ms <ms>`, from epochs 1, 3, 5, ..., the median of each epoch's
wall time over its batches with the device synchronized at both ends, so data loading, DDP's
gradient all-reduce and the optimizer step all count; and `train_ms <ms>`, from epochs 2, 4, ...,
the median time of one training step alone (forward, backward with the all-reduce, optimizer
step; CUDA events on a GPU), without the data loading. Before each of those steps every rank
waits for its device and then for the other ranks (a barrier), so a step starts on all ranks at
once: otherwise a rank still loading its batch holds up the all-reduce of the others, and the
figure times the ranks' drift instead of the step. benchmarks/bench_e2e.py reads both to compare
torch.nn with cudasteps.nn under DDP.
"""

import argparse
import gc
import os
import statistics
import sys
import time

import cudasteps
import cudasteps.nn as cnn
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_data(n_samples: int, in_features: int, n_classes: int, seed: int = 0):
    """Gaussian inputs, labels = argmax of a fixed random two-layer teacher (learnable, not trivial)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, in_features, generator=gen)
    w1 = torch.randn(in_features, 64, generator=gen) / in_features**0.5
    w2 = torch.randn(64, n_classes, generator=gen) / 8.0
    y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)
    return x, y


def torch_mlp(dims, act: str = "gelu") -> nn.Sequential:
    acts = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(acts[act]())
    return nn.Sequential(*layers)


def build_model(impl: str, dims, act: str = "gelu", seed: int = 0) -> nn.Module:
    """The same network (same initial values) as torch.nn modules or as cudasteps.nn.MLP."""
    torch.manual_seed(seed)
    reference = torch_mlp(dims, act)
    if impl == "torch":
        return reference
    model = cnn.MLP(dims, act)
    model.load_from_torch_linears([m for m in reference if isinstance(m, nn.Linear)])
    return model


def params_identical(model: nn.Module) -> bool:
    """True on every rank when every parameter equals rank 0's bit for bit."""
    ok = torch.ones(1, device=next(model.parameters()).device)
    for p in model.parameters():
        ref = p.detach().clone()
        dist.broadcast(ref, src=0)
        if not torch.equal(ref, p.detach()):
            ok.zero_()
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok.item() == 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["torch", "cudasteps"], default="cudasteps")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=128, help="per rank")
    parser.add_argument("--dims", default="32,256,256,10", help="comma-separated layer sizes")
    parser.add_argument("--act", choices=["gelu", "relu", "silu"], default="gelu")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--amp",
        choices=["none", "bf16", "fp16"],
        default="none",
        help="mixed precision: forward and loss under torch.autocast in this dtype (fp32 parameters)",
    )
    parser.add_argument(
        "--step-time", action="store_true", help="print step_ms and train_ms: median ms per training step"
    )
    args = parser.parse_args(argv)
    if args.step_time and args.epochs < 3:
        parser.error("--step-time needs --epochs >= 3 (the first epoch is warm-up, then one of each)")

    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    dims = [int(d) for d in args.dims.split(",")]
    x, y = make_data(args.samples, dims[0], dims[-1], seed=args.seed)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    # Whole batches at once: the sampler's indices grouped by a BatchSampler and the dataset
    # indexed with each group (TensorDataset takes a list of indices: one gather per tensor),
    # instead of batch_size single rows fetched and stacked by the DataLoader's collate, which took
    # about 10 ms per 1024-row batch, longer than the step itself. Pinned batches (pin_memory) make
    # the non_blocking copies below asynchronous: a copy from pageable memory waits for the stream,
    # so the next batch's loading would run after the previous step's GPU work instead of under it.
    batches = BatchSampler(sampler, batch_size=args.batch_size, drop_last=True)
    loader = DataLoader(dataset, sampler=batches, batch_size=None, pin_memory=use_cuda)

    amp_dtype = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.amp]
    # fp16 gradients need loss scaling (a GradScaler); bf16 has fp32's range and needs none.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    model = build_model(args.impl, dims, args.act, seed=args.seed).to(device)
    ddp = DDP(model, device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    if rank == 0:
        print(
            f"impl={args.impl} world={world} device={device.type} backend={dist.get_backend()} "
            f"dims={dims} amp={args.amp} cudasteps_cuda={cudasteps.cuda_available()}"
        )

    epoch_step_ms = []
    train_marks = []  # (start, end) of each timed training step: CUDA events, or perf_counter()

    def mark():
        if not use_cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)  # loss sum, batches
        if use_cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        # --step-time: odd epochs time whole batches (step_ms), even ones single steps (train_ms).
        time_steps = args.step_time and epoch > 0 and epoch % 2 == 0
        for xb, yb in loader:
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            if time_steps:
                if use_cuda:
                    torch.cuda.synchronize(device)
                dist.barrier(device_ids=[local_rank] if use_cuda else None)
            start_mark = mark() if time_steps else None
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(ddp(xb), yb)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if time_steps:
                train_marks.append((start_mark, mark()))
            total += torch.stack([loss.detach(), torch.ones((), device=device)])
        if use_cuda:
            torch.cuda.synchronize(device)
        if epoch % 2 == 1:
            epoch_step_ms.append((time.perf_counter() - start) * 1e3 / max(len(loader), 1))
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}")

    # Accuracy over the whole data set: each rank scores a strided share, summed across ranks.
    with torch.no_grad():
        xs, ys = x[rank::world].to(device), y[rank::world].to(device)
        correct = torch.stack(
            [(model(xs).argmax(1) == ys).sum().float(), torch.tensor(float(len(ys)), device=device)]
        )
        dist.all_reduce(correct)
    identical = params_identical(model)
    if rank == 0:
        print(f"final accuracy {(correct[0] / correct[1]).item():.4f}")
        print("parameters identical across ranks" if identical else "PARAMETERS DIFFER ACROSS RANKS")
        if args.step_time:
            print(f"step_ms {statistics.median(epoch_step_ms):.4f}")
            if use_cuda:
                torch.cuda.synchronize(device)
                train_ms = [s.elapsed_time(e) for s, e in train_marks]
            else:
                train_ms = [(e - s) * 1e3 for s, e in train_marks]
            print(f"train_ms {statistics.median(train_ms):.4f}")
    # Every rank reaches the end before any tears the group down (gloo aborted a rank here,
    # "terminate called without an active exception", when one rank destroyed it early).
    dist.barrier(device_ids=[local_rank] if use_cuda else None)
    # DDP's reducer holds the process group too: while it lives, destroy_process_group leaves the
    # group (and gloo's worker threads) alive until interpreter shutdown, when a worker freeing a
    # finished collective's tensors needs the GIL and std::terminate aborts the rank (about one run
    # in ten on 2 cores). Dropping DDP first lets destroy_process_group join the workers here.
    del ddp, opt
    gc.collect()
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
