"""Disjoint sets of ``0 … n−1`` (union by pointing one root at the other, with path halving)."""

from __future__ import annotations


class UnionFind:
    """The sets of ``range(n)``, each named by its root; ``union`` makes ``b``'s root the joint root."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        parent = self.parent
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb
        return rb
