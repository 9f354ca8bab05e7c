"""The review page: one self-contained HTML document from a :class:`~dphist.products.review.gather.Review`.

Self-contained: CSS inline, pictures as ``data:`` URIs, no script, no font, image or style fetched from anywhere,
so the page opens the same offline, in an archive and printed to PDF (``@media print``: A4 or Letter, nothing cut
off).  Every text taken from the release or the ledger (table, column and category names, file names, the
report's sentences) goes through :func:`html.escape`: a category label is data-derived and may hold markup.

The sections, in order, with their ids (:data:`SECTIONS`): at a glance, what to watch, what was released, how
private (with the ledger), how accurate.  Each released table has one ``<table class="cells">`` listing its cells.
"""

from __future__ import annotations

import html
import math

from .figures import Figure, table_figure_uri
from .gather import MAX_CELLS_LISTED, Review, TableFacts

__all__ = ["render", "SECTIONS"]

#: The page's sections: (id, heading).
SECTIONS = (("glance", "At a glance"), ("watch", "What to watch"), ("released", "What was released"),
            ("privacy", "How private"), ("ledger", "The ledger"), ("accuracy", "How accurate"))

_SYMBOLS = {"epsilon": "ε", "rho": "ρ"}

_CSS = """
:root { --ink: #1b1f24; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; --danger: #b3261e; --warn: #9a6700;
        --ok: #1a7f37; --info: #0969da; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial,
       sans-serif; color: var(--ink); margin: 0; background: #fff; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 36px 0 12px; padding-bottom: 6px; border-bottom: 2px solid var(--ink); }
h3 { font-size: 17px; margin: 24px 0 8px; }
h4 { font-size: 15px; margin: 16px 0 6px; }
p { margin: 6px 0; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
              font-size: 0.92em; }
.sub { color: var(--muted); margin: 0 0 16px; word-break: break-all; }
nav { margin: 12px 0 0; font-size: 14px; }
nav a { margin-right: 14px; color: var(--info); text-decoration: none; }
.banner { background: var(--danger); color: #fff; font-weight: 700; font-size: 22px; padding: 16px 20px;
          margin: 0 0 20px; border-radius: 6px; letter-spacing: 0.02em; }
.banner small { display: block; font-size: 15px; font-weight: 400; margin-top: 4px; }
.glance { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; background: var(--soft); }
.card .k { color: var(--muted); font-size: 13px; }
.card .v { font-size: 18px; font-weight: 600; overflow-wrap: anywhere; }
.card.bad { border-color: var(--danger); background: #fdecea; }
.card.warn { border-color: var(--warn); background: #fff8e1; }
.card.good { border-color: var(--ok); background: #e8f5ec; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 12px; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
.exact { display: block; font-size: 11px; color: var(--muted); word-break: break-all; white-space: normal;
         text-align: right; }
th { background: var(--soft); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.flag td { background: #fff4e5; }
tr.this td { background: #eef6ff; font-weight: 600; }
tr.total td { font-weight: 700; border-top: 2px solid var(--ink); }
.steps td { font-size: 13px; }
td.stepcell { padding: 2px 8px 6px 32px; border-top: none; }
td.stepcell table { margin: 0; }
td.when { white-space: nowrap; }
.watch li { margin: 6px 0; padding: 6px 10px; border-left: 4px solid var(--info); background: var(--soft);
            list-style: none; }
.watch { padding: 0; }
.watch li.danger { border-color: var(--danger); background: #fdecea; }
.watch li.warn { border-color: var(--warn); background: #fff8e1; }
.watch b { margin-right: 6px; }
.tag { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 10px; border: 1px solid; }
.tag.ok { color: var(--ok); } .tag.bad { color: var(--danger); } .tag.warn { color: var(--warn); }
.muted { color: var(--muted); }
.tablebox { border: 1px solid var(--line); border-radius: 6px; padding: 4px 16px 12px; margin: 16px 0; }
figure { margin: 12px 0; text-align: center; }
figure img { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13px; }
.values { font-size: 13px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 8px 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
footer { margin-top: 40px; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line);
         padding-top: 8px; }
@media print {
  @page { margin: 14mm 12mm; }
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; margin-top: 18pt; }
  h3, h4 { break-after: avoid; page-break-after: avoid; }
  table { font-size: 8.5pt; }
  thead { display: table-header-group; }
  tr, .card, .watch li, figure { break-inside: avoid; page-break-inside: avoid; }
  .tablebox { border: none; padding: 0; }
  .banner, .card, .watch li, tr.flag td, tr.this td, th { -webkit-print-color-adjust: exact;
                                                           print-color-adjust: exact; }
  figure img { max-height: 120mm; }
  a { color: inherit; text-decoration: none; }
}
"""


