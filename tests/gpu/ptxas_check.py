#!/usr/bin/env python3
"""ptxas_check.py — what tests/gpu/test_ptxas.sh checks, as TAP: ptxas's numbers for every kernel of
cuda/*.cu against the launches the host code makes of it.

  ptxas_check.py CUDA_DIR LOG_DIR HOT STACK LARGEST

CUDA_DIR: the kernels' sources (cuda/). LOG_DIR: NAME.log, the output of `nvcc NVCCFLAGS -Xptxas -v`
for CUDA_DIR/NAME.cu (every gencode of NVCCFLAGS in one compile), and NAME.rc, its exit status.
HOT: a file naming the hot kernels (their names without template arguments, one a line, # comments).
STACK: lines `KERNEL BYTES`: the stack frame (local memory) a hot kernel is allowed; 0 for the others.
LARGEST: a file of lines `KERNEL TEXT=VALUE...`: for a launch whose dynamic shared memory is a
variable, the largest value each TEXT of the expression assigned to it can take (DMAX in VALUE: the
kernel instance's first template argument).

From ptxas (per kernel instance and architecture): registers, spill stores and loads (the kernel's
and those of the non-inlined functions listed after it, its callees), stack frame, static shared
memory. From the sources: each `NAME<<<grid, block, smem, stream>>>` launch, NAME resolved to the
kernel(s) when it is a variable (its last assignment before the launch in the same function), the
block size (an expression of enum constants, or a dim3 declared in the function), the dynamic
shared memory (0, a constant expression, or a variable: its last assignment, at the LARGEST
values), the cudaFuncSetAttribute(NAME, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) before
it, and `__launch_bounds__(N[, M])` of the kernel's declaration. Expressions are evaluated by
compiling them with the enum constants and the functions of the file and the cuda/ headers it
includes (c++, or $CXX), so the numbers are the source's, not a copy's.

Fails (not ok) on: a file that does not compile; a hot kernel missing, spilling, or with a stack
frame (local memory: a local array indexed at run time) over its allowance; a launch that
cannot be resolved; a kernel without a launch; static shared memory over 48 KiB; static + dynamic
over the architecture's opt-in limit, or over 48 KiB without the opt-in; a block over its launch
bounds, or registers x the bounds over the register file; registers x block over the register
file. Spills in other kernels are printed, not failed."""
import os
import re
import subprocess
import sys
import tempfile

SMEM_DEFAULT = 48 * 1024  # a block's shared memory without cudaFuncSetAttribute
SMEM_OPTIN = {  # cudaDevAttrMaxSharedMemoryPerBlockOptin: what a block may opt in to
    "sm_80": 163 * 1024,  # A100
    "sm_86": 99 * 1024,
    "sm_87": 163 * 1024,
    "sm_89": 99 * 1024,
    "sm_90": 227 * 1024,  # H100, H200
}
REGFILE = 65536  # 32-bit registers per SM (and the most one block may use), sm_80 to sm_90
MAX_THREADS = 1024
NOT_NAMES = set("""sizeof int long short unsigned signed char float double bool void size_t int64_t int32_t
uint32_t uint64_t const constexpr static inline return true false if else auto struct enum
__host__ __device__ __forceinline__ min max""".split())


# ---- sources ----------------------------------------------------------------------------------

def strip_comments(text):
    """text without comments (each replaced by spaces, newlines kept, so offsets and lines hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, i, open_c, close_c):
    """The index of the bracket closing the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    return -1


def split_top(s, angle=False):
    """s split at its commas outside brackets (and <>, with angle: template arguments)."""
    parts, depth, cur = [], 0, ""
    opening, closing = ("([{<", ")]}>") if angle else ("([{", ")]}")
    for c in s:
        if c in opening:
            depth += 1
        elif c in closing:
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    parts.append(cur.strip())
    return parts


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


