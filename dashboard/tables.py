"""Tables drawn as plain HTML by a small Streamlit component (``st.components.v2``): formatted
cells that never cut a value off, a click on a row that opens what the row names, headers that
sort, and a column chooser.

``st.dataframe``'s grid is a canvas with a large script of its own: in headless Chromium on the
2-core machine it added about 0.4-0.5 s of main-thread time to every page load that showed one,
where this table costs about what the same rows as ``st.html`` do (bench/results/dashboard_render.md).
Each row is also a real link, so a middle click opens the run in a new tab.

Cells arrive as text already formatted (``ui.fmt``) and are set with ``textContent``: nothing from
the store is ever parsed as HTML. The table goes to the browser as JSON bytes that the script
encodes once, and a large table's rows can be encoded once and kept (``encode``): handed a dict,
Streamlit walks it for data frames and serializes it twice, ~0.2 s of a 10,000-span tree's every
rerun (py-spy on the run detail page, 1M-span store).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
import streamlit.components.v2 as components

TABLE_CLASS, ROW_CLASS = "aw-table", "aw-table-row"

_CSS = f"""
.aw-table-wrap {{overflow: auto; max-height: var(--aw-table-height, none); border: 1px solid rgba(49, 51, 63, 0.2);
  border-radius: 0.5rem;}}
.{TABLE_CLASS} {{border-collapse: separate; border-spacing: 0; width: 100%; font-size: 0.875rem;
  font-variant-numeric: tabular-nums;}}
.{TABLE_CLASS} th {{position: sticky; top: 0; z-index: 1; background: rgb(240, 242, 246); color: rgb(49, 51, 63);
  text-align: left; font-weight: 600; white-space: nowrap; padding: 0.35rem 0.6rem;
  border-bottom: 1px solid rgba(49, 51, 63, 0.2);}}
.{TABLE_CLASS} th.aw-num, .{TABLE_CLASS} td.aw-num {{text-align: right;}}
.{TABLE_CLASS} th button {{all: unset; cursor: pointer;}}
.{TABLE_CLASS} th button:hover {{text-decoration: underline;}}
.{TABLE_CLASS} td {{white-space: nowrap; padding: 0.3rem 0.6rem; border-bottom: 1px solid rgba(49, 51, 63, 0.08);}}
.{TABLE_CLASS} tr.{ROW_CLASS}.aw-clickable {{cursor: pointer;}}
.{TABLE_CLASS} tr.{ROW_CLASS}:hover td {{background: rgba(41, 181, 232, 0.08);}}
.{TABLE_CLASS} .aw-bad {{color: rgb(255, 43, 43);}}
.{TABLE_CLASS} .aw-good {{color: rgb(9, 171, 59);}}
.{TABLE_CLASS} .aw-dim {{opacity: 0.55;}}
.{TABLE_CLASS} .aw-hidden {{display: none;}}
.{TABLE_CLASS} tr.aw-selected td {{background: rgba(41, 181, 232, 0.18);}}
.{TABLE_CLASS} td.aw-timeline {{position: relative; min-width: 10rem; width: 30%; padding: 0;}}
.{TABLE_CLASS} .aw-fold {{display: inline-block; width: 1.1rem; margin-left: -1.1rem; cursor: pointer; opacity: 0.7;
  text-align: center; user-select: none;}}
.{TABLE_CLASS} .aw-fold:hover {{opacity: 1;}}
.{TABLE_CLASS} .aw-fold::before {{content: attr(data-mark);}}
.{TABLE_CLASS} .aw-bar {{position: absolute; top: 30%; height: 40%; min-width: 2px; border-radius: 2px;}}
.aw-table-pager {{display: flex; gap: 0.4rem; align-items: center; justify-content: flex-end; margin-top: 0.4rem;
  font-size: 0.875rem;}}
.aw-table-pager button {{border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.4rem; background: white;
  padding: 0.2rem 0.6rem; cursor: pointer; font: inherit;}}
