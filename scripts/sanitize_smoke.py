"""Run every CUDA kernel once on small, odd shapes, checking results: the compute-sanitizer target.

    compute-sanitizer --tool memcheck python scripts/sanitize_smoke.py
    compute-sanitizer --tool racecheck python scripts/sanitize_smoke.py --smem-only

Shapes are small (the sanitizers slow kernels 10-100x) but not multiples of any tile, and include
misaligned views, so bounds checks, heads and tails all execute. Exits non-zero on a wrong result.
"""

import argparse
import sys

import cudasteps
import torch

failures = []


def check(name, got, want, tol=0.0):
    ok = torch.allclose(got.double().cpu(), want.double().cpu(), rtol=tol, atol=tol, equal_nan=False)
    if not ok:
        failures.append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}")


def smoke_copy(dev):
    for n in [1, 17, 4099]:
        x = torch.randn(n + 1, device=dev)
        check(f"copy n={n}", cudasteps.copy(x[:n]), x[:n])
        check(f"copy misaligned n={n}", cudasteps.copy(x[1:]), x[1:])
        for v in cudasteps.ladder.variants("copy"):
            check(f"ladder copy {v} n={n}", cudasteps.ladder.run("copy", v, x), x)
    x = torch.randn(33, 65, device=dev)
    check("copy strided", cudasteps.copy(x.t()), x.t())
    dst = torch.empty(65, 33, device=dev)
    check("copy_", cudasteps.copy_(dst, x.t()), x.t())
    check("copy column-strided", cudasteps.copy(x[:, ::2]), x[:, ::2])
    xb = torch.randn(3, 17, 40, device=dev)
    check("copy batched transposed view", cudasteps.copy(xb.mT), xb.mT)


def smoke_transpose(dev):
    for shape in [(1, 1), (33, 65), (65, 33), (3, 37, 129), (1, 1000), (1000, 1)]:
        for dtype in [torch.float32, torch.bfloat16, torch.uint8, torch.float64]:
            x = torch.randn(shape, device=dev).to(dtype)
            check(f"transpose {shape} {dtype}", cudasteps.transpose(x), x.transpose(-2, -1))
            xm = torch.randn(x.numel() + 1, device=dev).to(dtype)[1:].view(shape)  # storage offset 1
            check(f"transpose misaligned {shape} {dtype}", cudasteps.transpose(xm), xm.transpose(-2, -1))
    x = torch.randn(67, 45, device=dev)
    out = torch.empty(45, 67, device=dev)
    check("transpose_", cudasteps.transpose_(out, x), x.t())
    for v in cudasteps.ladder.variants("transpose"):
        check(f"ladder transpose {v}", cudasteps.ladder.run("transpose", v, x), x.t())
    # cast_fp8: the transpose family's tile with an FP8 cast and an amax (ragged tiles, 3-D), and
    # the 16-byte form (rows and columns multiples of 16, tiles cut at both edges).
    for shape in [(1, 1), (33, 65), (3, 37, 129), (80, 144), (2, 48, 32)]:
        x = torch.randn(shape, device=dev).bfloat16()
        out, out_t, amax = cudasteps.cast_fp8(x, torch.tensor(2.0, device=dev), torch.float8_e4m3fn, True)
        check(f"cast_fp8 {shape}", out.float(), (x.float() * 2).to(torch.float8_e4m3fn).float())
        check(f"cast_fp8 {shape} transpose", out_t.float(), out.reshape(-1, shape[-1]).t().float())
        check(f"cast_fp8 {shape} amax", amax, x.float().abs().amax())
    # Every step of the cast's ladder; 4112 x 1040 gives a block several tiles (vec16_prefetch
    # loads the next while it casts this one).
    for shape in [(80, 144), (4112, 1040)]:
        x = torch.randn(shape, device=dev).bfloat16()
        want = (x.float() * 2).to(torch.float8_e4m3fn).float()
        for v in cudasteps.ladder.variants("fp8"):
            out, out_t, amax = cudasteps.ladder.run("fp8", v, x, torch.tensor(2.0, device=dev))
            check(f"ladder cast_fp8 {v} {shape}", out.float(), want)
            check(f"ladder cast_fp8 {v} {shape} transpose", out_t.float(), want.t())
            check(f"ladder cast_fp8 {v} {shape} amax", amax, x.float().abs().amax())
    # The dynamic cast: the amax pass (many blocks, a ticket; a misaligned view's element-wise path)
    # and the cast from its scale.
    misaligned = torch.randn(4097, device=dev).bfloat16()[1:].view(64, 64)
    for x in (torch.randn(1000, 3000, device=dev), misaligned):
        out, out_t, scale_inv, amax = cudasteps.cast_fp8_dynamic(x, torch.float8_e4m3fn, True)
        check(f"cast_fp8_dynamic {tuple(x.shape)} amax", amax, x.float().abs().amax())
        check(f"cast_fp8_dynamic {tuple(x.shape)} transpose", out_t.float(), out.float().t())


