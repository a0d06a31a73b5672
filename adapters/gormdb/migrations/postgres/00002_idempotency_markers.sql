-- Idempotency markers: a request's answer committed with the business write it answers.
-- Scope and key compare byte-wise (COLLATE "C"), as Redis compares its keys.

-- +goose Up
CREATE TABLE idempotency_markers (
    scope       varchar(255) COLLATE "C" NOT NULL,
    idem_key    varchar(255) COLLATE "C" NOT NULL,
    fingerprint varchar(64) NOT NULL,
    outcome     varchar(64) NOT NULL,
    body        bytea NOT NULL,
    created_at  timestamptz(6) NOT NULL,
    PRIMARY KEY (scope, idem_key)
);

-- Serves Prune: the oldest markers first.
CREATE INDEX idempotency_markers_by_created_at ON idempotency_markers (created_at);

-- +goose Down
DROP TABLE idempotency_markers;