def e(value) -> str:
    """Any value as HTML text, escaped (quotes too: it may land in an attribute)."""
    return html.escape(str(value), quote=True)


def render(review: Review, figures: bool = True) -> str:
    """The whole page as a string.  ``figures``: draw each table's picture (needs matplotlib)."""
    title = f"Disclosure review: {review.input_name}"
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             # No request of any kind: the page is read offline and archived with the release.
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
             "style-src 'unsafe-inline'\">",
             f"<title>{e(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>", "<main>"]
    if review.test_mode:
        parts.append('<div class="banner" role="alert">TEST MODE — THIS RELEASE IS NOT PRIVATE'
                     f"<small>{e(review.report.get('warning') or 'seeded noise')}. It must not be published.</small>"
                     "</div>")
    parts.append(f"<h1>{e(title)}</h1>")
    parts.append(f'<p class="sub">Release folder <code>{e(review.directory)}</code> · made {e(review.when)} · '
                 f"dphist {e(review.version)}</p>")
    parts.append("<nav>" + "".join(f'<a href="#{sid}">{e(name)}</a>' for sid, name in SECTIONS) + "</nav>")
    parts += _glance(review)
    parts += _watch(review)
    parts += _released(review)
    parts += _privacy(review)
    parts += _ledger(review)
    parts += _accuracy(review, figures)
    parts.append("<footer>Built by <code>dphist review</code> from the release folder and the budget ledger only: "
                 "the input data was not read, and every figure on this page is a released (noisy) value or a "
                 "public fact. Amounts are exact as the report states them.</footer>")
    parts += ["</main>", "</body>", "</html>", ""]
    return "\n".join(parts)


# ---- sections ---------------------------------------------------------------------------------------------------


def _section(sid: str) -> str:
    return f'<section id="{sid}"><h2>{e(dict(SECTIONS)[sid])}</h2>'


def _glance(review: Review) -> list[str]:
    symbol = _SYMBOLS[review.unit]
    dangers = sum(w.level == "danger" for w in review.watch)
    warns = sum(w.level == "warn" for w in review.watch)
    ledger = review.ledger
    if ledger.state == "recorded":
        remaining = _remaining(ledger.account)
        ledger_card = ("warn", "ledger", "recorded; no cap" if ledger.uncapped else f"recorded; {remaining}")
    elif ledger.state == "test mode":
        ledger_card = ("bad", "ledger", "not recorded (test mode)")
    else:
        ledger_card = ("warn", "ledger", ledger.state)
    cards = [
        ("bad" if review.test_mode else "good", "privacy", "NOT PRIVATE (test mode)" if review.test_mode else
         _guarantee_short(review)),
        ("bad" if not review.spend_adds_up else "" if review.test_mode else "good", f"{symbol} spent",
         f"{review.spend_stated}" + ("" if review.spend_adds_up else " (parts do not add up)")),
        ("", "tables", f"{len(review.tables)} ({sum(t.cells for t in review.tables):,} cells)"),
        ledger_card,
        ("bad" if dangers else "warn" if warns else "good", "to watch",
         f"{dangers} serious, {warns} warning{'' if warns == 1 else 's'}" if dangers or warns else "nothing serious"),
    ]
    out = [_section("glance"), '<div class="glance">']
    for kind, key, value in cards:
        out.append(f'<div class="card {kind}"><div class="k">{e(key)}</div><div class="v">{e(value)}</div></div>')
    out += ["</div>", "</section>"]
    return out


