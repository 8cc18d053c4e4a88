"""Struct literals of more than three fields name their fields (tests/unit/t_designated.sh).

usage:
  check_designated.py [FILE.c...]
      parse each file with libclang (Debian: python3-clang) and print
      FILE:LINE:COL for every struct literal - an initialiser or a compound
      literal, a row of a table too - of a struct type with more than three
      fields that has an element without a designator (`.name = ...`), and for
      every array of such structs whose rows lose their braces. Allowed: `{0}`
      (all zero) and literals of structs of up to three fields. Headers are
      checked where the files include them; literals written in system
      headers' macros (PTHREAD_MUTEX_INITIALIZER) are not ours. Without
      files: every .c of src, tools, tests, fuzz, bench and examples, from
      the project root.
      Each file is parsed for this machine; on x86-64 with every ISA flag
      the Makefile gives a kernel file (so the code under each ISA's #if is
      seen). The kernel files of the other family (src/kernels/arm on
      x86-64, and the reverse) are parsed for their target when its C
      headers are installed (Debian's gcc-aarch64-linux-gnu, which `make
      test-aarch64` installs), else named in a "not checked" line. Code
      under #if of the other architecture elsewhere is not seen.
      Exit status 1 when a literal is found or a file cannot be parsed (a
      fatal error); the last line counts the files and struct literals seen.
"""
import functools
import os
import platform
import re
import sys

try:
    import clang.cindex as ci
except ImportError:
    sys.exit("check_designated.py: needs libclang's Python bindings (Debian: apt-get install python3-clang)")

ROOTS = ("src", "tools", "tests", "fuzz", "bench", "examples")
BASE = ["-std=c11", "-D_GNU_SOURCE", "-Iinclude", "-Isrc", "-Itools", "-Itests/unit", "-Ibench", "-pthread"]
X86 = ["--target=x86_64-linux-gnu", "-mavx2", "-mfma", "-mf16c", "-mavxvnni", "-mavx512f", "-mavx512bw",
       "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mamx-tile", "-mamx-int8"]
ARM = ["--target=aarch64-linux-gnu", "-march=armv8.2-a+dotprod+fp16+i8mm"]
HOST = "x86" if platform.machine() in ("x86_64", "AMD64") else "arm"

ILE = ci.CursorKind.INIT_LIST_EXPR.value
STRUCT = ci.CursorKind.STRUCT_DECL.value
UNEXPOSED = ci.CursorKind.UNEXPOSED_EXPR.value
MEMBER_REF = ci.CursorKind.MEMBER_REF.value
DEFINE = re.compile(r"\s*#\s*define\s+([A-Za-z_]\w*)")
ZERO = re.compile(r"\{\s*0\s*\}")
ARRAYS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY)


def family(path):
    """x86, arm: a kernel file of that family; None: any target"""
    parts = path.split(os.sep)
    if parts[:2] == ["src", "kernels"] and len(parts) > 3 and parts[2] in ("x86", "arm"):
        return parts[2]
    return None


def ours(path):
    if not path:
        return None
    rel = os.path.relpath(path)
    return rel if rel.split(os.sep)[0] in ROOTS + ("include",) else None


def big_struct(t):
    """the canonical type when t is a struct of more than three fields, else None"""
    t = t.get_canonical()
    if t.kind != ci.TypeKind.RECORD or t.get_declaration().kind.value != STRUCT:
        return None
    return t if len(list(t.get_fields())) > 3 else None


def designated(c, field=True):
    """c is `.name = value` (field) or `[i] = value` / `.name = value` (not field): libclang shows a
    designated element as an unexposed expression of type void, its designators first"""
    if c.kind.value != UNEXPOSED or c.type.kind != ci.TypeKind.VOID:
        return False
    first = next(c.get_children(), None)
    return first is not None and (not field or first.kind.value == MEMBER_REF)


@functools.lru_cache(maxsize=None)
def lines(path):
    with open(path, errors="replace") as fh:
        return fh.read().split("\n")


