#!/usr/bin/env python3
"""Import circles among the Rust modules (files) of one or more folders of src/.

Usage: scripts/import_cycles.py FOLDER [FOLDER ...]   (e.g. src/predict src/calibrate, or src, or
crates/trainbench-comm/src; the folders of one crate per call)

Every `.rs` file under the folders is a node (`src/a/mod.rs` is module `crate::a`, `src/a/b.rs` is `crate::a::b`,
`src/a.rs` with `src/a/` is `crate::a`). An edge A -> B is a path in A's code (comments stripped) that names
module B or an item of it: `crate::x::y`, `super::y`, `self::y` (in `use` lines, `use` groups `{...}` and inline
paths alike), or, in a file that declares `mod b;`, a path starting `b::`. A path naming an item of a module
(`super::PredictError`) is an edge to the file defining that module. An inline module (`mod tests { ... }`) is
read as a module one level below its file (its `super::` is the file itself). `mod b;` declarations themselves are not
edges (a parent that declares a child does not depend on it), nor are paths into other folders. Prints each
file's edges and then every circle (a strongly connected set of two or more files) over all the folders taken
together, and the edges between the folders; exits 1 when there is a circle.
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def src_of(path: Path) -> Path:
    """The `src` folder a file or folder lies in (the root crate's `src/` or a crate's `crates/<name>/src/`)."""
    for parent in [path, *path.parents]:
        if parent.name == "src":
            return parent
    sys.exit(f"{path}: not inside a crate's src/ folder")


def module_of(path: Path) -> tuple:
    """The module path of a file under its crate's src/, as a tuple of names (`crate` left out)."""
    rel = path.relative_to(src_of(path)).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # String literals (format strings name no modules; a path inside one is text).
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def inline_modules(text: str):
    """The text outside inline `mod NAME { ... }` blocks, and each block as (name, body)."""
    blocks, outside, pos = [], [], 0
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text):
        if m.start() < pos:
            continue
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                break
            j += 1
        outside.append(text[pos:m.start()])
        blocks.append((m.group(1), text[m.end():j]))
        pos = j + 1
    outside.append(text[pos:])
    return "".join(outside), blocks


def paths_in(text: str, children: set) -> list:
    paths = expand_groups(text)
    paths += re.findall(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)", text)
    paths += [x for x in re.findall(r"(?<![:\w])(" + IDENT + r"(?:::" + IDENT + r")+)", text)
              if x.split("::")[0] in children]
    return paths


def expand_groups(text: str) -> list:
    """Paths of `use` items with `{...}` groups expanded (nested groups too), beside every inline path."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths.extend(expand(m.group(1).replace("\n", " ").strip()))
    return paths


def expand(item: str) -> list:
    item = item.strip()
    if "{" not in item:
        return [re.split(r"\s+as\s+", item)[0].strip()]
    head, _, rest = item.partition("{")
    inner = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        for e in expand(p):
            out.append(head + e if e != "self" else head.rstrip(":"))
    return out


def resolve(path: str, here: tuple, is_dir_module: bool, children: set, modules: set):
    """The module (tuple) a path names, the longest known prefix; None when outside the known modules."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    base = list(here) if is_dir_module else list(here[:-1])  # the module `super::` of a child resolves against
    if segs[0] == "crate":
        cur, segs = [], segs[1:]
    elif segs[0] == "super":
        # `super` of a file module is its parent; `super` of a folder's mod.rs is the folder's parent.
        cur = list(here[:-1])
        segs = segs[1:]
        while segs and segs[0] == "super":
            cur, segs = cur[:-1], segs[1:]
    elif segs[0] == "self":
        cur, segs = list(here), segs[1:]
    elif segs[0] in children:
        cur = list(here)
    else:
        return None
    del base
    best = tuple(cur) if tuple(cur) in modules else None
    for s in segs:
        cur.append(s)
        if tuple(cur) in modules:
            best = tuple(cur)
        else:
            break
    return best


def main(folders: list) -> int:
    files = []
    for f in folders:
        p = Path(f)
        files.extend(sorted(p.rglob("*.rs")))
        sibling = p.with_suffix(".rs")
        if sibling.is_file():
            files.append(sibling)
    roots = {src_of(Path(f)) for f in folders}
    if len(roots) != 1:
        sys.exit("the folders must lie in one crate's src/ (run once per crate)")
    src = roots.pop()
    all_modules = {module_of(p): p for p in src.rglob("*.rs")}
    modules = set(all_modules)
    ours = {module_of(p): p for p in files}
    edges = {m: set() for m in ours}
    for m, p in ours.items():
        text = strip_comments(p.read_text())
        is_dir = p.name in ("mod.rs", "lib.rs", "main.rs") or p.with_suffix("").is_dir()
        children = set(re.findall(r"\bmod\s+(" + IDENT + r")\s*;", text))
        outside, blocks = inline_modules(text)
        # An inline module (`mod tests { ... }`) is a module one level down: its `super::` is this file.
        scoped = [(m, is_dir, paths_in(outside, children))]
        scoped += [(m + (name,), True, paths_in(body, set())) for name, body in blocks]
        for here, here_is_dir, paths in scoped:
            for path in paths:
                target = resolve(path, here, here_is_dir and here != m or is_dir, children, modules)
                if target is None or target == m or target not in ours:
                    continue
                edges[m].add(target)
    name = lambda m: str(ours[m])
    for m in sorted(edges, key=name):
        print(f"{name(m)} -> {', '.join(sorted(name(t) for t in edges[m])) or '(none)'}")
    # Strongly connected components (Tarjan).
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges, key=name):
        if v not in index:
            visit(v)
    circles = [c for c in comps if len(c) > 1]
    print()
    if len(folders) > 1:
        def folder(m):
            for f in folders:
                if str(ours[m]).startswith(f.rstrip("/") + "/") or str(ours[m]) == f.rstrip("/") + ".rs":
                    return f
            return "?"
        between = sorted({(folder(a), folder(b), name(a), name(b)) for a in edges for b in edges[a]
                          if folder(a) != folder(b)})
        print("edges between the folders:" if between else "edges between the folders: none")
        for fa, fb, a, b in between:
            print(f"  {fa} -> {fb}: {a} -> {b}")
        print()
    if not circles:
        print(f"no import circle among the {len(ours)} files of {', '.join(folders)}")
        return 0
    for c in circles:
        print("import circle: " + " <-> ".join(sorted(name(m) for m in c)))
    return 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
