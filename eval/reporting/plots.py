"""PNG plots of the report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np

from .tables import TaskTable


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # labels are names given by users ($x^{ is text, not mathtext)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No Software/date metadata: the same report gives the same bytes.
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return buf.getvalue()


def heatmap_png(table: TaskTable, metric: str) -> bytes:
    """Models (rows) x prompts (columns), each cell annotated with its score."""
    plt = _pyplot()
    data = table.scores.T  # models x prompts
    n_models, n_prompts = data.shape
    fig, ax = plt.subplots(figsize=(2.2 + 1.0 * n_prompts, 1.2 + 0.55 * n_models))
    vmax = table.scale
    im = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(n_prompts), table.prompts)
    ax.set_yticks(range(n_models), table.models)
    ax.set_xlabel("prompt")
    ax.set_title(f"{table.task}: {metric}" + (" (%)" if table.scale == 100.0 else ""))
    for i in range(n_models):
        for j in range(n_prompts):
            value = data[i, j]
            # Dark text on the light (high) end of viridis, white on the dark end.
            colour = "black" if value > 0.6 * vmax else "white"
            label = f"{value:.1f}" if table.scale == 100.0 else f"{value:.3f}"
            ax.text(j, i, label, ha="center", va="center", color=colour, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    return _png(fig)


def rank_vs_alpha_png(models: Sequence[str], alphas: Sequence[float], ranks: np.ndarray, title: str) -> bytes:
    """ranks[a, m] = rank of model m at alphas[a]; one line per model, rank 1 on top."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.8 + 0.45 * len(models)))
    markers = "osD^v<>ph*"
    for m, name in enumerate(models):
        ax.plot(alphas, ranks[:, m], marker=markers[m % len(markers)], markersize=4, label=name)
    ax.set_xlabel("α (variance penalty of the Sharpe score)")
    ax.set_ylabel("rank (1 = best)")
    ax.set_yticks(range(1, len(models) + 1))
    ax.set_ylim(len(models) + 0.5, 0.5)
    ax.set_xlim(min(alphas) - 0.05, max(alphas) + 0.05)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _png(fig)
