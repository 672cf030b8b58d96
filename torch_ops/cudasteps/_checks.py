"""Checks that the fake (meta) kernels share with the C++ kernels, with the same messages.

Under torch.compile and opcheck only the fake kernel runs, so it must reject what the real kernels
reject, and say it the same way: "cudasteps.<op>: <arg> must be <expected>, got <actual>".
"""

import torch


def fail(op: str, message: str) -> None:
    raise RuntimeError(f"cudasteps.{op}: {message}")


def check(cond: bool, op: str, message: str) -> None:
    if not cond:
        fail(op, message)


def dtype_name(dtype: torch.dtype) -> str:
    # Spelled as c10 prints it in the C++ messages (Float, Half, BFloat16, ...).
    return {
        torch.float32: "Float",
        torch.float64: "Double",
        torch.float16: "Half",
        torch.bfloat16: "BFloat16",
        torch.int8: "Char",
        torch.uint8: "Byte",
        torch.int16: "Short",
        torch.int32: "Int",
        torch.int64: "Long",
        torch.bool: "Bool",
        torch.complex64: "ComplexFloat",
        torch.complex128: "ComplexDouble",
        torch.float8_e4m3fn: "Float8_e4m3fn",
        torch.float8_e5m2: "Float8_e5m2",
    }.get(dtype, str(dtype).replace("torch.", ""))


def same_device(t: torch.Tensor, ref: torch.Tensor, op: str, arg: str, ref_arg: str) -> None:
    check(
        t.device == ref.device,
        op,
        f"{arg} must be on {ref_arg}'s device ({ref.device}), got {t.device}",
    )


def same_dtype(t: torch.Tensor, ref: torch.Tensor, op: str, arg: str, ref_arg: str) -> None:
    check(
        t.dtype == ref.dtype,
        op,
        f"{arg} must have the dtype of {ref_arg} ({dtype_name(ref.dtype)}), got {dtype_name(t.dtype)}",
    )


def same_shape(t: torch.Tensor, ref: torch.Tensor, op: str, arg: str, ref_arg: str) -> None:
    check(
        t.shape == ref.shape,
        op,
        f"{arg} must have the shape of {ref_arg} {list(ref.shape)}, got {list(t.shape)}",
    )
