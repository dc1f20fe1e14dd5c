"""Documentation check: python ci/checks/docs.py [--root DIR] (default: this repository).
Prints one line per finding (`docs: PATH:LINE: message`, sorted) and exits 1 if there is any;
else one summary line and exit 0.

The docs are read as commands to copy and places to go: every `./task NAME` and `NAME=value`
they show must be accepted as shown, every link and anchor must land, and what `./task --list`
says must match the code. The Markdown checked: README.md, CONTRIBUTING.md, docs/**/*.md and
every other README.md; the source files (*.py *.sh *.js *.cjs *.go *.yaml *.yml) are read for
the doc paths and README sections they cite. Needs node (the settings validator) and PyYAML.
"""
import argparse
import bisect
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import yaml

# The system's own variables a doc may show set: not settings, and not the runtime's to declare
# (bench/settings/settings.yaml `environment:` lists those the runtime reads). Keep it short.
SYSTEM_VARIABLES = {
    "KUBECONFIG", "CI", "HOME", "PATH", "TMPDIR", "XDG_CACHE_HOME", "LC_ALL",  # the machine's
    "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY",  # Go's, for the xk6 build
    "NODE_OPTIONS",  # node's, for the dashboards' build
}
# k6's own options (K6_*), which the runtime sets for k6 and the docs explain.
SYSTEM_PREFIXES = ("K6_",)
README_MAX_LINES = 250
SOURCE_SUFFIXES = (".py", ".sh", ".js", ".cjs", ".go", ".yaml", ".yml")
# A generated view of settings.yaml: its findings are settings.yaml's, reported once there.
GENERATED = {"k6/lib/registry.js"}
# This check and its tests name broken paths and stale citations on purpose.
SELF = {"ci/checks/docs.py", "ci/tests/test_docs.py"}
# Result files are written by commands, which stamp the commit and the run they come from.
STAMPED = "docs/results/"


def repo_files(root):
    """Every file of the tree as a reader sees it: in a checkout git's list (tracked, and new
    files not ignored: a doc being written counts), else a walk; never .git, node_modules or
    the top-level results/ (runs' output)."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        files = {f for f in out.split("\0") if f}
    else:
        files = set()
        for d, dirs, names in os.walk(root):
            rel = Path(d).relative_to(root).as_posix()
            dirs[:] = [n for n in dirs if n not in (".git", "node_modules") and not (rel == "." and n == "results")]
            files |= {(Path(rel) / n).as_posix() for n in names}
    return sorted(f for f in files if "node_modules/" not in f and not f.startswith("results/") and (root / f).is_file())


def markdown_files(files):
    return [f for f in files if f in ("README.md", "CONTRIBUTING.md") or f.endswith("/README.md")
            or (f.startswith("docs/") and f.endswith(".md"))]


def source_files(files):
    return [f for f in files if f.endswith(SOURCE_SUFFIXES) and f not in GENERATED | SELF]


class Text:
    """A file's text, with offsets turned into line numbers."""

    def __init__(self, root, rel):
        self.rel = rel
        self.text = (root / rel).read_text(errors="replace")
        self._newlines = [m.start() for m in re.finditer("\n", self.text)]

    def line(self, offset):
        return bisect.bisect_left(self._newlines, offset) + 1