class Source:
    def __init__(self, cuda_dir, name):
        self.name = name
        self.path = os.path.join(cuda_dir, name)
        self.text = strip_comments(open(self.path).read())
        # the file and the cuda/ headers it includes, transitively
        self.context, todo = [], [name]
        while todo:
            f = todo.pop(0)
            if f in self.context:
                continue
            self.context.append(f)
            t = self.text if f == name else strip_comments(open(os.path.join(cuda_dir, f)).read())
            for inc in re.findall(r'#\s*include\s*"([^"]+)"', t):
                if os.path.exists(os.path.join(cuda_dir, inc)):
                    todo.append(inc)
        self.texts = [self.text if f == name else strip_comments(open(os.path.join(cuda_dir, f)).read())
                      for f in self.context]
        self.consts = {}
        for t in self.texts:
            for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", t):
                prev = None
                for m in split_top(body):
                    if not m:
                        continue
                    k, _, v = m.partition("=")
                    k = k.strip()
                    v = v.strip() if v.strip() else ("0" if prev is None else "(%s) + 1" % prev)
                    self.consts.setdefault(k, v)
                    prev = k

    def function(self, fname):
        """The definition of the top-level function fname in the file or its headers, or None."""
        for t in self.texts:
            for m in re.finditer(r"\b%s\s*\(" % re.escape(fname), t):
                start = t.rfind("\n", 0, m.start()) + 1
                head = t[start:m.start()]
                if not re.match(r"[A-Za-z_]", head) or re.search(r"[=();]", head):
                    continue
                if t.count("{", 0, start) != t.count("}", 0, start):  # not at file level
                    continue
                close = matching(t, m.end() - 1, "(", ")")
                rest = t[close + 1:]
                k = len(rest) - len(rest.lstrip())
                if not rest[k:].startswith("{"):
                    continue  # a declaration
                end = matching(t, close + 1 + k, "{", "}")
                return t[start:end + 1]
        return None

    def definitions(self, expr):
        """The constants and functions expr needs, callees first, as C++."""
        out, seen = [], set()

        def need(text):
            for ident in re.findall(r"\b[A-Za-z_]\w*\b", text):
                if ident in seen or ident in NOT_NAMES:
                    continue
                seen.add(ident)
                if ident in self.consts:
                    need(self.consts[ident])
                    out.append("constexpr long long %s = (%s);" % (ident, self.consts[ident]))
                else:
                    f = self.function(ident)
                    if f is not None:
                        need(f[f.index("("):])
                        out.append(f)
        need(expr)
        return out


def evaluate(sources, requests):
    """requests: (source name, expression) pairs; returns {pair: (value or None, error text)}."""
    cxx = os.environ.get("CXX") or "c++"
    prelude = ("#include <cstddef>\n#include <cstdint>\n#include <cstdio>\n#define __host__\n#define __device__\n"
               "#define __forceinline__ inline\n")

    def program(reqs):
        parts, calls = [prelude], []
        for i, (src, expr) in enumerate(reqs):
            defs = sources[src].definitions(expr)
            parts.append("namespace e%d {\n%s\nlong long value() { return (long long)(%s); }\n}\n" %
                         (i, "\n".join(defs), expr))
            calls.append('    printf("%%lld\\n", e%d::value());\n' % i)
        parts.append("int main()\n{\n%s    return 0;\n}\n" % "".join(calls))
        return "".join(parts)

    def run(reqs):
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "eval.cc"), os.path.join(d, "eval")
            with open(src, "w") as f:
                f.write(program(reqs))
            cc = subprocess.run([cxx, "-std=c++17", "-w", "-o", exe, src], capture_output=True, text=True)
            if cc.returncode != 0:
                errs = [re.sub(r"^\S*eval\.cc:\d+:\d+: ", "", l) for l in cc.stderr.splitlines() if "error" in l]
                return None, norm(" ".join(errs))[:300]
            r = subprocess.run([exe], capture_output=True, text=True)
            return [int(x) for x in r.stdout.split()], ""

    reqs = sorted(set(requests))
    values, err = run(reqs) if reqs else ([], "")
    if values is not None:
        return {q: (v, "") for q, v in zip(reqs, values)}
    result = {}
    for q in reqs:  # one at a time, to say which fails
        v, e = run([q])
        result[q] = (v[0], "") if v else (None, e)
    return result


def kernels_declared(src):
    """{kernel: (line, launch-bounds arguments or None)} of the __global__ functions in src."""
    out = {}
    t = src.text
    tok = re.compile(r"\s*(__launch_bounds__\s*\(|[A-Za-z_]\w*)")
    for m in re.finditer(r"\b__global__\b", t):
        start = max(t.rfind(c, 0, m.start()) for c in ";{}") + 1
        j, bounds, name = m.end(), None, None
        while name is None:  # the words after __global__ up to NAME(, a __launch_bounds__(...) among them
            w = tok.match(t, j)
            if not w:
                break
            if w.group(1).startswith("__launch_bounds__"):
                close = matching(t, w.end() - 1, "(", ")")
                bounds = t[w.end():close]
                j = close + 1
                continue
            if re.compile(r"\s*\(").match(t, w.end()):
                name = w.group(1)
            j = w.end()
        if name is None:
            continue
        lb = re.search(r"__launch_bounds__\s*\(", t[start:m.start()])
        if lb:
            o = start + lb.end() - 1
            bounds = t[o + 1:matching(t, o, "(", ")")]
        out[name] = (line_of(t, m.start()), split_top(bounds) if bounds else None)
    return out


