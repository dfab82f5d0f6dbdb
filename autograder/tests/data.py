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
