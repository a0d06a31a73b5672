-- Users' points with their ledger, and first-come coupons with the coupons users hold (SPEC §4).
-- Ids use a binary collation so keys are case-sensitive, as on Postgres and in memory. Amounts
-- are bounded by commerce.MaxAmount (2^53).

-- +goose Up
CREATE TABLE users (
    id         varchar(64) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    balance    bigint NOT NULL,
    created_at datetime(6) NOT NULL,
    updated_at datetime(6) NOT NULL,
    CONSTRAINT users_balance_in_range CHECK (balance >= 0 AND balance <= 9007199254740992)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Every change of a balance, written in the transaction that changes it: Σ amount == balance.
CREATE TABLE balance_ledger (
    id            varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id       varchar(64) COLLATE utf8mb4_bin NOT NULL,
    kind          varchar(16) NOT NULL,
    amount        bigint NOT NULL,
    balance_after bigint NOT NULL,
    reference     varchar(300) NOT NULL,
    created_at    datetime(6) NOT NULL,
    -- Serves a user's ledger sum and history.
    KEY balance_ledger_by_user (user_id, created_at),
    CONSTRAINT balance_ledger_user FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT balance_ledger_kind CHECK (kind IN ('OPENING', 'CHARGE', 'PAYMENT', 'REFUND')),
    CONSTRAINT balance_ledger_balance_after_in_range
        CHECK (balance_after >= 0 AND balance_after <= 9007199254740992)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE coupons (
    id              varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    name            varchar(200) NOT NULL,
    discount_rate   int NOT NULL,
    total_quantity  int NOT NULL,
    issued_quantity int NOT NULL DEFAULT 0,
    version         bigint NOT NULL DEFAULT 0,
    expires_at      datetime(6) NOT NULL,
    created_at      datetime(6) NOT NULL,
    CONSTRAINT coupons_discount_rate CHECK (discount_rate BETWEEN 1 AND 100),
    CONSTRAINT coupons_issued_within_total
        CHECK (issued_quantity >= 0 AND issued_quantity <= total_quantity)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE user_coupons (
    id        varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    user_id   varchar(64) COLLATE utf8mb4_bin NOT NULL,
    coupon_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    status    varchar(16) NOT NULL,
    issued_at datetime(6) NOT NULL,
    used_at   datetime(6) NULL,
    -- One coupon per user: a second issue is ALREADY_ISSUED.
    UNIQUE KEY user_coupons_one_per_user (user_id, coupon_id),
    -- Serves a coupon's count of holders.
    KEY user_coupons_by_coupon (coupon_id),
    CONSTRAINT user_coupons_coupon FOREIGN KEY (coupon_id) REFERENCES coupons (id),
    CONSTRAINT user_coupons_status CHECK (status IN ('AVAILABLE', 'USED')),
    CONSTRAINT user_coupons_used_at CHECK ((status = 'USED') = (used_at IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE user_coupons;
DROP TABLE coupons;
DROP TABLE balance_ledger;
DROP TABLE users;
