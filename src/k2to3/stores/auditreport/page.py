"""The audit report as one self-contained HTML page: inline CSS, SVG and a small script (no network). Without
the script every row is a plain table row; with it, the artifact and source tables page, sort and filter, and
only one page of rows is laid out, so a 10,000-artifact report opens quickly."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from k2to3.core.text import plural
from k2to3.stores.auditreport.model import VERDICTS, optimizer_text

e = html.escape
PAGE = 100
COLORS = {"portable": "#137333", "portable with source": "#a56200", "tf-only": "#8e24aa", "blocked": "#b3261e"}

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}th[data-key]{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25b2"}
th[aria-sort=descending]::after{content:" \\25bc"}.portable{color:#137333}.with-source{color:#a56200}
.tf-only{color:#8e24aa}.blocked{color:#b3261e}code{font-size:12px}.cards{display:flex;gap:1em;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;background:#fafafa}.card b{font-size:20px}
.verdict-chart{margin-top:.6em}.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.4em .8em}
.controls{margin:.4em 0}.controls *{margin-right:.5em}svg{background:#fafafa;border:1px solid #ddd}.muted{color:#666}
.opt-restored{color:#137333}.opt-dropped{color:#b3261e}.reach-stop,.reach-no{color:#b3261e}
.js #artifacts tbody tr:nth-child(n+101),.js #sources tbody tr:nth-child(n+101){display:none}"""

SCRIPT = """(function(){
var PAGE=@PAGE@;
function grid(id,filters){var t=document.getElementById(id);if(!t)return;var tb=t.tBodies[0];
 var ths=Array.prototype.slice.call(t.tHead.rows[0].cells);
 var recs=Array.prototype.map.call(tb.rows,function(tr){return {tr:tr,text:null}});
 var shown=recs,page=0,ctl=document.querySelector('.controls[data-for="'+id+'"]');
 var info=ctl.querySelector('.count'),q=ctl.querySelector('input'),sel=ctl.querySelector('select');
 function key(r,i){var c=r.tr.cells[i];var k=c.getAttribute('data-k');return k===null?c.textContent:k}
 function render(){var n=shown.length,pages=Math.max(1,Math.ceil(n/PAGE));page=Math.min(page,pages-1);
  var frag=document.createDocumentFragment();shown.slice(page*PAGE,page*PAGE+PAGE).forEach(function(r){
  frag.appendChild(r.tr)});tb.replaceChildren(frag);
  info.textContent=n?('rows '+(page*PAGE+1)+'-'+Math.min(n,page*PAGE+PAGE)+' of '+n+
   (n<recs.length?' (filtered from '+recs.length+')':'')):'no rows';
  info.setAttribute('data-n',n)}
 function apply(){var s=q.value.toLowerCase(),v=sel?sel.value:'',vi=sel?+sel.getAttribute('data-col'):0;
  shown=recs.filter(function(r){if(v&&r.tr.cells[vi].textContent!==v)return false;if(!s)return true;
   if(r.text===null)r.text=r.tr.textContent.toLowerCase();return r.text.indexOf(s)>=0});page=0;render()}
 q.addEventListener('input',apply);if(sel)sel.addEventListener('change',apply);
 ctl.querySelector('.prev').addEventListener('click',function(){page=Math.max(0,page-1);render()});
 ctl.querySelector('.next').addEventListener('click',function(){page++;render()});
 ths.forEach(function(th,i){if(!th.hasAttribute('data-key'))return;th.addEventListener('click',function(){
  var desc=th.getAttribute('aria-sort')!=='descending'&&th.hasAttribute('data-num')||
   th.getAttribute('aria-sort')==='ascending';ths.forEach(function(h){h.removeAttribute('aria-sort')});
  th.setAttribute('aria-sort',desc?'descending':'ascending');var num=th.hasAttribute('data-num');
  var ks=new Map();recs.forEach(function(r){var k=key(r,i);ks.set(r,num?parseFloat(k)||0:k)});
  recs.sort(function(a,b){var x=ks.get(a),y=ks.get(b),c=x<y?-1:x>y?1:0;return desc?-c:c});apply()})});
 render()}
grid('artifacts');grid('sources');window.auditReady=performance.now()})();""".replace("@PAGE@", str(PAGE))


