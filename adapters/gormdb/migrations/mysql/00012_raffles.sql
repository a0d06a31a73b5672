-- Raffles and their entries. The seed is the draw's secret, stored once at creation so that no
-- restart or second instance changes it; only its hash is shown until the draw. An entry is
-- UNIQUE per (raffle, user). Ids use a binary collation so keys are case-sensitive, as in
-- memory.

-- +goose Up
CREATE TABLE raffles (
    id            varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    name          varchar(200) NOT NULL,
    winners       int NOT NULL,
    closes_at     datetime(6) NOT NULL,
    product_id    varchar(36) COLLATE utf8mb4_bin NULL,
    seed          binary(32) NOT NULL,
    status        varchar(8) NOT NULL, -- OPEN, CLOSING (entries fixed, draw under way), DRAWN
    entries       int NOT NULL DEFAULT 0,
    cutoff_ticket char(64) COLLATE utf8mb4_bin NULL,
    drawn_at      datetime(6) NULL,
    created_at    datetime(6) NOT NULL,
    -- Serves the draw worker's search for OPEN raffles past closes_at.
    KEY raffles_by_status_closes_at (status, closes_at),
    -- Serves the purchase permission: the raffles of a product.
    KEY raffles_by_product (product_id),
    CONSTRAINT raffles_status CHECK (status IN ('OPEN', 'CLOSING', 'DRAWN')),
    CONSTRAINT raffles_winners CHECK (winners >= 1),
    CONSTRAINT raffles_drawn_at CHECK ((status = 'DRAWN') = (drawn_at IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE raffle_entries (
    raffle_id  varchar(36) COLLATE utf8mb4_bin NOT NULL,
    user_id    varchar(64) COLLATE utf8mb4_bin NOT NULL,
    entered_at datetime(6) NOT NULL,
    PRIMARY KEY (raffle_id, user_id),
    CONSTRAINT raffle_entries_raffle FOREIGN KEY (raffle_id) REFERENCES raffles (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE raffle_entries;
DROP TABLE raffles;
