"""Brings lines over the length limit under it without changing what the code does.

    python tools/wrap_long_lines.py FILE_OR_DIR...   # rewrites files in place; prints what it could not fix

Comments are rewrapped (a trailing comment moves above its line); a long string inside brackets is split into
implicitly concatenated pieces at a space; a long docstring line is broken at a space. Each file is kept only if its
syntax tree is unchanged (docstrings compared with whitespace collapsed); otherwise it is left as it was. Lines no rule
can shorten are listed for a hand fix (or `ruff format --range`).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

LIMIT = 120
MAX_GROWTH = 4  # lines one `ruff format --range` may add; beyond it the line is left for a hand fix


def _docstring_nodes(tree: ast.AST) -> list[ast.Constant]:
    """Docstrings and the other bare string statements (attribute docstrings): text with no effect on the code."""
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value,
                str)]


def _normalized_dump(src: str) -> str:
    tree = ast.parse(src)
    for node in _docstring_nodes(tree):
        node.value = " ".join(node.value.split())
    return ast.dump(tree)


def _break_at(text: str, start: int, limit: int, ok=lambda i: True) -> int | None:
    """The last index i in (start, limit] with text[i-1] a space (break after it), or None."""
    for i in range(min(limit, len(text) - 1), start, -1):
        if text[i - 1] == " " and text[i] != " " and ok(i):
            return i
    return None


def _wrap_comment(line: str) -> list[str]:
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()[1:].lstrip()
    out, cur = [], ""
    for word in body.split(" "):
        cand = f"{cur} {word}" if cur else word
        if len(indent) + 2 + len(cand) > LIMIT and cur:
            out.append(f"{indent}# {cur}")
            cur = word
        else:
            cur = cand
    out.append(f"{indent}# {cur}")
    return out


def _string_tokens(src: str) -> list[tuple[tokenize.TokenInfo, int]]:
    """Single-line string tokens with the bracket depth they sit at."""
    depth, out = 0, []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.STRING and tok.start[0] == tok.end[0]:
            out.append((tok, depth))
    return out


def _split_points_ok(tok: str, body_start: int, is_f: bool):
    """A predicate: may the string be cut before index i (outside braces of an f-string, not after a backslash)."""
    depth_at = [0] * (len(tok) + 1)
    d = 0
    i = body_start
    while i < len(tok):
        c = tok[i]
        if is_f and c in "{}" and i + 1 < len(tok) and tok[i + 1] == c:
            depth_at[i + 1] = d
            i += 2
            depth_at[i] = d
            continue
        if is_f and c == "{":
            d += 1
        elif is_f and c == "}":
            d -= 1
        i += 1
        depth_at[i] = d

    def ok(i: int) -> bool:
        return depth_at[i] == 0 and tok[i - 2 : i] != "\\ " and (i < 2 or tok[i - 2] != "\\")

    return ok


def _split_string_line(line: str, tok: tokenize.TokenInfo) -> list[str] | None:
    s, e = tok.start[1], tok.end[1]
    text = tok.string
    m = re.match(r"([rRbBfFuU]*)('''|\"\"\"|'|\")", text)
    if not m or m.group(2) in ("'''", '"""'):
        return None
    prefix, quote = m.group(1), m.group(2)
    body_start = len(prefix) + len(quote)
    ok = _split_points_ok(text, body_start, "f" in prefix.lower())
    cut = _break_at(text, body_start + 1, LIMIT - 1 - s, ok)
    if cut is None or cut >= len(text) - len(quote):
        return None
    indent = " " * s if s <= 80 else line[: len(line) - len(line.lstrip())] + "    "
    first = line[:s] + text[:cut] + quote
    rest = indent + prefix + quote + text[cut:] + line[e:]
    return [first, rest]


def _split_code_line(line: str, n: int, ops: dict[int, list[tuple[tokenize.TokenInfo, int]]]) -> list[str] | None:
    """Break after the last comma inside brackets that leaves the head within the limit; the rest hangs under the
    bracket the comma belongs to when that bracket opened on this line, else four spaces in."""
    toks = ops.get(n, [])
    opened: list[int] = []  # columns of brackets opened on this line and still open
    best = None
    for tok, depth in toks:
        if tok.string in "([{":
            opened.append(tok.end[1])
        elif tok.string in ")]}":
            if opened:
                opened.pop()
        elif tok.string == "," and depth > 0 and tok.end[1] <= LIMIT and tok.end[1] < len(line.rstrip()):
            best = (tok.end[1], opened[-1] if opened else None)
    if best is None:
        return None
    cut, col = best
    indent = line[: len(line) - len(line.lstrip())]
    hang = " " * col if col is not None and col <= 90 else indent + "    "
    head, rest = line[:cut].rstrip(), line[cut:].strip()
    if not rest or len(head) <= len(indent) + 8:
        return None
    return [head, hang + rest]


