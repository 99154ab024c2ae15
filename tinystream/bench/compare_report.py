"""`tinystream bench compare`'s figures: medians and spreads per cell, a table, and two pictures.

Pure except `write_pictures`, which draws with matplotlib (the [bench] extra) and is skipped, with
a message, where it is not installed. A cell's ratio is the median of the per-round ratios (each
round's pair ran back to back, so the machine's noise is shared within a pair), with its range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinystream.bench.e2e_latency import LatencyRun
from tinystream.bench.stats import RunResult, Spread


@dataclass(frozen=True)
class Pair:
    """One round of one cell: ours and the peer, run back to back."""

    cell: str
    round_index: int
    ours: RunResult
    peer: RunResult


@dataclass(frozen=True)
class CellSummary:
    cell: str
    ours_records_per_s: Spread
    peer_records_per_s: Spread
    ratio: Spread  # ours / peer records/s, per round
    ours_cpu_s_per_gb: Spread
    peer_cpu_s_per_gb: Spread
    cpu_ratio: Spread  # ours / peer CPU per GB, per round (lower is cheaper)
    ours_client_cores: Spread  # cores the load generator kept busy (franzbench only: empty for the others)
    peer_client_cores: Spread

    def as_dict(self) -> dict[str, object]:
        return {"cell": self.cell, **{name: getattr(self, name).as_dict() for name in (
            "ours_records_per_s", "peer_records_per_s", "ratio", "ours_cpu_s_per_gb", "peer_cpu_s_per_gb",
            "cpu_ratio", "ours_client_cores", "peer_client_cores")}}


def summarize(cells: list[str], pairs: list[Pair]) -> list[CellSummary]:
    """One summary per cell, in the order the cells ran."""
    out = []
    for cell in cells:
        mine = [p for p in pairs if p.cell == cell]
        with_cpu = [p for p in mine if p.ours.cpu_s_per_gb and p.peer.cpu_s_per_gb]
        out.append(CellSummary(
            cell=cell,
            ours_records_per_s=Spread.of([p.ours.records_per_s for p in mine]),
            peer_records_per_s=Spread.of([p.peer.records_per_s for p in mine]),
            ratio=Spread.of([p.ours.records_per_s / p.peer.records_per_s for p in mine if p.peer.records_per_s]),
            ours_cpu_s_per_gb=Spread.of([p.ours.cpu_s_per_gb for p in with_cpu]),  # type: ignore[misc]
            peer_cpu_s_per_gb=Spread.of([p.peer.cpu_s_per_gb for p in with_cpu]),  # type: ignore[misc]
            cpu_ratio=Spread.of([p.ours.cpu_s_per_gb / p.peer.cpu_s_per_gb  # type: ignore[operator]
                                 for p in with_cpu]),
            ours_client_cores=Spread.of([c for p in mine if (c := p.ours.client_cores) is not None]),
            peer_client_cores=Spread.of([c for p in mine if (c := p.peer.client_cores) is not None]),
        ))
    return out


def _spread(s: Spread, digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
    if not s.count:
        return "n/a"
    return f"{s.median / scale:,.{digits}f} [{s.low / scale:,.{digits}f}..{s.high / scale:,.{digits}f}]{unit}"


def table(summaries: list[CellSummary], peer: str) -> str:
    """A Markdown table: records/s (millions) and CPU per GB, each with its median ratio and range.

    With franzbench as the load generator, two more columns say how many cores it kept busy against
    each broker: a client as busy against both as it can be is what set the pace, not the broker.
    """
    with_client = any(s.ours_client_cores.count or s.peer_client_cores.count for s in summaries)
    lines = [
        f"| cell | ours M records/s | {peer} M records/s | ours / {peer} records/s | ours CPU s/GB | "
        f"{peer} CPU s/GB | ours / {peer} CPU per GB |"
        + (f" client cores busy, ours | client cores busy, {peer} |" if with_client else ""),
        "|---|---|---|---|---|---|---|" + ("---|---|" if with_client else ""),
    ]
    for s in summaries:
        lines.append(
            f"| {s.cell} | {_spread(s.ours_records_per_s, 2, 1e6)} | {_spread(s.peer_records_per_s, 2, 1e6)} | "
            f"{_spread(s.ratio, unit='x')} | {_spread(s.ours_cpu_s_per_gb)} | {_spread(s.peer_cpu_s_per_gb)} | "
            f"{_spread(s.cpu_ratio, unit='x')} |"
            + (f" {_spread(s.ours_client_cores)} | {_spread(s.peer_client_cores)} |" if with_client else ""))
    return "\n".join(lines)


def write_pictures(summaries: list[CellSummary], pairs: list[Pair], peer: str, out: Path) -> list[Path]:
    """throughput.png (records/s per cell, each round a dot, the median a bar) and cpu.png (CPU per GB)."""
    import matplotlib  # optional: the [bench] extra

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    written = []
    for name, title, figure_of in (
        ("throughput.png", "records/s (millions), each round a dot", lambda r: r.records_per_s / 1e6),
        ("cpu.png", "broker CPU seconds per GB (lower is cheaper)", lambda r: r.cpu_s_per_gb),
    ):
        fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(summaries)), 4))
        for offset, side, label in ((-0.2, "ours", "tinystream"), (0.2, "peer", peer)):
            dots = [[v for p in pairs if p.cell == s.cell and (v := figure_of(getattr(p, side))) is not None]
                    for s in summaries]
            ax.bar([i + offset for i in range(len(summaries))],
                   [Spread.of(values).median if values else 0.0 for values in dots], width=0.38, label=label,
                   alpha=0.7)
            for i, values in enumerate(dots):
                ax.plot([i + offset] * len(values), values, "k.", markersize=4)
        ax.set_xticks(range(len(summaries)), [s.cell for s in summaries], rotation=20)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written



# --------------------------------------------------------------------------- the latency cell


@dataclass(frozen=True)
class LatencyPair:
    """One round of the latency cell: ours and the peer at the same fixed rate, back to back."""

    round_index: int
    ours: LatencyRun
    peer: LatencyRun


def latency_table(pairs: list[LatencyPair], peer: str) -> str:
    """A Markdown table: end-to-end p50 / p99 / p99.9 per side (median over rounds, range), the p99 ratio."""
    if not pairs:
        return ""
    rate = pairs[0].ours.rate
    lines = [f"| latency at {rate:,} records/s (ms) | ours | {peer} | ours / {peer} |", "|---|---|---|---|"]
    for key in ("p50", "p99", "p99.9"):
        ours = Spread.of([p.ours.latency_ms[key] for p in pairs if key in p.ours.latency_ms])
        theirs = Spread.of([p.peer.latency_ms[key] for p in pairs if key in p.peer.latency_ms])
        ratio = Spread.of([p.ours.latency_ms[key] / p.peer.latency_ms[key] for p in pairs
                           if p.ours.latency_ms.get(key) and p.peer.latency_ms.get(key)])
        lines.append(f"| {key} | {_spread(ours, 1)} | {_spread(theirs, 1)} | {_spread(ratio, unit='x')} |")
    received = (Spread.of([p.ours.received_per_s for p in pairs]), Spread.of([p.peer.received_per_s for p in pairs]))
    lines.append(f"| received records/s | {_spread(received[0], 0)} | {_spread(received[1], 0)} | |")
    return "\n".join(lines)


def write_latency_picture(pairs: list[LatencyPair], peer: str, out: Path) -> Path:
    """latency.png: the per-second p99 over the run, each round a line, both sides (log scale)."""
    import matplotlib  # optional: the [bench] extra

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for side, label, colour in (("ours", "tinystream", "tab:blue"), ("peer", peer, "tab:orange")):
        for pair in pairs:
            series = getattr(pair, side).series
            ax.plot([s for s, _ in series], [max(v, 0.5) for _, v in series], color=colour, alpha=0.8,
                    linewidth=1, label=label if pair is pairs[0] else None)
    rate = pairs[0].ours.rate if pairs else 0
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the producer started (JVM start-up included)")
    ax.set_ylabel("p99 end-to-end latency (ms)")
    ax.set_title(f"per-second p99, produce -> consume, RF 3 acks=all\n{rate:,} records/s; each round a line")
    ax.legend()
    fig.tight_layout()
    path = out / "latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
