"""The order lifecycle through ordertimeout's SQL API with psycopg 3.

    DATABASE_URL=postgres://... python3 examples/python/lifecycle.py ORDER_ID
"""
import json
import os
import sys

import psycopg
from psycopg.types.json import Jsonb


def main(order_id: str) -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("SELECT ordertimeout.put_stock('SKU-EXAMPLE', 1000)")

        status, created = conn.execute(
            "SELECT status, created FROM ordertimeout.create_order(%s, %s, '15 minutes', %s)",
            (order_id, Jsonb([{"sku": "SKU-EXAMPLE", "qty": 2}]), Jsonb({"amount": 19.90})),
        ).fetchone()
        print(f"created {order_id}: {status} (new: {str(created).lower()})")

        # Errors carry their own SQLSTATE: class OT, listed in the README.
        try:
            conn.execute("SELECT ordertimeout.create_order(%s, '[]')", (order_id + "-bad",))
        except psycopg.Error as err:
            print(f"bad input refused: {err.sqlstate} {err.diag.message_primary}")

        payment_id = order_id + "-pay"
        conn.execute("SELECT ordertimeout.begin_payment(%s, %s)", (order_id, payment_id))
        (outcome,) = conn.execute(
            "SELECT ordertimeout.confirm_payment(%s, %s, 19.90)", (order_id, payment_id)
        ).fetchone()
        print(f"payment: {outcome}")

        for from_status, to_status, cause in conn.execute(
            "SELECT coalesce(from_status, '-'), to_status, cause FROM ordertimeout.order_events(%s)",
            (order_id,),
        ):
            print(f"event: {from_status} -> {to_status} ({cause})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 examples/python/lifecycle.py ORDER_ID")
    main(sys.argv[1])
