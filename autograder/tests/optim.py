"""torch.optim.SGD's update for the hidden tests, without torch.optim's step.

`SGD` follows PyTorch's single-tensor SGD (torch/optim/sgd.py, what `SGD.step` runs on CPU
tensors) operation for operation, so its values are PyTorch's, bit for bit; tests/grade/test_optim.py
checks that against torch.optim.SGD for every option. The grader uses it because
torch.optim's optimizers import torch._dynamo when they are first built (about 1.2 s, on the
critical path of every single-notebook grade of 05 and 06).
"""

from __future__ import annotations

import torch


class SGD:
    """`torch.optim.SGD(params, lr, momentum, dampening, weight_decay, nesterov, maximize)`:
    `step()`, `zero_grad()` and `state[p]["momentum_buffer"]`, as PyTorch has them."""

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.params = list(params)
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov, self.maximize = weight_decay, nesterov, maximize
        self.state: dict[torch.Tensor, dict] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            grad = p.grad if not self.maximize else -p.grad
            if self.weight_decay != 0:
                grad = grad.add(p, alpha=self.weight_decay)
            if self.momentum != 0:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    buf.mul_(self.momentum).add_(grad, alpha=1 - self.dampening)
                grad = grad.add(buf, alpha=self.momentum) if self.nesterov else buf
            p.add_(grad, alpha=-self.lr)