.aw-table-pager button:disabled {{opacity: 0.4; cursor: default;}}
.aw-table-more {{text-align: center; font-size: 0.8rem; opacity: 0.6; padding: 0.3rem;}}
.aw-table-tools {{display: flex; justify-content: flex-end; font-size: 0.875rem; margin-bottom: 0.3rem;}}
.aw-table-tools details {{position: relative;}}
.aw-table-tools summary {{cursor: pointer; opacity: 0.8;}}
.aw-table-tools .aw-chooser {{position: absolute; right: 0; z-index: 2; background: white; padding: 0.5rem 0.8rem;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; columns: 2; white-space: nowrap;}}
.aw-table-tools label {{display: block;}}
"""

# Drawn again whenever its data changes; a row's click (not on its link with a modifier key, which
# the browser handles) and a header's click are trigger values, the hidden columns a state value.
_JS = (
    """
export default function (component) {
  const { setTriggerValue, setStateValue, parentElement } = component;
  const data = JSON.parse(new TextDecoder().decode(component.data));  // sent as JSON bytes (table())
  let root = parentElement.querySelector('.aw-table-root');
  if (!root) { root = document.createElement('div'); root.className = 'aw-table-root'; parentElement.appendChild(root); }
  const hidden = new Set(data.hidden || []);
  const cls = (c) => c.key + (c.numeric ? ' aw-num' : '') + (hidden.has(c.key) ? ' aw-hidden' : '');
  const wrap = document.createElement('div');
  wrap.className = 'aw-table-wrap';
  if (data.max_height) wrap.style.setProperty('--aw-table-height', data.max_height + 'px');
  const table = document.createElement('table');
  table.className = 'TABLE_CLASS';
  if (data.key) table.dataset.key = data.key;
  const head = table.createTHead().insertRow();
  for (const c of data.columns) {
    const th = document.createElement('th');
    th.className = cls(c);
    th.dataset.column = c.key;
    let label = c.label;
    if (data.sort && data.sort.column === c.key) label += data.sort.descending ? ' ↓' : ' ↑';
    if (c.sortable) {
      const b = document.createElement('button');
      b.textContent = label;
      b.title = 'Sort every row by ' + c.label;
      b.onclick = () => setTriggerValue('sort', c.key);
      th.appendChild(b);
    } else {
      th.textContent = label;
    }
    if (c.help) th.title = c.help;
    head.appendChild(th);
  }
  const body = table.createTBody();
  const draw = (r) => {
    const tr = body.insertRow();
    tr.className = 'ROW_CLASS' + (data.clickable ? ' aw-clickable' : '') + (r.id === data.selected ? ' aw-selected' : '');
    tr.dataset.id = r.id;
    data.columns.forEach((c, i) => {
      const td = tr.insertCell();
      td.className = cls(c) + (r.marks && r.marks[c.key] ? ' aw-' + r.marks[c.key] : '');
      if (c.timeline) {
        td.classList.add('aw-timeline');
        const b = r.bars && r.bars[c.key];
        if (b) {
          const bar = document.createElement('div');
          bar.className = 'aw-bar';
          bar.style.left = (100 * b[0]) + '%';
          bar.style.width = (100 * b[1]) + '%';
          bar.style.background = b[2];
          td.appendChild(bar);
        }
        td.title = r.cells[i];
      } else if (i === 0 && r.fold !== undefined) {
        const fold = document.createElement('span');
        fold.className = 'aw-fold';
        fold.dataset.mark = r.fold ? 'FOLDED' : 'UNFOLDED';  // drawn by CSS: the cell's text stays the span's
        fold.title = r.fold ? 'Show what is under this span' : 'Hide what is under this span';
        fold.onclick = (e) => { e.stopPropagation(); setTriggerValue('fold', r.id); };
        td.append(fold, r.cells[i]);
      } else if (i === 0 && r.href) {
        const a = document.createElement('a');
        a.href = r.href;
        a.textContent = r.cells[i];
        td.appendChild(a);
      } else {
        td.textContent = r.cells[i];
      }
      if (i === 0 && (r.depth || data.folds)) td.style.paddingLeft = (0.6 + (data.folds ? 1.1 : 0) + 1.1 * Math.min(r.depth || 0, 16)) + 'rem';
      if (r.titles && r.titles[c.key]) td.title = r.titles[c.key];
    });
    if (data.clickable) {
      tr.onclick = (e) => {
        if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        for (const old of body.querySelectorAll('tr.aw-selected')) old.classList.remove('aw-selected');
        tr.classList.add('aw-selected');
        setTriggerValue('open', r.id);
      };
    }
    return tr;
  };
  // Rows are drawn a chunk at a time, the next when the last comes into view: a 10,000-span
  // trace draws its first rows at once (the selected one is drawn with those before it).
  const chunk = data.chunk || data.rows.length;
  const selectedAt = data.rows.findIndex((r) => r.id === data.selected);
  let drawn = 0;
  const more = document.createElement('div');
  more.className = 'aw-table-more';
  const drawMore = (upTo) => {
    const end = Math.min(data.rows.length, Math.max(upTo, drawn + chunk));
    for (; drawn < end; drawn++) draw(data.rows[drawn]);
    more.textContent = drawn < data.rows.length ? `${drawn.toLocaleString()} of ${data.rows.length.toLocaleString()} rows drawn: scroll for more` : '';
  };
  drawMore(selectedAt + 1);
  if (drawn < data.rows.length && 'IntersectionObserver' in window) {
    new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting)) drawMore(0); }, { root: wrap }).observe(more);
  }
  wrap.appendChild(table);
  wrap.appendChild(more);
  const parts = [];
  if (data.chooser) {
    const tools = document.createElement('div');
    tools.className = 'aw-table-tools';
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Columns (' + (data.columns.length - hidden.size) + ' of ' + data.columns.length + ')';
    details.appendChild(summary);
    const box = document.createElement('div');
    box.className = 'aw-chooser';
    for (const c of data.columns.slice(1)) {
      const label = document.createElement('label');
      const input = document.createElement('input');
      input.type = 'checkbox';
      input.checked = !hidden.has(c.key);
      input.onchange = () => {
        input.checked ? hidden.delete(c.key) : hidden.add(c.key);
        for (const cell of table.querySelectorAll('.' + CSS.escape(c.key))) cell.classList.toggle('aw-hidden', !input.checked);
        summary.textContent = 'Columns (' + (data.columns.length - hidden.size) + ' of ' + data.columns.length + ')';
        setStateValue('hidden', Array.from(hidden));
      };
      label.append(input, ' ' + c.label);
      box.appendChild(label);
    }
    details.appendChild(box);
    tools.appendChild(details);
    parts.push(tools);
  }
  parts.push(wrap);
  if (data.pager) {
    const [page, pages] = data.pager;
    const pager = document.createElement('div');
    pager.className = 'aw-table-pager';
    const go = (label, to, title) => {
      const b = document.createElement('button');
      b.textContent = label;
      b.title = title;
      b.disabled = to < 1 || to > pages || to === page;
      b.onclick = () => setTriggerValue('page', String(to));
      pager.appendChild(b);
    };
    go('«', 1, 'First page');
    go('‹ Previous', page - 1, 'Previous page');
    const at = document.createElement('span');
    at.className = 'aw-table-page';
    at.textContent = `Page ${page.toLocaleString()} of ${pages.toLocaleString()}`;
    pager.appendChild(at);
    go('Next ›', page + 1, 'Next page');
    go('»', pages, 'Last page');
    parts.push(pager);
  }
  root.replaceChildren(...parts);
  const chosen = body.querySelector('tr.aw-selected');
  if (chosen && data.max_height) wrap.scrollTop = chosen.offsetTop - wrap.clientHeight / 3;
}
""".replace("TABLE_CLASS", TABLE_CLASS)
    .replace("ROW_CLASS", ROW_CLASS)
    .replace("UNFOLDED", "▾")
    .replace("FOLDED", "▸")
)

_component = components.component("agentwatch.table", css=_CSS, js=_JS, isolate_styles=False)


@dataclass(frozen=True)
class Column:
    """A column: ``key`` names it (and is what a header click reports), ``label`` is shown;
    numeric columns are right-aligned; ``sortable`` headers report a click."""

    key: str
    label: str
    numeric: bool = False
    sortable: bool = False
    help: str | None = None
    timeline: bool = False  # a bar per row (``Row.bars``) on a shared time axis; the cell's text is its hover


@dataclass(frozen=True)
class Row:
    """A row's cells, already formatted, in its table's column order; ``id`` is what a click on
    it reports, ``href`` makes its first cell a link; ``marks`` colour cells (``bad``, ``good``,
    ``dim``) and ``titles`` give a cell a hover text (the full value of a long one)."""

    id: str
    cells: Sequence[str]
    href: str | None = None
    marks: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    depth: int = 0  # a tree's row: its first cell indented
    bars: dict[str, tuple[float, float, str]] = field(default_factory=dict)  # timeline column -> (start, width, colour)
    fold: bool | None = (
        None  # a tree node with children: True while they are hidden; a click on its mark reports ``fold``
    )


@dataclass(frozen=True)
class Encoded:
    """Rows encoded for the browser once (``encode``): a table kept in a cache (run detail's
    10,000-span tree) is not encoded again on each rerun."""

    json: str


def encode(rows: Sequence[Row]) -> Encoded:
    return Encoded(json.dumps([_row(r) for r in rows], separators=(",", ":")))


@dataclass(frozen=True)
class TableEvent:
    """What the user did in this run of the page: opened a row, asked to sort by a column, to see
    another page."""

    opened: str | None
    sort: str | None
    hidden: list[str]
    page: str | None = None


def table(
    columns: Sequence[Column],
    rows: Sequence[Row] | Encoded,
    *,
    key: str,
    clickable: bool = False,
    sort: tuple[str, bool] | None = None,
    chooser: bool = False,
    hidden: Sequence[str] = (),
    max_height: int | None = None,
    selected: str | None = None,
    chunk: int | None = None,
    pager: tuple[int, int] | None = None,
    folds: bool = False,
) -> TableEvent:
    """Draw the table; ``sort`` is (column key, descending) as now applied, ``hidden`` the columns
    hidden until the user chooses (the chooser's choice is kept per ``key`` for the session),
    ``selected`` the id of the row shown selected; ``chunk`` rows are drawn at a time; ``pager``
    (page, pages) draws first/previous/next/last buttons, whose click is the ``page`` trigger;
    ``folds``: a tree whose rows with children (``Row.fold``) have a mark that folds them (the
    ``fold`` trigger, read with ``clicked(key, "fold")``)."""
    state = st.session_state.get(key)  # the component's state values as the browser last sent them
    chosen = state.get("hidden") if state is not None else None
    data: dict[str, Any] = {
        "key": key,
        "columns": [
            {
                "key": c.key,
                "label": c.label,
                "numeric": c.numeric,
                "sortable": c.sortable,
                "help": c.help,
                "timeline": c.timeline,
            }
            for c in columns
        ],
        "clickable": clickable,
        "sort": {"column": sort[0], "descending": sort[1]} if sort else None,
        "chooser": chooser,
        "hidden": list(chosen if chosen is not None else hidden),
        "max_height": max_height,
        "selected": selected,
        "chunk": chunk,
        "pager": list(pager) if pager else None,
        "folds": folds,
    }
    encoded = rows if isinstance(rows, Encoded) else encode(rows)
    result = _component(
        data=f'{json.dumps(data)[:-1]}, "rows": {encoded.json}}}'.encode(),
        key=key,
        default={"hidden": list(hidden)},
        on_open_change=_nothing,
        on_sort_change=_nothing,
        on_page_change=_nothing,
        on_fold_change=_nothing,
        on_hidden_change=_nothing,
    )
    return TableEvent(
        opened=result.get("open"),
        sort=result.get("sort"),
        hidden=list(result.get("hidden") or []),
        page=result.get("page"),
    )


def _row(row: Row) -> dict[str, Any]:
    """A row as the script reads it, without its empty fields (a 10,000-span tree is sent whole)."""
    sent: dict[str, Any] = {"id": row.id, "cells": list(row.cells)}
    if row.href:
        sent["href"] = row.href
    if row.marks:
        sent["marks"] = row.marks
    if row.titles:
        sent["titles"] = row.titles
    if row.depth:
        sent["depth"] = row.depth
    if row.fold is not None:
        sent["fold"] = row.fold
    if row.bars:
        sent["bars"] = {k: (round(start, 5), round(width, 5), colour) for k, (start, width, colour) in row.bars.items()}
    return sent


def clicked(key: str, event: str) -> str | None:
    """The row (``open``), fold mark (``fold``) or header (``sort``) clicked in table ``key`` that this run of the
    page answers, read before the page draws anything (so the page can draw what it selects)."""
    state = st.session_state.get(key)
    value = state.get(event) if state is not None else None
    return value if isinstance(value, str) else None


def _nothing() -> None:
    """A trigger needs a callback to be reported; the page reads it from the result."""