def smoke_reduce(dev):
    x = torch.randn(37, 129, device=dev)
    for dims in [None, 0, 1, (0, 1), -1]:
        want = x.double().sum() if dims is None else x.double().sum(dims)
        check(f"sum dim={dims}", cudasteps.sum(x, dims), want, tol=1e-4)
    check("sum bf16 rows", cudasteps.sum(x.bfloat16(), -1), x.bfloat16().double().sum(-1), tol=5e-2)
    check("sum misaligned", cudasteps.sum(x.flatten()[1:]), x.flatten()[1:].double().sum(), tol=1e-4)
    y = torch.randn(3, 5, 7, 11, device=dev)
    check("sum dims (0, 2)", cudasteps.sum(y, (0, 2)), y.double().sum((0, 2)), tol=1e-4)
    check("sum dims (1, 3) permuted", cudasteps.sum(y.mT, (1, 3)), y.mT.double().sum((1, 3)), tol=1e-4)
    # Enough outputs for the thread-per-output column kernel on any current GPU.
    mid = torch.randn(600, 3, 517, device=dev)
    check("sum middle dim", cudasteps.sum(mid, 1), mid.double().sum(1), tol=1e-4)
    big = torch.randn(300_001, device=dev)
    for v in cudasteps.ladder.variants("reduce"):
        check(f"ladder sum {v}", cudasteps.ladder.run("reduce", v, big), big.double().sum(), tol=1e-4)