def where(c, macros):
    """FILE:LINE:COL of a literal (and the macro that writes it, if one does; None: not our code, a
    system header's or a system header's macro) and whether it is written {0}"""
    loc = c.location
    f = ours(loc.file.name if loc.file else None)
    if not f:
        return None, False
    at = "%s:%d:%d" % (f, loc.line, loc.column)
    text = lines(loc.file.name)[loc.line - 1][loc.column - 1:]
    if text.startswith("{") or text.startswith("("):
        return at, bool(ZERO.match(text))
    name = re.match(r"[A-Za-z_]\w*", text)
    name = name.group(0) if name else "?"
    if name not in macros:
        return None, False
    return "%s: (the macro %s, %s)" % (at, name, macros[name]), False


def check_list(c, found, seen, macros):
    t = c.type.get_canonical()
    kids = list(c.get_children())
    if t.kind in ARRAYS:
        e = big_struct(t.get_array_element_type())
        if e and any(k.type.get_canonical() != e and not designated(k, False) for k in kids):
            at = where(c, macros)[0]
            if at and at not in seen:
                seen.add(at)
                found.append("%s: an array of %s whose rows lose their braces" % (at, e.spelling))
        return 0
    s = big_struct(t)
    if not s:
        return 0
    at, zero = where(c, macros)
    if not at:
        return 0
    if not kids or zero:
        return 1
    pos = sum(not designated(k) for k in kids)
    if pos and at not in seen:
        seen.add(at)
        n = len(list(s.get_fields()))
        found.append("%s: %s (%d fields): %d of %d elements without a field name" % (at, s.spelling, n, pos,
                                                                                      len(kids)))
    return 1


def walk(c, found, seen, macros, top=False):
    n = 0
    for k in c.get_children():
        if top and not ours(k.location.file.name if k.location.file else None):
            continue        # declarations of system headers
        if k._kind_id == ILE:
            n += check_list(k, found, seen, macros)
        n += walk(k, found, seen, macros)
    return n


def our_macros(files):
    """name -> FILE:LINE of each macro our files define"""
    m = {}
    for f in files:
        with open(f, errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                d = DEFINE.match(line)
                if d:
                    m.setdefault(d.group(1), "%s:%d" % (f, i))
    return m


def main(files):
    if not files:
        files = sorted(os.path.join(d, f) for r in ROOTS for d, _, fs in os.walk(r) for f in fs if f.endswith(".c"))
    index = ci.Index.create()
    macros = our_macros(sorted(os.path.join(d, f) for r in ROOTS + ("include",) for d, _, fs in os.walk(r)
                               for f in fs if f.endswith((".c", ".h"))))
    found, seen, unchecked, bad = [], set(), [], 0
    n_files = n_lists = 0
    for f in files:
        fam = family(f)
        target = fam or HOST
        args = BASE + (X86 if target == "x86" else ARM if fam else [])
        tu = index.parse(f, args=args)
        fatal = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Fatal]
        if fatal and fam and fam != HOST and "file not found" in fatal[0].spelling:
            unchecked.append(f)
            continue
        for d in tu.diagnostics:
            if d.severity >= ci.Diagnostic.Error:
                print("%s: clang: %s%s" % (f, d, "" if d.severity >= ci.Diagnostic.Fatal else " (checked as parsed)"))
        if fatal:
            bad += 1
            continue
        n_files += 1
        n_lists += walk(tu.cursor, found, seen, macros, True)
    for line in found:
        print(line)
    if unchecked:
        print("not checked (no C headers for the target of %s: Debian's gcc-%s-linux-gnu): %s" % (
            "arm" if HOST == "x86" else "x86", "aarch64" if HOST == "x86" else "x86-64", " ".join(unchecked)))
    print("check_designated: %d files, %d literals of structs of more than three fields, %d without field names, "
          "%d files not parsed" % (n_files, n_lists, len(found), bad))
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