def _guarantee_short(review: Review) -> str:
    r = review.report
    if review.definition == "pure":
        delta = r.get("delta_spent", "0")
        return f"ε = {r.get('epsilon_spent')}" + ("" if delta in ("0", None) else f", δ = {delta}")
    if review.definition == "zcdp":
        return f"ρ = {r.get('rho_spent')} (zCDP)"
    return f"(ε, δ) = ({r.get('epsilon_spent')}, {r.get('delta_spent')})"


def _remaining(account: dict | None) -> str:
    if not account:
        return "no account"
    if account.get("definition") == "zcdp":
        return f"ρ remaining {account.get('rho_remaining') or 'n/a'} of {account.get('rho_cap')}"
    return f"ε remaining {account.get('epsilon_remaining') or 'n/a'} of {account.get('epsilon_cap')}"


def _watch(review: Review) -> list[str]:
    out = [_section("watch")]
    if not review.watch:
        out.append("<p>Nothing to watch: no warning in the report, no value clamped or dropped.</p>")
    else:
        out.append('<ul class="watch">')
        order = {"danger": 0, "warn": 1, "info": 2}
        for w in sorted(review.watch, key=lambda w: order.get(w.level, 3)):
            out.append(f'<li class="{e(w.level)}"><b>{e(w.title)}</b>{e(w.text)}</li>')
        out.append("</ul>")
    out.append("</section>")
    return out


def _released(review: Review) -> list[str]:
    out = [_section("released"), '<dl class="facts">']
    facts = [("data set", f"{review.input_name} ({review.input_format})"),
             ("ledger id", review.ledger.dataset or review.report.get("ledger", {}).get("dataset", "—")
              if isinstance(review.report.get("ledger"), dict) else "—"),
             ("size", "the input's size is not published (it depends on the data without noise); each table's "
                      "released total is below"),
             ("made", f"{review.when} (from {review.when_source})"),
             ("dphist", review.version), ("folder", review.directory)]
    for key, value in facts:
        out.append(f"<dt>{e(key)}</dt><dd>{e(value)}</dd>")
    out.append("</dl>")
    out.append("<h3>Tables</h3>")
    out.append("<table><thead><tr><th>table</th><th>columns</th><th class=\"num\">cells</th><th>algorithm</th>"
               "<th>why this algorithm</th><th class=\"num\">released total</th></tr></thead><tbody>")
    for t in review.tables:
        why = t.reason if t.reason else ("chosen by the release's options" if not t.shared_amount else
                                         t.meta.get("measured_in") or f"a sum of {t.meta.get('derived_from')}")
        algorithm = t.algorithm + (f" (chosen by {t.chosen_by})" if t.chosen_by else "")
        out.append(f"<tr><td>{e(t.name)}</td><td>{e(', '.join(c.name for c in t.columns))}</td>"
                   f"<td class=\"num\">{t.cells:,}</td><td>{e(algorithm)}</td><td>{e(why)}</td>"
                   f"<td class=\"num\">{e(_number(t.released_total))}</td></tr>")
    out.append("</tbody></table>")
    out.append("<h3>Columns and their public domains</h3>")
    out.append("<p class=\"muted\">Bins and categories come from the schema (or from the paid discovery steps "
               "below): they are public, and are published with the release.</p>")
    out.append("<table><thead><tr><th>column</th><th>type</th><th>bins or categories</th><th>outside the domain"
               "</th><th>missing values</th><th>in tables</th></tr></thead><tbody>")
    rows: list[tuple] = []  # a column shared by several tables with the same domain is listed once
    for t in review.tables:
        for c in t.columns:
            match = next((row for row in rows if row[0] == c), None)
            if match is None:
                rows.append((c, [t.name]))
            else:
                match[1].append(t.name)
    for c, tables in rows:
        values = ""
        if c.values:
            values = ('<div class="values">' + ", ".join(f"<code>{e(v)}</code>" for v in c.values)
                      + (f" … and {c.values_left_out:,} more" if c.values_left_out else "") + "</div>")
        out.append(f"<tr><td>{e(c.name)}</td><td>{e(c.kind)}</td><td>{e(c.bins)}{values}</td>"
                   f"<td>{e(c.out_of_domain or '—')}</td><td>{e(c.nulls or '—')}</td>"
                   f"<td>{e(', '.join(tables))}</td>"
                   "</tr>")
    out.append("</tbody></table>")
    out.append("<h3>Files</h3><table><thead><tr><th>file</th><th class=\"num\">bytes</th></tr></thead><tbody>")
    for name, size in review.files:
        out.append(f"<tr><td><code>{e(name)}</code></td><td class=\"num\">{size:,}</td></tr>")
    for name in review.extra_files:
        out.append(f"<tr><td><code>{e(name)}</code></td><td class=\"num\">this page</td></tr>")
    out.append("</tbody></table>")
    if review.ledger.files_checked:
        out.append(f"<p>{e(review.ledger.files_checked)}.</p>")
    out.append("</section>")
    return out


