"""Compare the SASS of two builds of the extension, kernel by kernel.

    python scripts/sass_diff.py OLD.so NEW.so        (or two `cuobjdump --dump-sass` text files)

A refactor that only moves source (into other files, namespaces or translation units) must leave
every kernel's machine code as it was. This dumps the SASS of both builds, names each kernel by
its demangled name without namespace qualifiers (moving a kernel into another namespace, or from
an anonymous namespace into another unit, changes its symbol but not its code), and compares the
instruction streams. A kernel with internal linkage may be compiled in several units (a helper
kernel that every unit of a family instantiates); each copy is compiled on its own and may be
scheduled differently. So a kernel is unchanged when every body it had before is still among its
bodies after; copies added in other units are counted separately.

A kernel whose parameter struct grew (a field added to a struct it takes by value) reads its
parameters at other constant-bank offsets (`c[0x0][0x2a0]` for `c[0x0][0x298]`) and is otherwise
the same code: such kernels are listed apart, as "parameter offsets only".

Prints the kernels that changed and those found in one build only; exits 1 if there are any.
"""

import hashlib
import re
import subprocess
import sys
from collections import defaultdict

QUALIFIER = re.compile(r"\(anonymous namespace\)::|\b[A-Za-z_][A-Za-z0-9_]*::")


def sass_text(path: str) -> str:
    if path.endswith(".txt"):
        return open(path, errors="replace").read()
    return subprocess.run(
        ["cuobjdump", "--dump-sass", path], capture_output=True, text=True, check=True
    ).stdout


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return out.splitlines()


# A kernel parameter's place in constant bank 0.
PARAM_OFFSET = re.compile(r"c\[0x0\]\[0x[0-9a-f]+\]")
# An instruction's encoding, the comment after it.
ENCODING = re.compile(r"/\* 0x[0-9a-f]+ \*/")


def kernels(text: str, ignore_param_offsets: bool = False) -> dict:
    """{normalized name (with the target arch): {body hash}}; with ignore_param_offsets, every
    constant-bank-0 operand reads the same."""
    bodies = defaultdict(list)  # (mangled name, arch) -> lines
    arch, current = "", None
    for line in text.splitlines():
        m = re.match(r"\s*arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = (m.group(1), arch)
            bodies[current] = []
            continue
        if current is not None and re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            bodies[current].append(" ".join(line.split()))  # column padding varies by dump
    keys = list(bodies)
    names = demangle([k[0] for k in keys])
    out = defaultdict(set)
    for (mangled, arch), name in zip(keys, names):
        body = "\n".join(bodies[(mangled, arch)])
        if ignore_param_offsets:  # the operand, and the encoding that spells it
            body = ENCODING.sub("", PARAM_OFFSET.sub("c[0x0][param]", body))
        out[f"{QUALIFIER.sub('', name)} [{arch}]"].add(hashlib.sha1(body.encode()).hexdigest())
    return out


def main(old_path: str, new_path: str) -> int:
    old_text, new_text = sass_text(old_path), sass_text(new_path)
    old, new = kernels(old_text), kernels(new_text)
    both = old.keys() & new.keys()
    same = sorted(k for k in both if old[k] <= new[k])
    moved = [k for k in both if not old[k] <= new[k]]
    old_p, new_p = kernels(old_text, True), kernels(new_text, True)
    offsets_only = sorted(k for k in moved if old_p[k] <= new_p[k])
    differ = sorted(k for k in moved if not old_p[k] <= new_p[k])
    copies = sorted(k for k in same if len(new[k]) > len(old[k]))
    only_old, only_new = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
    print(f"kernels: {len(old)} before, {len(new)} after; SASS unchanged: {len(same)} "
          f"({len(copies)} of them also compiled, differently scheduled, in another unit)")
    print(f"parameter offsets only (the same instructions reading a grown parameter struct): "
          f"{len(offsets_only)}")
    for name in offsets_only:
        print(f"  {name}")
    for title, names in (("changed", differ), ("only before", only_old), ("only after", only_new)):
        print(f"{title}: {len(names)}")
        for name in names:
            print(f"  {name}")
    return 1 if differ or only_old or only_new else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
