"""The `faults` config: one typed section per fault, each owned by its plug-in in
ppx/engine/faults/ (the registry there names the section each plug-in reads). A section's
defaults leave its fault off; a preset in conf/faults/ or an override such as
`faults.pool.tokens=64` turns one on. The schema lives here, below the engine, because the
config never imports the engine (tests/test_layers.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

OFF = -1  # a rank field's "no rank": the fault is off
LAST_RANK = -2  # a rank field's "whichever rank is last" (or, for `delay`, every rank)


@dataclass
class DelayCfg:
    """A slow link: rank `rank` (-2: every rank) sleeps `s` before each send of `kind`."""

    kind: str | None = None  # chain | proxy | output | decision | lap | tp
    rank: int = OFF
    s: float = 0.0


@dataclass
class LoseCfg:
    """Rank `rank` counts its `kind` message number `seq` as sent but never posts it."""

    rank: int = OFF
    kind: str | None = None
    seq: int = 0


@dataclass
class DropVoidOutputCfg:
    """The last rank sends no void output (the pre-#797 bug)."""

    enabled: bool = False


@dataclass
class CorruptCfg:
    """The last rank sends a wrong id for request `rid`'s token at output `position`
    (rank -1 off; -2 the last rank, whatever pp is); only the oracle can tell."""

    rank: int = OFF
    rid: int = 0
    position: int = 0


@dataclass
class KillCfg:
    """Rank `rank` is SIGKILLed `after_s` seconds after boot."""

    rank: int = OFF
    after_s: float = 0.0


@dataclass
class PoolCfg:
    """Rank `rank`'s KV pool holds `tokens` instead of engine.kv's size (a pool skew)."""

    rank: int = OFF
    tokens: int = 0


@dataclass
class RankOnlyCfg:
    """A fault that needs only the rank it acts on (lifo, epoch_desync)."""

    rank: int = OFF


@dataclass
class OfferFlapCfg:
    """Rank 0's match for a request loses `tokens` after each void of it, regains them after
    the next (sgl-project#987's boot 7: told 7939 / 0). 0 = off."""

    tokens: int = 0


@dataclass
class RetractCfg:
    """Rank 0 retracts request `rid` rank-locally once its first token is in and announces
    it on the next chain (boot weg1b7, sgl-project#1180); `redeliver`: the chain hop after
    the announcement carries the rid again. -1 = off."""

    rid: int = OFF
    redeliver: bool = False


@dataclass
class MatchCapCfg:
    """Per rank, the most tokens of any prompt its radix match reports (-1 = all; #630)."""

    tokens: list[int] | None = None


@dataclass
class CacheDropCfg:
    """After pass `after_pass` (or a later one the simulator's scheduler picks, under
    faults.timing=choice), rank `rank` evicts every cached prefix no request holds (the #963
    shape). -1 = off."""

    rank: int = OFF
    after_pass: int = 0


@dataclass
class FaultsCfg:
    """`name` labels the preset (conf/faults/); `timing` says when a timed effect lands (a
    host-tier load, a delayed send, a cache drop's or a flip's pass count): `fixed`, after
    its configured delay or at its pass, or `choice`, when the simulator's scheduler picks
    (engine.transport=sim; ppx/sim/timing.py). Every other field is one fault's section."""

    name: str = "none"
    timing: str = "fixed"  # fixed | choice
    delay: DelayCfg = field(default_factory=DelayCfg)
    lose: LoseCfg = field(default_factory=LoseCfg)
    drop_void_output: DropVoidOutputCfg = field(default_factory=DropVoidOutputCfg)
    corrupt: CorruptCfg = field(default_factory=CorruptCfg)
    kill: KillCfg = field(default_factory=KillCfg)
    pool: PoolCfg = field(default_factory=PoolCfg)
    lifo: RankOnlyCfg = field(default_factory=RankOnlyCfg)
    epoch_desync: RankOnlyCfg = field(default_factory=RankOnlyCfg)
    offer_flap: OfferFlapCfg = field(default_factory=OfferFlapCfg)
    retract: RetractCfg = field(default_factory=RetractCfg)
    match_cap: MatchCapCfg = field(default_factory=MatchCapCfg)
    cache_drop: CacheDropCfg = field(default_factory=CacheDropCfg)


def fault_key_problem(key: str) -> str | None:
    """One line naming what is wrong with a dotted `faults.*` override key (a fault or a field
    no section has), before Hydra's multi-line "not in struct"; None for a key the schema has."""
    parts = key.split(".")
    if parts[0] != "faults" or len(parts) < 2:
        return None
    sections = {f.name: f for f in fields(FaultsCfg)}
    if parts[1] not in sections:
        names = " | ".join(n for n in sections if n not in ("name", "timing"))
        return f"{key}: no fault {parts[1]!r}; the faults: {names}"
    section = sections[parts[1]].default_factory
    if len(parts) > 2 and isinstance(section, type):
        known = [f.name for f in fields(section)]
        if parts[2] not in known or len(parts) > 3:
            return f"{key}: faults.{parts[1]} has {' | '.join(known)}"
    return None
