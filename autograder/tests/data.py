"""Inputs for hidden tests: seeded, never touching the global RNG."""

from __future__ import annotations

import torch


def rand(*shape: int, seed: int, dtype: torch.dtype = torch.float32, low: float = -1.0,
         high: float = 1.0) -> torch.Tensor:
    """Uniform values in [low, high) from a private generator seeded with `seed`."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low).to(dtype)


def away_from_zero(*shape: int, seed: int, dtype: torch.dtype = torch.float32,
                   margin: float = 0.05) -> torch.Tensor:
    """Random values with |z| >= margin: for derivatives that are not defined at 0."""
    z = rand(*shape, seed=seed, dtype=dtype)
    return torch.where(z.abs() < margin, torch.sign(z + 1e-12) * margin, z)


def sweep(strategy, check, examples: int = 8) -> None:
    """Run `check(example)` on `examples` inputs drawn by hypothesis from `strategy`.

    Deterministic (derandomized, no example database) and cheap: no shrinking, so a failing
    learner costs one more call (hypothesis replays the failure), and the first failure is
    raised as it is, with the message `check` wrote for the learner. Every call crosses into
    the sandbox: keep `examples` small.
    """
    from hypothesis import HealthCheck, Phase, given, settings

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def run(example):
        check(example)

    run()
