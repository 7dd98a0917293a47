"""Named header fields: which word of a message's `aux` carries what, and who owns it.

A message's header has `MAX_AUX` small integers after its fixed fields (ppx/engine/channels.py
lays them out). Before this registry each writer picked an index by hand, so a new axis that
wanted to carry a value on the chain had to share `aux[0]` with `faults.retract.rid`. Now an
owner declares a field by name once, at import; the registry gives it the next free word of
that message kind and refuses a second owner of the same name or a kind that is full, so two
mechanisms can never write one word. Writers `pack` by name, readers read `FIELD.of(msg)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppx.core import Kind, Message

MAX_AUX = 4  # words per header (ppx/engine/channels.py encodes exactly these)


@dataclass(frozen=True)
class Field:
    kind: Kind
    name: str
    owner: str  # the mechanism that writes it: a switch key, or `engine`
    word: int  # its index in Message.aux

    def of(self, msg: Message) -> int:
        """This field of `msg` (0 when the writer left it unset)."""
        return int(msg.aux[self.word]) if len(msg.aux) > self.word else 0


FIELDS: dict[Kind, dict[str, Field]] = {}


def declare(kind: Kind, name: str, owner: str) -> Field:
    """A field of `kind`'s header, owned by `owner`. Declaring the same field again from the
    same owner returns it (a module reloaded); another owner is refused by name."""
    fields = FIELDS.setdefault(kind, {})
    if name in fields:
        if fields[name].owner != owner:
            raise ValueError(
                f"{kind.label} header field {name!r} is owned by {fields[name].owner}, not {owner}"
            )
        return fields[name]
    if len(fields) >= MAX_AUX:
        raise ValueError(
            f"{kind.label} header is full ({MAX_AUX} words: {', '.join(fields)}); {owner} "
            f"cannot add {name!r}"
        )
    field = Field(kind, name, owner, len(fields))
    fields[name] = field
    return field


def pack(kind: Kind, **values: int) -> tuple[int, ...]:
    """The aux words of a `kind` message with these fields set, by name; words up to the last
    one set (the wire pads the rest with zeros)."""
    fields = FIELDS.get(kind, {})
    unknown = set(values) - set(fields)
    if unknown:
        raise KeyError(f"{kind.label} header has no field(s) {sorted(unknown)}")
    if not values:
        return ()
    words = [0] * (1 + max(fields[n].word for n in values))
    for name, value in values.items():
        words[fields[name].word] = int(value)
    return tuple(words)


# the engine's own fields, declared here so they take the first words of their kinds whatever
# is imported first; a design's or a fault's fields are declared in its own module
DECISION_MODE = declare(Kind.DECISION, "mode", "engine")  # codec.MODES: none/decode/prefill
DECISION_COUNT = declare(Kind.DECISION, "count", "engine")  # the batch's requests
DECISION_CHECKSUM = declare(Kind.DECISION, "checksum", "engine")  # their rids' sum (decode)
