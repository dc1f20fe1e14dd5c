"""bench:tls's page and chart (bench/run/tls.py measures): the handshake matrix per ingress CPU
and the HTTP rows."""
from .charts import pyplot

# The reference row: the seeds' TLS 1.2, RSA-2048, a full handshake per connection.
REFERENCE = "tls12-rsa-none"


def fmt_interval(iv, f=",.0f"):
    if not iv:
        return "—"
    return f"{format(iv['ratio'], f)} ({format(iv['low'], f)} … {format(iv['high'], f)})" if iv["n"] > 1 else format(iv["ratio"], f)


def fmt_ratio(iv):
    if not iv:
        return "—"
    return f"{iv['ratio']:.2f}×" + (f" ({iv['low']:.2f} … {iv['high']:.2f})" if iv["paired_rounds"] > 1 else "")


def server_text(row):
    s = row.get("server")
    if not s:
        return "—"
    names = lambda d: "/".join(sorted(d))  # noqa: E731
    resumed = f"resumed {s['resumed'] / s['connections']:.0%} of {s['connections']:,}" if s["connections"] else "no connection"
    return f"{names(s['protocols'])} {names(s['ciphers'])} {names(s['groups'])}, {names(s['http'])}; {resumed}"


def tail(row, ref_name):
    """A row's cells from its per-CPU figure on: the figure, the ratio, the rate, the limit,
    client CPU, validity, the server's record; or the server's refusal."""
    if row["refused"]:
        return [f"refused by the server: {row['refused']}"] + [""] * 6
    return [fmt_interval(row["interval"]), "reference" if row["case"] == ref_name else fmt_ratio(row.get("vs_reference")),
            fmt_interval(row["rate_interval"]), row["limit"] or "—", "—" if row["client_cpu"] is None else f"{row['client_cpu']:.0%}",
            "yes" if row["valid"] else f"NOT VALID: {row['not_valid_because']}", server_text(row)]


def page(result):
    """tls.md: the handshake matrix and the HTTP rows."""
    r = result
    line = lambda cells: "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"  # noqa: E731
    lines = [f"# What today's TLS costs {r['variant']} on {r['platform']}", "",
             f"Handshakes per second per ingress CPU (its cgroup's time) by what the client asks, {r['rounds']} rounds, "
             f"the cells' order rotated each round, {r['duration']} each; the mean over the rounds with its t 95 % interval, "
             "and the ratio to the reference row (the seeds': TLS 1.2, RSA-2048, a full handshake per connection) paired by round. "
             f"RSA-2048 on `{r['variant']}`, ECDSA P-256 on `{r['ecdsa_variant']}`. The server's record: what it negotiated on the "
             "connections of each run's confirmation pass before its load (bench/run/tls_record.py), summed over the rounds.", "",
             "| TLS | key | resumption | handshakes/s per ingress CPU | vs reference | handshakes/s | the limit (rounds) | client CPU (max) | valid | the server's record |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [line([v, k.upper(), res, *tail(row, REFERENCE)]) for row in r["handshakes"] for v, k, res in [row["cell"]]]
    lines += [line(["1.2", "RSA / ECDSA", "session ID", "not a client's here: Go's TLS client resumes TLS 1.2 by tickets only "
                    "(`./task calibrate` measures wrk's session IDs)"] + [""] * 6), "",
              f"## HTTP/2 beside HTTP/1.1 over TLS (`{r['http2_variant']}`)", "",
              f"1 KB requests over keep-alive TLS connections (CONNECTIONS: {r['connections']}), requests per second per ingress CPU, "
              f"HTTP/2 with {r['streams']} streams in flight per connection (STREAMS).", "",
              "| protocol | req/s per ingress CPU | vs HTTP/1.1 | req/s | the limit (rounds) | client CPU (max) | valid | the server's record |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [line([row["title"], *tail(row, "http1")]) for row in r["http"]]
    return "\n".join(lines) + "\n"


def chart(result, path):
    """Each cell's handshakes per ingress CPU (the mean, its interval as the bar's whisker), the
    reference's level dashed; the HTTP rows beside, in requests."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100, layout="constrained", width_ratios=(4, 1))
    for ax, rows, label, unit in ((left, result["handshakes"], lambda r: f"{r['cell'][0]} {r['cell'][1].upper()}\n{r['cell'][2]}",
                                   "handshakes/s per ingress CPU"),
                                  (right, result["http"], lambda r: r["title"].replace(", ", "\n"), "req/s per ingress CPU")):
        shown = [r for r in rows if r.get("interval")]
        xs = range(len(shown))
        means = [r["interval"]["ratio"] for r in shown]
        err = [[m - r["interval"]["low"] for m, r in zip(means, shown)], [r["interval"]["high"] - m for m, r in zip(means, shown)]]
        colors = ["#1f77b4" if r["valid"] else "#bbbbbb" for r in shown]
        ax.bar(xs, means, yerr=err, color=colors, capsize=3)
        ax.set_xticks(list(xs), [label(r) for r in shown], fontsize=7)
        ax.set_ylabel(unit)
        if shown and shown[0]["case"] in (REFERENCE, "http1"):
            ax.axhline(means[0], color="#888", linestyle="--", linewidth=1)
    left.set_title(f"TLS on {result['variant']} ({result['platform']}): grey = NOT VALID (the client the limit)", fontsize=9)
    fig.savefig(path)
    plt.close(fig)
