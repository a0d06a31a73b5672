-- Products and stock, carts and orders (SPEC §4). Ids use a binary collation so keys are
-- case-sensitive and compare byte-wise, as on Postgres and in memory. CHECK constraints are the
-- last defence of what the domain validates: no negative price, stock, quantity or amount, and
-- order amounts that add up.

-- +goose Up
CREATE TABLE products (
    id         varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    name       varchar(200) NOT NULL,
    price      bigint NOT NULL,
    created_at datetime(6) NOT NULL,
    CONSTRAINT products_price_not_negative CHECK (price >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One row per product; version counts changes, for the optimistic deduction at payment.
CREATE TABLE stock (
    product_id varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    quantity   bigint NOT NULL,
    version    bigint NOT NULL DEFAULT 0,
    CONSTRAINT stock_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT stock_quantity_not_negative CHECK (quantity >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Every change of a stock row: type IN or OUT, the quantity before and after, and what caused
-- it (ref_type ORDER and the order's id for a payment).
CREATE TABLE stock_history (
    id              varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    product_id      varchar(36) COLLATE utf8mb4_bin NOT NULL,
    type            varchar(8) NOT NULL,
    before_quantity bigint NOT NULL,
    after_quantity  bigint NOT NULL,
    ref_type        varchar(32) NOT NULL,
    ref_id          varchar(64) COLLATE utf8mb4_bin NOT NULL,
    created_at      datetime(6) NOT NULL,
    KEY stock_history_by_product (product_id, created_at),
    KEY stock_history_by_ref (ref_type, ref_id),
    CONSTRAINT stock_history_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT stock_history_type CHECK (type IN ('IN', 'OUT')),
    CONSTRAINT stock_history_quantities_not_negative CHECK (before_quantity >= 0 AND after_quantity >= 0),
    CONSTRAINT stock_history_direction CHECK (
        (type = 'OUT' AND after_quantity < before_quantity) OR (type = 'IN' AND after_quantity > before_quantity))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One cart per user: the UNIQUE key makes concurrent first adds create one cart.
CREATE TABLE carts (
    id         varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id    varchar(64) COLLATE utf8mb4_bin NOT NULL,
    created_at datetime(6) NOT NULL,
    UNIQUE KEY carts_one_per_user (user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE cart_items (
    id         varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    cart_id    varchar(36) COLLATE utf8mb4_bin NOT NULL,
    product_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    quantity   int NOT NULL,
    added_at   datetime(6) NOT NULL,
    UNIQUE KEY cart_items_one_line_per_product (cart_id, product_id),
    CONSTRAINT cart_items_cart FOREIGN KEY (cart_id) REFERENCES carts (id) ON DELETE CASCADE,
    CONSTRAINT cart_items_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT cart_items_quantity_positive CHECK (quantity > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE orders (
    id              varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id         varchar(64) COLLATE utf8mb4_bin NOT NULL,
    coupon_id       varchar(36) COLLATE utf8mb4_bin NULL,
    subtotal_amount bigint NOT NULL,
    discount_amount bigint NOT NULL,
    total_amount    bigint NOT NULL,
    status          varchar(16) NOT NULL,
    created_at      datetime(6) NOT NULL,
    paid_at         datetime(6) NULL,
    KEY orders_by_user (user_id, created_at),
    -- Serves the top products: completed orders by payment time.
    KEY orders_by_status_paid_at (status, paid_at),
    CONSTRAINT orders_amounts CHECK (subtotal_amount >= 0 AND discount_amount >= 0
        AND discount_amount <= subtotal_amount AND total_amount = subtotal_amount - discount_amount),
    CONSTRAINT orders_status CHECK (status IN ('PENDING', 'COMPLETED')),
    CONSTRAINT orders_paid_when_completed CHECK ((status = 'COMPLETED') = (paid_at IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE order_items (
    order_id   varchar(36) COLLATE utf8mb4_bin NOT NULL,
    line       int NOT NULL,
    product_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    name       varchar(200) NOT NULL,
    quantity   int NOT NULL,
    unit_price bigint NOT NULL,
    subtotal   bigint NOT NULL,
    PRIMARY KEY (order_id, line),
    UNIQUE KEY order_items_one_line_per_product (order_id, product_id),
    KEY order_items_by_product (product_id),
    CONSTRAINT order_items_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE,
    CONSTRAINT order_items_product FOREIGN KEY (product_id) REFERENCES products (id),
    CONSTRAINT order_items_amounts CHECK (quantity > 0 AND unit_price >= 0 AND subtotal = unit_price * quantity)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE order_items;
DROP TABLE orders;
DROP TABLE cart_items;
DROP TABLE carts;
DROP TABLE stock_history;
DROP TABLE stock;
DROP TABLE products;
