"""rank_local: every rank forms its batch from its own queue and radix tree (upstream SGLang).

Correct only while the ranks agree; when pools or prefetch differ, the first symptom is a
proxy whose width does not match the batch, or a proxy one side of a stage boundary sends
or awaits alone (a batch formed on one side only: the proxy width check's named stop where
a receive reads the evidence, engine/proxy_turns.py; else a wedge the watchdog names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppx.engine.admission.base import Admission

if TYPE_CHECKING:
    from ppx.engine.loop import PassState


class RankLocal(Admission):
    name = "rank_local"

    def schedule(self, p: PassState) -> None:
        p.batch = self.prefill.form(p.slot, p.pass_id)
