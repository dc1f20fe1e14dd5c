"""The report: one run's page, and a comparison of several runs, from the files a run writes;
and the run's summary.json, assembled.

  python bench/report fetch RUN_DIR --prometheus URL   the run's time series -> RUN_DIR/timeseries.json
  python bench/report render RUN_DIR                   RUN_DIR/report.html, report.md, charts/*.svg
  python bench/report index DIR... [--out DIR]         report.html, report.md comparing every run found
  python bench/report check PAGE.html                  every image and local link of a page exists
  python bench/report summary RUN_DIR --times W U S --cpus N [--stub-before C --stub-after C]
                 [--usage-before U --usage-after U --host-cpus N]
                                                    k6's summary.json + client CPU + server counts
                                                    + each role's CPU (cgroups) and per ingress CPU
  python bench/report segments RUN_DIR --testid ID --variant V --platform P --stub-before C --stub-after C
                                 [--ingress-cpu BEFORE AFTER CPUS] [--ingress-throttling BEFORE AFTER]
                                 [--ingress-nic BEFORE AFTER]
                                                    a distributed run's summary.json from its segments
  python bench/report rounds DIR --exits RC... [--aborted SIGNAL]
                                                    the rounds' median and interval (bench/run/rounds.sh)

Prometheus is read only through the signal contract (monitoring/README.md: the bench:* rules
and k6's own series), never raw metrics. Bad input: one line `error: ...` and exit 2; a page
that fails `check` exits 1; a file that cannot be written (a full disk) one line and exit 3. Only the standard library and matplotlib (ci/tools/requirements.txt)."""
import argparse
import sys
import urllib.parse
from pathlib import Path

if not __package__:  # `python bench/report ...` runs this folder: import it as the package (PEP 366)
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    __package__ = "report"
    __spec__ = None  # else Python 3.13 warns on every import that __package__ != __spec__.parent

# The rest is imported by the command that needs it: every run starts this three times (its
# summary, series and page), and the whole package's import was half of each start's CPU.
from .run import Bad, Run  # noqa: E402
from .summary import assemble, segments, stub_reading, usage_reading  # noqa: E402


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error of the suite
        raise Bad(message)


def main(argv=None):
    p = Parser(prog="bench/report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="fetch|render|index|check|summary|segments|rounds")
    f = sub.add_parser("fetch", help="query Prometheus for the run's time series -> RUN_DIR/timeseries.json")
    f.add_argument("run_dir")
    f.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    f.add_argument("--timeout", type=float, default=10, help="seconds per query (default 10)")
    r = sub.add_parser("render", help="RUN_DIR/report.html, report.md and charts/")
    r.add_argument("run_dir")
    i = sub.add_parser("index", help="report.html and report.md comparing several runs")
    i.add_argument("paths", nargs="+", metavar="ROOT_OR_RUN")
    i.add_argument("--out", help="directory for the report (default: the runs' common parent)")
    c = sub.add_parser("check", help="every image and local link of a page exists (exit 1 if not)")
    c.add_argument("page")
    stub = dict(type=stub_reading, default=None, metavar="'ACCEPTS REQUESTS [SOURCE]'",
                help="the server's counts before/after the load (bench/lib/k6.sh stub_counts; empty: none)")
    s = sub.add_parser("summary", help="RUN_DIR/summary.json: k6's, plus the client's CPU and the server's "
                                       "counts; their lines into summary.txt")
    s.add_argument("run_dir")
    s.add_argument("--times", type=float, nargs=3, required=True, metavar=("WALL", "USER", "SYS"),
                   help="k6's wall, user and system seconds (bash time)")
    s.add_argument("--cpus", type=int, required=True, help="the CPUs k6 may use")
    s.add_argument("--stub-before", **stub)
    s.add_argument("--stub-after", **stub)
    usage = dict(type=usage_reading, default=None, metavar="LINES",
                 help="bench/platforms/monitoring/cgroups.sh usage before/after the load (empty: none)")
    s.add_argument("--usage-before", **usage)
    s.add_argument("--usage-after", **usage)
    s.add_argument("--host-cpus", type=int, default=None, help="the host's CPUs (with --usage-*)")
    g = sub.add_parser("segments", help="RUN_DIR/summary.json of a distributed run from its segment-<i>.json")
    g.add_argument("run_dir")
    for name in ("testid", "variant", "platform"):
        g.add_argument(f"--{name}", required=True)
    g.add_argument("--stub-before", **stub)
    g.add_argument("--stub-after", **stub)
    g.add_argument("--ingress-cpu", nargs=3, default=None, metavar=("BEFORE", "AFTER", "CPUS"),
                   help="an ingress you run: its CPU seconds before and after the load and the CPUs it may use, "
                        "as its Prometheus read them ('-': none)")
    g.add_argument("--ingress-throttling", nargs=2, default=None, metavar=("BEFORE", "AFTER"),
                   help="an ingress you run: its CFS periods and throttled periods before and after the load, "
                        "PERIODS/THROTTLED as its Prometheus read them ('-': none)")
    g.add_argument("--ingress-nic", nargs=2, default=None, metavar=("BEFORE", "AFTER"),
                   help="an ingress you run: the bytes its pods and its nodes' NICs carried before and after the load, "
                        "PODS/NICS as its Prometheus read them ('none': none)")
    o = sub.add_parser("rounds", help="DIR/rounds.json and summary.txt: the median and interval of DIR's rounds")
    o.add_argument("dir")
    o.add_argument("--exits", type=int, nargs="+", required=True, help="each round's exit code, in order")
    o.add_argument("--aborted", default=None, metavar="SIGNAL", help="a signal stopped the rounds")
    for cmd in (s, g):
        cmd.add_argument("--aborted", type=int, metavar="SECONDS", help="a signal cut the run short after SECONDS")
        cmd.add_argument("--signal", default=None, help="with --aborted: its name (SIGINT, SIGTERM)")
    try:
        a = p.parse_args(argv)
        if a.cmd == "fetch":
            u = urllib.parse.urlsplit(a.prometheus)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise Bad(f"--prometheus must be an http(s) URL, got '{a.prometheus}'")
            from .prometheus import fetch
            fetch(Run(a.run_dir), a.prometheus, a.timeout)
        elif a.cmd == "render":
            from .page import render
            return render(Run(a.run_dir))
        elif a.cmd == "index":
            from .index import index
            index(a.paths, a.out)
        elif a.cmd == "summary":
            print("\n".join(assemble(Path(a.run_dir), a.times, a.cpus, a.stub_before, a.stub_after, a.aborted, a.signal,
                                     (a.usage_before, a.usage_after), a.host_cpus)), file=sys.stderr)
        elif a.cmd == "segments":
            print("\n".join(segments(Path(a.run_dir), a.testid, a.variant, a.platform, a.stub_before, a.stub_after,
                                      a.aborted, a.signal, a.ingress_cpu, a.ingress_throttling, a.ingress_nic)))
        elif a.cmd == "rounds":
            from .rounds import rounds
            print("\n".join(rounds(a.dir, a.exits, a.aborted)))
        else:
            if not Path(a.page).is_file():
                raise Bad(f"{a.page}: no such page")
            from .doc import check_page
            problems = check_page(a.page)
            if problems:
                print(f"error: {a.page}: {'; '.join(problems)}", file=sys.stderr)
                return 1
    except Bad as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
    except OSError as e:  # a full disk, a directory gone: what could not be written, in one line
        print(f"error: cannot write {e.filename or 'the results'}: {e.strerror or e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
