#!/usr/bin/env python3
"""Finds import circles among the Rust modules of one folder.

Usage: scripts/import_cycles.py FOLDER [--crate-path PATH] [--edges]

Every `.rs` file under FOLDER is a module (`mod.rs` is its folder's module; inline `mod x { ... }` blocks, such
as `mod tests`, count as part of their file). A module depends on another when it names it in a path: a `use`
line or any expression (`crate::a::b::Item`, `super::x`, `self::y::z`, and in a `mod.rs` a child's name at the
start of a `use`). A path that ends at an item which the named module only re-exports (`pub use child::Item`) is
followed to the module that defines it, so a parent that re-exports its children is not taken for a dependency
of each of them. Paths that leave FOLDER are ignored.

The module of FOLDER is `crate::<path after src/>` unless `--crate-path` says otherwise (e.g. `crate::runner`).
Prints each circle (strongly connected component of more than one module, or a module naming itself through a
re-export) and exits 1 when there is one; with `--edges`, also prints every dependency found.
"""

import argparse
import re
import sys
from pathlib import Path

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_RE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S)
MOD_OPEN_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")


def module_of(folder: Path, file: Path, base: list[str]) -> tuple[str, ...]:
    rel = file.relative_to(folder).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(base + parts)


TOKEN_RE = re.compile(
    r"//[^\n]*|/\*.*?\*/|(?<![\w])r(#*)\".*?\"\1|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])'|#!?\[[^\]]*\]", re.S
)


def strip_comments_and_strings(text: str) -> str:
    """Comments and attributes removed, every string and character literal emptied (one pass, left to right)."""
    return TOKEN_RE.sub(lambda m: '""' if m.group(0)[:1] in ('"', "r", "'") else "", text)


