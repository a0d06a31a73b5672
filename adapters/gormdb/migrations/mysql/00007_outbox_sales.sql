-- The transactional outbox of paid orders (SPEC §4), and the index the top products query
-- reads: order lines by order with the product, quantity and subtotal, so the join from
-- orders_by_status_paid_at (which carries the order id, InnoDB's primary key) reads indexes only.

-- +goose Up
CREATE TABLE outbox (
    id              varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    payload         mediumtext NOT NULL,
    status          varchar(16) NOT NULL,
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at datetime(6) NOT NULL,
    last_error      varchar(500) NOT NULL DEFAULT '',
    -- The claim holding the row: only its holder records the outcome of its send.
    claim_token     varchar(64) COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    created_at      datetime(6) NOT NULL,
    sent_at         datetime(6) NULL,
    -- The relay's claim: due PENDING rows, oldest first.
    KEY outbox_due (status, next_attempt_at, created_at),
    -- Operators' listing of one status, paged by id.
    KEY outbox_by_status (status, id),
    CONSTRAINT outbox_status CHECK (status IN ('PENDING', 'SENT', 'FAILED')),
    CONSTRAINT outbox_sent_at CHECK ((status = 'SENT') = (sent_at IS NOT NULL)),
    CONSTRAINT outbox_attempts_not_negative CHECK (attempts >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE INDEX order_items_sales ON order_items (order_id, product_id, quantity, subtotal);

-- +goose Down
DROP INDEX order_items_sales ON order_items;
DROP TABLE outbox;