def blank(text, spans):
    """TEXT with each (start, end) of SPANS replaced by spaces, newlines kept: every offset and
    line number stays what it was."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = ["\n" if c == "\n" else " " for c in chars[start:end]]
    return "".join(chars)


FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)


class Markdown(Text):
    """A Markdown file split the way a reader sees it: `code` (each fenced block's lines and each
    inline code span, as (offset, text)), `prose` (fenced blocks blanked) and `plain` (code
    spans blanked too: what links are read from)."""

    def __init__(self, root, rel):
        super().__init__(root, rel)
        self.code, fenced, offset, fence = [], [], 0, None
        for line in self.text.splitlines(keepends=True):
            m = FENCE.match(line)
            closes = fence and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip()
            if fence is None and m:
                fence = m.group(1)
            elif closes:
                fence = None
            elif fence is not None:
                self.code.append((offset, line))
            if m or fence is not None:
                fenced.append((offset, offset + len(line)))
            offset += len(line)
        self.prose = blank(self.text, fenced)
        spans = list(CODE_SPAN.finditer(self.prose))
        self.code += [(m.start(2), m.group(2)) for m in spans]
        self.plain = blank(self.prose, [m.span() for m in spans])


# --- what the code defines --------------------------------------------------------------------

def mapping(node):
    """A YAML mapping node as {key: value node} ({} for anything else)."""
    return {k.value: v for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}


def taskfile_tasks(root):
    """Every task of Taskfile.yml and its includes: (taskfile, full name, desc, desc's line,
    internal). Read as YAML nodes, for the lines a finding points at."""
    out = []

    def read(rel, prefix, hidden):
        top = mapping(yaml.compose((root / rel).read_text()))
        for name, node in mapping(top.get("tasks")).items():
            task = mapping(node)
            desc = task.get("desc")
            internal = hidden or getattr(task.get("internal"), "value", "").lower() == "true"
            out.append((rel, prefix + name, desc.value if desc else "", desc.start_mark.line + 1 if desc else 0, internal))
        return top

    top = read("Taskfile.yml", "", False)
    for ns, node in mapping(top.get("includes")).items():
        spec = mapping(node)
        path = spec["taskfile"].value if spec else node.value
        internal = getattr(spec.get("internal"), "value", "").lower() == "true"
        read(os.path.normpath(path), ns + ":", internal)
    return out


def registry(root):
    """bench/settings/settings.yaml: ({setting name: entry}, the environment's names)."""
    data = yaml.safe_load((root / "bench/settings/settings.yaml").read_text())
    return {s["name"]: s for s in data["settings"]}, {e["name"] for e in data.get("environment") or []}


def closest(word, known):
    near = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.75)
    return f" (did you mean {near[0]}?)" if near else ""


# --- rule 1: tasks ------------------------------------------------------------------------------

# `./task` anywhere in code; a bare `task` only where a command starts (line start, after ; & |
# ( or a prompt's $), so that prose in a code block ("each task runs") is not read as a call.
TASK_CALL = re.compile(r"(?<![\w./-])(\./)?task(?![\w.-])")
COMMAND_START = re.compile(r"(?:^|[;&|(]|\$)\s*$")
TASK_NAME = re.compile(r"[a-z][a-z0-9-]*(?::[a-z0-9-]+)*")


def check_tasks(doc, tasks):
    """Every `./task NAME` a doc shows names a task: a renamed or removed task leaves commands
    that fail when copied."""
    found = []
    for offset, code in doc.code:
        for m in TASK_CALL.finditer(code):
            line_start = code.rfind("\n", 0, m.start()) + 1
            if not m.group(1) and not COMMAND_START.search(code[line_start:m.start()]):
                continue
            rest = code[m.end():].split("\n", 1)[0].split()
            words = [w for w in rest if not re.match(r"[A-Z][A-Z0-9_]*=", w)]  # settings go anywhere
            word = words[0].rstrip(".,;:)'\"") if words else ""
            if TASK_NAME.fullmatch(word) and word not in tasks:
                found.append((doc.rel, doc.line(offset + m.start()), f"unknown task '{word}'{closest(word, tasks)}"))
    return found


# --- rule 2: settings ---------------------------------------------------------------------------

SETTING = re.compile(r"(?<![\w$.{/-])([A-Z][A-Z0-9_]*)=('[^'\n]*'|\"[^\"\n]*\"|[^\s`'\"]*)")
# A value that stands for one: <overlay>, …, $X, {x}, 'dir...', or another upper-case name
# (RATE=N, P99_MS=SLO_P99_MS: no setting's value is upper case).
PLACEHOLDER = re.compile(r"[<>${…]|\.\.\.|^[A-Z][A-Z0-9_]*$")


def setting_mentions(doc):
    """(file, line, NAME, value) of every NAME=value a doc's code shows; value None when it is a
    placeholder (`VARIANT=<overlay>`, `RUNS='dir...'`)."""
    for offset, code in doc.code:
        for m in SETTING.finditer(code):
            raw = m.group(2)
            value = raw[1:-1] if raw[:1] in "'\"" else raw.rstrip(".,;:)")
            yield doc.rel, doc.line(offset + m.start()), m.group(1), None if not value or PLACEHOLDER.search(value) else value


