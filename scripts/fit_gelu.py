"""Fits FastGelu's tail polynomial (csrc/elementwise/elementwise.h) and checks it in fp32.

The upper tail of the standard normal is Q(t) = 1 - Phi(t) = phi(t) * M(t), M the Mills ratio.
With s = 1 / (1 + C t), G(s) = M(t) * (1 + C t) / sqrt(2 pi) is smooth on s in (0, 1], and

    Q(t) = exp(-t^2 / 2) * s * G(s)

needs one reciprocal, one exponential and a polynomial. This script fits G by least squares on
the relative error (iteratively reweighted towards the worst points), prints the coefficients to
paste into FastGelu::tails, then evaluates gelu and its derivative the way the kernel does (fp32
roundings) against mpmath over z in [-13, 13]. --search first prints the best C on a grid.

    python scripts/fit_gelu.py [--degree 6] [--c 0.265] [--search]
"""

import argparse

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def mills(t):
    t = mp.mpf(t)
    return float(0.5 * mp.erfc(t / mp.sqrt(2)) / (mp.exp(-t * t / 2) / mp.sqrt(2 * mp.pi)))


def fit(ts, m, c, degree, iters=30):
    s = 1 / (1 + c * ts)
    g = m * (1 + c * ts)
    vander = np.vander(s, degree + 1, increasing=True)
    w = np.ones_like(s)
    for _ in range(iters):
        coef, *_ = np.linalg.lstsq(vander / g[:, None] * w[:, None], w, rcond=None)
        err = (vander @ coef - g) / g
        w = w * (np.abs(err) / np.abs(err).max() + 1e-3) ** 0.5
        w /= w.max()
    return coef / np.sqrt(2 * np.pi), np.abs(err).max()


def fp32_tail(t, c, coef):
    f32 = np.float32
    s = (f32(1) / (f32(c) * t + f32(1))).astype(f32)
    g = np.full_like(t, coef[-1])
    for a in coef[-2::-1]:
        g = (g * s + a).astype(f32)
    e = np.exp2((t * t).astype(f32) * f32(-0.5 * np.log2(np.e))).astype(f32)
    return e, (s * g).astype(f32)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--degree", type=int, default=6)
    parser.add_argument("--c", type=float, default=0.265, help="C of s = 1 / (1 + C t)")
    parser.add_argument("--search", action="store_true", help="print the error for C on a grid first")
    args = parser.parse_args()

    ts = np.linspace(0, 14, 6000)
    m = np.array([mills(t) for t in ts])
    if args.search:
        for c in np.linspace(0.2, 0.45, 26):
            print(f"C = {c:.3f}: max relative error of G {fit(ts, m, c, args.degree)[1]:.2e}")
    c = args.c
    coef, err = fit(ts, m, c, args.degree)
    coef32 = coef.astype(np.float32)
    print(f"C = {c}, degree {args.degree}: max relative error of G (float64) {err:.2e}")
    print("coefficients, s^0 first:", ", ".join(f"{x:.9e}f" for x in coef32))

    f32 = np.float32
    z = np.linspace(-13, 13, 20001).astype(f32)
    t = np.abs(z)
    e, sg = fp32_tail(t, c, coef32)
    q = (e * sg).astype(f32)
    # max(z, 0) - |z| q, |z| capped at 16 (q is 0 there) so that z = inf gives inf, not inf * 0.
    value = (np.maximum(z, f32(0)) - (np.minimum(t, f32(16)) * q).astype(f32)).astype(f32)
    r = (e * (sg - t * f32(1 / np.sqrt(2 * np.pi)))).astype(f32)
    deriv = np.where(z > 0, f32(1) - r, r).astype(f32)
    ref = [(float(mp.mpf(float(v)) * mp.ncdf(float(v))), float(mp.ncdf(float(v)) + v * mp.npdf(float(v))),
            float(mp.ncdf(float(v)) + abs(v) * mp.npdf(float(v)))) for v in z.astype(np.float64)]
    ref = np.array(ref)
    rel_value = np.abs(value - ref[:, 0]) / np.maximum(np.abs(ref[:, 0]), 1e-38)
    # The derivative crosses zero near z = -0.75: its error in units of its two terms' magnitude.
    rel_deriv = np.abs(deriv - ref[:, 1]) / ref[:, 2]
    for lo, hi in [(-13, -6), (-6, -1), (-1, 1), (1, 13)]:
        sel = (z >= lo) & (z < hi)
        print(
            f"z in [{lo:3d}, {hi:3d}): gelu rel err {rel_value[sel].max():.2e}, "
            f"derivative {rel_deriv[sel].max():.2e}"
        )


if __name__ == "__main__":
    main()
