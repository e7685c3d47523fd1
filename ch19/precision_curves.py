"""Loss curves of one small model trained in bf16, fp8 with dynamic scaling and fp8 with delayed
scaling: the evidence that the fp8 pairs (fp8_linear_training, fp8_delayed_scaling) are safe, not
only fast.

A student MLP (``layers`` blocks of x + W2 gelu(W1 x), fp32 master weights cast to bf16 for each
step, Adam) learns a fixed random teacher of the same shape from fresh random batches. Every variant
starts from the same weights and sees the same batches; only how its Linear layers multiply
differs: bf16 ``F.linear``, or ``ch19_fp8.fp8_linear`` (e4m3 activations and weights, e5m2
gradients) with dynamic or delayed (16-step amax history) scales. The tool prints the loss every
``--every`` steps for each variant and its gap to bf16, and writes a PNG of the curves.

On a CPU the same fp8 arithmetic runs (PyTorch's CPU ``_scaled_mm`` with the torch cast), slowly,
so the model shrinks to width 128 and 128 tokens per step (``CPU_SIZES``): ``--steps 60`` then takes
about a minute on two cores.
Run: python ch19/precision_curves.py --steps 300 --out artifacts/ch19_precision_curves.png
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from ch19_fp8 import DelayedScaling, DynamicScaling, fp8_linear

MODES = ("bf16", "fp8-dynamic", "fp8-delayed")
CPU_SIZES = {"tokens": 128, "dim": 128}


@dataclass(frozen=True)
class CurveConfig:
    steps: int = 300
    """Training steps per variant."""
    tokens: int = 512
    """Rows per batch (a multiple of 128 for the GPU cast kernel)."""
    dim: int = 256
    """Model width (a multiple of 128)."""
    layers: int = 2
    """Residual MLP blocks (hidden width 4 x dim)."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seed of the weights, the teacher and the batches."""


def _weights(cfg: CurveConfig, gen: torch.Generator, device: torch.device) -> list[torch.Tensor]:
    shapes = [(4 * cfg.dim, cfg.dim), (cfg.dim, 4 * cfg.dim)] * cfg.layers
    return [torch.randn(s, generator=gen, device=device) * s[1] ** -0.5 for s in shapes]


def _forward(x: torch.Tensor, weights: list[torch.Tensor], linear) -> torch.Tensor:
    for i in range(0, len(weights), 2):
        h = F.gelu(linear(i, x, weights[i].bfloat16()))
        x = x + linear(i + 1, h, weights[i + 1].bfloat16())
    return x


def train(cfg: CurveConfig, mode: str, device: torch.device) -> list[float]:
    """Loss of each step of ``cfg.steps`` Adam steps of the student, multiplying in ``mode``."""
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    teacher = _weights(cfg, gen, device)
    student = [w.requires_grad_() for w in _weights(cfg, gen, device)]
    opt = torch.optim.Adam(student, lr=cfg.lr)
    scalers = [DynamicScaling() if mode == "fp8-dynamic" else DelayedScaling({}) for _ in student]

    def linear(i: int, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.linear(x, w) if mode == "bf16" else fp8_linear(x, w, scalers[i])

    losses = []
    for _ in range(cfg.steps):
        x = torch.randn(cfg.tokens, cfg.dim, generator=gen, device=device).bfloat16()
        with torch.no_grad():
            target = _forward(x, teacher, lambda i, a, w: F.linear(a, w)).float()
        loss = F.mse_loss(_forward(x, student, linear).float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for s in scalers:
            if isinstance(s, DelayedScaling):
                s.step()
        losses.append(float(loss.detach()))
    return losses


def table(curves: dict[str, list[float]], every: int) -> str:
    """Loss every ``every`` steps per variant, and each fp8 variant's relative gap to bf16."""
    modes = list(curves)
    head = f"{'step':>6} " + " ".join(f"{m:>12}" for m in modes) + " " + " ".join(
        f"{'gap ' + m[4:]:>13}" for m in modes[1:])
    steps = len(curves[modes[0]])
    rows = [head]
    for s in sorted({*range(0, steps, every), steps - 1}):
        base = curves[modes[0]][s]
        gaps = " ".join(f"{(curves[m][s] - base) / base:>+12.2%} " for m in modes[1:])
        rows.append(f"{s + 1:>6} " + " ".join(f"{curves[m][s]:>12.4f}" for m in modes) + " " + gaps)
    return "\n".join(rows)


def plot(curves: dict[str, list[float]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode, losses in curves.items():
        ax.plot(range(1, len(losses) + 1), losses, label=mode)
    ax.set(xlabel="step", ylabel="MSE loss", yscale="log", title="Student MLP: bf16 vs fp8 training")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=CurveConfig.steps, help="training steps per variant")
    parser.add_argument("--every", type=int, default=25, help="print the loss every this many steps")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where training runs (default: cuda when present)")
    parser.add_argument("--out", type=Path, default=Path("artifacts/ch19_precision_curves.png"), help="PNG path of the loss curves")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    cfg = CurveConfig(steps=args.steps, **(CPU_SIZES if device.type == "cpu" else {}))
    curves = {mode: train(cfg, mode, device) for mode in MODES}
    print(f"Loss curves on {device.type} ({cfg.layers} blocks, width {cfg.dim}, {cfg.tokens} tokens/step)")
    print(table(curves, args.every))
    plot(curves, args.out)
    print(f"Plot saved to {args.out}")
    return curves


if __name__ == "__main__":
    main()
