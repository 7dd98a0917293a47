"""Radix tree over token ids (page size 1): nodes hold pool slot ids.

match / insert / lock / LRU eviction of unlocked leaves. The tree owns the slots stored in
it; a request that reuses a prefix locks the node so eviction cannot take it mid-flight.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator


def _common(key: list[int], tokens: list[int], i: int) -> int:
    """How many leading ids of `key` tokens[i:] shares. A whole-key match, the usual case,
    is one slice compare in C instead of a Python loop over the ids."""
    m = len(key)
    if tokens[i : i + m] == key:
        return m
    n = 0
    while n < m and i + n < len(tokens) and key[n] == tokens[i + n]:
        n += 1
    return n


class Node:
    __slots__ = ("children", "parent", "key", "value", "lock", "stamp")

    def __init__(
        self,
        parent: Node | None = None,
        key: list[int] | None = None,
        value: list[int] | None = None,
    ) -> None:
        self.children: dict[int, Node] = {}
        self.parent = parent
        self.key: list[int] = key or []
        self.value: list[int] = value or []
        self.lock = 0
        self.stamp = 0

    def up(self) -> Node:
        """The parent: every node but the root has one, and no walk climbs past the root."""
        assert self.parent is not None, "climbed past the radix root"
        return self.parent


class RadixTree:
    def __init__(self) -> None:
        self.root = Node()
        self.root.lock = 1  # never evicted
        self._clock = itertools.count(1)
        self.size = 0  # slots owned by the tree
        self.locked_size = 0  # slots on locked paths (not evictable)

    def _touch(self, node: Node) -> None:
        node.stamp = next(self._clock)

    def _split(self, node: Node, at: int) -> Node:
        """Split `node` so its first `at` tokens become a new parent; returns the parent."""
        top = Node(node.parent, node.key[:at], node.value[:at])
        top.lock, top.stamp = node.lock, node.stamp
        node.up().children[top.key[0]] = top
        node.key, node.value, node.parent = node.key[at:], node.value[at:], top
        top.children[node.key[0]] = node
        return top

    def match(self, tokens: list[int]) -> tuple[list[int], Node]:
        """Longest cached prefix of `tokens`: (slot ids, the node ending exactly there)."""
        node, slots, i = self.root, [], 0
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            n = _common(child.key, tokens, i)
            if n < len(child.key):
                child = self._split(child, n)
            self._touch(child)
            slots += child.value
            i += n
            node = child
        return slots, node

    def insert(self, tokens: list[int], slots: list[int]) -> int:
        """Insert a sequence; returns how many leading tokens were already present (the
        caller frees its own duplicates of those)."""
        assert len(tokens) == len(slots)
        node, i = self.root, 0
        while i < len(tokens):
            child = node.children.get(tokens[i])
            if child is None:
                leaf = Node(node, tokens[i:], slots[i:])
                node.children[tokens[i]] = leaf
                self._touch(leaf)
                self.size += len(tokens) - i
                return i
            n = _common(child.key, tokens, i)
            if n < len(child.key):
                child = self._split(child, n)
            self._touch(child)
            i += n
            node = child
        return i

    def lock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock == 0:
                self.locked_size += len(node.value)
            node.lock += 1
            node = node.up()

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            node.lock -= 1
            assert node.lock >= 0, "radix lock underflow"
            if node.lock == 0:
                self.locked_size -= len(node.value)
            node = node.up()

    @property
    def evictable(self) -> int:
        return self.size - self.locked_size

    def path_of(self, node: Node) -> list[int]:
        parts = []
        while node is not self.root:
            parts.append(node.key)
            node = node.up()
        return [t for key in reversed(parts) for t in key]

    def evict(
        self, need: int, on_evict: Callable[[list[int], int, list[int]], None] | None = None
    ) -> list[int]:
        """Free at least `need` slots from unlocked leaves, least recently used first;
        `on_evict(path, start, slots)` sees each leaf before its slots are freed."""
        heap = [(n.stamp, id(n), n) for n in self._nodes() if not n.children and n.lock == 0]
        heapq.heapify(heap)
        freed: list[int] = []
        while heap and len(freed) < need:
            _, _, leaf = heapq.heappop(heap)
            if on_evict is not None:
                path = self.path_of(leaf)
                on_evict(path, len(path) - len(leaf.value), leaf.value)
            freed += leaf.value
            self.size -= len(leaf.value)
            parent = leaf.up()
            del parent.children[leaf.key[0]]
            if parent is not self.root and not parent.children and parent.lock == 0:
                heapq.heappush(heap, (parent.stamp, id(parent), parent))
        return freed

    def _nodes(self) -> Iterator[Node]:
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            yield n
            stack += n.children.values()

    def all_slots(self) -> list[int]:
        return [s for n in self._nodes() for s in n.value]