def last_assignment(text, var):
    """(expression, position) of the last `var = expression;` in text, or (None, -1)."""
    found = (None, -1)
    for m in re.finditer(r"(?<![\w.>])%s\s*=(?!=)" % re.escape(var), text):
        end = text.find(";", m.end())
        found = (norm(text[m.end():end]), m.start())
    return found


class Launch:
    def __init__(self, src, m, kernels):
        t = src.text
        self.src, self.name, self.line = src.name, m.group(1), line_of(t, m.start())
        self.args = split_top(m.group(2))
        self.errors, self.kernels = [], set()
        fstart = t.rfind("\n}", 0, m.start()) + 1
        self.body = t[fstart:m.start()]
        # the kernel
        if self.name in kernels:
            self.kernels = {self.name}
            self.kernel_at = -1
        else:
            expr, self.kernel_at = last_assignment(self.body, self.name)
            if expr:
                self.kernels = {k for k in re.findall(r"\b\w+\b", expr) if k in kernels}
            if not self.kernels:
                self.errors.append("cannot tell which kernel `%s` is" % self.name)
        if len(self.args) < 2:
            self.errors.append("fewer than 2 launch arguments")
            self.args += ["1", "1"]
        # the block size
        b = self.args[1]
        self.block_expr = b
        if re.fullmatch(r"[A-Za-z_]\w*", b) and b not in src.consts:
            d = re.search(r"\bdim3\b[^;]*?\b%s\s*\(([^()]*)\)" % re.escape(b), self.body)
            expr, _ = last_assignment(self.body, b)
            if d:
                self.block_expr = " * ".join("(%s)" % x for x in split_top(d.group(1)))
            elif expr:
                self.block_expr = expr
            else:
                self.errors.append("block size `%s`: neither a dim3 %s(...) nor assigned before the launch" % (b, b))
        # the dynamic shared memory
        self.smem_arg = self.args[2] if len(self.args) > 2 else "0"
        self.smem_expr, self.smem_at, self.smem_var = self.smem_arg, -1, None
        idents = [x for x in re.findall(r"\b[A-Za-z_]\w*\b", self.smem_arg) if x not in NOT_NAMES]
        local = [x for x in idents if x not in src.consts and src.function(x) is None]
        if len(local) == 1 and re.fullmatch(r"[A-Za-z_]\w*", self.smem_arg):
            self.smem_var = self.smem_arg
            self.smem_expr, self.smem_at = last_assignment(self.body, self.smem_arg)
            if self.smem_expr is None:
                self.errors.append("shared memory `%s`: not assigned before the launch" % self.smem_arg)
        elif local:
            self.errors.append("shared memory `%s`: not a constant or one variable" % self.smem_arg)
        # cudaFuncSetAttribute(NAME, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) after the
        # kernel's and the size's last assignment
        self.optin = None
        for a in re.finditer(r"cudaFuncSetAttribute\s*\(\s*(\w+)\s*,\s*cudaFuncAttributeMaxDynamicSharedMemorySize"
                             r"\s*,\s*(?:\(\s*int\s*\)\s*)?([^;]*?)\)\s*\)?\s*;", self.body):
            if a.start() > max(self.kernel_at, self.smem_at) and a.group(1) in ({self.name} | self.kernels):
                self.optin = norm(a.group(2))

    def where(self):
        return "%s:%d %s<<<...>>>" % (self.src, self.line, self.name)


# ---- ptxas's numbers ----------------------------------------------------------------------------

def parse_log(path):
    """[{arch, mangled, regs, spill_st, spill_ld, stack, smem, callees}] of the kernels in a log."""
    out, cur, fn = [], None, None
    for line in open(path, errors="replace"):
        m = re.search(r"Compiling entry function '([^']+)' for '(sm_\w+)'", line)
        if m:
            cur = {"mangled": m.group(1), "arch": m.group(2), "regs": 0, "spill_st": 0, "spill_ld": 0, "stack": 0,
                   "smem": 0, "callees": []}
            out.append(cur)
            fn = None
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur is not None:
            st, ss, sl = (int(x) for x in m.groups())
            if fn == cur["mangled"]:
                cur.update(stack=st, spill_st=ss, spill_ld=sl)
            elif fn:
                cur["callees"].append((fn, st, ss, sl))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur is not None and fn == cur["mangled"]:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    return out


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True)
        d = r.stdout.splitlines()
        if r.returncode == 0 and len(d) == len(names):
            return dict(zip(names, d))
    except OSError:
        pass
    return {n: n for n in names}


