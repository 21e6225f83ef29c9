#!/usr/bin/env python3
"""Plots a `supercell play --headless --soak` JSON: memory, handles and delivered rate over
time, with the path flips shaded. Usage: plot_soak.py SOAK.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, out):
    report = json.load(open(src))
    soak = report["soak"]
    s = soak["samples"]
    t = [x["t_s"] for x in s]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    # Delivered GB/s between samples.
    rate = [0.0] + [
        (s[i]["bytes"] - s[i - 1]["bytes"]) / max(t[i] - t[i - 1], 1e-9) / 1e9
        for i in range(1, len(s))
    ]
    ax = axes[0]
    ax.plot(t, rate, color="tab:blue", lw=1)
    ax.set_ylabel("delivered GB/s")
    # Shade the direct path's spans.
    start = None
    for i, x in enumerate(s):
        if x["path"] == "direct" and start is None:
            start = t[i]
        if (x["path"] != "direct" or i == len(s) - 1) and start is not None:
            for a in axes:
                a.axvspan(start, t[i], color="tab:green", alpha=0.08, lw=0)
            start = None
    axes[1].plot(t, [x["rss"] / 1e6 for x in s], color="tab:red")
    axes[1].set_ylabel("RSS (MB)")
    axes[2].plot(t, [x["fds"] for x in s], label="open fds", color="tab:purple")
    axes[2].plot(t, [x["threads"] for x in s], label="threads", color="tab:orange")
    axes[2].set_ylabel("count")
    axes[2].legend(loc="center right")
    gpu = [x["gpu_used"] for x in s]
    if any(g is not None for g in gpu):
        axes[3].plot(t, [(g or 0) / 1e6 for g in gpu], color="tab:brown")
        axes[3].set_ylabel("GPU used (MB)")
    else:
        axes[3].text(0.5, 0.5, "GPU memory: not known here", ha="center", transform=axes[3].transAxes)
    axes[3].set_xlabel("seconds (green: direct path, white: host path)")
    for a in axes[1:]:
        a.ticklabel_format(useOffset=False, style="plain", axis="y")
    m = report["machine"]
    fig.suptitle(
        f"supercell soak: {soak['duration_s']:.0f} s, {soak['frames']} frames, "
        f"{soak['bytes'] / 1e12:.2f} TB, {soak['toggles']} path flips\n"
        f"{m['adapter']}, {report['date']}, RSS growth {soak['rss_growth'] / 1e6:+.1f} MB",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
