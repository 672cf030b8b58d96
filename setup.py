"""Build cudasteps._C.

CUDA sources are compiled whenever a CUDA toolkit (nvcc) is found, even on a
machine with no GPU, so that CI compiles every kernel. Without a toolkit only
the CPU part is built and the CUDA implementations are simply not registered.

Environment:
  TORCH_CUDA_ARCH_LIST  architectures to build for; default: the visible GPU,
                        or 9.0 (Hopper) when no GPU is visible.
  MAX_JOBS              parallel compile jobs (ninja).
  CUDASTEPS_DEBUG=1     -O0 -g host code and -G device code.
  CUDASTEPS_NO_PCH=1    no precompiled host headers (see "Precompiled host headers" below).
  CUDASTEPS_RELEASE=1   a release build (`make wheel`): no line tables in the device code and a
                        stripped shared object; objects under build/release/ instead of build/.
                        Without either, host code has no debug information (-g0: Python's
                        CFLAGS add -g, and DWARF for torch's headers is most of a .cpp's object)
                        and device code keeps -lineinfo, for profilers' source views.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import subprocess
import sys

# torch finds the toolkit through `which nvcc` when CUDA_HOME is unset; a wrapper script in
# /usr/local/bin then points it at /usr/local, which has no CUDA headers or libraries.
if "CUDA_HOME" not in os.environ and os.path.isfile("/usr/local/cuda/bin/nvcc"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

import torch  # noqa: E402
from setuptools import find_packages, setup
from torch.utils import cpp_extension  # noqa: E402
from torch.utils.cpp_extension import (  # noqa: E402
    CUDA_HOME,
    BuildExtension,
    CppExtension,
    CUDAExtension,
)

ROOT = os.path.dirname(os.path.abspath(__file__))
RELEASE = os.environ.get("CUDASTEPS_RELEASE", "0") == "1"
# Objects of in-place builds (pip's editable install, `setup.py build_ext --inplace`) and of
# release builds, whose flags and architectures differ, live apart so neither rebuilds the other.
BUILD_DIR = os.path.join(ROOT, "build", "release") if RELEASE else os.path.join(ROOT, "build")
PACKAGE_DIR = os.path.join(ROOT, "torch_ops", "cudasteps")
# abi3: one binary per torch build for every CPython from the oldest this torch supports (as
# extension-cpp). Newer torch defines Py_LIMITED_API itself for py_limited_api extensions; defining
# it again with another value would be a redefinition warning, so only older torch gets ours.
TORCH_LIMITED_API = getattr(cpp_extension, "min_supported_cpython", None)
PY_LIMITED_API = TORCH_LIMITED_API or "0x03090000"
ABI3_TAG = "cp3" + str(int(PY_LIMITED_API[4:6], 16))


def _with_cuda() -> bool:
    if os.environ.get("CUDASTEPS_FORCE_CPU", "0") == "1":
        return False
    return CUDA_HOME is not None and torch.version.cuda is not None


def _default_arch_list() -> None:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"


def _nvcc_major() -> int | None:
    try:
        out = subprocess.run(
            [os.path.join(CUDA_HOME, "bin", "nvcc"), "--version"], capture_output=True, text=True
        ).stdout
    except OSError:
        return None
    for token in out.replace(",", " ").split():
        if token.startswith("V") and token[1:2].isdigit():
            return int(token[1:].split(".")[0])
    return None


def _cuda_library_includes() -> list[str]:
    # torch's CUDA headers include cuBLAS and cuSPARSE headers. A bare nvcc install may lack them;
    # the nvidia-* wheels that a pip-installed CUDA torch pulls in ship them under nvidia/*/include.
    if os.path.exists(os.path.join(CUDA_HOME, "include", "cusparse.h")):
        return []
    try:
        import nvidia
    except ImportError:
        return []
    dirs = []
    for root in nvidia.__path__:
        dirs += sorted(d for d in glob.glob(os.path.join(root, "*", "include")) if os.path.isdir(d))
    return dirs


BUILD_INFO = {}


def _write_build_info(with_cuda: bool) -> None:
    # Read back by cudasteps/__init__.py to explain a failed load of _C. Written beside the built
    # _C (BuildExt.build_extension): the package directory for in-place builds, the wheel's build
    # directory for a release build, so that `make wheel` leaves the in-place build's file alone.
    BUILD_INFO.update(
        TORCH_VERSION=torch.__version__,
        TORCH_CUDA=torch.version.cuda,
        WITH_CUDA=with_cuda,
        # Read by tests/test_wheel.py, so that its wheel build reuses the in-place objects.
        CUDA_ARCH_LIST=os.environ.get("TORCH_CUDA_ARCH_LIST") if with_cuda else None,
        CXX11_ABI=torch.compiled_with_cxx11_abi(),
        PYTHON=sys.version.split()[0],
        RELEASE=RELEASE,
    )
    if not RELEASE:
        _write_build_info_to(PACKAGE_DIR)


def _write_build_info_to(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "_build_info.py"), "w") as f:
        f.write("# Generated by setup.py at build time. Do not edit.\n")
        for key, value in BUILD_INFO.items():
            f.write(f"{key} = {value!r}\n")


def _extension():
    with_cuda = _with_cuda()
    debug = os.environ.get("CUDASTEPS_DEBUG", "0") == "1"
    sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
    cxx_flags = ["-O0", "-g"] if debug else ["-O3", "-g0"]
    # The language standard comes from torch.utils.cpp_extension (C++17 for torch 2.6, C++20 for
    # the newest releases, whose headers need it); the sources themselves are C++17.
    cxx_flags += ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    macros = [] if TORCH_LIMITED_API else [("Py_LIMITED_API", PY_LIMITED_API)]
    kwargs = dict(
        name="cudasteps._C",
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=macros,
        py_limited_api=True,
        # A release build drops the symbol tables too (`-s`): the ops are found through the
        # dispatcher, never by symbol.
        extra_link_args=["-s"] if RELEASE and not debug else [],
    )
    if not with_cuda:
        _write_build_info(False)
        return CppExtension(sources=sources, extra_compile_args={"cxx": cxx_flags}, **kwargs)

    major = _nvcc_major()
    torch_major = int(torch.version.cuda.split(".")[0])
    if major is not None and major != torch_major:
        sys.exit(
            f"cudasteps: nvcc at {CUDA_HOME} is CUDA {major}, but torch {torch.__version__} was built "
            f"with CUDA {torch.version.cuda}. Install a matching toolkit or torch build."
        )
    _default_arch_list()
    _portable_arch_list()
    sources += sorted(glob.glob(os.path.join("csrc", "**", "*.cu"), recursive=True))
    # nvcc's -O is the host compiler's level alone: cicc and ptxas optimize the device code fully
    # either way (the same SASS at -O2 and -O3). The .cu units' host code is launchers, so -O2:
    # about 1 s less compile time per elementwise unit than -O3 (inst_add_int.cu alone on 2
    # cores: 12.0 -> 10.8 s), a little less elsewhere.
    nvcc_flags = ["-O0", "-G"] if debug else (["-O2"] if RELEASE else ["-O2", "-lineinfo"])
    nvcc_flags += [
        "--expt-relaxed-constexpr",
        "-Xcompiler=-Wall",
        "-Xcudafe=--diag_suppress=177",  # unused variables in torch headers
        # Compress every unit's device code. nvcc compresses a fatbin by default only when it is
        # large, and most units of a parallel build are not: uncompressed, this build's device
        # code grew from 31 to 97 MB. Decompressed once, when the module loads.
        "-Xfatbin=-compress-all",
    ]
    macros.append(("CUDASTEPS_WITH_CUDA", "1"))
    kwargs["include_dirs"] += _cuda_library_includes()
    _write_build_info(True)
    return CUDAExtension(sources=sources, extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags}, **kwargs)


# The Hopper GEMM kernels (wgmma, setmaxnreg) exist only for the architecture-specific target
# sm_90a, and code built for it runs on compute capability 9.0 alone, so only the translation units
# of the gemm family's sm90 room are built for it; every other source keeps the portable targets of
# TORCH_CUDA_ARCH_LIST.
HOPPER_DIR = os.path.join("csrc", "gemm", "tc", "sm90")
HOPPER_GENCODE = "-gencode=arch=compute_90a,code=sm_90a"


def _is_hopper_source(path: str) -> bool:
    return os.path.normpath(path).startswith(HOPPER_DIR + os.sep) and path.endswith(".cu")


def _arch_list_has_hopper() -> bool:
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(" ", ";").split(";")
    return any(a.split("+")[0] in ("9.0", "9.0a") for a in archs)


def _portable_arch_list() -> None:
    # "9.0a" names the sm_90a target, which only the sm90 room is built for (its own -gencode):
    # the portable sources get plain 9.0 in its place, so that they run on every 9.x GPU.
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(" ", ";").split(";")
    os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(
        dict.fromkeys("9.0" + a[4:] if a.startswith("9.0a") else a for a in archs if a)
    )


# ---- Precompiled host headers ---------------------------------------------------------------
# Every host C++ unit parses ATen's and the registration API's headers: 5-10 s each, most of a
# small .cpp unit's compile time and, on a 2-core CI machine, minutes of the build. GCC can load
# those headers precompiled (a .gch beside the header), so each ninja build that compiles .cpp
# units first compiles csrc/common/host_pch.h once (about 25 s; the sm90 room's ninja file, which
# has no .cpp units, is already running beside it), with exactly the flags of its .cpp units
# (taken from the call that writes the ninja file), and adds `-include` of it to their flags. GCC
# checks that the .gch matches and otherwise parses the header itself (-Winvalid-pch says so), so
# the objects are the same either way. The .gch is rebuilt only when its command, its header or
# torch changes, so an incremental build does not recompile every unit. Clang, or a failed
# precompile: no .gch, the header is included as text. (Compiled in the background instead, the
# .gch came too late: ninja started .cpp units at once, and .ci/run took 8:48 against 7:06-7:35.)
PCH_HEADER = os.path.join(ROOT, "csrc", "common", "host_pch.h")


def _precompile_host_header(build_directory: str, cflags: list, post_cflags: list) -> list:
    """Builds <build_directory>/pch/host_pch.h.gch with the .cpp units' flags (already
    shell-quoted, as the ninja file takes them); returns the flags that -include the header (with
    the .gch beside it when the precompile worked)."""
    import hashlib
    import shlex
    import shutil

    get_cxx = getattr(cpp_extension, "get_cxx_compiler", None)
    cxx = get_cxx() if get_cxx else os.environ.get("CXX", "c++")
    pch_dir = os.path.join(build_directory, "pch")
    header = os.path.join(pch_dir, "host_pch.h")
    gch = header + ".gch"
    output = ["-x", "c++-header", shlex.quote(header), "-o", shlex.quote(gch)]
    command = " ".join([shlex.quote(cxx)] + list(cflags) + list(post_cflags) + output)
    with open(PCH_HEADER, "rb") as f:
        text = f.read()
    key = hashlib.sha256(command.encode() + text + torch.__version__.encode()).hexdigest()
    key_file = gch + ".key"
    use = ["-include", shlex.quote(header), "-Winvalid-pch"]
    os.makedirs(pch_dir, exist_ok=True)
    if os.path.exists(gch) and os.path.exists(key_file) and open(key_file).read() == key:
        return use
    for path in (gch, key_file):
        if os.path.exists(path):
            os.remove(path)
    shutil.copyfile(PCH_HEADER, header)  # the .gch must sit beside the header that -include names
    print(f"cudasteps: precompiling {os.path.relpath(PCH_HEADER, ROOT)}", flush=True)
    if subprocess.run(command, shell=True).returncode != 0 or not os.path.exists(gch):
        print("cudasteps: WARNING: no precompiled header; each .cpp unit parses it", flush=True)
        return use
    with open(key_file, "w") as f:
        f.write(key)
    return use


def _with_precompiled_host_header(write_and_compile):
    def wrapper(*args, **kwargs):
        sources = kwargs.get("sources", args[0] if args else [])
        flags_known = "cflags" in kwargs and "post_cflags" in kwargs
        if flags_known and any(s.endswith(".cpp") for s in sources):
            try:
                extra = _precompile_host_header(
                    kwargs["build_directory"], kwargs["cflags"], kwargs["post_cflags"]
                )
            except (OSError, KeyError) as e:
                print(f"cudasteps: WARNING: no precompiled header ({e})", flush=True)
                extra = []
            kwargs["post_cflags"] = list(kwargs["post_cflags"]) + extra
        return write_and_compile(*args, **kwargs)

    return wrapper


_PCH_WANTED = os.environ.get("CUDASTEPS_NO_PCH", "0") != "1"
if _PCH_WANTED and hasattr(cpp_extension, "_write_ninja_file_and_compile_objects"):
    cpp_extension._write_ninja_file_and_compile_objects = _with_precompiled_host_header(
        cpp_extension._write_ninja_file_and_compile_objects
    )


class BuildExt(BuildExtension.with_options(use_ninja=True)):
    """Objects always under build/temp: pip's editable install and a later `setup.py build_ext
    --inplace` then share them, so ninja recompiles only what changed.

    The sm90 room's sources need other nvcc flags than the rest (-gencode for sm_90a), and one
    ninja file has one set of flags, so they get a ninja file of their own (under build/temp_sm90a)
    that runs in a thread beside the main one: the two builds share the machine's cores instead of
    running one after the other (the Hopper sources alone used to hold a cold build up for two
    minutes, on one core)."""

    def finalize_options(self):
        super().finalize_options()
        self.build_temp = os.path.join(BUILD_DIR, "temp")

    def build_extension(self, ext):
        if RELEASE:
            _write_build_info_to(os.path.dirname(self.get_ext_fullpath(ext.name)))
        hopper = [s for s in ext.sources if _is_hopper_source(s)]
        if not hopper or not _arch_list_has_hopper():
            super().build_extension(ext)
            return
        ext.sources = [s for s in ext.sources if s not in hopper]
        ext.depends = list(ext.depends or []) + hopper  # an edit of one still relinks _C
        # torch's flags as they stand now (ABI, standard, includes); an explicit -gencode keeps
        # torch from adding the arch list's.
        nvcc = list(ext.extra_compile_args["nvcc"]) + [HOPPER_GENCODE, "-DCUDASTEPS_HOPPER_KERNELS=1"]
        compile_all = self.compiler.compile
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            hopper_objects = pool.submit(
                compile_all,
                hopper,
                output_dir=os.path.join(BUILD_DIR, "temp_sm90a"),
                macros=ext.define_macros,
                include_dirs=ext.include_dirs,
                debug=self.debug,
                extra_postargs={"cxx": list(ext.extra_compile_args["cxx"]), "nvcc": nvcc},
                depends=ext.depends,
            )

            def compile_then_join(*args, **kwargs):
                # build_ext reads ext.extra_objects after compile() returns, before the link.
                objects = compile_all(*args, **kwargs)
                ext.extra_objects = list(ext.extra_objects or []) + hopper_objects.result()
                return objects

            self.compiler.compile = compile_then_join
            try:
                super().build_extension(ext)
            finally:
                self.compiler.compile = compile_all
                hopper_objects.result()  # a failure of the Hopper build is raised, not dropped


setup(
    name="cudasteps",
    version="0.1.0",
    packages=find_packages("torch_ops"),
    package_dir={"": "torch_ops"},
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": ABI3_TAG}},
)