def base_name(mangled):
    m = re.match(r"_Z(\d+)", mangled)
    return mangled[m.end():m.end() + int(m.group(1))] if m else mangled


def short_name(demangled):
    """`void k<64, float>(...)` -> `k<64, float>`, `k(...)` -> `k`; __nv_bfloat16 as bf16."""
    s = re.sub(r"^void ", "", demangled)
    i = s.find("<")
    p = s.find("(")
    if 0 <= i < p:
        s = s[:matching(s, i, "<", ">") + 1]
    elif p >= 0:
        s = s[:p]
    return s.replace("__nv_bfloat16", "bf16")


def template_args(short):
    i = short.find("<")
    return split_top(short[i + 1:-1], angle=True) if i >= 0 else []


# ---- the checks -----------------------------------------------------------------------------------

def main():
    cuda_dir, log_dir, hot_file, stack_file, largest_file = sys.argv[1:6]
    strip = lambda f: [l.split("#")[0].split() for l in open(f)]
    hot = [w for l in strip(hot_file) for w in l]
    stack_ok = {l[0]: int(l[1]) for l in strip(stack_file) if l}
    largest = {}
    for l in strip(largest_file):
        if l:
            largest.setdefault(l[0], []).append(dict(x.split("=", 1) for x in l[1:]))
    files = sorted(f for f in os.listdir(cuda_dir) if f.endswith(".cu"))
    archs = os.environ.get("PTXAS_ARCHS", "").split()
    tap = []

    def check(ok, name, lines=()):
        tap.append(("ok" if ok else "not ok", name, list(dict.fromkeys(lines))))

    # compiled?
    bad, kernels = [], []
    for f in files:
        stem = f[:-3]
        rc = open(os.path.join(log_dir, stem + ".rc")).read().strip() if os.path.exists(
            os.path.join(log_dir, stem + ".rc")) else "missing"
        log = os.path.join(log_dir, stem + ".log")
        if rc != "0":
            lines = open(log, errors="replace").read().strip().splitlines() if os.path.exists(log) else []
            errs = [l for l in lines if re.search(r"error", l, re.I)] or lines[-5:]
            bad.append("%s: exit %s: %s" % (f, rc, " | ".join(norm(l) for l in errs[:5])))
            continue
        for k in parse_log(log):
            k["file"] = f
            kernels.append(k)
    got = sorted({k["arch"] for k in kernels})
    for a in archs:
        if a not in got:
            bad.append("no kernel compiled for %s (NVCCFLAGS asks for it)" % a)
    check(not bad, "nvcc -Xptxas -v compiles every cuda/*.cu for %s (%d kernel instances)" %
          (" and ".join(archs or got), len({k["mangled"] for k in kernels})), bad)

    dem = demangle(sorted({k["mangled"] for k in kernels}))
    for k in kernels:
        k["base"] = base_name(k["mangled"])
        k["short"] = short_name(dem[k["mangled"]])
        k["spills"] = k["spill_st"] + k["spill_ld"] + sum(c[2] + c[3] for c in k["callees"])

    # sources: kernels, launches
    sources = {f: Source(cuda_dir, f) for f in files}
    declared = {}
    for f in files:
        for name, (line, bounds) in kernels_declared(sources[f]).items():
            declared[name] = (f, line, bounds)
    launches = []
    for f in files:
        for m in re.finditer(r"\b(\w+)\s*<<<(.*?)>>>", sources[f].text, re.S):
            launches.append(Launch(sources[f], m, declared))

    # every expression, evaluated at once
    reqs = []
    inst_smem = {}  # (launch index, kernel short name) -> (file, expression)
    for i, L in enumerate(launches):
        reqs.append((L.src, L.block_expr))
        if L.smem_var is None:
            reqs.append((L.src, L.smem_expr))
            continue
        if L.smem_expr is None:
            continue
        for kname in L.kernels:
            rows = largest.get(kname)
            if not rows:
                L.errors.append("shared memory `%s = %s` of %s: the test's table of largest values has no row for it"
                                % (L.smem_var, L.smem_expr, kname))
                continue
            for key in rows[0]:
                if key not in L.smem_expr:
                    L.errors.append("the table's row for %s sets `%s`, which `%s` no longer has (stale row)"
                                    % (kname, key, L.smem_expr))
            for k in kernels:
                if k["base"] != kname:
                    continue
                targs = template_args(k["short"])
                e = L.smem_expr
                for key, val in rows[0].items():
                    val = val.replace("DMAX", targs[0] if targs else "DMAX")
                    e = re.sub(r"(?<![\w>.])%s(?!\w)" % re.escape(key), "(%s)" % val, e)
                inst_smem[(i, k["short"])] = (L.src, e)
                reqs.append((L.src, e))
    for name, (f, line, bounds) in declared.items():
        for b in bounds or []:
            reqs.append((f, b))
    values = evaluate(sources, reqs)

    def value(src, expr, errs, what):
        v, e = values.get((src, expr), (None, "not evaluated"))
        if v is None:
            errs.append("%s `%s`: %s" % (what, expr, e))
        return v

    # per launch and kernel instance
    by_base = {}
    for k in kernels:
        by_base.setdefault(k["base"], []).append(k)
    resolve_errs, launched = [], set()
    inst = {}  # kernel record id -> [(launch, block, dyn)]
    for i, L in enumerate(launches):
        errs = list(L.errors)
        block = value(L.src, L.block_expr, errs, "block size")
        dyn = None
        if L.smem_var is None:
            dyn = value(L.src, L.smem_expr, errs, "shared memory")
        for kname in sorted(L.kernels):
            launched.add(kname)
            if kname not in by_base:
                errs.append("kernel %s: not in ptxas's output" % kname)
            for k in by_base.get(kname, []):
                d = dyn
                if L.smem_var is not None:
                    q = inst_smem.get((i, k["short"]))
                    d = value(q[0], q[1], errs, "shared memory of " + k["short"]) if q else None
                if block is not None and d is not None:
                    inst.setdefault(id(k), []).append((L, block, d))
        resolve_errs += ["%s: %s" % (L.where(), e) for e in dict.fromkeys(errs)]
    check(not resolve_errs, "every launch in cuda/*.cu resolves: its kernel, block size and dynamic shared memory "
          "(%d launches)" % len(launches), resolve_errs)
    unlaunched = sorted({k["base"] for k in kernels} - launched)
    check(not unlaunched, "every compiled kernel has a launch in cuda/*.cu", unlaunched)

    # the table of numbers
    table = []
    for k in sorted(kernels, key=lambda k: (k["arch"], k["file"], k["short"])):
        ls = inst.get(id(k), [])
        blocks = sorted({b for _, b, _ in ls})
        dyn = max([d for _, _, d in ls], default=0)
        table.append("%s %-44s regs %3d  spills %d/%d  stack %3d  smem %6d + %6d  block %-8s %s" % (
            k["arch"], k["short"], k["regs"], k["spill_st"], k["spill_ld"], k["stack"], k["smem"], dyn,
            ",".join(str(b) for b in blocks) or "-", "hot" if k["base"] in hot else ""))
        for c in k["callees"]:
            table.append("%s   calls %s: stack %d, spills %d/%d" % (k["arch"], c[0], c[1], c[2], c[3]))

    missing = [h for h in hot if h not in by_base]
    check(not missing, "the hot kernels the test names exist: " + " ".join(hot), missing)
    spills = ["%s %s (%s): %d bytes spill stores, %d loads%s" % (k["arch"], k["short"], k["file"], k["spill_st"],
              k["spill_ld"], "; in its callees: " + ", ".join("%s %d/%d" % (c[0], c[2], c[3]) for c in k["callees"]
                                                               if c[2] + c[3]) if any(c[2] + c[3] for c in k["callees"]) else "")
              for k in kernels if k["spills"] and k["base"] in hot]
    check(not spills, "no register spills in the hot kernels", spills)
    stacks = ["%s %s (%s): a %d-byte stack frame (allowed: %d)" % (k["arch"], k["short"], k["file"], k["stack"],
              stack_ok.get(k["base"], 0)) for k in kernels if k["base"] in hot and k["stack"] > stack_ok.get(k["base"], 0)]
    stacks += ["%s: in the test's stack allowances, not a hot kernel" % b for b in stack_ok if b not in hot]
    check(not stacks, "no local memory in the hot kernels beyond the stated allowances (%s)" %
          (", ".join("%s %d bytes" % kv for kv in stack_ok.items()) or "none"), stacks)
    other = ["%s %s: spills %d/%d (not a hot kernel: printed, not failed)" % (k["arch"], k["short"], k["spill_st"],
             k["spill_ld"]) for k in kernels if k["spills"] and k["base"] not in hot]

    static_bad, total_bad, optin_bad, bounds_bad, regs_bad = [], [], [], [], []
    for k in kernels:
        limit = SMEM_OPTIN.get(k["arch"])
        if k["smem"] > SMEM_DEFAULT:
            static_bad.append("%s %s: %d bytes of static shared memory (at most %d)" %
                              (k["arch"], k["short"], k["smem"], SMEM_DEFAULT))
        regs8 = (k["regs"] + 7) // 8 * 8  # registers are given to a warp in units of 256
        f, line, bounds = declared.get(k["base"], (k["file"], 0, None))
        nb = mb = None
        if bounds:
            nb = value(f, bounds[0], bounds_bad, "%s __launch_bounds__" % k["base"])
            mb = value(f, bounds[1], bounds_bad, "%s __launch_bounds__" % k["base"]) if len(bounds) > 1 else None
            if nb is not None and regs8 * ((nb + 31) // 32 * 32) * (mb or 1) > REGFILE:
                bounds_bad.append("%s %s: %d registers x __launch_bounds__(%s) = %d > %d" % (
                    k["arch"], k["short"], k["regs"], ", ".join(bounds), regs8 * ((nb + 31) // 32 * 32) * (mb or 1),
                    REGFILE))
        for L, block, dyn in inst.get(id(k), []):
            at = "%s %s launched at %s" % (k["arch"], k["short"], L.where())
            if limit is None:
                total_bad.append("%s: no opt-in limit known for %s (add it to SMEM_OPTIN)" % (at, k["arch"]))
            elif k["smem"] + dyn > limit:
                total_bad.append("%s: %d static + %d dynamic = %d bytes > %d (%s's opt-in limit)" % (
                    at, k["smem"], dyn, k["smem"] + dyn, limit, k["arch"]))
            if k["smem"] + dyn > SMEM_DEFAULT and L.optin != norm(L.smem_arg):
                optin_bad.append("%s: %d + %d bytes of shared memory, over 48 KiB, and %s" % (
                    at, k["smem"], dyn, "no cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                    "%s) before it" % (L.name, L.smem_arg) if L.optin is None else
                    "its cudaFuncSetAttribute asks for `%s`, not the launch's `%s`" % (L.optin, L.smem_arg)))
            if nb is not None and block > nb:
                bounds_bad.append("%s: block %d > __launch_bounds__(%s) = %d" % (at, block, ", ".join(bounds), nb))
            warps = (block + 31) // 32
            if block > MAX_THREADS or regs8 * 32 * warps > REGFILE:
                regs_bad.append("%s: block %d x %d registers (%d allocated) = %d > %d" % (
                    at, block, k["regs"], regs8, regs8 * 32 * warps, REGFILE))
    check(not static_bad, "static shared memory of every kernel <= 48 KiB", static_bad)
    check(not total_bad, "static + dynamic shared memory of every launch <= the opt-in limit (%s)" %
          ", ".join("%s %d KiB" % (a, SMEM_OPTIN[a] // 1024) for a in got if a in SMEM_OPTIN), total_bad)
    check(not optin_bad, "over 48 KiB of shared memory the launch opts in first (cudaFuncSetAttribute "
          "MaxDynamicSharedMemorySize, the launch's size)", optin_bad)
    check(not bounds_bad, "__launch_bounds__(N[, M]): every launch's block <= N, registers x N (x M) fit the "
          "register file (%d kernels declare them)" % sum(1 for d in declared.values() if d[2]), bounds_bad)
    check(not regs_bad, "registers x block size of every launch fit the register file (%d) and blocks <= %d" %
          (REGFILE, MAX_THREADS), regs_bad)

    print("# every kernel instance: registers, spill stores/loads (bytes), stack frame, static + largest dynamic "
          "shared memory (bytes), block sizes launched")
    for t in table:
        print("# " + t)
    for o in other:
        print("# " + o)
    for n, (res, name, lines) in enumerate(tap, 1):
        print("%s %d - %s" % (res, n, name))
        for l in lines:
            print("#   " + l)
    print("1..%d" % len(tap))
    return 0 if all(r == "ok" for r, _, _ in tap) else 1


if __name__ == "__main__":
    sys.exit(main())