def check_settings(root, mentions):
    """Every NAME=value a doc shows is a setting (or a variable the runtime or the system reads)
    with a value the registry accepts: the wrapper refuses anything else, so a stale example
    is a command that fails. Values are judged by the registry's own JavaScript rule
    (k6/lib/settings.js `setting`, as bench/run/cases.py check_values does), all in one node call."""
    settings, environment = registry(root)
    known = set(settings) | environment | SYSTEM_VARIABLES
    found, judged = [], []
    for rel, line, name, value in mentions:
        # a side's own (BASE_TARGET=...): the setting it names (bench/settings/settings.sh settings_from_args)
        side = re.match(r"^(BASE|HEAD|FROM|TO)_(.+)$", name)
        name = side.group(2) if side and side.group(2) in settings else name
        if name not in known and not name.startswith(SYSTEM_PREFIXES):
            found.append((rel, line, f"unknown setting '{name}'{closest(name, known)}"))
        elif name in settings and value is not None:
            judged.append((rel, line, name, value))
    if not judged:
        return found
    js = ("const { setting } = await import(process.argv[1]);\n"
          "let text = ''; for await (const chunk of process.stdin) text += chunk;\n"
          "console.log(JSON.stringify(JSON.parse(text).map(([name, value]) => {\n"
          "  try { setting({ [name]: value }, name); return null; } catch (e) { return e.message; }\n"
          "})));\n")
    r = subprocess.run(["node", "--input-type=module", "-e", js, (root / "k6/lib/settings.js").as_uri()],
                       input=json.dumps([[n, v] for _, _, n, v in judged]), capture_output=True, text=True, cwd=root)
    if r.returncode != 0:
        return found + [("k6/lib/settings.js", 1, f"node could not read the settings registry: {(r.stderr.strip().splitlines() or ['no output'])[-1]}")]
    return found + [(rel, line, error) for (rel, line, _, _), error in zip(judged, json.loads(r.stdout)) if error]


# --- rule 3: links, anchors and citations -------------------------------------------------------

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]+(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(\S+)", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def heading_texts(doc):
    """Each heading as a reader sees it: links by their text, code by its text."""
    return [re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).replace("`", "") for m in HEADING.finditer(doc.prose)]


def slug(text):
    """GitHub's anchor of a heading: lower case; only letters, digits, spaces, - and _; spaces to -."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(doc):
    """Every anchor of a doc: its headings' slugs (a repeated one -1, -2...) and its <a id>s."""
    seen, out = {}, set()
    for text in heading_texts(doc):
        base = s = slug(text.strip())
        while s in seen:
            seen[base] += 1
            s = f"{base}-{seen[base]}"
        seen[s] = 0
        out.add(s)
    return out | set(HTML_ANCHOR.findall(doc.prose))


class Tree:
    """The repository's files, each Markdown file parsed once."""

    def __init__(self, root, files):
        self.root, self.files, self._docs = root, set(files), {}
        self.top = {f.split("/")[0] for f in files if "/" in f}  # the repository's own folders

    def doc(self, rel):
        if rel not in self._docs:
            self._docs[rel] = Markdown(self.root, rel)
        return self._docs[rel]

    def missing(self, rel, anchor):
        """What is wrong with REL (a path from the root) and its ANCHOR; None when both land."""
        path = self.root / rel
        if rel.startswith("../") or not path.exists():
            return "no such file"
        if anchor and rel.endswith(".md") and path.is_file() and anchor not in anchors(self.doc(rel)):
            return f"no heading '{anchor}' in {rel}"
        return None


def check_links(tree, doc):
    """Every relative link and #anchor of a doc lands: a moved or renamed doc or heading leaves
    links that 404 or land at the top of a long page."""
    found = []
    targets = [(m.start(1), m.group(1)) for m in LINK.finditer(doc.plain)]
    targets += [(m.start(1), m.group(1)) for m in REFERENCE.finditer(doc.plain)]
    for offset, target in targets:
        target = target.strip("<>")
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        path = urllib.parse.unquote(path.split("?")[0])
        if not path:
            rel = doc.rel
        elif path.startswith("/"):
            rel = os.path.normpath(path.lstrip("/"))
        else:
            rel = os.path.normpath(os.path.join(os.path.dirname(doc.rel), path))
        problem = tree.missing(rel, urllib.parse.unquote(anchor))
        if problem:
            found.append((doc.rel, doc.line(offset), f"broken link '{target}': {problem}"))
    return found


