#!/usr/bin/env python3
"""The house's rooms and what their files use of each other.

Reads every file under src/ (test modules left out, inline or in files of their own), resolves each `crate::`, `super::` and `self::` path it
uses (through `pub use` re-exports) to the file that defines it, and reports:

- circles: files of one room (a folder under src/) that reach each other through uses;
- with --arrows, per folder the children that use its own file's definitions (arrows
  back up, which make a folder read upside down);
- the largest files.

Exits 1 when a circle exists, so CI can hold the line. Usage: scripts/rooms.py [--top N] [--arrows] [--edges]
"""

import os
import re
import sys
from pathlib import Path

SRC = Path(os.environ.get("ROOMS_SRC", Path(__file__).resolve().parent.parent / "src"))


def module_of(path: Path) -> tuple:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"pub\(in [\w:]+\)", "pub", text)  # a visibility, not a use
    return strip_tests(re.sub(r"//[^\n]*", "", text))


def strip_tests(text: str) -> str:
    """Without its `#[cfg(test)] mod ... { }` blocks: a test may reach up the room to fit
    a whole model; what the code itself uses is what makes a circle."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([\w:]+\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]


def expand_use(tree: str) -> list:
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (`x as y` is x)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix: str, s: str):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for item in items:
            if not item:
                continue
            brace = item.find("{")
            if brace >= 0 and item.endswith("}"):
                walk(prefix + item[:brace], item[brace + 1 : -1])
            else:
                out.append(prefix + item)

    walk("", tree)
    return out


def main():
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 8
    files = {module_of(p): p for p in SRC.rglob("*.rs")}
    # Test modules kept in files of their own (`#[cfg(test)] mod tests;`) are tests too.
    for m, p in list(files.items()):
        for name in re.findall(r"#\[cfg\(test\)\]\s*mod\s+(\w+)\s*;", p.read_text()):
            files.pop(m + (name,), None)
    texts = {m: strip_comments(p.read_text()) for m, p in files.items()}
    # Re-exports: (module, name) -> the path it stands for.
    reexports = {}
    uses = {}
    for m, text in texts.items():
        paths = []
        for vis, tree in re.findall(r"(pub(?:\([\w:]+\))?\s+)?use\s+([^;]+);", text):
            for p in expand_use(tree):
                paths.append((bool(vis), p))
                if vis:
                    reexports[(m, p.split("::")[-1])] = (m, p)
        # (Not the prefix of a use tree, `crate::a::{b, c}`: its paths are read above.)
        for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+\b(?!::[\w{])", text):
            paths.append((False, p))
        uses[m] = paths

    def absolute(m: tuple, path: str) -> list:
        parts = path.split("::")
        if parts[0] == "crate":
            return parts[1:]
        base = list(m)
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
        if not path.startswith(("super", "self")):
            # A path relative to this module (a child module's item).
            if tuple(base + parts[:1]) not in files:
                return []
        return base + parts

    def resolve(parts: list, depth: int = 0):
        """The file (module) that defines what `parts` names."""
        for i in range(len(parts), 0, -1):
            mod = tuple(parts[:i])
            if mod in files:
                if i < len(parts) and depth < 8:
                    key = (mod, parts[i])
                    if key in reexports:
                        src_mod, p = reexports[key]
                        target = absolute(src_mod, p)
                        if target:
                            return resolve(target + parts[i + 1 :], depth + 1)
                return mod
        return None

    # Per folder: its direct children (a sub-folder counts as one) and its own file.
    edges = {}
    for m, paths in uses.items():
        for reexport, p in paths:
            if reexport:
                continue  # a module's own front door, not a dependency of its code
            parts = absolute(m, p)
            target = resolve(parts) if parts else None
            if not target:
                continue
            # The deepest folder holding both, and the child of it each lies in.
            common = 0
            while common < min(len(m), len(target)) and m[common] == target[common]:
                common += 1
            if common == 0 or m == target:
                continue  # another room: layering, not a circle
            a = m[: common + 1] if len(m) > common else m + ("(own file)",)
            b = target[: common + 1] if len(target) > common else target + ("(own file)",)
            # A folder's own file using its children is its structure, not a circle.
            if a != b and a[-1] != "(own file)":
                edges.setdefault(a, set()).add(b)
    if "--arrows" in sys.argv:
        # Arrows back up: a folder's children that use what its own file (mod.rs) defines
        # rather than re-exports. A folder whose face is only `mod` lines and re-exports
        # reads top-down and counts 0.
        up = {}
        for a, bs in edges.items():
            for b in bs:
                if b[-1] == "(own file)":
                    up[b[:-1]] = up.get(b[:-1], 0) + 1
        for folder, n in sorted(up.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"arrows up into {'/'.join(folder)}: {n}")
        print(f"arrows up in all: {sum(up.values())}")
    if "--edges" in sys.argv:
        for a, bs in sorted(edges.items()):
            print("/".join(a), "->", ", ".join(sorted("/".join(b) for b in bs)))
    circles = strongly_connected(edges)
    name = lambda m: "/".join(m) or "crate"
    for c in circles:
        print("circle:", " <-> ".join(sorted(name(m) for m in c)))
    print(f"{len(circles)} circle(s) inside rooms")
    sizes = sorted(((len(files[m].read_text().splitlines()), name(m)) for m in files), reverse=True)
    print("largest files:", ", ".join(f"{n} ({l})" for l, n in sizes[:top]))
    sys.exit(1 if circles else 0)


def strongly_connected(edges: dict) -> list:
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            if len(comp) > 1:
                out.append(comp)

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    main()
