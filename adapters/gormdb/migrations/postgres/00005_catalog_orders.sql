-- Products and stock, carts and orders (SPEC §4). Ids compare byte-wise (COLLATE "C"), as in
-- memory. CHECK constraints are the last defence of what the domain validates: no negative
-- price, stock, quantity or amount, and order amounts that add up.

-- +goose Up
CREATE TABLE products (
    id         varchar(36) COLLATE "C" PRIMARY KEY,
    name       varchar(200) NOT NULL,
    price      bigint NOT NULL,
    created_at timestamptz(6) NOT NULL,
    CONSTRAINT products_price_not_negative CHECK (price >= 0)
);

-- One row per product; version counts changes, for the optimistic deduction at payment.
CREATE TABLE stock (
    product_id varchar(36) COLLATE "C" PRIMARY KEY REFERENCES products (id),
    quantity   bigint NOT NULL,
    version    bigint NOT NULL DEFAULT 0,
    CONSTRAINT stock_quantity_not_negative CHECK (quantity >= 0)
);

-- Every change of a stock row: type IN or OUT, the quantity before and after, and what caused
-- it (ref_type ORDER and the order's id for a payment).
CREATE TABLE stock_history (
    id              varchar(36) COLLATE "C" PRIMARY KEY,
    product_id      varchar(36) COLLATE "C" NOT NULL REFERENCES products (id),
    type            varchar(8) NOT NULL,
    before_quantity bigint NOT NULL,
    after_quantity  bigint NOT NULL,
    ref_type        varchar(32) NOT NULL,
    ref_id          varchar(64) COLLATE "C" NOT NULL,
    created_at      timestamptz(6) NOT NULL,
    CONSTRAINT stock_history_type CHECK (type IN ('IN', 'OUT')),
    CONSTRAINT stock_history_quantities_not_negative CHECK (before_quantity >= 0 AND after_quantity >= 0),
    CONSTRAINT stock_history_direction CHECK (
        (type = 'OUT' AND after_quantity < before_quantity) OR (type = 'IN' AND after_quantity > before_quantity))
);
CREATE INDEX stock_history_by_product ON stock_history (product_id, created_at);
CREATE INDEX stock_history_by_ref ON stock_history (ref_type, ref_id);

-- One cart per user: the UNIQUE key makes concurrent first adds create one cart.
CREATE TABLE carts (
    id         varchar(36) COLLATE "C" PRIMARY KEY,
    user_id    varchar(64) COLLATE "C" NOT NULL,
    created_at timestamptz(6) NOT NULL,
    CONSTRAINT carts_one_per_user UNIQUE (user_id)
);

CREATE TABLE cart_items (
    id         varchar(36) COLLATE "C" PRIMARY KEY,
    cart_id    varchar(36) COLLATE "C" NOT NULL REFERENCES carts (id) ON DELETE CASCADE,
    product_id varchar(36) COLLATE "C" NOT NULL REFERENCES products (id),
    quantity   integer NOT NULL,
    added_at   timestamptz(6) NOT NULL,
    CONSTRAINT cart_items_one_line_per_product UNIQUE (cart_id, product_id),
    CONSTRAINT cart_items_quantity_positive CHECK (quantity > 0)
);

CREATE TABLE orders (
    id              varchar(36) COLLATE "C" PRIMARY KEY,
    user_id         varchar(64) COLLATE "C" NOT NULL,
    coupon_id       varchar(36) COLLATE "C",
    subtotal_amount bigint NOT NULL,
    discount_amount bigint NOT NULL,
    total_amount    bigint NOT NULL,
    status          varchar(16) NOT NULL,
    created_at      timestamptz(6) NOT NULL,
    paid_at         timestamptz(6),
    CONSTRAINT orders_amounts CHECK (subtotal_amount >= 0 AND discount_amount >= 0
        AND discount_amount <= subtotal_amount AND total_amount = subtotal_amount - discount_amount),
    CONSTRAINT orders_status CHECK (status IN ('PENDING', 'COMPLETED')),
    CONSTRAINT orders_paid_when_completed CHECK ((status = 'COMPLETED') = (paid_at IS NOT NULL))
);
CREATE INDEX orders_by_user ON orders (user_id, created_at);
-- Serves the top products: completed orders by payment time.
CREATE INDEX orders_by_status_paid_at ON orders (status, paid_at);

CREATE TABLE order_items (
    order_id   varchar(36) COLLATE "C" NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    line       integer NOT NULL,
    product_id varchar(36) COLLATE "C" NOT NULL REFERENCES products (id),
    name       varchar(200) NOT NULL,
    quantity   integer NOT NULL,
    unit_price bigint NOT NULL,
    subtotal   bigint NOT NULL,
    PRIMARY KEY (order_id, line),
    CONSTRAINT order_items_one_line_per_product UNIQUE (order_id, product_id),
    CONSTRAINT order_items_amounts CHECK (quantity > 0 AND unit_price >= 0 AND subtotal = unit_price * quantity)
);
CREATE INDEX order_items_by_product ON order_items (product_id);

-- +goose Down
DROP TABLE order_items;
DROP TABLE orders;
DROP TABLE cart_items;
DROP TABLE carts;
DROP TABLE stock_history;
DROP TABLE stock;
DROP TABLE products;