def _privacy(review: Review) -> list[str]:
    r = review.report
    out = [_section("privacy")]
    out.append(f"<p><b>Guarantee:</b> {e(review.guarantee)}.</p>")
    out.append(f"<p>{e(_in_words(review))}</p>")
    out.append('<dl class="facts">')
    for label, value in review.amounts:
        out.append(f"<dt>{e(label)}</dt><dd class=\"mono\">{e(value)}</dd>")
    out.append(f"<dt>privacy unit</dt><dd>{e(review.privacy_unit)}</dd>")
    out.append(f"<dt>neighbouring data sets</dt><dd>differ by {e(review.neighbouring)}</dd>")
    for line in review.bounding:
        out.append(f"<dt>bounding</dt><dd>{e(line)}</dd>")
    out.append(f"<dt>noise</dt><dd>{e(review.noise)}</dd>")
    if review.composition:
        out.append(f"<dt>composition</dt><dd>{e(review.composition)}</dd>")
    if r.get("conversion"):
        out.append(f"<dt>conversion</dt><dd>{e(r['conversion'])}</dd>")
    out.append("</dl>")
    symbol = _SYMBOLS[review.unit]
    out.append(f"<h3>Every step's spend ({e(symbol)})</h3>")
    out.append(f"<p class=\"muted\">The release's one budget is split into parts; each part lists the "
               f"measurements its record holds. The parts must add up to the {e(symbol)} the report says was "
               "spent.</p>")
    out.append(f"<table><thead><tr><th>part</th><th>what</th><th class=\"num\">{e(symbol)}</th></tr></thead><tbody>")
    for part in review.spend:
        check = ""
        if part.steps_add_up is True:
            check = ' <span class="tag ok">steps add up</span>'
        elif part.steps_add_up is False:
            check = ' <span class="tag bad">steps do not add up</span>'
        out.append(f"<tr><td>{e(part.label)}{check}</td><td>{e(part.detail)}</td><td class=\"num mono\">"
                   f"{_amount(part.amount)}</td></tr>")
        if part.steps:
            rows = "".join(f"<tr><td>{e(s.what)}</td><td>{e(s.mechanism)}</td><td class=\"num\">"
                           f"{e(_number(s.noise_sd) if s.noise_sd is not None else '—')}</td>"
                           f"<td class=\"num mono\">{_amount(s.amount)}</td></tr>"
                           for s in part.steps)
            out.append(f'<tr class="steps"><td colspan="3" class="stepcell"><table><thead><tr><th>step</th>'
                       f'<th>mechanism</th><th class="num">noise sd</th><th class="num">{e(symbol)}</th></tr>'
                       f"</thead><tbody>{rows}</tbody></table></td></tr>")
    mark = ('<span class="tag ok">adds up</span>' if review.spend_adds_up else
            f'<span class="tag bad">the report states {e(review.spend_stated)}</span>')
    out.append(f'<tr class="total"><td>total</td><td>{mark}</td><td class="num mono">{_amount(review.spend_total)}</td>'
               "</tr></tbody></table>")
    out.append("</section>")
    return out


