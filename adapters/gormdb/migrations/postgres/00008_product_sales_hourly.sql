-- The top products' rollup (SPEC §4): units and revenue of COMPLETED orders per product and UTC
-- hour of payment, kept by MarkPaid in the payment's own transaction, so the 3-day ranking sums
-- a few rows per product and hour instead of every order line. No foreign key to products: the
-- rows derive from order_items, which has one, and a key check would lock products on every
-- payment.

-- +goose Up
CREATE TABLE product_sales_hourly (
    product_id varchar(36) COLLATE "C" NOT NULL,
    hour_start timestamptz(6) NOT NULL,
    units      bigint NOT NULL,
    revenue    bigint NOT NULL,
    PRIMARY KEY (product_id, hour_start),
    CONSTRAINT product_sales_hourly_amounts CHECK (units > 0 AND revenue >= 0)
);
-- The ranking's window scan, index-only.
CREATE INDEX product_sales_hourly_by_hour ON product_sales_hourly (hour_start) INCLUDE (product_id, units, revenue);

-- An upgraded database starts with the rollup of the orders it already holds.
INSERT INTO product_sales_hourly (product_id, hour_start, units, revenue)
SELECT i.product_id, date_trunc('hour', o.paid_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', SUM(i.quantity), SUM(i.subtotal)
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'COMPLETED'
GROUP BY 1, 2;

-- +goose Down
DROP TABLE product_sales_hourly;
