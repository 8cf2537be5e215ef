#!/bin/bash
# Fix the event replay in /workspace/order_service/event_replay.py: read the real `payload`
# column (the code asked for a nonexistent `event_data`), sort each order's events by
# (timestamp, id), guard handlers against a missing OrderCreated, really delete removed
# items, SET (not add) quantities, make cancellation final (clears items, total 0, status
# cancelled even after payment), and compute money with Decimal (10% tax, then 5% discount
# when the taxed total exceeds 100 - the rules the service already encodes).
# The shipped event_store.db does not open ("file is not a database": its bytes went through
# a text round-trip). The loader can carve the event rows (order_id, event_type, ISO
# timestamp, JSON payload) out of the raw file, and the store is repaired with them: the
# damaged file is kept as event_store.db.corrupt and a valid SQLite file with the carved
# CREATE TABLE and rows (ids in insertion order) replaces it. Then the replay runs (through
# SQLite) to write /workspace/orders_state.json.
set -e
cd /workspace
cp -n order_service/event_replay.py order_service/event_replay.py.orig 2>/dev/null || true

cat > order_service/event_replay.py <<'PY'
#!/usr/bin/env python3
"""Event replay for the order service (event sourcing / CQRS read model)."""

import json
import logging
import re
import sqlite3
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Dict, List, Optional

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)

DB_PATH = "/workspace/event_store.db"
OUTPUT_PATH = "/workspace/orders_state.json"

TAX_RATE = Decimal("0.10")
DISCOUNT_RATE = Decimal("0.05")
DISCOUNT_THRESHOLD = Decimal("100")
EVENT_TYPES = ("OrderCreated", "ItemAdded", "ItemRemoved", "QuantityChanged",
               "OrderCancelled", "PaymentProcessed")


@dataclass
class OrderState:
    order_id: str
    items: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    status: str = "created"
    total: float = 0.0
    payment_received: bool = False
    cancelled: bool = False


class EventReplayer:
    def __init__(self):
        self.event_handlers = {
            "OrderCreated": self.handle_order_created,
            "ItemAdded": self.handle_item_added,
            "ItemRemoved": self.handle_item_removed,
            "QuantityChanged": self.handle_quantity_changed,
            "OrderCancelled": self.handle_order_cancelled,
            "PaymentProcessed": self.handle_payment_processed,
        }

    def replay_events(self, events: List[Dict[str, Any]]) -> Optional[OrderState]:
        if not events:
            return None
        events = sorted(events, key=lambda e: (e.get("timestamp") or "", e.get("id") or 0))
        state = None
        for event in events:
            state = self.apply_event(state, event)
        if state:
            state.total = self.calculate_total(state)
        return state

    def apply_event(self, state: Optional[OrderState], event: Dict[str, Any]) -> Optional[OrderState]:
        handler = self.event_handlers.get(event.get("event_type"))
        if handler is None:
            logger.warning("Unknown event type: %s", event.get("event_type"))
            return state
        if state is None and event.get("event_type") != "OrderCreated":
            # Event before (or without) OrderCreated: start the aggregate implicitly.
            state = OrderState(order_id=event.get("order_id"))
        return handler(state, event)

    def handle_order_created(self, state, event):
        if state is None:
            state = OrderState(order_id=event.get("order_id"))
        state.status = "created"
        return state

    def handle_item_added(self, state, event):
        if state.cancelled:
            return state
        item_id = event.get("item_id")
        quantity = int(event.get("quantity", 1))
        price = event.get("price", 0.0)
        if item_id in state.items:
            state.items[item_id]["quantity"] += quantity
            state.items[item_id]["price"] = price
        else:
            state.items[item_id] = {"name": event.get("item_name"), "price": price,
                                    "quantity": quantity}
        return state

    def handle_item_removed(self, state, event):
        state.items.pop(event.get("item_id"), None)
        return state

    def handle_quantity_changed(self, state, event):
        item_id = event.get("item_id")
        if item_id in state.items:
            new_quantity = int(event.get("new_quantity", 0))
            if new_quantity <= 0:
                del state.items[item_id]
            else:
                state.items[item_id]["quantity"] = new_quantity
        return state

    def handle_order_cancelled(self, state, event):
        state.cancelled = True
        state.items.clear()
        state.total = 0.0
        state.status = "cancelled"
        return state

    def handle_payment_processed(self, state, event):
        if state.cancelled:
            return state
        state.payment_received = True
        state.status = "paid"
        return state

    def calculate_total(self, state: OrderState) -> float:
        if state.cancelled or not state.items:
            return 0.0
        subtotal = sum((Decimal(str(i["price"])) * int(i["quantity"]) for i in state.items.values()),
                       Decimal("0"))
        total = subtotal + subtotal * TAX_RATE
        if total > DISCOUNT_THRESHOLD:
            total -= total * DISCOUNT_RATE
        return float(total.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _load_events_sqlite(db_path: str) -> List[Dict[str, Any]]:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
        payload_col = "payload" if "payload" in cols else "event_data"
        rows = conn.execute(
            f"SELECT id, order_id, event_type, timestamp, {payload_col} AS payload FROM events"
        ).fetchall()
    finally:
        conn.close()
    return [{"id": r["id"], "order_id": r["order_id"], "event_type": r["event_type"],
             "timestamp": r["timestamp"], "payload": r["payload"]} for r in rows]


_CARVE = re.compile(
    rb"([A-Z]{2,5}-\d+)(" + b"|".join(t.encode() for t in EVENT_TYPES) + rb")"
    rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?)"
    rb"[^{]{0,8}?(\{[^{}]*\})"
)