# A repository path ending in .md, as a source names it (docs/concepts/statistics.md#the-steady-window):
# not inside a URL or a longer path, and not a file name a command writes (no folder: report.md).
MD_PATH = re.compile(r"(?<![\w./{}$<~-])((?:[\w.-]+/)+[\w.-]+\.md)\b(?!/)(?:#([\w-]+))?")


def check_doc_paths(tree, src):
    """Every repository path of a .md file a source file names exists, with its anchor: a
    comment or message pointing at a moved doc sends its reader nowhere."""
    found = []
    for m in MD_PATH.finditer(src.text):
        path = m.group(1)
        if path.split("/")[0] not in tree.top:  # not this repository's (another's, a run's output)
            continue
        problem = tree.missing(os.path.normpath(path), m.group(2))
        if problem:
            found.append((src.rel, src.line(m.start()), f"broken doc path '{m.group(0)}': {problem}"))
    return found


# A README section cited by name: README, "Settings" / README "Settings" / `xk6/README.md`,
# "Closer to wrk" / (README.md, Settings) / the README's Overlays section. Unquoted, only after
# a comma and up to ) or :, and not "this README, ..." (an ordinary sentence).
README_DOC = r"(?<![\w/.-])(?P<doc>(?:[\w.-]+/)*README(?:\.md)?)`?"
CITATIONS = [
    re.compile(README_DOC + r"(?:'s)?,?[ \t]*\\?[\"“](?P<section>[A-Za-z][^\"”\\\n]{0,79})\\?[\"”]"),
    re.compile(r"(?<!this )(?<!the )(?<!that )" + README_DOC + r", (?P<section>[A-Z][\w' -]{0,60}?)(?=[):])"),
    re.compile(README_DOC + r"'s (?P<section>[A-Z][\w -]{0,60}?) section\b"),
]


def check_citations(tree, src):
    """A README section cited by its title must still be a heading of that README: the README is
    being cut to a page, and a citation of a section that moved to docs/ must give that doc's
    path (a link or a path this check can follow), not a title nobody can find."""
    found = []
    for pattern in CITATIONS:
        for m in pattern.finditer(src.text):
            rel = m.group("doc") if m.group("doc").endswith(".md") else m.group("doc") + ".md"
            section = m.group("section").strip()
            where = (src.rel, src.line(m.start()))
            if rel not in tree.files:
                found.append((*where, f"cites {rel}, which does not exist"))
                continue
            headings = [h.strip().lower() for h in heading_texts(tree.doc(rel))]
            if not any(re.match(re.escape(section.lower()) + r"(?:$|:|,|\s*\()", h) for h in headings):
                found.append((*where, f"cites {rel}'s section \"{section}\", which is no heading there: cite the doc's path instead"))
    return found


# --- rule 4: the README's length ----------------------------------------------------------------

def check_length(doc):
    """The README is the project's front page: what does not fit on one belongs in docs/."""
    n = len(doc.text.splitlines())
    return [(doc.rel, README_MAX_LINES + 1, f"{n} lines, at most {README_MAX_LINES}: move the rest into docs/")] if n > README_MAX_LINES else []


# --- rule 5: hashes, run ids and issue numbers --------------------------------------------------

URL = re.compile(r"<?https?://[^\s)>\]]+")
HASH = re.compile(r"(?<![\w./#-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
RUN_ID = re.compile(r"(?<![\w-])c\d{1,3}(?![\w-])")
ISSUE = re.compile(r"\bissues?\s+#?\d+(?:(?:\s*,\s*|\s+and\s+|\s+or\s+)#?\d+)*", re.I)
BARE_NUMBER = re.compile(r"(?<![\w/#&\[])#\d+\b")
UNEXPLAINED = [(HASH, "a commit hash"), (RUN_ID, "a suite-run id"), (ISSUE, "an issue number"), (BARE_NUMBER, "an issue number")]


def check_references(doc):
    """A commit hash, a suite run's id or an issue number explains nothing to a reader who has
    not got them: the doc must say what happened. (Result files stamp their commit: exempt.)"""
    text, found = URL.sub(lambda m: " " * len(m.group(0)), doc.text), []
    for pattern, what in UNEXPLAINED:
        matches = list(pattern.finditer(text))
        found += [(doc.rel, doc.line(m.start()), f"{what} '{m.group(0)}': say what it stands for instead") for m in matches]
        text = blank(text, [m.span() for m in matches])  # "issues 49 and #50" is one finding, not two
    return found


# --- rule 6: ./task --list ----------------------------------------------------------------------

SINGLE_NODE = re.compile(r"\b(?:single[- ]node|one node)\b", re.I)
NODE_COUNT = re.compile(r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten)[ -]nodes?\b", re.I)
NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}


