"""A page as blocks, written as HTML and as Markdown from the same content; and the check that
a written page's images and local links exist."""
import html
import urllib.parse
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path


class Link:
    def __init__(self, text, href):
        self.text, self.href = text, href


def href(target):
    """A link's target as written: a local file's name quoted, an address as it is."""
    return target if urllib.parse.urlsplit(target).scheme else urllib.parse.quote(target)


class Doc:
    """A page as blocks, written as HTML and as Markdown from the same content."""

    def __init__(self, title, subtitle, wide=False):
        self.title, self.subtitle, self.wide, self.blocks = title, subtitle, wide, []

    def add(self, kind, *args, **kw):
        self.blocks.append((kind, args, kw))

    def html(self):
        e = html.escape
        body = '<body class="wide">' if self.wide else "<body>"
        out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
               f"<title>{e(self.title)}</title><style>{CSS}</style></head>{body}",
               f"<h1>{e(self.title)}</h1>", f'<p class="sub">{e(self.subtitle)}</p>']

        def cell(c):
            if isinstance(c, Link):
                return f'<a href="{e(href(c.href))}">{e(c.text)}</a>'
            return e(str(c))

        for kind, a, kw in self.blocks:
            ident = f' id="{e(kw["id"])}"' if kw.get("id") else ""
            if kind == "h2":
                out.append(f"<h2{ident}>{e(a[0])}</h2>")
            elif kind == "p":
                cls = f' class="{kw["cls"]}"' if kw.get("cls") else ""
                out.append(f"<p{ident}{cls}>{cell(a[0])}</p>")
            elif kind == "cards":
                out.append(f'<div class="cards"{ident}>' + "".join(
                    f'<div class="card"><div class="v">{e(v)}</div><div class="l">{e(l)}</div></div>'
                    for l, v in a[0]) + "</div>")
            elif kind == "table":
                head = "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in a[0]) + "</tr></thead>" if any(a[0]) else ""
                out.append(f"<table{ident}>{head}<tbody>" + "".join(
                               "<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in a[1])
                           + "</tbody></table>")
            elif kind == "img":
                out.append(f'<figure{ident}><img src="{e(urllib.parse.quote(a[0]))}" alt="{e(a[1])}">'
                           f"<figcaption>{e(a[2])}</figcaption></figure>")
        out.append("</body></html>\n")
        return "\n".join(out)

    def markdown(self):
        def cell(c):
            t = f"[{c.text}]({href(c.href)})" if isinstance(c, Link) else str(c)
            return t.replace("|", "\\|").replace("\n", " ")

        def table(head, rows):
            return "\n".join(["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
                             + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])

        out = [f"# {self.title}", "", self.subtitle]
        for kind, a, kw in self.blocks:
            out.append("")
            if kind == "h2":
                out.append(f"## {a[0]}")
            elif kind == "p":
                out.append(("**" + cell(a[0]) + "**") if kw.get("cls") else cell(a[0]))
            elif kind == "cards":
                out.append(table([l for l, _ in a[0]], [[v for _, v in a[0]]]))
            elif kind == "table":
                out.append(table(a[0], a[1]))
            elif kind == "img":
                out.append(f"![{a[1]}]({urllib.parse.quote(a[0])})\n\n*{a[2]}*")
        return "\n".join(out) + "\n"


CSS = """
body{font:15px/1.45 system-ui,sans-serif;color:#222;max-width:1120px;margin:0 auto;padding:16px 24px}body.wide{max-width:1500px}
h1{font-size:24px;margin:8px 0 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.sub{color:#666;margin:2px 0 12px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card .v{font-size:22px;font-weight:600}.card .l{color:#666;font-size:13px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 9px;text-align:left;vertical-align:top}
th{background:#f4f4f4}
.pass,.fail,.warn{padding:6px 12px;border-radius:6px;font-weight:600}
.pass{background:#e3f4e3}.fail{background:#fbe1e1}.warn{background:#fdf1d6}
figure{margin:8px 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#666;font-size:13px}
a{color:#6a3d9a}
"""


def write_doc(doc, out_dir):
    for name, text in (("report.html", doc.html()), ("report.md", doc.markdown())):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out_dir / name)


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.refs.append(("img", a.get("src") or ""))
        elif tag == "a" and a.get("href"):
            self.refs.append(("a", a["href"]))


def check_page(page):
    """Problems of a page: an image that is missing, empty or not a PNG or SVG, a local link to
    nothing. Remote links and fragments are not followed."""
    page = Path(page)
    parser = Refs()
    parser.feed(page.read_text())
    problems = []
    for tag, ref in parser.refs:
        u = urllib.parse.urlsplit(ref)
        if u.scheme or u.netloc or (not u.path and tag == "a"):
            continue
        f = page.parent / urllib.parse.unquote(u.path)
        if not f.is_file():
            problems.append(f"{ref} is missing")
        elif tag == "img" and not image_ok(f):
            problems.append(f"{ref} is not a whole PNG or SVG")
    return problems


def image_ok(f):
    """A PNG by its signature; an SVG that parses as XML with an svg root (a chart cut short by a
    full disk does not)."""
    if f.suffix == ".svg":
        try:
            return ET.parse(f).getroot().tag == "{http://www.w3.org/2000/svg}svg"
        except ET.ParseError:
            return False
    with f.open("rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n"
