-- The top products' rollup (SPEC §4): units and revenue of COMPLETED orders per product and UTC
-- hour of payment (the connection's time zone is UTC), kept by MarkPaid in the payment's own
-- transaction, so the 3-day ranking sums a few rows per product and hour instead of every order
-- line. No foreign key to products: the rows derive from order_items, which has one, and a key
-- check would lock products on every payment.

-- +goose Up
CREATE TABLE product_sales_hourly (
    product_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    hour_start datetime(6) NOT NULL,
    units      bigint NOT NULL,
    revenue    bigint NOT NULL,
    PRIMARY KEY (product_id, hour_start),
    -- The ranking's window scan, index-only.
    KEY product_sales_hourly_by_hour (hour_start, product_id, units, revenue),
    CONSTRAINT product_sales_hourly_amounts CHECK (units > 0 AND revenue >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- An upgraded database starts with the rollup of the orders it already holds.
INSERT INTO product_sales_hourly (product_id, hour_start, units, revenue)
SELECT i.product_id, CAST(DATE_FORMAT(o.paid_at, '%Y-%m-%d %H:00:00') AS DATETIME(6)), SUM(i.quantity), SUM(i.subtotal)
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'COMPLETED'
GROUP BY 1, 2;

-- +goose Down
DROP TABLE product_sales_hourly;
