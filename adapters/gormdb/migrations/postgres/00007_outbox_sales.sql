-- The transactional outbox of paid orders (SPEC §4), and the indexes the top products query
-- reads: completed orders by payment time with their ids, and order lines by order with the
-- product, quantity and subtotal, so the aggregate runs on indexes alone.

-- +goose Up
CREATE TABLE outbox (
    id              varchar(36) COLLATE "C" PRIMARY KEY,
    payload         text NOT NULL,
    status          varchar(16) NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz(6) NOT NULL,
    last_error      varchar(500) NOT NULL DEFAULT '',
    -- The claim holding the row: only its holder records the outcome of its send.
    claim_token     varchar(64) COLLATE "C" NOT NULL DEFAULT '',
    created_at      timestamptz(6) NOT NULL,
    sent_at         timestamptz(6),
    CONSTRAINT outbox_status CHECK (status IN ('PENDING', 'SENT', 'FAILED')),
    CONSTRAINT outbox_sent_at CHECK ((status = 'SENT') = (sent_at IS NOT NULL)),
    CONSTRAINT outbox_attempts_not_negative CHECK (attempts >= 0)
);
-- The relay's claim: due PENDING rows, oldest first.
CREATE INDEX outbox_due ON outbox (status, next_attempt_at, created_at);
-- Operators' listing of one status, paged by id.
CREATE INDEX outbox_by_status ON outbox (status, id);

-- Replaces orders_by_status_paid_at with one that also carries the id, for an index-only scan.
DROP INDEX orders_by_status_paid_at;
CREATE INDEX orders_by_status_paid_at ON orders (status, paid_at) INCLUDE (id);
CREATE INDEX order_items_sales ON order_items (order_id) INCLUDE (product_id, quantity, subtotal);

-- +goose Down
DROP INDEX order_items_sales;
DROP INDEX orders_by_status_paid_at;
CREATE INDEX orders_by_status_paid_at ON orders (status, paid_at);
DROP TABLE outbox;
