"""TGI's prefix cache: a radix tree of finished prompts over KV blocks, and the allocator built on it.

Follows ``backends/v3/src/radix.rs`` (TGI v3; itself modelled on SGLang's RadixAttention). Units: tokens, blocks.

**The tree.** Each node holds a token ``key`` and the ``blocks`` that hold those tokens' K/V (``len(key) ==
len(blocks) * block_size``). A child is found under its first block of tokens. A node is a prefix of everything
below it, so a lookup walks down while whole nodes match, and may stop part-way into the last node::

    root ─ [system prompt: 24 tok | blocks 5..28] ─┬─ [question A: 8 tok | blocks 40..47]
                                                    └─ [question B: 6 tok | blocks 60..65]

Matching is by whole blocks only: a prompt that shares 27 tokens with a node of block size 16 matches 16.

**Reference counts.** ``ref_count`` = children + live allocations whose cached prefix ends at the node. A node with
count 0 has no children: it is a *leaf*, the only thing that can be reclaimed. Leaves are kept ordered by
``(last_accessed, node id)``; a lookup or an insertion stamps every node it walks through with a new time, so the
least recently used leaf goes first. Reclaiming a leaf longer than needed cuts blocks off its tail only.

**The allocator.** ``allocate(tokens, prompt)``: look the prompt up, pin the matched node (+1 reference, even if the
allocation then fails), and take ``ceil((tokens - matched) / block_size)`` blocks from the free list's tail; when the
list is short, leaves are reclaimed **first**, before knowing whether that will be enough (TGI's own TODO says so),
so a failed allocation can still empty the cache. ``free(allocation)``: unpin, then insert the prompt's
block-aligned part into the tree with the allocation's blocks; blocks of a part another request inserted
meanwhile, and every block past the aligned prompt, go back to the free list. Only the prompt is ever cached.

Node ids imitate the ``slotmap`` crate TGI uses (a removed node's slot is reused first), because ties between
leaves of equal access time are broken by node id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from batchscope.tgi_family.block_allocator import Allocation, blocks_for


@dataclass
class _Node:
    key: list[int]
    blocks: list[int]
    parent: int | None
    last_accessed: int
    children: dict[tuple[int, ...], int] = field(default_factory=dict)
    ref_count: int = 0


class RadixTrie:
    """The tree of cached prompts (``RadixTrie`` in TGI)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.time = 0
        self._slots: list[_Node | None] = []
        self._vacant: list[int] = []  # reused last-in first-out, as slotmap does
        self.leaves: set[tuple[int, int]] = set()  # (last_accessed, node id) of nodes with ref_count 0
        self.root = self._store(_Node(key=[], blocks=[], parent=None, last_accessed=0))

    def node(self, node_id: int) -> _Node:
        node = self._slots[node_id]
        assert node is not None, f"radix node {node_id} was removed"
        return node

    def _store(self, node: _Node) -> int:
        if self._vacant:
            node_id = self._vacant.pop()
            self._slots[node_id] = node
            return node_id
        self._slots.append(node)
        return len(self._slots) - 1

    def _edge(self, tokens: list[int]) -> tuple[int, ...]:
        return tuple(tokens[: self.block_size])

    def _shared(self, left: list[int], right: list[int]) -> int:
        """Tokens two keys share from the start, rounded down to whole blocks."""
        n = 0
        for a, b in zip(left, right):
            if a != b:
                break
            n += 1
        return n // self.block_size * self.block_size

    def find(self, key: list[int]) -> tuple[int, list[int]]:
        """The deepest node matching ``key`` by whole blocks, and the matched blocks (touches the nodes walked)."""
        self.time += 1
        node_id, blocks = self.root, []
        while len(key) >= self.block_size:
            child_id = self.node(node_id).children.get(self._edge(key))
            if child_id is None:
                break
            self._touch(child_id)
            child = self.node(child_id)
            shared = self._shared(child.key, key)
            blocks += child.blocks[: shared // self.block_size]
            node_id, key = child_id, key[shared:]
            if shared < len(child.key):
                break
        return node_id, blocks

    def _touch(self, node_id: int) -> None:
        node = self.node(node_id)
        if (node.last_accessed, node_id) in self.leaves:
            self.leaves.discard((node.last_accessed, node_id))
            self.leaves.add((self.time, node_id))
        node.last_accessed = self.time

    def incref(self, node_id: int) -> None:
        if node_id == self.root:
            return
        node = self.node(node_id)
        if node.ref_count == 0:
            self.leaves.discard((node.last_accessed, node_id))
        node.ref_count += 1

    def decref(self, node_id: int) -> None:
        if node_id == self.root:
            return
        node = self.node(node_id)
        assert node.ref_count > 0, f"radix node {node_id}: reference count underflow"
        node.ref_count -= 1
        if node.ref_count == 0:
            assert not node.children, "a node with children must be referenced"
            self.leaves.add((node.last_accessed, node_id))

    def evict(self, num_blocks: int) -> list[int]:
        """Reclaim up to ``num_blocks`` blocks from the least recently used leaves (a parent left childless becomes a
        leaf and may go next); a leaf longer than needed loses blocks from its tail only."""
        evicted: list[int] = []
        while self.leaves and len(evicted) < num_blocks:
            stamp, node_id = min(self.leaves)
            self.leaves.discard((stamp, node_id))
            node, need = self.node(node_id), num_blocks - len(evicted)
            if need >= len(node.blocks):
                evicted += self._remove(node_id).blocks
            else:
                keep = len(node.blocks) - need
                evicted += node.blocks[keep:]
                node.blocks, node.key = node.blocks[:keep], node.key[: keep * self.block_size]
                self.leaves.add((stamp, node_id))
        return evicted

    def _remove(self, node_id: int) -> _Node:
        node = self.node(node_id)
        assert not node.children and node.parent is not None
        del self.node(node.parent).children[self._edge(node.key)]
        self._slots[node_id] = None
        self._vacant.append(node_id)
        self.decref(node.parent)
        return node

    def insert(self, tokens: list[int], blocks: list[int]) -> int:
        """Insert a block-aligned prompt with its blocks; returns how many of its tokens were already in the tree
        (for those the tree keeps its own blocks)."""
        self.time += 1
        node_id, done = self.root, 0
        while True:
            child_id = self.node(node_id).children.get(self._edge(tokens))
            if child_id is None:
                self._add(node_id, tokens, blocks)
                return done
            self._touch(child_id)
            child = self.node(child_id)
            shared = self._shared(child.key, tokens)
            if shared == len(tokens) or shared == 0:
                return done + shared
            if shared < len(child.key):
                child_id = self._split(child_id, shared)
            node_id, done = child_id, done + shared
            tokens, blocks = tokens[shared:], blocks[shared // self.block_size :]

    def _add(self, parent_id: int, key: list[int], blocks: list[int]) -> int:
        child_id = self._store(_Node(key=list(key), blocks=list(blocks), parent=parent_id, last_accessed=self.time))
        self._link(parent_id, self._edge(key), child_id)
        self.leaves.add((self.time, child_id))
        return child_id

    def _link(self, parent_id: int, edge: tuple[int, ...], child_id: int) -> None:
        children = self.node(parent_id).children
        is_new = edge not in children
        children[edge] = child_id
        if is_new:
            self.incref(parent_id)

    def _split(self, node_id: int, prefix_len: int) -> int:
        """Cut a node after ``prefix_len`` tokens: a new parent takes the head; the node keeps its id (and its
        references) for the tail. Returns the new parent."""
        node = self.node(node_id)
        assert node.parent is not None
        cut = prefix_len // self.block_size
        head_key, head_blocks = node.key[:prefix_len], node.blocks[:cut]
        node.key, node.blocks = node.key[prefix_len:], node.blocks[cut:]
        parent_id = self._add(node.parent, head_key, head_blocks)
        self._link(parent_id, self._edge(node.key), node_id)
        node.parent = parent_id
        return parent_id

    def num_blocks(self) -> int:
        """Blocks held by the tree, referenced or not."""
        return sum(len(n.blocks) for n in self._slots if n is not None)

    def block_ids(self) -> list[int]:
        """Every block the tree holds."""
        return [b for n in self._slots if n is not None for b in n.blocks]

    def unpinned_blocks(self) -> int:
        """Blocks of nodes with no live allocation at or below them: what reclaiming could free."""
        return self._unpinned(self.root)[1]

    def _unpinned(self, node_id: int) -> tuple[bool, int]:
        """(whether an allocation pins this subtree, its unpinned blocks)."""
        node = self.node(node_id)
        pinned = node_id != self.root and node.ref_count > len(node.children)
        total = 0
        for child_id in node.children.values():
            child_pinned, child_total = self._unpinned(child_id)
            pinned, total = pinned or child_pinned, total + child_total
        return pinned, total if pinned else total + len(node.blocks)


class RadixAllocator:
    """Blocks with prefix caching (``RadixAllocator`` in TGI): a free list plus the radix tree."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.free_blocks: list[int] = list(range(1, num_blocks))  # block 0 is reserved
        self.trie = RadixTrie(block_size)
        self.reclaimed: list[int] = []
        self._last_id = 0

    def allocate(self, tokens: int, prompt: list[int]) -> Allocation | None:
        """Blocks for ``tokens`` tokens, the cached prefix of ``prompt`` first; ``None`` if they are not there."""
        prefix_node, blocks = self.trie.find(prompt)
        self.trie.incref(prefix_node)  # pinned before reclaiming, so the reclaim cannot take it
        prefix_len = len(blocks) * self.block_size
        need = blocks_for(tokens - prefix_len, self.block_size)
        self.reclaimed = []
        if len(self.free_blocks) < need:
            self.reclaimed = self.trie.evict(need - len(self.free_blocks))
            self.free_blocks.extend(self.reclaimed)
        if len(self.free_blocks) < need:
            self.trie.decref(prefix_node)
            return None
        cut = len(self.free_blocks) - need
        blocks, self.free_blocks = blocks + self.free_blocks[cut:], self.free_blocks[:cut]
        self._last_id += 1
        return Allocation(blocks, prefix_len, self._last_id, prefix_node, list(prompt))

    def free(self, allocation: Allocation) -> list[int]:
        """Release an allocation; returns the blocks newly inserted into the cache (the rest go to the free list)."""
        self.trie.decref(allocation.prefix_node)
        bs, blocks, prompt = self.block_size, allocation.blocks, allocation.prompt
        if allocation.written is not None:  # cache only what was computed (Batchscope's engine; TGI caches all)
            prompt = prompt[: max(allocation.prefix_len, allocation.written)]
        inserted: list[int] = []
        aligned = len(prompt) // bs * bs
        if len(prompt) > allocation.prefix_len and aligned > 0:
            known = self.trie.insert(prompt[:aligned], blocks[: aligned // bs])
            inserted = blocks[max(known, allocation.prefix_len) // bs : aligned // bs]
            if known > allocation.prefix_len:  # someone cached part of it meanwhile: our copies are spare
                self.free_blocks.extend(blocks[allocation.prefix_len // bs : known // bs])
        self.free_blocks.extend(blocks[len(prompt) // bs :])
        return inserted

    def clear_cache(self) -> list[int]:
        """Reclaim every unpinned cached block (not a TGI operation: the core's way out of the idle deadlock)."""
        evicted = self.trie.evict(self.trie.num_blocks())
        self.free_blocks.extend(evicted)
        return evicted

    def shortage(self, tokens: int) -> dict:
        """The reference gives no numbers for a radix allocation that failed (the reclaim already changed them)."""
        return {}

    def cached_blocks(self) -> int:
        return self.trie.unpinned_blocks()
