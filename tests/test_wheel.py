"""A non-editable install works: the abi3 wheel carries _C and the package's generated files.

Two wheels are installed and imported: one built from the in-place build's objects (below), and
the release wheel of `make wheel` (stripped, for the documented architecture list), which `make
wheel` names in CUDASTEPS_WHEEL.

Builds the wheel as `make wheel` does (`pip wheel --no-build-isolation --no-deps`), installs it
with pip into a throwaway virtual environment that sees the installed torch, and imports cudasteps
there from a directory outside the source tree: the package must come from the venv, load its own
`_C`, register the ops and run them. pip builds in the source tree with the configuration of the
in-place build (CPU-only or CUDA, and its CUDA architectures, from `cudasteps/_build_info.py`), so
the compiled objects under build/temp are reused and the wheel costs a link, not a recompile.
"""

import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import cudasteps
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def _build_env() -> dict:
    """The environment of the in-place build, so that the wheel build finds its objects up to date."""
    from cudasteps import _build_info

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if _build_info.WITH_CUDA:
        env.pop("CUDASTEPS_FORCE_CPU", None)
        arch = getattr(_build_info, "CUDA_ARCH_LIST", None)
        if arch:
            env["TORCH_CUDA_ARCH_LIST"] = arch
    else:
        env["CUDASTEPS_FORCE_CPU"] = "1"
    return env


def _run(cmd, **kwargs) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


def _outer_pip_can_target() -> bool:
    """pip >= 22.3 installs into another interpreter's environment (`pip --python`)."""
    from importlib.metadata import version  # not `import pip`: that patches distutils in this process

    return tuple(int(p) for p in version("pip").split(".")[:2] if p.isdigit()) >= (22, 3)


def _venv_with_torch(env_dir: Path) -> Path:
    """A fresh venv that can import the torch this test runs with."""
    # Its own pip (ensurepip, offline) only when this interpreter's pip cannot install into it.
    venv.create(env_dir, system_site_packages=True, with_pip=not _outer_pip_can_target(), symlinks=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([python, "-c", "import torch"], capture_output=True, env=clean).returncode == 0
    if not found:
        # This interpreter is itself a venv (torch is in its site-packages, not the base
        # interpreter's): add that directory, and only it, to the new venv's path.
        purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=clean)
        torch_site = Path(torch.__file__).resolve().parent.parent
        (Path(purelib.strip()) / "_torch_site.pth").write_text(f"{torch_site}\n")
    return python


def _install_and_check(wheel: Path, tmp_path: Path, extra_check: str = "") -> str:
    """Installs `wheel` into a fresh venv that sees the installed torch, imports cudasteps there
    from outside the source tree and runs a few ops (and `extra_check`); returns the output."""
    python = _venv_with_torch(tmp_path / "venv")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = (
        [sys.executable, "-m", "pip", "--python", python]
        if _outer_pip_can_target()
        else [python, "-m", "pip"]
    )
    _run(pip + ["install", "--no-deps", "--no-index", wheel], env=clean, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check = textwrap.dedent(
        f"""
        import os, sys
        import cudasteps, torch
        import cudasteps._C as ext
        from cudasteps import _build_info
        venv = {str(tmp_path / "venv")!r}
        for path in (cudasteps.__file__, ext.__file__):
            assert os.path.realpath(path).startswith(os.path.realpath(venv)), path
        assert ext.__file__.endswith(".abi3.so"), ext.__file__
        x = torch.randn(37, 53)
        assert torch.equal(cudasteps.transpose(x), x.t().contiguous())
        assert torch.equal(cudasteps.copy(x.t()), x.t().contiguous())
        assert torch.allclose(cudasteps.sum(x, dim=0), x.sum(0), rtol=1e-5, atol=1e-5)
        assert cudasteps.cuda_available() == _build_info.WITH_CUDA
        {extra_check}
        print("ok", _build_info.TORCH_VERSION, cudasteps.cuda_available())
        """
    )
    out = _run([python, "-c", check], cwd=elsewhere, env=clean, timeout=300)
    assert out.startswith("ok"), out
    return out


@pytest.mark.slow
def test_wheel_installs_and_imports_outside_the_source_tree(tmp_path):
    if not Path(cudasteps.__file__).resolve().is_relative_to(ROOT):
        pytest.skip(
            f"needs the in-place build of this checkout (make build), whose objects the wheel reuses; "
            f"cudasteps was imported from {cudasteps.__file__}"
        )
    dist = tmp_path / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "-w",
            dist,
            ROOT,
        ],
        cwd=ROOT,
        env=_build_env(),
        timeout=900,
    )
    wheels = list(dist.glob("cudasteps-*.whl"))
    assert len(wheels) == 1, wheels
    assert "-abi3-" in wheels[0].name, f"not an abi3 wheel: {wheels[0].name}"

    _install_and_check(wheels[0], tmp_path)


# The release wheel's size limit: a wheel for Ampere, Ada and Hopper (four targets) must stay a
# download users accept.
RELEASE_WHEEL_MAX_MB = 100


@pytest.mark.slow
def test_release_wheel_installs_and_imports(tmp_path):
    wheel = os.environ.get("CUDASTEPS_WHEEL")
    if not wheel:
        pytest.skip(
            "needs a release wheel: `make wheel` builds one and runs this test with CUDASTEPS_WHEEL set"
        )
    wheel = Path(wheel)
    assert wheel.is_file(), wheel
    assert "-abi3-" in wheel.name, f"not an abi3 wheel: {wheel.name}"
    size_mb = wheel.stat().st_size / 2**20
    assert size_mb <= RELEASE_WHEEL_MAX_MB, f"{wheel.name} is {size_mb:.1f} MB"
    # Built with CUDASTEPS_RELEASE=1: its _C has no debug sections and no symbol table; with a GPU
    # that this build has kernels for, a CUDA GEMM runs from the installed wheel.
    extra = textwrap.dedent(
        """
        import struct
        assert _build_info.RELEASE, "not a release build"
        # The host ELF's section names (ELF64: section headers at e_shoff, names in e_shstrndx's).
        data = open(ext.__file__, "rb").read()
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        header = lambda i: struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        names_at = header(shstrndx)[4]
        names = {data[names_at + header(i)[0] : data.index(b"\\0", names_at + header(i)[0])].decode()
                 for i in range(shnum)}
        assert not any(n.startswith(".debug") for n in names) and ".symtab" not in names, names
        if torch.cuda.is_available() and cudasteps.cuda_available():
            a = torch.randn(67, 129, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(129, 45, device="cuda", dtype=torch.bfloat16)
            ref = a.double() @ b.double()
            err = ((cudasteps.mm(a, b).double() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, err
        """
    ).replace("\n", "\n        ")
    out = _install_and_check(wheel, tmp_path, extra)
    assert out.startswith("ok"), out
