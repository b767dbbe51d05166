"""A radix prefix cache at token granularity (SGLang's ``RadixCache`` with ``page_size`` 1), as token counts.

SGLang keeps the K/V of every computed prefix in a tree keyed by token ids (sglang/srt/mem_cache/radix_cache.py,
0.5.23). A request being admitted *matches* its longest cached prefix and computes only the rest; a running request
*locks* the path it uses, so it is never evicted under it; unlocked tokens are *evictable*: they count as free
memory for admission (``PrefillBudget._available_and_evictable``) and are evicted, least recently used leaf first,
when the pool runs short.

Here each node is one token (page_size 1 makes every token its own page), so the tree is a trie of token ids and
sizes are node counts. Units: tokens. Checked against SGLang (``tests_sglang``): the prefix-hit lengths, and the
locked and evictable sizes through every admission decision they feed, in runs where nothing is evicted. Not
checked, and known to differ in about 4 % of random workloads that evict: which tokens eviction drops (SGLang
evicts whole compressed nodes by wall-clock access time; this tree evicts single tokens by a logical clock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class Node:
    """One cached token: its children by token id, how many running requests lock it, when it was last used."""

    __slots__ = ("children", "last_access", "lock", "parent", "token")

    def __init__(self, token: int, parent: Node | None):
        self.token, self.parent = token, parent
        self.children: dict[int, Node] = {}
        self.lock = 0
        self.last_access = 0

    def path(self) -> list[Node]:
        """This node and its ancestors up to (not including) the root."""
        out, node = [], self
        while node.parent is not None:
            out.append(node)
            node = node.parent
        return out


class RadixCache:
    """A token trie of cached K/V. ``enabled=False`` is SGLang's ``disable_radix_cache``: nothing is ever cached."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.root = Node(-1, None)
        self.size = 0  # tokens in the tree
        self.locked = 0  # tokens of the tree some running request locks
        self._clock = 0
        self.on_evict: Callable[[Node], None] | None = None  # told of each evicted node (the engine frees its slot)

    @property
    def evictable(self) -> int:
        """Tokens of the tree no running request locks (SGLang: ``evictable_size``)."""
        return self.size - self.locked

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def match(self, tokens: Sequence[int], limit: int) -> tuple[int, Node]:
        """The longest cached prefix of ``tokens[:limit]``: (its length, its last node). SGLang caps ``limit`` at
        the request's known tokens minus one (``Req._compute_max_prefix_len``): a request computes at least one."""
        node, n, now = self.root, 0, self._tick()
        if not self.enabled:
            return 0, node
        while n < limit and tokens[n] in node.children:
            node = node.children[tokens[n]]
            node.last_access = now
            n += 1
        return n, node

    def insert(self, tokens: Sequence[int]) -> tuple[int, Node]:
        """Cache ``tokens``; returns (how many were cached already, the last node). The caller frees its own copy
        of the already-cached ones (SGLang: ``cache_unfinished_req`` / ``cache_finished_req`` free duplicates)."""
        node, now = self.root, self._tick()
        if not self.enabled:
            return 0, node
        existing = 0
        for i, t in enumerate(tokens):
            child = node.children.get(t)
            if child is None:
                child = node.children[t] = Node(t, node)
                self.size += 1
            elif existing == i:
                existing += 1
            child.last_access = now
            node = child
        return existing, node

    def lock(self, node: Node) -> None:
        """A running request uses the path to ``node``: none of it may be evicted."""
        for n in node.path():
            if n.lock == 0:
                self.locked += 1
            n.lock += 1

    def unlock(self, node: Node) -> None:
        for n in node.path():
            n.lock -= 1
            if n.lock == 0:
                self.locked -= 1

    def evict(self, num_tokens: int) -> int:
        """Drop unlocked leaves, least recently used first, until ``num_tokens`` are freed or none is left.
        Returns the tokens freed."""
        freed = 0
        while freed < num_tokens:
            leaves = [n for n in self._nodes() if not n.children and n.lock == 0]
            if not leaves:
                break
            leaf = min(leaves, key=lambda n: n.last_access)
            assert leaf.parent is not None
            del leaf.parent.children[leaf.token]
            self.size -= 1
            if self.on_evict is not None:
                self.on_evict(leaf)
            freed += 1
        return freed

    def _nodes(self) -> list[Node]:
        out, todo = [], list(self.root.children.values())
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(n.children.values())
        return out
