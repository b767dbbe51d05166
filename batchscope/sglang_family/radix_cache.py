"""A radix prefix cache of compressed nodes (SGLang's ``RadixCache`` with ``page_size`` 1), as token counts.

SGLang keeps the K/V of every computed prefix in a tree keyed by token ids (sglang/srt/mem_cache/radix_cache.py,
0.5.23). A request being admitted *matches* its longest cached prefix and computes only the rest; a running request
*locks* the path it uses, so it is never evicted under it; unlocked tokens are *evictable*: they count as free
memory for admission (``PrefillBudget._available_and_evictable``) and are evicted when the pool runs short.

Each node holds a span of tokens (its ``key``) and their K/V slots (its ``value``; a cache without slots stores
the token ids there, as SGLang does without a pool); a span is split in two where a match or an insert stops
inside it. Units: tokens.

**Eviction** (SGLang's ``RadixCache.evict`` with its default ``LRUStrategy``): the candidates are the leaves no
request locks; the one least recently accessed goes first, whole (all its tokens, even past the number asked
for); a parent left childless and unlocked becomes a candidate in turn; it stops once the tokens asked for are
freed or no candidate is left.

**Access times**: SGLang stamps nodes with ``time.monotonic()``; here a logical clock, one tick wherever SGLang
reads its clock (the driver of SGLang's scheduler gives it the same kind of clock, ``batchscope_sglang.clock``):
a match or an insert takes one time and stamps every node it enters, the root included, and a node it splits
(whose unmatched tail keeps that stamp); every new node (a split's head, an inserted leaf) is stamped when made,
so a split's head is newer than the walk that split it. No two leaves share a stamp, so the order is total.
Checked against SGLang (``tests_sglang``): prefix-hit lengths, locked and evictable sizes and the evictions they
lead to, step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class Node:
    """A span of cached tokens: its token ids and slots, children by first token, how many running requests lock
    it, when it was last accessed (the cache's logical clock)."""

    __slots__ = ("children", "key", "last_access", "lock", "parent", "value")

    def __init__(self, key: Sequence[int], value: Sequence[int], parent: Node | None, now: int):
        self.key, self.value, self.parent = list(key), list(value), parent
        self.children: dict[int, Node] = {}
        self.lock = 0
        self.last_access = now

    def path(self) -> list[Node]:
        """The nodes from the root's child down to this one (the root, which holds no tokens, left out)."""
        out, node = [], self
        while node.parent is not None:
            out.append(node)
            node = node.parent
        return out[::-1]


class RadixCache:
    """A radix tree of cached K/V. ``enabled=False`` is SGLang's ``disable_radix_cache``: nothing is ever cached."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.clock = 0  # the logical clock: ticks where SGLang reads time.monotonic()
        self.root = Node([], [], None, 0)
        self.size = 0  # tokens in the tree
        self.locked = 0  # tokens of the tree some running request locks
        self.on_evict: Callable[[Node], None] | None = None  # told of each evicted node (the engine frees its slots)

    @property
    def evictable(self) -> int:
        """Tokens of the tree no running request locks (SGLang: ``evictable_size``)."""
        return self.size - self.locked

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def match(self, tokens: Sequence[int], limit: int) -> tuple[int, Node]:
        """The longest cached prefix of ``tokens[:limit]``: (its length, its last node), splitting the node it ends
        inside. SGLang caps ``limit`` at the request's known tokens minus one (``Req._compute_max_prefix_len``)
        when admitting, and matches all of them when sorting by LPM or refreshing the waiting queue's prefixes."""
        if not self.enabled or limit <= 0:
            return 0, self.root
        return self._walk(tokens, limit, self._tick())

    def insert(self, tokens: Sequence[int], values: Sequence[int] | None = None) -> tuple[int, Node]:
        """Cache ``tokens`` (with their slots ``values``; default the token ids): returns (how many were cached
        already, the last node). The caller frees its own copies of the already-cached ones (SGLang:
        ``RadixCache._insert_cache`` frees the duplicates)."""
        if not self.enabled:
            return 0, self.root
        values = list(tokens) if values is None else values
        assert len(values) == len(tokens), "one slot per token"
        existing, node = self._walk(tokens, len(tokens), self._tick())
        if existing < len(tokens):
            leaf = Node(tokens[existing:], values[existing:], node, self._tick())
            node.children[leaf.key[0]] = leaf
            self.size += len(leaf.key)
            node = leaf
        return existing, node

    def _walk(self, tokens: Sequence[int], limit: int, now: int) -> tuple[int, Node]:
        """Follow ``tokens[:limit]`` down from the root, stamping ``now`` on every node entered; where it stops
        inside a node, split it there. Returns (tokens followed, the node they end at)."""
        node, n = self.root, 0
        node.last_access = now
        while n < limit and tokens[n] in node.children:
            child = node.children[tokens[n]]
            child.last_access = now
            k = 0
            while k < len(child.key) and n + k < limit and child.key[k] == tokens[n + k]:
                k += 1
            if k < len(child.key):
                return n + k, self._split(child, k)
            node, n = child, n + k
        return n, node

    def _split(self, node: Node, k: int) -> Node:
        """Cut ``node`` after its first ``k`` tokens: a new node (stamped now) holds them, with the same locks, and
        has ``node`` (the rest, its stamp kept) as its only child. Returns the new node."""
        assert node.parent is not None and 0 < k < len(node.key)
        head = Node(node.key[:k], node.value[:k], node.parent, self._tick())
        head.lock = node.lock
        node.parent.children[head.key[0]] = head
        node.key, node.value, node.parent = node.key[k:], node.value[k:], head
        head.children[node.key[0]] = node
        return head

    def lock(self, node: Node) -> None:
        """A running request uses the path to ``node``: none of it may be evicted."""
        for n in node.path():
            if n.lock == 0:
                self.locked += len(n.key)
            n.lock += 1

    def unlock(self, node: Node) -> None:
        for n in node.path():
            n.lock -= 1
            if n.lock == 0:
                self.locked -= len(n.key)

    def evict(self, num_tokens: int) -> int:
        """Drop unlocked leaves whole, least recently accessed first, until at least ``num_tokens`` are freed or
        none is left (see the module docstring). Returns the tokens freed (may exceed ``num_tokens``)."""
        freed = 0
        while freed < num_tokens:
            leaves = [n for n in self.nodes() if not n.children and n.lock == 0]
            if not leaves:
                break
            leaf = min(leaves, key=lambda n: n.last_access)
            assert leaf.parent is not None
            del leaf.parent.children[leaf.key[0]]
            self.size -= len(leaf.key)
            freed += len(leaf.key)
            if self.on_evict is not None:
                self.on_evict(leaf)
        return freed

    def nodes(self) -> list[Node]:
        """Every node but the root."""
        out, todo = [], list(self.root.children.values())
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(n.children.values())
        return out
