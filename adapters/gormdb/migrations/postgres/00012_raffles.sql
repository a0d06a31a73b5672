-- Raffles and their entries. The seed is the draw's secret, stored once at creation so that no
-- restart or second instance changes it; only its hash is shown until the draw. An entry is
-- UNIQUE per (raffle, user). Ids compare byte-wise (COLLATE "C"), as in memory.

-- +goose Up
CREATE TABLE raffles (
    id            varchar(36) COLLATE "C" PRIMARY KEY,
    name          varchar(200) NOT NULL,
    winners       integer NOT NULL,
    closes_at     timestamptz(6) NOT NULL,
    product_id    varchar(36) COLLATE "C",
    seed          bytea NOT NULL,
    status        varchar(8) NOT NULL, -- OPEN, CLOSING (entries fixed, draw under way), DRAWN
    entries       integer NOT NULL DEFAULT 0,
    cutoff_ticket char(64) COLLATE "C",
    drawn_at      timestamptz(6),
    created_at    timestamptz(6) NOT NULL,
    CONSTRAINT raffles_status CHECK (status IN ('OPEN', 'CLOSING', 'DRAWN')),
    CONSTRAINT raffles_winners CHECK (winners >= 1),
    CONSTRAINT raffles_seed_size CHECK (octet_length(seed) = 32),
    CONSTRAINT raffles_drawn_at CHECK ((status = 'DRAWN') = (drawn_at IS NOT NULL))
);

-- Serves the draw worker's search for OPEN raffles past closes_at.
CREATE INDEX raffles_by_status_closes_at ON raffles (status, closes_at);
-- Serves the purchase permission: the raffles of a product.
CREATE INDEX raffles_by_product ON raffles (product_id);

CREATE TABLE raffle_entries (
    raffle_id  varchar(36) COLLATE "C" NOT NULL REFERENCES raffles (id) ON DELETE CASCADE,
    user_id    varchar(64) COLLATE "C" NOT NULL,
    entered_at timestamptz(6) NOT NULL,
    PRIMARY KEY (raffle_id, user_id)
);

-- +goose Down
DROP TABLE raffle_entries;
DROP TABLE raffles;
