"""The report of a suite run: a Markdown table for stdout and, in a folder, the JSON document, CSV, a booktabs
LaTeX table and one self-contained HTML page. It renders the report document (built by :mod:`capeval.suite` and
:mod:`capeval.statistics.systems`) and computes no statistic."""

from capeval.report.markdown import markdown_table
from capeval.report.write import write_report

__all__ = ["markdown_table", "write_report"]
