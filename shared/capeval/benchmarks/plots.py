"""PNG plots for ``capeval benchmark --plot``: metric vs human scores, or per-category pairwise accuracy."""

from __future__ import annotations

import os
from typing import Dict, Sequence

from capeval.core.errors import ModelNotAvailableError


def _figure():
    try:
        import matplotlib
    except ImportError as exc:
        raise ModelNotAvailableError("--plot needs matplotlib: pip install 'capeval[plot]'") from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(6, 4.5), dpi=100)


def scatter_plot(path: os.PathLike, metric_scores: Sequence[float], human: Sequence[float], *, title: str,
                 metric: str) -> None:
    """Metric score (x) against human score (y), one translucent dot per judgment row."""
    plt, (fig, ax) = _figure()
    ax.scatter(metric_scores, human, s=6, alpha=0.3, linewidths=0)
    ax.set_xlabel(metric)
    ax.set_ylabel("human score")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def category_bar_plot(path: os.PathLike, categories: Dict[str, Dict[str, float]], *, title: str) -> None:
    """Accuracy per category (mean over draws, std as error bar), on the ×100 scale."""
    plt, (fig, ax) = _figure()
    names = list(categories)
    ax.bar(names, [categories[c]["mean"] for c in names], yerr=[categories[c]["std"] for c in names], capsize=4)
    ax.set_ylim(0, 100)
    ax.set_ylabel("pairwise accuracy (x100)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