def _inline_code(text: str) -> str:
    """Escaped text with its `backquoted` parts as <code> (the rules' docs text is Markdown)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", e(text))


def _cls(verdict: str) -> str:
    return {"portable with source": "with-source"}.get(verdict, verdict)


def layer_plot(rows: list[dict[str, Any]], width: int = 520, height: int = 160) -> str:
    """Inline SVG: log10 max abs error per layer, in topological order."""
    vals = [r["max_abs"] for r in rows if r.get("max_abs") is not None]
    if not vals:
        return ""
    logs = [math.log10(max(v, 1e-12)) for v in vals]
    lo, hi = min(logs), max(max(logs), min(logs) + 1)
    n = len(logs)
    xs = [20 + i * (width - 40) / max(n - 1, 1) for i in range(n)]
    ys = [height - 20 - (v - lo) / (hi - lo) * (height - 40) for v in logs]
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    return (f'<svg class="layer-plot" width="{width}" height="{height}" role="img" '
            f'aria-label="per-layer error"><polyline fill="none" stroke="#b3261e" stroke-width="1.5" '
            f'points="{pts}"/><text x="4" y="12" font-size="10">log10 max abs error per layer '
            f'({lo:.1f} to {hi:.1f})</text></svg>')


def verdict_chart(counts: dict[str, int], width: int = 560) -> str:
    """Inline SVG bar chart of the verdict counts."""
    top = max(counts.values(), default=0) or 1
    bars = []
    for i, v in enumerate(VERDICTS):
        n = counts.get(v, 0)
        w = round(n / top * (width - 230))
        y = 10 + i * 28
        bars.append(f'<text x="8" y="{y + 15}" font-size="13">{e(v)}</text><rect x="160" y="{y}" width="{w}" '
                    f'height="20" fill="{COLORS[v]}"/><text x="{168 + w}" y="{y + 15}" font-size="13" '
                    f'class="bar-n" data-verdict="{e(v)}">{n}</text>')
    return (f'<svg class="verdict-chart" width="{width}" height="{20 + 28 * len(VERDICTS)}" role="img" '
            f'aria-label="artifacts per verdict">{"".join(bars)}</svg>')


def _href(path_line: str, root: str) -> str:
    """file: link to a root-relative path:line (browsers cannot open a line; the text shows it)."""
    path = path_line.rsplit(":", 1)[0] if path_line.rsplit(":", 1)[-1].isdigit() else path_line
    return e((Path(root) / path).as_uri())


def _code(code: str | None, documented: set[str]) -> str:
    """A rule code, linked to its entry in the page's Rules section (an anchor within the page: it works from any
    install and offline) when the page has one."""
    if not code:
        return ""
    return f"<a href='#{code.lower()}'>{e(code)}</a>" if code in documented else e(code)


def _rules(rules: list[dict[str, Any]]) -> str:
    """The Rules section: what, why and fix of every code the page cites (model.cited_rules), one id per code."""
    if not rules:
        return ""
    items = "".join(f"<div class='rule' id='{e(r['code'].lower())}'><h3>{e(r['code'])} <span class='muted'>"
                    f"{e(r['title'])}</span></h3><p class='muted'>{_inline_code(r['where'])}</p>"
                    f"<p><b>What.</b> {_inline_code(r['what'])}</p><p><b>Why.</b> {_inline_code(r['why'])}</p>"
                    f"<p><b>Fix.</b> {_inline_code(r['fix'])}</p><p class='muted'>More: <code>{e(r['more'])}</code>"
                    "</p></div>" for r in rules)
    return ("<h2 id='rules'>Rules</h2><p class='muted'>The rules this report cites, from the rule data shipped "
            f"with k2to3 (the full entry with an example: <code>k2to3 rule CODE</code>).</p>{items}")


def _controls(table: str, verdict_col: int | None) -> str:
    sel = ""
    if verdict_col is not None:
        opts = "".join(f"<option>{e(v)}</option>" for v in VERDICTS)
        sel = (f"<label>verdict <select id='verdict-filter' data-col='{verdict_col}'><option value=''>all</option>"
               f"{opts}</select></label>")
    return (f"<div class='controls' data-for='{table}'>{sel}<input type='search' placeholder='filter rows'>"
            f"<button class='prev' type='button'>&lt; prev</button><button class='next' type='button'>next &gt;"
            f"</button><span class='count muted'></span></div>")


def _artifact_row(a: dict[str, Any], root: str) -> str:
    v = a.get("verify") or {}
    plots = "".join(f"<div>{e(b)}: first divergent layer <code>{e(str(fd))}</code><br>"
                    f"{layer_plot(v.get('layer_errors', {}).get(b, []))}</div>"
                    for b, fd in ((b, x.get("first_divergent_layer")) for b, x in v.get("backends", {}).items())
                    if fd)
    if v:
        err = a.get("worst_error")
        evidence = (f"verified: {e(v.get('verdict', ''))}" + (" (cached)" if v.get("cached") else "")
                    + (f", worst error {err:.1e}" if err is not None else ""))
    else:
        evidence = "static (prediction)"
    srcs = "<br>".join(f"<a href='{_href(s, root)}'><code>{e(s)}</code></a>" for s in a.get("custom_sources", []))
    cmd = f"<code>{e(a['next'])}</code>" if a.get("next") else "<span class='muted'>blocked: see top blockers</span>"
    rules = ", ".join(f"{k}×{n}" for k, n in a.get("rules", {}).items())
    opt = a.get("optimizer_state")
    ocls = f" class='opt-{opt['status']}'" if opt else ""
    return (f"<tr><td><code>{e(a['relpath'])}</code></td><td class='{_cls(a['verdict'])}'>{e(a['verdict'])}</td>"
            f"<td data-k='{a['effort']}'>{a['effort']}</td><td>{evidence}{plots}</td>"
            f"<td{ocls}>{e(optimizer_text(opt))}</td><td class='targets'>{_targets(a.get('targets'))}</td>"
            f"<td>{e(a['reason'])}</td>"
            f"<td>{cmd}</td><td>{srcs}</td><td>{e(rules)}</td><td>{e(str(a.get('keras_version') or ''))}</td></tr>")


def _targets(t: dict[str, Any] | None) -> str:
    """The deployment-targets cell: the lowest Keras 3 release and each format, its reason on hover."""
    if not t:
        return "<span class='muted'>blocked</span>"
    k = t["keras"]
    ver = k.get("verified")
    keras = (f"Keras &ge; {e(k['lowest'])} <span class='muted'>({e(k['evidence'])}</span>"
             if k.get("lowest") else "no Keras 3 release <span class='muted'>(")
    ran = k.get("target")
    keras += (f"<span class='muted'>; {e(ver['keras'])} {e(ver['status'])}" if ver else "<span class='muted'>") \
        + (f"; --target-keras {e(str(ran['keras']))} {e(str(ran['status']))}" if ran else "") + ")</span>"
    fmts = ", ".join(f"<span title='{e(f['reason'])}' class='reach-{e(f['reach'])}'>{e(fmt)}"
                     + (f" {e(f['reach'])} ({e(f.get('code') or '')})" if f["reach"] != "predicted" else "")
                     + "</span>" for fmt, f in t["formats"].items())
    return f"{keras}<br>{fmts}"


def _source_row(f: dict[str, Any]) -> str:
    rules = "<br>".join(f"<code>{e(r['code'])}</code> {e(r['title'])} ×{r['n']}"
                        + (f" ({r['fixable']} fixable)" if r["fixable"] else "") for r in f["rules"])
    share = f"{f['fixable'] / f['findings']:.0%}" if f["findings"] else "-"
    return (f"<tr><td><code>{e(f['relpath'])}</code></td><td data-k='{f['left']}'>{f['left']}</td>"
            f"<td data-k='{f['findings']}'>{f['findings']}</td><td data-k='{f['fixable']}'>{f['fixable']} ({share})"
            f"</td><td>{rules}</td><td><code>{e(f['command'])}</code></td></tr>")


def to_html(m: dict[str, Any]) -> str:
    """m is the report model (model.build)."""
    s = m["summary"]
    cards = [("sum-artifacts", s["artifacts"], "artifacts"), ("sum-verified", s["verified"], "verified"),
             ("sum-predicted", s["predicted"], "predicted (static)"), ("sum-findings", s["findings"],
                                                                       "source findings"),
             ("sum-fixable", s["fixable"], "fixable by <code>k2to3 fix</code>"),
             ("sum-needs-person", s["needs_person"], "need a person")]
    card_html = "".join(f"<div class='card'><b id='{i}'>{n}</b><br>{label}</div>" for i, n, label in cards)
    def words(n: int, one: str) -> str:
        return plural(n, one).split(" ", 1)[1]

    effort = (f"<p id='effort'>Effort: <b id='sum-files-to-touch'>{s['files_to_touch']}</b> source "
              f"{words(s['files_to_touch'], 'file')} to touch; after <code>k2to3 fix</code>, "
              f"<b id='sum-left-after-fix'>{s['findings_left_after_fix']}</b> "
              f"{words(s['findings_left_after_fix'], 'finding')} in "
              f"{plural(s['files_left_after_fix'], 'file')} need a person. Debt behind noqa: "
              f"{plural(s['noqa_debt']['lines'], 'line')}, {plural(s['noqa_debt']['files'], 'file')}.</p>")
    states = s.get("optimizer_states") or {}
    effort += ("<p id='optimizer-states'>Optimizer state (does it travel to Keras 3): "
               + (", ".join(f"<b class='opt-{e(k)}'>{n}</b> {e(k)}" for k, n in sorted(states.items()))
                  or "no HDF5 model read") + ".</p>")
    note = (f"<p class='note'>Static verdicts are <b>predictions</b> from each artifact's config; "
            f"<code>k2to3 audit --verify</code> is the proof (convert, then compare with the Keras 2 output on "
            f"tensorflow, torch and jax): {s['verified']} verified, {s['predicted']} predicted. Commands run from "
            f"<code>{e(m['root'])}</code>.</p>")
    documented = {r["code"] for r in m.get("rules", [])}
    blk = "".join(f"<tr><td>{b['artifacts']}</td><td>{e(b['label'])}</td><td>{_code(b['code'], documented)}"
                  + f"</td><td>{_inline_code(b['action'])}</td><td>"
                  + "<br>".join(f"<code>{e(x)}</code>" for x in b["examples"]) + "</td></tr>"
                  for b in m["blockers"][:25])
    blockers = ("<h2>Top blockers</h2><table id='blockers'><thead><tr><th>artifacts</th><th>cause</th><th>rule</th>"
                f"<th>what unblocks them</th><th>e.g.</th></tr></thead><tbody>{blk}</tbody></table>"
                if m["blockers"] else "<h2>Top blockers</h2><p>None: "
                + ("every artifact is portable." if s["artifacts"] else "no artifact was found.") + "</p>")
    arts = "".join(_artifact_row(a, m["root"]) for a in m["artifacts"])
    art_table = ("<h2>Artifacts</h2>" + _controls("artifacts", 1) + "<table id='artifacts'><thead><tr>"
                 "<th data-key='path'>artifact</th><th data-key='verdict'>verdict</th>"
                 "<th data-key='effort' data-num>effort</th><th>evidence</th><th>optimizer state</th>"
                 "<th>deployment targets</th><th>reason</th>"
                 "<th>next command</th>"
                 "<th>custom objects from</th><th>rules</th><th>Keras</th></tr></thead>"
                 f"<tbody>{arts}</tbody></table>")
    srcs = "".join(_source_row(f) for f in m["source_files"])
    src_table = ("<h2>Source files</h2><p class='muted'>Sorted by effort: findings left after <code>k2to3 fix</code>."
                 "</p>" + _controls("sources", None) + "<table id='sources'><thead><tr>"
                 "<th data-key='path'>file</th><th data-key='effort' data-num>left after fix</th>"
                 "<th data-key='findings' data-num>findings</th><th data-key='fixable' data-num>fixable</th>"
                 f"<th>by rule</th><th>preview the fix</th></tr></thead><tbody>{srcs}</tbody></table>")
    totals = "".join(f"<tr><td>{_code(k, documented)}</td><td>{n}</td></tr>"
                     for k, n in m["rule_totals"].items())
    rules = ("<h2>Findings per rule</h2><table id='rule-totals'><thead><tr><th>rule</th><th>findings</th></tr>"
             f"</thead><tbody>{totals}</tbody></table>")
    skipped = "".join(f"<tr><td><code>{e(x['relpath'])}</code></td><td>{e(x['reason'])}</td></tr>"
                      for x in m.get("skipped") or [])
    if skipped:
        rules += ("<h2>Skipped files</h2><p class='muted'>Named like a model, but not one.</p><table id='skipped'>"
                  f"<thead><tr><th>file</th><th>why</th></tr></thead><tbody>{skipped}</tbody></table>")
    data = json.dumps({"summary": s}).replace("</", "<\\/")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>k2to3 audit</title><style>{CSS}</style>"
            f"<script>document.documentElement.className='js'</script></head><body>"
            f"<h1>k2to3 audit of {e(m['root'])}</h1><section id='summary'><div class='cards'>{card_html}</div>"
            f"{verdict_chart(s['verdicts'])}{effort}{note}</section>{blockers}{art_table}{src_table}{rules}"
            f"{_rules(m.get('rules', []))}"
            f"<script type='application/json' id='data'>{data}</script><script>{SCRIPT}</script></body></html>\n")