def check_task_list(root):
    """`./task --list` is the manual's first page (the Taskfile's descs): bench:change's must name
    every kind of change CHANGE accepts, and no desc may state a node count the NODES default
    does not give."""
    settings, _ = registry(root)
    kinds = settings.get("CHANGE", {}).get("values") or []
    nodes = int(settings["NODES"]["default"]) if "NODES" in settings else None
    found = []
    for rel, name, desc, line, _ in taskfile_tasks(root):
        if name == "bench:change":
            missing = [k for k in kinds if not re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", desc)]
            if missing:
                found.append((rel, line, f"bench:change's desc does not name CHANGE {', '.join(missing)} (bench/settings/settings.yaml)"))
        if nodes is None:
            continue
        if nodes != 1 and (m := SINGLE_NODE.search(desc)):
            found.append((rel, line, f"{name}'s desc says '{m.group(0)}', but NODES defaults to {nodes}"))
        for m in NODE_COUNT.finditer(desc):
            n = int(m.group(1)) if m.group(1).isdigit() else NUMBERS[m.group(1).lower()]
            if n != nodes:
                found.append((rel, line, f"{name}'s desc says '{m.group(0)}', but NODES defaults to {nodes}"))
    return found


# --- rule 7: every result set listed ------------------------------------------------------------

RESULTS_INDEX = "docs/results/README.md"


def check_results_index(tree):
    """Every result set under docs/results/ is linked from its index: a figure the docs quote is
    found from there, and a set nobody lists is a figure nobody can find."""
    sets = sorted({f.split("/")[2] for f in tree.files if f.startswith(STAMPED) and f.count("/") >= 3})
    if RESULTS_INDEX not in tree.files:
        return [(RESULTS_INDEX, 1, "no index of the result sets")] if sets else []
    index = tree.doc(RESULTS_INDEX)
    linked = {m.group(1).strip("<>").split("/")[0] for m in LINK.finditer(index.plain)}
    return [(RESULTS_INDEX, 1, f"result set '{s}' is not listed") for s in sets if s not in linked]


# --- the check ----------------------------------------------------------------------------------

def check(root):
    """(findings, Markdown files, source files) of the tree at ROOT."""
    files = repo_files(root)
    tree = Tree(root, files)
    docs = [tree.doc(f) for f in markdown_files(files)]
    sources = [Text(root, f) for f in source_files(files)]
    tasks = {name for _, name, _, _, internal in taskfile_tasks(root) if not internal}
    found = check_settings(root, [m for doc in docs for m in setting_mentions(doc)])
    for doc in docs:
        found += check_tasks(doc, tasks) + check_links(tree, doc) + check_citations(tree, doc)
        if doc.rel == "README.md":
            found += check_length(doc)
        if not doc.rel.startswith(STAMPED):
            found += check_references(doc)
    for src in sources:
        found += check_doc_paths(tree, src) + check_citations(tree, src)
    found += check_task_list(root) + check_results_index(tree)
    return sorted(set(found)), len(docs), len(sources)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the repository (default: this one)")
    root = parser.parse_args().root.resolve()
    if not shutil.which("node"):
        print("docs: node is not installed (it runs the settings validator, k6/lib/settings.js): run './task tools'")
        return 1
    found, docs, sources = check(root)
    for rel, line, message in found:
        print(f"docs: {rel}:{line}: {message}")
    if not found:
        print(f"docs: {docs} Markdown and {sources} source files: every task, setting, link and anchor resolves")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
