"""One campaign at a time per store and engine, whatever starts it.

The deployment's concurrency limit queued a second run from Dagster or the Prefect UI, but a
terminal `t1 train` (through its own Prefect server, or `--no-flow`) ran beside them on the
same store and the same local engine. Every campaign now holds the store's
`campaign <engine>` lock for its whole run (`warehouse.locks`, as synthesis and pool builds
do): a terminal `t1 train` is refused in one line naming the holder (exit 2); a flow run
started from a UI waits for the slot, saying so every half minute (it was queued to run; it
runs when the holder ends). Campaigns on other engines (an external SGLang server) or other
stores do not wait for each other.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from training.campaign_config import CampaignConfig
from warehouse.locks import LockHeldError, current_command, exclusive
from warehouse.store import resolve_store_path


def engine_key(cfg: CampaignConfig) -> str:
    """The engine a campaign generates with: its URL(s), or the local engine of this host."""
    if cfg.engine_url or cfg.engine_servers:
        return ",".join([*([cfg.engine_url] if cfg.engine_url else []), *cfg.engine_servers])
    return f"local engine on {socket.gethostname()}"


def slot_job(cfg: CampaignConfig) -> str:
    return f"campaign {engine_key(cfg)}"


@contextmanager
def campaign_slot(
    cfg: CampaignConfig,
    *,
    wait: Callable[[str], None] | None = None,
    poll_s: float = 10.0,
) -> Iterator[None]:
    """Hold the store's lock for `cfg`'s engine while the block runs. Without `wait`, a held
    lock raises `LockHeldError` (one line, exit 2 in `t1`); with it, `wait(line)` hears why
    and the slot is tried again every `poll_s` until it is free."""
    root = resolve_store_path(cfg.store)
    held = ExitStack()
    while True:
        try:
            held.enter_context(exclusive(root, slot_job(cfg), command=_command(cfg)))
            break
        except LockHeldError as e:
            if wait is None:
                raise
            holder = e.holder.describe() if e.holder else "another campaign"
            wait(f"waiting for the campaign slot of the {engine_key(cfg)} on this store: {holder}")
            time.sleep(poll_s)
    with held:
        yield


def _command(cfg: CampaignConfig) -> str:
    return f"{current_command()}; campaign {cfg.run_id}"