def smoke_gemm(dev):
    for m, n, k in [(1, 1, 1), (67, 45, 33), (130, 129, 257), (5, 300, 2)]:
        a = torch.randn(m, k, device=dev)
        b = torch.randn(k, n, device=dev)
        want = a.double() @ b.double()
        check(f"mm {m}x{n}x{k}", cudasteps.mm(a, b), want, tol=1e-4)
        check(
            f"mm TT {m}x{n}x{k}", cudasteps.mm(a.t().contiguous().t(), b.t().contiguous().t()), want, tol=1e-4
        )
        c = torch.randn(m, n, device=dev)
        check(
            f"addmm {m}x{n}x{k}",
            cudasteps.addmm(c, a, b, beta=0.5, alpha=2.0),
            0.5 * c.double() + 2 * want,
            tol=1e-4,
        )
    x = torch.randn(3, 7, 33, device=dev)
    w = torch.randn(45, 33, device=dev)
    bias = torch.randn(45, device=dev)
    check("linear", cudasteps.linear(x, w, bias), x.double() @ w.double().t() + bias.double(), tol=1e-4)
    want = torch.nn.functional.gelu(x.double() @ w.double().t() + bias.double())
    check("linear_act", cudasteps.linear_act(x, w, bias, "gelu"), want, tol=1e-4)
    a = torch.randn(130, 70, device=dev)
    b = torch.randn(70, 129, device=dev)
    for v in cudasteps.ladder.variants("gemm") + cudasteps.gemm.CONFIG_VARIANTS:
        check(f"ladder mm {v}", cudasteps.ladder.run("gemm", v, a, b), a.double() @ b.double(), tol=1e-4)
    # The multistage cp.async kernels take 16-byte aligned rows only (K = 70 above falls back):
    # ragged edges with K, N multiples of 4; then padded row pitches (a partial last 16-byte chunk
    # per row, zero-filled) in every layout, for each cp.async config (both kernels).
    a = torch.randn(131, 68, device=dev)
    b = torch.randn(68, 132, device=dev)
    for v in cudasteps.gemm.MULTISTAGE_STEPS:
        check(
            f"ladder mm {v} aligned", cudasteps.ladder.run("gemm", v, a, b), a.double() @ b.double(), tol=1e-4
        )
    # The ring configs in every aligned layout (their FFMA order differs by layout), without and
    # with the stream-K tail forced on (below one wave: every tile shared over all SMs, parts
    # written to the workspace and summed by the last block).
    # (M = 132, K = 68, N = 132: every leading dimension a multiple of 4, column-major ones too.)
    a, b = torch.randn(132, 68, device=dev), torch.randn(68, 132, device=dev)
    col = {"a": a.t().contiguous().t(), "b": b.t().contiguous().t()}
    layouts = {"NN": (a, b), "NT": (a, col["b"]), "TN": (col["a"], b), "TT": (col["a"], col["b"])}
    for c in cudasteps.gemm.RING_CONFIGS:
        for lay, (x, y) in layouts.items():
            for suffix in ("s1", "sk"):
                check(
                    f"ladder mm cfg:{c}:{suffix} {lay}",
                    cudasteps.ladder.run("gemm", f"cfg:{c}:{suffix}", x, y),
                    x.double() @ y.double(),
                    tol=1e-4,
                )
    views = {
        "NN": (torch.randn(131, 68, device=dev)[:, :66], torch.randn(66, 136, device=dev)[:, :130]),
        "TT": (torch.randn(66, 132, device=dev)[:, :131].t(), torch.randn(130, 68, device=dev)[:, :66].t()),
    }
    for c in cudasteps.gemm.MULTISTAGE_CONFIGS + cudasteps.gemm.RING_CONFIGS:
        for lay, (a, b) in views.items():
            want = a.double() @ b.double()
            check(
                f"ladder mm cfg:{c} padded {lay}",
                cudasteps.ladder.run("gemm", f"cfg:{c}", a, b),
                want,
                tol=1e-4,
            )
    smoke_tensor_cores(dev)


