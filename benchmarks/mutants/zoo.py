"""The mutant zoo: small, realistic bugs in the engine, each a patch of one spot.

A mutant is a search-and-replace patch (`old` must occur exactly once in `path`, so a mutant
that no longer applies after the code moved is an error, never a silent no-op), named for
the area it breaks and the log's kind of bug it reproduces, with the tests that own that
code (the suite arm runs only those: the whole suite per mutant would not fit the machine).

Why patches and not a mutation tool: mutmut and cosmic-ray mutate operators and constants
everywhere (`<` to `<=`, `+ 1` to `+ 2`, a `True` to `False`) and run the test command per
mutant; over ppx that is thousands of mutants, most in logging, validation and analysis
code no schedule reaches, many equivalent, and none of them the protocol bugs the log
fought (a forgotten re-queue, a void output not sent, a floor that never comes down). The
score the issue asks for is "what share of realistic bugs is caught", so the bugs are
written by hand, like the log's own mutants (#963's withdrawn prefix floor, #797's dropped
void output), a few per area.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    area: str
    path: str
    old: str
    new: str
    bug: str  # what the patch does, in the log's words where it has them
    tests: tuple[str, ...]  # the suite arm's subset: the tests that own this code


Z = Mutant
ZOO: tuple[Mutant, ...] = (
    # -- admission (rank 0's decision, the scheduler's admit) ------------------------------
    Z(
        "admit_over_budget", "admission", "ppx/engine/scheduler.py",
        "extend = min(req.seq_len - req.computed, budget)",
        "extend = min(req.seq_len - req.computed, budget + 1)",
        "a chunk one token past the pass's prefill budget",
        ("tests/test_scheduler.py", "tests/test_admission.py"),
    ),
    Z(
        "admit_ignores_pin_cost", "admission", "ppx/engine/scheduler.py",
        "cost += len(node.value) if node.lock == 0 else 0",
        "cost += 0",
        "admission counts the reused prefix's evictable slots as free (KV pool exhausted)",
        ("tests/test_pool_exhaustion.py", "tests/test_scheduler.py"),
    ),
    Z(
        "admit_own_pool", "admission", "ppx/engine/cache/kv.py",
        "return len(self.free) + self.tree.evictable - self.reserved - self.slack",
        "return len(self.free) + self.tree.evictable - self.reserved",
        "rank 0 admits against its own pool, not the smallest (a follower lacks room)",
        ("tests/test_pool_exhaustion.py", "tests/test_cache.py"),
    ),
    # -- guard (rank 0's floors, defers, escalation) --------------------------------------
    Z(
        "floor_goes_up", "guard", "ppx/protocol/guard/floors.py",
        "self.rid_floor[rid] = min(local, self.rid_floor.get(rid, told))",
        "self.rid_floor[rid] = max(local, self.rid_floor.get(rid, told))",
        "a learned floor never comes down (#630's retry loop does not end)",
        ("tests/test_guard_switches.py", "tests/test_guard_rounds.py"),
    ),
    Z(
        "clamp_inverted", "guard", "ppx/protocol/guard/guard.py",
        "if floor is not None and floor < local:",
        "if floor is not None and floor > local:",
        "the floor clamps only offers it does not bind (#630 without the clamp)",
        ("tests/test_guard_switches.py", "tests/test_guard_rounds.py"),
    ),
    Z(
        "hold_forever", "guard", "ppx/protocol/guard/guard.py",
        "            self.hold.discard(rid)\n            return None",
        "            return None",
        "a deferred rid is held for good (#944's one round becomes forever)",
        ("tests/test_guard_switches.py", "tests/test_running_miss.py"),
    ),
    Z(
        "defer_cap_late", "guard", "ppx/protocol/guard/guard.py",
        "if 0 < self.defer_cap <= self.defers[rid] and rid not in self.escalated:",
        "if 0 < self.defer_cap < self.defers[rid] and rid not in self.escalated:",
        "the escalation one defer past the cap (#944: at the cap, not past it)",
        ("tests/test_guard_switches.py", "tests/test_defer_streak.py"),
    ),
    # -- follower ---------------------------------------------------------------------------
    Z(
        "follower_trusts_told", "follower", "ppx/engine/admission/follow.py",
        "            ok = zero or (",
        "            ok = True or (",
        "a follower runs any told it is given (#791 before the retraction)",
        ("tests/test_admission.py", "tests/test_decision_geometry.py"),
    ),
    Z(
        "follower_reports_told", "follower", "ppx/engine/admission/follow.py",
        "obs.append([ctx.rank, e.rid, e.prefix_len, local])",
        "obs.append([ctx.rank, e.rid, e.prefix_len, e.prefix_len])",
        "a follower's retraction row names the told as its local (the guard learns no floor)",
        ("tests/test_admission.py", "tests/test_guard_rounds.py"),
    ),
    # -- scheduler: void and re-queue -----------------------------------------------------
    Z(
        "requeue_at_back", "void/requeue", "ppx/engine/scheduler.py",
        "            self.waiting.appendleft(req)",
        "            self.waiting.append(req)",
        "a voided request goes to the back of the queue, not the front",
        ("tests/test_scheduler.py", "tests/test_admission.py"),
    ),
    Z(
        "void_ignores_incarnation", "void/requeue", "ppx/engine/scheduler.py",
        "if req is None or batch.incarnation.get(e.rid) != req.admit_seq or e.rid in keep:",
        "if req is None or e.rid in keep:",
        "a stale void re-queues a request admitted again since (the incarnation check dropped)",
        ("tests/test_scheduler.py", "tests/test_admission.py"),
    ),
    Z(
        "void_no_rollback", "void/requeue", "ppx/engine/scheduler.py",
        "            if req.row >= 0:\n                self._rollback_unlaunched(req)",
        "            pass",
        "a void leaves chunks placed but never computed in the request (they reach the tree)",
        ("tests/test_scheduler.py", "tests/test_admission.py"),
    ),
    # -- flip and cutover -------------------------------------------------------------------
    Z(
        "cutover_early", "flip/cutover", "ppx/engine/flip.py",
        "return self.announced_pass + self.ctx.num_slots - 1",
        "return self.announced_pass + self.ctx.num_slots - 2",
        "the cutover one pass before the last slot's output is back",
        ("tests/test_flip.py",),
    ),
    Z(
        "cutover_keeps_residents", "flip/cutover", "ppx/engine/flip.py",
        "            s.requeue(req)  # generated tokens are kept; the KV is about to be released",
        "            pass",
        "the cutover leaves the residents in the old layout's slots",
        ("tests/test_flip.py",),
    ),
    Z(
        "epoch_rank0_twice", "flip/cutover", "ppx/engine/flip.py",
        "        ctx.epoch += 1 + self.cutover.extra_epochs(flips)",
        "        ctx.epoch += (1 if ctx.rank else 2) + self.cutover.extra_epochs(flips)",
        "rank 0 moves its epoch by two at a cutover (the epoch desync, unplanted)",
        ("tests/test_flip.py",),
    ),
    Z(
        "void_flip_keeps_inflight", "flip/cutover", "ppx/engine/flip.py",
        "                    b.flip_void = True",
        "                    b.flip_void = False",
        "flip.inflight=void announces a void the slots in flight never get",
        ("tests/test_flip.py",),
    ),
    # -- KV cache and radix tree --------------------------------------------------------------
    Z(
        "split_drops_lock", "kv/radix", "ppx/engine/cache/radix.py",
        "top.lock, top.stamp = node.lock, node.stamp",
        "top.stamp = node.stamp",
        "a split node's new parent starts unlocked (eviction may take a held prefix)",
        ("tests/test_cache.py",),
    ),
    Z(
        "evict_locked", "kv/radix", "ppx/engine/cache/radix.py",
        "if not n.children and n.lock == 0]",
        "if not n.children]",
        "eviction takes locked leaves too",
        ("tests/test_cache.py",),
    ),
    Z(
        "commit_leaks_duplicates", "kv/radix", "ppx/engine/cache/kv.py",
        "            self.free += dup\n",
        "",
        "a commit's duplicates of tree slots are never freed (the pool leaks)",
        ("tests/test_cache.py", "tests/test_pool_exhaustion.py"),
    ),
    Z(
        "match_whole_prompt", "kv/radix", "ppx/engine/cache/kv.py",
        "        usable = tokens[: max(len(tokens) - 1, 0)]\n        slots, _ = self.tree.match(usable)",
        "        usable = tokens\n        slots, _ = self.tree.match(usable)",
        "a match may cover the whole prompt, leaving no token to compute",
        ("tests/test_cache.py", "tests/test_host_tier.py", "tests/sim/test_served_checks.py"),
    ),
    # -- channels and the ring ---------------------------------------------------------------
    Z(
        "seq_in_stuck", "channels/ring", "ppx/engine/channels.py",
        "        self.seq_in[(src, int(msg.kind))] += 1",
        "        self.seq_in[(src, int(msg.kind))] += int(msg.kind) != 3",
        "a receiver stops counting one kind's messages (every later seq is off by one)",
        ("tests/test_channels_gloo.py", "tests/sim/test_sim_wire.py"),
    ),
    Z(
        "output_for_this_slot", "channels/ring", "ppx/engine/loop.py",
        "nxt = (p.pass_id + 1) % ctx.num_slots",
        "nxt = p.pass_id % ctx.num_slots",
        "the output receive asks for this pass's slot, not the next one's",
        ("tests/test_output_ring.py",),
    ),
    Z(
        "no_void_output", "channels/ring", "ppx/engine/loop.py",
        "        elif self.ring.relay.sends_void_output:",
        "        elif False:",
        "the last rank sends no void output (#797's bug, unplanted)",
        ("tests/test_output_ring.py", "tests/test_admission.py"),
    ),
    # -- the TP phase --------------------------------------------------------------------------
    Z(
        "tp_void_no_requeue", "tp phase", "ppx/engine/tp_phase.py",
        "        if batch is not None:\n            s.void(batch)",
        "        if batch is not None:\n            s.inflight[0] = None",
        "a TP-phase void drops the pass's batch without re-queueing its requests",
        ("tests/test_flip.py", "tests/test_prefetch_flips.py"),
    ),
    Z(
        "tp_retraction_unflagged", "tp phase", "ppx/engine/tp_phase.py",
        "obs[ctx.rank] = torch.tensor([1, e.rid, e.prefix_len, local])",
        "obs[ctx.rank] = torch.tensor([0, e.rid, e.prefix_len, local])",
        "a TP-phase follower's retraction row is not flagged: nobody voids",
        ("tests/test_flip.py", "tests/test_prefetch_flips.py"),
    ),
)  # fmt: skip

# Equivalent mutants: no run of any design can tell them from the code (docs/simulation.md,
# "The mutant zoo", says why for each), so they are not in the score; `run.py --only NAME`
# still runs one. Each was replaced in ZOO by a non-equivalent bug of the same area.
EQUIVALENT: tuple[Mutant, ...] = (
    # a whole-pass retraction settles before any entry of the decision is admitted, so the
    # requests are still queued and the void has nothing to re-queue; the one path that admits
    # first and retracts after (POOL_SHORT midway) is now itself a stop (check_capacity)
    Z(
        "retract_stale_incarnation", "follower", "ppx/engine/admission/follow.py",
        "incarnation = {e.rid: s.reqs[e.rid].admit_seq for e in entries}",
        "incarnation = {e.rid: s.reqs[e.rid].admit_seq + 1 for e in entries}",
        "a retracted pass names the next incarnation: its void re-queues nobody",
        ("tests/test_admission.py", "tests/test_partial_retraction.py"),
    ),
    # KVCache.admit sets req.computed = prefix_len at every re-admission and nothing reads a
    # waiting request's computed before it: the reset in Scheduler.requeue is a dead store
    Z(
        "requeue_keeps_computed", "void/requeue", "ppx/engine/scheduler.py",
        "req.slot, req.computed = -1, 0",
        "req.slot = -1",
        "a re-queued request keeps its computed count (its row was released)",
        ("tests/test_scheduler.py", "tests/test_admission.py"),
    ),
)  # fmt: skip