def expand_use_tree(tree: str) -> list[list[str]]:
    """`a::{b, c::d}` -> [[a, b], [a, c, d]] (names only; `self` and globs end a path)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out: list[list[str]] = []

    def walk(prefix: list[str], t: str) -> None:
        if "{" not in t:
            names = [p for p in t.split("::") if p]
            if names and names[-1] == "*":
                names = names[:-1]
            if names and names[-1] == "self":
                names = names[:-1]
            out.append(prefix + names)
            return
        head, _, rest = t.partition("{")
        inner = rest[: rest.rfind("}")]
        head_names = [p for p in head.split("::") if p]
        depth, start = 0, 0
        for i, ch in enumerate(inner + ","):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                part = inner[start:i]
                start = i + 1
                if part:
                    walk(prefix + head_names, part)

    walk([], tree)
    return out


def scan(folder: Path, base: list[str]):
    modules: dict[tuple[str, ...], Path] = {}
    for f in sorted(folder.rglob("*.rs")):
        modules[module_of(folder, f, base)] = f
    # Per module: the raw paths it names (absolute, as name lists) and its re-exports (name -> absolute path).
    named: dict[tuple[str, ...], list[list[str]]] = {m: [] for m in modules}
    reexports: dict[tuple[str, ...], dict[str, list[str]]] = {m: {} for m in modules}
    for mod, f in modules.items():
        text = strip_comments_and_strings(f.read_text())
        is_dir_module = f.name == "mod.rs" or tuple(base) == mod
        # Track inline modules so that `super` inside `mod tests { ... }` means the file's module.
        scope: list[tuple[str, int]] = []
        depth = 0
        statements = []
        for chunk in re.split(r"(?<=[;{}])", text):
            # A `use` with braces was cut at each brace: join it back up to its `;`.
            if statements and re.match(r"^\s*(pub(\([^)]*\))?\s+)?use\b", statements[-1]) and not statements[-1].endswith(";"):
                statements[-1] += chunk
            else:
                statements.append(chunk)
        for stmt in statements:
            m_open = MOD_OPEN_RE.match(stmt.strip() + ("{" if stmt.strip().endswith("{") else ""))
            here = list(mod) + [s for s, _ in scope]

            def absolute(kw: str, rest: list[str]) -> list[str] | None:
                if kw == "crate":
                    return ["crate"] + rest
                if kw == "self":
                    return here + rest
                # super, possibly repeated
                cur = list(here)
                names = list(rest)
                cur = cur[:-1]
                while names and names[0] == "super":
                    cur = cur[:-1]
                    names = names[1:]
                return cur + names

            use = USE_RE.match(stmt)
            if use:
                public = bool(use.group(1))
                for path in expand_use_tree(use.group(2)):
                    if not path:
                        continue
                    first = path[0]
                    if first in ("crate", "super", "self"):
                        target = absolute(first, path[1:])
                    elif is_dir_module and not scope and tuple(list(mod) + [first]) in modules:
                        target = list(mod) + path
                    else:
                        continue
                    if target is None:
                        continue
                    named[mod].append(target)
                    if public and not scope and target:
                        reexports[mod][target[-1]] = target
            else:
                for m in PATH_RE.finditer(stmt):
                    rest = [p for p in m.group(2).split("::") if p]
                    target = absolute(m.group(1), rest)
                    if target:
                        named[mod].append(target)
                if is_dir_module and not scope:
                    # A child named at the start of a path in an expression (`child::item()`).
                    for m in re.finditer(r"(?<![:\w])([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", stmt):
                        if tuple(list(mod) + [m.group(1)]) in modules:
                            rest = [p for p in m.group(2).split("::") if p]
                            named[mod].append(list(mod) + [m.group(1)] + rest)
            opens = stmt.count("{")
            closes = stmt.count("}")
            if m_open and stmt.rstrip().endswith("{"):
                scope.append((m_open.group(1), depth))
            depth += opens - closes
            while scope and depth <= scope[-1][1]:
                scope.pop()
    return modules, named, reexports


def resolve(path: list[str], modules, reexports, seen=None) -> tuple[str, ...] | None:
    """The module a path lands in: the longest prefix that is a module, through re-exports of its next name."""
    seen = seen or set()
    for n in range(len(path), 0, -1):
        prefix = tuple(path[:n])
        if prefix in modules:
            if n < len(path):
                item = path[n]
                target = reexports.get(prefix, {}).get(item)
                key = (prefix, item)
                if target and key not in seen:
                    seen.add(key)
                    deeper = resolve(target, modules, reexports, seen)
                    if deeper is not None:
                        return deeper
            return prefix
    return None


def tarjan(graph: dict) -> list[list]:
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--crate-path", help="the folder's module path, e.g. crate::runner")
    ap.add_argument("--edges", action="store_true", help="print every dependency found")
    args = ap.parse_args()
    folder = args.folder.resolve()
    if args.crate_path:
        base = args.crate_path.split("::")
    else:
        parts = folder.parts
        if "src" not in parts:
            print("cannot tell the folder's module path; pass --crate-path", file=sys.stderr)
            return 2
        i = len(parts) - 1 - list(reversed(parts)).index("src")
        base = ["crate"] + list(parts[i + 1 :])
    modules, named, reexports = scan(folder, base)
    graph: dict[tuple[str, ...], set] = {m: set() for m in modules}
    for mod, paths in named.items():
        for p in paths:
            target = resolve(p, modules, reexports)
            # A re-export of a module's own child is how a parent exposes it, not a dependency on itself.
            if target is not None and target != mod:
                graph[mod].add(target)
    name = lambda m: "::".join(m)
    if args.edges:
        for m in sorted(graph):
            for t in sorted(graph[m]):
                print(f"{name(m)} -> {name(t)}")
    cycles = [c for c in tarjan(graph) if len(c) > 1]
    print(f"{len(modules)} modules, {sum(len(v) for v in graph.values())} dependencies under {args.folder}")
    if not cycles:
        print("no import circle")
        return 0
    for c in cycles:
        print("circle: " + ", ".join(name(m) for m in c))
    return 1


if __name__ == "__main__":
    sys.exit(main())
