"""The live page's rendering of dashboards/generate.py's panel list: Perses 0.52's panels and
variables from the renderer-neutral Panel, and the lint that refuses a Panel the page cannot show
as Grafana does (generate.py builds the dashboard and calls these)."""
import re


# What the live page (Perses 0.52) renders of a Panel, by the Panel's Grafana names. A name
# missing here is a panel the page cannot show as Grafana does: unsupported() refuses it.
LIVE = {
    "kind": {"timeseries": "TimeSeriesChart", "stat": "StatChart"},
    # Perses has no free suffix: a "suffix: X" unit maps to the nearest of its own, the
    # panel's title naming the quantity.
    "unit": {"reqps": "requests/sec", "s": "seconds", "percentunit": "percent-decimal", "bps": "bits/sec",
             "pps": "packets/sec", "short": "decimal", "suffix: cores": "decimal", "suffix: iter/s": "counts/sec",
             # A count in full, as Grafana's "none" shows it.
             "none": {"unit": "decimal", "shortValues": False},
             "suffix: handshakes/s": "counts/sec", "suffix: req/s per core": "decimal"},
    "calc": {"mean": "mean", "max": "max", "lastNotNull": "last-number"},
    # Grafana's palette names, as the colours Grafana draws them.
    "color": {"green": "#73BF69", "orange": "#FF9830", "red": "#F2495C", "blue": "#5794F2"},
    # Perses' built-in variables and the dashboard's own ($__interval, $__rate_interval and
    # $__range are Perses' too).
    "variables": {"__interval", "__rate_interval", "__range", "variant", "scenario", "testid"},
}
VARIABLE = re.compile(r"\$\{?(\w+)")


def unsupported(panel):
    """Why the live page cannot render PANEL as Grafana does, one reason per problem."""
    why = [f"{what} {value!r}" for what, value in (("kind", panel.kind), ("unit", panel.unit), ("calc", panel.calc))
           if value is not None and value not in LIVE[what]]
    why += [f"colour {c!r}" for _, c in panel.steps or [] if c not in LIVE["color"]]
    why += [f"variable ${v}" for expr, legend in panel.targets for v in VARIABLE.findall(expr)
            if v not in LIVE["variables"]]
    if panel.ceiling and not any(re.fullmatch(panel.ceiling, legend) for _, legend in panel.targets):
        why.append(f"ceiling {panel.ceiling!r} matches no legend")
    return [f"panel {panel.title!r}: the live page has no counterpart for {w}" for w in why]


def perses_thresholds(steps):
    (_, base), *rest = steps
    return {"defaultColor": LIVE["color"][base], "steps": [{"value": v, "color": LIVE["color"][c]} for v, c in rest]}


def perses_panel(panel):
    unit = LIVE["unit"][panel.unit]
    unit = unit if isinstance(unit, dict) else {"unit": unit}
    if panel.kind == "stat":
        spec = {"calculation": LIVE["calc"][panel.calc], "format": unit, "sparkline": {},
                "thresholds": perses_thresholds(panel.steps)}
    else:
        spec = {"legend": {"position": "bottom", "mode": "table", "values": ["mean", "max"]},
                "yAxis": {"format": unit, "min": 0}, "visual": {"areaOpacity": 0.1, "lineWidth": 1.25}}
        if panel.steps:
            spec["thresholds"] = perses_thresholds(panel.steps)
        if panel.ceiling:
            spec["querySettings"] = [{"queryIndex": i, "lineStyle": "dashed", "areaOpacity": 0}
                                     for i, (_, legend) in enumerate(panel.targets) if re.fullmatch(panel.ceiling, legend)]
    return {"kind": "Panel", "spec": {
        "display": {"name": panel.title, "description": panel.desc},
        "plugin": {"kind": LIVE["kind"][panel.kind], "spec": spec},
        "queries": [{"kind": "TimeSeriesQuery", "spec": {"plugin": {"kind": "PrometheusTimeSeriesQuery", "spec": {
            "query": expr, "seriesNameFormat": legend}}}} for expr, legend in panel.targets]}}


def perses_variable(name, label, query, sort="alphabetical-asc"):
    """A Grafana label_values(SELECTOR, LABEL) variable as Perses' label-values one."""
    selector, label_name = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
    return {"kind": "ListVariable", "spec": {
        "name": name, "display": {"name": label}, "allowMultiple": True, "allowAllValue": True,
        "customAllValue": ".*", "sort": sort,
        "plugin": {"kind": "PrometheusLabelValuesVariable", "spec": {"labelName": label_name, "matchers": [selector]}}}}
