"""SGLang HiCache's ``write_back`` policy in the simulated radix cache: a segment is backed up to host memory when
the device evicts it, not when it enters the tree.

Read from SGLang 0.5.23 ``mem_cache/unified_radix_cache.py`` and ``unified_cache/unified_tree_core.py``:

* ``is_write_back`` turns the insert-time backup off (``_inc_hit_count_and_check`` and
  ``_should_backup_after_insert`` return False), so no node is copied to host while it is on the device.
* ``evict_device_leaf(node, is_write_back)``: an evicted leaf that is already backed up is demoted (device copy
  freed, host copy kept); one that is not gets a ``BackupKV`` of that node alone (no ancestors:
  ``_build_backup_kv_action(write_back=True)``), which ``_evict_components`` runs before the demote. The backup
  frees host room first (``_execute_kv_backup`` → ``evict_host``), and the scheduler waits for the copy
  (``writing_check(write_back=True)`` synchronizes every pending write's event): the device-to-host copy is on the
  critical path of the step whose allocation evicted, before its forward pass.

Here: when the radix cache evicts a segment node (``RadixKVManager.back_up_evicted``), its chained key is stored in the
host LRU unless held already, and ``ntok × bytes_per_token / write_bytes_per_s`` is added to that step
(``take_pending_write_s``, read by offload_sim.py's step cost: max(compute, load_back) + write-back). A request's own
unsegmented tail (a node keyed ``(-1, uid)``) is not backed up, as under write_through here: no other request can
match it. Loads are HiCache's as under write_through (hicache_host.py).
"""

from __future__ import annotations

from kvledger.dynamics.engine.hicache_host import HiCacheRadixKVManager
from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["WriteBackHiCacheKVManager"]


class WriteBackHiCacheKVManager(HiCacheRadixKVManager):
    """HiCache's radix cache under ``write_back`` (module doc)."""

    backs_up_on_evict = True

    def __init__(self, capacity_tokens: int, block_size: int = 1, *, host) -> None:
        super().__init__(capacity_tokens, block_size, host=host)
        self._node_keys: dict = {}  # tree node → its chained segment key (root: 0), filled as evictions ask
        self.pending_write_s = 0.0  # write-back time of this step's evictions, s
        self.write_back_tokens = 0  # tokens copied to host on eviction, tokens
        self.write_back_s = 0.0  # Σ write-back time, s

    def _backup(self, req: SimRequest, upto_tokens: int) -> None:
        """Nothing: under write_back a segment is backed up when it is evicted, not when it is inserted."""

    def _node_key(self, node) -> int:
        """The node's chained key, ``hash((parent's key, segment))`` from the root's 0 (as ``_chain`` does for a
        request's segments)."""
        memo, path = self._node_keys, []
        while node is not self.root and node not in memo:
            path.append(node)
            node = node.parent
        prev = memo.get(node, 0)
        for n in reversed(path):
            prev = hash((prev, n.key))
            memo[n] = prev
        return prev

    def back_up_evicted(self, node) -> None:
        """The device evicts ``node``: back it up to host unless it is there already (module doc)."""
        if isinstance(node.key, tuple):
            return
        key = self._node_key(node)
        del self._node_keys[node]
        if key in self.lru.keys or self.lru.capacity <= 0:
            return
        self.lru.store(key)
        t = node.ntok * self.host.bytes_per_token / self.host.write_bytes_per_s
        self.write_back_tokens += node.ntok
        self.write_back_s += t
        self.pending_write_s += t

    def take_pending_write_s(self) -> float:
        t, self.pending_write_s = self.pending_write_s, 0.0
        return t
