"""A lint over the test modules: an assertion that holds a measured figure (a rate, a latency, a
CV, a duration, client/server agreement) to a numeric bound must say where the bound comes
from, on its line or in the comment lines just above it:
  # noise: ...   a bound on this host's spread, naming the dated result file under
                 docs/results/ its figure comes from (docs/results/2026-11-28-evidence/evidence.md)
  # exact: ...   not noise: arithmetic the test controls (requests in flight, a histogram's
                 stated error, a configured rate or quota)
A bound tuned to one lucky hour then shows as a bare number in review, and fails here.
`python ci/tests/bounds.py [FILE...]` prints each unnamed bound; exit 1 when there is one."""
import ast
import re
import sys
from pathlib import Path

# The figures a bound on them reads the host's noise: by the names the tests give them.
MEASURED = re.compile(r"rps|\brate\b|'rate'|p50|p9[59]|_ms\b|cv_percent|\bcv\b|latency|elapsed|seconds|gbit|cpu|utilization"
                      r"|per_core|ratio|interval|\bcap\b|\bclosed\b|\bhalf\b|\bone\b")
TAG = re.compile(r"#\s*(noise|exact):\s*(\S.*)")
# Where a noise figure is written down: a dated result file under docs/results/, written by the
# command that measured it (prose in the docs carries no figure of its own).
SOURCE = re.compile(r"docs/results/\S+\.\w+")


def literal(n):
    """A number other than 0 and 1 in N (alone or in arithmetic): a chosen bound."""
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
        return n.value not in (0, 1)
    if isinstance(n, ast.UnaryOp):
        return literal(n.operand)
    if isinstance(n, ast.BinOp):
        return literal(n.left) or literal(n.right)
    return False


def bounds(test):
    """The comparisons in an assertion's expression that hold a measured figure to a number."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Compare) and any(isinstance(o, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for o in sub.ops):
            sides = [sub.left, *sub.comparators]
            if any(literal(s) for s in sides) and any(MEASURED.search(ast.unparse(s)) for s in sides if not literal(s)):
                yield ast.unparse(sub)
        if isinstance(sub, ast.Call) and ast.unparse(sub.func) == "within" and len(sub.args) == 3 and literal(sub.args[2]):
            yield ast.unparse(sub)


def tag_of(lines, node):
    """The assertion's noise:/exact: comment: on its lines, or in the comment block above it."""
    for line in lines[node.lineno - 1:node.end_lineno]:
        if m := TAG.search(line):
            return m
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if m := TAG.search(lines[i]):
            return m
        i -= 1
    return None


def unnamed(path):
    """'file:line: why' for each assertion of PATH whose bound names no source."""
    src = Path(path).read_text()
    lines, out = src.splitlines(), []
    for node in ast.walk(ast.parse(src)):
        if not isinstance(node, ast.Assert):
            continue
        found = list(bounds(node.test))
        if not found:
            continue
        m = tag_of(lines, node)
        where = f"{Path(path).name}:{node.lineno}"
        if m is None:
            out.append(f"{where}: a bound with no '# noise:' or '# exact:' source: {found[0][:100]}")
        elif m[1] == "noise" and not SOURCE.search(m[2]):
            out.append(f"{where}: a noise bound must name its documented figure (a result file under docs/results/): {m[2][:80]}")
    return out


if __name__ == "__main__":
    files = sys.argv[1:] or sorted(str(p) for p in Path(__file__).parent.glob("*.py"))
    problems = [p for f in files for p in unnamed(f)]
    print("\n".join(problems) or "every bound names its source")
    sys.exit(1 if problems else 0)