def _fix_docstring_lines(lines: list[str], src: str) -> None:
    tree = ast.parse(src)
    for node in _docstring_nodes(tree):
        for n in range(node.lineno, node.end_lineno + 1):
            line = lines[n - 1]
            if len(line) <= LIMIT:
                continue
            indent = line[: len(line) - len(line.lstrip())]
            cut = _break_at(line, len(indent) + 10, LIMIT)
            if cut is not None:
                lines[n - 1] = line[:cut].rstrip() + "\n" + indent + line[cut:]


def fix_source(src: str) -> str:
    for _ in range(12):
        lines = src.split("\n")
        if all(len(ln) <= LIMIT for ln in lines):
            return src
        new = _one_pass(src, lines)
        if new == src:
            return src
        src = new
    return src


def _one_pass(src: str, lines: list[str]) -> str:
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok
    ops: dict[int, list[tuple[tokenize.TokenInfo, int]]] = {}
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type == tokenize.OP and tok.start[0] == tok.end[0]:
            ops.setdefault(tok.start[0], []).append((tok, depth))
    strings: dict[int, list[tuple[tokenize.TokenInfo, int]]] = {}
    for tok, depth in _string_tokens(src):
        strings.setdefault(tok.start[0], []).append((tok, depth))
    out: list[str] = []
    for n, line in enumerate(lines, 1):
        if len(line) <= LIMIT:
            out.append(line)
            continue
        com = comments.get(n)
        if com is not None and com.start[1] == len(line) - len(line.lstrip()):
            out.extend(_wrap_comment(line))
            continue
        pinned = com is not None and re.search(r"noqa|type:|pragma", com.string)  # must stay on its line
        if com is not None and not pinned and len(line[: com.start[1]].rstrip()) <= LIMIT:
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(_wrap_comment(indent + com.string))
            out.append(line[: com.start[1]].rstrip())
            continue
        done = False
        for tok, depth in reversed(strings.get(n, [])):
            if depth > 0 and tok.start[1] < LIMIT - 12 and tok.end[1] > LIMIT:
                parts = _split_string_line(line, tok)
                if parts:
                    out.extend(parts)
                    done = True
                    break
        if not done:
            parts = _split_code_line(line, n, ops)
            if parts:
                out.extend(parts)
                done = True
        if not done:
            out.append(line)
    joined = "\n".join(out)
    lines = joined.split("\n")
    try:
        _fix_docstring_lines(lines, joined)
    except SyntaxError:
        return src
    return "\n".join(lines)


def fix_file(path: Path) -> list[str]:
    src = path.read_text()
    try:
        before = _normalized_dump(src)
        new = fix_source(src)
        ok = new != src and _normalized_dump(new) == before
    except (SyntaxError, tokenize.TokenError, ValueError):
        ok = False
        new = src
    if ok:
        path.write_text(new)
    final = new if ok else src
    return [f"{path}:{i}: {len(ln)}" for i, ln in enumerate(final.split("\n"), 1) if len(ln) > LIMIT]


def format_ranges(path: Path) -> None:
    """``ruff format --range`` on each statement still over the limit, bottom-up so line numbers hold."""
    lines = path.read_text().split("\n")
    for n in range(len(lines), 0, -1):
        if len(lines[n - 1]) > LIMIT:
            before = path.read_text()
            subprocess.run(["ruff", "format", "--range", f"{n}:1-{n}:{len(lines[n - 1]) + 1}", str(path)],
                           capture_output=True, check=False)
            after = path.read_text()
            if after.count("\n") - before.count("\n") > MAX_GROWTH:  # it reformatted a whole enclosing statement
                path.write_text(before)
            lines = path.read_text().split("\n")


def main(argv: list[str]) -> int:
    left: list[str] = []
    files = [f for arg in argv for f in ([Path(arg)] if Path(arg).is_file() else sorted(Path(arg).rglob("*.py")))]
    for f in files:
        if fix_file(f):
            before = _normalized_dump(f.read_text())
            format_ranges(f)
            if _normalized_dump(f.read_text()) != before:
                raise SystemExit(f"{f}: ruff format changed the syntax tree")
            left += fix_file(f)
    print("\n".join(left))
    print(f"{len(left)} lines still over {LIMIT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
