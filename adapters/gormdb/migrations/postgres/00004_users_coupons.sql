-- Users' points with their ledger, and first-come coupons with the coupons users hold (SPEC §4).
-- Ids compare byte-wise (COLLATE "C"), as in memory. Amounts are bounded by commerce.MaxAmount
-- (2^53).

-- +goose Up
CREATE TABLE users (
    id         varchar(64) COLLATE "C" PRIMARY KEY,
    balance    bigint NOT NULL,
    created_at timestamptz(6) NOT NULL,
    updated_at timestamptz(6) NOT NULL,
    CONSTRAINT users_balance_in_range CHECK (balance >= 0 AND balance <= 9007199254740992)
);

-- Every change of a balance, written in the transaction that changes it: Σ amount == balance.
CREATE TABLE balance_ledger (
    id            varchar(36) COLLATE "C" PRIMARY KEY,
    user_id       varchar(64) COLLATE "C" NOT NULL REFERENCES users (id),
    kind          varchar(16) NOT NULL,
    amount        bigint NOT NULL,
    balance_after bigint NOT NULL,
    reference     varchar(300) NOT NULL,
    created_at    timestamptz(6) NOT NULL,
    CONSTRAINT balance_ledger_kind CHECK (kind IN ('OPENING', 'CHARGE', 'PAYMENT', 'REFUND')),
    CONSTRAINT balance_ledger_balance_after_in_range
        CHECK (balance_after >= 0 AND balance_after <= 9007199254740992)
);

-- Serves a user's ledger sum and history.
CREATE INDEX balance_ledger_by_user ON balance_ledger (user_id, created_at);

CREATE TABLE coupons (
    id              varchar(36) COLLATE "C" PRIMARY KEY,
    name            varchar(200) NOT NULL,
    discount_rate   integer NOT NULL,
    total_quantity  integer NOT NULL,
    issued_quantity integer NOT NULL DEFAULT 0,
    version         bigint NOT NULL DEFAULT 0,
    expires_at      timestamptz(6) NOT NULL,
    created_at      timestamptz(6) NOT NULL,
    CONSTRAINT coupons_discount_rate CHECK (discount_rate BETWEEN 1 AND 100),
    CONSTRAINT coupons_issued_within_total
        CHECK (issued_quantity >= 0 AND issued_quantity <= total_quantity)
);

CREATE TABLE user_coupons (
    id        varchar(36) COLLATE "C" PRIMARY KEY,
    user_id   varchar(64) COLLATE "C" NOT NULL,
    coupon_id varchar(36) COLLATE "C" NOT NULL REFERENCES coupons (id),
    status    varchar(16) NOT NULL,
    issued_at timestamptz(6) NOT NULL,
    used_at   timestamptz(6),
    -- One coupon per user: a second issue is ALREADY_ISSUED.
    CONSTRAINT user_coupons_one_per_user UNIQUE (user_id, coupon_id),
    CONSTRAINT user_coupons_status CHECK (status IN ('AVAILABLE', 'USED')),
    CONSTRAINT user_coupons_used_at CHECK ((status = 'USED') = (used_at IS NOT NULL))
);

-- Serves a coupon's count of holders.
CREATE INDEX user_coupons_by_coupon ON user_coupons (coupon_id);

-- +goose Down
DROP TABLE user_coupons;
DROP TABLE coupons;
DROP TABLE balance_ledger;
DROP TABLE users;