def _in_words(review: Review) -> str:
    r = review.report
    if review.definition == "pure":
        delta = r.get("delta_spent", "0")
        text = (f"Adding or removing one {_unit_word(review)} changes the probability of any published result by "
                f"at most a factor e^{r.get('epsilon_spent')}")
        return text + ("." if delta in ("0", None) else f", except with probability at most {delta}.")
    if review.definition == "zcdp":
        return (f"ρ-zCDP with ρ = {r.get('rho_spent')}: for a reader used to (ε, δ), this implies ε = "
                f"{r.get('epsilon_implied')} at δ = {r.get('delta_reference')} (zCDP itself has no δ).")
    return (f"(ε, δ)-DP with ε = {r.get('epsilon_requested')} and δ = {r.get('delta_requested')}, run as ρ-zCDP "
            f"with ρ = {r.get('rho_spent')} (which implies ε = {r.get('epsilon_implied')} at that δ).")


def _unit_word(review: Review) -> str:
    unit = review.privacy_unit
    return unit[4:] if unit.startswith("one ") else unit


def _ledger(review: Review) -> list[str]:
    ledger = review.ledger
    out = [_section("ledger")]
    if ledger.state != "recorded":
        cls = "danger" if ledger.state == "test mode" else "warn"
        out.append(f'<ul class="watch"><li class="{cls}"><b>{e(ledger.state)}</b>{e(ledger.message)}</li></ul>')
        if ledger.path:
            out.append(f"<p class=\"muted\">Ledger looked at: <code>{e(ledger.path)}</code></p>")
        out.append("</section>")
        return out
    out.append(f"<p>Data set <code>{e(ledger.dataset)}</code> (privacy unit: {e(ledger.unit)}) in the ledger "
               f"<code>{e(ledger.path)}</code>.</p>")
    if ledger.account_line:
        out.append(f"<p><b>Account:</b> {e(ledger.account_line)}</p>")
    if ledger.uncapped:
        out.append('<ul class="watch"><li class="warn"><b>no cap</b>nothing limits what the releases of this data '
                   "set spend in all; set one with <code>dphist budget set</code>.</li></ul>")
    elif ledger.account:
        out.append(f"<p><b>Left under the cap:</b> {e(_remaining(ledger.account))}.</p>")
    for cap in ledger.caps:
        out.append(f"<p class=\"muted\">{e(cap)}</p>")
    out.append("<h3>Every release recorded for this data set</h3>")
    out.append("<table><thead><tr><th>reserved</th><th>run</th><th>state</th><th>spent</th><th>tables</th>"
               "<th>folder</th></tr></thead><tbody>")
    for run in ledger.runs:
        this = " (this release)" if run.this else ""
        key = f" key {run.run_key}" if run.run_key else ""
        row_class = ' class="this"' if run.this else ""
        out.append(f"<tr{row_class}><td class=\"when\">{e(run.when)}</td><td><code>{e(run.run_id)}"
                   f"</code>{e(key)}{e(this)}</td><td>{e(run.state)}</td><td class=\"mono\">{e(run.amount)}</td>"
                   f"<td>{e(run.tables)}</td><td><code>{e(run.out)}</code></td></tr>")
    out.append("</tbody></table>")
    out.append("</section>")
    return out


def _accuracy(review: Review, figures: bool) -> list[str]:
    out = [_section("accuracy")]
    out.append("<p><b>Unreliable cells.</b> A cell with a 95 % interval is flagged where "
               "the interval is wider than its released count (ci_upper − ci_lower &gt; count): the noise alone "
               "could account for all of it, and every released 0 whose interval reaches above 0 is one. A table "
               "without per-cell intervals flags the cells whose released count is below twice its expected error "
               "per cell. Flagged rows are shaded.</p>")
    for i, table in enumerate(review.tables):
        out += _table_block(review, i, table, figures)
    out.append("</section>")
    return out


