"""Multinomial logistic regression with sklearn's default objective (L2, C=1, lbfgs), in torch."""
from __future__ import annotations

import numpy as np
import torch


class LogisticRegression:
    def __init__(self, solver: str = "lbfgs", multi_class: str = "auto", max_iter: int = 100, C: float = 1.0):
        self.max_iter, self.C = max_iter, C

    def fit(self, x, y) -> LogisticRegression:
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
        self.classes_, y = np.unique(np.asarray(y), return_inverse=True)
        y = torch.as_tensor(y)
        w = torch.zeros(x.shape[1], len(self.classes_), dtype=torch.float64, requires_grad=True)
        b = torch.zeros(len(self.classes_), dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], max_iter=self.max_iter, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = self.C * torch.nn.functional.cross_entropy(x @ w + b, y, reduction="sum") + 0.5 * (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)
        self.w, self.b = w.detach(), b.detach()
        return self

    def predict(self, x) -> np.ndarray:
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
        return self.classes_[(x @ self.w + self.b).argmax(1).numpy()]

    def score(self, x, y) -> float:
        return float((self.predict(x) == np.asarray(y)).mean())
