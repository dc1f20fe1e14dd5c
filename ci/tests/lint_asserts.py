"""A lint over the test modules: an assertion that cannot fail, or that accepts every outcome,
proves nothing. Beside bounds.py (a measured figure's bound must name its source), it flags:
  exit-any     an exit code accepted from a set holding 0 and 99 (`rc in (0, 99)`): 99 is a
               crossed k6 threshold; a test sets the thresholds it does not test out of reach
               and asserts one outcome
  every-word   `x in (...)` over every word one of the product's verdicts can say (a relation's
               holds, bench:compare's verdict or its metrics' says)
  own-interval an interval checked against its own estimate (`iv["low"] <= iv["ratio"] <=
               iv["high"]`, or `low <= ratio <= high` unpacked from one interval): a t interval
               is built around its estimate
  empty-all    `all(...)` over a list that nothing in the test asserts non-empty: true of none
A case that is fine says why in a `# lint: <reason>` comment on the assertion's line or in the
comment lines just above it; exit-any never is: a run's thresholds are in its summary, so the
one exit code they make is known (conftest.exits_as_its_thresholds). `python ci/tests/lint_asserts.py [FILE...]` prints each finding;
exit 1 when there is one."""
import ast
import sys
from pathlib import Path

# Every word each verdict can say (bench/run/tables.py: a relation's holds; bench/run/compare.py).
OUTCOMES = {
    "a relation's holds": {"yes", "no", "undecided", "not here"},
    "bench:compare's verdict": {"pass", "regression", "unstable", "undecided"},
    "bench:compare's says": {"REGRESSION", "better", "worse, within tolerance", "no change", "undecided", "shown, not judged", "no value"},
}
ENDS = ("low", "lo")
MIDDLES = ("ratio", "median", "mid", "value")
HIGHS = ("high", "hi")


def waived(lines, node):
    for line in lines[node.lineno - 1:node.end_lineno]:
        if "# lint:" in line and line.split("# lint:", 1)[1].strip():
            return True
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if "# lint:" in lines[i] and lines[i].split("# lint:", 1)[1].strip():
            return True
        i -= 1
    return False


def literal_set(n):
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in n.elts):
        return {e.value for e in n.elts}
    return None


def part(n):
    """(base, key) of x["key"], x.key or a bare name (base None)."""
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
        return ast.unparse(n.value), n.slice.value
    if isinstance(n, ast.Attribute):
        return ast.unparse(n.value), n.attr
    if isinstance(n, ast.Name):
        return None, n.id
    return None, None


def own_interval(cmp, unpacked):
    """low <= mid (<= high) whose parts are one interval's."""
    sides = [cmp.left, *cmp.comparators]
    if len(sides) < 2 or not all(isinstance(o, (ast.Lt, ast.LtE)) for o in cmp.ops):
        return False
    parts = [part(s) for s in sides]
    keys = [k for _, k in parts]
    if not (keys[0] in ENDS and keys[1] in MIDDLES and (len(keys) == 2 or keys[2] in HIGHS)):
        return False
    bases = {b for b, _ in parts}
    if len(bases) == 1 and None not in bases:
        return True
    # bare names unpacked together from one expression: low, ratio, high = ...
    return bases == {None} and any(set(keys) <= group for group in unpacked)


def earlier_asserts(func, before):
    """What FUNC's assertions before line BEFORE hold, each as one expression's text: a list
    one of them is about (`assert xs`, `len(xs) == 3`, `sorted(xs) == [...]`) is not empty."""
    said = set()
    for a in (a for a in ast.walk(func) if isinstance(a, ast.Assert) and a.lineno < before):
        tops = a.test.values if isinstance(a.test, ast.BoolOp) and isinstance(a.test.op, ast.And) else [a.test]
        said |= {ast.unparse(t) for t in tops if isinstance(t, (ast.Name, ast.Subscript, ast.Attribute))}  # `assert xs`
        # a comparison with nothing (`xs == []`, `len(xs) == 0`) says the opposite: skip its sides
        nothing = {id(x) for c in ast.walk(a.test) if isinstance(c, ast.Compare) and any(map(empty, c.comparators))
                   for x in ast.walk(c)}
        for n in (n for n in ast.walk(a.test) if id(n) not in nothing):
            if isinstance(n, ast.Call) and ast.unparse(n.func) in ("len", "sorted", "set") and n.args:
                said.add(ast.unparse(n.args[0]))
            elif isinstance(n, ast.Compare) and any(isinstance(o, ast.Eq) for o in n.ops):
                said.add(ast.unparse(n.left))
    return said


def empty(n):
    """0, or an empty literal: [], (), {}, "", set()."""
    if isinstance(n, ast.Constant):
        return n.value in (0, "") and not isinstance(n.value, bool)
    if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
        return not n.elts
    if isinstance(n, ast.Dict):
        return not n.keys
    return isinstance(n, ast.Call) and ast.unparse(n) in ("set()", "list()", "dict()", "tuple()")


def findings(path):
    src = Path(path).read_text()
    lines, tree, out = src.splitlines(), ast.parse(src), []
    where = lambda n: f"{Path(path).name}:{n.lineno}"  # noqa: E731
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for func in funcs:
        unpacked = [{e.id for e in t.elts if isinstance(e, ast.Name)} for s in ast.walk(func) if isinstance(s, ast.Assign)
                    for t in s.targets if isinstance(t, ast.Tuple)]
        for node in (n for n in ast.walk(func) if isinstance(n, ast.Assert)):
            excused = waived(lines, node)
            for sub in ast.walk(node.test):
                if isinstance(sub, ast.Compare):
                    for op, right in zip(sub.ops, sub.comparators):
                        words = literal_set(right) if isinstance(op, ast.In) else None
                        if words is None:
                            continue
                        if {0, 99} <= words:
                            out.append(f"{where(node)}: exit-any: accepts exit {sorted(words)}: assert the one outcome (thresholds it does not test out of reach)")
                        if excused:
                            continue
                        for name, every in OUTCOMES.items():
                            if every <= words:
                                out.append(f"{where(node)}: every-word: accepts every word of {name}: assert the one outcome")
                    if own_interval(sub, unpacked) and not excused:
                        out.append(f"{where(node)}: own-interval: an interval checked against its own estimate cannot fail")
                if not excused and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "all" and sub.args:
                    arg = sub.args[0]
                    it = arg.generators[0].iter if isinstance(arg, (ast.GeneratorExp, ast.ListComp)) else arg
                    # `xs and all(... for x in xs)` (or `d and all(... in d.values())`) says it is not empty
                    text = ast.unparse(it)
                    guarded = isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) and \
                        any(v is not sub and (text.startswith(ast.unparse(v)) or f"len({text})" in ast.unparse(v)) for v in node.test.values)
                    if isinstance(it, (ast.Tuple, ast.List)) and it.elts:  # a literal of some elements
                        continue
                    named = any(text == x or text.startswith((x + ".", x + "[")) for x in earlier_asserts(func, node.lineno))
                    if not guarded and not named:
                        out.append(f"{where(node)}: empty-all: all() over {ast.unparse(it)[:60]}, never asserted non-empty, is true of none")
    return sorted(set(out), key=lambda x: (x.split(":")[0], int(x.split(":")[1])))


if __name__ == "__main__":
    files = sys.argv[1:] or sorted(str(p) for p in Path(__file__).parent.glob("test_*.py"))
    problems = [p for f in files for p in findings(f)]
    print("\n".join(problems) or "no assertion accepts every outcome")
    sys.exit(1 if problems else 0)
