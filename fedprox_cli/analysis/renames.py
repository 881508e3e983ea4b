"""The renames ``--label KEY=TEXT`` and ``--labels FILE`` give a figure's or a table's texts (a
value, a config key, a ``key=value`` part, a metric or a whole legend label), noting which ones
the drawing asked for: a ``--label`` that renames nothing there is an error (:meth:`check`),
said before anything is written. ``KEY=TEXT`` splits at its last ``=``, so a whole label holding
``=`` (``FedCanon (α = 0.2)=FedCanon``) is a key; a text holding ``=`` goes in a ``--labels``
file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..common.errors import UserError, require


class Renames(dict[str, str]):
    """Text -> new text, remembering which texts were looked up and found (:meth:`get`,
    ``[]``); ``required``: the ``--label`` keys, each of which must be used."""

    def __init__(
        self,
        entries: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        required: Iterable[str] = (),
    ):
        super().__init__(entries)
        self.required = list(required)
        self.used: set[str] = set()

    @classmethod
    def of(cls, names: Mapping[str, str] | None) -> Renames:
        """``names`` itself if it is one, else its entries (none were required)."""
        return names if isinstance(names, Renames) else cls(names or {})

    def __getitem__(self, key: str) -> str:
        value = super().__getitem__(key)
        self.used.add(key)
        return value

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        if key in self:
            return self[key]
        return default

    def check(self, what: str, shown: list[str]) -> None:
        """One :class:`UserError` for the first ``--label`` that renamed nothing in ``what``
        (a figure, a table), naming the texts ``shown`` there."""
        for key in self.required:
            if key not in self.used:
                listing = "; ".join(dict.fromkeys(shown))
                raise UserError(
                    f"--label '{key}={super().__getitem__(key)}' renames nothing in the {what}: "
                    f"{key!r} is none of its values, keys, key=value parts, metrics or labels "
                    f"({listing})"
                )


def from_arguments(items: list[str], file_entries: dict[str, str]) -> Renames:
    """The renames of ``--labels`` (``file_entries``) and ``--label KEY=TEXT`` (``items``;
    these win and are required)."""
    out = Renames(file_entries)
    keys = []
    for item in items:
        require("=" in item, f"--label takes KEY=TEXT, got {item!r}")
        key, text = item.rsplit("=", 1)
        require(key != "", f"--label takes KEY=TEXT, got {item!r}")
        out[key] = text
        keys.append(key)
    out.required = keys
    return out
