// The order lifecycle through ordertimeout's SQL API with node-postgres.
//
//   (cd examples/node && npm install)
//   DATABASE_URL=postgres://... node examples/node/lifecycle.js ORDER_ID
'use strict';

const { Client } = require('pg');

async function main(orderId) {
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query("SELECT ordertimeout.put_stock('SKU-EXAMPLE', 1000)");

    const created = await client.query(
      "SELECT status, created FROM ordertimeout.create_order($1, $2, '15 minutes', $3)",
      [orderId, JSON.stringify([{ sku: 'SKU-EXAMPLE', qty: 2 }]), JSON.stringify({ amount: 19.9 })],
    );
    console.log(`created ${orderId}: ${created.rows[0].status} (new: ${created.rows[0].created})`);

    // Errors carry their own SQLSTATE: class OT, listed in the README.
    try {
      await client.query("SELECT ordertimeout.create_order($1, '[]')", [`${orderId}-bad`]);
    } catch (err) {
      console.log(`bad input refused: ${err.code} ${err.message}`);
    }

    const paymentId = `${orderId}-pay`;
    await client.query('SELECT ordertimeout.begin_payment($1, $2)', [orderId, paymentId]);
    const paid = await client.query('SELECT ordertimeout.confirm_payment($1, $2, 19.90) AS outcome', [orderId, paymentId]);
    console.log(`payment: ${paid.rows[0].outcome}`);

    const events = await client.query(
      "SELECT coalesce(from_status, '-') AS from_status, to_status, cause FROM ordertimeout.order_events($1)",
      [orderId],
    );
    for (const e of events.rows) {
      console.log(`event: ${e.from_status} -> ${e.to_status} (${e.cause})`);
    }
  } finally {
    await client.end();
  }
}

if (process.argv.length !== 3) {
  console.error('usage: node examples/node/lifecycle.js ORDER_ID');
  process.exit(1);
}
main(process.argv[2]).catch((err) => {
  console.error('example:', err.message);
  process.exit(1);
});