def smoke_tensor_cores(dev):
    """Every tensor-core step (bf16, fp16, fp32 as TF32) on ragged shapes, both layouts, misaligned
    views (repacked), an addend (addmm), and a split-K shape (a small output with a long K), and
    the Hopper kernel's tail split on them."""
    gemm = cudasteps.gemm
    hopper = torch.cuda.get_device_capability(dev) == (9, 0)
    tols = {torch.bfloat16: 5e-2, torch.float16: 1e-2, torch.float32: 1e-2}
    for dtype in gemm.TC_DTYPES:
        steps = [v for v in gemm.TC_LADDER if hopper or v not in gemm.TC_HOPPER_STEPS]
        if dtype != torch.bfloat16:  # the Hopper ladder-only steps are built for bf16 (and fp16's
            built = gemm.TC_HOPPER_FP16_STEPS if dtype == torch.float16 else ()  # tc:ws_pingpong)
            steps = [v for v in steps if v not in gemm.TC_HOPPER_NN_STEPS or v in built]
        if hopper and dtype == torch.float32:
            steps += list(gemm.TC_TF32_STEPS)  # row-major a and b, and both column-major: one MN-major
        tol = tols[dtype]
        for m, n, k in [(67, 45, 33), (130, 129, 257), (64, 256, 4096)]:
            a = (torch.randn(m, k, device=dev) / k**0.5).to(dtype)
            b = torch.randn(k, n, device=dev).to(dtype)
            want = a.double() @ b.double()
            # tc:ws_persistent's tail split forced (the last wave's tiles cut into k ranges whose
            # sums the last part to arrive adds up): 64 x 256 x 4096 is cut into 16 ranges. And its
            # 128 x 64 (with the tail split) and 192 x 128 tiles (16-bit operands).
            sched = ["tc:ws_persistent:ts1"] if hopper else []
            if hopper and dtype != torch.float32:
                sched += ["tc:ws_persistent:bn64:ts1", "tc:ws_persistent:bm192"]
            for v in steps + sched:
                check(f"ladder mm {v} {dtype} {m}x{n}x{k}", gemm.run_ladder(v, a, b), want, tol=tol)
                at, bt = a.t().contiguous().t(), b.t().contiguous().t()
                check(f"ladder mm {v} {dtype} TT {m}x{n}x{k}", gemm.run_ladder(v, at, bt), want, tol=tol)
        base = torch.randn(40 * 36 + 1, device=dev).to(dtype)
        a, b = base[1:].view(40, 36), torch.randn(36, 29, device=dev).to(dtype)
        for v in steps:
            check(
                f"ladder mm {v} {dtype} misaligned",
                gemm.run_ladder(v, a, b),
                a.double() @ b.double(),
                tol=tol,
            )
        if dtype != torch.float32:
            c = torch.randn(29, device=dev).to(dtype)
            want = 0.5 * c.double() + 2 * (a.double() @ b.double())
            check(f"addmm {dtype}", cudasteps.addmm(c, a, b, beta=0.5, alpha=2.0), want, tol=tol)
            # linear_act's ladder: every step (the fused epilogues on Hopper), edge tiles and a
            # split-K shape (its reduce applies the activation), the product checked too.
            fused = [v for v in gemm.LINEAR_ACT_LADDER if v.startswith("fused")] if hopper else []
            for m, n, k in [(67, 48, 33), (130, 136, 257), (64, 256, 4096)]:
                x = (torch.randn(m, k, device=dev) / k**0.5).to(dtype)
                w = torch.randn(n, k, device=dev).to(dtype)
                bias = torch.randn(n, device=dev).to(dtype)
                product = x.double() @ w.double().t()
                want = torch.nn.functional.silu(product + bias.double())
                for v in ["two_pass"] + fused:
                    out, got_product = gemm.run_linear_act_ladder(v, x, w, bias, "silu")
                    check(f"linear_act {v} {dtype} {m}x{n}x{k}", out, want, tol=tol)
                    check(f"linear_act {v} {dtype} {m}x{n}x{k} product", got_product, product, tol=tol)
    # scaled_mm: FP8 operands of a ragged shape (K = 4099: no multiple of 16), row-wise scales.
    a8 = torch.randn(33, 4099, device=dev).to(torch.float8_e4m3fn)
    b8 = torch.randn(40, 4099, device=dev).to(torch.float8_e5m2).t()
    sa, sb = torch.rand(33, 1, device=dev) + 0.5, torch.rand(1, 40, device=dev) + 0.5
    want = (a8.double() @ b8.double()) * sa.double() * sb.double()
    got = cudasteps.scaled_mm(a8, b8, sa, sb, out_dtype=torch.float32)
    check("scaled_mm e4m3 x e5m2", got, want, tol=1e-3)
    # The Hopper FP8 kernel (tc:fp8_ws): per-tensor scales and a bias in its epilogue (bf16, odd
    # edges), e5m2 x e4m3 into float32, and a small output with a long K (split-K's partials and
    # reduce).
    for (m, n, k), (ta, tb), out_dtype in [
        ((130, 72, 4099), (torch.float8_e4m3fn, torch.float8_e4m3fn), torch.bfloat16),
        ((67, 48, 520), (torch.float8_e5m2, torch.float8_e4m3fn), torch.float32),
        ((64, 64, 8192), (torch.float8_e4m3fn, torch.float8_e4m3fn), torch.float32),
    ]:
        a8 = torch.randn(m, k, device=dev).to(ta)
        b8 = torch.randn(n, k, device=dev).to(tb).t()
        s = torch.tensor(0.5, device=dev)
        bias = torch.randn(n, device=dev).to(out_dtype)
        want = (a8.double() @ b8.double()) * 0.25 + bias.double()
        got = cudasteps.scaled_mm(a8, b8, s, s, bias, out_dtype)
        # (The FP8 tensor cores' own sums are off by up to about 2^-14 of sum |a||b|: tests/test_scaled_mm.py
        # bounds them; this smoke run looks for memory errors.)
        check(f"scaled_mm {ta} x {tb} {m}x{n}x{k}", got, want, tol=2e-2)
    # The FP8 ladder's Hopper kernels on an odd shape with several 256-row tiles (fp8_ws256's two
    # halves per warpgroup, a warpgroup wholly below M in the last tile row; fp8_multicast's
    # clusters, the last one's second tile wholly below M).
    if torch.cuda.get_device_capability(dev) == (9, 0):
        a8 = torch.randn(300, 1000, device=dev).to(torch.float8_e4m3fn)
        b8 = torch.randn(260, 1000, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        want = cudasteps.gemm.run_scaled_mm_ladder("fp8_ws", a8, b8, one, one)
        # (and the stagger trial's named barrier: fp8_ws:st<L>)
        for v in cudasteps.gemm.SCALED_MM_LADDER[2:] + cudasteps.gemm.SCALED_MM_SWEEP:
            check(f"ladder scaled_mm {v}", cudasteps.gemm.run_scaled_mm_ladder(v, a8, b8, one, one), want)


def smoke_elementwise(dev):
    import torch.nn.functional as F

    acts = {
        "none": lambda t: t,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "silu": F.silu,
    }
    x = torch.randn(37, 129, device=dev)
    b = torch.randn(129, device=dev)
    for act, fn in acts.items():
        check(f"bias_act {act}", cudasteps.bias_act(x, b, act), fn(x.double() + b.double()), tol=1e-4)
        xr = x.clone().requires_grad_()
        br = b.clone().requires_grad_()
        cudasteps.bias_act(xr, br, act).sum().backward()
        xd = x.double().requires_grad_()
        bd = b.double().requires_grad_()
        fn(xd + bd).sum().backward()
        check(f"bias_act {act} grad_x", xr.grad, xd.grad, tol=1e-4)
        check(f"bias_act {act} grad_bias", br.grad, bd.grad, tol=1e-3)
    check("add", cudasteps.add(x, b, alpha=0.5), x.double() + 0.5 * b.double(), tol=1e-5)
    check("mul", cudasteps.mul(x, x.flip(0)), x.double() * x.flip(0).double(), tol=1e-5)
    col = torch.randn(37, 1, device=dev)
    check("mul broadcast [37,1]*[129]", cudasteps.mul(col, b), col.double() * b.double(), tol=1e-5)
    check("add vector + matrix", cudasteps.add(b, x, alpha=2), b.double() + 2 * x.double(), tol=1e-5)
    check("mul transposed", cudasteps.mul(x.t(), x.t()), x.t().double() ** 2, tol=1e-5)
    check("add CPU 0-dim", cudasteps.add(x, torch.tensor(1.5)), x.double() + 1.5, tol=1e-5)
    check("mul number", cudasteps.mul(x, -3), x.double() * -3, tol=1e-5)
    xi = torch.randint(-50, 50, (37, 129), device=dev, dtype=torch.int32)
    check("add int32 broadcast", cudasteps.add(xi, xi[:1], alpha=3), xi + 3 * xi[:1])
    check("mul bool", cudasteps.mul(xi > 0, xi < 10), (xi > 0) & (xi < 10))
    xm = torch.randn(1 + 37 * 129, device=dev)[1:].view(37, 129)
    check(
        "bias_act misaligned", cudasteps.bias_act(xm, b, "gelu"), F.gelu(xm.double() + b.double()), tol=1e-4
    )
    for v in cudasteps.ladder.variants("elementwise"):
        check(
            f"ladder bias_act {v}",
            cudasteps.ladder.run("elementwise", v, x, b, "gelu"),
            F.gelu(x.double() + b.double()),
            tol=1e-4,
        )


# family -> (smoke function, uses shared memory)
FAMILIES = {
    "copy": (smoke_copy, False),
    "transpose": (smoke_transpose, True),
    "reduce": (smoke_reduce, True),
    "gemm": (smoke_gemm, True),
    "elementwise": (smoke_elementwise, True),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--smem-only", action="store_true", help="only families whose kernels use shared memory"
    )
    args = parser.parse_args()
    if not (torch.cuda.is_available() and cudasteps.cuda_available()):
        sys.exit("sanitize_smoke: needs a CUDA device and a CUDA build")
    torch.manual_seed(0)
    for fn, smem in FAMILIES.values():
        if args.smem_only and not smem:
            continue
        fn(torch.device("cuda"))
    torch.cuda.synchronize()
    if failures:
        sys.exit(f"{len(failures)} wrong results: {failures}")
    print("all results correct")


if __name__ == "__main__":
    main()