def _table_block(review: Review, i: int, t: TableFacts, figures: bool) -> list[str]:
    symbol = _SYMBOLS[review.unit]
    out = [f'<div class="tablebox" id="table-{i}"><h3>{e(t.name)}</h3>']
    amount = f"{symbol} {t.amount}" if t.amount is not None else "—"
    if t.shared_amount:
        amount += f" ({t.shared_amount})"
    facts = [("cells", f"{t.cells:,} ({' × '.join(str(s) for s in t.shape)})"), ("algorithm", t.algorithm),
             ("budget", amount), ("workload", t.workload or "—"), ("file", t.file or "—")]
    errors = t.expected_error
    cells = errors.get("cells") if isinstance(errors.get("cells"), dict) else {}
    ranges = errors.get("ranges") if isinstance(errors.get("ranges"), dict) else {}
    if t.expected_cell_sd is not None:
        facts.append(("noise sd per cell", _number(t.expected_cell_sd)))
    if "rms" in cells:
        facts.append(("expected error per cell (rms)", _number(cells["rms"])))
    if "mean_abs" in cells:
        facts.append(("expected error per cell (mean abs.)", _number(cells["mean_abs"])))
    if "mean_abs" in ranges:
        facts.append(("expected error per range (mean abs.)", _number(ranges["mean_abs"])))
    if errors.get("basis"):
        facts.append(("how the error is known", errors["basis"]))
    interval = t.interval
    covers = interval.get("covers")
    if covers == "none" or not interval:
        facts.append(("95 % intervals", f"none: {interval.get('reason', 'the release gives none')}"))
    else:
        facts.append(("95 % intervals", f"cover each cell's {'count' if covers == 'count' else covers}; "
                                        f"{interval.get('method', '')}"))
    if t.post_processing:
        facts.append(("post-processing", t.post_processing))
    out.append('<dl class="facts">' + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in facts) + "</dl>")
    if t.unreliable_rule is None:
        out.append("<p>Unreliable cells: not assessed (the table has neither intervals nor an expected error per "
                   "cell).</p>")
    else:
        out.append(f"<p><b>Unreliable cells: {t.unreliable:,} of {t.cells:,}</b> — {e(t.unreliable_rule)}.</p>")
    if figures:
        figure = table_figure_uri(review.report, t.meta, t.released) if t.released is not None else \
            Figure(None, "no figure")
        if figure.uri:
            out.append(f'<figure><img src="{figure.uri}" alt="{e("Figure of the released table " + t.name)}">'
                       f"<figcaption>{e(t.name)}: released counts with their 95 % intervals where the table has "
                       "them</figcaption></figure>")
        else:
            out.append(f"<p class=\"muted\">{e(figure.why)}</p>")
    out += _cells_table(i, t)
    out.append("</div>")
    return out


def _cells_table(i: int, t: TableFacts) -> list[str]:
    head = "".join(f"<th>{e(c.name)}</th>" for c in t.columns)
    out = [f'<table class="cells" data-table="{i}"><thead><tr>{head}<th class="num">released count</th>'
           '<th class="num">95 % interval</th><th>covers</th><th>flag</th></tr></thead><tbody>']
    for cell in t.listed:
        labels = "".join(f"<td>{e(label)}</td>" for label in cell.labels)
        span = "—" if cell.low is None else f"{_number(cell.low)} – {_number(cell.high)}"
        flag = "unreliable" if cell.unreliable else ""
        row_class = ' class="flag"' if cell.unreliable else ""
        out.append(f"<tr{row_class}>{labels}<td class=\"num\">"
                   f"{e(_number(cell.count))}</td><td class=\"num\">{e(span)}</td><td>{e(cell.covers or '—')}</td>"
                   f"<td>{flag}</td></tr>")
    out.append("</tbody></table>")
    if t.cells > len(t.listed):
        out.append(f"<p class=\"muted\">The first {MAX_CELLS_LISTED:,} of {t.cells:,} cells; the file "
                   f"<code>{e(t.file)}</code> holds them all.</p>")
    return out


def _amount(text) -> str:
    """An exact amount as HTML: as it is when it is a decimal; a p/q with its decimal approximation above it."""
    text = "—" if text is None else str(text)
    if "/" not in text:
        return e(text)
    try:
        numerator, denominator = (int(x) for x in text.split("/"))
        approx = f"≈ {numerator / denominator:.6g}"
    except (ValueError, ZeroDivisionError, OverflowError):
        return e(text)
    return f'{e(approx)}<span class="exact">{e(text)}</span>'


def _number(value) -> str:
    """A released number: whole numbers with thousands separators, others to 4 significant digits."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == round(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) >= 1 else f"{value:.4g}"