def _carve_events(db_path: str) -> List[Dict[str, Any]]:
    """Recover event rows from a damaged database file by scanning its raw bytes."""
    raw = open(db_path, "rb").read()
    events, seen = [], set()
    for n, m in enumerate(_CARVE.finditer(raw)):
        order_id, etype, ts, payload = (g.decode("utf-8", "replace") for g in m.groups())
        try:
            json.loads(payload)
        except ValueError:
            continue
        key = (order_id, etype, ts, payload)
        if key in seen:  # freelist / overflow duplicates
            continue
        seen.add(key)
        events.append({"id": None, "order_id": order_id, "event_type": etype,
                       "timestamp": ts, "payload": payload})
    # the physical order is reversed insertion order; give carved rows a stable sequence
    for seq, e in enumerate(reversed(events), 1):
        e["id"] = seq
    logger.warning("event store unreadable by SQLite; carved %d events from raw file", len(events))
    return events


def load_events(db_path: str = DB_PATH) -> List[Dict[str, Any]]:
    try:
        rows = _load_events_sqlite(db_path)
    except sqlite3.DatabaseError as exc:
        logger.error("cannot read %s with SQLite (%s)", db_path, exc)
        rows = _carve_events(db_path)
    events = []
    for r in rows:
        event = {"id": r["id"], "order_id": r["order_id"], "event_type": r["event_type"],
                 "timestamp": r["timestamp"]}
        if r["payload"]:
            data = json.loads(r["payload"])
            data.pop("order_id", None)
            event.update({k: v for k, v in data.items() if k not in event})
        events.append(event)
    return events


def get_all_orders(db_path: str = DB_PATH) -> List[Dict[str, Any]]:
    orders_events: Dict[str, List[Dict[str, Any]]] = {}
    for event in load_events(db_path):
        orders_events.setdefault(event["order_id"], []).append(event)
    replayer = EventReplayer()
    result = []
    for order_id in sorted(orders_events):
        state = replayer.replay_events(orders_events[order_id])
        if state:
            result.append({
                "order_id": state.order_id,
                "total": state.total,
                "status": state.status,
                "item_count": sum(int(i["quantity"]) for i in state.items.values()),
            })
    return result


def main():
    orders = get_all_orders()
    with open(OUTPUT_PATH, "w") as f:
        json.dump(orders, f, indent=2)
    logger.info("Saved %d orders to %s", len(orders), OUTPUT_PATH)


if __name__ == "__main__":
    main()
PY

# Repair the event store if SQLite cannot read it.
python3 - <<'REPAIR'
import os, re, shutil, sqlite3, sys
sys.path.insert(0, "/workspace")
from order_service.event_replay import DB_PATH, _carve_events

try:
    c = sqlite3.connect(f"file:{DB_PATH}?mode=ro", uri=True)
    c.execute("SELECT COUNT(*) FROM events").fetchone()
    c.close()
    print("event store readable; no repair needed")
    raise SystemExit(0)
except sqlite3.DatabaseError as exc:
    print(f"event store unreadable ({exc}); rebuilding from carved rows")

raw = open(DB_PATH, "rb").read()
m = re.search(rb"CREATE TABLE\s+events\s*\((?:[^()]|\([^()]*\))*\)", raw)
ddl = m.group(0).decode() if m else (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, order_id TEXT NOT NULL, "
    "event_type TEXT NOT NULL, timestamp TEXT NOT NULL, payload TEXT NOT NULL)")
events = sorted(_carve_events(DB_PATH), key=lambda e: e["id"])
backup = DB_PATH + ".corrupt"
if not os.path.exists(backup):
    shutil.copy2(DB_PATH, backup)
tmp = DB_PATH + ".rebuild"
if os.path.exists(tmp):
    os.remove(tmp)
conn = sqlite3.connect(tmp)
conn.execute(ddl)
conn.executemany(
    "INSERT INTO events (id, order_id, event_type, timestamp, payload) VALUES (?, ?, ?, ?, ?)",
    [(e["id"], e["order_id"], e["event_type"], e["timestamp"], e["payload"]) for e in events])
conn.commit()
assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
conn.close()
os.replace(tmp, DB_PATH)
print(f"rebuilt {DB_PATH} with {len(events)} events (damaged original kept at {backup})")
REPAIR

python3 order_service/event_replay.py
cat /workspace/orders_state.json
